"""AllocateProducerIds (raftmeta/controller/producer_ids.py), as Kafka's ProducerIdControlManager
and its tests: blocks of 1000 ids in order, the broker's epoch checked, the next id in the image
(snapshots and a new leader carry it on), replay refusing a block that does not move forward."""

from __future__ import annotations

import pytest

from raftmeta.controller import Controller
from raftmeta.controller.errors import ReplayError
from raftmeta.controller.producer_ids import BLOCK_SIZE, PRODUCER_ID_MAX, allocate_producer_ids
from raftmeta.controller.snapshot import image_from_records, image_to_records
from raftmeta.v1 import controller_pb2, errors_pb2, records_pb2

from .helpers import Context


def allocate(ctx: Context, broker_id: int, broker_epoch: int) -> controller_pb2.AllocateProducerIdsResponse:
    result = ctx.run(
        allocate_producer_ids,
        controller_pb2.AllocateProducerIdsRequest(broker_id=broker_id, broker_epoch=broker_epoch),
    )
    response: controller_pb2.AllocateProducerIdsResponse = result.response
    return response


def test_blocks_of_1000_are_given_in_order_to_any_registered_broker() -> None:
    ctx = Context()
    one, two = ctx.register(1), ctx.register(2)
    blocks = [
        (r.producer_id_start, r.producer_id_len)
        for r in (allocate(ctx, 1, one), allocate(ctx, 2, two), allocate(ctx, 1, one))
    ]
    assert blocks == [(0, BLOCK_SIZE), (1000, BLOCK_SIZE), (2000, BLOCK_SIZE)]
    assert ctx.image.next_producer_id == 3000
    assert [r.producer_ids for r in ctx.log if r.HasField("producer_ids")] == [
        records_pb2.ProducerIdsRecord(broker_id=1, broker_epoch=one, next_producer_id=1000),
        records_pb2.ProducerIdsRecord(broker_id=2, broker_epoch=two, next_producer_id=2000),
        records_pb2.ProducerIdsRecord(broker_id=1, broker_epoch=one, next_producer_id=3000),
    ]


@pytest.mark.parametrize(
    ("broker_id", "epoch_delta", "message"),
    [
        (1, 1, "Expected broker epoch {epoch}, but got broker epoch {asked}"),
        (9, 0, "No broker registration found for broker id 9"),
    ],
)
def test_a_stale_or_unknown_broker_epoch_is_refused_with_nothing_written(
    broker_id: int, epoch_delta: int, message: str
) -> None:
    ctx = Context()
    epoch = ctx.register(1)
    asked = epoch + epoch_delta
    result = ctx.call(
        allocate_producer_ids, controller_pb2.AllocateProducerIdsRequest(broker_id=broker_id, broker_epoch=asked)
    )
    assert result.records == ()
    assert result.response.error_code == errors_pb2.STALE_BROKER_EPOCH
    assert result.response.error_message == message.format(epoch=epoch, asked=asked)
    assert (result.response.producer_id_start, result.response.producer_id_len) == (0, 0)


def test_the_last_block_of_the_int64_range_is_refused_unknown_server_error() -> None:
    ctx = Context()
    epoch = ctx.register(1)
    ctx.replay(
        [records_pb2.MetadataRecord(producer_ids=records_pb2.ProducerIdsRecord(next_producer_id=PRODUCER_ID_MAX - 999))]
    )
    result = ctx.call(allocate_producer_ids, controller_pb2.AllocateProducerIdsRequest(broker_id=1, broker_epoch=epoch))
    assert result.records == () and result.response.error_code == errors_pb2.UNKNOWN_SERVER_ERROR
    assert "Exhausted all producer ids" in result.response.error_message


def test_the_next_block_survives_a_snapshot_and_a_new_leader() -> None:
    ctx = Context()
    epoch = ctx.register(1)
    allocate(ctx, 1, epoch)
    allocate(ctx, 1, epoch)
    records = image_to_records(ctx.image)
    assert [r.producer_ids for r in records if r.HasField("producer_ids")] == [
        records_pb2.ProducerIdsRecord(broker_id=0, broker_epoch=0, next_producer_id=2000)  # Kafka's snapshot form
    ]
    assert image_from_records(records) == ctx.image
    successor = Controller.from_snapshot(records, 10)
    handled = successor.handle(
        "AllocateProducerIds", controller_pb2.AllocateProducerIdsRequest(broker_id=1, broker_epoch=epoch), 0
    )
    assert isinstance(handled.response, controller_pb2.AllocateProducerIdsResponse)
    assert handled.response.producer_id_start == 2000


@pytest.mark.parametrize("next_id", [1000, 999])
def test_replay_refuses_a_block_that_does_not_move_forward(next_id: int) -> None:
    ctx = Context()
    ctx.replay([records_pb2.MetadataRecord(producer_ids=records_pb2.ProducerIdsRecord(next_producer_id=1000))])
    with pytest.raises(ReplayError, match=f"next_producer_id {next_id} does not rise above 1000"):
        ctx.image.replay(
            records_pb2.MetadataRecord(producer_ids=records_pb2.ProducerIdsRecord(next_producer_id=next_id))
        )
