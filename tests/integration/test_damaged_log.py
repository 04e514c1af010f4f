"""A damaged log on a real node (docs/storage.md, "Damaged disk").

The high-watermark checkpoint is written at most once a second, so a follower killed right after
a burst of creates holds acknowledged batches above it. One flipped byte in the first of them,
with intact batches after it, is corruption in the middle of the log, not a torn tail: the node
refuses to start, says where and how much is behind the damage, and keeps every byte; after
``raftmeta log repair`` it starts, refetches the dropped batches from the leader and rejoins.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from raftmeta import local_quorum
from raftmeta.client import SyncControllerClient
from raftmeta.records import codec
from raftmeta.storage.datadir import log_dir
from raftmeta.storage.high_watermark import read_high_watermark
from raftmeta.v1 import errors_pb2
from tests.integration.test_node import create, leader_of, wait_until

pytestmark = pytest.mark.integration

REFUSAL = "refusing to start: corruption in the middle of the log, intact batches follow it"


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


def error_events(stderr: str) -> list[dict[str, Any]]:
    out = []
    for line in stderr.splitlines():
        if line.startswith("{"):
            event = json.loads(line)
            if event.get("level") == "error":
                out.append(event)
    return out


def test_mid_log_corruption_is_refused_then_log_repair_lets_the_node_rejoin(
    quorum: local_quorum.LocalQuorum, client: SyncControllerClient
) -> None:
    create(client, "before")
    follower = next(n for n in quorum.nodes if n.id != leader_of(client))
    data_dir = Path(follower.data_dir)
    checkpoint, batches = kill_with_batches_above_the_checkpoint(quorum, client, follower.id)
    victim = next(b for b in batches if b.base_offset >= checkpoint)
    after = batches[batches.index(victim) + 1 :]
    assert after, "intact batches follow the damaged one"
    damaged = bytearray(victim.path.read_bytes())
    damaged[victim.position + codec.HEADER_SIZE + 6] ^= 0x20  # a record byte: covered by the CRC
    victim.path.write_bytes(damaged)

    # The node refuses to start, at ERROR, naming the segment, byte, offset and what follows.
    refused = subprocess.run(follower.argv, capture_output=True, text=True, timeout=60, check=False)
    assert refused.returncode == 1, refused.stderr[-3000:]
    (event,) = [e for e in error_events(refused.stderr) if e["event"] == REFUSAL]
    assert event["file"] == str(victim.path)
    assert (event["position"], event["offset"]) == (victim.position, victim.base_offset)
    assert event["intact_batches_after"] == len(after)
    assert (event["intact_first_offset"], event["intact_last_offset"]) == (
        after[0].base_offset,
        after[-1].next_offset - 1,
    )
    assert event["high_watermark"] == checkpoint
    command = f"raftmeta log repair --data-dir {data_dir} --truncate-at {victim.base_offset}"
    assert event["repair_command"] == command
    assert f"corrupt log data at byte {victim.position} (offset {victim.base_offset})" in refused.stderr
    assert f"{len(after)} intact batch" in refused.stderr and command in refused.stderr
    assert victim.path.read_bytes() == bytes(damaged), "the refusal kept every byte, the intact batches too"

    # The operator accepts the truncation; the node then starts and refetches from the leader.
    repaired = subprocess.run(
        [sys.executable, "-m", "raftmeta", "log", "repair", "--data-dir", str(data_dir),
         "--truncate-at", str(victim.base_offset), "--yes", "--output", "json"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert repaired.returncode == 0, repaired.stderr
    plan = json.loads(repaired.stdout)
    assert plan["applied"] is True and plan["drop"]["batches"] == len(after)
    assert victim.path.stat().st_size == victim.position
    restart_and_catch_up(quorum, client, follower.id, "after-repair")
    local_quorum.down(quorum)
    restored = batches_on_disk(data_dir)
    assert [b.data for b in restored[: len(batches)]] == [b.data for b in batches], (
        "the follower refetched the dropped batches byte for byte"
    )
