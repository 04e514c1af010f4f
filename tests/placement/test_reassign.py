"""Reassignment plans: minimal moves for exclude-brokers and to-pool, ±1 replica balance for rebalance
(in the fewest moves), the Kafka JSON format, and the balanced plan placer."""

from __future__ import annotations

import math
import random as pyrandom

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement.brokers import UsableBroker
from placement.errors import InvalidReplicationFactorError, PlacementError
from placement.reassign import count_moves, plan_reassignment
from placement.rng import JavaRandom
from placement.striped import StripedReplicaPlacer


def nine_brokers(pools: bool = False) -> list[UsableBroker]:
    return [
        UsableBroker(i, rack=f"rack-{i % 3}", pool=("fast" if i < 3 else "slow") if pools else None) for i in range(9)
    ]


def min_moves_to_balance(counts: list[int]) -> int:
    """The fewest single-replica moves that bring ``counts`` within ±1 (give the q+1 slots to the
    fullest brokers, then count the excess)."""
    total, n = sum(counts), len(counts)
    q, r = divmod(total, n)
    targets = [q + 1] * r + [q] * (n - r)
    return sum(max(0, c - t) for c, t in zip(sorted(counts, reverse=True), targets, strict=True))


@st.composite
def assignments(draw: st.DrawFn, brokers: int = 9) -> dict[str, list[list[int]]]:
    topics = draw(st.integers(1, 3))
    out: dict[str, list[list[int]]] = {}
    for t in range(topics):
        rf = draw(st.integers(1, 3))
        parts = draw(st.integers(1, 12))
        out[f"t{t}"] = [draw(st.permutations(range(brokers)))[:rf] for _ in range(parts)]
    return out


def assert_valid(proposed: dict[str, list[list[int]]], current: dict[str, list[list[int]]]) -> None:
    for topic, parts in proposed.items():
        assert len(parts) == len(current[topic])
        for old, new in zip(current[topic], parts, strict=True):
            assert len(new) == len(old), "the replication factor is kept"
            assert len(set(new)) == len(new), "no broker twice"


@settings(max_examples=80, deadline=None)
@given(assignments(), st.sets(st.integers(0, 8), min_size=1, max_size=5))
def test_exclude_brokers_moves_exactly_the_replicas_on_them(
    current: dict[str, list[list[int]]], exclude: set[int]
) -> None:
    brokers = nine_brokers()
    plan = plan_reassignment(current, brokers, exclude=exclude)
    assert_valid(plan.proposed, current)
    on_excluded = sum(1 for parts in current.values() for r in parts for b in r if b in exclude)
    assert plan.moves == on_excluded == count_moves(current, plan.proposed)
    for topic, parts in plan.proposed.items():
        for old, new in zip(current[topic], parts, strict=True):
            assert not set(new) & exclude
            # Replicas not on an excluded broker stay (a moving partition may get a new preferred leader).
            assert set(old) - exclude <= set(new)
            if not set(old) & exclude:
                assert new == old, "a partition with nothing to evacuate is left alone"
    assert all(plan.after.replicas.per_broker.get(b, 0) == 0 for b in exclude)


@settings(max_examples=80, deadline=None)
@given(assignments())
def test_to_pool_moves_exactly_the_replicas_outside_the_pool(current: dict[str, list[list[int]]]) -> None:
    brokers = nine_brokers(pools=True)
    # RF 3 fits the 3-broker pool; bigger factors are refused (next test).
    plan = plan_reassignment(current, brokers, pool="fast")
    assert_valid(plan.proposed, current)
    outside = sum(1 for parts in current.values() for r in parts for b in r if b >= 3)
    assert plan.moves == outside
    assert all(b < 3 for parts in plan.proposed.values() for r in parts for b in r)


def test_to_pool_refuses_a_factor_the_pool_cannot_hold() -> None:
    brokers = [*nine_brokers(pools=True), UsableBroker(9, rack="rack-0", pool="tiny")]
    with pytest.raises(InvalidReplicationFactorError, match="replication factor 3 is larger than the 1 target"):
        plan_reassignment({"t": [[0, 1, 2]]}, brokers, pool="tiny")
    with pytest.raises(PlacementError, match="broker pool 'nope' has no registered brokers"):
        plan_reassignment({"t": [[0, 1, 2]]}, brokers, pool="nope")
    with pytest.raises(PlacementError, match=r"exclude: brokers \[42\] are not registered"):
        plan_reassignment({"t": [[0, 1, 2]]}, brokers, exclude=[42])


def racks_spanned(assignment: dict[str, list[list[int]]], rack_of: dict[int, str | None]) -> list[int]:
    return [len({rack_of[b] for b in replicas}) for parts in assignment.values() for replicas in parts]


@settings(max_examples=80, deadline=None)
@given(assignments(), st.sampled_from([4, 6, 9]), st.booleans())
def test_rebalance_reaches_plus_minus_one_in_the_fewest_moves(
    current: dict[str, list[list[int]]], size: int, racked: bool
) -> None:
    # Brokers 0..size-1; the assignment may name brokers beyond them, which are then excluded.
    # Balance first (--disable-rack-aware): racks only break ties, so ±1 is always reachable.
    brokers = [UsableBroker(i, rack=f"rack-{i % 3}" if racked else None) for i in range(9)]
    exclude = set(range(size, 9))
    if max(len(r) for parts in current.values() for r in parts) > size:
        return
    evacuated = plan_reassignment(current, brokers, exclude=exclude, rack_aware=False)
    plan = plan_reassignment(current, brokers, exclude=exclude, rebalance=True, rack_aware=False)
    assert_valid(plan.proposed, current)
    counts = [plan.after.replicas.per_broker.get(b, 0) for b in range(size)]
    assert max(counts) - min(counts) <= 1
    before_counts = [evacuated.after.replicas.per_broker.get(b, 0) for b in range(size)]
    # Evacuating is unavoidable; balancing adds at most the fewest moves it needs (fewer when a
    # replica that had to leave an excluded broker is simply sent further).
    assert evacuated.moves <= plan.moves <= evacuated.moves + min_moves_to_balance(before_counts)
    if not exclude:
        assert plan.moves == min_moves_to_balance(before_counts)


@settings(max_examples=80, deadline=None)
@given(assignments(), st.sampled_from([4, 6, 9]), st.booleans())
def test_rack_aware_plans_never_take_a_partition_off_a_rack_it_can_keep(
    current: dict[str, list[list[int]]], size: int, rebalance: bool
) -> None:
    # Brokers 0..size-1 on three racks (each keeps a target broker), the rest excluded: every
    # partition ends on at least as many racks as it had, up to the three there are -- and the
    # rebalance still adds no more moves than ±1 would need.
    brokers = [UsableBroker(i, rack=f"rack-{i % 3}") for i in range(9)]
    rack_of: dict[int, str | None] = {b.id: b.rack for b in brokers}
    exclude = set(range(size, 9))
    if max(len(r) for parts in current.values() for r in parts) > size:
        return
    evacuated = plan_reassignment(current, brokers, exclude=exclude)
    plan = plan_reassignment(current, brokers, exclude=exclude, rebalance=rebalance)
    assert_valid(plan.proposed, current)
    for before, after in zip(racks_spanned(current, rack_of), racks_spanned(plan.proposed, rack_of), strict=True):
        assert after >= min(before, 3)
    before_counts = [evacuated.after.replicas.per_broker.get(b, 0) for b in range(size)]
    assert evacuated.moves <= plan.moves <= evacuated.moves + min_moves_to_balance(before_counts)


def test_rebalance_evens_out_the_striped_placers_leaders() -> None:
    brokers = nine_brokers()
    placed = StripedReplicaPlacer(JavaRandom(0)).place(brokers, 54, 3)
    plan = plan_reassignment({"t": placed}, brokers, rebalance=True)
    assert plan.before.leaders.range > 1  # Kafka's striped placer: uneven preferred leaders
    assert plan.after.leaders.range <= 1
    assert plan.after.replicas.range <= 1
    assert plan.moves == 0  # replicas were already even: only the order changes
    assert plan.reorders == len(plan.changed())
    assert plan.after.rack_spread_violations == 0


def test_evacuation_evens_out_leaders_among_the_partitions_that_move() -> None:
    brokers = nine_brokers(pools=True)
    current = {"orders": [[7, 2, 3], [5, 6, 1], [0, 4, 8], [7, 2, 3], [5, 6, 1], [0, 4, 8]]}
    plan = plan_reassignment(current, brokers, pool="fast")
    assert plan.moves == 12
    assert plan.after.leaders.range <= 1  # 6 leaders on brokers 6, 7, 8: two each


def test_kafka_json_lists_only_changed_partitions() -> None:
    brokers = nine_brokers()
    plan = plan_reassignment({"a": [[0, 1, 2], [3, 4, 5]], "b": [[6, 7, 8]]}, brokers, exclude=[4])
    assert plan.to_kafka_json() == {"version": 1, "partitions": [{"topic": "a", "partition": 1, "replicas": [3, 1, 5]}]}
    assert plan.current_json()["partitions"] == [{"topic": "a", "partition": 1, "replicas": [3, 4, 5]}]
    # 4 was in rack-1: the replacement keeps the partition on three racks (1 is rack-1 and least loaded).
    assert plan.after.rack_spread_violations == 0


def test_balanced_plan_placer_gives_per_topic_plus_minus_one() -> None:
    brokers = nine_brokers()
    rng = pyrandom.Random(5)
    current = {"t": [rng.sample(range(6), 3) for _ in range(18)]}  # brokers 6..8 empty
    plan = plan_reassignment(current, brokers, rebalance=True, placer="balanced", random=JavaRandom(1))
    topic = plan.after.topics["t"]
    assert topic.replicas.range <= 1 and topic.leaders.range <= 1
    assert plan.moves == count_moves(current, plan.proposed)
    # Matching placed lists to the partitions they overlap keeps the copies well below a full re-place.
    assert plan.moves < 18 * 3
    assert plan.moves >= math.ceil((54 / 9) * 3)  # brokers 6..8 need 6 replicas each


def test_fenced_brokers_keep_their_replicas_but_get_no_new_ones() -> None:
    brokers = [UsableBroker(i, fenced=(i == 1)) for i in range(4)]
    plan = plan_reassignment({"t": [[0, 1], [2, 3]]}, brokers, exclude=[0])
    assert plan.proposed["t"][0][1] == 1
    assert plan.proposed["t"][0][0] in (2, 3)
    with pytest.raises(PlacementError, match="plan placer must be one of minimal, balanced"):
        plan_reassignment({"t": [[0, 1]]}, brokers, placer="striped")


@pytest.mark.parametrize("rack_aware", [True, False])
@pytest.mark.parametrize("seed", range(6))
def test_retiring_a_broker_keeps_the_most_loaded_broker_as_low_as_it_can_be(seed: int, rack_aware: bool) -> None:
    """Retiring one of 9 brokers (3 racks of 3) with exactly the moves the retirement needs.

    Rack-aware (the default, as Kafka's): every partition keeps its three racks, so each evacuated
    replica goes to one of the retired broker's two rack-mates, the less loaded first -- the lowest
    most-loaded count rack spread allows, every other broker unchanged. Balance first
    (``rack_aware=False``, issue 22 item 4): no broker goes above the cap, ceil(replicas /
    remaining brokers), or the most loaded before (seed 0, broker 0: 9, not 11)."""
    brokers = [UsableBroker(i, rack=f"r{i // 3}") for i in range(9)]
    placer = StripedReplicaPlacer(JavaRandom(seed))
    current = {f"t{k}": placer.place(brokers, 4 + k, 3) for k in range(4)}
    for retire in range(9):
        plan = plan_reassignment(current, brokers, exclude=[retire], rack_aware=rack_aware)
        before = {b.id: 0 for b in brokers}
        after = {b.id: 0 for b in brokers if b.id != retire}
        for topic, parts in current.items():
            for old, new in zip(parts, plan.proposed[topic], strict=True):
                for broker in old:
                    before[broker] += 1
                for broker in new:
                    after[broker] += 1
        assert plan.moves == before[retire], "only the retired broker's replicas move"
        assert_valid(plan.proposed, current)
        if rack_aware:
            assert plan.after.rack_spread_violations == 0
            mates = [b for b in range(retire - retire % 3, retire - retire % 3 + 3) if b != retire]
            others = [b for b in after if b not in mates]
            assert all(after[b] == before[b] for b in others)
            held = sum(before[b] for b in mates) + before[retire]
            assert max(after[b] for b in mates) == max(*(before[b] for b in mates), -(-held // 2))
        else:
            cap = math.ceil(sum(after.values()) / len(after))
            assert max(after.values()) <= max(cap, *(v for b, v in before.items() if b != retire))
