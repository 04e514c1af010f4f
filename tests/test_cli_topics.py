"""``raftmeta topics`` against a scripted ControllerService: the requests it builds (Kafka's
flags) and the answers it prints (Kafka's layout, DESIGN.md §8 JSON, exit codes)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from click.testing import CliRunner

from raftmeta.cli.main import cli
from raftmeta.ids import uuid_from_str, uuid_to_str
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
    assert "Topic t created" in out
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
        (["--replica-assignment", "0:1", "--partitions", "2"], "either --replica-assignment or --partitions"),
    ],
)
def test_create_usage_errors_exit_2_and_name_the_flag(args: list[str], message: str) -> None:
    code, out, err = invoke("topics", "create", "--bootstrap-server", "127.0.0.1:1", "--topic", "t", *args)
    assert code == 2
    assert message in out + err


def test_describe_prints_kafka_layout(server: ServerThread) -> None:
    server.controller.responses["DescribeTopics"] = sample_describe()
    code, out, _ = invoke("topics", "describe", "--bootstrap-server", server.address, "--topic", "orders")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("Topic: orders\tTopicId: ")
    assert "PartitionCount: 2\tReplicationFactor: 3\tConfigs: cleanup.policy=compact" in lines[0]
    assert lines[1] == "\tTopic: orders\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1,2,3"
    assert lines[2] == "\tTopic: orders\tPartition: 1\tLeader: none\tReplicas: 2,3,1\tIsr: 2"
    assert list(server.controller.requests[0][1].topics) == ["orders"]


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
    assert "DescribeTopics failed: UNAVAILABLE" in err


def test_topic_id_text_forms_roundtrip() -> None:
    raw = bytes(range(16))
    assert len(uuid_to_str(raw)) == 22
    assert uuid_from_str(uuid_to_str(raw)) == raw
    assert uuid_from_str(raw.hex()) == raw
    with pytest.raises(ValueError, match="is not a topic id"):
        uuid_from_str("!!")
