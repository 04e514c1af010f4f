"""``--request-id`` (issue 22 item 9): an "outcome unknown" names the id, and running the command
again with it sends the same request, which the quorum answers with its first answer instead of
applying it twice (docs/controller.md, idempotent retries)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any, cast

import grpc
import pytest
from click.testing import CliRunner

from raftmeta.cli.main import cli
from raftmeta.v1 import controller_pb2
from tests.fakes import ScriptedController, ServerThread


class DroppingController(ScriptedController):
    """Reached, then dropped: every CreateTopics fails UNAVAILABLE after the server saw it."""

    async def CreateTopics(self, request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        self.requests.append(("CreateTopics", request))
        await context.abort(grpc.StatusCode.UNAVAILABLE, "the leader's stream was reset")


@pytest.fixture
def server() -> Iterator[ServerThread]:
    thread = ServerThread()
    yield thread
    thread.stop()


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def test_the_request_id_given_is_the_one_sent(server: ServerThread) -> None:
    server.controller.responses["CreateTopics"] = controller_pb2.CreateTopicsResponse(
        topics=[controller_pb2.CreatableTopicResult(name="t")]
    )
    server.controller.responses["DeleteTopics"] = controller_pb2.DeleteTopicsResponse()
    code, _ = invoke("topics", "create", "--bootstrap-server", server.address, "--topic", "t", "--request-id", "r-1")
    assert code == 0
    code, _ = invoke("topics", "delete", "--bootstrap-server", server.address, "--topic", "t", "--request-id", "r-2")
    assert code == 0
    assert [(m, r.request_id) for m, r in server.controller.requests] == [
        ("CreateTopics", "r-1"),
        ("DeleteTopics", "r-2"),
    ]


def test_a_request_id_over_the_limit_is_a_usage_error(server: ServerThread) -> None:
    code, out = invoke(
        "topics", "create", "--bootstrap-server", server.address, "--topic", "t", "--request-id", "x" * 65
    )
    assert code == 2 and "--request-id" in out and "1..64 characters" in out


def test_an_unknown_outcome_names_the_id_to_run_again_with() -> None:
    # cast: the generated base answers UNIMPLEMENTED for the methods left out (as tests.fakes does)
    dropping = cast("Callable[[], DroppingController]", DroppingController)()
    thread = ServerThread(dropping)
    try:
        args = ["topics", "create", "--bootstrap-server", thread.address, "--topic", "t", "--timeout", "0.5"]
        result = CliRunner().invoke(cli, [*args, "--output", "json"])
    finally:
        thread.stop()
    assert result.exit_code == 1
    error = json.loads(result.stdout)["error"]
    assert error["code"] == "OUTCOME_UNKNOWN"
    sent = {r.request_id for _, r in dropping.requests}
    assert sent == {error["request_id"]}, "every retry carried the same id"
    assert f"--request-id {error['request_id']}" in error["message"]


def test_a_write_in_flight_when_the_node_dies_is_outcome_unknown_not_cancelled() -> None:
    """The node dies with the write open (as on a full disk): gRPC says CANCELLED, and the command
    says OUTCOME_UNKNOWN with the id to run it again with (before: CANCELLED, a plain failure)."""
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.dying_controller"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        assert server.stdout is not None
        address = server.stdout.readline().strip()
        args = ["topics", "create", "--bootstrap-server", address, "--topic", "t", "--request-id", "r-7"]
        result = CliRunner().invoke(cli, [*args, "--timeout", "60", "--output", "json"])
    finally:
        server.kill()
        server.wait()
        if server.stdout is not None:
            server.stdout.close()
    assert result.exit_code == 1
    error = json.loads(result.stdout)["error"]
    assert (error["code"], error["request_id"], error["grpc_status"]) == ("OUTCOME_UNKNOWN", "r-7", "CANCELLED")
    assert "--request-id r-7" in error["message"]
