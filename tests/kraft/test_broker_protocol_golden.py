"""The controller side of KRaft's broker protocol: raftmeta's Kafka listener against a real KRaft
controller, live.

* ApiVersions: what the session's KRaft controller advertises on its controller listener is the
  stored golden (kraft_controller_api_versions.json: a new Kafka release that changes it fails
  here first), and raftmeta advertises each broker-facing api it serves at KRaft's versions.
* BrokerRegistration, BrokerHeartbeat and AlterPartition: the same script (broker_script.py) runs
  against KRaft's active controller and a raftmeta node; every field of every answer must agree
  after normalizing, or be one of the known differences below (docs/kafka-protocol.md, "The
  broker-facing protocol", lists each with its reason). A known difference that stops occurring
  fails the test too, so the list stays true.

The script registers brokers 2001-2004 and creates a topic on the session's shared KRaft cluster;
it deletes the topic and unregisters the brokers at the end, so the cluster is as it started.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, Final

import pytest

from raftmeta.bench.kafka_brokers import supported_features
from raftmeta.kafka.connection import KafkaConnection
from raftmeta.kafka.versions import SUPPORTED
from raftmeta.kraft.cluster import KraftCluster
from raftmeta.local import quorum as local_quorum
from tests.kraft import broker_script
from tests.kraft.golden import KnownDifference, compare, judge, report

pytestmark = [pytest.mark.kraft, pytest.mark.timeout(600)]

GOLDEN: Final = Path(__file__).with_name("kraft_controller_api_versions.json")
CLIENT_ID: Final = "raftmeta-golden-broker"
# What a KRaft broker sends its controller (Kafka's NodeToControllerChannelManager users and its
# raft client as an observer): api key -> name. raftmeta serves the ones in versions.SUPPORTED;
# docs/kafka-protocol.md lists the rest as missing.
BROKER_TO_CONTROLLER: Final = {
    1: "Fetch",
    18: "ApiVersions",
    56: "AlterPartition",
    58: "Envelope",
    59: "FetchSnapshot",
    62: "BrokerRegistration",
    63: "BrokerHeartbeat",
    67: "AllocateProducerIds",
    73: "AssignReplicasToDirs",
}

# Each entry: docs/kafka-protocol.md, "The broker-facing protocol", says the same.
KNOWN: tuple[KnownDifference, ...] = (
    KnownDifference(
        "controlled shutdown in one heartbeat",
        "raftmeta moves the broker's leaderships, leaves its ISRs and fences it in one batch and answers "
        "should_shut_down at once; KRaft answers in_controlled_shutdown (not fenced, not yet) and grants "
        "the shutdown on a later heartbeat, once the brokers have applied the moves",
        "heartbeat B1, want_shut_down, leading the partition",
        ("is_fenced", "should_shut_down"),
    ),
    KnownDifference(
        "features not checked",
        "raftmeta finalizes only metadata.version and checks no feature range at registration; "
        "KRaft refuses a broker that does not support its finalized levels (UNSUPPORTED_VERSION)",
        "register B3 without features",
        ("error_code", "broker_epoch"),
    ),
)


@pytest.fixture(scope="module")
def raftmeta_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[local_quorum.LocalQuorum]:
    directory = tmp_path_factory.mktemp("brokers") / "q"
    started = local_quorum.up(directory, nodes=1, kafka=True)
    try:
        yield started
    finally:
        local_quorum.down(local_quorum.LocalQuorum.load(directory))


def _active_controller(cluster: KraftCluster) -> str:
    return cluster.node(cluster.active_controller()).address


async def _with_connection(address: str, work: Callable[[KafkaConnection], Awaitable[Any]]) -> Any:
    connection = await KafkaConnection.open(address, CLIENT_ID, broker_script.CALL_TIMEOUT_S)
    try:
        return await work(connection)
    finally:
        await connection.close()


async def _api_versions(connection: KafkaConnection) -> dict[str, list[int]]:
    response = await connection.call(18, 4, {"client_software_name": "raftmeta-golden",
                                             "client_software_version": "1"}, broker_script.CALL_TIMEOUT_S)  # fmt: skip
    assert response.error_code.value == 0, response
    return {str(k.api_key): [int(k.min_version), int(k.max_version)] for k in response.api_keys}


def test_kraft_controller_api_versions_are_the_golden_and_raftmeta_serves_brokers_at_them(
    kraft_cluster: KraftCluster,
) -> None:
    advertised = asyncio.run(_with_connection(_active_controller(kraft_cluster), _api_versions))
    golden = json.loads(GOLDEN.read_text())
    assert advertised == golden, (
        f"the KRaft controller's ApiVersions changed; if the Kafka release did, update {GOLDEN.name} and "
        f"docs/kafka-protocol.md:\n{json.dumps(advertised)}"
    )
    for api_key, name in BROKER_TO_CONTROLLER.items():
        if api_key in SUPPORTED and api_key != 18:
            assert list(SUPPORTED[api_key]) == golden[str(api_key)], f"{name} is served at other versions than KRaft's"


async def _run(address: str, cluster_id: str, features: Any, shared: bool) -> list[tuple[str, dict[str, Any]]]:
    async def script(connection: KafkaConnection) -> list[tuple[str, dict[str, Any]]]:
        run = broker_script.Script(connection, cluster_id, features)
        try:
            await broker_script.lifecycle(run)
            await broker_script.isr_changes(run)
            await broker_script.directory_assignments(run)
            await broker_script.known_differences(run)
        finally:
            if shared:
                await broker_script.cleanup(run)
        return run.steps

    result: list[tuple[str, dict[str, Any]]] = await _with_connection(address, script)
    return result


def test_brokers_get_the_answers_a_kraft_controller_gives(
    kraft_cluster: KraftCluster, raftmeta_node: local_quorum.LocalQuorum, tmp_path: Path
) -> None:
    kraft_address = _active_controller(kraft_cluster)
    features = asyncio.run(_with_connection(kraft_address, supported_features))
    kraft = asyncio.run(_run(kraft_address, kraft_cluster.cluster_id, features, shared=True))
    raftmeta_address = raftmeta_node.nodes[0].kafka_address
    assert raftmeta_address is not None
    raftmeta = asyncio.run(_run(raftmeta_address, raftmeta_node.cluster_id, features, shared=False))
    assert [step for step, _ in raftmeta] == [step for step, _ in kraft]
    differences = compare([s for s, _ in kraft], [v for _, v in kraft], [v for _, v in raftmeta])
    unknown, stale = judge(differences, KNOWN)
    if unknown or stale:
        transcripts = tmp_path / "transcripts.json"
        transcripts.write_text(json.dumps({"kraft": kraft, "raftmeta": raftmeta}, indent=1, default=str))
        pytest.fail(f"{report(unknown, stale)}\n(both sides' answers: {transcripts})", pytrace=False)
