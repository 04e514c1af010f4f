"""``raftmeta quorum add-controller`` / ``remove-controller`` print kafka-metadata-quorum's lines
(MetadataQuorumCommand in Kafka 4.4), so scripts written for it read them here."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from click.testing import CliRunner

from raftmeta.cli.main import cli
from raftmeta.raft.voters import format_directory_id
from raftmeta.v1 import controller_pb2
from tests.fakes import ServerThread

DIRECTORY = bytes(range(16))


@pytest.fixture
def server() -> Iterator[ServerThread]:
    thread = ServerThread()
    yield thread
    thread.stop()


def test_add_controller_prints_kafkas_added_line(server: ServerThread) -> None:
    server.controller.responses["AddRaftVoter"] = controller_pb2.AddRaftVoterResponse()
    args = ["quorum", "add-controller", "--bootstrap-server", server.address, "--controller-id", "4",
            "--controller-directory-id", format_directory_id(DIRECTORY)]  # fmt: skip
    result = CliRunner().invoke(cli, [*args, "--controller-listener", "127.0.0.1:9093"])
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        f"Added controller 4 with directory id {format_directory_id(DIRECTORY)} "
        "and endpoints: CONTROLLER://127.0.0.1:9093\n"
    )
    assert result.stderr == "", "no unlabelled 'directory id ...' line any more"
    result = CliRunner().invoke(cli, [*args, "--controller-listener", "[::1]:9093"])
    assert result.stdout.endswith("and endpoints: CONTROLLER://[::1]:9093\n"), "Kafka brackets an IPv6 host"


def test_remove_controller_prints_kafkas_removed_line(server: ServerThread) -> None:
    server.controller.responses["RemoveRaftVoter"] = controller_pb2.RemoveRaftVoterResponse()
    args = ["quorum", "remove-controller", "--bootstrap-server", server.address, "--controller-id", "1"]
    result = CliRunner().invoke(cli, [*args, "--controller-directory-id", format_directory_id(DIRECTORY)])
    assert result.exit_code == 0, result.output
    assert result.stdout == f"Removed KRaft controller 1 with directory id {format_directory_id(DIRECTORY)}\n"
    result = CliRunner().invoke(cli, args)
    assert result.stdout == "Removed KRaft controller 1\n", "no directory id given: any of voter 1's"
