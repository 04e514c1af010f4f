"""A damaged log on a real node (docs/storage.md, "Repair from the quorum" and "Damaged disk").

A flipped bit in a committed batch of a stopped node is repaired from the quorum when it starts
again, without an operator: the node keeps the damaged bytes, the core fetches the batch from its
leader and overwrites the slot in place. Afterwards the node's metrics show the repair, every
acknowledged create is in its image and every node's log is byte-identical batch by batch. A zeroed
range over several batches of one epoch is one damaged slot, repaired from its front batch by
batch the same way; across an epoch change the slot spans both epochs and the node takes its
leader's batches into it, holding what follows to the leader's log (a diverging tail is truncated).

The high-watermark checkpoint is written at most once a second, so a follower killed right after
a burst of creates holds acknowledged batches above it: the epoch-change case damages those.
"""

from __future__ import annotations

import json
import signal
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from raftmeta.client import SyncControllerClient
from raftmeta.jobs.consistency import facts_to_checks, local_facts
from raftmeta.local import quorum as local_quorum
from raftmeta.records import codec
from raftmeta.storage.datadir import log_dir
from raftmeta.storage.high_watermark import read_high_watermark
from raftmeta.v1 import errors_pb2
from tests.integration.test_node import create, leader_of, wait_until

pytestmark = pytest.mark.integration


@dataclass(frozen=True)
class OnDisk:
    path: Path
    position: int
    base_offset: int
    next_offset: int
    data: bytes


def batches_on_disk(data_dir: Path) -> list[OnDisk]:
    out: list[OnDisk] = []
    for path in sorted(log_dir(data_dir).glob("*.log")):
        position = 0
        for batch in codec.iter_batches(path.read_bytes()):
            out.append(OnDisk(path, position, batch.base_offset, batch.next_offset, batch.data))
            position += len(batch.data)
    return out


def kill(quorum: local_quorum.LocalQuorum, node_id: int) -> None:
    pid = local_quorum.signal_node(quorum, node_id, signal.SIGKILL)
    wait_until(lambda: not local_quorum.alive(pid), timeout_s=10, what=f"node {node_id} exiting")


def caught_up(client: SyncControllerClient, node_id: int, target: int) -> bool:
    return any(v.replica_id == node_id and v.log_end_offset >= target for v in client.describe_quorum().voters)


def restart_and_catch_up(
    quorum: local_quorum.LocalQuorum, client: SyncControllerClient, node_id: int, topic: str
) -> None:
    """Restart ``node_id`` and wait until it holds a record written after the restart: the
    leader's view of its log end (which still says where it was before it went down) reaches
    that only through the restarted node's fetches."""
    local_quorum.restart(quorum, node_id)
    assert create(client, topic, partitions=1).error_code == errors_pb2.NONE
    target = client.describe_quorum().high_watermark
    wait_until(lambda: caught_up(client, node_id, target), what=f"node {node_id} catching up to {target}")


def kill_with_batches_above_the_checkpoint(
    quorum: local_quorum.LocalQuorum, client: SyncControllerClient, node_id: int
) -> tuple[int, list[OnDisk]]:
    """Kill follower ``node_id`` right after a burst of creates; return its checkpoint and batches.

    A second after the last checkpoint, the next commit writes one; the creates acknowledged in
    the following second are not checkpointed before the kill. Tried again (after letting the
    node catch up) in the unlikely case that the checkpoint still covers the whole burst."""
    data_dir = Path(quorum.node(node_id).data_dir)
    for attempt in range(3):
        time.sleep(1.2)
        for i in range(12):
            result = create(client, f"burst-{attempt}-{i}", partitions=1)
            assert result.error_code == errors_pb2.NONE, result.error_message
        kill(quorum, node_id)
        checkpoint = read_high_watermark(data_dir)
        batches = batches_on_disk(data_dir)
        if sum(1 for b in batches if b.base_offset >= checkpoint) >= 3:
            return checkpoint, batches
        restart_and_catch_up(quorum, client, node_id, f"retry-{attempt}")
    raise AssertionError("the follower's checkpoint covered every burst: cannot damage a batch above it")


def stop(quorum: local_quorum.LocalQuorum, node_id: int) -> None:
    """SIGTERM: a clean stop (the active segment's index is written, so the next open trusts it
    and the damage shows only when the node reads its log back)."""
    pid = local_quorum.signal_node(quorum, node_id, signal.SIGTERM)
    wait_until(lambda: not local_quorum.alive(pid), timeout_s=30, what=f"node {node_id} exiting")


def metric(node: local_quorum.NodeProcess, name: str) -> float:
    """One unlabelled sample of the node's Prometheus endpoint."""
    assert node.metrics_address is not None
    with urllib.request.urlopen(f"http://{node.metrics_address}/metrics", timeout=5) as answer:
        text = answer.read().decode()
    (value,) = [line.split()[1] for line in text.splitlines() if line.startswith(f"{name} ")]
    return float(value)


def node_events(node: local_quorum.NodeProcess) -> list[dict[str, Any]]:
    return [json.loads(line) for line in Path(node.log).read_text().splitlines() if line.startswith("{")]


def flip_committed(data_dir: Path, index_from_end: int) -> tuple[OnDisk, bytes]:
    """Flip a bit in a record of a committed batch (below the node's checkpoint) with intact
    batches on both sides; return the batch as it was and the damaged file."""
    checkpoint = read_high_watermark(data_dir)
    committed = [b for b in batches_on_disk(data_dir) if b.next_offset <= checkpoint and b.base_offset > 0]
    victim = committed[-index_from_end]
    damaged = bytearray(victim.path.read_bytes())
    damaged[victim.position + len(victim.data) - 7] ^= 0x08  # a record byte: covered by the CRC
    victim.path.write_bytes(damaged)
    return victim, bytes(damaged)


def repaired_from_the_quorum(
    quorum: local_quorum.LocalQuorum, client: SyncControllerClient, node_id: int, victim: OnDisk, topic: str
) -> None:
    """Restart ``node_id`` and check that it repaired ``victim`` with no operator: its metrics, its
    log events, the slot's bytes on disk."""
    node = quorum.node(node_id)
    restart_and_catch_up(quorum, client, node_id, topic)
    wait_until(lambda: metric(node, "raftmeta_raft_repairs_total") >= 1, what=f"node {node_id} repairing")
    assert metric(node, "raftmeta_raft_damaged_batches") == 0
    events = node_events(node)
    kept = [e for e in events if e["event"] == "damaged batch kept for repair from the quorum"]
    assert [(e["offset"], e["position"]) for e in kept[-1:]] == [(victim.base_offset, victim.position)]
    assert any(e["event"] == "repaired a damaged batch from the quorum" and e["offset"] == victim.base_offset
               for e in events)  # fmt: skip
    data = victim.path.read_bytes()
    assert data[victim.position : victim.position + len(victim.data)] == victim.data, "the intact copy, in place"


def all_acknowledged_and_identical(quorum: local_quorum.LocalQuorum, acknowledged: list[str]) -> None:
    """Every acknowledged create is in every node's image; then, with the quorum down, every
    node's log is the same batch for batch (the verify job's checks, single-process) and byte
    for byte."""
    for node in quorum.nodes:
        with SyncControllerClient(node.address) as direct:
            names = {t.name for t in direct.describe_topics(acknowledged, stale=True, exclude_partitions=True).topics}
        assert set(acknowledged) <= names, (node.id, sorted(set(acknowledged) - names))
    local_quorum.down(quorum)
    failed = [f"{c.name}: {c.detail}" for c in facts_to_checks(local_facts(quorum.data_dir)) if not c.passed]
    assert failed == [], failed
    logs = [batches_on_disk(Path(node.data_dir)) for node in quorum.nodes]
    common = min(len(log) for log in logs)
    assert common > 0
    for log in logs[1:]:
        assert [(b.base_offset, b.data) for b in log[:common]] == [(b.base_offset, b.data) for b in logs[0][:common]]


def create_checkpointed(quorum: local_quorum.LocalQuorum, client: SyncControllerClient) -> list[str]:
    """Create topics until every node's high-watermark checkpoint covers the first eight: those
    batches are committed as far as each node's disk knows. Returns every topic acknowledged."""
    acknowledged = [f"t{i}" for i in range(8)]
    for name in acknowledged:
        assert create(client, name, partitions=12).error_code == errors_pb2.NONE
    target = client.describe_quorum().high_watermark

    def checkpointed() -> bool:
        # The checkpoint is written at most once a second, by a commit: one more create each time.
        acknowledged.append(f"filler-{len(acknowledged)}")
        assert create(client, acknowledged[-1], partitions=1).error_code == errors_pb2.NONE
        time.sleep(0.2)
        return all(read_high_watermark(Path(n.data_dir)) >= target for n in quorum.nodes)

    wait_until(checkpointed, timeout_s=60, what=f"every node's checkpoint reaching {target}")
    return acknowledged


def test_a_flipped_bit_in_a_followers_committed_batch_is_repaired_from_the_quorum(
    quorum: local_quorum.LocalQuorum, client: SyncControllerClient
) -> None:
    acknowledged = create_checkpointed(quorum, client)
    follower = next(n for n in quorum.nodes if n.id != leader_of(client))
    stop(quorum, follower.id)
    victim, _ = flip_committed(Path(follower.data_dir), 3)

    repaired_from_the_quorum(quorum, client, follower.id, victim, "after-repair")
    acknowledged.append("after-repair")
    all_acknowledged_and_identical(quorum, acknowledged)


def test_different_batches_damaged_on_two_nodes_one_at_a_time_are_both_repaired(
    quorum: local_quorum.LocalQuorum, client: SyncControllerClient
) -> None:
    """A follower, then the leader: killed (SIGKILL: its active segment is rescanned on start),
    a different committed batch flipped on each, restarted one at a time so the quorum holds."""
    acknowledged = create_checkpointed(quorum, client)
    leader = leader_of(client)
    follower = next(n.id for n in quorum.nodes if n.id != leader)
    for node_id, index_from_end, topic in ((follower, 2, "after-first"), (leader, 5, "after-second")):
        kill(quorum, node_id)
        victim, _ = flip_committed(Path(quorum.node(node_id).data_dir), index_from_end)
        repaired_from_the_quorum(quorum, client, node_id, victim, topic)
        acknowledged.append(topic)
    all_acknowledged_and_identical(quorum, acknowledged)


def zero_range(first: OnDisk, last: OnDisk) -> bytes:
    """Zeroes from ``first``'s first byte to ``last``'s last (one file): no header frames the
    batches inside. Returns the damaged file."""
    damaged = bytearray(first.path.read_bytes())
    damaged[first.position : last.position + len(last.data)] = bytes(last.position + len(last.data) - first.position)
    first.path.write_bytes(damaged)
    return bytes(damaged)


def test_a_zeroed_range_over_several_batches_of_one_epoch_is_repaired_from_the_quorum(
    quorum: local_quorum.LocalQuorum, client: SyncControllerClient
) -> None:
    """Three committed batches of a stopped follower zeroed at once: the batches around the range
    are of one epoch, so the node keeps the range as one slot and repairs it from its leader's
    batches, front first, with no operator."""
    acknowledged = create_checkpointed(quorum, client)
    follower = next(n for n in quorum.nodes if n.id != leader_of(client))
    stop(quorum, follower.id)
    data_dir = Path(follower.data_dir)
    checkpoint = read_high_watermark(data_dir)
    batches = batches_on_disk(data_dir)
    committed = [b for b in batches if b.next_offset <= checkpoint and b.base_offset > 0]
    first, last = committed[-5], committed[-3]
    run = batches[batches.index(first) - 1 : batches.index(last) + 2]  # with its intact neighbours
    assert first.path == last.path and len({codec.decode_header(b.data, 0).epoch for b in run}) == 1
    zero_range(first, last)

    node = quorum.node(follower.id)
    restart_and_catch_up(quorum, client, follower.id, "after-range-repair")
    wait_until(lambda: metric(node, "raftmeta_raft_repairs_total") >= 3, what=f"node {follower.id} repairing")
    assert metric(node, "raftmeta_raft_damaged_batches") == 0
    events = node_events(node)
    (kept,) = [e for e in events if e["event"] == "damaged batch kept for repair from the quorum"]
    assert (kept["offset"], kept["end_offset"], kept["position"]) == (
        first.base_offset,
        last.next_offset,
        first.position,
    )
    inside = batches[batches.index(first) : batches.index(last) + 1]
    repaired = [e["offset"] for e in events if e["event"] == "repaired a damaged batch from the quorum"]
    assert repaired == [b.base_offset for b in inside], "front first, one batch at a time"
    data = first.path.read_bytes()
    assert data[first.position : last.position + len(last.data)] == b"".join(b.data for b in inside)
    acknowledged.append("after-range-repair")
    all_acknowledged_and_identical(quorum, acknowledged)


def test_damage_across_an_epoch_change_is_repaired_from_the_leader_and_what_follows_is_held_to_its_log(
    quorum: local_quorum.LocalQuorum, client: SyncControllerClient
) -> None:
    """Two batches zeroed, and the batches after them rewritten into a later epoch (the epoch
    field is outside the CRC: they stay intact), so an epoch changes somewhere in the range, at an
    offset no byte says. The node keeps the range as one slot spanning both epochs and starts with
    no operator: it takes its leader's batches into the slot, front first, and the batches after
    it, of an epoch the leader never had, are truncated as a diverging tail and refetched."""
    create(client, "before")
    follower = next(n for n in quorum.nodes if n.id != leader_of(client))
    data_dir = Path(follower.data_dir)
    checkpoint, batches = kill_with_batches_above_the_checkpoint(quorum, client, follower.id)
    victim = next(b for b in batches if b.base_offset >= checkpoint)
    second = batches[batches.index(victim) + 1]
    after = batches[batches.index(victim) + 2 :]
    assert after, "intact batches follow the damaged ones"
    epoch = codec.decode_header(victim.data, 0).epoch
    zero_range(victim, second)
    for path in sorted({b.path for b in after}):
        data = bytearray(path.read_bytes())
        for b in (b for b in after if b.path == path):
            later = int.from_bytes(data[b.position + 12 : b.position + 16], "big") + 1
            data[b.position + 12 : b.position + 16] = later.to_bytes(4, "big")
        path.write_bytes(data)

    node = quorum.node(follower.id)
    restart_and_catch_up(quorum, client, follower.id, "after-repair")
    wait_until(lambda: metric(node, "raftmeta_raft_damaged_batches") == 0, what=f"node {follower.id} repairing")
    assert metric(node, "raftmeta_raft_repairs_total") == 2
    events = node_events(node)
    (kept,) = [e for e in events if e["event"] == "damaged batch kept for repair from the quorum"]
    assert (kept["offset"], kept["end_offset"], kept["epoch"]) == (victim.base_offset, second.next_offset, epoch)
    assert kept["max_epoch"] > epoch, "a slot across an epoch change"
    repaired = [e["offset"] for e in events if e["event"] == "repaired a damaged batch from the quorum"]
    assert repaired == [victim.base_offset, second.base_offset], "front first, one batch at a time"
    local_quorum.down(quorum)
    restored = batches_on_disk(data_dir)
    assert [b.data for b in restored[: len(batches)]] == [b.data for b in batches], (
        "the slot repaired in place and the tail of the epoch the leader never had refetched, byte for byte"
    )
