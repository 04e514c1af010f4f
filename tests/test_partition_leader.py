"""The simulated partition leaders' ISR rule (raftmeta.local.partition_leader): Kafka's maybeExpandIsr /
maybeShrinkIsr on time instead of offsets, and the AlterPartition requests it makes."""

from __future__ import annotations

from raftmeta.local.partition_leader import BrokerLiveness, PartitionState, alter_partition_requests, isr_changes

T = b"\x01" * 16


def state(isr: tuple[int, ...], leader: int = 1, replicas: tuple[int, ...] = (1, 2, 3)) -> PartitionState:
    return PartitionState(T, 0, leader, leader_epoch=4, partition_epoch=9, replicas=replicas, isr=isr)


def up(since: int, epoch: int = 10) -> BrokerLiveness:
    return BrokerLiveness(epoch, since, None)


def down(since: int, epoch: int = 10) -> BrokerLiveness:
    return BrokerLiveness(epoch, None, since)


def test_a_follower_up_for_the_catch_up_time_joins_the_isr() -> None:
    brokers = {1: up(0), 2: up(0), 3: up(5_000)}
    assert isr_changes([state((1, 2))], brokers, 5_999, catch_up_ms=1_000) == []
    [change] = isr_changes([state((1, 2))], brokers, 6_000, catch_up_ms=1_000)
    assert change.new_isr == (1, 2, 3) and change.added == [3] and change.removed == []


def test_a_new_replica_counts_from_when_it_was_assigned() -> None:
    brokers = {1: up(0), 2: up(0), 3: up(0)}
    seen = {(T, 0, 3): 9_000}
    assert isr_changes([state((1, 2))], brokers, 9_500, catch_up_ms=1_000, replica_seen_since_ms=seen) == []
    assert isr_changes([state((1, 2))], brokers, 10_000, catch_up_ms=1_000, replica_seen_since_ms=seen)


def test_a_follower_down_longer_than_the_lag_limit_leaves_the_isr() -> None:
    brokers = {1: up(0), 2: down(1_000), 3: up(0)}
    assert isr_changes([state((1, 2, 3))], brokers, 31_000, catch_up_ms=1_000) == []
    [change] = isr_changes([state((1, 2, 3))], brokers, 31_001, catch_up_ms=1_000)
    assert change.new_isr == (1, 3) and change.removed == [2]


def test_only_a_live_leader_reports_and_never_about_itself() -> None:
    assert isr_changes([state((1,))], {1: down(0), 2: up(0), 3: up(0)}, 100_000, catch_up_ms=0) == []
    assert isr_changes([state((1,))], {2: up(0)}, 100_000, catch_up_ms=0) == []  # leader not simulated here
    [change] = isr_changes([state((1,), replicas=(1, 2))], {1: up(0), 2: up(0)}, 1, catch_up_ms=0)
    assert change.new_isr == (1, 2)


def test_one_request_per_leader_with_every_members_broker_epoch() -> None:
    brokers = {1: up(0, 11), 2: up(0, 12), 3: up(0, 13)}
    changes = isr_changes(
        [state((1,)), PartitionState(T, 1, 2, 0, 0, (2, 3), (2,))], brokers, 10_000, catch_up_ms=1_000
    )
    requests = alter_partition_requests(changes, brokers)
    assert sorted(requests) == [1, 2]
    first = requests[1]
    assert (first.broker_id, first.broker_epoch) == (1, 11)
    [data] = first.topics[0].partitions
    assert (data.leader_epoch, data.partition_epoch) == (4, 9)
    assert [(m.broker_id, m.broker_epoch) for m in data.new_isr_with_epochs] == [(1, 11), (2, 12), (3, 13)]
