"""A Python observer replicates a real quorum's metadata log through a node's Kafka listener, as
a Kafka broker's raft client does: Fetch finds the leader, FetchSnapshot downloads the snapshot
the log now starts after, Fetch reads on from its end, a parked Fetch carries a new record, and
DescribeQuorum lists the observer. Everything is decoded with the Kafka-format reader."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest

from raftmeta.bench.kafka_ops import describe_quorum
from raftmeta.kafka.connection import KafkaConnection
from raftmeta.kafka.metadata_fetch import METADATA_TOPIC, METADATA_TOPIC_ID
from raftmeta.local import quorum as local_quorum
from raftmeta.records import codec
from raftmeta.records.kafka.mapping import from_kafka_batches, from_kafka_snapshot, read_kafka_batches
from raftmeta.v1 import records_pb2
from tests.integration.conftest import FAST_NODE_ARGS

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]
TIMEOUT_S = 30.0
OBSERVER = 100
DIRECTORY = uuid.UUID(int=0xD1)
TOPICS = 30
# A snapshot every 20 records and small segments: the leader's log soon starts above 0.
NODE_ARGS = [*FAST_NODE_ARGS, "--snapshot-interval-records", "20", "--segment-bytes", "1024"]
FETCH_VERSION, SNAPSHOT_VERSION = 17, 1


def _fetch_values(epoch: int, offset: int, last_epoch: int, max_wait_ms: int) -> dict[str, Any]:
    return {"cluster_id": None, "replica_id": OBSERVER, "replica_state": {"replica_id": OBSERVER, "replica_epoch": -1},
            "max_wait": max_wait_ms, "min_bytes": 0, "max_bytes": 8388608, "isolation_level": 0, "session_id": 0,
            "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
            "topics": [{"topic": METADATA_TOPIC, "topic_id": METADATA_TOPIC_ID, "partitions": [
                {"partition": 0, "current_leader_epoch": epoch, "fetch_offset": offset,
                 "last_fetched_epoch": last_epoch, "log_start_offset": -1, "partition_max_bytes": 8388608,
                 "replica_directory_id": DIRECTORY, "high_watermark": 2**63 - 1}]}]}  # fmt: skip


async def _fetch(connection: KafkaConnection, epoch: int, offset: int, last_epoch: int, max_wait_ms: int = 0) -> Any:
    response = await connection.call(1, FETCH_VERSION, _fetch_values(epoch, offset, last_epoch, max_wait_ms), TIMEOUT_S)
    assert response.error_code.name == "none", response
    ((partition,),) = [t.partitions for t in response.responses]
    return response, partition


def _topic_names(raftmeta_batches: bytes) -> list[str]:
    names = []
    for batch in codec.iter_batches(raftmeta_batches):
        for raw in batch.records():
            record = records_pb2.MetadataRecord.FromString(raw)
            if record.WhichOneof("record") == "topic":
                names.append(record.topic.name)
    return names


async def _create_topic(connection: KafkaConnection, name: str) -> None:
    values = {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [],
                          "configs": []}], "timeout": 30_000, "validate_only": False}  # fmt: skip
    answer = await connection.call(19, 7, values, TIMEOUT_S)
    assert answer.topics[0].error_code.name == "none", answer


def test_an_observer_replicates_the_log_and_its_snapshot_through_the_kafka_listener(tmp_path: Path) -> None:
    quorum = local_quorum.up(
        tmp_path / "q", nodes=3, brokers=3, node_args=NODE_ARGS, heartbeat_interval_ms=200, kafka=True
    )
    try:
        asyncio.run(_observe(quorum))
    finally:
        local_quorum.down(local_quorum.LocalQuorum.load(tmp_path / "q"))


async def _observe(quorum: local_quorum.LocalQuorum) -> None:
    addresses = {n.id: str(n.kafka_address) for n in quorum.nodes}
    any_node = await KafkaConnection.open(addresses[1], "observer", TIMEOUT_S)
    state = await describe_quorum(any_node, TIMEOUT_S)
    await any_node.close()
    follower = next(i for i in addresses if i != state.leader_id)

    # At a follower, as a broker's first Fetch at a bootstrap server: not the leader, and where it is.
    connection = await KafkaConnection.open(addresses[follower], "observer", TIMEOUT_S)
    response, partition = await _fetch(connection, state.leader_epoch, 0, 0)
    await connection.close()
    assert partition.error_code.name == "not_leader_or_follower"
    assert (partition.current_leader.leader_id, partition.current_leader.leader_epoch) == (
        state.leader_id, state.leader_epoch)  # fmt: skip
    (endpoint,) = response.node_endpoints
    assert (endpoint.node_id, f"{endpoint.host}:{endpoint.port}") == (state.leader_id, addresses[state.leader_id])

    leader = await KafkaConnection.open(addresses[state.leader_id], "observer", TIMEOUT_S)
    try:
        for i in range(TOPICS):
            await _create_topic(leader, f"observed-{i}")
        # The leader snapshots and drops whole segments below its snapshot: from offset 0 the
        # observer is sent to a snapshot (asked again until the node has deleted its first segment).
        while True:
            _, partition = await _fetch(leader, state.leader_epoch, 0, 0)
            assert partition.error_code.name == "none", partition
            if partition.snapshot_id.end_offset > 0:
                break
            await asyncio.sleep(0.2)
        snapshot_end, snapshot_epoch = partition.snapshot_id.end_offset, partition.snapshot_id.epoch
        assert partition.log_start_offset > 0 and bytes(partition.records or b"") == b""

        kafka_snapshot = b""
        while True:
            values = {"cluster_id": None, "replica_id": OBSERVER, "max_bytes": 1000, "topics": [
                {"name": METADATA_TOPIC, "partitions": [
                    {"partition": 0, "current_leader_epoch": state.leader_epoch, "position": len(kafka_snapshot),
                     "snapshot_id": {"end_offset": snapshot_end, "epoch": snapshot_epoch},
                     "replica_directory_id": DIRECTORY}]}]}  # fmt: skip
            answer = await leader.call(59, SNAPSHOT_VERSION, values, TIMEOUT_S)
            (chunk,) = answer.topics[0].partitions
            assert chunk.error_code.name == "none", chunk
            kafka_snapshot += bytes(chunk.unaligned_records)
            if len(kafka_snapshot) >= chunk.size:
                break
        assert len(kafka_snapshot) > 1000  # it took several chunks
        seen = _topic_names(from_kafka_snapshot(kafka_snapshot))

        offset, last_epoch, log = snapshot_end, snapshot_epoch, b""
        while True:
            _, partition = await _fetch(leader, state.leader_epoch, offset, last_epoch)
            assert partition.error_code.name == "none", partition
            records = bytes(partition.records or b"")
            for batch in read_kafka_batches(records):
                assert batch.base_offset == offset, "the Kafka batches run on without a gap"
                offset, last_epoch = batch.base_offset + len(batch.records), batch.epoch
            log += records
            if offset >= partition.high_watermark and not records:
                break
        seen += _topic_names(from_kafka_batches(log))
        assert sorted(seen) == sorted(f"observed-{i}" for i in range(TOPICS))

        described = await describe_quorum(leader, TIMEOUT_S)
        assert {(o.replica_id, o.directory_id, o.log_end_offset) for o in described.observers} >= {
            (OBSERVER, DIRECTORY, offset)}  # fmt: skip

        # A parked Fetch (long poll) carries the next record when it commits.
        parked = asyncio.create_task(_fetch(leader, state.leader_epoch, offset, last_epoch, max_wait_ms=25_000))
        creator = await KafkaConnection.open(addresses[state.leader_id], "creator", TIMEOUT_S)
        try:
            await _create_topic(creator, "after-the-park")
        finally:
            await creator.close()
        _, partition = await parked
        assert "after-the-park" in _topic_names(from_kafka_batches(bytes(partition.records)))
    finally:
        await leader.close()
