"""The clients people point at a Kafka endpoint, against a real 3-node quorum with Kafka listeners:
aiokafka's admin client, kafkajs's (Node, tests/kafka/js) and ``kcat -L`` (librdkafka's metadata
listing). Each lists, creates, describes and deletes topics (kcat only lists: topics are created
and deleted beside it), and what they do is checked through the gRPC client. kafkajs and aiokafka
edit configs with the legacy AlterConfigs, which replaces a topic's configs.

(confluent-kafka and kafka-python: tests/kafka/test_kafka_clients.py.)"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic  # type: ignore[import-untyped]
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType  # type: ignore[import-untyped]

from raftmeta.client import RetryPolicy, SyncControllerClient
from raftmeta.local import quorum as local_quorum
from raftmeta.v1 import controller_pb2, errors_pb2
from tests.kafka.live import advertised_brokers, kafka_quorum, placement

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]
T = TypeVar("T")

TIMEOUT_S = 20
KAFKAJS_DIR = Path(__file__).parent / "js"
UNKNOWN_TOPIC = errors_pb2.UNKNOWN_TOPIC_OR_PARTITION


@pytest.fixture(scope="module")
def quorum(tmp_path_factory: pytest.TempPathFactory) -> Iterator[local_quorum.LocalQuorum]:
    with kafka_quorum(tmp_path_factory.mktemp("clients") / "q") as started:
        yield started


@pytest.fixture(scope="module")
def bootstrap(quorum: local_quorum.LocalQuorum) -> str:
    assert quorum.kafka_bootstrap_servers is not None
    return quorum.kafka_bootstrap_servers


@pytest.fixture(scope="module")
def grpc_client(quorum: local_quorum.LocalQuorum) -> Iterator[SyncControllerClient]:
    with SyncControllerClient(quorum.bootstrap_server, retry=RetryPolicy(deadline_s=TIMEOUT_S)) as client:
        yield client


def stored_configs(client: SyncControllerClient, topic: str) -> dict[str, str]:
    (described,) = client.describe_topics([topic]).topics
    assert described.error_code == errors_pb2.NONE, described.error_message
    return dict(described.configs)


def exists(client: SyncControllerClient, topic: str) -> bool:
    (described,) = client.describe_topics([topic]).topics
    assert described.error_code in (errors_pb2.NONE, UNKNOWN_TOPIC), described.error_message
    return bool(described.error_code == errors_pb2.NONE)


# -- aiokafka ---------------------------------------------------------------------------------------


def with_aiokafka(bootstrap: str, work: Callable[[AIOKafkaAdminClient], Awaitable[T]]) -> T:
    async def run() -> T:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT_S * 1000)
        await admin.start()
        try:
            return await work(admin)
        finally:
            await admin.close()

    return asyncio.run(run())


def test_aiokafka_creates_lists_describes_and_deletes(bootstrap: str, grpc_client: SyncControllerClient) -> None:
    async def work(admin: AIOKafkaAdminClient) -> dict[str, Any]:
        created = await admin.create_topics([
            NewTopic("aio-auto", 3, 3, topic_configs={"retention.ms": "60000"}),
            NewTopic("aio-manual", -1, -1, replica_assignments={0: [1, 2], 1: [2, 3]}),
        ])  # fmt: skip
        again = await admin.create_topics([NewTopic("aio-auto", 1, 1)])
        listed = await admin.list_topics()
        described = await admin.describe_topics(["aio-auto", "aio-manual", "aio-never"])
        deleted = await admin.delete_topics(["aio-manual", "aio-never"])
        return {
            "created": created.to_object()["topic_errors"],
            "again": again.to_object()["topic_errors"],
            "listed": listed,
            "described": described,
            "deleted": deleted.to_object()["topic_error_codes"],
        }

    seen = with_aiokafka(bootstrap, work)
    assert [(t["topic"], t["error_code"]) for t in seen["created"]] == [("aio-auto", 0), ("aio-manual", 0)]
    assert [(t["topic"], t["error_code"]) for t in seen["again"]] == [("aio-auto", errors_pb2.TOPIC_ALREADY_EXISTS)]
    assert {"aio-auto", "aio-manual"} <= set(seen["listed"])
    described = {
        t["topic"]: [
            (p["leader"], p["replicas"], p["isr"]) for p in sorted(t["partitions"], key=lambda p: p["partition"])
        ]
        for t in seen["described"]
    }
    assert described["aio-auto"] == placement(grpc_client, "aio-auto")
    assert described["aio-manual"] == [(1, [1, 2], [1, 2]), (2, [2, 3], [2, 3])]  # deleted since: as assigned
    assert {t["topic"]: t["error_code"] for t in seen["described"]}["aio-never"] == UNKNOWN_TOPIC
    assert [(t["topic"], t["error_code"]) for t in seen["deleted"]] == [("aio-manual", 0), ("aio-never", UNKNOWN_TOPIC)]
    assert not exists(grpc_client, "aio-manual") and exists(grpc_client, "aio-auto")


def test_aiokafka_describes_configs_and_alter_configs_replaces_them(
    bootstrap: str, grpc_client: SyncControllerClient
) -> None:
    topic = ConfigResource(ConfigResourceType.TOPIC, "aio-configs")

    async def create(admin: AIOKafkaAdminClient) -> Any:
        return await admin.create_topics([NewTopic("aio-configs", 1, 1, topic_configs={"retention.ms": "60000"})])

    def describe() -> dict[str, tuple[str, int]]:
        (response,) = with_aiokafka(bootstrap, lambda admin: admin.describe_configs([topic]))
        (resource,) = response.to_object()["resources"]
        assert resource["error_code"] == 0
        return {c["config_names"]: (c["config_value"], c["config_source"]) for c in resource["config_entries"]}

    def alter(configs: dict[str, str | None]) -> tuple[int, str | None]:
        changed = ConfigResource(ConfigResourceType.TOPIC, "aio-configs", configs=configs)
        (response,) = with_aiokafka(bootstrap, lambda admin: admin.alter_configs([changed]))
        (resource,) = response.to_object()["resources"]
        return resource["error_code"], resource["error_message"]

    with_aiokafka(bootstrap, create)
    described = describe()
    assert described["retention.ms"] == ("60000", 1)  # set on the topic (DYNAMIC_TOPIC_CONFIG)
    assert described["segment.bytes"] == ("1073741824", 5)  # Kafka's default (DEFAULT_CONFIG)

    # Legacy AlterConfigs replaces: retention.ms, not named, goes back to its default.
    assert alter({"cleanup.policy": "compact"}) == (0, None)
    assert stored_configs(grpc_client, "aio-configs") == {"cleanup.policy": "compact"}
    assert describe()["retention.ms"] == ("604800000", 5)

    # An invalid value refuses the whole replacement, and so does a null value (as a Kafka broker
    # answers it): nothing changes.
    assert alter({"retention.ms": "soon"}) == (
        errors_pb2.INVALID_CONFIG,
        "Invalid value soon for configuration retention.ms: Not a number of type LONG",
    )
    assert alter({"retention.ms": None}) == (errors_pb2.INVALID_REQUEST, "Null value not supported for : retention.ms")
    assert stored_configs(grpc_client, "aio-configs") == {"cleanup.policy": "compact"}


# -- kafkajs ----------------------------------------------------------------------------------------


def kafkajs(bootstrap: str, steps: list[dict[str, Any]], tmp_path: Path) -> list[dict[str, Any]]:
    """Run ``steps`` with kafkajs's admin client (tests/kafka/js/admin.js); one result per step."""
    node = shutil.which("node")
    assert node is not None, "kafkajs needs Node.js: `node` is not on PATH"
    assert (KAFKAJS_DIR / "node_modules" / "kafkajs").is_dir(), (
        f"kafkajs is not installed: run `npm ci --prefix {KAFKAJS_DIR}` (part of `make test`'s set-up)"
    )
    ops = tmp_path / "ops.json"
    ops.write_text(json.dumps(steps))
    done = subprocess.run(
        [node, str(KAFKAJS_DIR / "admin.js"), bootstrap, str(ops)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"kafkajs failed ({done.returncode}):\n{done.stderr[-4000:]}"
    results: list[dict[str, Any]] = json.loads(done.stdout)
    assert len(results) == len(steps)
    return results


def ok(result: dict[str, Any]) -> Any:
    assert "ok" in result, result
    return result["ok"]


TOPIC = 2  # kafkajs's ConfigResourceTypes.TOPIC (Kafka's resource type)


def test_kafkajs_creates_lists_describes_and_deletes(
    quorum: local_quorum.LocalQuorum, bootstrap: str, grpc_client: SyncControllerClient, tmp_path: Path
) -> None:
    manual = [{"partition": 0, "replicas": [3, 4]}, {"partition": 1, "replicas": [4, 5]}]
    results = kafkajs(
        bootstrap,
        [
            {"op": "createTopics", "args": {"topics": [
                {"topic": "js-auto", "numPartitions": 3, "replicationFactor": 2,
                 "configEntries": [{"name": "retention.ms", "value": "60000"}]},
                {"topic": "js-manual", "replicaAssignment": manual},
            ]}},
            {"op": "createTopics", "args": {"validateOnly": True, "topics": [
                {"topic": "bad/name", "numPartitions": 1, "replicationFactor": 1},
                {"topic": "js-too-wide", "numPartitions": 1, "replicationFactor": 7},
            ]}},
            {"op": "listTopics"},
            {"op": "fetchTopicMetadata", "args": {"topics": ["js-auto", "js-manual"]}},
            {"op": "createPartitions", "args": {"topicPartitions": [{"topic": "js-auto", "count": 4}]}},
            {"op": "describeCluster"},
            {"op": "deleteTopics", "args": {"topics": ["js-manual"]}},
            {"op": "deleteTopics", "args": {"topics": ["js-never"]}},
        ],
        tmp_path,
    )  # fmt: skip
    created, refused, listed, metadata, grown, cluster, deleted, missing = results
    assert ok(created) is True
    assert sorted((e["topic"], e["type"], e["code"]) for e in refused["error"]["items"]) == [
        ("bad/name", "INVALID_TOPIC_EXCEPTION", errors_pb2.INVALID_TOPIC_EXCEPTION),
        ("js-too-wide", "INVALID_REPLICATION_FACTOR", errors_pb2.INVALID_REPLICATION_FACTOR),
    ]
    assert not exists(grpc_client, "js-too-wide")  # validate_only and errors wrote nothing
    assert {"js-auto", "js-manual"} <= set(ok(listed))
    topics = {t["name"]: t for t in ok(metadata)["topics"]}
    assert [(p["leader"], p["replicas"], p["isr"]) for p in topics["js-manual"]["partitions"]] == [
        (3, [3, 4], [3, 4]),
        (4, [4, 5], [4, 5]),
    ]
    assert len(topics["js-auto"]["partitions"]) == 3
    ok(grown)
    auto = placement(grpc_client, "js-auto")
    assert len(auto) == 4 and all(len(replicas) == 2 for _, replicas, _ in auto)
    assert stored_configs(grpc_client, "js-auto") == {"retention.ms": "60000"}
    described = ok(cluster)
    assert described["clusterId"] == quorum.cluster_id
    assert {b["nodeId"]: f"{b['host']}:{b['port']}" for b in described["brokers"]} == advertised_brokers(
        quorum, grpc_client
    )
    assert described["controller"] in {b["nodeId"] for b in described["brokers"]}
    assert ok(deleted) is None and not exists(grpc_client, "js-manual")
    assert (missing["error"]["type"], missing["error"]["code"]) == ("UNKNOWN_TOPIC_OR_PARTITION", UNKNOWN_TOPIC)


def test_kafkajs_describes_configs_and_alter_configs_replaces_them(
    bootstrap: str, grpc_client: SyncControllerClient, tmp_path: Path
) -> None:
    def alter(configs: dict[str, str], validate_only: bool = False) -> dict[str, Any]:
        entries = [{"name": name, "value": value} for name, value in configs.items()]
        return {"op": "alterConfigs", "args": {"validateOnly": validate_only, "resources": [
            {"type": TOPIC, "name": "js-configs", "configEntries": entries}]}}  # fmt: skip

    describe = {"op": "describeConfigs", "args": {"includeSynonyms": False, "resources": [
        {"type": TOPIC, "name": "js-configs", "configNames": ["retention.ms", "cleanup.policy"]}]}}  # fmt: skip
    results = kafkajs(
        bootstrap,
        [
            {"op": "createTopics", "args": {"topics": [{"topic": "js-configs", "numPartitions": 1,
             "replicationFactor": 1, "configEntries": [{"name": "retention.ms", "value": "60000"}]}]}},
            describe,
            alter({"cleanup.policy": "compact"}, validate_only=True),
        ],
        tmp_path,
    )  # fmt: skip
    created, before, checked = results
    assert ok(created) is True
    (resource,) = ok(before)["resources"]
    assert {(c["configName"], c["configValue"], c["isDefault"]) for c in resource["configEntries"]} == {
        ("retention.ms", "60000", False),
        ("cleanup.policy", "delete", True),
    }
    assert [r["errorCode"] for r in ok(checked)["resources"]] == [0]
    assert stored_configs(grpc_client, "js-configs") == {"retention.ms": "60000"}  # validate_only: unchanged

    replaced, after, invalid = kafkajs(
        bootstrap, [alter({"cleanup.policy": "compact"}), describe, alter({"retention.ms": "soon"})], tmp_path
    )
    assert [r["errorCode"] for r in ok(replaced)["resources"]] == [0]
    (resource,) = ok(after)["resources"]
    assert {(c["configName"], c["configValue"], c["isDefault"]) for c in resource["configEntries"]} == {
        ("retention.ms", "604800000", True),  # not named by the replacement: back to the default
        ("cleanup.policy", "compact", False),
    }
    assert (invalid["error"]["type"], invalid["error"]["code"]) == ("INVALID_CONFIG", errors_pb2.INVALID_CONFIG)
    assert stored_configs(grpc_client, "js-configs") == {"cleanup.policy": "compact"}


# -- kcat -------------------------------------------------------------------------------------------


def kcat(bootstrap: str, *args: str) -> str:
    """``kcat -L`` (librdkafka's metadata listing) with ``args``; its standard output."""
    binary = shutil.which("kcat")
    assert binary is not None, "kcat is not installed (Debian: apt-get install kcat; part of `make test`'s set-up)"
    done = subprocess.run(
        [binary, "-L", "-b", bootstrap, "-m", str(TIMEOUT_S), *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S * 3,
        check=False,
    )
    assert done.returncode == 0, f"kcat -L {' '.join(args)} failed ({done.returncode}):\n{done.stderr}"
    return done.stdout


def test_kcat_lists_brokers_topics_and_partitions(
    quorum: local_quorum.LocalQuorum, bootstrap: str, grpc_client: SyncControllerClient
) -> None:
    created = grpc_client.create_topics(
        controller_pb2.CreateTopicsRequest(
            topics=[
                controller_pb2.CreatableTopic(name="kc-auto", num_partitions=3, replication_factor=2),
                controller_pb2.CreatableTopic(name="kc-gone", num_partitions=1, replication_factor=1),
            ]
        )
    )
    assert [t.error_code for t in created.topics] == [errors_pb2.NONE, errors_pb2.NONE]

    listing = json.loads(kcat(bootstrap, "-J"))
    brokers = advertised_brokers(quorum, grpc_client)
    assert {b["id"]: b["name"] for b in listing["brokers"]} == brokers
    assert listing["controllerid"] in brokers
    topics = {t["topic"]: t for t in listing["topics"]}
    assert {"kc-auto", "kc-gone"} <= set(topics)
    for name in ("kc-auto", "kc-gone"):
        seen = [
            (p["leader"], [r["id"] for r in p["replicas"]], [r["id"] for r in p["isrs"]])
            for p in sorted(topics[name]["partitions"], key=lambda p: p["partition"])
        ]
        assert seen == placement(grpc_client, name)

    # One topic, an unknown one, and the human-readable listing.
    (one,) = json.loads(kcat(bootstrap, "-J", "-t", "kc-auto"))["topics"]
    assert one["topic"] == "kc-auto" and len(one["partitions"]) == 3
    (unknown,) = json.loads(kcat(bootstrap, "-J", "-t", "kc-never"))["topics"]
    assert unknown["error"] == "Broker: Unknown topic or partition"
    text = kcat(bootstrap)
    assert f" {len(brokers)} brokers:" in text and 'topic "kc-auto" with 3 partitions:' in text

    # A topic deleted beside kcat is no longer listed.
    grpc_client.delete_topics(controller_pb2.DeleteTopicsRequest(topic_names=["kc-gone"]))
    assert "kc-gone" not in {t["topic"] for t in json.loads(kcat(bootstrap, "-J"))["topics"]}
