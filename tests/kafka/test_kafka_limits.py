"""Issue 46, item 9: raftmeta's limits answer as Kafka does, per topic. One topic over a limit
fails that topic only, with Kafka's code (a replication factor Kafka cannot meet is
INVALID_REPLICATION_FACTOR, 38), through the Kafka protocol and through gRPC alike; only what
Kafka refuses for a whole request (too many partitions in it) fails every topic, with
POLICY_VIOLATION (44)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from raftmeta.client import RetryPolicy, SyncControllerClient
from raftmeta.local import quorum as local_quorum
from raftmeta.v1 import controller_pb2, errors_pb2

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

TIMEOUT_S = 30
UNKNOWN_TOPIC_OR_PARTITION = 3


@pytest.fixture(scope="module")
def quorum(tmp_path_factory: pytest.TempPathFactory) -> Iterator[local_quorum.LocalQuorum]:
    directory: Path = tmp_path_factory.mktemp("limits") / "q"
    started = local_quorum.up(directory, nodes=1, brokers=9, racks=3, kafka=True, metrics=False)
    try:
        yield started
    finally:
        local_quorum.down(local_quorum.LocalQuorum.load(directory))


@pytest.fixture(scope="module")
def grpc_client(quorum: local_quorum.LocalQuorum) -> Iterator[SyncControllerClient]:
    with SyncControllerClient(quorum.bootstrap_server, retry=RetryPolicy(deadline_s=TIMEOUT_S)) as client:
        yield client


def create_with_confluent(quorum: local_quorum.LocalQuorum, topics: list[NewTopic]) -> dict[str, int]:
    """Each topic's Kafka error code (0: created) as confluent-kafka's AdminClient reports it."""
    assert quorum.kafka_bootstrap_servers is not None
    admin = AdminClient({"bootstrap.servers": quorum.kafka_bootstrap_servers, "log_level": 3})
    codes: dict[str, int] = {}
    for name, future in admin.create_topics(topics, request_timeout=TIMEOUT_S).items():
        try:
            future.result(timeout=TIMEOUT_S)
            codes[name] = 0
        except KafkaException as exc:
            error: Any = exc.args[0]
            codes[name] = int(error.code())
    return codes


def exists(client: SyncControllerClient, name: str) -> bool:
    (described,) = client.describe_topics([name]).topics
    return bool(described.error_code != UNKNOWN_TOPIC_OR_PARTITION)


def test_kafka_create_topics_with_one_replication_factor_over_the_brokers_creates_the_others(
    quorum: local_quorum.LocalQuorum, grpc_client: SyncControllerClient
) -> None:
    codes = create_with_confluent(quorum, [NewTopic("k-a", 3, 3), NewTopic("k-rf99", 1, 99), NewTopic("k-b", 2, 3)])
    assert codes == {"k-a": 0, "k-rf99": errors_pb2.INVALID_REPLICATION_FACTOR, "k-b": 0}
    assert [exists(grpc_client, name) for name in ("k-a", "k-rf99", "k-b")] == [True, False, True]


def test_kafka_replication_factor_30_on_9_brokers_is_invalid_replication_factor(
    quorum: local_quorum.LocalQuorum,
) -> None:
    assert create_with_confluent(quorum, [NewTopic("k-rf30", 1, 30)]) == {
        "k-rf30": errors_pb2.INVALID_REPLICATION_FACTOR
    }


def test_grpc_create_topics_answers_per_topic_too(grpc_client: SyncControllerClient) -> None:
    topics = [
        controller_pb2.CreatableTopic(name=name, num_partitions=1, replication_factor=rf)
        for name, rf in (("g-a", 3), ("g-rf99", 99), ("g-b", 3))
    ]
    response = grpc_client.create_topics(controller_pb2.CreateTopicsRequest(topics=topics))
    assert [(t.name, t.error_code) for t in response.topics] == [
        ("g-a", errors_pb2.NONE),
        ("g-rf99", errors_pb2.INVALID_REPLICATION_FACTOR),
        ("g-b", errors_pb2.NONE),
    ]
    assert "99" in response.topics[1].error_message and "PER_PARTITION_MAX" not in response.topics[1].error_message


def test_too_many_partitions_in_one_request_fails_every_topic_with_policy_violation_as_kafka_does(
    quorum: local_quorum.LocalQuorum, grpc_client: SyncControllerClient
) -> None:
    codes = create_with_confluent(quorum, [NewTopic("k-small", 1, 1), NewTopic("k-huge", 100_000, 1)])
    assert codes == {"k-small": errors_pb2.POLICY_VIOLATION, "k-huge": errors_pb2.POLICY_VIOLATION}
    assert not exists(grpc_client, "k-small") and not exists(grpc_client, "k-huge")
