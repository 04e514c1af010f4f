"""``raftmeta leader-election`` (kafka-leader-election.sh): the requests it builds, Kafka's argument
rules and messages, and Kafka's per-partition output, against a scripted ControllerService; one
test against a real quorum elects a preferred leader for real."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import grpc.aio
import pytest
from click.testing import CliRunner

from raftmeta.cli.leader_election import kafka_exception
from raftmeta.cli.main import cli
from raftmeta.v1 import controller_pb2, errors_pb2
from tests.fakes import ScriptedController, ServerThread


class ElectingController(ScriptedController):
    """The scripted controller, answering ElectLeaders too."""

    async def ElectLeaders(self, request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        return await self._answer("ElectLeaders", request, context)


@pytest.fixture
def scripted() -> Iterator[tuple[ServerThread, ElectingController]]:
    # cast: the generated base answers UNIMPLEMENTED for the methods left out; only its stub makes them abstract
    controller = cast("Callable[[], ElectingController]", ElectingController)()
    thread = ServerThread(controller)
    yield thread, controller
    thread.stop()


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["leader-election", *args])
    return result.exit_code, result.stdout, result.stderr


Results = dict[str, list[tuple[int, errors_pb2.ErrorCode.ValueType, str]]]


def answer(election: Results) -> controller_pb2.ElectLeadersResponse:
    """topic -> [(partition, error code, message)] as an ElectLeaders response."""
    response = controller_pb2.ElectLeadersResponse()
    for topic, partitions in election.items():
        result = response.results.add(topic=topic)
        for partition, code, message in partitions:
            result.partitions.add(partition=partition, error_code=code, error_message=message)
    return response


MIXED: Results = {
    "t": [
        (1, errors_pb2.NONE, ""),
        (0, errors_pb2.NONE, ""),
        (2, errors_pb2.ELECTION_NOT_NEEDED, "Leader 3 of t-2 is already the preferred leader."),
        (3, errors_pb2.ELIGIBLE_LEADERS_NOT_AVAILABLE, "The preferred leader 4 of t-3 is fenced or not in the ISR."),
    ],
    "gone": [(0, errors_pb2.UNKNOWN_TOPIC_OR_PARTITION, "No such topic as gone")],
}


def test_topic_and_partition_send_one_partition_and_print_kafkas_success_line(
    scripted: tuple[ServerThread, ElectingController],
) -> None:
    server, controller = scripted
    controller.responses["ElectLeaders"] = answer({"orders": [(0, errors_pb2.NONE, "")]})
    code, out, _ = invoke("--bootstrap-server", server.address, "--election-type", "preferred",
                          "--topic", "orders", "--partition", "0")  # fmt: skip
    assert code == 0
    assert out == "Successfully completed leader election (PREFERRED) for partitions orders-0\n"
    method, request = controller.requests[0]
    assert method == "ElectLeaders"
    assert request.election_type == controller_pb2.ELECTION_TYPE_PREFERRED
    assert [(tp.topic, list(tp.partitions)) for tp in request.topic_partitions] == [("orders", [0])]
    assert request.request_id, "a write carries a request id (a retry is answered, not applied twice)"


def test_mixed_results_print_kafkas_three_kinds_of_line_and_exit_1(
    scripted: tuple[ServerThread, ElectingController], tmp_path: Path
) -> None:
    server, controller = scripted
    controller.responses["ElectLeaders"] = answer(MIXED)
    plan = tmp_path / "election.json"
    plan.write_text(json.dumps({"partitions": [{"topic": "t", "partition": p} for p in (1, 0, 2, 3)]
                                + [{"topic": "gone", "partition": 0}]}))  # fmt: skip
    code, out, err = invoke("--bootstrap-server", server.address, "--election-type", "PREFERRED",
                            "--path-to-json-file", str(plan))  # fmt: skip
    assert code == 1
    assert out.splitlines() == [
        "Successfully completed leader election (PREFERRED) for partitions t-0, t-1",
        "Valid replica already elected for partitions t-2",
        "Error completing leader election (PREFERRED) for partition: gone-0: "
        "org.apache.kafka.common.errors.UnknownTopicOrPartitionException: No such topic as gone",
        "Error completing leader election (PREFERRED) for partition: t-3: "
        "org.apache.kafka.common.errors.EligibleLeadersNotAvailableException: "
        "The preferred leader 4 of t-3 is fenced or not in the ISR.",
    ]
    assert "2 replica(s) could not be elected" in err
    request = controller.requests[0][1]
    # One entry per topic, partitions in file order.
    assert [(tp.topic, list(tp.partitions)) for tp in request.topic_partitions] == [("t", [1, 0, 2, 3]), ("gone", [0])]


def test_json_output_lists_every_result_and_still_exits_1_on_a_failure(
    scripted: tuple[ServerThread, ElectingController], tmp_path: Path
) -> None:
    server, controller = scripted
    controller.responses["ElectLeaders"] = answer(MIXED)
    code, out, err = invoke("--bootstrap-server", server.address, "--election-type", "preferred",
                            "--topic", "t", "--partition", "3", "-o", "json")  # fmt: skip
    assert code == 1
    document = json.loads(out)  # one document: the error object is not added after it
    assert document["election_type"] == "PREFERRED"
    assert document["succeeded"] == ["t-0", "t-1"]
    assert document["not_needed"] == ["t-2"]
    assert document["failed"] == ["gone-0", "t-3"]
    assert document["results"][0] == {"topic": "gone", "partition": 0, "error_code": "UNKNOWN_TOPIC_OR_PARTITION",
                                      "error_message": "No such topic as gone"}  # fmt: skip
    assert "2 replica(s) could not be elected" in err


def test_all_topic_partitions_names_none_and_hides_partitions_already_led_as_asked(
    scripted: tuple[ServerThread, ElectingController],
) -> None:
    """Kafka's controller leaves ELECTION_NOT_NEEDED out of an all-partitions answer: nothing to say
    about partitions that already have their leader."""
    server, controller = scripted
    controller.responses["ElectLeaders"] = answer(
        {"a": [(0, errors_pb2.ELECTION_NOT_NEEDED, "a-0 already has a leader (1).")], "b": [(1, errors_pb2.NONE, "")]}
    )
    code, out, _ = invoke("--bootstrap-server", server.address, "--election-type", "unclean", "--all-topic-partitions")
    assert code == 0
    assert out == "Successfully completed leader election (UNCLEAN) for partitions b-1\n"
    request = controller.requests[0][1]
    assert request.election_type == controller_pb2.ELECTION_TYPE_UNCLEAN
    assert list(request.topic_partitions) == [], "an empty list asks for every partition"
    controller.responses["ElectLeaders"] = answer({"a": [(0, errors_pb2.ELECTION_NOT_NEEDED, "")]})
    code, out, _ = invoke("--bootstrap-server", server.address, "--election-type", "unclean", "--all-topic-partitions")
    assert (code, out) == (0, "")


def test_an_empty_partition_list_elects_nothing_and_sends_nothing(
    scripted: tuple[ServerThread, ElectingController], tmp_path: Path
) -> None:
    """Kafka sends an empty set and elects nothing; here an ElectLeaders naming no partition would
    mean every partition, so no request goes out at all."""
    server, controller = scripted
    plan = tmp_path / "empty.json"
    plan.write_text('{"partitions": []}')
    code, out, _ = invoke("--bootstrap-server", server.address, "--election-type", "preferred",
                          "--path-to-json-file", str(plan), "-o", "json")  # fmt: skip
    assert code == 0
    assert json.loads(out)["results"] == []
    assert controller.requests == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        # LeaderElectionCommandErrorTest's cases, Kafka's messages.
        (["--election-type", "unclean", "--topic", "some-topic"], "Missing required option(s): partition"),
        (["--election-type", "unclean", "--all-topic-partitions", "--partition", "0"],
         "Option partition is only allowed if topic is used"),
        (["--topic", "some-topic", "--partition", "0"], "Missing required option(s): election-type"),
        (["--election-type", "preferred"],
         "One and only one of the following options is required: topic, all-topic-partitions, path-to-json-file"),
        (["--election-type", "preferred", "--topic", "t", "--partition", "0", "--all-topic-partitions"],
         "One and only one of the following options is required"),
        (["--election-type", "sideways", "--all-topic-partitions"], "'sideways' is not one of 'preferred', 'unclean'"),
        (["--election-type", "preferred", "--topic", "t", "--partition", "-1"], "-1 is not in the range 0..2147483647"),
    ],
)  # fmt: skip
def test_argument_errors_use_kafkas_messages_and_exit_2(
    args: list[str], message: str, scripted: tuple[ServerThread, ElectingController]
) -> None:
    server, controller = scripted
    code, out, err = invoke("--bootstrap-server", server.address, *args)
    assert code == 2
    assert message in out + err
    assert controller.requests == [], "nothing is sent"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "Replica election data is empty"),
        ("null", "Replica election data is empty"),
        ('{"version": 1}', 'Replica election data is missing "partitions" field'),
        (
            '{"partitions": [{"topic": "t", "partition": 1}, {"topic": "t", "partition": 1}, {"topic": "u", '
            '"partition": 0}, {"topic": "u", "partition": 0}]}',
            "Replica election data contains duplicate partitions: [t-1, u-0]",
        ),
        ('{"partitions": [{"topic": "t"}]}', "partitions[0] needs a string topic and an integer partition"),
        ('{"partitions": [{"topic": "t", "partition": true}]}', "needs a string topic and an integer partition"),
        ('{"partitions": [{"topic": "t", "partition": 4294967296}]}', "is not in the range 0..2147483647"),
        ('{"partitions": {"topic": "t"}}', "partitions must be a list"),
        ("{not json", "is not JSON"),
    ],
)
def test_malformed_json_files_are_usage_errors_with_kafkas_messages(
    content: str, message: str, scripted: tuple[ServerThread, ElectingController], tmp_path: Path
) -> None:
    server, controller = scripted
    plan = tmp_path / "election.json"
    plan.write_text(content)
    code, out, err = invoke("--bootstrap-server", server.address, "--election-type", "preferred",
                            "--path-to-json-file", str(plan), "-o", "json")  # fmt: skip
    assert code == 2
    assert message in err
    assert json.loads(out)["error"]["param"] == "--path-to-json-file"
    assert controller.requests == []


def test_a_missing_json_file_is_a_usage_error(tmp_path: Path) -> None:
    code, _, err = invoke("--bootstrap-server", "127.0.0.1:1", "--election-type", "preferred",
                          "--path-to-json-file", str(tmp_path / "nope.json"))  # fmt: skip
    assert code == 2
    assert "cannot read" in err


def test_unreachable_quorum_exits_1_with_the_clients_message() -> None:
    code, _, err = invoke("--bootstrap-server", "127.0.0.1:1", "--timeout", "0.3", "--election-type", "preferred",
                          "--all-topic-partitions")  # fmt: skip
    assert code == 1
    assert "no raftmeta node at --bootstrap-server: 127.0.0.1:1: connection refused" in err


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("ELIGIBLE_LEADERS_NOT_AVAILABLE", "EligibleLeadersNotAvailableException"),
        ("PREFERRED_LEADER_NOT_AVAILABLE", "PreferredLeaderNotAvailableException"),
        ("UNKNOWN_TOPIC_OR_PARTITION", "UnknownTopicOrPartitionException"),
        ("INVALID_REQUEST", "InvalidRequestException"),
        ("INVALID_TOPIC_EXCEPTION", "InvalidTopicException"),
        ("NOT_CONTROLLER", "NotControllerException"),
        ("CLUSTER_AUTHORIZATION_FAILED", "ClusterAuthorizationException"),
    ],
)
def test_errors_print_as_kafkas_exceptions(code: str, expected: str) -> None:
    assert kafka_exception(code, "why") == f"org.apache.kafka.common.errors.{expected}: why"


def test_help_is_registered_at_the_top_level() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    assert "leader-election" in result.stdout
