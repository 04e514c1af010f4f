"""Kafka's consumer partition assignors (seed 001): range, roundrobin and sticky.

Input and output are plain data: ``partitions_per_topic`` (topic -> partition count),
``subscriptions`` (member -> topics) and, for sticky, ``previous`` (member -> partitions it
owned). The result maps every member to its partitions sorted by topic then partition.

* ``range`` (RangeAssignor): per topic, the subscribed members sorted by id each take a
  contiguous range; the first ``partitions % members`` members take one extra.
* ``roundrobin`` (RoundRobinAssignor): all subscribed partitions sorted by topic and partition
  are dealt to the members sorted by id in a circle, skipping members not subscribed to the
  partition's topic.
* ``sticky`` (StickyAssignor): Kafka's ``AbstractStickyAssignor`` (trunk) without racks, step by
  step: balanced to within one partition where subscriptions allow, moving as few partitions
  from ``previous`` as possible. Equal subscriptions take Kafka's ``ConstrainedAssignmentBuilder``
  (owned partitions kept sorted by partition number, then topic, so each member keeps some of
  every topic), others its ``GeneralAssignmentBuilder`` (including ``PartitionMovements``, which
  may move a partition back instead of the one picked). Members are visited in Java ``HashMap``
  order where Kafka iterates a ``HashMap``, partitions in ``HashSet`` order where Kafka takes
  the first of a ``HashSet``; ``previous`` is one generation (claims of a partition by two
  members cancel out). Where Kafka's reassignment loop never ends, ``StickyAssignorCycleError``
  (a ``ValueError``) says so. Checked against Kafka run on the JVM (``tests/placement``).

Strings compare as Java's ``String.compareTo`` (UTF-16 code units) wherever Kafka sorts.
"""

from __future__ import annotations

import bisect
import hashlib
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
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
    Kafka ignores subscribed topics missing from the metadata. ``ValueError`` for bad input, and
    ``StickyAssignorCycleError`` (a ``ValueError``) where Kafka's sticky assignor never returns.
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


# --- sticky: Kafka's AbstractStickyAssignor (StickyAssignor), without racks -------------------

_INT_MASK: Final = 0xFFFFFFFF
_TREEIFY_THRESHOLD: Final = 8  # a bucket's 9th node treeifies it (or doubles a table under 64)
_MIN_TREEIFY_CAPACITY: Final = 64


def _topic_partition_hash(tp: TopicPartition) -> int:
    """``TopicPartition.hashCode()``: ``31 * (31 + partition) + topic.hashCode()``, as a Java int."""
    return (31 * (31 + tp[1]) + java_string_hash(tp[0])) & _INT_MASK


class _JavaHashSet:
    """A ``java.util.HashSet<TopicPartition>``, for the element its iterator returns first.

    Iteration walks the table's buckets in index order (``(h ^ h >>> 16) & (capacity - 1)``) and
    each bucket in insertion order; the table starts at 16, doubles when the size passes 3/4 of
    it, doubles too when a bucket of a table under 64 gets its 9th entry (``treeifyBin``), and
    never shrinks. Not modelled: a bucket of a table of 64 or more turned into a red-black tree
    (9 partitions of one topic colliding in one bucket of one movement set).
    """

    __slots__ = ("_capacity", "_entries", "_stamp")

    def __init__(self) -> None:
        self._capacity = 16
        self._entries: dict[TopicPartition, tuple[int, int]] = {}  # element -> (spread hash, insertion stamp)
        self._stamp = 0

    def add(self, tp: TopicPartition) -> None:
        if tp in self._entries:
            return
        h = _topic_partition_hash(tp)
        h ^= h >> 16
        mask = self._capacity - 1
        in_bucket = sum(1 for other, _ in self._entries.values() if other & mask == h & mask)
        if in_bucket >= _TREEIFY_THRESHOLD and self._capacity < _MIN_TREEIFY_CAPACITY:
            self._capacity *= 2
        self._stamp += 1
        self._entries[tp] = (h, self._stamp)
        if len(self._entries) > self._capacity * 3 // 4:
            self._capacity *= 2

    def remove(self, tp: TopicPartition) -> None:
        self._entries.pop(tp, None)

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def capacity(self) -> int:
        return self._capacity

    def _iteration_key(self, tp: TopicPartition) -> tuple[int, int]:
        spread, stamp = self._entries[tp]
        return (spread & (self._capacity - 1), stamp)

    def first(self) -> TopicPartition:
        return min(self._entries, key=self._iteration_key)

    def order(self) -> list[TopicPartition]:
        """The iteration order."""
        return sorted(self._entries, key=self._iteration_key)


Pair = tuple[str, str]  # (source member, destination member)


class _PartitionMovements:
    """Kafka's ``PartitionMovements``: where each moved partition came from, per topic and pair.

    When a partition must leave an overloaded member for a less loaded one, and a partition of
    the same topic already moved the other way between them in this rebalance, Kafka moves that
    one back instead (the first in its ``HashSet``), so no topic's partitions swap between two
    members.
    """

    def __init__(self) -> None:
        self.by_topic: dict[str, dict[Pair, _JavaHashSet]] = {}
        self.movements: dict[TopicPartition, Pair] = {}

    def _remove_record(self, tp: TopicPartition) -> Pair:
        pair = self.movements.pop(tp)
        of_topic = self.by_topic[tp[0]]
        of_topic[pair].remove(tp)
        if not len(of_topic[pair]):
            del of_topic[pair]
        if not of_topic:
            del self.by_topic[tp[0]]
        return pair

    def _add_record(self, tp: TopicPartition, pair: Pair) -> None:
        self.movements[tp] = pair
        self.by_topic.setdefault(tp[0], {}).setdefault(pair, _JavaHashSet()).add(tp)

    def move(self, tp: TopicPartition, old: str, new: str) -> None:
        if tp in self.movements:
            source, _ = self._remove_record(tp)
            if source != new:  # not moving back to where it started
                self._add_record(tp, (source, new))
        else:
            self._add_record(tp, (old, new))

    def partition_to_move(self, tp: TopicPartition, old: str, new: str) -> TopicPartition:
        """Kafka's ``getTheActualPartitionToBeMoved``."""
        of_topic = self.by_topic.get(tp[0])
        if of_topic is None:
            return tp
        if tp in self.movements:
            old = self.movements[tp][0]
        reverse = of_topic.get((new, old))
        return tp if reverse is None else reverse.first()


class _SortedMembers:
    """Kafka's ``TreeSet`` of members ordered by assignment size, then member id (``compareTo``).

    As in Kafka, a member is removed before its assignment changes and added back after.
    """

    def __init__(self, assignment: Mapping[str, list[TopicPartition]], keys: Mapping[str, bytes]) -> None:
        self._assignment = assignment
        self._keys = keys
        self._items: list[tuple[int, bytes, str]] = []
        self._entry: dict[str, tuple[int, bytes, str]] = {}

    def add(self, member: str) -> None:
        if member in self._entry:
            return
        item = (len(self._assignment[member]), self._keys[member], member)
        bisect.insort(self._items, item)
        self._entry[member] = item

    def remove(self, member: str) -> None:
        item = self._entry.pop(member, None)
        if item is not None:
            del self._items[bisect.bisect_left(self._items, item)]

    def __iter__(self) -> Iterator[str]:
        # Callers stop iterating as soon as they change the set, as Kafka's loops do.
        for _, _, member in self._items:
            yield member

    def first(self) -> str:
        return self._items[0][2]

    def last(self) -> str:
        return self._items[-1][2]


def _owned_partitions(
    partitions_per_topic: Mapping[str, int],
    subscriptions: Mapping[str, Sequence[str]],
    members: Sequence[str],
    previous: Mapping[str, Sequence[TopicPartition]],
) -> tuple[bool, dict[str, list[TopicPartition]], set[TopicPartition]]:
    """Kafka's ``allSubscriptionsEqual``: whether all members subscribe to the same topics, each
    member's owned partitions of topics in the metadata, and the partitions claimed twice.

    Members are visited in ``members`` order (HashMap order). The first member with a non-empty
    subscription sets the reference (members before it are not compared: Kafka's quirk). A
    partition claimed by a second member is dropped from the first and given to neither, as
    Kafka does for claims in one generation. Kafka keeps owned partitions beyond a topic's
    partition count; here they are dropped (they cannot be assigned).
    """
    equal = True
    reference: set[str] = set()
    owned: dict[str, list[TopicPartition]] = {}
    owner: dict[TopicPartition, str] = {}
    claimed_twice: set[TopicPartition] = set()
    for member in members:
        topics = subscriptions[member]
        if not reference:
            reference = set(topics)
        elif equal and not (len(topics) == len(reference) and all(t in reference for t in topics)):
            equal = False
        mine: list[TopicPartition] = []
        owned[member] = mine
        for topic, partition in previous.get(member, ()):
            tp = (topic, partition)
            if not 0 <= partition < partitions_per_topic.get(topic, 0):
                continue
            other = owner.get(tp)
            if other is None:
                mine.append(tp)
            else:
                claimed_twice.add(tp)
                if tp in owned[other]:
                    owned[other].remove(tp)
            owner[tp] = member
    return equal, owned, claimed_twice


def sticky_assign(
    partitions_per_topic: Mapping[str, int],
    subscriptions: Mapping[str, Sequence[str]],
    previous: Mapping[str, Sequence[TopicPartition]],
) -> Assignment:
    """StickyAssignor: balanced, and as close to ``previous`` as balance allows.

    Raises ``StickyAssignorCycleError`` on the inputs where Kafka's assignor never returns.
    """
    if not subscriptions:
        return {}
    # A Kafka consumer subscribes to a set of topics: a topic listed twice counts once.
    subscriptions = {member: list(dict.fromkeys(topics)) for member, topics in subscriptions.items()}
    members = _java_hash_order(list(subscriptions))
    equal, owned, claimed_twice = _owned_partitions(partitions_per_topic, subscriptions, members, previous)
    if equal:
        return _constrained_assign(partitions_per_topic, members, owned, claimed_twice)
    return _general_assign(partitions_per_topic, subscriptions, members, owned)


def _constrained_assign(
    partitions_per_topic: Mapping[str, int],
    members: list[str],
    owned: dict[str, list[TopicPartition]],
    claimed_twice: set[TopicPartition],
) -> Assignment:
    """Kafka's ``ConstrainedAssignmentBuilder`` (all members subscribe to the same topics).

    Members, visited in HashMap order, keep their owned partitions sorted by partition number
    then topic (so a member keeps some of every topic, not all of one) up to the minimum quota,
    or up to the maximum while fewer members than ``total % members`` hold the maximum; the rest,
    sorted by topic and partition, is dealt round-robin to the members below the minimum (sorted
    by id), then one each to members at the minimum (sorted by id, then in the order they
    reached it) until the expected number hold the maximum.
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
        mine = sorted(
            (tp for tp in owned[member] if tp not in claimed_twice), key=lambda tp: (tp[1], java_string_key(tp[0]))
        )
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
    exactly_min_queue = deque(exactly_min)
    cursor = 0  # Kafka's iterator over under_min: restarts at the front when it runs out
    for tp in unassigned:
        if cursor < len(under_min):
            member = under_min[cursor]
            cursor += 1
        elif not under_min:
            if not exactly_min_queue:
                raise AssertionError("sticky: no more unfilled members to assign partitions to")
            member = exactly_min_queue.popleft()
        else:
            member = under_min[0]
            cursor = 1
        assignment[member].append(tp)
        count = len(assignment[member])
        if count == min_quota:
            cursor -= 1
            del under_min[cursor]  # the iterator's remove(): the member it just returned
            exactly_min_queue.append(member)
        elif count == max_quota:
            over_min += 1
    if under_min and over_min != expected_over_min:
        raise AssertionError("sticky: fewer members than expected reached the maximum quota")
    for member in under_min:
        if len(assignment[member]) != min_quota:
            raise AssertionError(f"sticky: member {member!r} stays below the minimum quota")
    return assignment


class StickyAssignorCycleError(ValueError):
    """Kafka's sticky assignor never finishes on this input (see ``_GeneralAssignment``)."""


class _GeneralAssignment:
    """Kafka's ``GeneralAssignmentBuilder`` (members subscribe to different topics), without racks.

    Keep each member's owned partitions of topics it still subscribes to; hand every other
    partition (topics with the fewest possible members first, then by name and number) to the
    least-loaded member subscribed to it (fewest partitions, then id); then, if some member has
    two or more partitions more than another member of the same topic, move partitions
    (newly assigned ones first, unless a member lost a partition to a changed subscription) to
    the least-loaded eligible member, through Kafka's ``PartitionMovements`` (which may move a
    partition back instead), until balanced; keep the result only if more balanced, or if there
    was no previous assignment at all.

    That move back can take a partition from a member that is not the overloaded one, so on some
    histories Kafka's loop repeats the same moves forever (its group leader spins until the
    rebalance times out). The loop is deterministic, so it runs forever exactly when its state
    (owners, movement records, their HashSet orders) comes back at the start of a pass: then
    this raises ``StickyAssignorCycleError`` instead.
    """

    def __init__(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Sequence[str]],
        members: Sequence[str],
        owned: dict[str, list[TopicPartition]],
    ) -> None:
        self.partitions_per_topic = partitions_per_topic
        self.subscriptions = subscriptions
        self.keys = {member: java_string_key(member) for member in members}
        self.topic_members: dict[str, list[str]] = {topic: [] for topic in partitions_per_topic}
        self.member_topics: dict[str, list[str]] = {}
        for member in members:
            mine = [topic for topic in subscriptions[member] if topic in partitions_per_topic]
            self.member_topics[member] = mine
            for topic in mine:
                self.topic_members[topic].append(member)
        self.can_take = {member: set(topics) for member, topics in self.member_topics.items()}
        self.max_size = {m: sum(partitions_per_topic[t] for t in topics) for m, topics in self.member_topics.items()}
        self.current: dict[str, list[TopicPartition]] = owned
        self.owner: dict[TopicPartition, str] = {tp: m for m, partitions in owned.items() for tp in partitions}
        topics = sorted(self.topic_members, key=lambda t: (len(self.topic_members[t]), java_string_key(t)))
        self.sorted_partitions = [(t, p) for t in topics for p in range(partitions_per_topic[t])]
        self.sorted_members = _SortedMembers(self.current, self.keys)
        self.movements = _PartitionMovements()
        self.revocation_required = False

    def build(self) -> Assignment:
        assigned: set[TopicPartition] = set()
        for member, partitions in self.current.items():
            subscribed = set(self.subscriptions[member])
            kept = []
            for tp in partitions:
                if tp[0] in subscribed:
                    kept.append(tp)
                    assigned.add(tp)
                else:  # no longer subscribed to the topic (its stale owner entry is overwritten below)
                    self.revocation_required = True
            self.current[member] = kept
        unassigned = [tp for tp in self.sorted_partitions if tp not in assigned]
        for member in self.current:
            self.sorted_members.add(member)
        self._balance(unassigned)
        return self.current

    def _balance(self, unassigned: list[TopicPartition]) -> None:
        initializing = not self.current[self.sorted_members.last()]
        for tp in unassigned:
            if not self.topic_members[tp[0]]:
                continue
            for member in self.sorted_members:
                if tp[0] in self.can_take[member]:
                    self.sorted_members.remove(member)
                    self.current[member].append(tp)
                    self.owner[tp] = member
                    self.sorted_members.add(member)
                    break

        # Only partitions of topics with two or more possible members, and members that could
        # change (not given all they can take, or holding such a partition), take part.
        fixed_topics = {topic for topic, candidates in self.topic_members.items() if len(candidates) < 2}
        self.sorted_partitions = [tp for tp in self.sorted_partitions if tp[0] not in fixed_topics]
        unassigned = [tp for tp in unassigned if tp[0] not in fixed_topics]
        fixed: Assignment = {}
        for member in self.member_topics:
            partitions = self.current[member]
            if len(partitions) < self.max_size[member]:
                continue
            if any(tp[0] not in fixed_topics for tp in partitions):
                continue
            self.sorted_members.remove(member)
            fixed[member] = self.current.pop(member)

        before = {member: list(partitions) for member, partitions in self.current.items()}
        before_owner = dict(self.owner)
        if not self.revocation_required:
            self._perform_reassignments(unassigned)
        performed = self._perform_reassignments(self.sorted_partitions)
        if not initializing and performed and _balance_score(self.current) >= _balance_score(before):
            self.current = before
            self.owner = before_owner
        self.current.update(fixed)

    def _is_balanced(self) -> bool:
        """Kafka's ``isBalanced``: sizes within one, or no partition could move to a member with
        two or more fewer partitions than its holder (such a member cannot take more)."""
        current = self.current
        smallest = len(current[self.sorted_members.first()])
        largest = len(current[self.sorted_members.last()])
        if smallest >= largest - 1:
            return True
        # The largest holder of each topic's partitions; a member's own partitions never count
        # against it (its size is not two more than itself).
        top: dict[str, int] = {}
        for partitions in current.values():
            size = len(partitions)
            for topic, _ in partitions:
                if top.get(topic, -1) < size:
                    top[topic] = size
        for member in self.sorted_members:
            count = len(current[member])
            if count == self.max_size[member]:
                continue
            if any(top.get(topic, -1) > count + 1 for topic in self.member_topics[member]):
                return False
        return True

    def _state(self, partitions: list[TopicPartition]) -> bytes:
        """A digest of everything the next pass depends on (sizes follow from the owners)."""
        sets = []
        for name, pairs in self.movements.by_topic.items():
            for pair, moved in pairs.items():
                sets.append((name, pair, moved.capacity, moved.order()))
        sets.sort()
        state = ([self.owner[tp] for tp in partitions], sorted(self.movements.movements.items()), sets)
        return hashlib.blake2b(repr(state).encode(), digest_size=16).digest()

    def _perform_reassignments(self, partitions: list[TopicPartition]) -> bool:
        performed = False
        modified = True
        seen: set[bytes] = set()
        while modified:
            if performed:  # a pass moved something: watch for Kafka's endless loop
                state = self._state(partitions)
                if state in seen:
                    raise StickyAssignorCycleError(
                        "sticky: Kafka's StickyAssignor never finishes on this input: its partition "
                        "movements repeat in a cycle (a Kafka group leader would spin until the rebalance times out)"
                    )
                seen.add(state)
            modified = False
            for tp in partitions:
                if self._is_balanced():
                    break
                holder_size = len(self.current[self.owner[tp]])
                if any(holder_size > len(self.current[other]) + 1 for other in self.topic_members[tp[0]]):
                    self._reassign(tp)
                    performed = modified = True
        return performed

    def _reassign(self, tp: TopicPartition) -> None:
        new = next(member for member in self.sorted_members if tp[0] in self.can_take[member])
        moved = self.movements.partition_to_move(tp, self.owner[tp], new)
        old = self.owner[moved]
        self.sorted_members.remove(old)
        self.sorted_members.remove(new)
        self.movements.move(moved, old, new)
        self.current[old].remove(moved)
        self.current[new].append(moved)
        self.owner[moved] = new
        self.sorted_members.add(new)
        self.sorted_members.add(old)


def _general_assign(
    partitions_per_topic: Mapping[str, int],
    subscriptions: Mapping[str, Sequence[str]],
    members: Sequence[str],
    owned: dict[str, list[TopicPartition]],
) -> Assignment:
    """Kafka's ``generalAssign`` for members with different subscriptions."""
    return _GeneralAssignment(partitions_per_topic, subscriptions, members, owned).build()


def _balance_score(assignment: Assignment) -> int:
    """Kafka's getBalanceScore: the sum of size differences over all pairs of members (the i-th
    smallest of n sizes is subtracted from n - 1 - i larger ones and exceeds i smaller ones)."""
    sizes = sorted(len(ps) for ps in assignment.values())
    n = len(sizes)
    return sum(size * (2 * i - n + 1) for i, size in enumerate(sizes))
