"""Partition health, as Kafka's tools and controller metrics classify it: the one rule used by
``raftmeta topics describe``'s filters and by the ``raftmeta verify`` report.

Pure: a partition's replicas, ISR and leader, the set of live brokers (registered and unfenced)
and the topic's ``min.insync.replicas`` in, flags out. The definitions are Kafka's
``TopicCommand.PartitionDescription`` (kafka-topics.sh ``--describe`` filters) and, for the two
the tools lack, the KRaft controller's metrics:

- under-replicated: fewer in-sync replicas than the replication factor, where a partition being
  reassigned counts its replicas without the ones still being added (``getReplicationFactor``);
- unavailable: no leader, or a leader that is not a live broker;
- under-min-ISR: no leader, or fewer in-sync replicas than ``min.insync.replicas``;
- at-min-ISR: exactly ``min.insync.replicas`` in sync;
- offline: no leader (the controller's ``OfflinePartitionsCount``);
- away from the preferred leader: the leader is not the first replica, leaderless included (the
  controller's ``PreferredReplicaImbalanceCount``);
- stuck under-replicated: under-replicated although every replica's broker is live. Nothing
  stops such a partition's ISR from growing back (issue 18: the controller should have done it),
  so ``raftmeta verify`` fails on it at the end of a log.

The Spark job evaluates the same rules as column expressions (``raftmeta.jobs.health``); its tests
compare the two on the same partitions.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

NO_LEADER = -1
# Kafka's default for the topic config (raftmeta.controller.configs.TOPIC_CONFIGS has the same).
DEFAULT_MIN_INSYNC_REPLICAS = 1
MIN_INSYNC_REPLICAS = "min.insync.replicas"

# The kafka-topics.sh --describe filters, by flag, in Kafka's order.
DESCRIBE_FILTERS = (
    "under-replicated-partitions",
    "unavailable-partitions",
    "under-min-isr-partitions",
    "at-min-isr-partitions",
)


@dataclass(frozen=True, slots=True)
class PartitionHealth:
    under_replicated: bool
    unavailable: bool
    under_min_isr: bool
    at_min_isr: bool
    offline: bool
    preferred_leader_away: bool
    stuck_under_replicated: bool

    def matches(self, describe_filter: str) -> bool:
        """Whether the partition is shown by one of the kafka-topics.sh ``DESCRIBE_FILTERS``."""
        if describe_filter == "under-replicated-partitions":
            return self.under_replicated
        if describe_filter == "unavailable-partitions":
            return self.unavailable
        if describe_filter == "under-min-isr-partitions":
            return self.under_min_isr
        if describe_filter == "at-min-isr-partitions":
            return self.at_min_isr
        raise ValueError(f"unknown filter {describe_filter!r}: expected one of {', '.join(DESCRIBE_FILTERS)}")


def replication_factor(replicas: Sequence[int], adding_replicas: Collection[int] = ()) -> int:
    """The replicas the partition is meant to have: during a reassignment (KIP-455) the replica
    list also holds the targets still being added, which do not count."""
    adding = set(adding_replicas)
    return sum(1 for b in replicas if b not in adding)


def classify(
    replicas: Sequence[int],
    isr: Collection[int],
    leader: int,
    live_brokers: Collection[int],
    min_insync_replicas: int = DEFAULT_MIN_INSYNC_REPLICAS,
    adding_replicas: Collection[int] = (),
) -> PartitionHealth:
    """The health flags of one partition (see the module docstring for each rule's source)."""
    has_leader = leader != NO_LEADER
    under_replicated = replication_factor(replicas, adding_replicas) - len(isr) > 0
    return PartitionHealth(
        under_replicated=under_replicated,
        unavailable=not has_leader or leader not in live_brokers,
        under_min_isr=not has_leader or len(isr) < min_insync_replicas,
        at_min_isr=len(isr) == min_insync_replicas,
        offline=not has_leader,
        preferred_leader_away=not replicas or leader != replicas[0],
        stuck_under_replicated=under_replicated and all(b in live_brokers for b in replicas),
    )


def min_insync_replicas(configs: Mapping[str, str]) -> int:
    """A topic's ``min.insync.replicas`` from its explicit configs (what DescribeTopics and the log's
    ConfigRecords hold), Kafka's default when it sets none. The controller validates the value on
    the way in; a value that is not a number here (an older log) counts as the default."""
    value = configs.get(MIN_INSYNC_REPLICAS)
    if value is None:
        return DEFAULT_MIN_INSYNC_REPLICAS
    try:
        return int(value.strip())
    except ValueError:
        return DEFAULT_MIN_INSYNC_REPLICAS


__all__ = [
    "DEFAULT_MIN_INSYNC_REPLICAS",
    "DESCRIBE_FILTERS",
    "MIN_INSYNC_REPLICAS",
    "NO_LEADER",
    "PartitionHealth",
    "classify",
    "min_insync_replicas",
    "replication_factor",
]
