"""Balance metrics of an assignment: per-broker replica and leader counts, overall and per
topic, their spread, and rack spread. Used by the CLI, the controller's describe output and
the Spark verify job, so they take plain data: topic -> list of replica lists (leader first).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from placement.brokers import UsableBroker


def skew(counts: Iterable[int]) -> float:
    """Max over mean of per-broker counts: how much the busiest broker carries beyond its share.

    A perfect placement of T items on N brokers gives ceil(T/N) / (T/N): exactly 1.0 when N
    divides T, and less than 1 + N/T otherwise (10 leaders on 4 brokers: 3 / 2.5 = 1.2), so a
    cluster's figure approaches 1.0 as partitions accumulate. Kafka's striped placer on 3 racks
    x 3 brokers, 54 partitions, RF 3 with java.util.Random(0) gives a leader skew of 12 / 6 = 2.0.
    No items gives 0.0 (nothing to skew).
    """
    values = list(counts)
    if not values:
        return 0.0
    mean = sum(values) / len(values)
    return max(values) / mean if mean else 0.0


def perfect_skew(total: int, brokers: int) -> float:
    """The skew of the best possible placement of ``total`` items on ``brokers`` brokers."""
    if total <= 0 or brokers <= 0:
        return 0.0
    return math.ceil(total / brokers) / (total / brokers)


@dataclass(frozen=True, slots=True)
class Spread:
    """Min, max, mean, population standard deviation and skew (max/mean) of per-broker counts."""

    per_broker: dict[int, int]
    min: int
    max: int
    mean: float
    stddev: float
    skew: float

    @classmethod
    def of(cls, per_broker: dict[int, int]) -> Spread:
        values = list(per_broker.values())
        if not values:
            return cls(per_broker, 0, 0, 0.0, 0.0, 0.0)
        mean = sum(values) / len(values)
        variance = sum((v - mean) ** 2 for v in values) / len(values)
        return cls(per_broker, min(values), max(values), mean, math.sqrt(variance), skew(values))

    @property
    def range(self) -> int:
        """max - min: at most 1 is the ±1 promise of the balanced placer."""
        return self.max - self.min

    def to_dict(self) -> dict[str, Any]:
        return {
            "per_broker": {str(b): c for b, c in self.per_broker.items()},
            "min": self.min,
            "max": self.max,
            "mean": round(self.mean, 6),
            "stddev": round(self.stddev, 6),
            "skew": round(self.skew, 6),
        }


@dataclass(frozen=True, slots=True)
class TopicBalance:
    """One topic: replica and leader spread, and racks spanned per partition."""

    replicas: Spread
    leaders: Spread
    racks_spanned: list[int]
    racks_expected: list[int]

    @property
    def rack_spread_violations(self) -> int:
        """Partitions spanning fewer than min(RF, racks) racks."""
        return sum(1 for got, want in zip(self.racks_spanned, self.racks_expected, strict=True) if got < want)

    def to_dict(self) -> dict[str, Any]:
        return {
            "partitions": len(self.racks_spanned),
            "replicas": self.replicas.to_dict(),
            "leaders": self.leaders.to_dict(),
            "racks_spanned": self.racks_spanned,
            "racks_expected": self.racks_expected,
            "rack_spread_violations": self.rack_spread_violations,
        }


@dataclass(frozen=True, slots=True)
class BalanceReport:
    """The whole cluster: overall spreads, per-topic balances and rack-spread violations."""

    replicas: Spread
    leaders: Spread
    topics: dict[str, TopicBalance] = field(default_factory=dict)

    @property
    def partitions(self) -> int:
        return sum(len(t.racks_spanned) for t in self.topics.values())

    @property
    def rack_spread_violations(self) -> int:
        return sum(t.rack_spread_violations for t in self.topics.values())

    @property
    def leader_skew(self) -> float:
        return self.leaders.skew

    @property
    def replica_skew(self) -> float:
        return self.replicas.skew

    def to_dict(self) -> dict[str, Any]:
        return {
            "partitions": self.partitions,
            "replicas": self.replicas.to_dict(),
            "leaders": self.leaders.to_dict(),
            "leader_skew": round(self.leader_skew, 6),
            "replica_skew": round(self.replica_skew, 6),
            "rack_spread_violations": self.rack_spread_violations,
            "topics": {name: topic.to_dict() for name, topic in self.topics.items()},
        }


def _counts(assignment: Iterable[Sequence[int]], broker_ids: Sequence[int]) -> tuple[dict[int, int], dict[int, int]]:
    replicas = dict.fromkeys(broker_ids, 0)
    leaders = dict.fromkeys(broker_ids, 0)
    for partition in assignment:
        if partition:
            leaders[partition[0]] = leaders.get(partition[0], 0) + 1
        for broker in partition:
            replicas[broker] = replicas.get(broker, 0) + 1
    return replicas, leaders


def balance_report(
    topics: Mapping[str, Sequence[Sequence[int]]] | Sequence[Sequence[int]],
    brokers: Sequence[UsableBroker],
) -> BalanceReport:
    """Balance of ``topics`` (name -> replica lists, or one topic's replica lists) on ``brokers``.

    Counts are kept for every broker given (zeros included, so an idle broker shows up) and for
    any other broker the assignment names. Racks: a broker without a rack counts as its own
    "no rack" group; a partition should span min(RF, racks) racks, racks counted over ``brokers``.
    """
    named: Mapping[str, Sequence[Sequence[int]]] = topics if isinstance(topics, Mapping) else {"": topics}
    broker_ids = [b.id for b in brokers]
    rack_of = {b.id: b.rack for b in brokers}
    num_racks = len({b.rack for b in brokers})
    per_topic: dict[str, TopicBalance] = {}
    total_replicas = dict.fromkeys(broker_ids, 0)
    total_leaders = dict.fromkeys(broker_ids, 0)
    for name, assignment in named.items():
        replicas, leaders = _counts(assignment, broker_ids)
        for broker, count in replicas.items():
            total_replicas[broker] = total_replicas.get(broker, 0) + count
        for broker, count in leaders.items():
            total_leaders[broker] = total_leaders.get(broker, 0) + count
        spanned = [len({rack_of.get(b) for b in partition}) for partition in assignment]
        expected = [min(len(partition), num_racks) for partition in assignment]
        per_topic[name] = TopicBalance(Spread.of(replicas), Spread.of(leaders), spanned, expected)
    return BalanceReport(Spread.of(total_replicas), Spread.of(total_leaders), per_topic)
