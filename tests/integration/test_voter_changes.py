"""Voter changes on a running quorum of real processes (KIP-853), with the operator's commands:
an observer is added as a voter, the leader removes itself and hands over, a wrong request is
refused with Kafka's code, and a restarted voter keeps the voter set the log says -- not the
bootstrap voters it was started with."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from raftmeta.cli.main import cli
from raftmeta.client import RetryPolicy, SyncControllerClient
from raftmeta.local import quorum as local_quorum
from raftmeta.storage.meta_properties import read_meta_properties
from raftmeta.v1 import controller_pb2, errors_pb2

from .conftest import FAST_NODE_ARGS
from .test_node import wait_until

pytestmark = pytest.mark.integration


@pytest.fixture
def grown(tmp_path: Path) -> Iterator[tuple[local_quorum.LocalQuorum, SyncControllerClient]]:
    started = local_quorum.up(
        tmp_path / "q", nodes=3, observers=1, brokers=3, racks=3, node_args=FAST_NODE_ARGS, heartbeat_interval_ms=200
    )
    try:
        with SyncControllerClient(started.bootstrap_server, retry=RetryPolicy(deadline_s=20)) as client:
            yield started, client
    finally:
        local_quorum.down(local_quorum.LocalQuorum.load(tmp_path / "q"))
        for node in started.nodes:
            log = Path(node.log)
            assert "Traceback" not in (log.read_text() if log.exists() else ""), f"node {node.id} crashed"


def quorum_cli(*args: str) -> dict[str, object]:
    result = CliRunner().invoke(cli, ["quorum", *args, "--output", "json"])
    assert result.exit_code == 0, result.output
    document: dict[str, object] = json.loads(result.output)
    return document


def voters(client: SyncControllerClient) -> list[int]:
    return sorted(v.replica_id for v in client.describe_quorum().voters)


def test_add_an_observer_then_the_leader_removes_itself(
    grown: tuple[local_quorum.LocalQuorum, SyncControllerClient],
) -> None:
    quorum, client = grown
    data_dir = quorum.data_dir
    assert voters(client) == [1, 2, 3]
    # quorum up bootstraps with --initial-controllers: every voter is a node id and a directory.
    assert all(len(v.directory_id) == 16 for v in client.describe_quorum().voters)
    # The observer must have caught up first; the leader says REQUEST_TIMED_OUT until then.
    wait_until(
        lambda: (
            CliRunner()
            .invoke(cli, ["quorum", "add-controller", "--data-dir", data_dir, "--controller-id", "4"])
            .exit_code
            == 0
        ),
        what="node 4 added",
    )
    assert voters(client) == [1, 2, 3, 4]
    answer = client.describe_quorum()
    assert [o.replica_id for o in answer.observers] == []
    # Its directory id came with the change (the one in its meta.properties): quorum status shows it.
    meta4 = read_meta_properties(Path(quorum.node(4).data_dir))
    assert meta4 is not None
    assert [v.directory_id for v in answer.voters if v.replica_id == 4] == [meta4.directory_id]
    # The same again: node 4 is a voter already.
    again = client.add_raft_voter(controller_pb2.AddRaftVoterRequest(voter_id=4))
    assert again.error_code == errors_pb2.DUPLICATE_VOTER
    # A directory id that is not node 4's (its meta.properties'): another replica, not a voter.
    wrong = client.remove_raft_voter(controller_pb2.RemoveRaftVoterRequest(voter_id=4, voter_directory_id=bytes(16)))
    assert wrong.error_code == errors_pb2.VOTER_NOT_FOUND
    # A voter's listener recorded anew (UpdateRaftVoter): the same address here, the same voters.
    address = quorum.node(3).address
    quorum_cli("update-controller", "--data-dir", data_dir, "--controller-id", "3", "--controller-listener", address)
    assert voters(client) == [1, 2, 3, 4]
    # The leader removes itself: answered once committed, then another voter leads.
    leader = answer.leader_id
    quorum_cli("remove-controller", "--data-dir", data_dir, "--controller-id", str(leader))
    wait_until(lambda: client.describe_quorum().leader_id not in (-1, leader), what="a new leader")
    rest = sorted({1, 2, 3, 4} - {leader})
    assert voters(client) == rest
    created = client.create_topics(
        controller_pb2.CreateTopicsRequest(topics=[controller_pb2.CreatableTopic(name="after", num_partitions=1)])
    )
    assert created.topics[0].error_code == errors_pb2.NONE, created.topics[0].error_message
    # Node 4 restarts with the bootstrap voters on its command line; the log's set is the one in force.
    pid = quorum.node(4).pid
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not local_quorum.alive(pid), what="node 4 gone")
    local_quorum.restart(quorum, 4)
    wait_until(lambda: voters(client) == rest and client.describe_quorum().leader_id in rest, what="voters kept")
    meta = read_meta_properties(Path(quorum.node(4).data_dir))
    assert meta is not None and len(meta.directory_id) == 16


def test_a_standalone_node_is_the_first_voter_with_its_directory(tmp_path: Path) -> None:
    [port] = local_quorum.free_ports(1)
    address = f"127.0.0.1:{port}"
    argv = [
        sys.executable, "-m", "raftmeta", "node", "--node-id", "1", "--listen", address, "--standalone",
        "--data-dir", str(tmp_path / "node-1"), "--cluster-id", local_quorum.new_cluster_id(),
        *FAST_NODE_ARGS,
    ]  # fmt: skip
    pid = local_quorum.spawn(argv, tmp_path / "node-1.log")
    try:
        with SyncControllerClient(address, retry=RetryPolicy(deadline_s=20)) as client:
            wait_until(lambda: client.describe_quorum().leader_id == 1, what="node 1 leads")
            [voter] = client.describe_quorum().voters
        meta = read_meta_properties(tmp_path / "node-1")
        assert meta is not None and voter.directory_id == meta.directory_id and len(meta.directory_id) == 16
    finally:
        os.kill(pid, signal.SIGTERM)
        wait_until(lambda: not local_quorum.alive(pid), what="node 1 stopped")
