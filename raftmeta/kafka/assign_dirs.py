"""AssignReplicasToDirs (73): a broker's AssignmentsManager says which log directory holds each of
its replicas (KIP-858), on the node's Kafka listener.

The controller's AssignReplicasToDirs (raftmeta.controller.assign_dirs: Kafka's
``handleAssignReplicasToDirs``, its order and its codes) answers through the node's admin path,
once its records are committed; this module translates fields. Kafka's answer has no error
messages: a refused partition carries its code, a stale sender (STALE_BROKER_EPOCH) or a refused
call the top-level code and no directories, as KRaft's ControllerApis answers.
"""

from __future__ import annotations

import uuid
from typing import Any

from raftmeta.kafka.context import ApiContext, CallRefused, call
from raftmeta.kafka.framing import Request
from raftmeta.kafka.uuids import uuid_bytes
from raftmeta.v1 import controller_pb2, errors_pb2


def assign_request(body: Any) -> controller_pb2.AssignReplicasToDirsRequest:
    """AssignReplicasToDirs' fields as the controller's."""
    request = controller_pb2.AssignReplicasToDirsRequest(
        broker_id=int(body.broker_id), broker_epoch=int(body.broker_epoch)
    )
    for directory in body.directories:
        item = request.directories.add(id=uuid_bytes(directory.id_))
        for topic in directory.topics:
            item.topics.add(
                topic_id=uuid_bytes(topic.topic_id), partitions=[int(p.partition_index) for p in topic.partitions]
            )
    return request


def _answer(error_code: int, directories: list[dict[str, Any]]) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": error_code, "directories": directories}


async def assign_replicas_to_dirs(ctx: ApiContext, request: Request) -> dict[str, Any]:
    try:
        response: controller_pb2.AssignReplicasToDirsResponse = await call(
            ctx, "AssignReplicasToDirs", assign_request(request.body)
        )
    except CallRefused as exc:
        return _answer(exc.error_code, [])
    if response.error_code != errors_pb2.NONE:
        return _answer(int(response.error_code), [])
    directories = [
        {
            "id_": uuid.UUID(bytes=bytes(d.id)),
            "topics": [
                {
                    "topic_id": uuid.UUID(bytes=bytes(t.topic_id)),
                    "partitions": [
                        {"partition_index": p.partition_index, "error_code": int(p.error_code)} for p in t.partitions
                    ],
                }
                for t in d.topics
            ],
        }
        for d in response.directories
    ]
    return _answer(0, directories)
