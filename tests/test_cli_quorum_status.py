"""``raftmeta quorum status --status`` prints voters and observers as kafka-metadata-quorum
describe --status does since Kafka 3.9 (MetadataQuorumCommand's Node: id, directoryId,
endpoints), so a script that parses the real tool's lines parses these."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from click.testing import CliRunner

from raftmeta.cli.main import cli
from raftmeta.raft.voters import format_directory_id
from raftmeta.v1 import controller_pb2 as pb
from tests.fakes import ServerThread


@pytest.fixture
def server() -> Iterator[ServerThread]:
    thread = ServerThread()
    yield thread
    thread.stop()


def listener(port: int, host: str = "127.0.0.1") -> pb.RaftVoterListener:
    return pb.RaftVoterListener(name="CONTROLLER", host=host, port=port)


def test_status_prints_voters_and_observers_in_kafkas_node_form(server: ServerThread) -> None:
    one, four = bytes([1]) * 16, bytes([4]) * 16
    server.controller.responses["DescribeQuorum"] = pb.DescribeQuorumResponse(
        cluster_id="c",
        leader_id=1,
        leader_epoch=3,
        high_watermark=40,
        voters=[
            pb.QuorumReplicaState(replica_id=1, log_end_offset=40, directory_id=one, endpoints=[listener(9093)]),
            pb.QuorumReplicaState(replica_id=2, log_end_offset=40, endpoints=[listener(9094, "::1")]),
            pb.QuorumReplicaState(replica_id=3, log_end_offset=-1, lag=-1, last_fetch_ms_ago=-1),
        ],
        observers=[pb.QuorumReplicaState(replica_id=4, log_end_offset=40, directory_id=four)],
    )
    result = CliRunner().invoke(cli, ["quorum", "status", "--bootstrap-server", server.address, "--status"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[6] == (
        f'CurrentVoters:          [{{"id": 1, "directoryId": "{format_directory_id(one)}", '
        '"endpoints": ["CONTROLLER://127.0.0.1:9093"]},'
        '{"id": 2, "endpoints": ["CONTROLLER://[::1]:9094"]},{"id": 3}]'
    )
    assert lines[7] == f'CurrentObservers:       [{{"id": 4, "directoryId": "{format_directory_id(four)}"}}]'
