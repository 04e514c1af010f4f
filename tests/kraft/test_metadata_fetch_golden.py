"""Fetch (1) and FetchSnapshot (59) of __cluster_metadata from an observer: the same requests to
the pinned release's active KRaft controller and to a raftmeta node's Kafka listener, and every
field of every answer compared, once what legitimately differs between two clusters is replaced
by placeholders (each side's leader id, epoch and endpoint; offsets, which depend on each log).

The requests are the ones a broker's raft client may send that the controller refuses or
redirects: another cluster's id, another partition or topic id, a bad offset or epoch, a stale or
future leader epoch, an unknown snapshot."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest

from raftmeta.bench.kafka_ops import describe_quorum
from raftmeta.kafka.connection import KafkaConnection
from raftmeta.kafka.metadata_fetch import METADATA_TOPIC, METADATA_TOPIC_ID
from raftmeta.kraft.cluster import KraftCluster
from raftmeta.local import quorum as local_quorum
from tests.kraft.golden import KnownDifference, compare, judge, report

pytestmark = pytest.mark.kraft
CALL_TIMEOUT_S: Final = 30.0
OBSERVER: Final = 2101  # an id no node of either cluster has
FETCH_VERSION, SNAPSHOT_VERSION = 17, 1
OFFSET_FIELDS: Final = frozenset({"high_watermark", "log_start_offset", "last_stable_offset", "size", "position"})


# Each entry: docs/kafka-protocol.md, "The broker-facing protocol", says the same.
KNOWN: tuple[KnownDifference, ...] = (
    KnownDifference(
        "KRaft 4.4 cannot encode a refused FetchSnapshot",
        "KRaft's controller builds the partition's error answer without records, fails to encode it "
        "(NullPointerException on the null unaligned records, in its log) and answers "
        "UNKNOWN_SERVER_ERROR; raftmeta answers the partition's error with the leader",
        "snapshot: *",
    ),
)


@dataclasses.dataclass(frozen=True)
class Side:
    connection: KafkaConnection
    cluster_id: str
    leader_id: int
    leader_epoch: int
    leader_address: str


def _flatten(value: Any, path: str, into: dict[str, Any], side: Side) -> None:
    name = path.rsplit(".", 1)[-1]
    if dataclasses.is_dataclass(value):
        for item in dataclasses.fields(value):
            _flatten(getattr(value, item.name), f"{path}.{item.name}" if path else item.name, into, side)
    elif isinstance(value, tuple):
        into[f"{path}.len"] = len(value)
        for i, item in enumerate(value):
            _flatten(item, f"{path}[{i}]", into, side)
    elif name in ("leader_id", "node_id"):
        into[path] = "<leader>" if value == side.leader_id else int(value)
    elif name == "leader_epoch":
        into[path] = "<epoch>" if value == side.leader_epoch else int(value)
    elif name in ("host", "port"):
        into[path] = "<leader endpoint>"
    elif name in OFFSET_FIELDS:
        into[path] = "<offset>" if int(value) >= 0 else int(value)
    elif name == "throttle_time":
        into[path] = int(value.total_seconds() * 1000)
    elif hasattr(value, "name") and hasattr(value, "value"):  # an ErrorCode
        into[path] = value.name
    elif isinstance(value, bytes):
        into[path] = len(value)
    else:
        into[path] = value


def _fetch(side: Side, **changes: Any) -> dict[str, Any]:
    partition = {"partition": 0, "current_leader_epoch": side.leader_epoch, "fetch_offset": 0,
                 "last_fetched_epoch": 0, "log_start_offset": -1, "partition_max_bytes": 1_048_576,
                 "replica_directory_id": uuid.UUID(int=0xD1), "high_watermark": 2**63 - 1}  # fmt: skip
    partition.update(changes.pop("partition", {}))
    topic = {"topic": METADATA_TOPIC, "topic_id": METADATA_TOPIC_ID, "partitions": [partition]}
    return {"cluster_id": side.cluster_id, "replica_id": OBSERVER,
            "replica_state": {"replica_id": OBSERVER, "replica_epoch": -1}, "max_wait": 0, "min_bytes": 0,
            "max_bytes": 1_048_576, "isolation_level": 0, "session_id": 0, "session_epoch": -1, "rack_id": "",
            "forgotten_topics_data": [], "topics": [{**topic, **changes.pop("topic", {})}], **changes}  # fmt: skip


def _snapshot(side: Side, **changes: Any) -> dict[str, Any]:
    partition = {"partition": 0, "current_leader_epoch": side.leader_epoch,
                 "snapshot_id": {"end_offset": 10**12, "epoch": side.leader_epoch}, "position": 0,
                 "replica_directory_id": uuid.UUID(int=0xD1)}  # fmt: skip
    partition.update(changes.pop("partition", {}))
    return {"cluster_id": side.cluster_id, "replica_id": OBSERVER, "max_bytes": 1_048_576,
            "topics": [{"name": METADATA_TOPIC, "partitions": [partition]}], **changes}  # fmt: skip


async def _script(side: Side) -> list[tuple[str, dict[str, Any]]]:
    steps: list[tuple[str, int, int, dict[str, Any]]] = [
        ("fetch: another cluster's id", 1, FETCH_VERSION, _fetch(side, cluster_id="AAAAAAAAAAAAAAAAAAAAAA")),
        ("fetch: partition 1", 1, FETCH_VERSION, _fetch(side, partition={"partition": 1})),
        ("fetch: another topic id", 1, FETCH_VERSION, _fetch(side, topic={"topic_id": uuid.UUID(int=2)})),
        ("fetch: negative offset", 1, FETCH_VERSION, _fetch(side, partition={"fetch_offset": -1})),
        ("fetch: last fetched epoch above the current", 1, FETCH_VERSION,
         _fetch(side, partition={"last_fetched_epoch": side.leader_epoch + 1})),
        ("fetch: a stale leader epoch", 1, FETCH_VERSION,
         _fetch(side, partition={"current_leader_epoch": 0, "last_fetched_epoch": 0})),
        ("fetch: a future leader epoch", 1, FETCH_VERSION,
         _fetch(side, partition={"current_leader_epoch": side.leader_epoch + 1000})),
        ("snapshot: another cluster's id", 59, SNAPSHOT_VERSION, _snapshot(side, cluster_id="AAAAAAAAAAAAAAAAAAAAAA")),
        ("snapshot: partition 1", 59, SNAPSHOT_VERSION, _snapshot(side, partition={"partition": 1})),
        ("snapshot: an unknown snapshot", 59, SNAPSHOT_VERSION, _snapshot(side)),
        ("snapshot: a stale leader epoch", 59, SNAPSHOT_VERSION,
         _snapshot(side, partition={"current_leader_epoch": 0})),
    ]  # fmt: skip
    answers = []
    for step, api_key, version, values in steps:
        response = await side.connection.call(api_key, version, values, CALL_TIMEOUT_S)
        flat: dict[str, Any] = {}
        _flatten(response, "", flat, side)
        answers.append((step, flat))
    return answers


async def _run(address: str, cluster_id: str) -> list[tuple[str, dict[str, Any]]]:
    connection = await KafkaConnection.open(address, "raftmeta-golden-observer", CALL_TIMEOUT_S)
    try:
        state = await describe_quorum(connection, CALL_TIMEOUT_S)
        assert state.leader_epoch > 0, "the stale-epoch steps need an epoch above 0"
        return await _script(Side(connection, cluster_id, state.leader_id, state.leader_epoch, address))
    finally:
        await connection.close()


@pytest.fixture(scope="module")
def raftmeta_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[local_quorum.LocalQuorum]:
    directory = tmp_path_factory.mktemp("observer") / "q"
    started = local_quorum.up(directory, nodes=1, kafka=True)
    try:
        yield started
    finally:
        local_quorum.down(local_quorum.LocalQuorum.load(directory))


def test_an_observers_refused_fetches_get_the_answers_a_kraft_controller_gives(
    kraft_cluster: KraftCluster, raftmeta_node: local_quorum.LocalQuorum, tmp_path: Path
) -> None:
    kraft_address = kraft_cluster.node(kraft_cluster.active_controller()).address
    kraft = asyncio.run(_run(kraft_address, kraft_cluster.cluster_id))
    raftmeta_address = raftmeta_node.nodes[0].kafka_address
    assert raftmeta_address is not None
    raftmeta = asyncio.run(_run(raftmeta_address, raftmeta_node.cluster_id))
    differences = compare([s for s, _ in kraft], [v for _, v in kraft], [v for _, v in raftmeta])
    unknown, stale = judge(differences, KNOWN)
    if unknown or stale:
        transcripts = tmp_path / "transcripts.json"
        transcripts.write_text(json.dumps({"kraft": kraft, "raftmeta": raftmeta}, indent=1, default=str))
        pytest.fail(f"{report(unknown, stale)}\n(both sides' answers: {transcripts})", pytrace=False)
