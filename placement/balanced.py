"""raftmeta's balanced placer: Kafka's placement constraints, leaders and replicas within ±1.

Kafka's placers balance only in expectation: run on Kafka's own code with
``java.util.Random(0)``, 3 racks x 3 brokers, 54 partitions, RF 3, the striped placer gives
leaders per broker [3, 3, 12, 12, 6, 0, 6, 9, 3] (mean 6), and neither Kafka placer looks at
the load already on each broker. This placer keeps the constraints (distinct brokers per
partition, min(RF, racks) racks per partition, an unfenced leader, fenced brokers only when the
unfenced ones cannot hold the replication factor) and promises, per topic:

* **Equal racks** (every rack has the same number of unfenced brokers, at least one, and there
  are at least RF unfenced brokers): leader counts *and* replica counts per unfenced broker are
  within ±1 of each other, fenced brokers get nothing. Exact by construction.
* **Otherwise** (unequal racks, a rack of fenced brokers only, or fenced brokers needed to
  reach the factor): leader counts per unfenced broker are
  within ±1 (any unfenced broker can lead); replicas are placed greedily, least-loaded broker
  first, with rack spread taking priority. With unequal racks, rack spread forces more replicas
  onto the brokers of small racks (as in Kafka), so ±1 across all brokers is not achievable
  in general; the greedy keeps brokers of one rack close to each other.

Load awareness: ``load`` maps broker id -> (replicas, leaders) already on the broker. Per-topic
counts are fixed by the ±1 promise (each broker gets the floor or the ceiling of its share);
which brokers get the ceiling (the topic's *extra* replicas and leaders) is chosen from the load
so the cluster as a whole stays balanced as topics accumulate: on equal racks, placing topic
after topic with the load of the earlier ones keeps replicas *and* leaders per broker within ±1
across the whole cluster, whatever the sizes and replication factors of the topics
(:func:`_choose_extras` says how); otherwise leaders stay within ±1. Ties are broken by a
permutation of the brokers drawn from the random source, so the same input and seed give the
same assignment.

Equal racks, whole blocks. Arrange the N unfenced brokers in a rack-alternated list (position i
is in rack ``i mod R``). Lay the replica slots of N partitions one after another along the list,
wrapping around: partition p takes positions ``p*RF .. p*RF + RF - 1`` (mod N). Consecutive
positions are in consecutive racks, so a partition spans min(RF, R) racks and never repeats a
broker (RF <= N); N partitions fill every position exactly RF times. The leader of partition p
is its replica at offset ``(p // c) mod g`` in its block, where g = gcd(RF, N) and c = N / g:
the block starts ``p*RF mod N`` of one cycle of c partitions are exactly the multiples of g, and
the offset moves the next cycle to the next residue class, so every N partitions lead every
position exactly once. Whole blocks thus give every broker the same load.

Equal racks, the remaining P mod N partitions (:func:`_remainder_place`): the brokers that take
the extra replicas and the leaders are chosen first (:func:`_choose_extras`), then partitions are
built to exactly those counts, RF // R replicas in every rack and one more in RF mod R racks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from itertools import combinations
from math import gcd

from placement.brokers import UsableBroker, check_distinct_ids
from placement.errors import InvalidPartitionsError
from placement.rng import RandomSource, java_shuffle
from placement.striped import check_enough_brokers, check_replication_factor_positive, check_some_unfenced

BrokerLoad = Mapping[int, tuple[int, int]]


class BalancedReplicaPlacer:
    """``BalancedReplicaPlacer(random).place(brokers, partitions, rf, load=None)``."""

    def __init__(self, random: RandomSource) -> None:
        self.random = random

    def place(
        self,
        brokers: Sequence[UsableBroker],
        num_partitions: int,
        replication_factor: int,
        load: BrokerLoad | None = None,
    ) -> list[list[int]]:
        """Replicas (leader first) for ``num_partitions`` new partitions; see the module docstring."""
        if num_partitions < 0:
            raise InvalidPartitionsError(f"num_partitions must not be negative, got {num_partitions}")
        check_distinct_ids(brokers)
        check_replication_factor_positive(replication_factor)
        check_some_unfenced(sum(1 for b in brokers if not b.fenced))
        check_enough_brokers(replication_factor, len(brokers))
        load = load or {}
        for broker_id, counts in load.items():
            if len(counts) != 2 or min(counts) < 0:
                raise ValueError(f"load: broker {broker_id} must map to (replicas, leaders) >= 0, got {counts!r}")
        # One draw per broker: a random rank to break ties between equally loaded brokers.
        ids = sorted(b.id for b in brokers)
        java_shuffle(ids, self.random)
        tiebreak = {broker_id: rank for rank, broker_id in enumerate(ids)}
        if num_partitions == 0:
            return []
        racks = _unfenced_by_rack(brokers)
        sizes = {len(members) for members in racks.values()}
        num_unfenced = sum(len(members) for members in racks.values())
        all_racks = {b.rack for b in brokers}
        if len(sizes) == 1 and num_unfenced >= replication_factor and len(all_racks) == len(racks):
            return _stream_place(list(racks.values()), num_partitions, replication_factor, load, tiebreak)
        return _greedy_place(brokers, num_partitions, replication_factor, load, tiebreak)


def _unfenced_by_rack(brokers: Sequence[UsableBroker]) -> dict[str | None, list[int]]:
    racks: dict[str | None, list[int]] = {}
    for broker in brokers:
        if not broker.fenced:
            racks.setdefault(broker.rack, []).append(broker.id)
    return racks


def _stream_place(
    racks: list[list[int]],
    num_partitions: int,
    replication_factor: int,
    load: BrokerLoad,
    tiebreak: Mapping[int, int],
) -> list[list[int]]:
    """Equal racks: whole blocks of N partitions by the stream layout (every broker gets exactly
    RF replicas and one leader per block, whatever the layout), the remaining M < N partitions by
    :func:`_remainder_place`, which decides where the topic's extra replicas and leaders go."""
    n = len(racks) * len(racks[0])
    remainder = num_partitions % n
    full = num_partitions - remainder
    blocks = _stream_blocks(_layout(racks, load, tiebreak), full, replication_factor)
    if not remainder:
        return blocks
    rest = _remainder_place(racks, remainder, replication_factor, load, tiebreak)
    if rest is None:
        return _stream_window_place(racks, num_partitions, replication_factor, load, tiebreak)
    return blocks + rest


def _layout(racks: list[list[int]], load: BrokerLoad, tiebreak: Mapping[int, int]) -> list[int]:
    """The rack-alternated list of the stream layout (position i in rack i mod R), least
    replica-loaded racks and brokers first."""

    def replicas_of(broker: int) -> int:
        return load.get(broker, (0, 0))[0]

    ranked = [sorted(members, key=lambda b: (replicas_of(b), tiebreak[b])) for members in racks]
    ranked.sort(key=lambda members: (sum(replicas_of(b) for b in members), min(tiebreak[b] for b in members)))
    return [ranked[i % len(racks)][i // len(racks)] for i in range(len(racks) * len(racks[0]))]


def _stream_blocks(layout: list[int], num_partitions: int, replication_factor: int) -> list[list[int]]:
    """Partitions 0 .. num_partitions-1 by the stream rule alone (leader at offset (p // c) mod g)."""
    n = len(layout)
    g = gcd(replication_factor, n)
    cycle = n // g
    doubled = layout + layout  # a block never runs past the second copy (RF <= N)
    placements = []
    for p in range(num_partitions):
        base = (p * replication_factor) % n
        block = doubled[base : base + replication_factor]
        offset = (p // cycle) % g
        placements.append(block[offset:] + block[:offset])
    return placements


def _remainder_place(
    racks: list[list[int]],
    num_partitions: int,
    replication_factor: int,
    load: BrokerLoad,
    tiebreak: Mapping[int, int],
) -> list[list[int]] | None:
    """M < N partitions on equal racks, within ±1 for the topic, keeping the cluster balanced.

    With M*RF = q*N + e every broker gets q replicas and e of them one more (the *extras*); M
    distinct brokers lead one partition each (with q = 0 only the brokers holding a replica, the
    extras, can lead). :func:`_choose_extras` decides which; the partitions are then built to
    exactly these counts, leader first, each with RF // R replicas in every rack and one more in
    RF mod R racks (so min(RF, R) racks): racks first, then brokers within each rack (bipartite
    degree-constrained subgraphs, greedy with augmenting paths), or both at once as a maximum flow
    when the first choice of racks leaves the brokers no way. None if no construction was found
    (none is known: the caller then falls back to :func:`_stream_window_place`).
    """
    num_racks = len(racks)
    per_rack = len(racks[0])
    n = num_racks * per_rack
    base_count, extra = divmod(num_partitions * replication_factor, n)

    def replicas_of(broker: int) -> int:
        return load.get(broker, (0, 0))[0]

    def leaders_of(broker: int) -> int:
        return load.get(broker, (0, 0))[1]

    rack_of = {b: r for r, members in enumerate(racks) for b in members}
    brokers = [b for members in racks for b in members]
    choice = _choose_extras(racks, num_partitions, base_count, extra, replicas_of, leaders_of, tiebreak)
    if choice is None:
        return None
    extras, leader_set = choice
    count = {b: base_count + (b in extras) for b in brokers}
    leaders = sorted(leader_set, key=lambda b: (rack_of[b], tiebreak[b]))
    leader_rack = [rack_of[b] for b in leaders]

    whole, odd_racks = divmod(replication_factor, num_racks)
    followers = _followers(racks, count, leaders, leader_rack, whole, odd_racks, tiebreak)
    if followers is None and whole >= 1:
        # _followers fixes the racks before the brokers; when that choice leaves a rack's
        # brokers no way, both at once (a flow) finds the construction if there is one. (With
        # whole = 0 every partition has at most one replica per rack and the brokers never block.)
        followers = _followers_by_flow(racks, count, leaders, leader_rack, whole, odd_racks)
    if followers is None:
        return None
    placements = []
    for p, leader in enumerate(leaders):
        replicas = [leader]
        for step in range(num_racks):
            replicas.extend(followers[p][(leader_rack[p] + step) % num_racks])
        placements.append(replicas)
    return placements


def _followers(
    racks: list[list[int]],
    count: Mapping[int, int],
    leaders: list[int],
    leader_rack: list[int],
    whole: int,
    odd_racks: int,
    tiebreak: Mapping[int, int],
) -> list[list[list[int]]] | None:
    """The followers of each partition, per rack: partition p takes `whole` replicas in every rack
    and one more in `odd_racks` racks (with whole = 0 its leader's rack is one of those), every
    broker b exactly count[b] replicas in all. First the racks (rack r's total is fixed by the
    counts), then the brokers within each rack."""
    num_racks = len(racks)
    num_partitions = len(leaders)
    in_rack = [[whole] * num_racks for _ in range(num_partitions)]
    if odd_racks:
        supply = {r: sum(count[b] for b in racks[r]) - whole * num_partitions for r in range(num_racks)}
        if whole == 0:
            for r in leader_rack:
                supply[r] -= 1
        chosen = _fill(
            [odd_racks - (whole == 0)] * num_partitions,
            supply,
            [leader_rack[p] if whole == 0 else None for p in range(num_partitions)],
            {r: r for r in range(num_racks)},
        )
        if chosen is None:
            return None
        for p, rack_list in enumerate(chosen):
            for r in rack_list + ([leader_rack[p]] if whole == 0 else []):
                in_rack[p][r] += 1
    followers: list[list[list[int]]] = [[[] for _ in range(num_racks)] for _ in range(num_partitions)]
    led = set(leaders)
    for r, members in enumerate(racks):
        needs = [in_rack[p][r] - (leader_rack[p] == r) for p in range(num_partitions)]
        supply = {b: count[b] - (b in led) for b in members}
        forbidden = [leaders[p] if leader_rack[p] == r else None for p in range(num_partitions)]
        brokers = _fill(needs, supply, forbidden, tiebreak)
        if brokers is None:
            return None
        for p, chosen_brokers in enumerate(brokers):
            followers[p][r] = chosen_brokers
    return followers


def _followers_by_flow(
    racks: list[list[int]],
    count: Mapping[int, int],
    leaders: list[int],
    leader_rack: list[int],
    whole: int,
    odd_racks: int,
) -> list[list[list[int]]] | None:
    """_followers as one maximum flow: source -> partition p's odd slots (odd_racks) -> (p, rack r)
    (at most 1 of them), source -> (p, r) (its whole - [leader in r] mandatory replicas),
    (p, r) -> broker b of rack r other than p's leader (1) -> sink (count[b] - [b leads]). The
    construction exists exactly when the flow saturates the source."""
    num_racks = len(racks)
    num_partitions = len(leaders)
    brokers = [b for members in racks for b in members]
    led = set(leaders)
    flow = _MaxFlow(2 + num_partitions + num_partitions * num_racks + len(brokers))
    source, sink = 0, 1
    pair_base = 2 + num_partitions
    broker_node = {b: pair_base + num_partitions * num_racks + i for i, b in enumerate(brokers)}
    edges: list[tuple[int, int, int]] = []  # (edge index, partition, broker)
    for p in range(num_partitions):
        flow.add(source, 2 + p, odd_racks)
        for r in range(num_racks):
            pair = pair_base + p * num_racks + r
            flow.add(2 + p, pair, 1)
            mandatory = whole - (leader_rack[p] == r)
            if mandatory:
                flow.add(source, pair, mandatory)
            for b in racks[r]:
                if b != leaders[p]:
                    edges.append((flow.add(pair, broker_node[b], 1), p, b))
    for b in brokers:
        flow.add(broker_node[b], sink, count[b] - (b in led))
    wanted = sum(count[b] - (b in led) for b in brokers)
    if flow.run(source, sink) != wanted:
        return None
    rack_of = {b: r for r, members in enumerate(racks) for b in members}
    followers: list[list[list[int]]] = [[[] for _ in range(num_racks)] for _ in range(num_partitions)]
    for edge, p, b in edges:
        if flow.used(edge):
            followers[p][rack_of[b]].append(b)
    return followers


class _MaxFlow:
    """Dinic's maximum flow on a small graph (integer capacities)."""

    def __init__(self, nodes: int) -> None:
        self.graph: list[list[int]] = [[] for _ in range(nodes)]
        self.to: list[int] = []
        self.capacity: list[int] = []

    def add(self, u: int, v: int, capacity: int) -> int:
        """An edge u -> v; returns its index (for used())."""
        self.graph[u].append(len(self.to))
        self.to.append(v)
        self.capacity.append(capacity)
        self.graph[v].append(len(self.to))
        self.to.append(u)
        self.capacity.append(0)
        return len(self.to) - 2

    def used(self, edge: int) -> bool:
        return self.capacity[edge ^ 1] > 0

    def run(self, source: int, sink: int) -> int:
        total = 0
        while True:
            level = [-1] * len(self.graph)
            level[source] = 0
            queue = [source]
            for u in queue:
                for e in self.graph[u]:
                    if self.capacity[e] > 0 and level[self.to[e]] < 0:
                        level[self.to[e]] = level[u] + 1
                        queue.append(self.to[e])
            if level[sink] < 0:
                return total
            position = [0] * len(self.graph)
            while pushed := self._push(source, sink, 1 << 62, level, position):
                total += pushed

    def _push(self, u: int, sink: int, limit: int, level: list[int], position: list[int]) -> int:
        if u == sink:
            return limit
        edges = self.graph[u]
        while position[u] < len(edges):
            e = edges[position[u]]
            v = self.to[e]
            if self.capacity[e] > 0 and level[v] == level[u] + 1:
                pushed = self._push(v, sink, min(limit, self.capacity[e]), level, position)
                if pushed:
                    self.capacity[e] -= pushed
                    self.capacity[e ^ 1] += pushed
                    return pushed
            position[u] += 1
        return 0


# Candidate choices of where a topic's extras go that _choose_extras tries, best first, before it
# settles for the best one seen (the first is the one in all but contrived cases).
CHOICES_MAX = 64


def _choose_extras(
    racks: list[list[int]],
    num_partitions: int,
    base_count: int,
    extra: int,
    replicas_of: Callable[[int], int],
    leaders_of: Callable[[int], int],
    tiebreak: Mapping[int, int],
) -> tuple[set[int], list[int]] | None:
    """Which brokers take the topic's ``extra`` replica extras, and which ``num_partitions``
    brokers lead (with ``base_count`` = 0 the leaders must be among the extras).

    The aim is the cluster's state after the topic, not just this topic: replicas and leaders
    per broker within ±1, and the brokers one above the minimum ("high") arranged so that every
    next topic can keep it so: the replica-high and leader-high sets nested (one inside the
    other), and each of them, and their difference, spread over the racks within one. (Without
    nesting a broker with a replica too many and one with a leader too many can both be forced
    on the next topic: a one-replica topic's leader is its replica. Solving that game on
    clusters of up to 3 x 2 brokers showed these are exactly the states from which ±1 can be kept
    for any sequence of topics; running this placer from every state it can reach on clusters of
    up to 3 x 3, 2 x 4 and 4 x 2 brokers, with every topic of up to 2N - 1 partitions and every
    factor, found that it always keeps to them: tests/placement/test_balanced_accumulation.py.)

    Rack level (:func:`_rack_choices`): the extras are water-filled onto the racks with the
    fewest replicas (floor(e/R) each, one more for the least loaded), the leaders onto the racks
    with the fewest leaders; among tied racks the extras go to those with more leaders and the
    leaders to those with more replicas, so the sets stay nested (with q = 0 the leaders' racks
    are chosen first and the extras follow them). Within a rack: leaders to the least
    leader-loaded brokers, preferring the most replica-loaded; extras to the least
    replica-loaded, preferring the leaders just chosen, then the most leader-loaded. The first
    choice that keeps the state as described is taken (in those runs the very first one always
    did); failing that (a state that was not so to begin with, e.g. after brokers
    joined or another placer's topics), the best of the first ``CHOICES_MAX``.
    """
    brokers = [b for members in racks for b in members]
    rack_replicas = [sum(replicas_of(b) for b in members) for members in racks]
    rack_leaders = [sum(leaders_of(b) for b in members) for members in racks]
    best: tuple[tuple[int, int, int], set[int], list[int]] | None = None
    tried = 0
    for per_rack_extras, per_rack_leaders in _rack_choices(
        rack_replicas, rack_leaders, extra, num_partitions, leaders_within_extras=base_count == 0
    ):
        if tried == CHOICES_MAX:
            break
        tried += 1
        chosen = _choose_in_racks(
            racks, per_rack_extras, per_rack_leaders, base_count, replicas_of, leaders_of, tiebreak
        )
        if chosen is None:
            continue
        extras, leaders = chosen
        score = _balance_score(
            racks,
            {b: replicas_of(b) + (b in extras) for b in brokers},
            {b: leaders_of(b) + (b in leaders) for b in brokers},
        )
        if score == (0, 0, 0):
            return extras, leaders
        if best is None or score < best[0]:
            best = (score, extras, leaders)
    return None if best is None else (best[1], best[2])


def _rack_choices(
    rack_replicas: list[int], rack_leaders: list[int], extra: int, leaders: int, *, leaders_within_extras: bool
) -> Iterator[tuple[list[int], list[int]]]:
    """Per-rack (extras, leaders) for _choose_extras, most promising first: both water-filled;
    ties go to racks with more leaders (extras) and more replicas (leaders). When the leaders
    must be among the extras, the leaders' racks are chosen first and the extras follow them."""
    racks = range(len(rack_replicas))
    if not leaders_within_extras:
        for extras in _water_fill(rack_replicas, extra, [(-rack_leaders[r], r) for r in racks]):
            after = [(-(rack_replicas[r] + extras[r]), r) for r in racks]
            for per_rack in _water_fill(rack_leaders, leaders, after):
                yield extras, per_rack
        return
    for per_rack in _water_fill(rack_leaders, leaders, [(-rack_replicas[r], r) for r in racks]):
        keys = [(-per_rack[r], -rack_leaders[r], r) for r in racks]
        for extras in _water_fill(rack_replicas, extra, keys):
            if all(lead <= ext for lead, ext in zip(per_rack, extras, strict=True)):
                yield extras, per_rack


def _water_fill(totals: list[int], amount: int, keys: Sequence[tuple[int, ...]]) -> Iterator[list[int]]:
    """Ways to spread ``amount`` units over racks, one per rack per round, each round to the racks
    with the lowest totals (so totals within one stay within one): yields per-rack amounts, the
    choices among the racks tied at the last round in the order of their ``keys``."""
    rounds, left = divmod(amount, len(totals))
    if left == 0:
        yield [rounds] * len(totals)
        return
    threshold = sorted(totals)[left - 1]
    sure = [r for r in range(len(totals)) if totals[r] < threshold]
    tied = sorted((r for r in range(len(totals)) if totals[r] == threshold), key=lambda r: keys[r])
    for extra_racks in combinations(tied, left - len(sure)):
        amounts = [rounds] * len(totals)
        for r in (*sure, *extra_racks):
            amounts[r] += 1
        yield amounts


def _choose_in_racks(
    racks: list[list[int]],
    per_rack_extras: list[int],
    per_rack_leaders: list[int],
    base_count: int,
    replicas_of: Callable[[int], int],
    leaders_of: Callable[[int], int],
    tiebreak: Mapping[int, int],
) -> tuple[set[int], list[int]] | None:
    """The brokers of each rack that take its extras and its leaders (see _choose_extras)."""
    extras: set[int] = set()
    leaders: list[int] = []
    for members, take, lead in zip(racks, per_rack_extras, per_rack_leaders, strict=True):
        by_replicas = sorted(members, key=replicas_of)
        if base_count == 0:
            # Leaders among this rack's extras: the brokers below the rack's boundary load take
            # one anyway, the others at the boundary only while the rack has room.
            if lead and not take:
                return None
            boundary = replicas_of(by_replicas[take - 1]) if take else -1
            forced = {b for b in members if replicas_of(b) < boundary}
            room = take - len(forced)
            chosen: list[int] = []
            eligible = (b for b in members if replicas_of(b) <= boundary)
            for b in sorted(eligible, key=lambda b: (leaders_of(b), -replicas_of(b), tiebreak[b])):
                if len(chosen) == lead:
                    break
                if b in forced:
                    chosen.append(b)
                elif room > 0:
                    room -= 1
                    chosen.append(b)
            if len(chosen) < lead:
                return None
        else:
            chosen = sorted(members, key=lambda b: (leaders_of(b), -replicas_of(b), tiebreak[b]))[:lead]
        leaders.extend(chosen)
        picked = set(chosen)
        extras.update(
            sorted(members, key=lambda b: (replicas_of(b), b not in picked, -leaders_of(b), tiebreak[b]))[:take]
        )
    if base_count == 0 and not extras.issuperset(leaders):
        return None
    return extras, leaders


def _balance_score(
    racks: list[list[int]], replicas: Mapping[int, int], leaders: Mapping[int, int]
) -> tuple[int, int, int]:
    """How far a cluster state is from the one _choose_extras keeps (0, 0, 0): the spread of
    replicas and leaders beyond ±1; whether the high sets are not nested; how far they and
    their difference are from being spread over the racks within one."""

    def high(counts: Mapping[int, int]) -> set[int]:
        low = min(counts.values())
        return {b for b, c in counts.items() if c > low}

    def rack_spread(members: set[int]) -> int:
        per_rack = [sum(1 for b in rack if b in members) for rack in racks]
        return max(0, max(per_rack) - min(per_rack) - 1)

    spread = max(0, max(replicas.values()) - min(replicas.values()) - 1)
    spread += max(0, max(leaders.values()) - min(leaders.values()) - 1)
    high_replicas, high_leaders = high(replicas), high(leaders)
    nested = high_replicas <= high_leaders or high_leaders <= high_replicas
    racks_off = rack_spread(high_replicas) + rack_spread(high_leaders) + rack_spread(high_replicas ^ high_leaders)
    return spread, int(not nested), racks_off


def _fill(
    needs: list[int], supply: dict[int, int], forbidden: list[int | None], tiebreak: Mapping[int, int]
) -> list[list[int]] | None:
    """Row p takes needs[p] distinct columns, never forbidden[p]; column c is taken exactly
    supply[c] times (the totals are equal). A bipartite degree-constrained subgraph: rows take the
    columns with the most supply left (Ryser's greedy), then augmenting paths complete any row the
    greedy left short. None when no such subgraph exists."""
    if sum(needs) != sum(supply.values()) or min(supply.values(), default=0) < 0:
        return None
    left = dict(supply)
    rows: list[list[int]] = [[] for _ in needs]
    holders: dict[int, list[int]] = {c: [] for c in supply}
    for p in sorted(range(len(needs)), key=lambda p: -needs[p]):
        options = sorted((c for c in left if left[c] > 0 and c != forbidden[p]), key=lambda c: (-left[c], tiebreak[c]))
        for c in options[: needs[p]]:
            rows[p].append(c)
            holders[c].append(p)
            left[c] -= 1
    for p in range(len(needs)):
        while len(rows[p]) < needs[p]:
            if not _augment(p, rows, holders, left, forbidden):
                return None
    return rows


def _augment(
    start: int, rows: list[list[int]], holders: dict[int, list[int]], left: dict[int, int], forbidden: list[int | None]
) -> bool:
    """One more column for row ``start``: a shortest alternating path (start takes c1 from row w1,
    w1 takes c2 from w2, ..., the last row takes a column with supply left), breadth first."""
    parent: dict[int, tuple[int, int] | None] = {start: None}  # row -> (row it takes from, column)
    queue = [start]
    for row in queue:
        for c, remaining in left.items():
            if c in rows[row] or c == forbidden[row]:
                continue
            if remaining > 0:
                # Unwind: `row` takes c; each row on the path hands a column to the row before it.
                taker, column = row, c
                left[c] -= 1
                while True:
                    rows[taker].append(column)
                    holders[column].append(taker)
                    step = parent[taker]
                    if step is None:
                        return True
                    receiver, handed = step
                    rows[taker].remove(handed)
                    holders[handed].remove(taker)
                    taker, column = receiver, handed
            for holder in holders[c]:
                if holder not in parent:
                    parent[holder] = (row, c)
                    queue.append(holder)
    return False


def _stream_window_place(
    racks: list[list[int]],
    num_partitions: int,
    replication_factor: int,
    load: BrokerLoad,
    tiebreak: Mapping[int, int],
) -> list[list[int]]:
    """The plain stream layout with the last window's leaders re-matched: per-topic ±1 always,
    the cluster's balance only as far as the layout allows (the fallback of _stream_place)."""
    num_racks = len(racks)
    n = num_racks * len(racks[0])

    # Replica extras fall on stream positions 0 .. (P*RF mod N) - 1, i.e. on the lowest ranks
    # of the first residues: put the least replica-loaded rack on residue 0 and, within each
    # rack, the least replica-loaded brokers on the lowest ranks.
    def replicas_of(broker: int) -> int:
        return load.get(broker, (0, 0))[0]

    ranked = [sorted(members, key=lambda b: (replicas_of(b), tiebreak[b])) for members in racks]
    ranked.sort(key=lambda members: (sum(replicas_of(b) for b in members), min(tiebreak[b] for b in members)))
    layout = [ranked[i % num_racks][i // num_racks] for i in range(n)]

    g = gcd(replication_factor, n)
    cycle = n // g
    full = num_partitions - num_partitions % n  # partitions in whole blocks of N
    # Per leader offset k, the order of a block's offsets that puts offset k first.
    rotations = [[(k + j) % replication_factor for j in range(replication_factor)] for k in range(replication_factor)]
    doubled = layout + layout  # a block never runs past the second copy (RF <= N)
    placements: list[list[int]] = []
    append = placements.append
    # Leaders of all but the last window follow the stream's rule; the window (the last whole
    # block, if any, plus the partial block) is re-matched so its extra leaders go to the
    # least leader-loaded brokers.
    window_start = max(0, full - n)
    for p in range(window_start):
        base = (p * replication_factor) % n
        block = doubled[base : base + replication_factor]
        append([block[j] for j in rotations[(p // cycle) % g]])
    blocks = []
    for p in range(window_start, num_partitions):
        base = (p * replication_factor) % n
        blocks.append(doubled[base : base + replication_factor])
    every_broker_once = full > 0
    for block, offset in zip(blocks, _leader_offsets(blocks, load, tiebreak, every_broker_once), strict=True):
        append([block[j] for j in rotations[offset]])
    return placements


def _leader_offsets(
    blocks: list[list[int]], load: BrokerLoad, tiebreak: Mapping[int, int], every_broker_once: bool
) -> list[int]:
    """Leaders for the last window of partitions, as offsets into each partition's block.

    Choosing one replica per partition as its leader is a bipartite matching between leader
    *slots* and partitions. With ``every_broker_once`` (the window holds a whole block of N
    partitions plus the M of the partial block) every broker has a first slot, which must be
    matched, and a second, optional one; otherwise each broker has one optional slot. The
    stream's own leader rule shows a matching covering every partition exists. Slots are added
    first the mandatory ones, then in order of increasing leader load, each kept if it can be
    matched (Kuhn's augmenting paths never unmatch a matched slot): the extra leaders go to the
    least leader-loaded brokers the layout allows.
    """
    partitions_of: dict[int, list[int]] = {}
    for index, block in enumerate(blocks):
        for broker in block:
            partitions_of.setdefault(broker, []).append(index)
    holder: list[int | None] = [None] * len(blocks)  # partition index -> broker leading it

    def augment(broker: int, seen: set[int]) -> bool:
        for index in partitions_of[broker]:
            if index in seen:
                continue
            seen.add(index)
            current = holder[index]
            if current is None or augment(current, seen):
                holder[index] = broker
                return True
        return False

    by_load = sorted(partitions_of, key=lambda b: (load.get(b, (0, 0))[1], tiebreak[b]))
    matched = 0
    if every_broker_once:
        for broker in by_load:
            assert augment(broker, set()), "the stream layout gives every broker a leader per block"
            matched += 1
    for broker in by_load:
        if matched == len(blocks):
            break
        if augment(broker, set()):
            matched += 1
    offsets = []
    for index, block in enumerate(blocks):
        leader = holder[index]
        assert leader is not None, "the stream layout always admits a leader for every partition"
        offsets.append(block.index(leader))
    return offsets


def _greedy_place(
    brokers: Sequence[UsableBroker],
    num_partitions: int,
    replication_factor: int,
    load: BrokerLoad,
    tiebreak: Mapping[int, int],
) -> list[list[int]]:
    """Least-loaded first, rack spread first; leaders balanced exactly among unfenced brokers."""
    rack_of = {b.id: b.rack for b in brokers}
    fenced = {b.id for b in brokers if b.fenced}
    unfenced = [b.id for b in brokers if not b.fenced]
    all_ids = [b.id for b in brokers]
    num_unfenced = len(unfenced)
    topic_replicas = dict.fromkeys(all_ids, 0)
    topic_leaders = dict.fromkeys(all_ids, 0)
    cluster_replicas = {b: load.get(b, (0, 0))[0] for b in all_ids}
    cluster_leaders = {b: load.get(b, (0, 0))[1] for b in all_ids}
    placements: list[list[int]] = []
    for _ in range(num_partitions):
        leader = min(
            unfenced,
            key=lambda b: (topic_leaders[b], cluster_leaders[b], topic_replicas[b], cluster_replicas[b], tiebreak[b]),
        )
        replicas = [leader]
        used_racks = {rack_of[leader]}
        chosen = {leader}
        need_fenced = replication_factor > num_unfenced
        for _replica in range(replication_factor - 1):
            # Fenced brokers are candidates only when the unfenced ones cannot hold the factor.
            pool = all_ids if need_fenced else unfenced
            follower = min(
                (b for b in pool if b not in chosen),
                key=lambda b: (
                    rack_of[b] in used_racks,
                    b in fenced,
                    topic_replicas[b],
                    cluster_replicas[b],
                    tiebreak[b],
                ),
            )
            replicas.append(follower)
            chosen.add(follower)
            used_racks.add(rack_of[follower])
        for b in replicas:
            topic_replicas[b] += 1
            cluster_replicas[b] += 1
        topic_leaders[leader] += 1
        cluster_leaders[leader] += 1
        placements.append(replicas)
    return placements
