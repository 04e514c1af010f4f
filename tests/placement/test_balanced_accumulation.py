"""The balanced placer keeps the *cluster* within ±1 as topics accumulate (docs/placement.md).

Each topic is placed with the load of the topics before it, as the controller does. On equal
racks replicas and leaders per broker stay within ±1 of each other across the whole cluster,
whatever the topics; on any cluster without fenced brokers the leaders do.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import placement.balanced
from placement import BalancedReplicaPlacer, JavaRandom, UsableBroker
from placement.metrics import balance_report
from tests.placement.strategies import clusters, equal_rack_clusters

Load = dict[int, tuple[int, int]]
PROPERTY_SETTINGS = settings(max_examples=200, deadline=None)


def add(load: Load, assignment: list[list[int]]) -> None:
    """What the controller's image counts: one replica per broker listed, one leader per partition."""
    for replicas in assignment:
        count, leaders = load[replicas[0]]
        load[replicas[0]] = (count, leaders + 1)
        for broker in replicas:
            count, leaders = load[broker]
            load[broker] = (count + 1, leaders)


def spread(values: Sequence[int]) -> int:
    return max(values) - min(values)


def accumulate(
    cluster: list[UsableBroker], topics: Sequence[tuple[int, int]], seed: int
) -> Iterator[tuple[list[list[int]], Load]]:
    """Place each (partitions, replication factor) topic with the load of the ones before it;
    yield each topic's assignment and the load after it."""
    load: Load = {b.id: (0, 0) for b in cluster}
    random = JavaRandom(seed)
    for partitions, factor in topics:
        assignment = BalancedReplicaPlacer(random).place(cluster, partitions, factor, load)
        add(load, assignment)
        yield assignment, load


def check_topic(assignment: list[list[int]], cluster: list[UsableBroker], partitions: int, factor: int) -> None:
    """The per-topic promise: ±1 leaders and replicas, min(RF, racks) racks, distinct brokers."""
    report = balance_report(assignment, cluster)
    assert len(assignment) == partitions
    assert all(len(set(replicas)) == len(replicas) == factor for replicas in assignment)
    assert report.replicas.range <= 1 and report.leaders.range <= 1
    assert report.rack_spread_violations == 0


def test_the_issue_example_45_one_partition_topics_on_3_racks_of_3() -> None:
    """Issue 22: 45 topics of one partition, RF 3, one after another. Before, the leaders drifted
    to 4..6 per broker (±2); now every step is within ±1 and the end is exactly 5 leaders and 15
    replicas on each of the 9 brokers."""
    cluster = [UsableBroker(i, f"rack{i // 3}") for i in range(9)]
    for step, (assignment, load) in enumerate(accumulate(cluster, [(1, 3)] * 45, seed=0), start=1):
        check_topic(assignment, cluster, 1, 3)
        assert spread([r for r, _ in load.values()]) <= 1, f"replicas after topic {step}: {load}"
        assert spread([lead for _, lead in load.values()]) <= 1, f"leaders after topic {step}: {load}"
    assert sorted(load.values()) == [(15, 5)] * 9


@st.composite
def topic_lists(draw: st.DrawFn, max_factor: int) -> list[tuple[int, int]]:
    """Topics as (partitions, replication factor): many small ones (where the drift came from)
    and some large."""
    sizes = st.one_of(st.integers(1, 4), st.integers(1, 80))
    return draw(st.lists(st.tuples(sizes, st.integers(1, max_factor)), min_size=1, max_size=30))


@PROPERTY_SETTINGS
@given(st.data(), st.integers(0, 2**31))
def test_equal_racks_keep_replicas_and_leaders_within_one_as_topics_accumulate(data: st.DataObject, seed: int) -> None:
    cluster = data.draw(equal_rack_clusters().flatmap(st.permutations))
    topics = data.draw(topic_lists(max_factor=min(5, len(cluster))))
    for (partitions, factor), (assignment, load) in zip(topics, accumulate(cluster, topics, seed), strict=True):
        check_topic(assignment, cluster, partitions, factor)
        assert spread([r for r, _ in load.values()]) <= 1
        assert spread([lead for _, lead in load.values()]) <= 1


@PROPERTY_SETTINGS
@given(st.data(), st.integers(0, 2**31))
def test_any_cluster_keeps_leaders_within_one_as_topics_accumulate(data: st.DataObject, seed: int) -> None:
    """Unequal racks (or none): rack spread forces replicas onto small racks, but any broker can
    lead, so the leaders stay within ±1 across the cluster."""
    cluster = data.draw(clusters(fenced=False))
    topics = data.draw(topic_lists(max_factor=min(4, len(cluster))))
    for _, load in accumulate(cluster, topics, seed):
        assert spread([lead for _, lead in load.values()]) <= 1


@settings(max_examples=100, deadline=None)
@given(st.data(), st.integers(0, 2**31))
def test_the_flow_builds_the_same_balanced_topics(data: st.DataObject, seed: int) -> None:
    """With the racks-then-brokers construction switched off, the maximum flow that backs it up
    builds every topic that puts more than one replica of a partition in a rack (RF > racks),
    and the cluster stays within ±1 all the same."""
    cluster = data.draw(equal_rack_clusters().filter(lambda c: len(c) >= 2))
    racks = len({b.rack for b in cluster})
    topics = data.draw(topic_lists(max_factor=len(cluster)).filter(lambda ts: all(f > racks for _, f in ts)))
    with mock.patch.object(placement.balanced, "_followers", return_value=None):
        placed = list(accumulate(cluster, topics, seed))
    for (partitions, factor), (assignment, load) in zip(topics, placed, strict=True):
        check_topic(assignment, cluster, partitions, factor)
        assert spread([r for r, _ in load.values()]) <= 1
        assert spread([lead for _, lead in load.values()]) <= 1


def test_a_rack_choice_that_leaves_the_brokers_no_way_is_rebuilt_by_the_flow() -> None:
    """2 racks of 2, 3 partitions of RF 3 (each with one rack twice): broker 3 takes the topic's
    extra replica and leads, and with this seed's tie-breaks the first choice of doubled racks
    leaves it short of partitions to be a follower in; the flow finds a construction."""
    cluster = [UsableBroker(0, "a"), UsableBroker(1, "b"), UsableBroker(2, "a"), UsableBroker(3, "b")]
    load = {0: (10, 5), 1: (10, 4), 2: (11, 5), 3: (10, 5)}
    with mock.patch.object(
        placement.balanced, "_followers_by_flow", wraps=placement.balanced._followers_by_flow
    ) as flow:
        assignment = BalancedReplicaPlacer(JavaRandom(3)).place(cluster, 3, 3, load)
    assert flow.called
    check_topic(assignment, cluster, 3, 3)
    add(load, assignment)
    assert spread([r for r, _ in load.values()]) <= 1 and spread([lead for _, lead in load.values()]) <= 1


def reachable_states(racks: int, per_rack: int) -> Iterator[tuple[Load, int, int, list[list[int]], Load]]:
    """Every cluster state the placer reaches from empty on racks x per_rack brokers with every
    topic of 1 .. 2N-1 partitions and every factor 1 .. N: yields (load before, partitions,
    factor, assignment, load after) for each placement, each state once."""
    n = racks * per_rack
    cluster = [UsableBroker(b, f"r{b % racks}") for b in range(n)]

    def normal(load: Load) -> tuple[tuple[int, ...], tuple[int, ...]]:
        low_r = min(r for r, _ in load.values())
        low_l = min(lead for _, lead in load.values())
        return tuple(load[b][0] - low_r for b in range(n)), tuple(load[b][1] - low_l for b in range(n))

    start: Load = dict.fromkeys(range(n), (0, 0))
    seen = {normal(start)}
    frontier = [start]
    while frontier:
        following: list[Load] = []
        for load in frontier:
            for partitions in range(1, 2 * n):
                for factor in range(1, n + 1):
                    after = dict(load)
                    seed = partitions * 31 + factor
                    assignment = BalancedReplicaPlacer(JavaRandom(seed)).place(cluster, partitions, factor, after)
                    add(after, assignment)
                    yield load, partitions, factor, assignment, after
                    key = normal(after)
                    if key not in seen:
                        seen.add(key)
                        following.append(after)
        frontier = following


def high(counts: dict[int, int]) -> set[int]:
    low = min(counts.values())
    return {b for b, c in counts.items() if c > low}


def per_rack_spread(members: set[int], racks: int, per_rack: int) -> int:
    return spread([sum(1 for b in members if b % racks == r) for r in range(racks)])


def check_every_reachable_state(racks: int, per_rack: int) -> None:
    cluster = [UsableBroker(b, f"r{b % racks}") for b in range(racks * per_rack)]
    for before, partitions, factor, assignment, after in reachable_states(racks, per_rack):
        where = f"{partitions} partitions RF {factor} after {before}"
        check_topic(assignment, cluster, partitions, factor)
        replicas = {b: r for b, (r, _) in after.items()}
        leaders = {b: lead for b, (_, lead) in after.items()}
        assert spread(list(replicas.values())) <= 1 and spread(list(leaders.values())) <= 1, where
        # The shape that lets every next topic keep ±1: the brokers one above the minimum, of
        # replicas and of leaders, nested and (with their difference) spread over the racks.
        hr, hl = high(replicas), high(leaders)
        assert hr <= hl or hl <= hr, where
        assert max(per_rack_spread(s, racks, per_rack) for s in (hr, hl, hr ^ hl)) <= 1, where


@pytest.mark.parametrize(("racks", "per_rack"), [(1, 3), (3, 1), (2, 2), (1, 4), (4, 1)])
def test_every_reachable_state_of_a_small_cluster_stays_within_one(racks: int, per_rack: int) -> None:
    check_every_reachable_state(racks, per_rack)


@pytest.mark.slow
@pytest.mark.parametrize(("racks", "per_rack"), [(3, 2), (2, 3), (3, 3), (2, 4), (4, 2)])
def test_every_reachable_state_of_a_larger_cluster_stays_within_one(racks: int, per_rack: int) -> None:
    check_every_reachable_state(racks, per_rack)
