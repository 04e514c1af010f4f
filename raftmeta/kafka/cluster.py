"""Cluster APIs: ApiVersions, DescribeCluster and DescribeQuorum.

ApiVersions is answered by the node called. DescribeCluster lists what Metadata lists: the alive
simulated brokers, each at a node's Kafka listener (:mod:`raftmeta.kafka.brokers`); asked for
controllers (endpoint type 2, KIP-919's --bootstrap-controller), it lists the raftmeta nodes,
which are the controllers, without reading anything. DescribeQuorum goes to the leader like the
gRPC call and maps raftmeta's "milliseconds ago" to Kafka's wall-clock timestamps.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Final

from raftmeta.kafka.brokers import advertised_cluster, nodes_as_brokers
from raftmeta.kafka.context import ApiContext, CallRefused, call
from raftmeta.kafka.framing import Request
from raftmeta.kafka.uuids import kafka_uuid
from raftmeta.kafka.versions import SUPPORTED
from raftmeta.v1 import controller_pb2, errors_pb2

METADATA_TOPIC: Final = "__cluster_metadata"
LISTENER_NAME: Final = "PLAINTEXT"
UNSUPPORTED_VERSION: Final = 35
# DescribeCluster's endpoint types (KIP-919): 1 asks for brokers, 2 for controllers.
BROKER_ENDPOINT: Final = 1


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
    endpoint_type = getattr(request.body, "endpoint_type", BROKER_ENDPOINT)
    if endpoint_type == BROKER_ENDPOINT:
        cluster = await advertised_cluster(ctx, bool(getattr(request.body, "include_fenced_brokers", False)))
    else:
        cluster = nodes_as_brokers(ctx.node_id, ctx.nodes)
    return {
        "throttle_time": 0,
        "error_code": 0,
        "error_message": None,
        "endpoint_type": endpoint_type,
        "cluster_id": ctx.cluster_id,
        "controller_id": cluster.controller_id,
        "brokers": cluster.values(),
        "cluster_authorized_operations": -(2**31),
    }


def _timestamp(now_ms: int, ago_ms: int) -> int:
    return -1 if ago_ms < 0 else now_ms - ago_ms


def _replica(state: controller_pb2.QuorumReplicaState, now_ms: int) -> dict[str, Any]:
    return {
        "replica_id": state.replica_id,
        "replica_directory_id": kafka_uuid(state.directory_id),
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
