"""Manual replica assignments: parsing and every rule, each message naming partition and rule."""

from __future__ import annotations

import pytest

from placement import (
    MANUAL_ASSIGNMENT_PARTITIONS_MAX,
    InvalidReplicaAssignmentError,
    parse_replica_assignment,
    validate_replica_assignment,
)


def test_parse_kafka_topics_syntax() -> None:
    assert parse_replica_assignment("0:1:2,3:4:5") == [[0, 1, 2], [3, 4, 5]]
    assert parse_replica_assignment(" 1 : 2 , 2:1 ") == [[1, 2], [2, 1]]
    assert parse_replica_assignment("7") == [[7]]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "replica assignment: empty"),
        ("0:1,,2:3", "partition 1: The manual partition assignment includes an empty replica list."),
        ("0:1,2:x", "partition 1: 'x' is not a broker id"),
        ("0:-1", "partition 0: '-1' is not a broker id"),
        ("0::1", "partition 0: '' is not a broker id"),
    ],
)
def test_parse_errors(text: str, message: str) -> None:
    with pytest.raises(InvalidReplicaAssignmentError) as error:
        parse_replica_assignment(text)
    assert str(error.value).startswith(message)


def test_parse_limits_the_partition_count() -> None:
    with pytest.raises(InvalidReplicaAssignmentError, match="exceed the limit"):
        parse_replica_assignment(",".join(["0"] * (MANUAL_ASSIGNMENT_PARTITIONS_MAX + 1)))


def test_valid_assignment_is_returned_as_lists() -> None:
    assert validate_replica_assignment([(0, 1), (1, 2)], [0, 1, 2]) == [[0, 1], [1, 2]]
    assert validate_replica_assignment({1: [2, 0], 0: [0, 1]}, [0, 1, 2]) == [[0, 1], [2, 0]]


def test_unknown_broker() -> None:
    with pytest.raises(InvalidReplicaAssignmentError) as error:
        validate_replica_assignment([[0, 1], [1, 7]], [0, 1, 2])
    assert str(error.value) == (
        "partition 1: The manual partition assignment includes broker 7, but no such broker is registered."
    )


def test_duplicate_broker_in_a_partition() -> None:
    with pytest.raises(InvalidReplicaAssignmentError) as error:
        validate_replica_assignment([[0, 1], [2, 2]], [0, 1, 2])
    assert str(error.value) == "partition 1: The manual partition assignment includes the broker 2 more than once."


def test_differing_replica_counts() -> None:
    with pytest.raises(InvalidReplicaAssignmentError) as error:
        validate_replica_assignment([[0, 1], [1, 2], [2]], [0, 1, 2])
    assert str(error.value) == (
        "partition 2: The manual partition assignment includes a partition with 1 replica(s), but this is not "
        "consistent with previous partitions, which have 2 replica(s)."
    )


def test_replica_count_must_match_the_topic_when_adding() -> None:
    with pytest.raises(InvalidReplicaAssignmentError, match=r"partition 3: .* with 2 replica.*which have 3"):
        validate_replica_assignment([[0, 1]], [0, 1, 2], replication_factor=3, first_partition=3)


def test_empty_partition() -> None:
    with pytest.raises(InvalidReplicaAssignmentError, match=r"partition 1: .*empty replica list"):
        validate_replica_assignment([[0], []], [0, 1])


def test_too_many_partitions() -> None:
    with pytest.raises(InvalidReplicaAssignmentError) as error:
        validate_replica_assignment([[0], [1], [0]], [0, 1], expected_partitions=2)
    assert str(error.value) == "replica assignment: 3 partition(s) given, more than the 2 requested"


def test_too_few_partitions() -> None:
    with pytest.raises(InvalidReplicaAssignmentError, match="1 partition\\(s\\) given, fewer than the 2 requested"):
        validate_replica_assignment([[0]], [0, 1], expected_partitions=2)


def test_no_partitions() -> None:
    with pytest.raises(InvalidReplicaAssignmentError, match="no partitions given"):
        validate_replica_assignment([], [0, 1])


def test_mapping_indexes_must_be_contiguous() -> None:
    with pytest.raises(
        InvalidReplicaAssignmentError, match=r"partition indexes must be 0\.\.1 without gaps, got \[0, 2\]"
    ):
        validate_replica_assignment({0: [0], 2: [1]}, [0, 1])


def test_limit_applies_to_validation_too() -> None:
    with pytest.raises(InvalidReplicaAssignmentError, match="exceed the limit"):
        validate_replica_assignment([[0]] * (MANUAL_ASSIGNMENT_PARTITIONS_MAX + 1), [0])
