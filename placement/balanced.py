"""raftmeta's balanced placer: Kafka's placement constraints, leaders and replicas within ±1.

Kafka's placers balance only in expectation: run on Kafka's own code with
``java.util.Random(0)``, 3 racks x 3 brokers, 54 partitions, RF 3, the striped placer gives
leaders per broker [3, 3, 12, 12, 6, 0, 6, 9, 3] (mean 6), and neither Kafka placer looks at
the load already on each broker. This placer keeps the constraints (distinct brokers per
partition, min(RF, racks) racks per partition, an unfenced leader, fenced brokers only when the
unfenced ones cannot hold the replication factor) and promises, per topic:

* **Equal racks** (every rack has the same number of unfenced brokers, at least one, and there
  are at least RF unfenced brokers): leader counts *and* replica counts per unfenced broker are within ±1 of each
  other, fenced brokers get nothing. This is the *stream layout* below, exact by construction.
* **Otherwise** (unequal racks, a rack of fenced brokers only, or fenced brokers needed to
  reach the factor): leader counts per unfenced broker are
  within ±1 (any unfenced broker can lead); replicas are placed greedily, least-loaded broker
  first, with rack spread taking priority. With unequal racks, rack spread forces more replicas
  onto the brokers of small racks (as in Kafka), so ±1 across all brokers is not achievable
  in general; the greedy keeps brokers of one rack close to each other.

Load awareness: ``load`` maps broker id -> (replicas, leaders) already on the broker. Per-topic
counts are fixed by the ±1 promise (each broker gets the floor or the ceiling of its share);
the *extra* replicas and leaders of a topic go to the brokers with the least load, so the
cluster as a whole stays balanced as topics accumulate. Ties are broken by a permutation of the
brokers drawn from the random source, so the same input and seed give the same assignment.

Stream layout. Arrange the N unfenced brokers in a rack-alternated list (position i is in rack
``i mod R``; N is a multiple of R when racks are equal). Lay the P*RF replica slots of the topic
one after another along the list, wrapping around: partition p takes positions
``p*RF .. p*RF + RF - 1`` (mod N). Consecutive positions are in consecutive racks, so a
partition spans min(RF, R) racks and never repeats a broker (RF <= N); the slots go round the
list evenly, so replica counts differ by at most one. The leader of partition p is its replica
at offset ``(p // c) mod g`` in its block, where g = gcd(RF, N) and c = N / g: the block starts
``p*RF mod N`` of one cycle of c partitions are exactly the multiples of g, and the offset moves
the next cycle to the next residue class, so every N consecutive partitions lead every position
exactly once: leader counts differ by at most one. The load-aware part: which broker sits at
which position decides where the extra replicas fall (the least replica-loaded racks and
brokers), and the leaders of the last window of partitions (the last whole block plus the
partial one) are re-chosen by a bipartite matching so the extra leaders go to the least
leader-loaded brokers the layout allows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
