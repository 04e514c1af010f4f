"""Partition APIs: ElectLeaders, AlterPartitionReassignments and ListPartitionReassignments.

Leaders, replicas and ISRs are those of raftmeta's simulated brokers. A reassignment completes
when the adding brokers report (by heartbeat) that they caught up, as raftmeta's gRPC API does.
"""

from __future__ import annotations

from typing import Any

from raftmeta.kafka.context import ApiContext, CallRefused, call, timeout_s
from raftmeta.kafka.framing import Request
from raftmeta.v1 import controller_pb2

# Kafka's ElectionType numbers: 0 PREFERRED, 1 UNCLEAN.
UNCLEAN = 1


async def elect_leaders(ctx: ApiContext, request: Request) -> dict[str, Any]:
    """ElectLeaders (v0 is always a preferred election). ``topic_partitions`` None = every
    partition; an empty list asks for nothing."""
    body = request.body
    election = getattr(body, "election_type", 0)
    asked = body.topic_partitions
    if asked is not None and not asked:
        return {"throttle_time": 0, "error_code": 0, "replica_election_results": []}
    grpc_request = controller_pb2.ElectLeadersRequest(
        election_type=controller_pb2.ELECTION_TYPE_UNCLEAN
        if election == UNCLEAN
        else controller_pb2.ELECTION_TYPE_PREFERRED,
        timeout_ms=int(timeout_s(body.timeout) * 1000),
    )
    for item in asked or ():
        grpc_request.topic_partitions.add(topic=item.topic, partitions=list(item.partitions))
    try:
        response: controller_pb2.ElectLeadersResponse = await call(
            ctx, "ElectLeaders", grpc_request, timeout_s(body.timeout)
        )
    except CallRefused as exc:
        if request.api_version >= 1:
            return {"throttle_time": 0, "error_code": exc.error_code, "replica_election_results": []}
        results = [
            {"topic": t.topic, "partition_result": [
                {"partition_id": p, "error_code": exc.error_code, "error_message": exc.message} for p in t.partitions]}
            for t in asked or ()
        ]  # fmt: skip
        return {"throttle_time": 0, "replica_election_results": results}
    results = [
        {
            "topic": topic.topic,
            "partition_result": [
                {"partition_id": p.partition, "error_code": int(p.error_code), "error_message": p.error_message or None}
                for p in topic.partitions
            ],
        }
        for topic in response.results
    ]
    return {"throttle_time": 0, "error_code": 0, "replica_election_results": results}


async def alter_partition_reassignments(ctx: ApiContext, request: Request) -> dict[str, Any]:
    """A partition with ``replicas`` None cancels its reassignment (Kafka's null target)."""
    body = request.body
    grpc_request = controller_pb2.AlterPartitionReassignmentsRequest(timeout_ms=int(timeout_s(body.timeout) * 1000))
    for topic in body.topics:
        item = grpc_request.topics.add(name=topic.name)
        for partition in topic.partitions:
            item.partitions.add(
                partition_index=partition.partition_index,
                replicas=list(partition.replicas or ()),
                cancel=partition.replicas is None,
            )
    try:
        response: controller_pb2.AlterPartitionReassignmentsResponse = await call(
            ctx, "AlterPartitionReassignments", grpc_request, timeout_s(body.timeout)
        )
    except CallRefused as exc:
        return {"throttle_time": 0, "error_code": exc.error_code, "error_message": exc.message, "responses": []}
    responses = [
        {
            "name": topic.name,
            "partitions": [
                {
                    "partition_index": p.partition_index,
                    "error_code": int(p.error_code),
                    "error_message": p.error_message or None,
                }
                for p in topic.partitions
            ],
        }
        for topic in response.results
    ]
    return {"throttle_time": 0, "error_code": 0, "error_message": None, "responses": responses}


async def list_partition_reassignments(ctx: ApiContext, request: Request) -> dict[str, Any]:
    body = request.body
    grpc_request = controller_pb2.ListPartitionReassignmentsRequest()
    for topic in body.topics or ():
        grpc_request.topics.add(topic=topic.name, partitions=list(topic.partition_indexes))
    if body.topics is not None and not body.topics:
        return {"throttle_time": 0, "error_code": 0, "error_message": None, "topics": []}
    try:
        response: controller_pb2.ListPartitionReassignmentsResponse = await call(
            ctx, "ListPartitionReassignments", grpc_request, timeout_s(body.timeout)
        )
    except CallRefused as exc:
        return {"throttle_time": 0, "error_code": exc.error_code, "error_message": exc.message, "topics": []}
    topics = [
        {
            "name": topic.name,
            "partitions": [
                {
                    "partition_index": p.partition_index,
                    "replicas": list(p.replicas),
                    "adding_replicas": list(p.adding_replicas),
                    "removing_replicas": list(p.removing_replicas),
                }
                for p in topic.partitions
            ],
        }
        for topic in response.topics
    ]
    return {
        "throttle_time": 0,
        "error_code": int(response.error_code),
        "error_message": response.error_message or None,
        "topics": topics,
    }
