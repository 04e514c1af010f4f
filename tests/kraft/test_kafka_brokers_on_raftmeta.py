"""Real Apache Kafka brokers of the pinned release on a raftmeta quorum, from the launcher:
``raftmeta quorum up --kafka-brokers 3 --racks 3`` starts three voters and three brokers
(``process.roles=broker``) on the voters' Kafka listeners; data flows through the brokers while
raftmeta commits their metadata.

One quorum for the module (three JVMs): the launcher's JSON, the brokers as raftmeta sees them,
then a topic created through raftmeta's gRPC client (the striped placer) and one through Kafka's
AdminClient at the brokers (which forward its CreateTopics in an Envelope), an idempotent producer
(acks=all: its producer id block comes from AllocateProducerIds) and a consumer group (its
``__consumer_offsets`` auto-created through an Envelope): every message arrives exactly once.
``quorum down`` stops the brokers with the nodes.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from raftmeta.client import RetryPolicy, SyncControllerClient
from raftmeta.local import quorum as local_quorum
from raftmeta.local.python_command import raftmeta_command
from raftmeta.v1 import controller_pb2

pytestmark = [pytest.mark.kraft, pytest.mark.timeout(600)]
BROKERS = 3
PARTITIONS = 6
# Three JVMs and a quorum on a loaded two-core machine: the launcher's own ready timeout (180 s)
# bounds the brokers; this bounds the command around it.
UP_TIMEOUT_S = 420.0
CLIENT_TIMEOUT_S = 120.0


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    data_dir = tmp_path_factory.mktemp("raftmeta-kafka-brokers")
    up = subprocess.run(
        raftmeta_command(
            "quorum", "up", "--data-dir", str(data_dir), "--nodes", "3",
            "--kafka-brokers", str(BROKERS), "--racks", "3", "--detach", "--output", "json",
        ),
        capture_output=True, text=True, timeout=UP_TIMEOUT_S, check=False,
    )  # fmt: skip
    try:
        assert up.returncode == 0, f"quorum up failed ({up.returncode}):\n{up.stdout}\n{up.stderr[-6000:]}"
        document: dict[str, Any] = json.loads(up.stdout)
        document["data_dir"] = str(data_dir)
        yield document
    finally:
        down = subprocess.run(
            raftmeta_command("quorum", "down", "--data-dir", str(data_dir), "--output", "json"),
            capture_output=True, text=True, timeout=UP_TIMEOUT_S, check=False,
        )  # fmt: skip
        assert down.returncode == 0, down.stderr[-4000:]
        stopped = set(json.loads(down.stdout)["stopped_pids"])
        started = json.loads(up.stdout) if up.returncode == 0 else {"kafka_brokers": []}
        assert {b["pid"] for b in started["kafka_brokers"]} <= stopped, "quorum down stops the Kafka brokers too"


def test_quorum_up_lists_the_kafka_brokers_and_raftmeta_registers_them_unfenced(plane: dict[str, Any]) -> None:
    brokers = plane["kafka_brokers"]
    assert [(b["id"], b["rack"]) for b in brokers] == [(100, "rack-a"), (101, "rack-b"), (102, "rack-c")]
    assert all(local_quorum.alive(b["pid"]) for b in brokers)
    assert plane["kafka_brokers_bootstrap"] == ",".join(b["address"] for b in brokers)
    with SyncControllerClient(plane["bootstrap_server"], retry=RetryPolicy(deadline_s=30)) as client:
        registered = {b.broker_id: (b.rack, b.fenced) for b in client.describe_cluster().brokers}
    assert registered == {100: ("rack-a", False), 101: ("rack-b", False), 102: ("rack-c", False)}


def _produce(bootstrap: str, topics: list[str], count: int) -> set[str]:
    """``count`` messages per topic from an idempotent producer with acks=all; the acknowledged ids."""
    acknowledged: set[str] = set()
    failures: list[str] = []

    def delivered(error: Any, message: Any) -> None:
        if error is not None:
            failures.append(str(error))
        else:
            acknowledged.add(message.value().decode())

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
    for topic in topics:
        for index in range(count):
            value = f"{topic}:{index}"
            while True:
                try:
                    producer.produce(topic, key=str(index).encode(), value=value.encode(), on_delivery=delivered)
                    break
                except BufferError:  # the local queue is full: let deliveries drain it
                    producer.poll(0.1)
            producer.poll(0)
    remaining = producer.flush(CLIENT_TIMEOUT_S)
    assert remaining == 0 and not failures, f"{remaining} messages undelivered; failures: {failures[:5]}"
    return acknowledged


def _consume(bootstrap: str, topics: list[str], expected: int) -> Counter[str]:
    """Read with a consumer group from the start until ``expected`` messages arrived (each
    counted, so a duplicate shows), bounded by the client timeout."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"raftmeta-{uuid.uuid4()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": True,
        }
    )
    seen: Counter[str] = Counter()
    try:
        consumer.subscribe(topics)
        idle_polls = 0
        while sum(seen.values()) < expected and idle_polls < CLIENT_TIMEOUT_S:
            batch = consumer.consume(num_messages=1000, timeout=1.0)
            idle_polls = 0 if batch else idle_polls + 1
            for message in batch:
                value = message.value()
                if message.error() is not None or value is None:
                    raise KafkaException(message.error())
                seen[value.decode()] += 1
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return seen


def _data_flows(plane: dict[str, Any], count: int, suffix: str) -> None:
    bootstrap = plane["kafka_brokers_bootstrap"]
    striped, admin_made = f"striped-{suffix}", f"admin-{suffix}"
    with SyncControllerClient(plane["bootstrap_server"], retry=RetryPolicy(deadline_s=30)) as client:
        created = client.create_topics(
            controller_pb2.CreateTopicsRequest(
                topics=[
                    controller_pb2.CreatableTopic(
                        name=striped, num_partitions=PARTITIONS, replication_factor=3, placer="striped"
                    )
                ]
            )
        )
        assert [t.error_code for t in created.topics] == [0], created
    # Kafka's AdminClient at the brokers: they forward the CreateTopics to raftmeta in an Envelope.
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: its futures fail once it is collected
    futures = admin.create_topics(
        [NewTopic(admin_made, num_partitions=PARTITIONS, replication_factor=3)], operation_timeout=30
    )
    futures[admin_made].result(timeout=CLIENT_TIMEOUT_S)
    with SyncControllerClient(plane["bootstrap_server"], retry=RetryPolicy(deadline_s=30)) as client:
        described = client.describe_topics([striped, admin_made])
    for topic in described.topics:
        assert topic.error_code == 0 and len(topic.partitions) == PARTITIONS, topic
        assert all(sorted(p.replicas) == [100, 101, 102] for p in topic.partitions), topic

    acknowledged = _produce(bootstrap, [striped, admin_made], count)
    assert len(acknowledged) == 2 * count
    seen = _consume(bootstrap, [striped, admin_made], 2 * count)
    duplicated = sorted(m for m, n in seen.items() if n > 1)
    missing = sorted(acknowledged - set(seen))
    assert not duplicated and not missing, f"duplicated {duplicated[:5]}, missing {missing[:5]} of {2 * count}"
    assert set(seen) == acknowledged


def test_messages_flow_through_real_brokers_exactly_once(plane: dict[str, Any]) -> None:
    _data_flows(plane, 2_000, "ci")


@pytest.mark.slow
def test_100000_messages_flow_through_real_brokers_exactly_once(plane: dict[str, Any]) -> None:
    _data_flows(plane, 50_000, "slow")  # two topics: 100,000 messages
