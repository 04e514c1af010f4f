"""With ``--output json`` every error that ends a command is JSON on stdout too.

Usage errors (exit 2), transport and limit errors from the quorum and failed checks (exit 1)
print ``{"error": {"code", "message", "exit_code", ...}}`` on stdout, besides the message on
stderr, so a script that asked for JSON always gets one JSON document.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import grpc
import grpc.aio
import pytest
from click.testing import CliRunner

from raftmeta.api.rpc_errors import POLICY_VIOLATION, error_metadata
from raftmeta.cli.main import cli
from raftmeta.v1 import controller_pb2, errors_pb2
from tests.fakes import ScriptedController, ServerThread


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def error_of(stdout: str) -> dict[str, Any]:
    """The one JSON document on stdout, which must be an error object."""
    document = json.loads(stdout)
    assert list(document) == ["error"]
    error: dict[str, Any] = document["error"]
    return error


class Controller(ScriptedController):
    """The scripted controller, plus RegisterBroker and a call that fails over a limit."""

    async def RegisterBroker(self, request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        return await self._answer("RegisterBroker", request, context)

    async def CreateTopics(self, request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        self.requests.append(("CreateTopics", request))
        await context.abort(
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            "len(topics)=10001 exceeds TOPICS_PER_REQUEST_MAX=10000",
            trailing_metadata=error_metadata(POLICY_VIOLATION),
        )


@pytest.fixture
def server() -> Iterator[ServerThread]:
    # cast: the generated base answers UNIMPLEMENTED for the methods left out (as tests.fakes does)
    controller = cast("Callable[[], Controller]", Controller)()
    thread = ServerThread(controller)
    thread.controller = controller
    yield thread
    thread.stop()


@pytest.mark.parametrize(
    "json_flag",
    [["--output", "json"], ["-o", "json"], ["--output=json"], ["-ojson"]],
    ids=" ".join,
)
def test_a_usage_error_is_a_json_error_object(json_flag: list[str]) -> None:
    code, out, err = invoke(
        "topics", "create", *json_flag, "--bootstrap-server", "127.0.0.1:1", "--topic", "t", "--partitions",
        "99999999999",
    )  # fmt: skip
    assert code == 2
    assert error_of(out) == {
        "code": "USAGE_ERROR",
        "message": "Invalid value for '--partitions': 99999999999 is not in the range 1..10000",
        "exit_code": 2,
        "param": "--partitions",
    }
    assert "Error: Invalid value for '--partitions'" in err, "stderr says it as before"


def test_without_json_stdout_stays_empty() -> None:
    code, out, err = invoke(
        "topics", "create", "--bootstrap-server", "127.0.0.1:1", "--topic", "t", "--partitions", "0"
    )
    assert code == 2
    assert out == ""
    assert "'--partitions': 0 is not in the range" in err


@pytest.mark.parametrize(
    ("args", "fields"),
    [
        # Click's own usage errors, before any command code runs; some before --output is parsed.
        (["topics", "nosuch", "-o", "json"], {"message": "No such command 'nosuch'."}),
        (["topics", "create", "-o", "json", "--topic", "t"], {"param": "--bootstrap-server"}),
        (["--log-level", "nope", "topics", "list", "-o", "json"], {"param": "--log-level"}),
        (["topics", "list", "-o", "json", "--no-such-flag"], {"message": "No such option '--no-such-flag'."}),
        (["topics", "--list", "--delete", "-o", "json"], {"message": "Command must include exactly one action: "
                                                          "--list, --describe, --create, --alter or --delete"}),
        # A usage error raised by a command.
        (["topics", "create", "--bootstrap-server", "h:1", "--topic", "t", "--replica-assignment", "", "-o", "json"],
         {"param": "--replica-assignment"}),
        (["topics", "create", "--bootstrap-server", "h", "--topic", "t", "-o", "json"],
         {"param": "--bootstrap-server"}),
        # Flags that cannot go together name both.
        (["topics", "create", "--bootstrap-server", "h:1", "--topic", "t", "--replica-assignment", "0:1",
          "--placer", "balanced", "-o", "json"],
         {"params": ["--replica-assignment", "--placer"],
          "message": "--replica-assignment can't be used with --placer (a manual assignment is not placed by a "
                     "placer)"}),
    ],
)  # fmt: skip
def test_usage_errors_of_every_kind_are_json(args: list[str], fields: dict[str, Any]) -> None:
    code, out, _ = invoke(*args)
    assert code == 2
    error = error_of(out)
    assert error["code"] == "USAGE_ERROR" and error["exit_code"] == 2
    assert {k: error[k] for k in fields} == fields


def test_a_transport_error_is_a_json_error_object() -> None:
    # A node that accepts connections and closes them: the client's UNAVAILABLE, after --timeout.
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()

        def close_every_connection() -> None:
            with contextlib.suppress(OSError):  # the listening socket closed: the test is over
                while True:
                    connection, _ = listening.accept()
                    connection.close()

        threading.Thread(target=close_every_connection, daemon=True).start()
        address = f"127.0.0.1:{listening.getsockname()[1]}"
        code, out, err = invoke("topics", "describe", "--bootstrap-server", address, "--timeout", "2", "-o", "json")
    assert code == 1
    error = error_of(out)
    assert error["code"] == "UNAVAILABLE"
    assert (error["exit_code"], error["method"], error["grpc_status"]) == (1, "DescribeTopics", "UNAVAILABLE")
    assert error["message"].startswith("DescribeTopics failed: UNAVAILABLE")
    assert "error_code" not in error
    assert "DescribeTopics failed: UNAVAILABLE" in err


def test_a_refused_connection_is_a_json_error_object_naming_what_is_there() -> None:
    code, out, _ = invoke("topics", "describe", "--bootstrap-server", "127.0.0.1:1", "-o", "json")
    assert code == 1
    error = error_of(out)
    assert (error["code"], error["exit_code"]) == ("UNAVAILABLE", 1)
    assert error["peers"] == {"127.0.0.1:1": "connection refused"}
    assert error["message"].startswith("no raftmeta node at --bootstrap-server: 127.0.0.1:1: connection refused")


def test_a_limit_error_is_a_json_error_object_named_by_the_quorums_error_code(server: ServerThread) -> None:
    code, out, _ = invoke("topics", "create", "--bootstrap-server", server.address, "--topic", "t", "-o", "json")
    assert code == 1
    error = error_of(out)
    assert error == {
        "code": POLICY_VIOLATION,
        "message": "CreateTopics failed: RESOURCE_EXHAUSTED/POLICY_VIOLATION: "
        "len(topics)=10001 exceeds TOPICS_PER_REQUEST_MAX=10000",
        "exit_code": 1,
        "method": "CreateTopics",
        "grpc_status": "RESOURCE_EXHAUSTED",
        "error_code": POLICY_VIOLATION,
    }


def test_a_failed_check_is_a_json_error_object(tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text('{"version": 1, "partitions": []}')
    code, out, _ = invoke("reassign", "execute", "--bootstrap-server", "127.0.0.1:1", "--plan", str(plan), "-o", "json")
    assert code == 1
    assert error_of(out) == {"code": "CHECK_FAILED", "message": f"{plan}: the plan moves nothing", "exit_code": 1}


def test_a_command_that_printed_its_document_is_not_followed_by_an_error_object(server: ServerThread) -> None:
    """brokers register prints its answer, then exits 1 when the broker was refused: stdout stays
    one JSON document (the answer, which names the error)."""
    server.controller.responses["RegisterBroker"] = controller_pb2.RegisterBrokerResponse(
        error_code=errors_pb2.INCONSISTENT_CLUSTER_ID, error_message="wrong cluster"
    )
    code, out, err = invoke("brokers", "register", "--bootstrap-server", server.address, "--id", "3", "-o", "json")
    assert code == 1
    assert json.loads(out) == {
        "id": 3,
        "broker_epoch": 0,
        "error_code": "INCONSISTENT_CLUSTER_ID",
        "error_message": "wrong cluster",
    }
    assert "not registered" in err


def test_a_successful_command_prints_only_its_document() -> None:
    code, out, _ = invoke("records", "types", "-o", "json")
    assert code == 0
    assert "error" not in json.loads(out)
