"""Cluster APIs: ApiVersions, DescribeCluster and DescribeQuorum.

ApiVersions and DescribeCluster are answered by the node called, from what it was configured
with (the Kafka listeners of the nodes it knows): Kafka clients use them to find brokers they
can connect to, and raftmeta's simulated brokers have no Kafka listener. DescribeCluster
therefore lists the raftmeta nodes, as Metadata does, not the simulated brokers (`raftmeta brokers
list` shows those). DescribeQuorum goes to the leader like the gRPC call and maps raftmeta's
"milliseconds ago" to Kafka's wall-clock timestamps.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any, Final

from raftmeta.kafka.context import ApiContext, CallRefused, call
from raftmeta.kafka.framing import Request
from raftmeta.kafka.topics import broker_values
from raftmeta.kafka.versions import SUPPORTED
from raftmeta.v1 import controller_pb2, errors_pb2

METADATA_TOPIC: Final = "__cluster_metadata"
LISTENER_NAME: Final = "PLAINTEXT"
UNSUPPORTED_VERSION: Final = 35
NULL_UUID = uuid.UUID(int=0)


def api_versions_values(error_code: int = 0) -> dict[str, Any]:
    return {
        "error_code": error_code,
        "api_keys": [
            {"api_key": key, "min_version": low, "max_version": high} for key, (low, high) in sorted(SUPPORTED.items())
        ],
        "throttle_time": 0,
    }


async def api_versions(ctx: ApiContext, request: Request) -> dict[str, Any]:
    del ctx, request
    return api_versions_values()


async def describe_cluster(ctx: ApiContext, request: Request) -> dict[str, Any]:
    endpoint_type = getattr(request.body, "endpoint_type", 1)
    return {
        "throttle_time": 0,
        "error_code": 0,
        "error_message": None,
        "endpoint_type": endpoint_type,
        "cluster_id": ctx.cluster_id,
        "controller_id": ctx.node_id,
        "brokers": broker_values(ctx),
        "cluster_authorized_operations": -(2**31),
    }


def _timestamp(now_ms: int, ago_ms: int) -> int:
    return -1 if ago_ms < 0 else now_ms - ago_ms


def _replica(state: controller_pb2.QuorumReplicaState, now_ms: int) -> dict[str, Any]:
    return {
        "replica_id": state.replica_id,
        "replica_directory_id": uuid.UUID(bytes=state.directory_id) if len(state.directory_id) == 16 else NULL_UUID,
        "log_end_offset": state.log_end_offset,
        "last_fetch_timestamp": _timestamp(now_ms, state.last_fetch_ms_ago),
        "last_caught_up_timestamp": _timestamp(now_ms, state.last_caught_up_ms_ago),
    }


async def describe_quorum(
    ctx: ApiContext, request: Request, wall_ms: Callable[[], int] = lambda: int(time.time() * 1000)
) -> dict[str, Any]:
    """Only partition 0 of __cluster_metadata exists; anything else is UNKNOWN_TOPIC_OR_PARTITION."""
    body = request.body
    response: controller_pb2.DescribeQuorumResponse | None = None
    refused: CallRefused | None = None
    asks_metadata = any(
        t.topic_name == METADATA_TOPIC and any(p.partition_index == 0 for p in t.partitions) for t in body.topics
    )
    if asks_metadata:
        try:
            response = await call(ctx, "DescribeQuorum", controller_pb2.DescribeQuorumRequest())
        except CallRefused as exc:
            refused = exc
    now_ms = wall_ms()
    topics = []
    for topic in body.topics:
        partitions = []
        for partition in topic.partitions:
            values: dict[str, Any] = {
                "partition_index": partition.partition_index,
                "error_code": errors_pb2.UNKNOWN_TOPIC_OR_PARTITION,
                "error_message": None,
                "leader_id": -1,
                "leader_epoch": -1,
                "high_watermark": -1,
                "current_voters": [],
                "observers": [],
            }
            if topic.topic_name == METADATA_TOPIC and partition.partition_index == 0:
                if refused is not None:
                    values.update(error_code=refused.error_code, error_message=refused.message)
                elif response is not None:
                    values.update(
                        error_code=0,
                        leader_id=response.leader_id,
                        leader_epoch=response.leader_epoch,
                        high_watermark=response.high_watermark,
                        current_voters=[_replica(v, now_ms) for v in response.voters],
                        observers=[_replica(o, now_ms) for o in response.observers],
                    )
            partitions.append(values)
        topics.append({"topic_name": topic.topic_name, "partitions": partitions})
    nodes = [
        {"node_id": n.node_id, "listeners": [{"name": LISTENER_NAME, "host": n.host, "port": n.port}]}
        for n in sorted(ctx.nodes, key=lambda n: n.node_id)
    ]
    return {"error_code": 0, "error_message": None, "topics": topics, "nodes": nodes}
