"""The balanced placer: the ±1 promise, load awareness, constraints and errors."""

from __future__ import annotations

import pytest

from placement import (
    BalancedReplicaPlacer,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    JavaRandom,
    PlacementError,
    StripedReplicaPlacer,
)
from placement import UsableBroker as B
from placement.metrics import balance_report
from tests.placement.helpers import brokers, leader_counts, replica_counts

NINE = [B(i, f"rack{i // 3}") for i in range(9)]


def test_fixes_kafkas_skewed_example() -> None:
    """Where Kafka's striped placer gives leaders [3, 3, 12, 12, 6, 0, 6, 9, 3] (seed 0)."""
    assert leader_counts(StripedReplicaPlacer(JavaRandom(0)).place(NINE, 54, 3), range(9)) == [
        3, 3, 12, 12, 6, 0, 6, 9, 3,
    ]  # fmt: skip
    assignment = BalancedReplicaPlacer(JavaRandom(0)).place(NINE, 54, 3)
    assert leader_counts(assignment, range(9)) == [6] * 9
    assert replica_counts(assignment, range(9)) == [18] * 9
    assert balance_report(assignment, NINE).rack_spread_violations == 0


@pytest.mark.parametrize(("racks", "per_rack"), [(2, 2), (2, 4), (3, 4), (4, 4), (5, 20)])
@pytest.mark.parametrize("partitions", [1, 7, 50, 101])
@pytest.mark.parametrize("factor", [1, 2, 3])
def test_within_one_on_equal_racks(racks: int, per_rack: int, partitions: int, factor: int) -> None:
    cluster = [B(i, f"r{i % racks}") for i in range(racks * per_rack)]
    report = balance_report(BalancedReplicaPlacer(JavaRandom(7)).place(cluster, partitions, factor), cluster)
    assert report.leaders.range <= 1
    assert report.replicas.range <= 1
    assert report.rack_spread_violations == 0


def test_extra_leaders_and_replicas_go_to_the_least_loaded_brokers() -> None:
    cluster = brokers("0,1,2,3")
    load = {0: (9, 9), 1: (0, 0), 2: (9, 9), 3: (0, 0)}
    assignment = BalancedReplicaPlacer(JavaRandom(1)).place(cluster, 2, 1, load)
    assert sorted(replicas[0] for replicas in assignment) == [1, 3]


def test_load_evens_out_over_topics() -> None:
    cluster = [B(i, f"r{i % 3}") for i in range(6)]
    load = {b.id: (0, 0) for b in cluster}
    random = JavaRandom(3)
    for _ in range(12):  # 12 topics of 4 partitions, RF 2: 8 replicas and 4 leaders each on 6 brokers
        for replicas in BalancedReplicaPlacer(random).place(cluster, 4, 2, load):
            load[replicas[0]] = (load[replicas[0]][0], load[replicas[0]][1] + 1)
            for broker in replicas:
                load[broker] = (load[broker][0] + 1, load[broker][1])
    assert {r for r, _ in load.values()} == {16}
    assert {lead for _, lead in load.values()} == {8}


def test_unequal_racks_keep_leaders_within_one_and_spread_racks() -> None:
    cluster = brokers("0:a,1:a,2:a,3:a,4:b,5:b,6:c")
    assignment = BalancedReplicaPlacer(JavaRandom(2)).place(cluster, 30, 3)
    report = balance_report(assignment, cluster)
    assert report.leaders.range <= 1
    assert report.rack_spread_violations == 0
    # Rack spread forces every partition onto the single broker of rack c.
    assert report.replicas.per_broker[6] == 30


def test_fenced_brokers_only_as_a_last_resort() -> None:
    cluster = brokers("0:a,1:a,2:b:fenced,3:b")
    for replicas in BalancedReplicaPlacer(JavaRandom(4)).place(cluster, 10, 3):
        assert replicas[0] != 2
        assert 2 not in replicas or len(replicas) == 3
    unfenced_enough = BalancedReplicaPlacer(JavaRandom(4)).place(cluster, 10, 2)
    assert all(2 not in replicas for replicas in unfenced_enough)


def test_fenced_broker_needed_for_the_factor_is_a_follower() -> None:
    cluster = brokers("0,1:fenced")
    assert BalancedReplicaPlacer(JavaRandom(0)).place(cluster, 3, 2) == [[0, 1], [0, 1], [0, 1]]


def test_seed_changes_the_tie_breaks_but_not_the_balance() -> None:
    cluster = [B(i, f"r{i % 2}") for i in range(8)]
    outputs = {tuple(map(tuple, BalancedReplicaPlacer(JavaRandom(seed)).place(cluster, 9, 2))) for seed in range(6)}
    assert len(outputs) > 1


def test_errors_match_the_striped_placer() -> None:
    placer = BalancedReplicaPlacer(JavaRandom(0))
    with pytest.raises(InvalidReplicationFactorError, match="must be positive"):
        placer.place(brokers("0,1"), 1, 0)
    with pytest.raises(InvalidReplicationFactorError, match="All brokers are currently fenced"):
        placer.place(brokers("0:a:fenced"), 1, 1)
    with pytest.raises(InvalidReplicationFactorError, match="only 2 broker"):
        placer.place(brokers("0,1"), 1, 3)
    with pytest.raises(InvalidPartitionsError):
        placer.place(brokers("0,1"), -1, 1)
    with pytest.raises(PlacementError, match="more than once"):
        placer.place(brokers("0,0"), 1, 1)
    with pytest.raises(ValueError, match=r"load: broker 0 must map to \(replicas, leaders\)"):
        placer.place(brokers("0,1"), 1, 1, {0: (-1, 0)})


def test_zero_partitions() -> None:
    assert BalancedReplicaPlacer(JavaRandom(0)).place(brokers("0,1"), 0, 1) == []
