"""FetchSnapshot (59) of ``__cluster_metadata`` partition 0 from observers (Kafka brokers), on the
node's Kafka listener: the snapshot the raft core holds, as Kafka's snapshot bytes.

The core answers the gRPC replication's FetchSnapshot (raft_pb2.FetchSnapshotRequest through the
node's inbox): the cluster id, the leader-only errors (NOT_LEADER_OR_FOLLOWER,
FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH) and SNAPSHOT_NOT_FOUND are its rules. A Kafka
snapshot's bytes are not raftmeta's (raftmeta.records.kafka.mapping.to_kafka_snapshot adds the
bootstrap records and renumbers; its VotersRecord names the voters' Kafka listeners,
raftmeta.kafka.voter_endpoints), so ``position`` and ``size`` count Kafka's bytes: the handler
reads the whole raftmeta snapshot from the core in its chunks, maps it once (kept for the next
chunk's request, a snapshot never changes under its id) and answers the slice asked for.
A position outside the Kafka bytes is POSITION_OUT_OF_RANGE, as KRaft's
(``position < 0 || position >= size``).

Checked first, as KafkaRaftClient.handleFetchSnapshotRequest does: another cluster's id is
INCONSISTENT_CLUSTER_ID and anything but exactly ``__cluster_metadata`` partition 0
INVALID_REQUEST, both for the whole request; a replica id that is a voter's INVALID_REQUEST on the
partition (raftmeta.kafka.metadata_fetch.claims_a_voter).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import Any, Final

from raftmeta.controller.errors import NotControllerError
from raftmeta.kafka.context import ApiContext, KafkaNode
from raftmeta.kafka.framing import Request
from raftmeta.kafka.metadata_fetch import (
    ANSWER_GRACE_S,
    METADATA_PARTITION,
    METADATA_TOPIC,
    NO_LEADER,
    RaftPathMissing,
    claims_a_voter,
)
from raftmeta.kafka.voter_endpoints import with_kafka_listeners
from raftmeta.records.kafka.mapping import to_kafka_snapshot
from raftmeta.v1 import errors_pb2, raft_pb2

# Mapped snapshots kept: a broker downloads one in several requests; two cover a new snapshot
# taken while another broker still downloads the previous one.
MAPPED_KEPT: Final = 2


class MappedSnapshots:
    """Kafka bytes of the snapshots lately served, by (cluster id, end offset, epoch)."""

    def __init__(self, kept: int = MAPPED_KEPT) -> None:
        self._kept = kept
        self._mapped: OrderedDict[tuple[str, int, int], bytes] = OrderedDict()

    def get(self, key: tuple[str, int, int]) -> bytes | None:
        found = self._mapped.get(key)
        if found is not None:
            self._mapped.move_to_end(key)
        return found

    def put(self, key: tuple[str, int, int], data: bytes) -> None:
        self._mapped[key] = data
        self._mapped.move_to_end(key)
        while len(self._mapped) > self._kept:
            self._mapped.popitem(last=False)


MAPPED: Final = MappedSnapshots()


def _single_partition(body: Any) -> Any | None:
    topics = tuple(body.topics)
    if len(topics) != 1 or topics[0].name != METADATA_TOPIC:
        return None
    partitions = tuple(topics[0].partitions)
    if len(partitions) != 1 or int(partitions[0].partition) != METADATA_PARTITION:
        return None
    return partitions[0]


def _endpoint(node: KafkaNode) -> dict[str, Any]:
    return {"node_id": node.node_id, "host": node.host, "port": node.port}


def _answer(ctx: ApiContext, error_code: int, partition: dict[str, Any] | None, leader_id: int) -> dict[str, Any]:
    topics = [] if partition is None else [{"name": METADATA_TOPIC, "partitions": [partition]}]
    return {
        "throttle_time": 0,
        "error_code": error_code,
        "topics": topics,
        "node_endpoints": [_endpoint(n) for n in ctx.nodes if n.node_id == leader_id],
    }


def _partition(error_code: int, leader_id: int, leader_epoch: int, **fields: Any) -> dict[str, Any]:
    return {
        "index": METADATA_PARTITION,
        "error_code": error_code,
        "snapshot_id": fields.get("snapshot_id", {"end_offset": -1, "epoch": -1}),
        "current_leader": {"leader_id": leader_id, "leader_epoch": leader_epoch},
        "size": fields.get("size", -1),
        "position": fields.get("position", -1),
        "unaligned_records": fields.get("unaligned_records", b""),
    }


async def _ask(ctx: ApiContext, wanted: raft_pb2.FetchSnapshotRequest) -> raft_pb2.FetchSnapshotResponse:
    if ctx.raft is None:
        raise RaftPathMissing("the Kafka listener serves FetchSnapshot only with the node's raft path")
    answer: raft_pb2.FetchSnapshotResponse = await asyncio.wait_for(
        ctx.raft.submit_raft(wanted.replica_id, wanted), ANSWER_GRACE_S
    )
    return answer


async def _whole(
    ctx: ApiContext, first: raft_pb2.FetchSnapshotRequest, answer: raft_pb2.FetchSnapshotResponse
) -> raft_pb2.FetchSnapshotResponse | bytes:
    """The raftmeta snapshot's bytes: ``answer`` (the first chunk), then the next chunks through
    the core; a refused chunk's answer (leadership moved meanwhile)."""
    data = bytearray(answer.unaligned_records)
    while len(data) < answer.size:
        wanted = raft_pb2.FetchSnapshotRequest()
        wanted.CopyFrom(first)
        wanted.position = len(data)
        answer = await _ask(ctx, wanted)
        if answer.error_code != errors_pb2.NONE:
            return answer
        data += answer.unaligned_records
    return bytes(data)


async def fetch_snapshot(ctx: ApiContext, request: Request) -> dict[str, Any]:
    body = request.body
    cluster_id = getattr(body, "cluster_id", None)
    if cluster_id is not None and str(cluster_id) != ctx.cluster_id:
        return _answer(ctx, int(errors_pb2.INCONSISTENT_CLUSTER_ID), None, NO_LEADER)
    partition = _single_partition(body)
    if partition is None:
        return _answer(ctx, int(errors_pb2.INVALID_REQUEST), None, NO_LEADER)
    first = raft_pb2.FetchSnapshotRequest(
        cluster_id=ctx.cluster_id if cluster_id is None else str(cluster_id),
        replica_id=int(body.replica_id),
        replica_epoch=int(partition.current_leader_epoch),
        snapshot_id=raft_pb2.SnapshotId(end_offset=int(partition.snapshot_id.end_offset),
                                        epoch=int(partition.snapshot_id.epoch)),
        position=0,
        max_bytes=int(body.max_bytes),
    )  # fmt: skip
    if ctx.raft is not None and claims_a_voter(ctx, first.replica_id):
        leader_id, epoch, _ = ctx.raft.leader_and_log_start()
        return _answer(ctx, 0, _partition(int(errors_pb2.INVALID_REQUEST), leader_id, epoch), leader_id)
    try:
        probe = await _ask(ctx, first)
    except NotControllerError:
        return _answer(ctx, 0, _partition(int(errors_pb2.NOT_LEADER_OR_FOLLOWER), NO_LEADER, -1), NO_LEADER)
    leader = (probe.leader_id, probe.leader_epoch)
    if probe.error_code == errors_pb2.INCONSISTENT_CLUSTER_ID:
        return _answer(ctx, int(probe.error_code), None, NO_LEADER)
    if probe.error_code != errors_pb2.NONE:
        return _answer(ctx, 0, _partition(int(probe.error_code), *leader), probe.leader_id)
    key = (first.cluster_id, first.snapshot_id.end_offset, first.snapshot_id.epoch)
    mapped = MAPPED.get(key)
    if mapped is None:
        whole = await _whole(ctx, first, probe)
        if isinstance(whole, raft_pb2.FetchSnapshotResponse):
            refused = _partition(int(whole.error_code), whole.leader_id, whole.leader_epoch)
            return _answer(ctx, 0, refused, whole.leader_id)
        mapped = to_kafka_snapshot(with_kafka_listeners(whole, ctx.nodes))
        MAPPED.put(key, mapped)
    position = int(partition.position)
    snapshot_id = {"end_offset": first.snapshot_id.end_offset, "epoch": first.snapshot_id.epoch}
    if not 0 <= position < len(mapped):
        return _answer(ctx, 0, _partition(int(errors_pb2.POSITION_OUT_OF_RANGE), *leader), probe.leader_id)
    chunk = mapped[position : position + max(1, int(body.max_bytes))]
    served = _partition(
        0, *leader, snapshot_id=snapshot_id, size=len(mapped), position=position, unaligned_records=chunk
    )
    return _answer(ctx, 0, served, probe.leader_id)
