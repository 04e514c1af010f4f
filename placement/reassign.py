"""Reassignment plans: where existing partitions should move, with as few replica moves as possible.

``plan_reassignment(current, brokers, ...)`` takes the current assignment (topic -> replica lists,
preferred leader first) and returns a :class:`ReassignmentPlan`: the proposed assignment, the
partitions that change, the number of replica moves (replicas placed on a broker that did not hold
them: the data that has to be copied) and the balance figures before (over every broker given) and
after (over the target brokers) (:func:`placement.metrics.balance_report`). Pure and deterministic:
ties break by broker id.

Rack spread is a constraint, as in Kafka (``kafka-reassign-partitions.sh --generate`` is rack-aware
unless told ``--disable-rack-aware``; Cruise Control's RackAwareGoal is a hard goal): no move takes
a partition onto fewer racks while a target broker can keep its racks. Balance is sought within
that. ``rack_aware=False`` (the CLI's ``--disable-rack-aware``) lets balance come first; rack
spread then only breaks ties.

Goals, in order:

1. **Evacuate.** Every replica on an excluded broker (``exclude``), or outside ``pool`` when one is
   given, moves -- and nothing else does, so the number of moves is exactly the number of those
   replicas (the least possible). A replacement takes the evacuated replica's position (a moved
   preferred leader is replaced as preferred leader) and is chosen among the *target brokers*
   (unfenced, not excluded, in the pool) not already in the partition: first one on a rack the
   partition's other replicas do not use, then one below the cap (ceil(replicas / target brokers):
   the lowest most-loaded count the targets can reach), then the least loaded, then the lowest id
   (without rack awareness: the cap first, then the rack). Retiring a broker of a smaller rack
   therefore loads its rack-mates more than the rest (they now hold that rack's replica of every
   partition it carried), as Kafka's rack-aware assignment does; without rack awareness an
   evacuation never raises the most loaded broker above the cap or the most loaded before.
2. **Rebalance** (``rebalance=True``): then, while the most and least loaded target brokers differ
   by two replicas or more, move one replica from the most loaded to the least loaded broker that
   does not hold that partition and keeps its racks (without rack awareness: a rack-keeping move
   first, any other if none). Each such move lowers the minimum number of moves still needed by
   one, so the plan reaches replica counts within ±1 in the fewest moves where racks allow it
   (without racks this is always achievable: a broker with two more replicas than another always
   holds a partition the other lacks). Then preferred leaders are evened out by reordering
   replica lists (no data moves): while a broker leads two partitions more than another that holds
   a replica of one of them, that replica becomes the preferred leader.
3. ``placer="balanced"`` replaces step 2 by a fresh placement of each topic with
   :class:`~placement.balanced.BalancedReplicaPlacer` over the target brokers (its per-topic ±1
   promise for leaders and replicas, load-aware across the planned topics; rack-aware unless
   ``rack_aware=False``), each placed replica list given to the partition it overlaps most
   (greedy), so only the brokers that differ move. More moves than the minimal plan, stronger
   balance per topic.

Load outside the plan (other topics) is not counted: balance is that of the planned topics, as in
Kafka's ``kafka-reassign-partitions.sh --generate``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from placement.balanced import BalancedReplicaPlacer
from placement.brokers import UsableBroker, check_distinct_ids
from placement.errors import InvalidReplicationFactorError, PlacementError
from placement.metrics import BalanceReport, balance_report
from placement.pools import pool_names
from placement.rng import RandomSource

Assignment = dict[str, list[list[int]]]
PLAN_PLACERS = ("minimal", "balanced")


@dataclass(frozen=True, slots=True)
class ReassignmentPlan:
    current: Assignment
    proposed: Assignment
    # Replicas placed on a broker that did not hold them (the copies the move needs).
    moves: int
    # Partitions whose replica list changes only in order (a new preferred leader, no copy).
    reorders: int
    before: BalanceReport
    after: BalanceReport

    def changed(self) -> list[tuple[str, int, list[int]]]:
        """(topic, partition, new replicas) for every partition the plan changes, by topic then id."""
        return [
            (topic, pid, replicas)
            for topic in sorted(self.proposed)
            for pid, replicas in enumerate(self.proposed[topic])
            if replicas != self.current[topic][pid]
        ]

    def to_kafka_json(self) -> dict[str, Any]:
        """Kafka's reassignment JSON (kafka-reassign-partitions.sh --reassignment-json-file)."""
        return {
            "version": 1,
            "partitions": [{"topic": t, "partition": p, "replicas": r} for t, p, r in self.changed()],
        }

    def current_json(self) -> dict[str, Any]:
        """The current assignment of the changed partitions, in the same format (to roll back)."""
        return {
            "version": 1,
            "partitions": [{"topic": t, "partition": p, "replicas": self.current[t][p]} for t, p, _ in self.changed()],
        }


def count_moves(current: Mapping[str, Sequence[Sequence[int]]], proposed: Mapping[str, Sequence[Sequence[int]]]) -> int:
    """Replicas in ``proposed`` on a broker that did not hold that partition in ``current``."""
    return sum(
        len(set(new) - set(old))
        for topic, partitions in proposed.items()
        for old, new in zip(current[topic], partitions, strict=True)
    )


def plan_reassignment(
    current: Mapping[str, Sequence[Sequence[int]]],
    brokers: Sequence[UsableBroker],
    *,
    exclude: Collection[int] = (),
    pool: str | None = None,
    rebalance: bool = False,
    placer: str = "minimal",
    random: RandomSource | None = None,
    rack_aware: bool = True,
) -> ReassignmentPlan:
    """The plan for ``current`` on ``brokers`` (see the module docstring). Raises ``PlacementError``
    (``InvalidReplicationFactorError`` when the target brokers cannot hold a partition)."""
    if placer not in PLAN_PLACERS:
        raise PlacementError(f"plan placer must be one of {', '.join(PLAN_PLACERS)}, got {placer!r}")
    if placer == "balanced" and random is None:
        raise PlacementError("the balanced plan placer needs a random source (ties between equal brokers)")
    check_distinct_ids(brokers)
    known = {b.id for b in brokers}
    unknown = sorted(set(exclude) - known)
    if unknown:
        raise PlacementError(f"exclude: brokers {unknown} are not registered")
    if pool is not None and pool not in pool_names(brokers):
        known_pools = ", ".join(pool_names(brokers)) or "none"
        raise PlacementError(f"broker pool '{pool}' has no registered brokers (known pools: {known_pools}).")
    excluded = set(exclude)
    targets = [b for b in brokers if not b.fenced and b.id not in excluded and (pool is None or b.pool == pool)]
    if not targets:
        raise InvalidReplicationFactorError("No unfenced broker is left to move replicas to.")
    before_plan: Assignment = {topic: [list(r) for r in parts] for topic, parts in current.items()}
    proposed: Assignment = {topic: [list(r) for r in parts] for topic, parts in current.items()}
    for topic, parts in proposed.items():
        for pid, replicas in enumerate(parts):
            if len(replicas) > len(targets):
                raise InvalidReplicationFactorError(
                    f"{topic}-{pid}: replication factor {len(replicas)} is larger than the {len(targets)} "
                    "target broker(s) (unfenced, not excluded, in the pool)."
                )
            if len(set(replicas)) != len(replicas) or not replicas:
                raise PlacementError(f"{topic}-{pid}: replicas {replicas} are empty or name a broker twice")
    planner = _Planner(targets, proposed, {b.id: b.rack for b in brokers}, rack_aware)
    pool_of = {b.id: b.pool for b in brokers}
    # Fenced brokers that are neither excluded nor outside the pool keep their replicas.
    planner.evacuate(lambda broker: broker in excluded or (pool is not None and pool_of.get(broker) != pool))
    if rebalance:
        if placer == "balanced":
            assert random is not None
            planner.replace_balanced(random)
        else:
            planner.rebalance_replicas()
            planner.rebalance_leaders()
    else:
        # Reordering a partition that moves anyway is free: even out preferred leaders among those.
        moving = {
            id(new)
            for topic in proposed
            for old, new in zip(before_plan[topic], proposed[topic], strict=True)
            if old != new
        }
        planner.rebalance_leaders(lambda replicas: id(replicas) in moving)
    reorders = sum(
        1
        for topic in proposed
        for old, new in zip(before_plan[topic], proposed[topic], strict=True)
        if old != new and set(old) == set(new)
    )
    return ReassignmentPlan(
        current=before_plan,
        proposed=proposed,
        moves=count_moves(before_plan, proposed),
        reorders=reorders,
        # Before: over every registered broker (racks included); after: over the target brokers.
        before=balance_report(before_plan, brokers),
        after=balance_report(proposed, targets),
    )


class _Planner:
    """Mutable working state: the proposed assignment and per-broker counts over it."""

    def __init__(
        self,
        targets: Sequence[UsableBroker],
        proposed: Assignment,
        rack_of: Mapping[int, str | None],
        rack_aware: bool,
    ) -> None:
        self.targets = sorted(targets, key=lambda b: b.id)
        self.rack_aware = rack_aware
        self.target_ids = {b.id for b in targets}
        # Racks of every registered broker: a partition's replicas outside the targets use racks too.
        self.rack = dict(rack_of)
        self.proposed = proposed
        self.count: dict[int, int] = {b.id: 0 for b in targets}
        self.leaders: dict[int, int] = {b.id: 0 for b in targets}
        for parts in proposed.values():
            for replicas in parts:
                for broker in replicas:
                    self.count[broker] = self.count.get(broker, 0) + 1
                self.leaders[replicas[0]] = self.leaders.get(replicas[0], 0) + 1

    def _racks_of_others(self, replicas: Sequence[int], leaving: int, gone: Any = None) -> set[str | None]:
        """Racks the partition keeps using without ``leaving`` (and without replicas that are
        ``gone`` too: they will be replaced as well)."""
        return {self.rack.get(b) for b in replicas if b != leaving and not (gone is not None and gone(b))}

    def _move(self, replicas: list[int], index: int, to: int) -> None:
        leaving = replicas[index]
        self.count[leaving] -= 1
        self.count[to] = self.count.get(to, 0) + 1
        if index == 0:
            self.leaders[leaving] -= 1
            self.leaders[to] = self.leaders.get(to, 0) + 1
        replicas[index] = to

    def evacuate(self, must_leave: Any) -> None:
        """Move every replica ``must_leave`` names, and nothing else. A replacement goes to a target
        broker on a rack the partition's other replicas do not use, if any can take it; then below
        the cap -- ceil(replicas on the targets after the move / targets), the lowest most-loaded
        count possible; then the least loaded (leaders too, for a leader's place); then the lowest
        id. Without rack awareness the cap comes before the rack: the most loaded broker then never
        rises above max(the cap, the most loaded before) unless the partition's own replicas leave
        it no other choice."""
        leaving = [
            (replicas, index)
            for topic in sorted(self.proposed)
            for replicas in self.proposed[topic]
            for index, broker in enumerate(replicas)
            if must_leave(broker)
        ]
        held = sum(self.count[b.id] for b in self.targets) + len(leaving)
        cap = -(-held // len(self.targets))
        for replicas, index in leaving:
            others = self._racks_of_others(replicas, replicas[index], must_leave)
            lead = index == 0
            # The preference's last item is the broker id: the smallest tuple names the choice.
            best = min(self._preference(b.id, others, cap, lead) for b in self.targets if b.id not in replicas)
            self._move(replicas, index, best[-1])

    def _preference(
        self, broker: int, others: set[str | None], cap: int, lead: bool
    ) -> tuple[bool, bool, int, int, int]:
        """How good a home ``broker`` is for an evacuated replica (smaller is better): a rack the
        partition's ``others`` do not use, below the ``cap`` (in the other order without rack
        awareness), the fewest replicas, the fewest leaders (for a leader's place), the lowest id."""
        shared, full = self.rack[broker] in others, self.count[broker] >= cap
        first, second = (shared, full) if self.rack_aware else (full, shared)
        return first, second, self.count[broker], self.leaders[broker] if lead else 0, broker

    def rebalance_replicas(self) -> None:
        ids = [b.id for b in self.targets]
        while True:
            donors = sorted(ids, key=lambda b: (-self.count[b], b))
            receivers = sorted(ids, key=lambda b: (self.count[b], b))
            move = self._find_move(donors, receivers)
            if move is None:
                return
            replicas, index, to = move
            self._move(replicas, index, to)

    def _find_move(self, donors: list[int], receivers: list[int]) -> tuple[list[int], int, int] | None:
        for donor in donors:
            for receiver in receivers:
                if self.count[donor] - self.count[receiver] < 2:
                    break
                fallback: tuple[list[int], int, int] | None = None
                for topic in sorted(self.proposed):
                    for replicas in self.proposed[topic]:
                        if donor not in replicas or receiver in replicas:
                            continue
                        index = replicas.index(donor)
                        others = self._racks_of_others(replicas, donor)
                        if len(others | {self.rack[receiver]}) >= len(others | {self.rack[donor]}):
                            return replicas, index, receiver  # the partition keeps as many racks
                        if fallback is None and not self.rack_aware:
                            fallback = (replicas, index, receiver)
                if fallback is not None:
                    return fallback
        return None

    def rebalance_leaders(self, eligible: Callable[[list[int]], bool] | None = None) -> None:
        """Move preferred leadership from a broker leading the most partitions to one leading at
        least two fewer, along a chain of partitions (u leads p, v holds a replica of p: v can take
        p's lead from u). Only the ends of a chain change their count, so each chain lowers
        sum(leaders^2) and the loop ends; it stops when no chain exists."""
        ids = [b.id for b in self.targets]
        while True:
            top = max(self.leaders[b] for b in ids)
            if top - min(self.leaders[b] for b in ids) <= 1:
                return
            # Only brokers leading an eligible partition can give one up.
            led_by: dict[int, list[list[int]]] = {}
            for topic in sorted(self.proposed):
                for replicas in self.proposed[topic]:
                    if eligible is None or eligible(replicas):
                        led_by.setdefault(replicas[0], []).append(replicas)
            chain = None
            for source in sorted(b for b in ids if self.leaders[b] == top):
                chain = self._leader_chain(source, top - 2, led_by)
                if chain is not None:
                    break
            if chain is None:
                return
            for replicas, to in chain:
                index = replicas.index(to)
                replicas[0], replicas[index] = to, replicas[0]
            self.leaders[source] -= 1
            self.leaders[chain[-1][1]] += 1

    def _leader_chain(
        self, source: int, at_most: int, led_by: dict[int, list[list[int]]]
    ) -> list[tuple[list[int], int]] | None:
        """Breadth-first: the shortest chain of (partition, new leader) from ``source`` to a target
        broker leading at most ``at_most`` partitions."""
        previous: dict[int, tuple[int, list[int]]] = {}
        frontier = [source]
        seen = {source}
        while frontier:
            following: list[int] = []
            for broker in frontier:
                for replicas in led_by.get(broker, []):
                    for candidate in replicas[1:]:
                        if candidate in seen or candidate not in self.target_ids:
                            continue
                        seen.add(candidate)
                        previous[candidate] = (broker, replicas)
                        if self.leaders[candidate] <= at_most:
                            chain: list[tuple[list[int], int]] = []
                            node = candidate
                            while node != source:
                                parent, partition = previous[node]
                                chain.append((partition, node))
                                node = parent
                            chain.reverse()
                            return chain
                        following.append(candidate)
            frontier = following
        return None

    def replace_balanced(self, random: RandomSource) -> None:
        placer = BalancedReplicaPlacer(random)
        # Without rack awareness the placer sees no racks (as Kafka's --disable-rack-aware).
        targets = self.targets if self.rack_aware else [replace(b, rack=None) for b in self.targets]
        load: dict[int, tuple[int, int]] = {b.id: (0, 0) for b in self.targets}
        for topic in sorted(self.proposed):
            parts = self.proposed[topic]
            rf = len(parts[0])
            placed = placer.place(targets, len(parts), rf, load)
            for replicas in placed:
                for broker in replicas:
                    count, leads = load[broker]
                    load[broker] = (count + 1, leads + (1 if broker == replicas[0] else 0))
            # Give each placed list to the still unmatched partition it overlaps most (fewest copies).
            free = list(range(len(parts)))
            matched: dict[int, list[int]] = {}
            by_overlap = sorted(placed, key=lambda r: -max(len(set(r) & set(parts[p])) for p in range(len(parts))))
            for replicas in by_overlap:
                best = max(free, key=lambda p: (len(set(replicas) & set(parts[p])), -p))
                free.remove(best)
                matched[best] = list(replicas)
            self.proposed[topic] = [matched[p] for p in range(len(parts))]


__all__ = ["PLAN_PLACERS", "ReassignmentPlan", "count_moves", "plan_reassignment"]
