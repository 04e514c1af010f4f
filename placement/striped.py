"""KRaft's striped replica placer (Kafka's ``StripedReplicaPlacer``), bit for bit.

Theory of operation (Kafka's Javadoc, condensed). Brokers are grouped into racks; each rack
keeps a sorted list of unfenced and a sorted list of fenced brokers, each with a random start
offset. Racks are visited round-robin from a random rack offset that advances by one per
partition, which gives the characteristic stripes:

    partition 1: A0, B0, C0
    partition 2: B1, C1, A1
    partition 3: C2, A2, B2

Within a rack, brokers are also taken round-robin; unfenced ones first, fenced ones only when
the unfenced list of that rack is exhausted in the current *iteration epoch*; the leader (first
replica) is always unfenced. Every partition is one epoch; once as many partitions as there are
unfenced brokers have been placed, the rack order and every broker list are reshuffled and the
epoch restarts at 0. A broker list only notices a new epoch when it is next asked, at which
point its offset advances by one and its index resets.

Randomness is drawn in Kafka's order: for each rack in ``HashMap`` iteration order, the fenced
list's offset then the unfenced list's offset (only for non-empty lists), then the rack offset;
each reshuffle shuffles the rack names, then for each rack in ``HashMap`` order its fenced then
unfenced list (``Collections.shuffle``). With ``JavaRandom(seed)`` the assignment equals what
``new StripedReplicaPlacer(new Random(seed))`` returns for the same brokers.

``existing`` reproduces trunk Kafka's ``replicasForTopicName``: when partitions are added to a
topic, the rack and broker offsets continue from the topic's existing assignment instead of
being drawn.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from placement import striped_vectorized
from placement.brokers import UsableBroker, check_distinct_ids
from placement.errors import InvalidPartitionsError, InvalidReplicationFactorError
from placement.javacompat import hashmap_order, optional_string_hash, optional_string_key
from placement.rng import JavaRandom, RandomSource, java_shuffle


def check_replication_factor_positive(replication_factor: int) -> None:
    if replication_factor <= 0:
        raise InvalidReplicationFactorError(
            f"Invalid replication factor {replication_factor}: the replication factor must be positive."
        )


def check_some_unfenced(num_unfenced: int) -> None:
    if num_unfenced == 0:
        raise InvalidReplicationFactorError("All brokers are currently fenced.")


def check_enough_brokers(replication_factor: int, num_total: int) -> None:
    if replication_factor > num_total:
        raise InvalidReplicationFactorError(
            f"The target replication factor of {replication_factor} cannot be reached because only "
            f"{num_total} broker(s) are registered."
        )


class StripedBrokers:
    """What Kafka's ``RackList`` derives from a broker set before it draws anything: the racks in
    ``HashMap`` order with their unfenced (in arrival order and sorted) and fenced (sorted) broker
    ids, and the rack ids in ``rackNames`` order. Immutable, so one value serves every placement
    on the same brokers: a caller whose broker set rarely changes (the controller, per broker
    registry) builds it once instead of per request, where it cost about two thirds of placing a
    1-partition topic (the Java string hashes and ordering of the rack names)."""

    __slots__ = (
        "broker_rack",
        "fenced",
        "names",
        "num_total",
        "num_unfenced",
        "order",
        "unfenced",
        "unfenced_arrival",
    )

    def __init__(self, brokers: Sequence[UsableBroker]) -> None:
        rack_names: list[str | None] = []  # in first-seen order, as Kafka's ArrayList
        by_name: dict[str | None, tuple[list[int], list[int]]] = {}
        broker_rack: dict[int, str | None] = {}
        num_unfenced = 0
        for broker in brokers:
            broker_rack[broker.id] = broker.rack
            lists = by_name.get(broker.rack)
            if lists is None:
                lists = ([], [])
                by_name[broker.rack] = lists
                rack_names.append(broker.rack)
            if broker.fenced:
                lists[1].append(broker.id)
            else:
                num_unfenced += 1
                lists[0].append(broker.id)
        self.broker_rack: dict[int, str | None] = broker_rack  # never mutated once built
        self.num_total = len(brokers)
        self.num_unfenced = num_unfenced
        # Rack ids follow HashMap iteration order (initialization and reshuffles walk it).
        map_order = hashmap_order(rack_names, [optional_string_hash(n) for n in rack_names])
        self.names: tuple[str | None, ...] = tuple(map_order)
        self.unfenced_arrival: tuple[tuple[int, ...], ...] = tuple(tuple(by_name[n][0]) for n in map_order)
        self.unfenced: tuple[tuple[int, ...], ...] = tuple(tuple(sorted(by_name[n][0])) for n in map_order)
        self.fenced: tuple[tuple[int, ...], ...] = tuple(tuple(sorted(by_name[n][1])) for n in map_order)
        # The rack ids in Kafka's rackNames order (sorted names, later reshuffled).
        self.order: tuple[int, ...] = tuple(
            sorted(range(len(map_order)), key=lambda r: optional_string_key(map_order[r]))
        )


class _RackList:
    """Kafka's ``RackList``: racks, their broker lists, the epoch and the rack offset.

    Racks are numbered in the ``HashMap`` iteration order of their names, which is the order
    Kafka initializes and reshuffles them in. Per rack and per list (unfenced ``u_*``, fenced
    ``f_*``) the state is Kafka's ``BrokerList``: brokers, index, offset, last seen epoch.
    """

    def __init__(
        self,
        random: RandomSource,
        brokers: Sequence[UsableBroker] | StripedBrokers,
        existing: Sequence[Sequence[int]] = (),
    ) -> None:
        self.random = random
        racks = brokers if isinstance(brokers, StripedBrokers) else StripedBrokers(brokers)
        self.num_total = racks.num_total
        self.num_unfenced = racks.num_unfenced
        self.names: list[str | None] = list(racks.names)
        # Private copies: reshuffles reorder them in place.
        self.unfenced: list[list[int]] = [list(ids) for ids in racks.unfenced]
        self.fenced: list[list[int]] = [list(ids) for ids in racks.fenced]
        count = len(self.names)
        self.u_index = [0] * count
        self.u_offset = [0] * count
        self.u_epoch = [0] * count
        self.f_index = [0] * count
        self.f_offset = [0] * count
        self.f_epoch = [0] * count
        next_int = random.next_int
        for rack in range(count):
            fenced = self.fenced[rack]
            if fenced:
                self.f_offset[rack] = next_int(len(fenced))
            unfenced = self.unfenced[rack]
            if unfenced:
                previous = (
                    _previous_broker_offset(racks.broker_rack, existing, self.names[rack], racks.unfenced_arrival[rack])
                    if existing
                    else None
                )
                if previous is None:
                    self.u_offset[rack] = next_int(len(unfenced))
                else:
                    self.u_offset[rack] = (previous + 1) % len(unfenced)
        self.order: list[int] = list(racks.order)
        self.epoch = 0
        previous_rack = (
            _previous_rack_offset(racks.broker_rack, existing, [self.names[r] for r in self.order])
            if existing
            else None
        )
        if previous_rack is not None:
            self.offset = (previous_rack + 1) % count
        else:
            self.offset = next_int(count) if count else 0
        # The lists a reshuffle reorders, in Kafka's order (per rack: fenced, then unfenced).
        # Shuffling fewer than two brokers draws no random number and changes nothing, so those
        # lists are left out: with one broker per rack a reshuffle is then one shuffle, not 2R+1.
        self._shuffled: list[list[int]] = [
            ids for rack in range(count) for ids in (self.fenced[rack], self.unfenced[rack]) if len(ids) > 1
        ]

    def shuffle(self) -> None:
        """Kafka's ``RackList.shuffle``: the rack order, then each rack's fenced and unfenced list."""
        random = self.random
        java_shuffle(self.order, random)
        for ids in self._shuffled:
            java_shuffle(ids, random)

    def place_many(self, num_partitions: int, replication_factor: int) -> list[list[int]]:
        """``num_partitions`` calls of Kafka's ``RackList.place``, with the state in locals.

        The body is Kafka's algorithm with ``BrokerList.next`` inlined; the hot path (a rack
        seen for the first time in this epoch) costs a handful of list operations.
        """
        order = self.order
        num_racks = len(order)
        unfenced, fenced = self.unfenced, self.fenced
        u_index, u_offset, u_epoch = self.u_index, self.u_offset, self.u_epoch
        f_index, f_offset, f_epoch = self.f_index, self.f_offset, self.f_epoch
        num_unfenced = self.num_unfenced
        reshuffle = num_unfenced > 1  # a single unfenced broker never reshuffles (Kafka: no endless loop)
        epoch, offset = self.epoch, self.offset
        followers = range(1, replication_factor)
        placements: list[list[int]] = []
        append = placements.append
        for _ in range(num_partitions):
            if epoch == num_unfenced and reshuffle:
                self.shuffle()
                epoch = 0
            if offset == num_racks:
                offset = 0
            # The leader: the first rack from `offset` with an unfenced broker left in this epoch.
            first_rack_index = offset
            while True:
                rack = order[first_rack_index]
                brokers = unfenced[rack]
                size = len(brokers)
                if size:
                    if u_epoch[rack] != epoch:
                        u_epoch[rack] = epoch
                        u_index[rack] = 0
                        u_offset[rack] = (u_offset[rack] + 1) % size
                    index = u_index[rack]
                    if index < size:
                        u_index[rack] = index + 1
                        replicas = [brokers[(index + u_offset[rack]) % size]]
                        break
                first_rack_index += 1
                if first_rack_index == num_racks:
                    first_rack_index = 0
            # Followers: racks round-robin from `offset`, skipping the leader's rack once.
            rack_index = offset
            laps = 0
            for _replica in followers:
                result = -1
                while result < 0:
                    if rack_index == first_rack_index:
                        first_rack_index = -1
                    else:
                        rack = order[rack_index]
                        brokers = unfenced[rack]
                        size = len(brokers)
                        if size:
                            if u_epoch[rack] != epoch:
                                u_epoch[rack] = epoch
                                u_index[rack] = 0
                                u_offset[rack] = (u_offset[rack] + 1) % size
                            index = u_index[rack]
                            if index < size:
                                u_index[rack] = index + 1
                                result = brokers[(index + u_offset[rack]) % size]
                        if result < 0:
                            brokers = fenced[rack]
                            size = len(brokers)
                            if size:
                                if f_epoch[rack] != epoch:
                                    f_epoch[rack] = epoch
                                    f_index[rack] = 0
                                    f_offset[rack] = (f_offset[rack] + 1) % size
                                index = f_index[rack]
                                if index < size:
                                    f_index[rack] = index + 1
                                    result = brokers[(index + f_offset[rack]) % size]
                    rack_index += 1
                    if rack_index == num_racks:
                        rack_index = 0
                        laps += 1
                        if laps > replication_factor + 1:
                            # Kafka would spin forever here; no reachable state is known to get here.
                            raise AssertionError("striped placer: no broker left in any rack in this epoch")
                replicas.append(result)
            append(replicas)
            epoch += 1
            offset += 1
        self.epoch, self.offset = epoch, offset
        return placements

    def one_per_rack(self, replication_factor: int) -> bool:
        """Whether ``place_one_per_rack`` is exact: a fresh rack list (no partition placed yet),
        no fenced broker, one broker per rack, and a replica on every rack."""
        return (
            self.num_unfenced == self.num_total
            and replication_factor == len(self.order)
            and all(len(ids) == 1 for ids in self.unfenced)
            and self.epoch == 0
            and not any(self.u_epoch)
            and not any(self.u_index)
        )

    def place_one_per_rack(self, num_partitions: int, replication_factor: int) -> list[list[int]]:
        """``place_many`` when ``one_per_rack`` holds (e.g. three brokers in three racks, RF 3).

        Every partition then visits every rack, and every rack's one broker is free in every
        epoch (it was last taken in the previous epoch; the very first partition takes each at
        epoch 0 with index 0), so partition n is simply the racks in the current rack order
        rotated to the rack offset. The reshuffles happen, and draw, exactly where Kafka's do:
        before every ``num_unfenced``-th partition. tests/placement/test_striped.py checks this
        path against ``place_many``.
        """
        order = self.order
        num_racks = len(order)
        broker_of = [ids[0] for ids in self.unfenced]
        reshuffle = self.num_unfenced > 1
        random = self.random
        shuffle = random.shuffle if type(random) is JavaRandom else partial(java_shuffle, random=random)
        epoch, offset = self.epoch, self.offset
        # The brokers in rack order. A shuffle's swaps depend only on the random draws and the
        # length, so shuffling this list is shuffling the rack order (and, one broker per rack,
        # the broker lists have nothing to shuffle): the rack order is derived from it at the end.
        in_order = [broker_of[rack] for rack in order]
        ring = in_order * 2  # a rotation is a slice
        placements: list[list[int]] = []
        append = placements.append
        for _ in range(num_partitions):
            if epoch == num_racks and reshuffle:
                shuffle(in_order)
                ring = in_order * 2
                epoch = 0
            if offset == num_racks:
                offset = 0
            append(ring[offset : offset + replication_factor])
            epoch += 1
            offset += 1
        rack_of = {broker: rack for rack, broker in enumerate(broker_of)}
        order[:] = [rack_of[broker] for broker in in_order]
        if num_partitions:
            # The state place_many would leave: every rack taken once in the last epoch.
            for rack in range(num_racks):
                self.u_epoch[rack] = epoch - 1
                self.u_index[rack] = 1
        self.epoch, self.offset = epoch, offset
        return placements

    def place_many_unfenced(self, num_partitions: int, replication_factor: int) -> list[list[int]]:
        """``place_many`` for a cluster without fenced brokers: the same steps, fewer branches.

        With no fenced lists, a rack's first visit in an epoch always yields the broker after
        its previous offset, so the common path is: bump the offset, take that broker. This is
        what lets the placer do a million partitions in about a second.
        """
        order = self.order
        num_racks = len(order)
        unfenced = self.unfenced
        sizes = [len(brokers) for brokers in unfenced]
        u_index, u_offset, u_epoch = self.u_index, self.u_offset, self.u_epoch
        num_unfenced = self.num_unfenced
        reshuffle = num_unfenced > 1
        epoch, offset = self.epoch, self.offset
        misses_max = 2 * num_racks * replication_factor + 2
        placements: list[list[int]] = []
        append = placements.append
        for _ in range(num_partitions):
            if epoch == num_unfenced and reshuffle:
                self.shuffle()
                epoch = 0
            if offset == num_racks:
                offset = 0
            first_rack_index = offset
            while True:
                rack = order[first_rack_index]
                if u_epoch[rack] != epoch:
                    u_epoch[rack] = epoch
                    position = u_offset[rack] + 1
                    if position == sizes[rack]:
                        position = 0
                    u_offset[rack] = position
                    u_index[rack] = 1
                    replicas = [unfenced[rack][position]]
                    break
                index = u_index[rack]
                size = sizes[rack]
                if index < size:  # a rack seen earlier in this epoch (only after a reshuffle)
                    u_index[rack] = index + 1
                    position = index + u_offset[rack]
                    replicas = [unfenced[rack][position - size if position >= size else position]]
                    break
                first_rack_index += 1
                if first_rack_index == num_racks:
                    first_rack_index = 0
            need = replication_factor - 1
            rack_index = offset
            if first_rack_index == offset:
                # The usual case: the leader came from the rack at `offset`, so Kafka's follower
                # loop skips that rack once and walks on; while each rack is new in this epoch
                # it yields the broker after its offset (the loop below, without the skip test).
                first_rack_index = -1
                rack_index += 1
                if rack_index == num_racks:
                    rack_index = 0
                while need:
                    rack = order[rack_index]
                    if u_epoch[rack] == epoch:
                        break  # a second visit in this epoch: the general loop takes over
                    u_epoch[rack] = epoch
                    position = u_offset[rack] + 1
                    if position == sizes[rack]:
                        position = 0
                    u_offset[rack] = position
                    u_index[rack] = 1
                    replicas.append(unfenced[rack][position])
                    need -= 1
                    rack_index += 1
                    if rack_index == num_racks:
                        rack_index = 0
            misses = 0
            while need:
                current = rack_index
                rack_index += 1
                if rack_index == num_racks:
                    rack_index = 0
                if current == first_rack_index:
                    first_rack_index = -1
                    continue
                rack = order[current]
                if u_epoch[rack] != epoch:
                    u_epoch[rack] = epoch
                    position = u_offset[rack] + 1
                    if position == sizes[rack]:
                        position = 0
                    u_offset[rack] = position
                    u_index[rack] = 1
                    replicas.append(unfenced[rack][position])
                    need -= 1
                    continue
                index = u_index[rack]
                size = sizes[rack]
                if index < size:
                    u_index[rack] = index + 1
                    position = index + u_offset[rack]
                    replicas.append(unfenced[rack][position - size if position >= size else position])
                    need -= 1
                    continue
                misses += 1
                if misses > misses_max:
                    # Kafka would spin forever here; no reachable state is known to get here.
                    raise AssertionError("striped placer: no broker left in any rack in this epoch")
            append(replicas)
            epoch += 1
            offset += 1
        self.epoch, self.offset = epoch, offset
        return placements


def _previous_broker_offset(
    broker_rack: dict[int, str | None],
    existing: Sequence[Sequence[int]],
    rack: str | None,
    unfenced_in_arrival_order: Sequence[int],
) -> int | None:
    """Kafka's ``tryGetPreviousBrokerOffset``: the position of the rack's most recently used broker.

    Scans the existing partitions from the last one; the first replica found on this rack
    decides (its index in the rack's unfenced list *before* sorting, as in Kafka), or none if
    that broker is fenced.
    """
    for replicas in reversed(existing):
        for broker in replicas:
            if broker not in broker_rack:
                continue
            if broker_rack[broker] == rack:
                try:
                    return unfenced_in_arrival_order.index(broker)
                except ValueError:
                    return None
    return None


def _previous_rack_offset(
    broker_rack: dict[int, str | None], existing: Sequence[Sequence[int]], rack_names: list[str | None]
) -> int | None:
    """Kafka's ``tryGetPreviousRackOffset``: the position of the last partition's leader's rack."""
    if not existing:
        return None
    leader = existing[-1][0]
    if leader not in broker_rack:
        return None
    rack = broker_rack[leader]
    for index, name in enumerate(rack_names):
        if name == rack:
            return index
    return None


class StripedReplicaPlacer:
    """KRaft's default placer: ``StripedReplicaPlacer(random).place(brokers, partitions, rf)``."""

    def __init__(self, random: RandomSource) -> None:
        self.random = random

    def place(
        self,
        brokers: Sequence[UsableBroker] | StripedBrokers,
        num_partitions: int,
        replication_factor: int,
        *,
        existing: Sequence[Sequence[int]] = (),
    ) -> list[list[int]]:
        """Replicas (leader first) for ``num_partitions`` new partitions.

        ``brokers`` may be given as a :class:`StripedBrokers` built once for a broker set (its ids
        checked distinct with ``check_distinct_ids`` by whoever built it); the placement is the same.
        ``existing`` are the topic's current partitions (in partition order) when partitions
        are added; empty for a new topic. Raises ``InvalidReplicationFactorError`` with Kafka's
        messages, checked in Kafka's order after the racks have drawn their offsets.
        """
        if num_partitions < 0:
            raise InvalidPartitionsError(f"num_partitions must not be negative, got {num_partitions}")
        if not isinstance(brokers, StripedBrokers):
            check_distinct_ids(brokers)
        for index, replicas in enumerate(existing):
            if not replicas:
                raise InvalidPartitionsError(f"existing: partition {index} has no replicas")
        rack_list = _RackList(self.random, brokers, existing)
        check_replication_factor_positive(replication_factor)
        check_some_unfenced(rack_list.num_unfenced)
        check_enough_brokers(replication_factor, rack_list.num_total)
        if not existing and striped_vectorized.applies(rack_list, num_partitions, replication_factor):
            return striped_vectorized.place_all(rack_list, num_partitions, replication_factor)
        if rack_list.num_unfenced == rack_list.num_total:
            if rack_list.one_per_rack(replication_factor):
                return rack_list.place_one_per_rack(num_partitions, replication_factor)
            return rack_list.place_many_unfenced(num_partitions, replication_factor)
        return rack_list.place_many(num_partitions, replication_factor)
