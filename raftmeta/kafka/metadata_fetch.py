"""Fetch (1) of ``__cluster_metadata`` partition 0 from observers (Kafka brokers), on the node's
Kafka listener.

The request goes to the raft core as the gRPC replication's Fetch (raft_pb2.FetchRequest through
the node's inbox, :class:`RaftPath`), so one rule answers both doors: the leader-only errors
(NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH), the diverging epoch, the
snapshot id below the log start, the long poll (the core parks the fetch until records arrive, the
high watermark moves or ``max_wait`` passes) and the observer's progress that DescribeQuorum shows.
The core's records are raftmeta batches; the answer carries them as Kafka record batches with the
same offsets (raftmeta.records.kafka.mapping.to_kafka_log), each VotersRecord naming the voters'
Kafka listeners (raftmeta.kafka.voter_endpoints).

Checked here first, in KRaft's order (KafkaRaftClient.handleFetchRequest): another cluster's id is
INCONSISTENT_CLUSTER_ID and anything but exactly ``__cluster_metadata`` partition 0 (by name before
v13, by topic id from v13) INVALID_REQUEST, both for the whole request; a negative ``max_wait`` or
``fetch_offset``, a negative ``last_fetched_epoch`` or one above ``current_leader_epoch``
INVALID_REQUEST on the partition. A null cluster id is accepted, as KRaft accepts it. A fetch
claiming a voter's id is INVALID_REQUEST on the partition (:func:`claims_a_voter`).

What differs from KRaft: replica id -1 (a consumer-style read, which KRaft serves without
tracking progress) is INVALID_REQUEST, the core's rule for the gRPC Fetch.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from typing import Any, Final

from raftmeta.controller.errors import NotControllerError
from raftmeta.kafka.context import ApiContext, KafkaNode, RaftPath
from raftmeta.kafka.framing import Request
from raftmeta.kafka.voter_endpoints import with_kafka_listeners
from raftmeta.records.kafka.mapping import to_kafka_log
from raftmeta.v1 import errors_pb2, raft_pb2

METADATA_TOPIC: Final = "__cluster_metadata"
# Kafka's Uuid.METADATA_TOPIC_ID: the metadata log's fixed topic id.
METADATA_TOPIC_ID: Final = uuid.UUID(int=1)
METADATA_PARTITION: Final = 0
NO_LEADER: Final = -1
# How long past the request's own max_wait the handler waits for the node's answer before it
# gives up (a node shutting down answers parked fetches NOT_LEADER_OR_FOLLOWER at once).
ANSWER_GRACE_S: Final = 30.0


class RaftPathMissing(RuntimeError):
    """The listener was started without the node's raft path: a wiring bug, never a request's fault."""


def claims_a_voter(ctx: ApiContext, replica_id: int) -> bool:
    """Whether a raft request through the Kafka listener claims a voter's id. raftmeta's voters
    replicate over gRPC, never here; a Fetch in a voter's name would count toward the high
    watermark (commit records the voter does not hold), so the listener refuses it."""
    assert ctx.raft is not None
    return replica_id in ctx.raft.voter_ids()


def _topic_matches(topic: Any, version: int) -> bool:
    if version >= 13:
        return getattr(topic, "topic_id", None) == METADATA_TOPIC_ID
    return getattr(topic, "topic", None) == METADATA_TOPIC


def _single_partition(body: Any, version: int) -> Any | None:
    """The one FetchPartition of ``__cluster_metadata``/0, or None when the request asks anything else."""
    topics = tuple(body.topics)
    if len(topics) != 1 or not _topic_matches(topics[0], version):
        return None
    partitions = tuple(topics[0].partitions)
    if len(partitions) != 1 or int(partitions[0].partition) != METADATA_PARTITION:
        return None
    return partitions[0]


def replica_id(body: Any) -> int:
    """The fetcher's id: ``replica_state`` from v15, the top-level ``replica_id`` before."""
    state = getattr(body, "replica_state", None)
    if state is not None:
        return int(state.replica_id)
    return int(getattr(body, "replica_id", NO_LEADER))


def _max_wait_ms(body: Any) -> int:
    return int(body.max_wait.total_seconds() * 1000)


def _invalid_partition(body: Any, partition: Any) -> bool:
    last_fetched_epoch = int(getattr(partition, "last_fetched_epoch", -1))
    current_epoch = int(getattr(partition, "current_leader_epoch", -1))
    return (
        _max_wait_ms(body) < 0
        or int(partition.fetch_offset) < 0
        or last_fetched_epoch < 0
        or last_fetched_epoch > current_epoch
    )


def raft_fetch(ctx: ApiContext, body: Any, partition: Any) -> raft_pb2.FetchRequest:
    """The Kafka Fetch as the gRPC replication's: the same fields, the fetcher's directory id (v17)."""
    directory: uuid.UUID | None = getattr(partition, "replica_directory_id", None)
    cluster_id = getattr(body, "cluster_id", None)
    return raft_pb2.FetchRequest(
        cluster_id=ctx.cluster_id if cluster_id is None else str(cluster_id),
        replica_id=replica_id(body),
        replica_epoch=int(partition.current_leader_epoch),
        fetch_offset=int(partition.fetch_offset),
        last_fetched_epoch=int(partition.last_fetched_epoch),
        max_wait_ms=_max_wait_ms(body),
        max_bytes=min(int(partition.partition_max_bytes), int(body.max_bytes)),
        log_start_offset=int(getattr(partition, "log_start_offset", -1)),
        replica_directory_id=b"" if directory is None else directory.bytes,
    )


def _partition(
    error_code: int, answer: raft_pb2.FetchResponse | None, nodes: Sequence[KafkaNode] = ()
) -> dict[str, Any]:
    """KRaft's partition answer; without ``answer`` (refused before the core) the defaults KRaft's
    empty answer carries."""
    values: dict[str, Any] = {
        "partition_index": METADATA_PARTITION,
        "error_code": error_code,
        "high_watermark": -1,
        "last_stable_offset": -1,
        "log_start_offset": -1,
        "aborted_transactions": [],
        "preferred_read_replica": -1,
        "records": b"",
        "diverging_epoch": {"epoch": -1, "end_offset": -1},
        "current_leader": {"leader_id": NO_LEADER, "leader_epoch": -1},
        "snapshot_id": {"end_offset": -1, "epoch": -1},
    }
    if answer is None:
        return values
    # A refused fetch carries no high watermark (KRaft's empty answers say -1), the rest as served.
    values["high_watermark"] = answer.high_watermark if error_code == errors_pb2.NONE else -1
    values["log_start_offset"] = answer.log_start_offset
    values["current_leader"] = {"leader_id": answer.leader_id, "leader_epoch": answer.leader_epoch}
    if answer.HasField("diverging_epoch"):
        values["diverging_epoch"] = {"epoch": answer.diverging_epoch.epoch,
                                     "end_offset": answer.diverging_epoch.end_offset}  # fmt: skip
    if answer.HasField("snapshot_id"):
        values["snapshot_id"] = {"end_offset": answer.snapshot_id.end_offset, "epoch": answer.snapshot_id.epoch}
    if answer.records:
        values["records"] = to_kafka_log(with_kafka_listeners(answer.records, nodes))
    return values


def _endpoint(node: KafkaNode) -> dict[str, Any]:
    return {"node_id": node.node_id, "host": node.host, "port": node.port, "rack": None}


def _answer(error_code: int, partitions: list[dict[str, Any]], leader_id: int, ctx: ApiContext) -> dict[str, Any]:
    responses = []
    if partitions:
        responses = [{"topic": METADATA_TOPIC, "topic_id": METADATA_TOPIC_ID, "partitions": partitions}]
    return {
        "throttle_time": 0,
        "error_code": error_code,
        "session_id": 0,
        "responses": responses,
        # v16: where the leader is, on the listener the fetcher came in by (a broker learns the
        # leader's address from it, as from KRaft's answer).
        "node_endpoints": [_endpoint(n) for n in ctx.nodes if n.node_id == leader_id],
    }


def _refused(ctx: ApiContext, raft: RaftPath, error_code: int) -> dict[str, Any]:
    """A fetch refused before the core: the error with the leader, its epoch and endpoint and the
    log start, as KRaft's empty answer (buildEmptyFetchResponse) carries them."""
    leader_id, epoch, log_start = raft.leader_and_log_start()
    view = raft_pb2.FetchResponse(leader_id=leader_id, leader_epoch=epoch, log_start_offset=log_start)
    return _answer(0, [_partition(error_code, view)], leader_id, ctx)


async def fetch(ctx: ApiContext, request: Request) -> dict[str, Any]:
    body = request.body
    cluster_id = getattr(body, "cluster_id", None)
    if cluster_id is not None and str(cluster_id) != ctx.cluster_id:
        return _answer(int(errors_pb2.INCONSISTENT_CLUSTER_ID), [], NO_LEADER, ctx)
    partition = _single_partition(body, request.api_version)
    if partition is None:
        return _answer(int(errors_pb2.INVALID_REQUEST), [], NO_LEADER, ctx)
    if ctx.raft is None:
        raise RaftPathMissing("the Kafka listener serves Fetch only with the node's raft path")
    if _invalid_partition(body, partition) or claims_a_voter(ctx, replica_id(body)):
        return _refused(ctx, ctx.raft, int(errors_pb2.INVALID_REQUEST))
    wanted = raft_fetch(ctx, body, partition)
    try:
        answer: raft_pb2.FetchResponse = await asyncio.wait_for(
            ctx.raft.submit_raft(wanted.replica_id, wanted), wanted.max_wait_ms / 1000 + ANSWER_GRACE_S
        )
    except NotControllerError:  # the node is shutting down: the fetcher looks for the leader elsewhere
        return _answer(0, [_partition(int(errors_pb2.NOT_LEADER_OR_FOLLOWER), None)], NO_LEADER, ctx)
    if answer.error_code == errors_pb2.INCONSISTENT_CLUSTER_ID:
        return _answer(int(answer.error_code), [], NO_LEADER, ctx)  # KRaft refuses the whole request
    return _answer(0, [_partition(int(answer.error_code), answer, ctx.nodes)], answer.leader_id, ctx)
