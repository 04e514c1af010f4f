"""The striped placer: Kafka's own StripedReplicaPlacerTest cases, and JVM-produced placements."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement import (
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    JavaRandom,
    StripedReplicaPlacer,
    striped_vectorized,
)
from placement import UsableBroker as B
from placement.errors import PlacementError
from placement.striped import StripedBrokers, _RackList
from tests.placement.helpers import CountingRandom, KafkaMockRandom, ScriptedRandom, brokers, leader_counts
from tests.placement.strategies import clusters

GOLDEN: dict[str, Any] = json.loads((Path(__file__).parent / "data" / "java_golden.json").read_text())


# --- Kafka's StripedReplicaPlacerTest, with its MockRandom ---------------------------------


def test_avoid_fenced_replica_if_possible_on_single_rack() -> None:
    rack_list = _RackList(KafkaMockRandom(), [B(3), B(1, fenced=True), B(0), B(4), B(2)])
    assert (rack_list.num_total, rack_list.num_unfenced) == (5, 4)
    assert rack_list.names == [None]
    assert rack_list.place_many(5, 4) == [[3, 4, 0, 2], [4, 0, 2, 3], [0, 2, 3, 4], [2, 3, 4, 0], [0, 4, 3, 2]]


def test_multi_partition_topic_placement_on_single_unfenced_broker() -> None:
    placer = StripedReplicaPlacer(KafkaMockRandom())
    assert placer.place([B(0), B(1, fenced=True)], 3, 1) == [[0], [0], [0]]


def test_placement_on_fenced_replica_on_single_rack() -> None:
    rack_list = _RackList(KafkaMockRandom(), [B(3), B(1, fenced=True), B(2)])
    assert (rack_list.num_total, rack_list.num_unfenced) == (3, 2)
    assert rack_list.place_many(4, 3) == [[3, 2, 1], [2, 3, 1], [3, 2, 1], [2, 3, 1]]


def test_rack_list_with_multiple_racks() -> None:
    rack_list = _RackList(
        KafkaMockRandom(), [B(11, "1"), B(10, "1"), B(30, "3"), B(31, "3"), B(21, "2"), B(20, "2", fenced=True)]
    )
    assert (rack_list.num_total, rack_list.num_unfenced) == (6, 5)
    assert [rack_list.names[r] for r in rack_list.order] == ["1", "2", "3"]
    assert rack_list.place_many(3, 4) == [[11, 21, 31, 10], [21, 30, 10, 20], [31, 11, 21, 30]]


def test_rack_list_with_invalid_racks() -> None:
    rack_list = _RackList(
        KafkaMockRandom(),
        [
            B(11, "1"),
            B(10, "1"),
            B(30, "3", fenced=True),
            B(31, "3", fenced=True),
            B(20, "2", fenced=True),
            B(21, "2", fenced=True),
            B(41, "4"),
            B(40, "4", fenced=True),
        ],
    )
    assert (rack_list.num_total, rack_list.num_unfenced) == (8, 3)
    assert [rack_list.names[r] for r in rack_list.order] == ["1", "2", "3", "4"]
    assert rack_list.place_many(3, 4) == [[41, 11, 21, 30], [10, 20, 31, 41], [41, 21, 30, 11]]


def test_successful_placement() -> None:
    placer = StripedReplicaPlacer(KafkaMockRandom())
    assert placer.place([B(0), B(3), B(2), B(1)], 5, 3) == [[2, 3, 0], [3, 0, 1], [0, 1, 2], [1, 2, 3], [1, 0, 2]]


def test_even_distribution() -> None:
    placement = StripedReplicaPlacer(KafkaMockRandom()).place([B(0), B(1), B(2), B(3)], 200, 2)
    counts = Counter(tuple(replicas) for replicas in placement)
    assert counts == {
        (0, 1): 14,
        (0, 2): 22,
        (0, 3): 14,
        (1, 0): 17,
        (1, 2): 17,
        (1, 3): 16,
        (2, 0): 13,
        (2, 1): 17,
        (2, 3): 20,
        (3, 0): 20,
        (3, 1): 19,
        (3, 2): 11,
    }


def test_place_shifts_initial_offsets_rack_unaware() -> None:
    usable = [B(i) for i in range(12)]
    first = StripedReplicaPlacer(KafkaMockRandom()).place(usable, 2, 3)
    assert first == [[7, 8, 9], [8, 9, 10]]
    second = StripedReplicaPlacer(KafkaMockRandom()).place(usable, 2, 3, existing=first)
    assert second == [[9, 10, 11], [10, 11, 0]]
    third = StripedReplicaPlacer(KafkaMockRandom()).place(usable, 4, 3, existing=first + second)
    assert third == [[11, 0, 1], [0, 1, 2], [1, 2, 3], [2, 3, 4]]


def test_place_shifts_initial_offsets_rack_aware() -> None:
    usable = [B(i, str(1 + i // 4)) for i in range(12)]
    first = StripedReplicaPlacer(KafkaMockRandom()).place(usable, 2, 3)
    assert first == [[6, 8, 2], [9, 3, 7]]
    second = StripedReplicaPlacer(KafkaMockRandom()).place(usable, 2, 3, existing=first)
    assert second == [[0, 4, 10], [5, 11, 1]]
    assert {b for replicas in first + second for b in replicas} == set(range(12))


def test_place_shifts_initial_offsets_rack_aware_and_uses_unused_racks() -> None:
    usable = [B(0, "1"), B(1, "2"), B(2, "3"), B(3, "4")]
    partitions = StripedReplicaPlacer(KafkaMockRandom()).place(usable, 1, 2)
    assert partitions == [[0, 1]]
    # Kafka's test passes only the previous call's partitions each time.
    partitions = StripedReplicaPlacer(KafkaMockRandom()).place(usable, 1, 2, existing=partitions)
    assert partitions == [[1, 2]]
    partitions = StripedReplicaPlacer(KafkaMockRandom()).place(usable, 1, 2, existing=partitions)
    assert partitions == [[2, 3]]
    partitions = StripedReplicaPlacer(KafkaMockRandom()).place(usable, 1, 2, existing=partitions)
    assert partitions == [[3, 0]]


def test_all_brokers_fenced() -> None:
    placer = StripedReplicaPlacer(KafkaMockRandom())
    with pytest.raises(InvalidReplicationFactorError) as error:
        placer.place([B(11, "1", fenced=True), B(10, "1", fenced=True)], 1, 1)
    assert str(error.value) == "All brokers are currently fenced."


def test_not_enough_brokers() -> None:
    placer = StripedReplicaPlacer(KafkaMockRandom())
    with pytest.raises(InvalidReplicationFactorError) as error:
        placer.place([B(11, "1"), B(10, "1")], 1, 3)
    assert (
        str(error.value)
        == "The target replication factor of 3 cannot be reached because only 2 broker(s) are registered."
    )


@pytest.mark.parametrize("factor", [0, -1])
def test_non_positive_replication_factor(factor: int) -> None:
    placer = StripedReplicaPlacer(KafkaMockRandom())
    with pytest.raises(InvalidReplicationFactorError) as error:
        placer.place([B(11, "1"), B(10, "1")], 1, factor)
    assert str(error.value) == f"Invalid replication factor {factor}: the replication factor must be positive."


def test_checks_run_in_kafkas_order() -> None:
    # All fenced is reported before "too few brokers", as in StripedReplicaPlacer.place.
    with pytest.raises(InvalidReplicationFactorError, match="All brokers are currently fenced"):
        StripedReplicaPlacer(JavaRandom(0)).place([B(1, fenced=True)], 1, 3)
    with pytest.raises(InvalidReplicationFactorError, match="must be positive"):
        StripedReplicaPlacer(JavaRandom(0)).place([], 1, 0)
    with pytest.raises(InvalidReplicationFactorError, match="All brokers are currently fenced"):
        StripedReplicaPlacer(JavaRandom(0)).place([], 1, 1)


# --- raftmeta's own checks -----------------------------------------------------------------


def test_duplicate_broker_ids_are_rejected() -> None:
    with pytest.raises(PlacementError, match="broker id 1 appears more than once"):
        StripedReplicaPlacer(JavaRandom(0)).place([B(1), B(1, "a")], 1, 1)


def test_negative_partition_count_is_rejected() -> None:
    with pytest.raises(InvalidPartitionsError, match="num_partitions"):
        StripedReplicaPlacer(JavaRandom(0)).place([B(1)], -1, 1)


def test_zero_partitions_is_an_empty_assignment() -> None:
    assert StripedReplicaPlacer(JavaRandom(0)).place([B(1)], 0, 1) == []


def test_existing_partition_without_replicas_is_rejected() -> None:
    with pytest.raises(InvalidPartitionsError, match="partition 1 has no replicas"):
        StripedReplicaPlacer(JavaRandom(0)).place([B(1)], 1, 1, existing=[[1], []])


# --- the leader skew of Kafka's placer (issue 11) ------------------------------------------


def test_kafka_leader_skew_with_java_random_zero() -> None:
    """Kafka's placer with java.util.Random(0): 3 racks x 3 brokers, 54 partitions, RF 3.

    The arrangement is broker i in rack ``rack{i // 3}`` (brokers 0-2 in rack0, 3-5 in rack1,
    6-8 in rack2); with broker i in rack ``rack{i % 3}`` the vector is [3, 12, 6, 3, 6, 9, 12, 0, 3].
    """
    usable = [B(i, f"rack{i // 3}") for i in range(9)]
    placement = StripedReplicaPlacer(JavaRandom(0)).place(usable, 54, 3)
    assert leader_counts(placement, range(9)) == [3, 3, 12, 12, 6, 0, 6, 9, 3]
    interleaved = [B(i, f"rack{i % 3}") for i in range(9)]
    assert leader_counts(StripedReplicaPlacer(JavaRandom(0)).place(interleaved, 54, 3), range(9)) == [
        3, 12, 6, 3, 6, 9, 12, 0, 3,
    ]  # fmt: skip


def test_random_draws_follow_kafkas_order() -> None:
    """Init draws per rack in HashMap order (fenced list, then unfenced), then the rack offset."""
    source = CountingRandom(JavaRandom(3))
    StripedReplicaPlacer(source).place(brokers("0:a,1:a,2:b,3:b:fenced,4:c,5:c,6:c"), 0, 1)
    # HashMap order of "a", "b", "c" is a, b, c (hashes 97, 98, 99); b has one fenced broker.
    assert source.calls == [2, 1, 1, 3, 3]


# --- bit-exactness against the JVM ---------------------------------------------------------


@pytest.mark.parametrize("case", GOLDEN["striped"], ids=lambda c: f"seed{c['seed']}-{len(c['brokers'])}brokers")
def test_matches_kafka_on_the_jvm(case: dict[str, Any]) -> None:
    usable = [B(broker_id, rack, fenced=fenced) for broker_id, rack, fenced in case["brokers"]]
    placer = StripedReplicaPlacer(JavaRandom(case["seed"]))
    if case["result"] is None:
        with pytest.raises(InvalidReplicationFactorError):
            placer.place(usable, case["partitions"], case["replication_factor"])
    else:
        assert placer.place(usable, case["partitions"], case["replication_factor"]) == case["result"]


# --- the fast path for clusters without fenced brokers is the same algorithm ------------------


@settings(max_examples=200, deadline=None)
@given(clusters(fenced=False), st.integers(1, 6), st.integers(0, 120), st.integers(0, 2**48), st.data())
def test_unfenced_fast_path_equals_the_general_loop(
    cluster: list[B], factor: int, partitions: int, seed: int, data: st.DataObject
) -> None:
    factor = min(factor, len(cluster))
    # Also from offsets continued after a topic's existing partitions (add-partitions).
    ids = [b.id for b in cluster] + [999]  # 999: a broker that left the cluster
    existing = data.draw(st.lists(st.lists(st.sampled_from(ids), min_size=1, max_size=3, unique=True), max_size=5))
    general = _RackList(JavaRandom(seed), cluster, existing).place_many(partitions, factor)
    fast = _RackList(JavaRandom(seed), cluster, existing).place_many_unfenced(partitions, factor)
    assert fast == general


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 7),
    st.integers(0, 60),
    st.integers(-(2**48), 2**48),
    st.lists(st.text(min_size=0, max_size=3), min_size=7, max_size=7, unique=True),
    st.data(),
)
def test_one_broker_per_rack_path_equals_the_general_loop(
    num_racks: int, partitions: int, seed: int, names: list[str], data: st.DataObject
) -> None:
    """One unfenced broker per rack and a replica on every rack (three brokers in three racks,
    RF 3): the rotation path gives place_many's placements and leaves its state."""
    racks: list[str | None] = [None, *names][:num_racks]
    ids = data.draw(st.lists(st.integers(0, 500), min_size=num_racks, max_size=num_racks, unique=True))
    cluster = data.draw(st.permutations([B(broker, rack) for broker, rack in zip(ids, racks, strict=True)]))
    existing = data.draw(
        st.lists(st.lists(st.sampled_from([*ids, 999]), min_size=1, max_size=3, unique=True), max_size=4)
    )
    fast = _RackList(JavaRandom(seed), cluster, existing)
    assert fast.one_per_rack(num_racks)
    general = _RackList(JavaRandom(seed), cluster, existing)
    assert fast.place_one_per_rack(partitions, num_racks) == general.place_many(partitions, num_racks)
    # The same state afterwards: placing more continues identically.
    assert fast.place_many(5, num_racks) == general.place_many(5, num_racks)
    assert StripedReplicaPlacer(JavaRandom(seed)).place(cluster, partitions, num_racks, existing=existing) == (
        _RackList(JavaRandom(seed), cluster, existing).place_many(partitions, num_racks)
    )


@settings(max_examples=100, deadline=None)
@given(clusters(), st.integers(1, 4), st.integers(0, 40), st.integers(0, 2**48))
def test_prepared_brokers_place_as_the_broker_list(cluster: list[B], factor: int, partitions: int, seed: int) -> None:
    """A StripedBrokers built once places like the broker list it was built from, every time."""
    factor = min(factor, len(cluster))
    prepared = StripedBrokers(cluster)
    for attempt in range(2):
        expected = StripedReplicaPlacer(JavaRandom(seed + attempt)).place(cluster, partitions, factor)
        assert StripedReplicaPlacer(JavaRandom(seed + attempt)).place(prepared, partitions, factor) == expected


@st.composite
def vectorizable(draw: st.DrawFn) -> tuple[list[B], int, int]:
    """No fenced broker, RF <= racks, at least two brokers per rack on average, enough partitions."""
    num_racks = draw(st.integers(1, 5))
    sizes = draw(
        st.lists(st.integers(1, 6), min_size=num_racks, max_size=num_racks).filter(lambda s: sum(s) >= 2 * len(s))
    )
    names = draw(st.lists(st.text(min_size=1, max_size=4), min_size=num_racks, max_size=num_racks, unique=True))
    ids = draw(st.permutations(range(sum(sizes))))
    cluster = [B(ids[i], names[r]) for i, r in enumerate(r for r, n in enumerate(sizes) for _ in range(n))]
    factor = draw(st.integers(1, num_racks))
    partitions = draw(st.integers(4 * len(cluster), 4 * len(cluster) + 150))
    return draw(st.permutations(cluster)), factor, partitions


@settings(max_examples=200, deadline=None)
@given(vectorizable(), st.integers(-(2**48), 2**48))
def test_vectorized_path_equals_the_general_loop(case: tuple[list[B], int, int], seed: int) -> None:
    cluster, factor, partitions = case
    rack_list = _RackList(JavaRandom(seed), cluster)
    assert striped_vectorized.applies(rack_list, partitions, factor)
    expected = _RackList(JavaRandom(seed), cluster).place_many(partitions, factor)
    assert striped_vectorized.place_all(rack_list, partitions, factor) == expected


def test_vectorized_path_is_taken_and_exact_for_the_benchmark_shape() -> None:
    cluster = [B(i, f"rack{i * 5 // 100}") for i in range(100)]
    rack_list = _RackList(JavaRandom(11), cluster)
    assert striped_vectorized.applies(rack_list, 5_000, 3)
    assert StripedReplicaPlacer(JavaRandom(11)).place(cluster, 5_000, 3) == rack_list.place_many(5_000, 3)


@pytest.mark.slow
def test_vectorized_path_is_exact_at_a_million_partitions() -> None:
    cluster = [B(i, f"rack{i * 5 // 100}") for i in range(100)]
    fast = StripedReplicaPlacer(JavaRandom(2024)).place(cluster, 1_000_000, 3)
    assert fast == _RackList(JavaRandom(2024), cluster).place_many(1_000_000, 3)


def test_javadoc_and_seed_004_worked_table_with_all_offsets_zero() -> None:
    """Racks A, B, C with 3 brokers each, every random offset 0 (seed 004, Kafka's Javadoc):

    partition 1: A0, B0, C0 / partition 2: B1, C1, A1 / partition 3: C2, A2, B2
    """
    names = {"A": [0, 1, 2], "B": [10, 11, 12], "C": [20, 21, 22]}
    cluster = [B(broker, rack) for rack, members in names.items() for broker in members]
    zeros = ScriptedRandom([0] * 4)  # three broker-list offsets, then the rack offset
    a, b, c = names["A"], names["B"], names["C"]
    assert StripedReplicaPlacer(zeros).place(cluster, 3, 3) == [
        [a[0], b[0], c[0]],
        [b[1], c[1], a[1]],
        [c[2], a[2], b[2]],
    ]
    assert zeros.calls == [3, 3, 3, 3]
