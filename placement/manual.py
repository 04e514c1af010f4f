"""Manual replica assignments (``--replica-assignment 0:1:2,3:4:5``): parsing and validation.

Kafka skips the broker check when a topic is created with a manual assignment (seed 000: "we
don't check that replicaAssignment contains unknown brokers"); raftmeta checks it here, for
create and add-partitions alike. Every message names the partition and the rule, and quotes
Kafka's INVALID_REPLICA_ASSIGNMENT wording where Kafka has one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from placement.errors import InvalidReplicaAssignmentError

# A limit on everything: a manual assignment longer than this is refused, not processed.
MANUAL_ASSIGNMENT_PARTITIONS_MAX = 100_000


def parse_replica_assignment(text: str) -> list[list[int]]:
    """Parse kafka-topics' ``--replica-assignment``: partitions split by ',', brokers by ':'.

    ``"0:1:2,3:4:5"`` -> ``[[0, 1, 2], [3, 4, 5]]`` (partition i is the i-th group). Only the
    syntax is checked here; ``validate_replica_assignment`` checks the rules.
    """
    if not text.strip():
        raise InvalidReplicaAssignmentError("replica assignment: empty (expected e.g. 0:1:2,3:4:5)")
    partitions: list[list[int]] = []
    groups = text.split(",")
    if len(groups) > MANUAL_ASSIGNMENT_PARTITIONS_MAX:
        raise InvalidReplicaAssignmentError(
            f"replica assignment: {len(groups)} partitions exceed the limit of {MANUAL_ASSIGNMENT_PARTITIONS_MAX}"
        )
    for partition, group in enumerate(groups):
        if not group.strip():
            raise InvalidReplicaAssignmentError(
                f"partition {partition}: The manual partition assignment includes an empty replica list."
            )
        replicas: list[int] = []
        for raw in group.split(":"):
            token = raw.strip()
            if not token.isdigit() or not token.isascii():
                raise InvalidReplicaAssignmentError(
                    f"partition {partition}: {token!r} is not a broker id (a non-negative integer)"
                )
            replicas.append(int(token))
        partitions.append(replicas)
    return partitions


def validate_replica_assignment(
    assignment: Sequence[Sequence[int]] | Mapping[int, Sequence[int]],
    broker_ids: Iterable[int],
    *,
    replication_factor: int | None = None,
    expected_partitions: int | None = None,
    first_partition: int = 0,
) -> list[list[int]]:
    """Check a manual assignment; return it as a list of replica lists, leader first.

    Rules, checked partition by partition in order: not empty; every broker registered; no
    broker twice; the same replica count as ``replication_factor`` (for add-partitions: the
    topic's) or else as the first partition. A mapping must use partition indexes
    ``first_partition .. first_partition + n - 1``. ``expected_partitions`` (the partitions
    requested) bounds the count; the count never exceeds ``MANUAL_ASSIGNMENT_PARTITIONS_MAX``.
    Partition numbers in messages start at ``first_partition``.
    """
    if isinstance(assignment, Mapping):
        indexes = sorted(assignment)
        wanted = list(range(first_partition, first_partition + len(indexes)))
        if indexes != wanted:
            last = first_partition + len(indexes) - 1
            raise InvalidReplicaAssignmentError(
                f"replica assignment: partition indexes must be {first_partition}..{last} without gaps, got {indexes}"
            )
        partitions = [list(assignment[i]) for i in indexes]
    else:
        partitions = [list(replicas) for replicas in assignment]
    if not partitions:
        raise InvalidReplicaAssignmentError("replica assignment: no partitions given")
    if len(partitions) > MANUAL_ASSIGNMENT_PARTITIONS_MAX:
        raise InvalidReplicaAssignmentError(
            f"replica assignment: {len(partitions)} partitions exceed the limit of {MANUAL_ASSIGNMENT_PARTITIONS_MAX}"
        )
    if expected_partitions is not None and len(partitions) != expected_partitions:
        relation = "more" if len(partitions) > expected_partitions else "fewer"
        raise InvalidReplicaAssignmentError(
            f"replica assignment: {len(partitions)} partition(s) given, {relation} than the "
            f"{expected_partitions} requested"
        )
    registered = set(broker_ids)
    expected_replicas = replication_factor
    for offset, replicas in enumerate(partitions):
        partition = first_partition + offset
        if not replicas:
            raise InvalidReplicaAssignmentError(
                f"partition {partition}: The manual partition assignment includes an empty replica list."
            )
        seen: set[int] = set()
        for broker in replicas:
            if broker not in registered:
                raise InvalidReplicaAssignmentError(
                    f"partition {partition}: The manual partition assignment includes broker {broker}, "
                    "but no such broker is registered."
                )
            if broker in seen:
                raise InvalidReplicaAssignmentError(
                    f"partition {partition}: The manual partition assignment includes the broker {broker} "
                    "more than once."
                )
            seen.add(broker)
        if expected_replicas is None:
            expected_replicas = len(replicas)
        elif len(replicas) != expected_replicas:
            raise InvalidReplicaAssignmentError(
                f"partition {partition}: The manual partition assignment includes a partition with "
                f"{len(replicas)} replica(s), but this is not consistent with previous partitions, "
                f"which have {expected_replicas} replica(s)."
            )
    return partitions
