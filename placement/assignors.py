"""Kafka's consumer partition assignors (seed 001): range, roundrobin and sticky.

Input and output are plain data: ``partitions_per_topic`` (topic -> partition count),
``subscriptions`` (member -> topics) and, for sticky, ``previous`` (member -> partitions it
owned). The result maps every member to its partitions sorted by topic then partition.

* ``range`` (RangeAssignor): per topic, the subscribed members sorted by id each take a
  contiguous range; the first ``partitions % members`` members take one extra.
* ``roundrobin`` (RoundRobinAssignor): all subscribed partitions sorted by topic and partition
  are dealt to the members sorted by id in a circle, skipping members not subscribed to the
  partition's topic.
* ``sticky`` (StickyAssignor): balanced to within one partition where subscriptions allow,
  moving as few partitions from ``previous`` as possible. When all members subscribe to the
  same topics this is Kafka's ``constrainedAssign`` step by step, including its iteration of
  members in Java ``HashMap`` order; otherwise Kafka's ``generalAssign`` (keep valid owned
  partitions, hand out the rest to the least-loaded eligible member, then move partitions from
  members with at least two more until balanced), without Kafka's cross-topic movement
  bookkeeping (``PartitionMovements``), so on mixed subscriptions with a history Kafka may pick
  a different but equally balanced partition to move.

Strings compare as Java's ``String.compareTo`` (UTF-16 code units) wherever Kafka sorts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from placement.javacompat import hashmap_order, java_string_hash, java_string_key

TopicPartition = tuple[str, int]
Assignment = dict[str, list[TopicPartition]]

STRATEGIES: Final = ("range", "roundrobin", "sticky")


def _partition_key(tp: TopicPartition) -> tuple[bytes, int]:
    return (java_string_key(tp[0]), tp[1])


def _validate(partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Sequence[str]]) -> None:
    for topic, count in partitions_per_topic.items():
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(f"partitions_per_topic: topic {topic!r} must map to a partition count >= 0, got {count!r}")
    for member, topics in subscriptions.items():
        if not member:
            raise ValueError("subscriptions: member ids must not be empty")
        if isinstance(topics, str):
            raise ValueError(f"subscriptions: member {member!r} must map to a list of topics, not a string")


def assign_consumers(
    strategy: str,
    partitions_per_topic: Mapping[str, int],
    subscriptions: Mapping[str, Sequence[str]],
    previous: Mapping[str, Sequence[TopicPartition]] | None = None,
) -> Assignment:
    """Assign partitions to group members with Kafka's ``strategy`` (range, roundrobin, sticky).

    ``previous`` is used by ``sticky`` only. Topics without a partition count are ignored, as
    Kafka ignores subscribed topics missing from the metadata.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}, got {strategy!r}")
    _validate(partitions_per_topic, subscriptions)
    # Kafka's AbstractPartitionAssignor hands the assignor the metadata of subscribed topics only.
    subscribed = {topic for topics in subscriptions.values() for topic in topics}
    partitions_per_topic = {t: n for t, n in partitions_per_topic.items() if t in subscribed}
    if strategy == "range":
        result = range_assign(partitions_per_topic, subscriptions)
    elif strategy == "roundrobin":
        result = round_robin_assign(partitions_per_topic, subscriptions)
    else:
        result = sticky_assign(partitions_per_topic, subscriptions, previous or {})
    return {member: sorted(result[member], key=_partition_key) for member in subscriptions}


def range_assign(partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Sequence[str]]) -> Assignment:
    """RangeAssignor: contiguous ranges per topic, the first members taking the remainder."""
    assignment: Assignment = {member: [] for member in subscriptions}
    members_of: dict[str, list[str]] = {}
    for member, topics in subscriptions.items():
        for topic in dict.fromkeys(topics):
            members_of.setdefault(topic, []).append(member)
    for topic, members in members_of.items():
        count = partitions_per_topic.get(topic)
        if count is None:
            continue
        members.sort(key=java_string_key)
        per_member, with_extra = divmod(count, len(members))
        for i, member in enumerate(members):
            start = per_member * i + min(i, with_extra)
            length = per_member + (1 if i < with_extra else 0)
            assignment[member].extend((topic, p) for p in range(start, start + length))
    return assignment


def round_robin_assign(
    partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Sequence[str]]
) -> Assignment:
    """RoundRobinAssignor: every subscribed partition, in order, to the next subscribed member."""
    assignment: Assignment = {member: [] for member in subscriptions}
    members = sorted(subscriptions, key=java_string_key)
    subscribed = {member: set(subscriptions[member]) for member in members}
    topics = sorted({t for ts in subscriptions.values() for t in ts if t in partitions_per_topic}, key=java_string_key)
    position = 0
    for topic in topics:
        for partition in range(partitions_per_topic[topic]):
            while topic not in subscribed[members[position]]:
                position = (position + 1) % len(members)
            assignment[members[position]].append((topic, partition))
            position = (position + 1) % len(members)
    return assignment


def _java_hash_order(members: Sequence[str]) -> list[str]:
    """The order a Java ``HashMap<String, ...>`` with these keys iterates in."""
    return hashmap_order(list(members), [java_string_hash(m) for m in members])


def _owned_partitions(
    partitions_per_topic: Mapping[str, int],
    members: Sequence[str],
    previous: Mapping[str, Sequence[TopicPartition]],
) -> dict[str, list[TopicPartition]]:
    """Kafka's ``allSubscriptionsEqual`` bookkeeping: each member's still-valid owned partitions.

    Members are visited in ``members`` order (HashMap order); a partition claimed by two
    members is invalidated for all its claimants, as Kafka does for claims in one generation.
    Partitions of topics no longer assigned, or beyond a topic's partition count, are dropped.
    """
    owned: dict[str, list[TopicPartition]] = {member: [] for member in members}
    owner: dict[TopicPartition, str] = {}
    contested: set[TopicPartition] = set()
    for member in members:
        for topic, partition in previous.get(member, ()):
            tp = (topic, partition)
            if not 0 <= partition < partitions_per_topic.get(topic, 0):
                continue
            other = owner.get(tp)
            owner[tp] = member
            if other is None:
                owned[member].append(tp)
            else:
                if tp in owned[other]:
                    owned[other].remove(tp)
                contested.add(tp)
    for member in members:
        owned[member] = [tp for tp in owned[member] if tp not in contested]
    return owned


def sticky_assign(
    partitions_per_topic: Mapping[str, int],
    subscriptions: Mapping[str, Sequence[str]],
    previous: Mapping[str, Sequence[TopicPartition]],
) -> Assignment:
    """StickyAssignor: balanced, and as close to ``previous`` as balance allows."""
    if not subscriptions:
        return {}
    members = _java_hash_order(list(subscriptions))
    owned = _owned_partitions(partitions_per_topic, members, previous)
    reference: set[str] = set()
    equal = True
    for member in members:  # Kafka's allSubscriptionsEqual, quirk for a first empty set included
        topics = set(subscriptions[member])
        if not reference:
            reference = topics
        elif topics != reference:
            equal = False
            break
    if equal:
        return _constrained_assign(partitions_per_topic, members, owned)
    return _general_assign(partitions_per_topic, subscriptions, owned)


def _constrained_assign(
    partitions_per_topic: Mapping[str, int], members: list[str], owned: dict[str, list[TopicPartition]]
) -> Assignment:
    """Kafka's ``constrainedAssign`` (all members subscribe to the same topics).

    Members keep their owned partitions up to the minimum quota, or up to the maximum quota
    while fewer members than ``total % members`` hold the maximum (members visited in HashMap
    order); the rest is dealt round-robin to the members below the minimum (sorted by id), then
    one each to members at the minimum (sorted by id) until the expected number hold the maximum.
    """
    total = sum(partitions_per_topic.values())
    min_quota, expected_over_min = divmod(total, len(members))
    max_quota = min_quota + (1 if expected_over_min else 0)
    over_min = 0
    assignment: Assignment = {member: [] for member in members}
    under_min: list[str] = []
    exactly_min: list[str] = []
    assigned: set[TopicPartition] = set()
    for member in members:
        mine = owned[member]
        if len(mine) < min_quota:
            keep = mine
            under_min.append(member)
        elif len(mine) >= max_quota and over_min < expected_over_min:
            over_min += 1
            if over_min == expected_over_min:
                exactly_min.clear()
            keep = mine[:max_quota]
        else:
            keep = mine[:min_quota]
            if over_min < expected_over_min:
                exactly_min.append(member)
        assignment[member].extend(keep)
        assigned.update(keep)
    topics = sorted(partitions_per_topic, key=java_string_key)
    unassigned = [(t, p) for t in topics for p in range(partitions_per_topic[t]) if (t, p) not in assigned]
    under_min.sort(key=java_string_key)
    exactly_min.sort(key=java_string_key)
    cursor = 0  # Kafka's iterator over under_min: restarts at the front when it runs out
    for tp in unassigned:
        if cursor < len(under_min):
            member = under_min[cursor]
            cursor += 1
        elif not under_min:
            if not exactly_min:
                raise AssertionError("sticky: no more unfilled members to assign partitions to")
            member = exactly_min.pop(0)
        else:
            member = under_min[0]
            cursor = 1
        assignment[member].append(tp)
        count = len(assignment[member])
        if count == min_quota:
            under_min.remove(member)  # the iterator's remove(): the member just returned
            cursor -= 1
            exactly_min.append(member)
        elif count == max_quota:
            over_min += 1
    for member in under_min:
        if len(assignment[member]) != min_quota:
            raise AssertionError(f"sticky: member {member!r} stays below the minimum quota")
    return assignment


def _general_assign(
    partitions_per_topic: Mapping[str, int],
    subscriptions: Mapping[str, Sequence[str]],
    owned: dict[str, list[TopicPartition]],
) -> Assignment:
    """Kafka's ``generalAssign`` for members with different subscriptions."""
    potential_members: dict[TopicPartition, list[str]] = {
        (topic, p): [] for topic, count in partitions_per_topic.items() for p in range(count)
    }
    potential_partitions: dict[str, set[TopicPartition]] = {}
    for member, topics in subscriptions.items():
        mine: set[TopicPartition] = set()
        for topic in dict.fromkeys(topics):
            for p in range(partitions_per_topic.get(topic, 0)):
                mine.add((topic, p))
                potential_members[(topic, p)].append(member)
        potential_partitions[member] = mine
    current: Assignment = {}
    owner: dict[TopicPartition, str] = {}
    revocation_required = False
    for member, partitions in owned.items():
        keep = []
        for tp in partitions:
            if tp in potential_partitions[member]:
                keep.append(tp)
                owner[tp] = member
            else:
                revocation_required = True  # no longer subscribed to the topic
        current[member] = keep
    sorted_partitions = sorted(potential_members, key=lambda tp: (len(potential_members[tp]), *_partition_key(tp)))
    unassigned = [tp for tp in sorted_partitions if tp not in owner]

    def load_order() -> list[str]:
        return sorted(current, key=lambda m: (len(current[m]), java_string_key(m)))

    initializing = all(not partitions for partitions in current.values())
    for tp in unassigned:
        if not potential_members[tp]:
            continue
        for member in load_order():
            if tp in potential_partitions[member]:
                current[member].append(tp)
                owner[tp] = member
                break

    # Partitions with a single possible member, and members that cannot change, stay as they are.
    movable = {tp for tp, candidates in potential_members.items() if len(candidates) >= 2}
    sorted_movable = [tp for tp in sorted_partitions if tp in movable]
    unassigned_movable = [tp for tp in unassigned if tp in movable]
    fixed: Assignment = {}
    for member in list(current):
        can_grow = len(current[member]) < len(potential_partitions[member])
        if not can_grow and not any(tp in movable for tp in current[member]):
            fixed[member] = current.pop(member)

    before = {m: list(ps) for m, ps in current.items()}
    before_owner = dict(owner)

    def balanced() -> bool:
        if not current:
            return True
        sizes = [len(ps) for ps in current.values()]
        if min(sizes) >= max(sizes) - 1:
            return True
        for member in load_order():
            count = len(current[member])
            if count == len(potential_partitions[member]):
                continue
            for tp in potential_partitions[member]:
                other = owner.get(tp)
                if other is not None and other != member and other in current and count < len(current[other]):
                    return False
        return True

    def reassign(candidates: list[TopicPartition]) -> bool:
        performed = False
        modified = True
        while modified:
            modified = False
            for tp in candidates:
                if balanced():
                    break
                holder = owner[tp]
                if any(len(current[holder]) > len(current[o]) + 1 for o in potential_members[tp] if o in current):
                    target = next(m for m in load_order() if tp in potential_partitions[m])
                    current[holder].remove(tp)
                    current[target].append(tp)
                    owner[tp] = target
                    performed = modified = True
        return performed

    if not revocation_required:
        reassign(unassigned_movable)
    performed = reassign(sorted_movable)
    if not initializing and performed and _balance_score(current) >= _balance_score(before):
        current, owner = before, before_owner
    current.update(fixed)
    return current


def _balance_score(assignment: Assignment) -> int:
    """Kafka's getBalanceScore: the sum of size differences over all pairs of members."""
    sizes = [len(ps) for ps in assignment.values()]
    return sum(abs(a - b) for i, a in enumerate(sizes) for b in sizes[i + 1 :])
