"""Snapshots end to end (DESIGN.md §4, KIP-630), with real processes.

A tiny snapshot interval and 1 KiB segments make every node snapshot often and delete the
segments below its snapshots, so a follower whose data dir is wiped can only come back through
FetchSnapshot; a node restarted with snapshots of its own starts from the newest one.
"""

from __future__ import annotations

import functools
import json
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from raftmeta.client import RetryPolicy, SyncControllerClient
from raftmeta.jobs.consistency import facts_to_checks, local_facts
from raftmeta.local import quorum as local_quorum
from raftmeta.storage.datadir import log_dir
from raftmeta.v1 import errors_pb2
from tests.integration.conftest import FAST_NODE_ARGS
from tests.integration.test_node import create, leader_of, wait_until

pytestmark = pytest.mark.integration

SNAPSHOT_INTERVAL_RECORDS = 25
SNAPSHOT_NODE_ARGS = [
    *FAST_NODE_ARGS,
    "--snapshot-interval-records", str(SNAPSHOT_INTERVAL_RECORDS),
    "--segment-bytes", "1024",
]  # fmt: skip
FIRST_SEGMENT = f"{0:020d}.log"


def start(data_dir: Path, node_args: list[str]) -> local_quorum.LocalQuorum:
    return local_quorum.up(data_dir, nodes=3, brokers=6, racks=3, node_args=node_args, heartbeat_interval_ms=200)


def stop(data_dir: Path) -> None:
    quorum = local_quorum.LocalQuorum.load(data_dir)
    local_quorum.down(quorum)
    for node in quorum.nodes:
        text = Path(node.log).read_text() if Path(node.log).exists() else ""
        assert "Traceback" not in text, f"node {node.id} crashed:\n{text[-4000:]}"


@pytest.fixture
def snapshotting(tmp_path: Path) -> Iterator[local_quorum.LocalQuorum]:
    started = start(tmp_path / "q", SNAPSHOT_NODE_ARGS)
    try:
        yield started
    finally:
        stop(tmp_path / "q")


def events(node: local_quorum.NodeProcess, name: str) -> list[dict[str, Any]]:
    """The node's structured log lines (JSON) whose event is ``name``, oldest first."""
    found: list[dict[str, Any]] = []
    for line in Path(node.log).read_text().splitlines():
        if not line.startswith("{"):
            continue
        record = json.loads(line)
        if record.get("event") == name:
            found.append(record)
    return found


def snapshot_files(node: local_quorum.NodeProcess) -> list[str]:
    directory = log_dir(Path(node.data_dir))
    return sorted(p.name for p in directory.glob("*.checkpoint")) if directory.exists() else []


def segment_files(node: local_quorum.NodeProcess) -> list[str]:
    return sorted(p.name for p in log_dir(Path(node.data_dir)).glob("*.log"))


def caught_up(client: SyncControllerClient, node_id: int) -> bool:
    """``node_id`` has the whole committed log: its log end offset equals the leader's HW."""
    status = client.describe_quorum()
    return any(v.replica_id == node_id and v.log_end_offset == status.high_watermark for v in status.voters)


def wait_exit(quorum: local_quorum.LocalQuorum, node_id: int) -> None:
    pid = quorum.node(node_id).pid
    wait_until(lambda: not local_quorum.alive(pid), what=f"node {node_id} exiting")


def kill(quorum: local_quorum.LocalQuorum, node_id: int) -> None:
    local_quorum.signal_node(quorum, node_id, signal.SIGKILL)
    wait_exit(quorum, node_id)


def test_wiped_follower_installs_the_leaders_snapshot_and_catches_up(
    snapshotting: local_quorum.LocalQuorum,
) -> None:
    quorum = snapshotting
    ids: dict[str, bytes] = {}
    with SyncControllerClient(quorum.bootstrap_server, retry=RetryPolicy(deadline_s=20)) as client:
        for i in range(40):
            result = create(client, f"before-{i}")
            assert result.error_code == errors_pb2.NONE, result.error_message
            ids[result.name] = result.topic_id
        leader = quorum.node(leader_of(client))
        # The leader snapshots every 25 records and deletes the segments wholly below its snapshot.
        wait_until(lambda: snapshot_files(leader) != [], what="a snapshot on the leader")
        wait_until(lambda: FIRST_SEGMENT not in segment_files(leader), what="the leader deleting its first segment")
        assert events(leader, "snapshot taken"), "the leader logged no snapshot"

        follower = next(n for n in quorum.nodes if n.id != leader.id)
        kill(quorum, follower.id)
        shutil.rmtree(follower.data_dir)
        for i in range(10):
            result = create(client, f"while-down-{i}")
            assert result.error_code == errors_pb2.NONE, result.error_message
            ids[result.name] = result.topic_id
        local_quorum.restart(quorum, follower.id)
        wait_until(lambda: caught_up(client, follower.id), what=f"wiped node {follower.id} catching up")

        # It came back through FetchSnapshot: the only way, as the leader's log starts above 0.
        installed = events(follower, "installed snapshot from the leader")
        assert installed, "the wiped follower did not install a snapshot"
        assert installed[-1]["end_offset"] > 0
        assert snapshot_files(follower), "the installed snapshot is not on the follower's disk"
        assert FIRST_SEGMENT not in segment_files(follower), "the follower's log should start at the snapshot"

        # Its own image is complete: make it the leader (SIGTERM resigns; bounded rounds) and
        # describe through it, so its controller -- not a forwarded leader's -- answers.
        for _ in range(6):
            current = leader_of(client)
            if current == follower.id:
                break
            local_quorum.signal_node(quorum, current, signal.SIGTERM)
            wait_exit(quorum, current)
            local_quorum.restart(quorum, current)
            wait_until(functools.partial(caught_up, client, current), what=f"node {current} catching up")
        assert leader_of(client) == follower.id, "leadership never reached the restored node"
    with SyncControllerClient(follower.address, retry=RetryPolicy(deadline_s=20)) as direct:
        described = {t.name: t.topic_id for t in direct.describe_topics().topics}
    assert described == ids


def test_restarted_node_starts_from_its_own_snapshot(snapshotting: local_quorum.LocalQuorum, tmp_path: Path) -> None:
    quorum = snapshotting
    with SyncControllerClient(quorum.bootstrap_server, retry=RetryPolicy(deadline_s=20)) as client:
        for i in range(30):
            assert create(client, f"t-{i}").error_code == errors_pb2.NONE
        leader = leader_of(client)
        follower = next(n for n in quorum.nodes if n.id != leader)
        # Followers snapshot too, from the records they apply.
        wait_until(lambda: snapshot_files(follower) != [], what=f"a snapshot on follower {follower.id}")
        wait_until(lambda: caught_up(client, follower.id), what=f"node {follower.id} caught up")
        kill(quorum, follower.id)
        on_disk = max(int(name.split("-")[0]) for name in snapshot_files(follower))
        for i in range(5):
            assert create(client, f"later-{i}").error_code == errors_pb2.NONE
        local_quorum.restart(quorum, follower.id)
        wait_until(lambda: caught_up(client, follower.id), what=f"node {follower.id} catching up")
    started = events(follower, "node started")[-1]
    assert started["snapshot"] == on_disk > 0, started
    assert started["log_start_offset"] >= on_disk - SNAPSHOT_INTERVAL_RECORDS * 4, started
    # It replayed from its snapshot, so it did not need the leader's.
    assert not events(follower, "installed snapshot from the leader")
    assert events(follower, "heap frozen"), "the driver freezes the replayed image out of the collector"
    stop(Path(quorum.data_dir))
    verdict = facts_to_checks(local_facts(quorum.data_dir))
    assert all(c.passed for c in verdict), verdict
