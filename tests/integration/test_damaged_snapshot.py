"""A real follower whose newest snapshot is damaged and whose log no longer reaches back to an
older snapshot or to offset 0 (docs/storage.md, "A damaged snapshot with no fallback"; issue 45).

No file of the node holds the state below its log. The node starts all the same, with no
operator: the damaged snapshot is set aside as ``.corrupt`` (kept, never deleted), the node
applies nothing and votes in no election until it has installed its leader's snapshot (the
existing FetchSnapshot path), keeps its own intact log above it, then catches up: every
acknowledged create in its image, every node's log identical.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from raftmeta.client import RetryPolicy, SyncControllerClient
from raftmeta.local import quorum as local_quorum
from raftmeta.server.log_events import VOTE_RECORDED_EVENT
from raftmeta.storage.datadir import log_dir
from raftmeta.storage.snapshot import parse_snapshot_name
from raftmeta.v1 import errors_pb2
from tests.integration.test_damaged_log import all_acknowledged_and_identical, stop
from tests.integration.test_node import create, leader_of, wait_until
from tests.integration.test_snapshots import (
    FIRST_SEGMENT,
    SNAPSHOT_NODE_ARGS,
    caught_up,
    segment_files,
    snapshot_files,
    start,
)
from tests.integration.test_snapshots import stop as stop_quorum

pytestmark = pytest.mark.integration

SET_ASIDE = "damaged snapshot set aside: no fallback, fetching the leader's snapshot"
INSTALLED = "installed snapshot from the leader"


@pytest.fixture
def snapshotting(tmp_path: Path) -> Iterator[local_quorum.LocalQuorum]:
    """A quorum that snapshots every 25 records and deletes 1 KiB segments below its snapshots."""
    started = start(tmp_path / "q", SNAPSHOT_NODE_ARGS)
    try:
        yield started
    finally:
        stop_quorum(tmp_path / "q")


def events_from_the_set_aside(node: local_quorum.NodeProcess) -> list[dict[str, Any]]:
    """The node's JSON log events from its start that set the damaged snapshot aside on."""
    events = [json.loads(line) for line in Path(node.log).read_text().splitlines() if line.startswith("{")]
    starts = [i for i, e in enumerate(events) if e.get("event") == SET_ASIDE]
    return events[starts[-1] :] if starts else []


def test_a_damaged_snapshot_with_no_fallback_is_set_aside_and_replaced_by_the_leaders(
    snapshotting: local_quorum.LocalQuorum,
) -> None:
    quorum = snapshotting
    acknowledged: list[str] = []
    with SyncControllerClient(quorum.bootstrap_server, retry=RetryPolicy(deadline_s=20)) as client:
        follower = next(n for n in quorum.nodes if n.id != leader_of(client))

        def snapshotted_past_offset_0() -> bool:
            acknowledged.append(f"t{len(acknowledged)}")
            assert create(client, acknowledged[-1]).error_code == errors_pb2.NONE
            return snapshot_files(follower) != [] and FIRST_SEGMENT not in segment_files(follower)

        wait_until(snapshotted_past_offset_0, timeout_s=120, what=f"node {follower.id} deleting its first segment")
        stop(quorum, follower.id)
        data_dir = Path(follower.data_dir)
        newest = sorted(log_dir(data_dir).glob("*.checkpoint"))[-1]
        first_base = int(min(segment_files(follower)).removesuffix(".log"))
        older = [parse_snapshot_name(p.name) for p in log_dir(data_dir).glob("*.checkpoint") if p != newest]
        assert all(s is not None and s.offset < first_base for s in older), "no older snapshot the log reaches"
        damaged = bytearray(newest.read_bytes())
        damaged[len(damaged) // 2] ^= 0x10  # a flipped bit inside its records
        newest.write_bytes(damaged)

        local_quorum.restart(quorum, follower.id)
        for i in range(3):
            acknowledged.append(f"after-{i}")
            assert create(client, acknowledged[-1]).error_code == errors_pb2.NONE
        wait_until(lambda: caught_up(client, follower.id), timeout_s=60, what=f"node {follower.id} catching up")
        wait_until(
            lambda: any(e["event"] == INSTALLED for e in events_from_the_set_aside(follower)),
            timeout_s=60,
            what=f"node {follower.id} installing the leader's snapshot",
        )

    events = events_from_the_set_aside(follower)
    assert events[0]["file"] == str(newest)
    assert [e["event"] for e in events].count(SET_ASIDE) == 1
    kept = newest.with_name(newest.name + ".corrupt")
    assert kept.read_bytes() == bytes(damaged), "the damaged snapshot is kept, never deleted"
    names = [e["event"] for e in events]
    installed_at = names.index(INSTALLED)
    assert VOTE_RECORDED_EVENT not in names[:installed_at], "no vote before the state was back"
    all_acknowledged_and_identical(quorum, acknowledged)


STOPPED = "stopping: no leader can be elected to send the state below the log"


def test_every_voters_snapshot_damaged_with_no_fallback_stops_every_node_loudly(
    snapshotting: local_quorum.LocalQuorum,
) -> None:
    """Every voter's newest snapshot gets a flipped bit while its log no longer reaches an older one:
    the state below the logs is on no voter, and none can be elected to send it (a node without it
    grants no vote). Each node, told so by the others, logs why and exits with code 1, its damaged
    snapshot kept and its log unchanged -- it does not wait for ever."""
    quorum = snapshotting
    acknowledged: list[str] = []
    with SyncControllerClient(quorum.bootstrap_server, retry=RetryPolicy(deadline_s=20)) as client:

        def every_node_snapshotted_past_offset_0() -> bool:
            acknowledged.append(f"t{len(acknowledged)}")
            assert create(client, acknowledged[-1]).error_code == errors_pb2.NONE
            return all(snapshot_files(n) != [] and FIRST_SEGMENT not in segment_files(n) for n in quorum.nodes)

        wait_until(every_node_snapshotted_past_offset_0, timeout_s=120, what="every node deleting its first segment")
    newest: dict[int, Path] = {}
    ends: dict[int, int] = {}
    segments: dict[int, dict[str, bytes]] = {}
    for node in quorum.nodes:
        stop(quorum, node.id)
    for node in quorum.nodes:
        directory = log_dir(Path(node.data_dir))
        newest[node.id] = sorted(directory.glob("*.checkpoint"))[-1]
        first_base = int(min(segment_files(node)).removesuffix(".log"))
        end = parse_snapshot_name(newest[node.id].name)
        assert end is not None and end.offset >= first_base, "the log reaches the newest snapshot"
        ends[node.id] = end.offset
        older = [parse_snapshot_name(p.name) for p in directory.glob("*.checkpoint") if p != newest[node.id]]
        assert all(s is not None and s.offset < first_base for s in older), "no older snapshot the log reaches"
        damaged = bytearray(newest[node.id].read_bytes())
        damaged[len(damaged) // 2] ^= 0x10  # a flipped bit inside its records
        newest[node.id].write_bytes(damaged)
        segments[node.id] = {p.name: p.read_bytes() for p in directory.glob("*.log")}
    pids = {node.id: local_quorum.restart(quorum, node.id).pid for node in quorum.nodes}

    wait_until(
        lambda: all(not local_quorum.alive(pid) for pid in pids.values()),
        timeout_s=120,
        what="every node stopping",
    )
    for node in quorum.nodes:
        assert local_quorum.exit_code(pids[node.id]) == 1, f"node {node.id} exits non-zero"
        events = events_from_the_set_aside(node)
        stopped = [e for e in events if e["event"] == STOPPED]
        assert len(stopped) == 1, f"node {node.id} says why it stops"
        assert stopped[0]["node_id"] == node.id and node.id in stopped[0]["voters_without_state"]
        assert stopped[0]["log_start_offset"] == ends[node.id]
        assert VOTE_RECORDED_EVENT not in [e["event"] for e in events], "no vote without the state"
        kept = newest[node.id].with_name(newest[node.id].name + ".corrupt")
        assert kept.exists(), "the damaged snapshot is kept, never deleted"
        directory = log_dir(Path(node.data_dir))
        assert {p.name: p.read_bytes() for p in directory.glob("*.log")} == segments[node.id], "the log unchanged"
