"""Fetch (1) of __cluster_metadata from observers: the Kafka request becomes the gRPC
replication's raft Fetch, and the core's answer KRaft's, its records as Kafka batches."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from raftmeta.controller.errors import NotControllerError
from raftmeta.kafka.dispatch import handle
from raftmeta.kafka.framing import decode_request
from raftmeta.kafka.metadata_fetch import METADATA_TOPIC_ID
from raftmeta.kafka.versions import SUPPORTED
from raftmeta.records import codec
from raftmeta.records.kafka.mapping import from_kafka_batches, read_kafka_batches
from raftmeta.v1 import errors_pb2, raft_pb2, records_pb2
from tests.kafka.helpers import FakeAdmin, FakeRaft, context, decode_response, framed, request_bytes
from tests.kafka.samples import REQUESTS

LOW, HIGH = SUPPORTED[1]
DIRECTORY = uuid.UUID(int=9)


def _fetch(raft: FakeRaft, version: int, **changes: Any) -> Any:
    partition = {**REQUESTS[1]["topics"][0]["partitions"][0], **changes.pop("partition", {})}
    values = {**REQUESTS[1], **changes}
    values["topics"] = changes.get("topics", [{**REQUESTS[1]["topics"][0], "partitions": [partition]}])
    ctx = context(FakeAdmin(), raft=raft)

    async def run() -> bytes:
        return await handle(ctx, decode_request(request_bytes(1, version, values)))

    _, response = decode_response(framed(asyncio.run(run())[4:]), 1, version)
    return response


def _log() -> bytes:
    """Two raftmeta batches at offsets 10-11 and 12, epoch 3."""
    topic = records_pb2.MetadataRecord(topic=records_pb2.TopicRecord(name="orders", topic_id=uuid.UUID(int=5).bytes))
    broker = records_pb2.MetadataRecord(fence_broker=records_pb2.FenceBrokerRecord(broker_id=1, broker_epoch=4))
    first = codec.encode_batch(10, 3, [topic.SerializeToString(), broker.SerializeToString()], 1_700_000_000_000)
    return first + codec.encode_batch(12, 3, [broker.SerializeToString()], 1_700_000_000_001)


def _answer(**fields: Any) -> raft_pb2.FetchResponse:
    return raft_pb2.FetchResponse(leader_id=2, leader_epoch=3, high_watermark=13, log_start_offset=10, **fields)


@pytest.mark.parametrize("version", range(LOW, 12))
def test_before_v12_a_fetch_has_no_last_fetched_epoch_and_is_invalid_as_in_kraft(version: int) -> None:
    # Kafka's default for the missing field is -1, which KRaft refuses (INVALID_REQUEST).
    raft = FakeRaft(_answer(records=_log()))
    (partition,) = _fetch(raft, version).responses[0].partitions
    assert (partition.error_code, bytes(partition.records or b"")) == (ErrorCode.invalid_request, b"")
    assert raft.sent == []


@pytest.mark.parametrize("version", range(12, HIGH + 1))
def test_records_come_back_as_kafka_batches_with_the_same_offsets(version: int) -> None:
    raft = FakeRaft(_answer(records=_log()))
    response = _fetch(raft, version)
    assert response.error_code == ErrorCode.none
    (topic,) = response.responses
    assert (topic.topic_id if version >= 13 else topic.topic) == (
        METADATA_TOPIC_ID if version >= 13 else "__cluster_metadata"
    )
    (partition,) = topic.partitions
    assert (partition.error_code, partition.high_watermark) == (ErrorCode.none, 13)
    assert partition.log_start_offset == 10
    batches = list(read_kafka_batches(bytes(partition.records)))
    assert [(b.base_offset, b.epoch, len(b.records)) for b in batches] == [(10, 3, 2), (12, 3, 1)]
    assert from_kafka_batches(bytes(partition.records)) == _log()  # the very records the core served
    assert (partition.current_leader.leader_id, partition.current_leader.leader_epoch) == (2, 3)
    if version >= 16:
        assert [(e.node_id, e.host, e.port) for e in response.node_endpoints] == [(2, "127.0.0.1", 9102)]


@pytest.mark.parametrize("version", [12, 14, HIGH])
def test_the_request_is_the_gRPC_replications_fetch(version: int) -> None:
    raft = FakeRaft(_answer())
    _fetch(raft, version, partition={"fetch_offset": 7, "last_fetched_epoch": 1, "current_leader_epoch": 3})
    ((source, sent),) = raft.sent
    assert source == sent.replica_id == 5
    assert (sent.cluster_id, sent.replica_epoch, sent.fetch_offset, sent.last_fetched_epoch) == (
        "test-cluster-id-000000", 3, 7, 1
    )  # fmt: skip
    assert sent.max_wait_ms == 500
    assert sent.replica_directory_id == (DIRECTORY.bytes if version >= 17 else b"")


@pytest.mark.parametrize(
    ("error", "name"),
    [
        (errors_pb2.NOT_LEADER_OR_FOLLOWER, ErrorCode.not_leader_or_follower),
        (errors_pb2.FENCED_LEADER_EPOCH, ErrorCode.fenced_leader_epoch),
        (errors_pb2.UNKNOWN_LEADER_EPOCH, ErrorCode.unknown_leader_epoch),
    ],
)
def test_the_cores_leader_errors_are_the_partitions_with_the_leader(error: int, name: ErrorCode) -> None:
    response = _fetch(FakeRaft(_answer(error_code=error)), HIGH)
    partition = response.responses[0].partitions[0]
    assert (response.error_code, partition.error_code) == (ErrorCode.none, name)
    assert (partition.current_leader.leader_id, partition.current_leader.leader_epoch) == (2, 3)
    assert (partition.high_watermark, partition.log_start_offset) == (-1, 10)  # as KRaft: no watermark
    assert [e.node_id for e in response.node_endpoints] == [2]


def test_a_diverging_fetch_and_one_below_the_log_start_carry_kraft_fields() -> None:
    diverging = _answer(diverging_epoch=raft_pb2.DivergingEpoch(epoch=2, end_offset=8))
    partition = _fetch(FakeRaft(diverging), HIGH).responses[0].partitions[0]
    assert (partition.diverging_epoch.epoch, partition.diverging_epoch.end_offset) == (2, 8)
    assert (partition.snapshot_id.end_offset, partition.snapshot_id.epoch) == (-1, -1)
    below = _answer(snapshot_id=raft_pb2.SnapshotId(end_offset=10, epoch=3))
    partition = _fetch(FakeRaft(below), HIGH).responses[0].partitions[0]
    assert (partition.snapshot_id.end_offset, partition.snapshot_id.epoch) == (10, 3)
    assert (partition.diverging_epoch.epoch, partition.diverging_epoch.end_offset) == (-1, -1)


def test_another_clusters_id_is_refused_for_the_whole_request() -> None:
    raft = FakeRaft(_answer())
    response = _fetch(raft, HIGH, cluster_id="another-cluster")
    assert (response.error_code, response.responses) == (ErrorCode.inconsistent_cluster_id, ())
    assert raft.sent == []
    # The core's own check (the same rule on the gRPC Fetch) answers the same.
    response = _fetch(FakeRaft(_answer(error_code=errors_pb2.INCONSISTENT_CLUSTER_ID)), HIGH)
    assert (response.error_code, response.responses) == (ErrorCode.inconsistent_cluster_id, ())


def test_a_null_cluster_id_is_accepted_as_kraft_accepts_it() -> None:
    raft = FakeRaft(_answer())
    assert _fetch(raft, HIGH, cluster_id=None).error_code == ErrorCode.none
    assert raft.sent[0][1].cluster_id == "test-cluster-id-000000"


@pytest.mark.parametrize(
    "topics",
    [
        [],
        [{"topic": "__cluster_metadata", "topic_id": uuid.UUID(int=2), "partitions": []}],
        [{**REQUESTS[1]["topics"][0], "partitions": [{**REQUESTS[1]["topics"][0]["partitions"][0], "partition": 1}]}],
        [REQUESTS[1]["topics"][0], REQUESTS[1]["topics"][0]],
    ],
    ids=["no topic", "another topic id", "partition 1", "two topics"],
)
def test_anything_but_the_metadata_partition_is_an_invalid_request(topics: list[Any]) -> None:
    raft = FakeRaft(_answer())
    response = _fetch(raft, HIGH, topics=topics)
    assert (response.error_code, response.responses) == (ErrorCode.invalid_request, ())
    assert raft.sent == []


@pytest.mark.parametrize(
    "partition",
    [{"fetch_offset": -1}, {"last_fetched_epoch": -1}, {"last_fetched_epoch": 2, "current_leader_epoch": 1}],
    ids=["negative offset", "negative last epoch", "last epoch above the current"],
)
def test_bad_offsets_and_epochs_are_the_partitions_invalid_request(partition: dict[str, int]) -> None:
    raft = FakeRaft(_answer())
    response = _fetch(raft, HIGH, partition=partition)
    assert response.error_code == ErrorCode.none
    (answer,) = response.responses[0].partitions
    assert answer.error_code == ErrorCode.invalid_request
    # As KRaft's empty answer (golden: tests/kraft/test_metadata_fetch_golden.py): the leader, its
    # epoch, endpoint and the log start; no high watermark.
    assert (answer.current_leader.leader_id, answer.current_leader.leader_epoch) == (2, 3)
    assert (answer.high_watermark, answer.log_start_offset, answer.aborted_transactions) == (-1, 10, ())
    assert [e.node_id for e in response.node_endpoints] == [2]
    assert raft.sent == []


def test_a_node_shutting_down_answers_not_leader() -> None:
    response = _fetch(FakeRaft(NotControllerError(-1)), HIGH)
    partition = response.responses[0].partitions[0]
    assert partition.error_code == ErrorCode.not_leader_or_follower
    assert partition.current_leader.leader_id == -1


@pytest.mark.parametrize("voter", [1, 2, 3])
def test_a_fetch_in_a_voters_name_is_refused_before_the_core(voter: int) -> None:
    # raftmeta's voters replicate over gRPC: a fetch here in a voter's name would count toward the
    # high watermark for records the voter does not hold.
    raft = FakeRaft(_answer())
    response = _fetch(raft, HIGH, replica_state={"replica_id": voter, "replica_epoch": -1})
    assert response.responses[0].partitions[0].error_code == ErrorCode.invalid_request
    assert raft.sent == []
