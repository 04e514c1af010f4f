"""AllocateProducerIds: blocks of producer ids for brokers (Kafka's ProducerIdControlManager).

A broker gives its idempotent and transactional producers ids from blocks the controller hands
out. Kafka's rules, kept here:

- the broker must be registered with the epoch it names (``checkBrokerEpoch``: STALE_BROKER_EPOCH
  with Kafka's messages), fenced or not;
- a block is :data:`BLOCK_SIZE` ids from the image's ``next_producer_id``; its ProducerIdsRecord
  moves ``next_producer_id`` past it, so a block is given once, across failovers and snapshots
  (replay refuses a record that does not move it forward);
- past the int64 range: UNKNOWN_SERVER_ERROR, nothing written.
"""

from __future__ import annotations

from typing import Final

from placement.rng import RandomSource
from raftmeta.controller.brokers import check_broker_epoch
from raftmeta.controller.image import MetadataImage
from raftmeta.controller.result import DEFAULT_CONFIG, ControllerConfig, ControllerResult, TopicIdSource
from raftmeta.v1 import controller_pb2, errors_pb2, records_pb2

BLOCK_SIZE: Final = 1000  # Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE
PRODUCER_ID_MAX: Final = (1 << 63) - 1


def allocate_producer_ids(
    image: MetadataImage,
    request: controller_pb2.AllocateProducerIdsRequest,
    now_ms: int,
    ids: TopicIdSource,
    random: RandomSource,
    config: ControllerConfig = DEFAULT_CONFIG,
) -> ControllerResult[controller_pb2.AllocateProducerIdsResponse]:
    del now_ms, ids, random, config
    stale = check_broker_epoch(image, request.broker_id, request.broker_epoch)
    if stale is not None:
        refused = controller_pb2.AllocateProducerIdsResponse(error_message=stale.message)
        refused.error_code = stale.code  # type: ignore[assignment]  # the enum's int
        return ControllerResult((), refused)
    start = image.next_producer_id
    if start > PRODUCER_ID_MAX - BLOCK_SIZE:
        return ControllerResult(
            (),
            controller_pb2.AllocateProducerIdsResponse(
                error_code=errors_pb2.UNKNOWN_SERVER_ERROR,
                error_message=f"Exhausted all producer ids: the next block from {start} would pass {PRODUCER_ID_MAX}",
            ),
        )
    record = records_pb2.ProducerIdsRecord(
        broker_id=request.broker_id, broker_epoch=request.broker_epoch, next_producer_id=start + BLOCK_SIZE
    )
    return ControllerResult(
        (records_pb2.MetadataRecord(producer_ids=record),),
        controller_pb2.AllocateProducerIdsResponse(producer_id_start=start, producer_id_len=BLOCK_SIZE),
    )
