"""Balance metrics: counts, spreads, skew and rack spread."""

from __future__ import annotations

import math

import pytest

from placement import JavaRandom, StripedReplicaPlacer, balance_report, perfect_skew, skew
from placement import UsableBroker as B
from placement.metrics import Spread

NINE = [B(i, f"rack{i // 3}") for i in range(9)]


def test_kafka_example_figures() -> None:
    report = balance_report(StripedReplicaPlacer(JavaRandom(0)).place(NINE, 54, 3), NINE)
    assert list(report.leaders.per_broker.values()) == [3, 3, 12, 12, 6, 0, 6, 9, 3]
    assert (report.leaders.min, report.leaders.max, report.leaders.mean) == (0, 12, 6.0)
    assert report.leader_skew == 2.0
    assert report.leaders.stddev == pytest.approx(
        math.sqrt(sum((v - 6) ** 2 for v in [3, 3, 12, 12, 6, 0, 6, 9, 3]) / 9)
    )
    assert report.replica_skew == 1.0
    assert report.rack_spread_violations == 0
    assert report.partitions == 54


def test_rack_spread_violations_are_counted() -> None:
    brokers = [B(0, "a"), B(1, "a"), B(2, "b")]
    report = balance_report({"t": [[0, 1], [0, 2], [2]]}, brokers)
    topic = report.topics["t"]
    assert topic.racks_spanned == [1, 2, 1]
    assert topic.racks_expected == [2, 2, 1]
    assert topic.rack_spread_violations == 1
    assert report.rack_spread_violations == 1


def test_per_topic_and_overall_counts() -> None:
    brokers = [B(0), B(1), B(2)]
    report = balance_report({"x": [[0, 1]], "y": [[1, 2], [1, 0]]}, brokers)
    assert report.topics["x"].leaders.per_broker == {0: 1, 1: 0, 2: 0}
    assert report.topics["y"].replicas.per_broker == {0: 1, 1: 2, 2: 1}
    assert report.replicas.per_broker == {0: 2, 1: 3, 2: 1}
    assert report.leaders.per_broker == {0: 1, 1: 2, 2: 0}
    assert report.replicas.range == 2


def test_idle_and_unknown_brokers_are_counted() -> None:
    report = balance_report([[5]], [B(0)])
    assert report.replicas.per_broker == {0: 0, 5: 1}


def test_skew_definitions() -> None:
    assert skew([]) == 0.0
    assert skew([0, 0]) == 0.0
    assert skew([3, 2, 3, 2]) == pytest.approx(1.2)
    assert perfect_skew(10, 4) == pytest.approx(1.2)
    assert perfect_skew(12, 4) == 1.0
    assert perfect_skew(0, 4) == 0.0


def test_empty_spread_and_json_shape() -> None:
    assert Spread.of({}).to_dict() == {"per_broker": {}, "min": 0, "max": 0, "mean": 0.0, "stddev": 0.0, "skew": 0.0}
    document = balance_report({"t": [[0, 1]]}, [B(0, "a"), B(1, "b")]).to_dict()
    assert set(document) == {
        "partitions",
        "replicas",
        "leaders",
        "leader_skew",
        "replica_skew",
        "rack_spread_violations",
        "topics",
    }
    assert document["topics"]["t"]["racks_spanned"] == [2]
