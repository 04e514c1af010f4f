"""The ZooKeeper-era placer, Kafka's ``AdminUtils.assignReplicasToBrokers``, and add-partitions.

Rack-unaware (seed 000): the first replica of each partition goes round-robin through the
broker list from a random start index; the other replicas follow at a shift that grows by one
each time the round-robin wraps, so that the followers of one broker's partitions spread over
the other brokers. The broker list is used in the order given (Kafka's does the same; see
``add_partitions`` for why that order matters).

Rack-aware: the same walk over a *rack-alternated* broker list (racks sorted by name, brokers
by id, taking one broker from each rack in turn), skipping a candidate whose rack already holds
a replica while some rack holds none, or whose broker already holds one while some broker
holds none. If every broker has a rack the result does not depend on the order given.

``random`` is Kafka's static ``AdminUtils.RAND``: with ``JavaRandom(s)`` the start index and
then the shift are drawn as that ``Random`` would draw them after ``setSeed(s)``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from placement.brokers import UsableBroker, check_distinct_ids
from placement.errors import InvalidPartitionsError, InvalidReplicationFactorError, PlacementError
from placement.javacompat import java_string_key
from placement.rng import RandomSource


def assign_replicas_to_brokers(
    brokers: Sequence[UsableBroker],
    num_partitions: int,
    replication_factor: int,
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
    random: RandomSource | None = None,
) -> dict[int, list[int]]:
    """Kafka's ``AdminUtils.assignReplicasToBrokers``: partition id -> replicas (leader first).

    ``fixed_start_index >= 0`` fixes both the start index and the initial shift (as Kafka does);
    otherwise both are drawn from ``random``, which is then required. The ``fenced`` flag of
    the brokers is not looked at: like ZooKeeper-mode Kafka, pass only the live brokers.
    """
    if num_partitions <= 0:
        raise InvalidPartitionsError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}."
        )
    check_distinct_ids(brokers)
    if fixed_start_index < 0 and random is None:
        raise ValueError("random is required when fixed_start_index is negative (no hidden randomness)")
    if all(b.rack is None for b in brokers):
        return _assign_rack_unaware(
            num_partitions, replication_factor, [b.id for b in brokers], fixed_start_index, start_partition_id, random
        )
    if any(b.rack is None for b in brokers):
        raise PlacementError("Not all brokers have rack information for replica rack aware assignment.")
    rack_of = {b.id: b.rack for b in brokers if b.rack is not None}
    return _assign_rack_aware(
        num_partitions, replication_factor, rack_of, fixed_start_index, start_partition_id, random
    )


def _start_and_shift(fixed_start_index: int, count: int, random: RandomSource | None) -> tuple[int, int]:
    """The start index, then the initial shift, in the order Kafka draws them."""
    if fixed_start_index >= 0:
        return fixed_start_index, fixed_start_index
    assert random is not None  # checked by the caller
    start_index = random.next_int(count)
    return start_index, random.next_int(count)


def replica_index(first_replica_index: int, second_replica_shift: int, replica: int, num_brokers: int) -> int:
    """Kafka's ``replicaIndex``: the shift lies in [1, n-1], so a follower never lands on the leader."""
    shift = 1 + (second_replica_shift + replica) % (num_brokers - 1)
    return (first_replica_index + shift) % num_brokers


def _assign_rack_unaware(
    num_partitions: int,
    replication_factor: int,
    broker_ids: list[int],
    fixed_start_index: int,
    start_partition_id: int,
    random: RandomSource | None,
) -> dict[int, list[int]]:
    count = len(broker_ids)
    start_index, next_replica_shift = _start_and_shift(fixed_start_index, count, random)
    current_partition_id = max(0, start_partition_id)
    assignment: dict[int, list[int]] = {}
    for _ in range(num_partitions):
        if current_partition_id > 0 and current_partition_id % count == 0:
            next_replica_shift += 1
        first_replica_index = (current_partition_id + start_index) % count
        replicas = [broker_ids[first_replica_index]]
        for j in range(replication_factor - 1):
            replicas.append(broker_ids[replica_index(first_replica_index, next_replica_shift, j, count)])
        assignment[current_partition_id] = replicas
        current_partition_id += 1
    return assignment


def rack_alternated_broker_list(rack_of: Mapping[int, str]) -> list[int]:
    """Kafka's ``getRackAlternatedBrokerList``: racks sorted, brokers sorted, one per rack in turn.

    {0: rack1, 1: rack3, 2: rack3, 3: rack2, 4: rack2, 5: rack1} gives [0, 3, 1, 5, 4, 2].
    """
    by_rack: dict[str, list[int]] = {}
    for broker, rack in rack_of.items():
        by_rack.setdefault(rack, []).append(broker)
    racks = sorted(by_rack, key=java_string_key)
    queues = [sorted(by_rack[rack]) for rack in racks]
    result: list[int] = []
    depth = max((len(q) for q in queues), default=0)
    for position in range(depth):
        result.extend(queue[position] for queue in queues if position < len(queue))
    return result


def _assign_rack_aware(
    num_partitions: int,
    replication_factor: int,
    rack_of: dict[int, str],
    fixed_start_index: int,
    start_partition_id: int,
    random: RandomSource | None,
) -> dict[int, list[int]]:
    num_racks = len(set(rack_of.values()))
    arranged = rack_alternated_broker_list(rack_of)
    num_brokers = len(arranged)
    start_index, next_replica_shift = _start_and_shift(fixed_start_index, num_brokers, random)
    current_partition_id = max(0, start_partition_id)
    assignment: dict[int, list[int]] = {}
    for _ in range(num_partitions):
        if current_partition_id > 0 and current_partition_id % num_brokers == 0:
            next_replica_shift += 1
        first_replica_index = (current_partition_id + start_index) % num_brokers
        leader = arranged[first_replica_index]
        replicas = [leader]
        racks_with_replicas = {rack_of[leader]}
        brokers_with_replicas = {leader}
        k = 0
        for _replica in range(replication_factor - 1):
            while True:
                broker = arranged[replica_index(first_replica_index, next_replica_shift * num_racks, k, num_brokers)]
                rack = rack_of[broker]
                k += 1
                # Skip a broker whose rack already has a replica while some rack has none, or
                # that already has a replica while some broker has none.
                if (rack not in racks_with_replicas or len(racks_with_replicas) == num_racks) and (
                    broker not in brokers_with_replicas or len(brokers_with_replicas) == num_brokers
                ):
                    replicas.append(broker)
                    racks_with_replicas.add(rack)
                    brokers_with_replicas.add(broker)
                    break
        assignment[current_partition_id] = replicas
        current_partition_id += 1
    return assignment


def add_partitions(
    brokers: Sequence[UsableBroker],
    existing: Mapping[int, Sequence[int]],
    new_total_partitions: int,
    *,
    topic: str = "",
) -> dict[int, list[int]]:
    """Kafka's add-partitions rule (``AdminZkClient.addPartitions``): the new partitions only.

    The replication factor is partition 0's, the start index is the position of the first
    broker whose id is >= partition 0's leader, the same index fixes the initial shift, and
    numbering continues at ``len(existing)``. Brokers are sorted by id here, as Kafka sorts them
    for add-partitions but not for create (seed 000 shows the create-time order leaking into a
    different stripe). raftmeta's controller always passes brokers sorted by id to every
    placer, so create and add-partitions walk the same list.
    """
    if 0 not in existing:
        raise InvalidPartitionsError(
            f"Unexpected existing replica assignment for topic '{topic}', partition id 0 is missing. "
            f"Assignment: {dict(existing)}"
        )
    partitions_to_add = new_total_partitions - len(existing)
    if partitions_to_add <= 0:
        raise InvalidPartitionsError(
            "The number of partitions for a topic can only be increased. "
            f"Topic {topic} currently has {len(existing)} partitions, "
            f"{new_total_partitions} would not be an increase."
        )
    partition0 = list(existing[0])
    if not partition0:
        raise InvalidPartitionsError(f"existing: partition 0 of topic '{topic}' has no replicas")
    ordered = sorted(brokers, key=lambda b: b.id)
    start_index = next((i for i, b in enumerate(ordered) if b.id >= partition0[0]), 0)
    return assign_replicas_to_brokers(
        ordered, partitions_to_add, len(partition0), fixed_start_index=start_index, start_partition_id=len(existing)
    )
