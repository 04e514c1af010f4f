"""FetchSnapshot (59) of __cluster_metadata from observers: the core's snapshot, read whole
through the raft core's FetchSnapshot, served as Kafka's snapshot bytes by position and size."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from raftmeta.kafka import metadata_snapshot
from raftmeta.kafka.dispatch import handle
from raftmeta.kafka.framing import decode_request
from raftmeta.records import codec
from raftmeta.records.kafka.mapping import from_kafka_snapshot, read_kafka_batches, to_kafka_snapshot
from raftmeta.storage.snapshot import SnapshotId, encode_snapshot
from raftmeta.v1 import errors_pb2, raft_pb2, records_pb2
from tests.kafka.helpers import FakeAdmin, FakeRaft, context, decode_response, framed, request_bytes
from tests.kafka.samples import REQUESTS

CHUNK = 40  # the core's chunk size here: the handler must read several


def _snapshot() -> bytes:
    """A raftmeta snapshot at (10, 3): two topics."""
    records = [
        records_pb2.MetadataRecord(topic=records_pb2.TopicRecord(name=n, topic_id=uuid.UUID(int=i).bytes))
        for i, n in ((5, "orders"), (6, "payments"))
    ]
    return b"".join(
        encode_snapshot(
            SnapshotId(10, 3),
            [r.SerializeToString() for r in records],
            last_contained_log_timestamp_ms=1_700_000_000_000,
            append_timestamp_ms=1_700_000_000_000,
        )
    )


def _core(data: bytes, error: int = errors_pb2.NONE) -> Any:
    """The core's FetchSnapshot: chunks of ``data`` for snapshot (10, 3), its rules for the rest."""

    def answer(request: raft_pb2.FetchSnapshotRequest) -> raft_pb2.FetchSnapshotResponse:
        response = raft_pb2.FetchSnapshotResponse(error_code=error, leader_id=2, leader_epoch=3)  # type: ignore[arg-type]
        if error != errors_pb2.NONE:
            return response
        if (request.snapshot_id.end_offset, request.snapshot_id.epoch) != (10, 3):
            response.error_code = errors_pb2.SNAPSHOT_NOT_FOUND
            return response
        response.snapshot_id.CopyFrom(request.snapshot_id)
        response.size, response.position = len(data), request.position
        response.unaligned_records = data[request.position : request.position + CHUNK]
        return response

    return answer


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    metadata_snapshot.MAPPED._mapped.clear()


def _ask(raft: FakeRaft, version: int, max_bytes: int = 8388608, **changes: Any) -> Any:
    partition = {**REQUESTS[59]["topics"][0]["partitions"][0], **changes.pop("partition", {})}
    values = {**REQUESTS[59], "max_bytes": max_bytes, **changes}
    values["topics"] = changes.get("topics", [{"name": "__cluster_metadata", "partitions": [partition]}])

    async def run() -> bytes:
        return await handle(context(FakeAdmin(), raft=raft), decode_request(request_bytes(59, version, values)))

    _, response = decode_response(framed(asyncio.run(run())[4:]), 59, version)
    return response


@pytest.mark.parametrize("version", [0, 1])
def test_the_snapshot_comes_as_kafkas_bytes_in_chunks_by_position(version: int) -> None:
    data = _snapshot()
    raft = FakeRaft(snapshot=_core(data))
    expected = to_kafka_snapshot(data)
    received = b""
    while True:
        response = _ask(raft, version, max_bytes=100, partition={"position": len(received)})
        assert response.error_code == ErrorCode.none
        (partition,) = response.topics[0].partitions
        assert partition.error_code == ErrorCode.none
        assert (partition.snapshot_id.end_offset, partition.snapshot_id.epoch) == (10, 3)
        assert (partition.size, partition.position) == (len(expected), len(received))
        assert (partition.current_leader.leader_id, partition.current_leader.leader_epoch) == (2, 3)
        received += bytes(partition.unaligned_records)
        if len(received) >= partition.size:
            break
    assert received == expected
    assert from_kafka_snapshot(received) == data  # the core's snapshot, record for record
    batches = list(read_kafka_batches(received))
    starts = [b.base_offset for b in batches]
    assert starts == [0] + [b.base_offset + len(b.records) for b in batches[:-1]]  # from 0, no gap
    if version >= 1:
        assert [(e.node_id, e.port) for e in response.node_endpoints] == [(2, 9102)]
    # The whole snapshot was read from the core in its chunks once; each later request asks the
    # core only its first chunk (its rules: leader, epoch, snapshot id) and slices the mapped copy.
    positions = [m.position for _, m in raft.sent]
    chunks = list(range(0, len(data), CHUNK))
    assert len(chunks) > 1 and positions[: len(chunks)] == chunks and set(positions[len(chunks) :]) == {0}


def test_a_position_past_the_kafka_bytes_is_out_of_range() -> None:
    data = _snapshot()
    size = len(to_kafka_snapshot(data))
    for position in (size, -1):
        response = _ask(FakeRaft(snapshot=_core(data)), 1, partition={"position": position})
        (partition,) = response.topics[0].partitions
        assert partition.error_code == ErrorCode.position_out_of_range, position


def test_an_unknown_snapshot_is_not_found() -> None:
    response = _ask(FakeRaft(snapshot=_core(_snapshot())), 1, partition={"snapshot_id": {"end_offset": 9, "epoch": 3}})
    (partition,) = response.topics[0].partitions
    assert (partition.error_code, partition.current_leader.leader_id) == (ErrorCode.snapshot_not_found, 2)


@pytest.mark.parametrize(
    ("error", "name"),
    [
        (errors_pb2.NOT_LEADER_OR_FOLLOWER, ErrorCode.not_leader_or_follower),
        (errors_pb2.FENCED_LEADER_EPOCH, ErrorCode.fenced_leader_epoch),
        (errors_pb2.UNKNOWN_LEADER_EPOCH, ErrorCode.unknown_leader_epoch),
    ],
)
def test_the_cores_leader_errors_are_the_partitions(error: int, name: ErrorCode) -> None:
    response = _ask(FakeRaft(snapshot=_core(_snapshot(), error)), 1)
    assert response.error_code == ErrorCode.none
    (partition,) = response.topics[0].partitions
    assert (partition.error_code, partition.current_leader.leader_id) == (name, 2)


def test_another_cluster_and_another_partition_are_refused_whole() -> None:
    raft = FakeRaft(snapshot=_core(_snapshot()))
    response = _ask(raft, 1, cluster_id="another-cluster")
    assert (response.error_code, response.topics) == (ErrorCode.inconsistent_cluster_id, ())
    response = _ask(raft, 1, topics=[{"name": "orders", "partitions": [REQUESTS[59]["topics"][0]["partitions"][0]]}])
    assert (response.error_code, response.topics) == (ErrorCode.invalid_request, ())
    assert raft.sent == []


def test_the_snapshots_voter_set_names_the_voters_kafka_listeners() -> None:
    voters = records_pb2.VotersRecord(version=0)
    for voter_id in (1, 2):
        entry = voters.voters.add(voter_id=voter_id, min_supported_version=0, max_supported_version=1)
        entry.endpoints.add(name="CONTROLLER", host="127.0.0.1", port=7000 + voter_id)  # the raft address
    data = b"".join(
        encode_snapshot(SnapshotId(10, 3), [], last_contained_log_timestamp_ms=1, append_timestamp_ms=1, voters=voters)
    )
    response = _ask(FakeRaft(snapshot=_core(data)), 1)
    (partition,) = response.topics[0].partitions
    served = from_kafka_snapshot(bytes(partition.unaligned_records))
    (voter_set,) = [
        record.voters
        for batch in codec.iter_batches(served)
        for record in map(records_pb2.MetadataRecord.FromString, batch.records())
        if record.WhichOneof("record") == "voters"
    ]
    assert [(v.voter_id, [(e.name, e.port) for e in v.endpoints]) for v in voter_set.voters] == [
        (1, [("CONTROLLER", 9101)]),
        (2, [("CONTROLLER", 9102)]),
    ]


def test_a_snapshot_fetch_in_a_voters_name_is_refused_before_the_core() -> None:
    raft = FakeRaft(snapshot=_core(_snapshot()))
    response = _ask(raft, 1, replica_id=2)
    assert response.topics[0].partitions[0].error_code == ErrorCode.invalid_request
    assert raft.sent == []
