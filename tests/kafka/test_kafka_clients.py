"""Real Kafka admin clients (confluent-kafka's AdminClient, kafka-python's KafkaAdminClient)
against a real 3-node quorum with Kafka listeners: what they create, alter and delete is what the
gRPC client then sees, and hostile frames leave every node up with nothing written."""

from __future__ import annotations

import functools
import json
import socket
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest
from click.testing import CliRunner
from confluent_kafka import KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)

from raftmeta.api.addresses import parse_host_port
from raftmeta.api.ids import uuid_to_str
from raftmeta.cli.brokers import _fleet_call
from raftmeta.cli.main import cli
from raftmeta.client import RetryPolicy, SyncControllerClient
from raftmeta.local import quorum as local_quorum
from raftmeta.v1 import errors_pb2
from tests.integration.test_node import wait_until
from tests.kafka.helpers import framed, request_bytes
from tests.kafka.live import advertised_brokers, kafka_quorum, placement
from tests.kafka.samples import REQUESTS

with warnings.catch_warnings():
    # kafka-python 3.0 loads its JSON schemas with importlib.resources.read_text, deprecated
    # since Python 3.11; the suite turns warnings into errors.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import TopicPartition  # type: ignore[import-untyped]
    from kafka.admin import ConfigResource as KafkaPythonConfigResource  # type: ignore[import-untyped]
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewPartitions as KafkaPythonNewPartitions
    from kafka.admin import NewTopic as KafkaPythonNewTopic
    from kafka.errors import InvalidReplicationFactorError, TopicAlreadyExistsError  # type: ignore[import-untyped]

pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(180),
    pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning"),
]
T = TypeVar("T")

TIMEOUT_S = 20
POLICY_VIOLATION = 44  # Kafka's code; raftmeta carries it as gRPC metadata, not in ErrorCode


@pytest.fixture(scope="module")
def quorum(tmp_path_factory: pytest.TempPathFactory) -> Iterator[local_quorum.LocalQuorum]:
    with kafka_quorum(tmp_path_factory.mktemp("kafka") / "q") as started:
        yield started


@pytest.fixture(scope="module")
def grpc_client(quorum: local_quorum.LocalQuorum) -> Iterator[SyncControllerClient]:
    with SyncControllerClient(quorum.bootstrap_server, retry=RetryPolicy(deadline_s=20)) as client:
        yield client


@pytest.fixture(scope="module")
def confluent(quorum: local_quorum.LocalQuorum) -> AdminClient:
    assert quorum.kafka_bootstrap_servers is not None
    return AdminClient({"bootstrap.servers": quorum.kafka_bootstrap_servers, "log_level": 3})


@pytest.fixture(scope="module")
def kafka_python(quorum: local_quorum.LocalQuorum) -> Iterator[KafkaAdminClient]:
    assert quorum.kafka_bootstrap_servers is not None
    client = KafkaAdminClient(bootstrap_servers=quorum.kafka_bootstrap_servers.split(","), request_timeout_ms=20_000)
    yield client
    client.close()


def results(futures: dict[Any, Any]) -> dict[Any, Any]:
    """Each future's result, or the exception it raised."""
    out: dict[Any, Any] = {}
    for key, future in futures.items():
        try:
            out[key] = future.result(timeout=TIMEOUT_S)
        except Exception as exc:
            out[key] = exc
    return out


def kafka_error(outcome: Any) -> int:
    """The Kafka error code a failed future carries (librdkafka's names differ from Kafka's)."""
    assert isinstance(outcome, KafkaException), outcome
    code: int = outcome.args[0].code()
    return code


def logged_topic(node_dir: str, topic: str) -> tuple[str, list[list[int]], dict[str, str]] | None:
    """(topic id, replicas per partition, configs) as node ``node_dir``'s log has them, read with
    ``raftmeta log dump`` (the log itself, not the controller's image); None if not there (yet)."""
    result = CliRunner().invoke(cli, ["log", "dump", "--data-dir", node_dir, "--output", "json"])
    assert result.exit_code == 0, result.output
    records = [r for batch in json.loads(result.stdout)["batches"] for r in batch["records"]]
    ids = [r["fields"]["topic_id"] for r in records if r["type"] == "topic" and r["fields"]["name"] == topic]
    if not ids:
        return None
    replicas = [
        r["fields"]["replicas"] for r in records if r["type"] == "partition" and r["fields"]["topic_id"] == ids[-1]
    ]
    configs = {r["fields"]["name"]: r["fields"]["value"] for r in records
               if r["type"] == "config" and r["fields"]["resource_name"] == topic}  # fmt: skip
    return ids[-1], replicas, configs


def eventually(check: Callable[[], T | None], what: str) -> T:
    """Poll until ``check`` returns something (a state reached, not a time asserted)."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        value = check()
        if value is not None:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {TIMEOUT_S} s")
        time.sleep(0.1)


# -- confluent-kafka --------------------------------------------------------------------------------


def test_confluent_metadata_lists_the_fleet_at_the_nodes_and_the_cluster(
    quorum: local_quorum.LocalQuorum, confluent: AdminClient, grpc_client: SyncControllerClient
) -> None:
    metadata = confluent.list_topics(timeout=TIMEOUT_S)
    brokers = advertised_brokers(quorum, grpc_client)
    assert {b.id: f"{b.host}:{b.port}" for b in metadata.brokers.values()} == brokers
    assert str(metadata.cluster_id) == quorum.cluster_id == grpc_client.describe_cluster().cluster_id
    assert metadata.controller_id in brokers


def test_confluent_creates_auto_and_manual_topics_as_grpc_and_the_log_see_them(
    quorum: local_quorum.LocalQuorum, confluent: AdminClient, grpc_client: SyncControllerClient
) -> None:
    created = results(
        confluent.create_topics(
            [
                NewTopic("cf-auto", 3, 3, config={"retention.ms": "60000", "raftmeta.placer": "balanced"}),
                NewTopic("cf-manual", 2, replica_assignment=[[1, 2], [2, 3]]),
            ],
            operation_timeout=TIMEOUT_S,
        )
    )
    assert created == {"cf-auto": None, "cf-manual": None}
    auto = placement(grpc_client, "cf-auto")
    assert len(auto) == 3 and all(len(replicas) == 3 for _, replicas, _ in auto)
    assert placement(grpc_client, "cf-manual") == [(1, [1, 2], [1, 2]), (2, [2, 3], [2, 3])]
    (described,) = grpc_client.describe_topics(["cf-auto"]).topics
    assert dict(described.configs) == {"retention.ms": "60000"}  # the placer is not a topic config

    metadata = confluent.list_topics(timeout=TIMEOUT_S)
    for name in ("cf-auto", "cf-manual"):
        seen = [(p.leader, list(p.replicas), list(p.isrs)) for _, p in sorted(metadata.topics[name].partitions.items())]
        assert seen == placement(grpc_client, name)

    # And every node's log holds the same records: one topic id, the placement, the stored configs.
    expected = (uuid_to_str(described.topic_id), [r for _, r, _ in auto], {"retention.ms": "60000"})
    for node in quorum.nodes:
        node_dir = node.data_dir
        assert eventually(functools.partial(logged_topic, node_dir, "cf-auto"), f"the log of {node_dir}") == expected


def test_confluent_validate_only_and_errors_write_nothing(
    confluent: AdminClient, grpc_client: SyncControllerClient
) -> None:
    before = grpc_client.describe_quorum().high_watermark
    outcome = results(
        confluent.create_topics(
            [
                NewTopic("cf-dry", 2, 2),
                NewTopic("bad/name", 1, 1),
                NewTopic("cf-too-wide", 1, 7),
                NewTopic("cf-bad-config", 1, 1, config={"cleanup.policy": "sometimes"}),
            ],
            validate_only=True,
        )
    )
    assert outcome["cf-dry"] is None
    assert kafka_error(outcome["bad/name"]) == errors_pb2.INVALID_TOPIC_EXCEPTION
    assert kafka_error(outcome["cf-too-wide"]) == errors_pb2.INVALID_REPLICATION_FACTOR
    assert kafka_error(outcome["cf-bad-config"]) == errors_pb2.INVALID_CONFIG
    described = grpc_client.describe_topics(["cf-dry", "cf-too-wide"]).topics
    assert [t.error_code for t in described] == [3, 3]  # UNKNOWN_TOPIC_OR_PARTITION: nothing written
    # Over a request limit: refused before any controller sees it, so again nothing is written.
    huge = results(confluent.create_topics([NewTopic("cf-huge", 50_000, 1)]))
    assert kafka_error(huge["cf-huge"]) == POLICY_VIOLATION
    assert grpc_client.describe_topics(["cf-huge"]).topics[0].error_code == 3
    assert grpc_client.describe_quorum().high_watermark == before


def test_confluent_adds_partitions_and_alters_configs(
    confluent: AdminClient, grpc_client: SyncControllerClient
) -> None:
    assert results(confluent.create_topics([NewTopic("cf-grow", 1, 2)])) == {"cf-grow": None}
    assert results(confluent.create_partitions([NewPartitions("cf-grow", 3)])) == {"cf-grow": None}
    assert len(placement(grpc_client, "cf-grow")) == 3
    shrink = results(confluent.create_partitions([NewPartitions("cf-grow", 2)]))
    assert kafka_error(shrink["cf-grow"]) == errors_pb2.INVALID_PARTITIONS

    resource = ConfigResource("topic", "cf-grow", incremental_configs=[
        ConfigEntry("retention.ms", "5000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
    ])  # fmt: skip
    assert list(results(confluent.incremental_alter_configs([resource])).values()) == [None]
    (described,) = grpc_client.describe_topics(["cf-grow"]).topics
    assert dict(described.configs) == {"retention.ms": "5000", "cleanup.policy": "delete,compact"}
    (configs,) = results(confluent.describe_configs([ConfigResource("topic", "cf-grow")])).values()
    assert configs["retention.ms"].value == "5000" and not configs["retention.ms"].is_default
    assert configs["segment.bytes"].is_default  # every known config is listed, as a broker does


def test_confluent_deletes(confluent: AdminClient, grpc_client: SyncControllerClient) -> None:
    assert results(confluent.create_topics([NewTopic("cf-gone", 1, 1)])) == {"cf-gone": None}
    assert results(confluent.delete_topics(["cf-gone"], operation_timeout=TIMEOUT_S)) == {"cf-gone": None}
    assert grpc_client.describe_topics(["cf-gone"]).topics[0].error_code == 3
    missing = results(confluent.delete_topics(["cf-never"]))
    assert kafka_error(missing["cf-never"]) == errors_pb2.UNKNOWN_TOPIC_OR_PARTITION


def test_confluent_through_one_follower_only_is_forwarded(
    quorum: local_quorum.LocalQuorum, grpc_client: SyncControllerClient
) -> None:
    leader = grpc_client.describe_quorum().leader_id
    follower = next(n for n in quorum.nodes if n.id != leader)
    assert follower.kafka_address is not None
    # Only this node is reachable as a bootstrap server; Metadata then names it the controller.
    admin = AdminClient({"bootstrap.servers": follower.kafka_address, "log_level": 3})
    assert results(admin.create_topics([NewTopic("cf-forwarded", 2, 2)])) == {"cf-forwarded": None}
    assert len(placement(grpc_client, "cf-forwarded")) == 2


# -- kafka-python -----------------------------------------------------------------------------------


def test_kafka_python_creates_describes_grows_and_deletes(
    kafka_python: KafkaAdminClient, grpc_client: SyncControllerClient
) -> None:
    kafka_python.create_topics([
        KafkaPythonNewTopic("kp-auto", 2, 3, topic_configs={"cleanup.policy": "compact"}),
        # kafka-python sends explicit counts with an assignment (see raftmeta.kafka.topics).
        KafkaPythonNewTopic("kp-manual", 2, 2, replica_assignments={0: [3, 4], 1: [4, 5]}),
    ])  # fmt: skip
    assert placement(grpc_client, "kp-manual") == [(3, [3, 4], [3, 4]), (4, [4, 5], [4, 5])]
    assert {"kp-auto", "kp-manual"} <= set(kafka_python.list_topics())
    (described,) = kafka_python.describe_topics(["kp-auto"])
    assert [(p["leader_id"], p["replica_nodes"], p["isr_nodes"]) for p in described["partitions"]] == placement(
        grpc_client, "kp-auto"
    )
    with pytest.raises(TopicAlreadyExistsError):
        kafka_python.create_topics([KafkaPythonNewTopic("kp-auto", 1, 1)])
    with pytest.raises(InvalidReplicationFactorError):
        kafka_python.create_topics([KafkaPythonNewTopic("kp-wide", 1, 7)], validate_only=True)

    kafka_python.create_partitions({"kp-auto": KafkaPythonNewPartitions(4)})
    assert len(placement(grpc_client, "kp-auto")) == 4
    kafka_python.delete_topics(["kp-manual"])
    assert grpc_client.describe_topics(["kp-manual"]).topics[0].error_code == 3


def test_kafka_python_configs(kafka_python: KafkaAdminClient, grpc_client: SyncControllerClient) -> None:
    kafka_python.create_topics([KafkaPythonNewTopic("kp-configs", 1, 1)])
    kafka_python.alter_configs([KafkaPythonConfigResource("TOPIC", "kp-configs", configs={"retention.ms": "7000"})])
    assert dict(grpc_client.describe_topics(["kp-configs"]).topics[0].configs) == {"retention.ms": "7000"}
    described = kafka_python.describe_configs([KafkaPythonConfigResource("TOPIC", "kp-configs")])
    assert described["topic"]["kp-configs"]["retention.ms"]["value"] == "7000"


def test_kafka_python_elects_reassigns_and_reads_the_quorum(
    kafka_python: KafkaAdminClient, grpc_client: SyncControllerClient
) -> None:
    kafka_python.create_topics([KafkaPythonNewTopic("kp-moves", 1, 3)])
    elected = kafka_python.elect_leaders(0, {"kp-moves": [0]}, raise_errors=False)
    (partition,) = elected.replica_election_results[0].partition_result
    assert partition.error_code == 84  # ELECTION_NOT_NEEDED: the preferred replica already leads

    ((_, replicas, _),) = placement(grpc_client, "kp-moves")
    target = [b for b in range(6) if b not in replicas][:3]
    assert kafka_python.alter_partition_reassignments({TopicPartition("kp-moves", 0): target}) == {
        TopicPartition("kp-moves", 0): None
    }
    # The simulated brokers catch up by heartbeat and the move completes, as through gRPC.
    eventually(lambda: True if placement(grpc_client, "kp-moves")[0][1] == target else None, "the reassignment")
    assert kafka_python.list_partition_reassignments({"kp-moves": [0]}) == {}

    quorum_state = kafka_python.describe_metadata_quorum()
    (partition_state,) = quorum_state["topics"][0]["partitions"]
    grpc_quorum = grpc_client.describe_quorum()
    assert partition_state["leader_id"] == grpc_quorum.leader_id
    assert partition_state["leader_epoch"] == grpc_quorum.leader_epoch
    assert sorted(v["replica_id"] for v in partition_state["current_voters"]) == [1, 2, 3]

    paged = kafka_python.describe_topic_partitions(["kp-moves"])
    assert [p["replica_nodes"] for p in paged["topics"][0]["partitions"]] == [target]


# -- hostile frames against a real node -------------------------------------------------------------


HOSTILE = [
    (1 << 30).to_bytes(4, "big") + b"\0" * 16,  # oversized
    framed(b"\x00\x13\x00\x07\x00\x00\x00\x01" + b"\xff" * 64),  # garbage CreateTopics body
    framed(b"\x00\x00\x00\x09\x00\x00\x00\x01\x00\x00"),  # Produce: not served
    framed(request_bytes(19, 7, REQUESTS[19])[:-1] + b"\x05\xff\xff\xff\xff\x0f"),  # garbage tagged fields
    framed(request_bytes(19, 7, REQUESTS[19]))[:30],  # truncated, then the client goes away
]


def test_hostile_frames_close_the_connection_and_write_nothing(
    quorum: local_quorum.LocalQuorum, grpc_client: SyncControllerClient, confluent: AdminClient
) -> None:
    before = grpc_client.describe_quorum().high_watermark
    for node in quorum.nodes:
        assert node.kafka_address is not None
        for payload in HOSTILE:
            with socket.create_connection(
                parse_host_port(node.kafka_address, "Kafka address"), timeout=TIMEOUT_S
            ) as sock:
                sock.sendall(payload)
                if payload is HOSTILE[-1]:
                    continue
                assert sock.recv(1024) == b""  # closed by the node, without an answer
    assert grpc_client.describe_quorum().high_watermark == before
    assert all(local_quorum.alive(n.pid) for n in quorum.nodes)
    assert str(confluent.list_topics(timeout=TIMEOUT_S).cluster_id) == quorum.cluster_id  # still serving


def test_a_failed_broker_leaves_metadata_and_a_recovered_one_comes_back(
    quorum: local_quorum.LocalQuorum, confluent: AdminClient, grpc_client: SyncControllerClient
) -> None:
    """As a dead Kafka broker does: fenced after its session timeout, it is no longer listed (by
    every node once its image has the fencing: each answers from its own, as Kafka's brokers do)."""

    def listed() -> set[int]:
        return {b.id for b in confluent.list_topics(timeout=TIMEOUT_S).brokers.values()}

    def fenced() -> set[int]:
        return {b.broker_id for b in grpc_client.describe_cluster().brokers if b.fenced}

    wait_until(lambda: fenced() == set(), what="every broker unfenced")
    assert set(advertised_brokers(quorum, grpc_client)) == set(range(6))
    wait_until(lambda: listed() == set(range(6)), what="every broker listed")
    _fleet_call(quorum.bootstrap_server, TIMEOUT_S, "FailBrokers", (1,))
    try:
        wait_until(lambda: fenced() == {1}, timeout_s=60, what="broker 1 fenced")
        wait_until(lambda: listed() == {0, 2, 3, 4, 5}, what="broker 1 no longer listed")
    finally:
        _fleet_call(quorum.bootstrap_server, TIMEOUT_S, "RecoverBrokers", (1,))
    wait_until(lambda: fenced() == set(), timeout_s=60, what="broker 1 unfenced")
    wait_until(lambda: listed() == set(range(6)), what="broker 1 listed again")
