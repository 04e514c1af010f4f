"""AlterPartition (56): a partition leader's ISR shrink or expand, on the node's Kafka listener.

The controller's AlterPartition (raftmeta.controller.isr: Kafka's validateAlterPartitionData, its
order and its codes) answers through the node's admin path; this module translates fields. v2
names the new ISR by broker id alone (each member's broker epoch unchecked, -1, as Kafka's
newIsrToSimpleNewIsrWithBrokerEpochs does); v3 carries each member's broker epoch (KIP-903).

Kafka's answer has no error messages: a refused partition carries its code and zeros elsewhere,
a stale sender (STALE_BROKER_EPOCH) or a refused call the top-level code and no topics, as
KRaft's ControllerApis answers. Every partition is RECOVERED (raftmeta keeps no leader recovery
state), so answers say 0.
"""

from __future__ import annotations

import uuid
from typing import Any, Final

from raftmeta.kafka.context import ApiContext, CallRefused, call
from raftmeta.kafka.framing import Request
from raftmeta.kafka.uuids import uuid_bytes
from raftmeta.v1 import controller_pb2, errors_pb2

UNCHECKED_BROKER_EPOCH: Final = -1
RECOVERED: Final = 0


def _members(partition: Any) -> list[controller_pb2.BrokerIdAndEpoch]:
    with_epochs = getattr(partition, "new_isr_with_epochs", None)
    if with_epochs is not None:
        return [controller_pb2.BrokerIdAndEpoch(broker_id=int(b.broker_id), broker_epoch=int(b.broker_epoch))
                for b in with_epochs]  # fmt: skip
    return [
        controller_pb2.BrokerIdAndEpoch(broker_id=int(b), broker_epoch=UNCHECKED_BROKER_EPOCH)
        for b in partition.new_isr
    ]


def alter_partition_request(body: Any) -> controller_pb2.AlterPartitionRequest:
    """AlterPartition's fields as the controller's (the zero uuid stays zero: an unknown topic)."""
    request = controller_pb2.AlterPartitionRequest(broker_id=int(body.broker_id), broker_epoch=int(body.broker_epoch))
    for topic in body.topics:
        item = request.topics.add(topic_id=uuid_bytes(topic.topic_id))
        for partition in topic.partitions:
            item.partitions.add(
                partition_index=int(partition.partition_index),
                leader_epoch=int(partition.leader_epoch),
                partition_epoch=int(partition.partition_epoch),
                leader_recovery_state=int(getattr(partition, "leader_recovery_state", RECOVERED)),
                new_isr_with_epochs=_members(partition),
            )
    return request


def _partition(result: controller_pb2.AlterPartitionPartitionResult) -> dict[str, Any]:
    if result.error_code != errors_pb2.NONE:
        return {"partition_index": result.partition_index, "error_code": int(result.error_code), "leader_id": 0,
                "leader_epoch": 0, "isr": [], "leader_recovery_state": RECOVERED, "partition_epoch": 0}  # fmt: skip
    return {
        "partition_index": result.partition_index,
        "error_code": 0,
        "leader_id": result.leader_id,
        "leader_epoch": result.leader_epoch,
        "isr": list(result.isr),
        "leader_recovery_state": RECOVERED,
        "partition_epoch": result.partition_epoch,
    }


def _answer(error_code: int, topics: list[dict[str, Any]]) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": error_code, "topics": topics}


async def alter_partition(ctx: ApiContext, request: Request) -> dict[str, Any]:
    try:
        response: controller_pb2.AlterPartitionResponse = await call(
            ctx, "AlterPartition", alter_partition_request(request.body)
        )
    except CallRefused as exc:
        return _answer(exc.error_code, [])
    if response.error_code != errors_pb2.NONE:
        return _answer(int(response.error_code), [])
    topics = [
        {"topic_id": uuid.UUID(bytes=bytes(t.topic_id)), "partitions": [_partition(p) for p in t.partitions]}
        for t in response.topics
    ]
    return _answer(0, topics)
