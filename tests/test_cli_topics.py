"""``raftmeta topics`` against a scripted ControllerService: the requests it builds (Kafka's
flags) and the answers it prints (Kafka's layout, DESIGN.md §8 JSON, exit codes)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from click.testing import CliRunner

from raftmeta.api.ids import uuid_from_str, uuid_to_str
from raftmeta.cli.main import cli
from raftmeta.v1 import controller_pb2, errors_pb2
from tests.fakes import ServerThread, sample_describe


@pytest.fixture
def server() -> Iterator[ServerThread]:
    thread = ServerThread()
    yield thread
    thread.stop()


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_create_builds_kafka_style_request_and_prints_json(server: ServerThread) -> None:
    server.controller.responses["CreateTopics"] = controller_pb2.CreateTopicsResponse(
        topics=[
            controller_pb2.CreatableTopicResult(name="orders", topic_id=bytes(range(16)), num_partitions=3),
            controller_pb2.CreatableTopicResult(
                name="bad name", error_code=errors_pb2.INVALID_TOPIC_EXCEPTION, error_message="illegal character ' '"
            ),
        ]
    )
    code, out, _ = invoke(
        "topics", "create", "--bootstrap-server", server.address, "--topic", "orders", "--topic", "bad name",
        "--partitions", "3", "--replication-factor", "2", "--config", "retention.ms=1000",
        "--placer", "balanced", "--broker-pool", "fast", "--output", "json",
    )  # fmt: skip
    assert code == 1, "a rejected topic makes the command exit 1"
    document = json.loads(out)
    assert [t["error_code"] for t in document["topics"]] == ["NONE", "INVALID_TOPIC_EXCEPTION"]
    assert document["topics"][0]["topic_id"] == uuid_to_str(bytes(range(16)))
    method, request = server.controller.requests[0]
    assert method == "CreateTopics"
    assert [t.name for t in request.topics] == ["orders", "bad name"]
    topic = request.topics[0]
    assert (topic.num_partitions, topic.replication_factor, topic.placer, topic.broker_pool) == (
        3,
        2,
        "balanced",
        "fast",
    )
    assert dict(topic.configs) == {"retention.ms": "1000"}
    assert request.request_id, "the client makes mutating requests idempotent"


def test_create_with_replica_assignment_leaves_counts_unset(server: ServerThread) -> None:
    server.controller.responses["CreateTopics"] = controller_pb2.CreateTopicsResponse(
        topics=[controller_pb2.CreatableTopicResult(name="t", topic_id=b"\x01" * 16)]
    )
    code, out, _ = invoke("topics", "create", "--bootstrap-server", server.address, "--topic", "t",
                          "--replica-assignment", "0:1:2,1:2:0")  # fmt: skip
    assert code == 0
    assert out == "Created topic t.\n", "kafka-topics.sh's line"
    topic = server.controller.requests[0][1].topics[0]
    assert not topic.HasField("num_partitions")
    assert not topic.HasField("replication_factor")
    assert [(a.partition_index, list(a.broker_ids)) for a in topic.assignments] == [(0, [0, 1, 2]), (1, [1, 2, 0])]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--replica-assignment", "0:x"], "partition 0: 'x' is not a broker id"),
        (["--replica-assignment", "0:1,,2"], "partition 1: The manual partition assignment includes an empty"),
        (["--config", "novalue"], "'novalue' is not key=value"),
        (["--replica-assignment", "0:1", "--partitions", "2"], "--replica-assignment can't be used with --partitions"),
        (["--replica-assignment", "0:1", "--replication-factor", "2"], "can't be used with --replication-factor"),
        (["--replica-assignment", ""], "Invalid value for --replica-assignment: empty"),
        (["--replica-assignment", "  "], "Invalid value for --replica-assignment: empty"),
        (["--replica-assignment", "0:1", "--placer", "balanced"], "--replica-assignment can't be used with --placer"),
        # An explicit --placer is refused even when it names the default.
        (["--replica-assignment", "0:1", "--placer", "striped"], "--replica-assignment can't be used with --placer"),
        (
            ["--replica-assignment", "0:2147483648"],
            "partition 0: broker id 2147483648 is not in the range 0..2147483647",
        ),
        (["--partitions", "99999999999"], "'--partitions': 99999999999 is not in the range 1..10000"),
        # The quorum's cap (PARTITIONS_PER_TOPIC_MAX): refused here, not by the server.
        (["--partitions", "10001"], "'--partitions': 10001 is not in the range 1..10000"),
        (["--partitions", "0"], "'--partitions': 0 is not in the range 1..10000"),
        (["--partitions", "-3"], "'--partitions': -3 is not in the range 1..10000"),
        (["--replication-factor", "99999999999"], "'--replication-factor': 99999999999 is not in the range 1..16"),
        # The quorum's cap (REPLICAS_PER_PARTITION_MAX), not Kafka's 32767.
        (["--replication-factor", "17"], "'--replication-factor': 17 is not in the range 1..16"),
        (["--partitions", "three"], "'--partitions': 'three' is not an integer in the range 1..10000"),
    ],
)
def test_create_usage_errors_exit_2_and_name_the_flag(args: list[str], message: str, server: ServerThread) -> None:
    code, out, err = invoke("topics", "create", "--bootstrap-server", server.address, "--topic", "t", *args)
    assert code == 2
    assert message in out + err
    assert server.controller.requests == [], "nothing is sent"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--partitions", "99999999999"], "'--partitions': 99999999999 is not in the range 1..10000"),
        (["--partitions", "4", "--replica-assignment", ""], "Invalid value for --replica-assignment: empty"),
        (["--partitions", "4", "--replica-assignment", "3:4", "--placer", "legacy"], "can't be used with --placer"),
    ],
)
def test_alter_usage_errors_exit_2_and_name_the_flag(args: list[str], message: str, server: ServerThread) -> None:
    code, out, err = invoke("topics", "alter", "--bootstrap-server", server.address, "--topic", "t", *args)
    assert code == 2
    assert message in out + err
    assert server.controller.requests == []


def test_alter_with_replica_assignment_and_default_placer_is_accepted(server: ServerThread) -> None:
    server.controller.responses["CreatePartitions"] = controller_pb2.CreatePartitionsResponse(
        results=[controller_pb2.CreatePartitionsTopicResult(name="t")]
    )
    code, _, _ = invoke("topics", "alter", "--bootstrap-server", server.address, "--topic", "t",
                        "--partitions", "3", "--replica-assignment", "3:4,4:5")  # fmt: skip
    assert code == 0
    topic = server.controller.requests[0][1].topics[0]
    assert [list(a.broker_ids) for a in topic.assignments] == [[3, 4], [4, 5]]


def _exists_and_new(code: errors_pb2.ErrorCode.ValueType) -> controller_pb2.CreateTopicsResponse:
    return controller_pb2.CreateTopicsResponse(
        topics=[
            controller_pb2.CreatableTopicResult(
                name="orders", error_code=code, error_message="Topic 'orders' already exists."
            ),
            controller_pb2.CreatableTopicResult(name="fresh", topic_id=b"\x02" * 16, num_partitions=1),
        ]
    )


def test_create_if_not_exists_makes_an_existing_topic_not_an_error(server: ServerThread) -> None:
    """Kafka's --if-not-exists: the request is still sent; TOPIC_ALREADY_EXISTS is no failure."""
    server.controller.responses["CreateTopics"] = _exists_and_new(errors_pb2.TOPIC_ALREADY_EXISTS)
    args = ("topics", "create", "--bootstrap-server", server.address, "--topic", "orders", "--topic", "fresh")
    code, out, err = invoke(*args)
    assert code == 1
    assert "TOPIC_ALREADY_EXISTS" in err
    code, out, err = invoke(*args, "--if-not-exists")
    assert code == 0, err
    assert out == "Created topic fresh.\n"
    assert err == ""
    code, out, _ = invoke(*args, "--if-not-exists", "--output", "json")
    assert code == 0
    assert [t["error_code"] for t in json.loads(out)["topics"]] == ["TOPIC_ALREADY_EXISTS", "NONE"]
    assert len(server.controller.requests) == 3


def test_create_if_not_exists_still_fails_on_other_errors(server: ServerThread) -> None:
    server.controller.responses["CreateTopics"] = _exists_and_new(errors_pb2.INVALID_REPLICATION_FACTOR)
    code, _, err = invoke("topics", "create", "--bootstrap-server", server.address, "--topic", "orders",
                          "--topic", "fresh", "--if-not-exists")  # fmt: skip
    assert code == 1
    assert "INVALID_REPLICATION_FACTOR" in err


UNKNOWN = errors_pb2.UNKNOWN_TOPIC_OR_PARTITION


def test_alter_and_delete_if_exists_make_a_missing_topic_not_an_error(server: ServerThread) -> None:
    server.controller.responses["CreatePartitions"] = controller_pb2.CreatePartitionsResponse(
        results=[
            controller_pb2.CreatePartitionsTopicResult(name="gone", error_code=UNKNOWN, error_message="No such topic")
        ]
    )
    server.controller.responses["DeleteTopics"] = controller_pb2.DeleteTopicsResponse(
        responses=[
            controller_pb2.DeletableTopicResult(name="gone", error_code=UNKNOWN, error_message="No such topic"),
            controller_pb2.DeletableTopicResult(name="orders", topic_id=bytes(range(16))),
        ]
    )
    alter = ("topics", "alter", "--bootstrap-server", server.address, "--topic", "gone", "--partitions", "6")
    assert invoke(*alter)[0] == 1
    code, out, err = invoke(*alter, "--if-exists")
    assert (code, out, err) == (0, "", "")
    delete = ("topics", "delete", "--bootstrap-server", server.address, "--topic", "gone", "--topic", "orders")
    code, _, err = invoke(*delete)
    assert code == 1
    assert "UNKNOWN_TOPIC_OR_PARTITION" in err
    code, out, err = invoke(*delete, "--if-exists")
    assert (code, out, err) == (0, "Topic orders deleted.\n", "")
    code, out, _ = invoke(*delete, "--if-exists", "-o", "json")
    assert code == 0
    assert [t["error_code"] for t in json.loads(out)["topics"]] == ["UNKNOWN_TOPIC_OR_PARTITION", "NONE"]


def _listing() -> controller_pb2.DescribeTopicsResponse:
    response = controller_pb2.DescribeTopicsResponse()
    for name in ("payments", "__consumer_offsets", "orders", "orders-dlq"):
        response.topics.add(name=name, topic_id=bytes([len(name)]) * 16)
    return response


def test_list_prints_names_one_per_line_sorted(server: ServerThread) -> None:
    server.controller.responses["DescribeTopics"] = _listing()
    code, out, _ = invoke("topics", "list", "--bootstrap-server", server.address)
    assert code == 0
    assert out == "__consumer_offsets\norders\norders-dlq\npayments\n"
    assert list(server.controller.requests[0][1].topics) == [], "DescribeTopics of every topic"


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["--exclude-internal"], ["orders", "orders-dlq", "payments"]),
        (["--topic", "orders.*"], ["orders", "orders-dlq"]),
        (["--topic", "orders"], ["orders"]),  # the whole name must match
        (["--topic", "orders,payments"], ["orders", "payments"]),
        (["--topic", "__.*", "--exclude-internal"], []),
    ],
)
def test_list_filters_like_kafka(server: ServerThread, args: list[str], names: list[str]) -> None:
    server.controller.responses["DescribeTopics"] = _listing()
    code, out, _ = invoke("topics", "list", "--bootstrap-server", server.address, *args)
    assert code == 0
    assert out.splitlines() == names


def test_list_json_and_kafkas_list_flag(server: ServerThread) -> None:
    server.controller.responses["DescribeTopics"] = _listing()
    code, out, _ = invoke("topics", "--list", "--bootstrap-server", server.address, "-o", "json")
    assert code == 0
    topics = json.loads(out)["topics"]
    assert [t["name"] for t in topics] == ["__consumer_offsets", "orders", "orders-dlq", "payments"]
    assert topics[0] == {"name": "__consumer_offsets", "topic_id": uuid_to_str(bytes([18]) * 16), "internal": True}
    assert not topics[1]["internal"]


def test_kafka_action_flags_map_to_subcommands(server: ServerThread) -> None:
    server.controller.responses["DescribeTopics"] = sample_describe()
    code, out, _ = invoke("topics", "--bootstrap-server", server.address, "--describe", "--topic", "orders")
    assert code == 0
    assert out.startswith("Topic: orders\t")
    code, _, err = invoke("topics", "--list", "--describe", "--bootstrap-server", server.address)
    assert code == 2
    assert "exactly one action" in err


def test_list_bad_regex_is_a_usage_error() -> None:
    code, _, err = invoke("topics", "list", "--bootstrap-server", "127.0.0.1:1", "--topic", "orders(")
    assert code == 2
    assert "--topic" in err and "not a regular expression" in err


def test_describe_if_exists_and_exclude_internal(server: ServerThread) -> None:
    response = sample_describe()
    response.topics.add(name="gone", error_code=errors_pb2.UNKNOWN_TOPIC_OR_PARTITION, error_message="No such topic")
    response.topics.add(name="__consumer_offsets", topic_id=b"\x03" * 16)
    server.controller.responses["DescribeTopics"] = response
    args = ("topics", "describe", "--bootstrap-server", server.address)
    code, _, _ = invoke(*args)
    assert code == 1
    code, out, _ = invoke(*args, "--if-exists", "--exclude-internal", "-o", "json")
    assert code == 0
    assert [t["name"] for t in json.loads(out)["topics"]] == ["orders"]


def test_describe_prints_kafka_layout(server: ServerThread) -> None:
    server.controller.responses["DescribeTopics"] = sample_describe()
    code, out, _ = invoke("topics", "describe", "--bootstrap-server", server.address, "--topic", "orders")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("Topic: orders\tTopicId: ")
    assert "PartitionCount: 2\tReplicationFactor: 3\tConfigs: cleanup.policy=compact" in lines[0]
    assert (
        lines[1] == "\tTopic: orders\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1,2,3\tElr: N/A\tLastKnownElr: N/A"
    )
    assert (
        lines[2] == "\tTopic: orders\tPartition: 1\tLeader: none\tReplicas: 2,3,1\tIsr: 2\tElr: N/A\tLastKnownElr: N/A"
    )
    assert list(server.controller.requests[0][1].topics) == ["orders"]


def test_describe_is_linearizable_unless_asked_for_stale(server: ServerThread) -> None:
    server.controller.responses["DescribeTopics"] = sample_describe()
    assert invoke("topics", "describe", "--bootstrap-server", server.address)[0] == 0
    args = ("topics", "describe", "--bootstrap-server", server.address, "--consistency", "stale")
    assert invoke(*args)[0] == 0
    sent = [request.consistency for _, request in server.controller.requests]
    assert sent == [controller_pb2.LINEARIZABLE, controller_pb2.STALE]


def test_describe_sends_its_partition_limit_and_refuses_one_below_1(server: ServerThread) -> None:
    server.controller.responses["DescribeTopics"] = sample_describe()
    args = ("topics", "describe", "--bootstrap-server", server.address)
    assert invoke(*args, "--partition-size-limit-per-response", "20")[0] == 0
    assert invoke(*args)[0] == 0
    assert [request.response_partition_limit for _, request in server.controller.requests] == [20, 0]
    code, _, err = invoke(*args, "--partition-size-limit-per-response", "0")
    assert code == 2 and "--partition-size-limit-per-response" in err


def test_describe_json_shape(server: ServerThread) -> None:
    server.controller.responses["DescribeTopics"] = sample_describe()
    code, out, _ = invoke("topics", "describe", "--bootstrap-server", server.address, "-o", "json")
    assert code == 0
    topic = json.loads(out)["topics"][0]
    assert {"name", "topic_id", "configs", "partitions"} <= set(topic)
    assert uuid_from_str(topic["topic_id"]) == bytes(range(16))
    assert topic["partitions"][1] == {
        "partition": 1, "leader": -1, "leader_epoch": 4, "partition_epoch": 0, "replicas": [2, 3, 1], "isr": [2],
        "adding_replicas": [], "removing_replicas": [],
    }  # fmt: skip


def test_alter_and_delete(server: ServerThread) -> None:
    server.controller.responses["CreatePartitions"] = controller_pb2.CreatePartitionsResponse(
        results=[controller_pb2.CreatePartitionsTopicResult(name="orders")]
    )
    server.controller.responses["DeleteTopics"] = controller_pb2.DeleteTopicsResponse(
        responses=[
            controller_pb2.DeletableTopicResult(
                name="gone", error_code=errors_pb2.UNKNOWN_TOPIC_OR_PARTITION, error_message="no topic 'gone'"
            )
        ]
    )
    code, out, _ = invoke(
        "topics", "alter", "--bootstrap-server", server.address, "--topic", "orders", "--partitions", "6"
    )
    assert code == 0
    assert "now has 6 partitions" in out
    assert server.controller.requests[0][1].topics[0].count == 6
    code, _, err = invoke("topics", "delete", "--bootstrap-server", server.address, "--topic", "gone")
    assert code == 1
    assert "UNKNOWN_TOPIC_OR_PARTITION: no topic 'gone'" in err


def test_unreachable_quorum_exits_1_with_a_clear_message() -> None:
    code, _, err = invoke("topics", "describe", "--bootstrap-server", "127.0.0.1:1", "--timeout", "0.3")
    assert code == 1
    assert "no raftmeta node at --bootstrap-server: 127.0.0.1:1: connection refused" in err


def test_topic_id_text_forms_roundtrip() -> None:
    raw = bytes(range(16))
    assert len(uuid_to_str(raw)) == 22
    assert uuid_from_str(uuid_to_str(raw)) == raw
    assert uuid_from_str(raw.hex()) == raw
    with pytest.raises(ValueError, match="is not a topic id"):
        uuid_from_str("!!")
