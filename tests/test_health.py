"""``raftmeta.api.health``: Kafka's partition health rules (TopicCommand's describe filters and the
controller's offline / preferred-replica-imbalance counts), one partition at a time."""

from __future__ import annotations

import pytest

from raftmeta.api.health import (
    DEFAULT_MIN_INSYNC_REPLICAS,
    DESCRIBE_FILTERS,
    PartitionHealth,
    classify,
    min_insync_replicas,
    replication_factor,
)
from raftmeta.controller.configs import MIN_INSYNC_REPLICAS, TOPIC_CONFIGS

LIVE = {1, 2, 3}


def test_a_healthy_partition_has_no_flag() -> None:
    assert classify([1, 2, 3], [1, 2, 3], 1, LIVE) == PartitionHealth(
        under_replicated=False,
        unavailable=False,
        under_min_isr=False,
        at_min_isr=False,
        offline=False,
        preferred_leader_away=False,
        stuck_under_replicated=False,
    )


def test_a_shrunk_isr_with_its_broker_down_is_under_replicated_not_stuck() -> None:
    health = classify([1, 2, 3], [1, 2], 1, {1, 2})
    assert health.under_replicated
    assert not health.stuck_under_replicated, "broker 3 is down: nothing to heal yet"
    assert not health.unavailable and not health.offline


def test_a_shrunk_isr_with_every_broker_live_is_stuck() -> None:
    """Issue 18: a recovered broker that never rejoins the ISR."""
    health = classify([1, 2, 3], [2, 3], 2, LIVE)
    assert health.under_replicated and health.stuck_under_replicated
    assert health.preferred_leader_away


def test_no_leader_is_unavailable_offline_under_min_isr_and_away_from_preferred() -> None:
    health = classify([2], [2], -1, {1})
    assert health.unavailable and health.offline
    assert health.under_min_isr, "Kafka: !hasLeader || isr < min.insync.replicas"
    assert health.at_min_isr, "isr size 1 == min 1, leader or not (Kafka's isAtMinIsrPartitions)"
    assert health.preferred_leader_away
    assert not health.under_replicated


def test_a_leader_that_is_not_live_is_unavailable_but_not_offline() -> None:
    health = classify([1, 2], [1, 2], 1, {2})
    assert health.unavailable and not health.offline


@pytest.mark.parametrize(
    ("isr", "min_isr", "under", "at"),
    [([1, 2, 3], 2, False, False), ([1, 2], 2, False, True), ([1], 2, True, False), ([1, 2, 3], 3, False, True)],
)
def test_min_isr(isr: list[int], min_isr: int, under: bool, at: bool) -> None:
    health = classify([1, 2, 3], isr, 1, LIVE, min_isr)
    assert (health.under_min_isr, health.at_min_isr) == (under, at)


def test_replicas_being_added_do_not_count_towards_the_replication_factor() -> None:
    """Kafka's getReplicationFactor during a reassignment: replicas - adding."""
    assert replication_factor([4, 1, 2, 3], [4]) == 3
    assert not classify([4, 1, 2, 3], [1, 2, 3], 1, {1, 2, 3, 4}, adding_replicas=[4]).under_replicated
    assert classify([4, 1, 2, 3], [1, 2], 1, {1, 2, 3, 4}, adding_replicas=[4]).stuck_under_replicated


def test_filters_by_kafkas_flag_names() -> None:
    health = classify([1, 2, 3], [1], -1, LIVE, 2)
    assert [f for f in DESCRIBE_FILTERS if health.matches(f)] == [
        "under-replicated-partitions",
        "unavailable-partitions",
        "under-min-isr-partitions",
    ]
    with pytest.raises(ValueError, match="unknown filter"):
        health.matches("overridden")


def test_min_insync_replicas_from_configs_with_kafkas_default() -> None:
    assert str(DEFAULT_MIN_INSYNC_REPLICAS) == TOPIC_CONFIGS[MIN_INSYNC_REPLICAS].default
    assert min_insync_replicas({}) == 1
    assert min_insync_replicas({"min.insync.replicas": "2"}) == 2
    assert min_insync_replicas({"min.insync.replicas": " 3 "}) == 3
    assert min_insync_replicas({"min.insync.replicas": "x"}) == 1


def test_the_health_rules_are_pure() -> None:
    """The CLI and the Spark job share this module: it must stay free of IO (DESIGN.md §2)."""
    from tests.test_purity import ROOT, violations

    assert violations(ROOT / "raftmeta" / "api" / "health.py") == []
