"""AdminUtils.assignReplicasToBrokers and add-partitions: seed 000's worked examples verbatim,
the Javadoc's rack-aware example, and Kafka's checks and messages."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from placement import (
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    JavaRandom,
    PlacementError,
    add_partitions,
    assign_replicas_to_brokers,
    rack_alternated_broker_list,
)
from placement import UsableBroker as B
from tests.placement.helpers import ScriptedRandom, replica_counts

GOLDEN: dict[str, Any] = json.loads((Path(__file__).parent / "data" / "java_golden.json").read_text())


def ids(*broker_ids: int) -> list[B]:
    return [B(i) for i in broker_ids]


# Seed 000: "Broker列表{0,1,2,3,4} 分区数 10 副本数3 起始随机BrokerId=0; 起始随机nextReplicaShift=0"
SEED_10_PARTITIONS_RF3 = {
    0: [0, 1, 2],
    1: [1, 2, 3],
    2: [2, 3, 4],
    3: [3, 4, 0],
    4: [4, 0, 1],
    5: [0, 2, 3],
    6: [1, 3, 4],
    7: [2, 4, 0],
    8: [3, 0, 1],
    9: [4, 1, 2],
}


def test_seed_rack_unaware_10_partitions_rf3() -> None:
    # AdminUtils.assignReplicasToBrokers(brokerMetadatas, 10, 3, 0)
    assert assign_replicas_to_brokers(ids(0, 1, 2, 3, 4), 10, 3, 0) == SEED_10_PARTITIONS_RF3


def test_seed_rack_unaware_more_partitions_shift_again() -> None:
    # The seed's "11 partitions" example lists p-0 .. p-11, i.e. 12 partitions; the shift
    # becomes 2 at p-10.
    expected = {**SEED_10_PARTITIONS_RF3, 10: [0, 3, 4], 11: [1, 4, 0]}
    assert assign_replicas_to_brokers(ids(0, 1, 2, 3, 4), 12, 3, 0) == expected
    assert assign_replicas_to_brokers(ids(0, 1, 2, 3, 4), 11, 3, 0) == {p: expected[p] for p in range(11)}


def test_seed_rack_unaware_10_partitions_rf4() -> None:
    assert assign_replicas_to_brokers(ids(0, 1, 2, 3, 4), 10, 4, 0) == {
        0: [0, 1, 2, 3],
        1: [1, 2, 3, 4],
        2: [2, 3, 4, 0],
        3: [3, 4, 0, 1],
        4: [4, 0, 1, 2],
        5: [0, 2, 3, 4],
        6: [1, 3, 4, 0],
        7: [2, 4, 0, 1],
        8: [3, 0, 1, 2],
        9: [4, 1, 2, 3],
    }


def test_seed_broker_order_decides_positions() -> None:
    """Seed: broker list {1,2,0,4,3}, start index 0, shift 3 (drawn in this order)."""
    random = ScriptedRandom([0, 3])
    assignment = assign_replicas_to_brokers(ids(1, 2, 0, 4, 3), 10, 3, random=random)
    assert random.calls == [5, 5]
    # Positions, not ids: partition 0 leads at index 0 (broker 1); the shift 1 + (3 + 0) % 4 = 4.
    assert assignment[0] == [1, 3, 2]
    assert assignment[1] == [2, 1, 0]
    assert assignment[5] == [1, 2, 0]  # the shift grows to 4 after one round


def test_seed_two_partitions_then_add_one() -> None:
    """Seed: created on list (0, 1, 4, 2, 3) with start 0 and shift 2; add-partitions sorts the list."""
    created = assign_replicas_to_brokers(ids(0, 1, 4, 2, 3), 2, 3, random=ScriptedRandom([0, 2]))
    assert created == {0: [0, 2, 3], 1: [1, 3, 0]}
    # Had the create-time order been kept, p2 would be (4, 0, 1); Kafka gives (2, 3, 4).
    assert add_partitions(ids(0, 1, 4, 2, 3), created, 3) == {2: [2, 3, 4]}


def test_javadoc_rack_aware_example() -> None:
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated_broker_list(racks) == [0, 3, 1, 5, 4, 2]
    usable = [B(i, rack) for i, rack in racks.items()]
    assignment = assign_replicas_to_brokers(usable, 7, 3, 0)
    assert assignment == {
        0: [0, 3, 1],
        1: [3, 1, 5],
        2: [1, 5, 4],
        3: [5, 4, 2],
        4: [4, 2, 0],
        5: [2, 0, 3],
        6: [0, 4, 2],
    }


def test_javadoc_rack_alternated_list() -> None:
    racks = {b: f"rack{1 + b // 3}" for b in range(9)}
    assert rack_alternated_broker_list(racks) == [0, 3, 6, 1, 4, 7, 2, 5, 8]


def test_rack_aware_ignores_the_given_order() -> None:
    forward = [B(i, f"r{i % 3}") for i in range(9)]
    backward = list(reversed(forward))
    assert assign_replicas_to_brokers(forward, 20, 3, 2) == assign_replicas_to_brokers(backward, 20, 3, 2)


def test_rack_aware_even_when_racks_are_equal() -> None:
    usable = [B(i, f"r{i % 3}") for i in range(9)]
    assignment = assign_replicas_to_brokers(usable, 90, 3, random=JavaRandom(5))
    for replicas in assignment.values():
        assert len({b % 3 for b in replicas}) == 3
    assert set(replica_counts(list(assignment.values()), range(9))) == {30}


def test_rack_aware_more_replicas_than_racks_uses_every_rack() -> None:
    usable = [B(0, "a"), B(1, "a"), B(2, "a"), B(3, "b")]
    for replicas in assign_replicas_to_brokers(usable, 8, 3, random=JavaRandom(1)).values():
        assert 3 in replicas and len(set(replicas)) == 3


def test_random_start_and_shift_are_drawn_like_kafkas_static_random() -> None:
    random = JavaRandom(99)
    probe = JavaRandom(99)
    expected_start, expected_shift = probe.next_int(5), probe.next_int(5)
    fixed = assign_replicas_to_brokers(
        ids(0, 1, 2, 3, 4), 3, 2, random=ScriptedRandom([expected_start, expected_shift])
    )
    assert assign_replicas_to_brokers(ids(0, 1, 2, 3, 4), 3, 2, random=random) == fixed


def test_start_partition_id_continues_numbering() -> None:
    assert list(assign_replicas_to_brokers(ids(0, 1, 2), 2, 1, 0, 5)) == [5, 6]


# --- checks and messages ---------------------------------------------------------------------


def test_partitions_must_be_positive() -> None:
    with pytest.raises(InvalidPartitionsError) as error:
        assign_replicas_to_brokers(ids(0, 1), 0, 1, 0)
    assert str(error.value) == "Number of partitions must be larger than 0."


def test_replication_factor_must_be_positive() -> None:
    with pytest.raises(InvalidReplicationFactorError) as error:
        assign_replicas_to_brokers(ids(0, 1), 1, 0, 0)
    assert str(error.value) == "Replication factor must be larger than 0."


def test_replication_factor_at_most_brokers() -> None:
    with pytest.raises(InvalidReplicationFactorError) as error:
        assign_replicas_to_brokers(ids(0, 1), 1, 3, 0)
    assert str(error.value) == "Replication factor: 3 larger than available brokers: 2."


def test_partial_rack_information_is_rejected() -> None:
    with pytest.raises(PlacementError) as error:
        assign_replicas_to_brokers([B(0, "a"), B(1)], 1, 1, 0)
    assert type(error.value) is PlacementError
    assert str(error.value) == "Not all brokers have rack information for replica rack aware assignment."


def test_random_required_without_fixed_start() -> None:
    with pytest.raises(ValueError, match="random is required"):
        assign_replicas_to_brokers(ids(0, 1), 1, 1)


def test_duplicate_broker_ids_are_rejected() -> None:
    with pytest.raises(PlacementError, match="appears more than once"):
        assign_replicas_to_brokers(ids(0, 0), 1, 1, 0)


# --- add-partitions --------------------------------------------------------------------------


def test_add_partitions_takes_factor_and_start_from_partition_zero() -> None:
    existing = {0: [3, 1], 1: [4, 3], 2: [0, 4]}
    # Brokers sorted by id: [0, 1, 3, 4, 5]; partition 0's leader 3 is at index 2.
    assert add_partitions(ids(5, 4, 3, 1, 0), existing, 5) == assign_replicas_to_brokers(ids(0, 1, 3, 4, 5), 2, 2, 2, 3)


def test_add_partitions_leader_gone_uses_next_higher_id() -> None:
    existing = {0: [2, 0], 1: [0, 1]}
    # Broker 2 left; the first id >= 2 is 3, at index 2 of [0, 1, 3].
    assert add_partitions(ids(0, 1, 3), existing, 3) == assign_replicas_to_brokers(ids(0, 1, 3), 1, 2, 2, 2)
    # No id >= the leader: Kafka's max(0, indexWhere(...)) starts at 0.
    assert add_partitions(ids(0, 1), {0: [7, 0]}, 2) == assign_replicas_to_brokers(ids(0, 1), 1, 2, 0, 1)


def test_add_partitions_must_increase() -> None:
    with pytest.raises(InvalidPartitionsError) as error:
        add_partitions(ids(0, 1), {0: [0], 1: [1]}, 2, topic="orders")
    assert str(error.value) == (
        "The number of partitions for a topic can only be increased. "
        "Topic orders currently has 2 partitions, 2 would not be an increase."
    )


def test_add_partitions_needs_partition_zero() -> None:
    with pytest.raises(InvalidPartitionsError, match="partition id 0 is missing"):
        add_partitions(ids(0, 1), {1: [1]}, 3, topic="orders")


@pytest.mark.parametrize("case", GOLDEN["legacy"], ids=lambda c: f"seed{c['seed']}-{len(c['brokers'])}brokers")
def test_matches_admin_utils_on_the_jvm(case: dict[str, Any]) -> None:
    """AdminUtils with its static Random after setSeed(seed), run on OpenJDK (tests/placement/data)."""
    usable = [B(broker_id, rack) for broker_id, rack in case["brokers"]]
    assignment = assign_replicas_to_brokers(
        usable,
        case["partitions"],
        case["replication_factor"],
        case["fixed_start_index"],
        case["start_partition_id"],
        random=JavaRandom(case["seed"]),
    )
    assert {str(p): replicas for p, replicas in assignment.items()} == case["result"]
