"""Consumer assignors: seed 001's scenarios, Kafka's unit-test cases, and properties."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement import assign_consumers
from placement.javacompat import hashmap_order, java_string_hash


def test_seed_range_extra_partitions_go_to_the_first_members() -> None:
    """Seed 001: 4 partitions, 3 consumers: C0 gets one more; a second 4-partition topic, two more."""
    one = assign_consumers("range", {"T": 4}, {"C0": ["T"], "C1": ["T"], "C2": ["T"]})
    assert one == {"C0": [("T", 0), ("T", 1)], "C1": [("T", 2)], "C2": [("T", 3)]}
    two = assign_consumers("range", {"T": 4, "U": 4}, {c: ["T", "U"] for c in ("C0", "C1", "C2")})
    assert [len(two[c]) for c in ("C0", "C1", "C2")] == [4, 2, 2]


def test_seed_range_more_consumers_than_partitions() -> None:
    result = assign_consumers("range", {"T": 2}, {"C0": ["T"], "C1": ["T"], "C2": ["T"]})
    assert result == {"C0": [("T", 0)], "C1": [("T", 1)], "C2": []}


def test_seed_round_robin_is_balanced_for_equal_subscriptions() -> None:
    result = assign_consumers("roundrobin", {"T": 4, "U": 4}, {c: ["T", "U"] for c in ("C0", "C1", "C2")})
    assert result == {
        "C0": [("T", 0), ("T", 3), ("U", 2)],
        "C1": [("T", 1), ("U", 0), ("U", 3)],
        "C2": [("T", 2), ("U", 1)],
    }


def test_kafka_range_two_consumers_one_topic_three_partitions() -> None:
    result = assign_consumers("range", {"topic": 3}, {"consumer1": ["topic"], "consumer2": ["topic"]})
    assert result == {"consumer1": [("topic", 0), ("topic", 1)], "consumer2": [("topic", 2)]}


def test_kafka_multiple_consumers_mixed_topics() -> None:
    partitions = {"topic1": 3, "topic2": 2}
    subscriptions = {"consumer1": ["topic1"], "consumer2": ["topic1", "topic2"], "consumer3": ["topic1"]}
    expected = {
        "consumer1": [("topic1", 0)],
        "consumer2": [("topic1", 1), ("topic2", 0), ("topic2", 1)],
        "consumer3": [("topic1", 2)],
    }
    assert assign_consumers("range", partitions, subscriptions) == expected
    assert assign_consumers("roundrobin", partitions, subscriptions) == expected


def test_kafka_round_robin_two_consumers_two_topics_six_partitions() -> None:
    result = assign_consumers(
        "roundrobin", {"topic1": 3, "topic2": 3}, {"c1": ["topic1", "topic2"], "c2": ["topic1", "topic2"]}
    )
    assert result == {
        "c1": [("topic1", 0), ("topic1", 2), ("topic2", 1)],
        "c2": [("topic1", 1), ("topic2", 0), ("topic2", 2)],
    }


def test_only_assigns_known_topics_and_keeps_idle_members() -> None:
    for strategy in ("range", "roundrobin", "sticky"):
        result = assign_consumers(strategy, {"t": 1}, {"a": ["t", "missing"], "b": []})
        assert result == {"a": [("t", 0)], "b": []}


def test_members_sort_as_java_strings() -> None:
    # "B" < "a" in String.compareTo (uppercase first), the same as Python for ASCII.
    result = assign_consumers("range", {"t": 3}, {"a": ["t"], "B": ["t"]})
    assert result == {"a": [("t", 2)], "B": [("t", 0), ("t", 1)]}


def test_sticky_keeps_owned_partitions_when_a_member_leaves() -> None:
    """KIP-54's example: C0, C1, C2 on t0..t3 (2 partitions each); C1 leaves."""
    topics = {f"t{i}": 2 for i in range(4)}
    everyone = list(topics)
    first = assign_consumers("sticky", topics, {"C0": everyone, "C1": everyone, "C2": everyone})
    assert sorted(len(p) for p in first.values()) == [2, 3, 3]
    second = assign_consumers("sticky", topics, {"C0": everyone, "C2": everyone}, first)
    assert set(first["C0"]) <= set(second["C0"])
    assert set(first["C2"]) <= set(second["C2"])
    assert sorted(len(p) for p in second.values()) == [4, 4]


def test_sticky_keeps_the_lowest_partition_numbers_within_its_quota() -> None:
    """Kafka (KAFKA-16277) sorts a member's owned partitions by partition number, then topic,
    before keeping its quota. This test expected the first two in the order given (t-3, t-2):
    Kafka keeps t-0 and t-1."""
    previous = {"a": [("t", 3), ("t", 2), ("t", 1), ("t", 0)]}
    result = assign_consumers("sticky", {"t": 4}, {"a": ["t"], "b": ["t"]}, previous)
    assert result == {"a": [("t", 0), ("t", 1)], "b": [("t", 2), ("t", 3)]}


def test_sticky_keeps_some_of_every_topic() -> None:
    """The same sort spreads what a member keeps over its topics: owning all of u and v, it keeps
    u-0 and v-0, and the new member gets u-1 and v-1 (not all of v)."""
    previous = {"a": [("u", 0), ("u", 1), ("v", 0), ("v", 1)]}
    result = assign_consumers("sticky", {"u": 2, "v": 2}, {"a": ["u", "v"], "b": ["u", "v"]}, previous)
    assert result == {"a": [("u", 0), ("v", 0)], "b": [("u", 1), ("v", 1)]}


def test_sticky_max_quota_goes_to_the_first_owner_in_java_hashmap_order() -> None:
    """Who keeps the maximum quota of its owned partitions follows HashMap order, not sorted
    order: a Java HashMap of "alice", "bob", "carol" iterates carol, bob, alice (hash buckets;
    the HashMap model is checked against the JVM in test_javacompat)."""
    members = ["alice", "bob", "carol"]
    assert hashmap_order(members, [java_string_hash(m) for m in members]) == ["carol", "bob", "alice"]
    previous = {"alice": [("t", 0), ("t", 1)], "bob": [("t", 2), ("t", 3)], "carol": []}
    result = assign_consumers("sticky", {"t": 4}, dict.fromkeys(members, ("t",)), previous)
    assert result == {"alice": [("t", 0)], "bob": [("t", 2), ("t", 3)], "carol": [("t", 1)]}


def test_sticky_general_case_is_balanced_where_subscriptions_allow() -> None:
    partitions = {"t1": 4, "t2": 4}
    subscriptions = {"a": ["t1"], "b": ["t1", "t2"], "c": ["t2"]}
    result = assign_consumers("sticky", partitions, subscriptions)
    assert sorted(len(p) for p in result.values()) == [2, 3, 3]
    previous = {"a": [("t1", 0), ("t1", 1), ("t1", 2), ("t1", 3)], "b": [], "c": [("t2", 0)]}
    moved = assign_consumers("sticky", partitions, subscriptions, previous)
    assert sorted(len(p) for p in moved.values()) == [2, 3, 3]
    assert {("t2", 0)} <= set(moved["c"])


def test_sticky_invalidates_a_partition_claimed_twice() -> None:
    """Kafka drops a partition two members claim in the same generation from both, then reassigns it."""
    previous = {"a": [("t", 0), ("t", 1)], "b": [("t", 0)]}
    result = assign_consumers("sticky", {"t": 3}, {"a": ["t"], "b": ["t"]}, previous)
    assert ("t", 1) in result["a"]
    assert sorted(len(p) for p in result.values()) == [1, 2]


# Kafka's StickyAssignorTest / AbstractStickyAssignorTest cases are in test_sticky_kafka.py, and
# Kafka's assignor run on the JVM over them and random groups in test_sticky_golden.py.


def test_unknown_strategy_and_bad_input() -> None:
    with pytest.raises(ValueError, match="strategy must be one of range, roundrobin, sticky"):
        assign_consumers("cooperative", {}, {})
    with pytest.raises(ValueError, match="partition count"):
        assign_consumers("range", {"t": -1}, {"a": ["t"]})
    with pytest.raises(ValueError, match="list of topics"):
        assign_consumers("range", {"t": 1}, {"a": "t"})
    with pytest.raises(ValueError, match="must not be empty"):
        assign_consumers("range", {"t": 1}, {"": ["t"]})


def test_no_members() -> None:
    assert assign_consumers("sticky", {"t": 3}, {}) == {}


@st.composite
def groups(draw: st.DrawFn) -> tuple[dict[str, int], dict[str, list[str]]]:
    topics = {f"t{i}": draw(st.integers(0, 7)) for i in range(draw(st.integers(1, 4)))}
    members = draw(st.lists(st.sampled_from([f"c{i}" for i in range(12)]), min_size=1, max_size=6, unique=True))
    same = draw(st.booleans())
    everyone = list(topics)
    subscriptions = {
        m: everyone if same else draw(st.lists(st.sampled_from(everyone), min_size=1, unique=True)) for m in members
    }
    return topics, subscriptions


def _check_complete(
    topics: dict[str, int], subscriptions: dict[str, list[str]], result: dict[str, list[tuple[str, int]]]
) -> None:
    assigned = [tp for partitions in result.values() for tp in partitions]
    wanted = {(t, p) for t, n in topics.items() for p in range(n) if any(t in s for s in subscriptions.values())}
    assert sorted(assigned) == sorted(wanted)  # each subscribed partition exactly once
    for member, partitions in result.items():
        assert all(t in subscriptions[member] for t, _ in partitions)
        assert partitions == sorted(partitions)


@settings(max_examples=150, deadline=None)
@given(groups(), st.sampled_from(["range", "roundrobin", "sticky"]))
def test_every_strategy_assigns_each_partition_once(
    group: tuple[dict[str, int], dict[str, list[str]]], strategy: str
) -> None:
    topics, subscriptions = group
    _check_complete(topics, subscriptions, assign_consumers(strategy, topics, subscriptions))


@settings(max_examples=150, deadline=None)
@given(groups(), st.data())
def test_sticky_is_balanced_and_sticky(group: tuple[dict[str, int], dict[str, list[str]]], data: st.DataObject) -> None:
    topics, subscriptions = group
    first = assign_consumers("sticky", topics, subscriptions)
    _check_complete(topics, subscriptions, first)
    if all(set(s) == set(topics) for s in subscriptions.values()):
        sizes = [len(p) for p in first.values()]
        assert max(sizes) - min(sizes) <= 1
        # A member leaves: everyone else keeps what they had, up to the new maximum quota.
        if len(subscriptions) > 1:
            leaving = data.draw(st.sampled_from(sorted(subscriptions)))
            rest = {m: s for m, s in subscriptions.items() if m != leaving}
            second = assign_consumers("sticky", topics, rest, {m: first[m] for m in rest})
            sizes = [len(p) for p in second.values()]
            assert max(sizes) - min(sizes) <= 1
            for member in rest:
                assert set(first[member]) <= set(second[member])
