"""Broker lifecycle: registration, heartbeats, session fencing through Controller.tick."""

from __future__ import annotations

from typing import TypedDict, Unpack

from placement.rng import JavaRandom
from raftmeta.controller import Controller, ControllerConfig
from raftmeta.controller.brokers import broker_heartbeat, describe_cluster, register_broker
from raftmeta.v1 import controller_pb2, errors_pb2
from tests.controller.helpers import Context, CounterIds, incarnation, is_working


class _Placement(TypedDict, total=False):
    rack: str
    pool: str


def register(
    ctx: Context, broker_id: int, generation: int = 1, **kw: Unpack[_Placement]
) -> controller_pb2.RegisterBrokerResponse:
    result = ctx.run(
        register_broker,
        controller_pb2.RegisterBrokerRequest(
            broker_id=broker_id, incarnation_id=incarnation(broker_id, generation), **kw
        ),
    )
    return result.response  # type: ignore[no-any-return]


def test_registration_is_fenced_until_the_first_heartbeat() -> None:
    ctx = Context()
    response = register(ctx, 1, rack="r1", pool="gold")
    assert (response.error_code, response.broker_epoch) == (errors_pb2.NONE, 1)
    broker = ctx.image.brokers[1]
    assert (broker.rack, broker.pool, broker.fenced, broker.epoch) == ("r1", "gold", True, 1)
    result = ctx.heartbeat(1)
    assert result.response.is_fenced is False
    assert result.response.session_timeout_ms == 9000
    assert [r.WhichOneof("record") for r in result.records] == ["unfence_broker"]
    assert not ctx.image.brokers[1].fenced
    # A second heartbeat changes nothing.
    assert ctx.heartbeat(1).records == ()


def test_same_incarnation_reregistration_is_idempotent() -> None:
    ctx = Context()
    register(ctx, 1)
    again = ctx.call(register_broker, controller_pb2.RegisterBrokerRequest(broker_id=1, incarnation_id=incarnation(1)))
    assert again.records == ()
    assert again.response.broker_epoch == 1
    changed = ctx.call(
        register_broker, controller_pb2.RegisterBrokerRequest(broker_id=1, incarnation_id=incarnation(1), rack="x")
    )
    assert changed.response.error_code == errors_pb2.INVALID_REQUEST
    assert changed.records == ()


def test_new_incarnation_gets_a_new_epoch_once_the_old_one_is_fenced() -> None:
    ctx = Context()
    ctx.add_brokers([1, 2])
    clash = ctx.call(
        register_broker, controller_pb2.RegisterBrokerRequest(broker_id=1, incarnation_id=incarnation(1, 2))
    )
    assert (clash.response.error_code, clash.response.error_message) == (
        errors_pb2.DUPLICATE_BROKER_REGISTRATION,
        "Another broker is registered with that broker id.",
    )
    ctx.fence(1)
    response = register(ctx, 1, generation=2)
    assert response.error_code == errors_pb2.NONE
    assert response.broker_epoch == 3, "1 + the highest registered epoch (broker 2 has 2)"
    assert ctx.image.brokers[1].fenced
    stale = ctx.call(broker_heartbeat, controller_pb2.BrokerHeartbeatRequest(broker_id=1, broker_epoch=1))
    assert (stale.response.error_code, stale.response.error_message) == (
        errors_pb2.STALE_BROKER_EPOCH,
        "Expected broker epoch 3, but got broker epoch 1",
    )


def test_register_validation() -> None:
    ctx = Context(ControllerConfig(cluster_id="abc"))
    wrong = ctx.call(
        register_broker,
        controller_pb2.RegisterBrokerRequest(broker_id=1, incarnation_id=incarnation(1), cluster_id="xyz"),
    )
    assert (wrong.response.error_code, wrong.response.error_message) == (
        errors_pb2.INCONSISTENT_CLUSTER_ID,
        "Expected cluster ID abc, but got cluster ID xyz",
    )
    for request in (
        controller_pb2.RegisterBrokerRequest(broker_id=-1, incarnation_id=incarnation(1)),
        controller_pb2.RegisterBrokerRequest(broker_id=1, incarnation_id=b"short"),
    ):
        result = ctx.call(register_broker, request)
        assert result.response.error_code == errors_pb2.INVALID_REQUEST
        assert result.records == ()


def test_heartbeat_from_unknown_broker() -> None:
    ctx = Context()
    result = ctx.call(broker_heartbeat, controller_pb2.BrokerHeartbeatRequest(broker_id=5, broker_epoch=1))
    assert (result.response.error_code, result.response.error_message) == (
        errors_pb2.STALE_BROKER_EPOCH,
        "No broker registration found for broker id 5",
    )


def test_want_fence_is_a_controlled_shutdown() -> None:
    ctx = Context()
    ctx.add_brokers([1, 2])
    ctx.create_ok("t", 2, 2)
    result = ctx.heartbeat(1, want_fence=True)
    assert result.response.is_fenced
    assert ctx.image.brokers[1].fenced
    assert all(1 not in p.isr and p.leader == 2 for p in ctx.image.topic_by_name("t").partitions)  # type: ignore[union-attr]


def test_describe_cluster() -> None:
    ctx = Context(ControllerConfig(cluster_id="c1", node_id=3))
    ctx.add_brokers([2, 1], racks=["b", "a"])
    response = ctx.call(describe_cluster, controller_pb2.DescribeClusterRequest()).response
    assert (response.cluster_id, response.controller_id) == ("c1", 3)
    assert [(b.broker_id, b.rack, b.fenced, b.broker_epoch) for b in response.brokers] == [
        (1, "a", False, 2),
        (2, "b", False, 1),
    ]


def _controller_with_brokers(ids: list[int], config: ControllerConfig | None = None) -> Controller:
    controller = Controller(config=config or ControllerConfig())
    ids_source, random = CounterIds(), JavaRandom(1)
    offset = 0
    for broker_id in ids:
        for request, method in (
            (
                controller_pb2.RegisterBrokerRequest(broker_id=broker_id, incarnation_id=incarnation(broker_id)),
                "RegisterBroker",
            ),
            (controller_pb2.BrokerHeartbeatRequest(broker_id=broker_id, broker_epoch=0), "BrokerHeartbeat"),
        ):
            if isinstance(request, controller_pb2.BrokerHeartbeatRequest):
                request.broker_epoch = controller.image.brokers[broker_id].epoch
            handled = controller.handle(method, request, 0, ids_source, random)
            offset += len(handled.records)
            controller.commit(1, offset)
    return controller


def test_tick_fences_brokers_whose_session_expired_and_heartbeats_unfence() -> None:
    controller = _controller_with_brokers([1, 2, 3])
    ids_source, random = CounterIds(), JavaRandom(1)
    controller.handle(
        "CreateTopics",
        controller_pb2.CreateTopicsRequest(
            topics=[controller_pb2.CreatableTopic(name="t", num_partitions=3, replication_factor=3)]
        ),
        0,
        ids_source,
        random,
    )
    controller.commit(1, 100)
    assert controller.tick(9000) is None, "exactly the session timeout is not yet expired"
    for broker_id in (1, 2):
        beat = controller.handle(
            "BrokerHeartbeat",
            controller_pb2.BrokerHeartbeatRequest(
                broker_id=broker_id, broker_epoch=controller.image.brokers[broker_id].epoch
            ),
            5000,
            ids_source,
            random,
        )
        assert beat.done
        assert beat.records == ()
    fenced = controller.tick(9001)
    assert fenced is not None
    assert [r.fence_broker.broker_id for r in fenced.records if r.HasField("fence_broker")] == [3]
    assert controller.image.brokers[3].fenced
    assert not controller.committed_image.brokers[3].fenced, "not committed yet"
    assert controller.tick(9002) is None, "a pending fence is not repeated"
    assert (fenced.method, fenced.response) == ("Tick", None), "a timer's batch answers nobody"
    controller.commit(1, 200)
    committed = controller.committed_image  # a new name: mypy would keep the narrowing from before the commit
    assert committed.brokers[3].fenced
    # Both other brokers time out together: a batch each, the second fence sees the first.
    first = controller.tick(20_000)
    assert first is not None and is_working(controller)
    assert [r.fence_broker.broker_id for r in first.records if r.HasField("fence_broker")] == [1]
    assert first.response is None
    controller.commit(1, 300)
    second = controller.resume()
    assert [r.fence_broker.broker_id for r in second.records if r.HasField("fence_broker")] == [2]
    assert not is_working(controller)
    t = controller.image.topic_by_name("t")
    assert t is not None
    assert all(p.leader == -1 and len(p.isr) == 1 for p in t.partitions)
    assert (second.method, second.response) == ("Tick", None)
    controller.commit(1, 301)
    # Broker 3 heartbeats again: unfenced, but it is in no ISR, so the partitions stay leaderless.
    back = controller.handle(
        "BrokerHeartbeat",
        controller_pb2.BrokerHeartbeatRequest(broker_id=3, broker_epoch=controller.image.brokers[3].epoch),
        21_000,
        ids_source,
        random,
    )
    assert [r.WhichOneof("record") for r in back.records] == ["unfence_broker"]
    controller.commit(1, 400)
    assert back.response.is_fenced is False  # type: ignore[union-attr]
    # Broker 2, the last ISR member of every partition, returns: it leads them all again.
    last_isr = {p.isr for p in t.partitions}
    assert last_isr == {(2,)}
    again = controller.handle(
        "BrokerHeartbeat",
        controller_pb2.BrokerHeartbeatRequest(broker_id=2, broker_epoch=controller.image.brokers[2].epoch),
        21_000,
        ids_source,
        random,
    )
    assert [r.WhichOneof("record") for r in again.records] == ["unfence_broker"] + ["partition_change"] * 3
    assert all(p.leader == 2 for p in controller.image.topic_by_name("t").partitions)  # type: ignore[union-attr]
    assert controller.tick(21_500) is None


def test_brokers_without_a_known_contact_get_a_full_session_after_failover() -> None:
    controller = _controller_with_brokers([1])
    successor = Controller(controller.committed_image)
    assert successor.tick(1_000_000) is None
    assert successor.tick(1_009_000) is None
    assert successor.tick(1_009_001) is not None
