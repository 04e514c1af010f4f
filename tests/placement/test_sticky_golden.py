"""The sticky assignor against Kafka's own, run on the JVM: ``data/sticky_golden.json``.

The file holds what Kafka's ``AbstractStickyAssignor`` (trunk, see its ``source``) returned for
every scenario of Kafka's ``AbstractStickyAssignorTest`` and ``StickyAssignorTest`` that our API
can express (each rebalance of a multi-round test is its own case, its ``previous`` being what
Kafka returned the round before; the large tests scaled down), plus seeded random groups over
three rebalances each (members joining and leaving, subscriptions changing, partitions claimed
twice, owned partitions of deleted topics, member ids with colliding Java hashes such as "Aa" and
"BB", groups past a HashMap resize), and groups in which Kafka's ``PartitionMovements`` moves a
different partition than the one it picked, some where the ``HashSet`` order decides which.
Kafka's tests of generations are recorded with the stale claims dropped from ``previous`` ("generations
resolved"); for each, Kafka given the generations returned the same assignment. Every assignment
must match member for member.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from placement import assign_consumers
from placement.assignors import StickyAssignorCycleError

GOLDEN: dict[str, Any] = json.loads((Path(__file__).parent / "data" / "sticky_golden.json").read_text("utf-8"))
CASES: list[dict[str, Any]] = GOLDEN["cases"]
NEVER_FINISHES: list[dict[str, Any]] = GOLDEN["never_finishes"]


def _partitions(by_topic: dict[str, list[int]]) -> list[tuple[str, int]]:
    return [(topic, partition) for topic, partitions in by_topic.items() for partition in partitions]


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_matches_kafka_on_the_jvm(case: dict[str, Any]) -> None:
    subscriptions = dict(case["members"])  # in the order Kafka put them into its HashMap
    previous = {member: _partitions(owned) for member, owned in case["previous"].items()}
    result = assign_consumers("sticky", case["partitions_per_topic"], subscriptions, previous)
    expected = {member: sorted(_partitions(owned)) for member, owned in case["assignment"].items()}
    assert result == expected


def test_golden_data_covers_kafkas_tests() -> None:
    """Every Kafka test this port names is in the golden data, with equal and unequal
    subscriptions and with a history (previous) among them."""
    names = {case["name"].split("#")[0].split("(")[0] for case in CASES}
    for test in (
        "AbstractStickyAssignorTest.testAddRemoveTwoConsumersTwoTopics",
        "AbstractStickyAssignorTest.testTopicBalanceAfterReassignment",
        "AbstractStickyAssignorTest.testReassignmentAfterOneConsumerLeaves",
        "AbstractStickyAssignorTest.testRackAwareAssignmentWithNonEqualSubscription",
        "StickyAssignorTest.testAssignmentWithMultipleGenerations1",
    ):
        assert test in names
    unequal_with_history = [
        case for case in CASES if case["previous"] and len({frozenset(topics) for _, topics in case["members"]}) > 1
    ]
    assert len(unequal_with_history) >= 50
    assert len(CASES) >= 200


@pytest.mark.parametrize("case", NEVER_FINISHES, ids=[case["name"] for case in NEVER_FINISHES])
def test_an_endless_kafka_loop_is_an_error(case: dict[str, Any]) -> None:
    """On these groups Kafka's assignor never returns: a partition picked to leave an overloaded
    member is swapped for one moved earlier the other way, from a member that is not
    overloaded, and the same moves repeat pass after pass. Ours stops when a pass starts from a
    state it has seen, which proves the loop endless, and says so."""
    subscriptions = dict(case["members"])
    previous = {member: _partitions(owned) for member, owned in case["previous"].items()}
    with pytest.raises(StickyAssignorCycleError, match="never finishes on this input"):
        assign_consumers("sticky", case["partitions_per_topic"], subscriptions, previous)
    assert isinstance(StickyAssignorCycleError(""), ValueError)  # the CLI reports it, exit 2
