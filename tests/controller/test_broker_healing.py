"""Brokers that heal (Kafka's onBrokerStartup after seed 002's onBrokerFailure): AlterPartition
(KIP-497) with Kafka's validation, controlled shutdown, UnregisterBroker and automatic
preferred-leader elections (KRaft's maybeBalancePartitionLeaders)."""

from __future__ import annotations

from typing import Any

import pytest

from placement.rng import JavaRandom
from raftmeta.controller import Controller, ControllerConfig
from raftmeta.controller import brokers as broker_handlers
from raftmeta.controller.isr import alter_partition
from raftmeta.controller.topics import elect_leaders
from raftmeta.v1 import controller_pb2, errors_pb2
from tests.controller.helpers import Context, CounterIds, is_working


def manual(ctx: Context, name: str, assignments: list[list[int]]) -> None:
    """Create ``name`` with these replica lists (partition i gets ``assignments[i]``)."""
    result = ctx.create(
        controller_pb2.CreatableTopic(
            name=name,
            assignments=[
                controller_pb2.ReplicaAssignment(partition_index=i, broker_ids=brokers)
                for i, brokers in enumerate(assignments)
            ],
        )
    )
    (created,) = result.response.topics
    assert created.error_code == errors_pb2.NONE, created.error_message


def _alter(
    ctx: Context,
    name: str,
    pid: int,
    new_isr: list[int],
    *,
    sender: int | None = None,
    leader_epoch: int | None = None,
    partition_epoch: int | None = None,
    epochs: dict[int, int] | None = None,
    sender_epoch: int | None = None,
    leader_recovery_state: int = 0,
) -> Any:
    """AlterPartition for ``name-pid`` from its leader (or ``sender``), on the current epochs unless
    given; every ISR member's broker epoch is the registered one unless ``epochs`` says otherwise."""
    topic = ctx.image.topic_by_name(name)
    assert topic is not None
    part = topic.partitions[pid]
    sender = part.leader if sender is None else sender
    request = controller_pb2.AlterPartitionRequest(
        broker_id=sender,
        broker_epoch=ctx.image.brokers[sender].epoch if sender_epoch is None else sender_epoch,
    )
    data = request.topics.add(topic_id=topic.topic_id).partitions.add(
        partition_index=pid,
        leader_epoch=part.leader_epoch if leader_epoch is None else leader_epoch,
        partition_epoch=part.partition_epoch if partition_epoch is None else partition_epoch,
        leader_recovery_state=leader_recovery_state,
    )
    for broker_id in new_isr:
        registered = ctx.image.brokers.get(broker_id)
        default = registered.epoch if registered is not None else -1
        data.new_isr_with_epochs.add(broker_id=broker_id, broker_epoch=(epochs or {}).get(broker_id, default))
    return ctx.run(alter_partition, request)


def _error(result: Any) -> str:
    [topic] = result.response.topics
    [part] = topic.partitions
    return str(errors_pb2.ErrorCode.Name(part.error_code))


def _after_failure(ctx: Context) -> None:
    """Brokers 1-3, topic t (1 partition, replicas [1, 2, 3]); broker 1 fenced, then unfenced:
    it is back, but outside the ISR and no longer the leader -- the state the issue found stuck."""
    ctx.add_brokers([1, 2, 3])
    manual(ctx, "t", [[1, 2, 3]])
    ctx.fence(1)
    ctx.heartbeat(1)
    part = ctx.partition("t", 0)
    assert (part.leader, part.isr) == (2, (2, 3))


def test_a_caught_up_follower_rejoins_the_isr() -> None:
    ctx = Context()
    _after_failure(ctx)
    before = ctx.partition("t", 0)
    result = _alter(ctx, "t", 0, [2, 3, 1])
    assert _error(result) == "NONE"
    after = ctx.partition("t", 0)
    assert after.isr == (2, 3, 1)
    assert after.leader == 2 and after.leader_epoch == before.leader_epoch
    assert after.partition_epoch == before.partition_epoch + 1
    [answered] = result.response.topics[0].partitions
    assert (answered.leader_id, list(answered.isr), answered.partition_epoch) == (2, [2, 3, 1], after.partition_epoch)


def test_a_lagging_follower_leaves_the_isr() -> None:
    ctx = Context()
    ctx.add_brokers([1, 2, 3])
    manual(ctx, "t", [[1, 2, 3]])
    assert _error(_alter(ctx, "t", 0, [1, 2])) == "NONE"
    assert ctx.partition("t", 0).isr == (1, 2)


def test_an_unchanged_isr_writes_nothing() -> None:
    ctx = Context()
    ctx.add_brokers([1, 2])
    manual(ctx, "t", [[1, 2]])
    result = _alter(ctx, "t", 0, [1, 2])
    assert _error(result) == "NONE"
    assert result.records == ()


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"leader_epoch": 5}, "NOT_CONTROLLER"),
        ({"partition_epoch": 9}, "NOT_CONTROLLER"),
        ({"sender": 3}, "INVALID_REQUEST"),
        ({"new_isr": [2, 3, 1, 1]}, "INVALID_REQUEST"),
        ({"new_isr": [2, 3, 7]}, "INVALID_REQUEST"),
        ({"new_isr": [3, 1]}, "INVALID_REQUEST"),
        ({"epochs": {1: 99}}, "INELIGIBLE_REPLICA"),
        # KIP-704: a RECOVERED partition (raftmeta's always are) cannot move to RECOVERING...
        ({"leader_recovery_state": 1}, "INVALID_REQUEST"),
        ({"leader_recovery_state": 1, "new_isr": [2]}, "INVALID_REQUEST"),
        ({"leader_recovery_state": 7}, "INVALID_REQUEST"),
        # ... and the checks before it come first (Kafka's order).
        ({"leader_recovery_state": 1, "leader_epoch": 0}, "FENCED_LEADER_EPOCH"),
    ],
)
def test_refusals_use_kafkas_codes_and_write_nothing(change: dict[str, Any], expected: str) -> None:
    ctx = Context()
    _after_failure(ctx)
    new_isr = change.pop("new_isr", [2, 3, 1])
    before = ctx.image
    result = _alter(ctx, "t", 0, new_isr, **change)
    assert _error(result) == expected
    assert result.records == ()
    assert ctx.image is before or ctx.image == before


def test_stale_epochs_are_fenced_or_out_of_date() -> None:
    ctx = Context()
    _after_failure(ctx)
    part = ctx.partition("t", 0)
    assert _error(_alter(ctx, "t", 0, [2, 3, 1], leader_epoch=part.leader_epoch - 1)) == "FENCED_LEADER_EPOCH"
    assert _error(_alter(ctx, "t", 0, [2, 3, 1], partition_epoch=part.partition_epoch - 1)) == "INVALID_UPDATE_VERSION"


def test_a_fenced_or_unregistered_broker_is_ineligible() -> None:
    ctx = Context()
    _after_failure(ctx)
    ctx.fence(1)
    result = _alter(ctx, "t", 0, [2, 3, 1])
    assert _error(result) == "INELIGIBLE_REPLICA"
    assert "1 (fenced)" in result.response.topics[0].partitions[0].error_message


def test_stale_sender_epoch_refuses_the_whole_request() -> None:
    ctx = Context()
    _after_failure(ctx)
    result = _alter(ctx, "t", 0, [2, 3, 1], sender_epoch=1234)
    assert errors_pb2.ErrorCode.Name(result.response.error_code) == "STALE_BROKER_EPOCH"
    assert result.records == ()


def test_unknown_topic_and_partition_and_duplicates() -> None:
    ctx = Context()
    _after_failure(ctx)
    epoch = ctx.image.brokers[2].epoch
    request = controller_pb2.AlterPartitionRequest(broker_id=2, broker_epoch=epoch)
    request.topics.add(topic_id=b"\x09" * 16).partitions.add(partition_index=0)
    topic = ctx.image.topic_by_name("t")
    assert topic is not None
    known = request.topics.add(topic_id=topic.topic_id)
    known.partitions.add(partition_index=5)
    known.partitions.add(partition_index=0)
    known.partitions.add(partition_index=0)
    result = ctx.run(alter_partition, request)
    codes = [[errors_pb2.ErrorCode.Name(p.error_code) for p in t.partitions] for t in result.response.topics]
    assert codes == [["UNKNOWN_TOPIC_ID"], ["UNKNOWN_TOPIC_OR_PARTITION", "INVALID_REQUEST", "INVALID_REQUEST"]]
    assert result.records == ()


def test_completing_a_reassignment_that_moves_the_leader_answers_new_leader_elected() -> None:
    from raftmeta.controller.reassign import alter_partition_reassignments

    ctx = Context()
    ctx.add_brokers([1, 2, 3, 4])
    manual(ctx, "t", [[1, 2]])
    moved = ctx.run(
        alter_partition_reassignments,
        controller_pb2.AlterPartitionReassignmentsRequest(
            topics=[
                controller_pb2.ReassignableTopic(
                    name="t", partitions=[controller_pb2.ReassignablePartition(partition_index=0, replicas=[3, 4])]
                )
            ]
        ),
    )
    assert moved.response.results[0].partitions[0].error_code == errors_pb2.NONE
    result = _alter(ctx, "t", 0, [1, 2, 3, 4])
    assert _error(result) == "NEW_LEADER_ELECTED"
    part = ctx.partition("t", 0)
    assert part.replicas == (3, 4) and part.leader == 3 and not part.adding_replicas


def test_controlled_shutdown_moves_leadership_and_isr_then_fences() -> None:
    ctx = Context()
    ctx.add_brokers([1, 2, 3])
    manual(ctx, "t", [[1, 2, 3], [2, 1, 3]])
    manual(ctx, "solo", [[1]])
    result = ctx.run(
        broker_handlers.broker_heartbeat,
        controller_pb2.BrokerHeartbeatRequest(
            broker_id=1, broker_epoch=ctx.image.brokers[1].epoch, want_shutdown_now=True
        ),
    )
    assert result.response.should_shut_down and result.response.is_fenced
    kinds = [r.WhichOneof("record") for r in result.records]
    assert kinds[-1] == "fence_broker" and set(kinds[:-1]) == {"partition_change"}
    assert ctx.partition("t", 0)[:3] == ((1, 2, 3), (2, 3), 2)
    assert ctx.partition("t", 1)[:3] == ((2, 1, 3), (2, 3), 2)
    # The last in-sync replica keeps the ISR (Kafka never empties it) but cannot lead.
    assert ctx.partition("solo", 0)[1:3] == ((1,), -1)
    again = ctx.call(
        broker_handlers.broker_heartbeat,
        controller_pb2.BrokerHeartbeatRequest(
            broker_id=1, broker_epoch=ctx.image.brokers[1].epoch, want_shutdown_now=True
        ),
    )
    assert again.response.should_shut_down and again.records == ()


def test_unregister_broker() -> None:
    ctx = Context()
    ctx.add_brokers([1, 2])
    manual(ctx, "t", [[1, 2]])
    missing = ctx.run(broker_handlers.unregister_broker, controller_pb2.UnregisterBrokerRequest(broker_id=9))
    assert missing.response.error_code == errors_pb2.BROKER_ID_NOT_REGISTERED
    assert missing.response.error_message == "Broker ID 9 is not currently registered"
    assert missing.records == ()
    done = ctx.run(broker_handlers.unregister_broker, controller_pb2.UnregisterBrokerRequest(broker_id=1))
    assert done.response.error_code == errors_pb2.NONE
    assert [r.WhichOneof("record") for r in done.records] == ["partition_change", "unregister_broker"]
    assert 1 not in ctx.image.brokers
    # Kafka keeps the replica in the list (a reassignment moves it away); only the ISR drops it.
    assert ctx.partition("t", 0)[:3] == ((1, 2), (2,), 2)


def test_elect_every_partition_lists_only_the_ones_acted_on() -> None:
    ctx = Context()
    _after_failure(ctx)
    ctx.create_ok("u", 1, 1)
    result = ctx.call(elect_leaders, controller_pb2.ElectLeadersRequest())
    # t-0's preferred leader is back but not in sync: listed with Kafka's error; u-0 needs nothing.
    assert [
        (r.topic, [errors_pb2.ErrorCode.Name(p.error_code) for p in r.partitions]) for r in result.response.results
    ] == [
        ("t", ["PREFERRED_LEADER_NOT_AVAILABLE"]),
        ("u", []),
    ]


# ---- automatic preferred-leader elections ------------------------------------------------------
def _controller(config: ControllerConfig) -> tuple[Controller, Context]:
    """A Controller on the state of :func:`_after_failure` with broker 1 back in the ISR."""
    ctx = Context(config)
    _after_failure(ctx)
    _alter(ctx, "t", 0, [2, 3, 1])
    controller = Controller(ctx.image, config=config, ids=CounterIds(), committed_offset=len(ctx.log) - 1)
    return controller, ctx


def _commit(controller: Controller, handled: Any, offset: int) -> int:
    controller.commit(1, offset)
    return offset + 1


def test_auto_rebalance_returns_leadership_to_the_preferred_replica_after_the_interval() -> None:
    config = ControllerConfig(leader_imbalance_check_interval_ms=5_000, session_timeout_ms=60_000)
    controller, ctx = _controller(config)
    assert controller.tick(1_000) is None  # schedules the first round one interval later
    assert controller.tick(5_999) is None
    handled = controller.tick(6_000)
    assert handled is not None and handled.method == "Tick"
    [record] = handled.records
    assert record.partition_change.leader == 1
    _commit(controller, handled, len(ctx.log) + 10)
    assert controller.committed_image.topic_by_name("t").partitions[0].leader == 1  # type: ignore[union-attr]
    assert controller.tick(6_001) is None and controller.next_balance_ms == 11_000


def test_auto_rebalance_off_or_preferred_not_in_sync_changes_nothing() -> None:
    off = ControllerConfig(auto_leader_rebalance_enable=False, session_timeout_ms=60_000)
    controller, _ = _controller(off)
    assert controller.tick(0) is None and controller.tick(59_000) is None
    ctx = Context(ControllerConfig(leader_imbalance_check_interval_ms=1, session_timeout_ms=60_000))
    _after_failure(ctx)  # broker 1 is up but not in sync: a preferred election cannot pick it
    idle = Controller(ctx.image, config=ctx.config, ids=CounterIds(), committed_offset=len(ctx.log) - 1)
    assert idle.tick(0) is None and idle.tick(5) is None


def test_auto_rebalance_rounds_are_bounded_and_rescheduled_at_once() -> None:
    config = ControllerConfig(
        leader_imbalance_check_interval_ms=1_000, max_elections_per_imbalance=2, session_timeout_ms=60_000
    )
    ctx = Context(config)
    ctx.add_brokers([1, 2])
    for name in ("a", "b", "c"):
        manual(ctx, name, [[1, 2]])
    ctx.fence(1)
    ctx.heartbeat(1)
    for name in ("a", "b", "c"):
        _alter(ctx, name, 0, [2, 1])
    controller = Controller(ctx.image, config=config, ids=CounterIds(), committed_offset=len(ctx.log) - 1)
    controller.tick(0)
    first = controller.tick(1_000)
    assert first is not None and len(first.records) == 2
    assert controller.next_balance_ms == 1_010  # Kafka: the next round at once (10 ms)
    second = controller.tick(1_010)
    assert second is not None and len(second.records) == 1


def test_an_imbalance_pass_is_spread_over_ticks_of_bounded_scans() -> None:
    """A tick looks at no more than tick_scan_partitions_max partitions; the pass goes
    on 10 ms later from where it stopped, over the topics there were when it began, and elects
    what it finds in name then partition order. A topic deleted mid-pass is passed over."""
    config = ControllerConfig(
        leader_imbalance_check_interval_ms=1_000, tick_scan_partitions_max=3, session_timeout_ms=60_000
    )
    ctx = Context(config)
    ctx.add_brokers([1, 2])
    for name in ("a", "b", "c", "d"):
        manual(ctx, name, [[1, 2], [2, 1]])  # partition 0 prefers 1, partition 1 prefers 2
    ctx.fence(1)
    ctx.heartbeat(1)
    for name in ("a", "b", "c", "d"):
        _alter(ctx, name, 0, [2, 1])  # 1 in sync again, still not leading its partition 0
    controller = Controller(ctx.image, config=config, ids=CounterIds(), committed_offset=len(ctx.log) - 1)
    controller.tick(0)

    def elected(handled: Any) -> list[tuple[str, int]]:
        if handled is None:
            return []
        names = {t.topic_id: t.name for t in controller.image.topics_sorted()}
        return [(names[r.partition_change.topic_id], r.partition_change.partition_id) for r in handled.records]

    # 8 partitions, 3 a tick: a0 a1 b0 | b1 c0 c1 | d0 d1.
    assert elected(controller.tick(1_000)) == [("a", 0), ("b", 0)]
    assert controller.next_balance_ms == 1_010 and controller.balance_pass is not None
    assert controller.balance_pass.names == ["a", "b", "c", "d"]
    # c is deleted while the pass is under way: the pass looks at nothing of it.
    deleted = controller.handle(
        "DeleteTopics", controller_pb2.DeleteTopicsRequest(topic_names=["c"]), 1_005, CounterIds(100), JavaRandom(0)
    )
    assert deleted.records
    assert elected(controller.tick(1_010)) == [("d", 0)]  # b1, then d0 d1
    # The pass is over: the next one is an interval later, over every topic there is then.
    assert controller.next_balance_ms == 2_010 and controller.balance_pass is None


def test_a_new_controller_gives_every_broker_a_fresh_session() -> None:
    """Kafka's BrokerHeartbeatManager on activation: heartbeats sent to the previous controller
    are unknown here, so every broker's session starts at the first tick."""
    config = ControllerConfig(session_timeout_ms=9_000, auto_leader_rebalance_enable=False)
    ctx = Context(config)
    ctx.add_brokers([1, 2, 3])
    controller = Controller(ctx.image, config=config, ids=CounterIds(), committed_offset=len(ctx.log) - 1)
    assert controller.tick(100_000) is None
    assert controller.tick(109_000) is None
    first = controller.tick(109_001)
    assert first is not None
    # One broker per batch, as Kafka's maybeFenceOneStaleBroker (rescheduled at once): the rest
    # of the fencing is work the next turns do.
    batches = [first.records]
    while is_working(controller):
        assert controller.tick(109_002) is None, "no timer runs while work is under way"
        batches.append(controller.resume().records)
    fenced = [[r.fence_broker.broker_id for r in records if r.HasField("fence_broker")] for records in batches]
    assert fenced == [[1], [2], [3]]
    controller.renounce()
    assert controller.last_contact_ms == {} and controller.next_balance_ms is None


def test_changes_are_described_with_broker_topic_partition_and_epochs() -> None:
    from raftmeta.controller.changes import PARTITION_LINES_MAX, describe_changes
    from raftmeta.controller.elections import fence_records

    ctx = Context()
    ctx.add_brokers([1, 2])
    manual(ctx, "t", [[1, 2]])
    records = fence_records(ctx.image, 1, unclean_default=False)
    lines = describe_changes(ctx.image, "Tick", records)
    assert lines == [
        (
            "partition leader elected",
            {
                "cause": "Tick",
                "topic": "t",
                "partition": 0,
                "leader_epoch": 1,
                "partition_epoch": 1,
                "leader": 2,
                "previous_leader": 1,
                "isr": [2],
                "previous_isr": [1, 2],
            },
        ),
        ("broker fenced", {"broker_id": 1, "broker_epoch": ctx.image.brokers[1].epoch, "cause": "Tick"}),
    ]
    manual(ctx, "many", [[1, 2]] * (PARTITION_LINES_MAX + 5))
    many = describe_changes(ctx.image, "Tick", fence_records(ctx.image, 1, unclean_default=False))
    assert len(many) == PARTITION_LINES_MAX + 2
    assert many[-1] == (
        "more partitions changed",
        {"cause": "Tick", "partitions": PARTITION_LINES_MAX + 6, "not_listed": 6},
    )
