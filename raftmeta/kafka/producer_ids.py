"""AllocateProducerIds (67): a real Kafka broker asks its controller for a block of producer ids
when an idempotent or transactional producer first needs one (Kafka's RPCProducerIdManager).

The controller's AllocateProducerIds (raftmeta.controller.producer_ids) answers through the
node's admin path; this module only translates fields. An error keeps the schema's defaults for the
block (start 0, length 0), as KRaft's QuorumController answers; the broker retries on its own
schedule."""

from __future__ import annotations

from typing import Any

from raftmeta.kafka.context import ApiContext, CallRefused, call
from raftmeta.kafka.framing import Request
from raftmeta.v1 import controller_pb2, errors_pb2


def _refused(error_code: int) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": error_code, "producer_id_start": 0, "producer_id_len": 0}


async def allocate_producer_ids(ctx: ApiContext, request: Request) -> dict[str, Any]:
    body = request.body
    asked = controller_pb2.AllocateProducerIdsRequest(
        broker_id=int(body.broker_id), broker_epoch=int(body.broker_epoch)
    )
    try:
        response: controller_pb2.AllocateProducerIdsResponse = await call(ctx, "AllocateProducerIds", asked)
    except CallRefused as exc:
        return _refused(exc.error_code)
    if response.error_code != errors_pb2.NONE:
        return _refused(int(response.error_code))
    return {
        "throttle_time": 0,
        "error_code": 0,
        "producer_id_start": int(response.producer_id_start),
        "producer_id_len": int(response.producer_id_len),
    }
