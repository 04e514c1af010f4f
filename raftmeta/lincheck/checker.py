"""Is a client history linearizable? Wing & Gong's search with Lowe's memoization, per topic.

The algorithm is Porcupine's (github.com/anishathalye/porcupine, checker.go), re-derived here:
the history's call and return entries sit in one list ordered by time (a call before a return at
the same instant: intervals are closed). Walking it, a call entry is tried as the next operation
of the linearization: if the model accepts it and the pair (the set of operations linearized so
far, the model state after them) was never reached before, it is *lifted* out of the list (its
call and return) and the walk restarts from the head; otherwise the walk moves on. Reaching a
return entry means that operation had to be linearized by now and none of the choices made
allows it: the last choice is undone and the walk resumes after it. A list with no operation of
known outcome left is a witness (the open-ended ones that remain go last);
backtracking past the first choice proves the history is not linearizable. The cache of (set,
state) pairs is Lowe's: the same set of operations ending in the same state has the same future,
so it is explored once.

P-compositionality: each operation touches one topic name, so the history is linearizable iff
each topic's sub-history is (Herlihy & Wing's locality); each is searched alone. A describe of
many topics is checked as one describe per topic, which is weaker than a snapshot across topics:
every violation found is real, a cross-topic skew is not looked for.

The search is exponential in the worst case, so it is bounded by a budget of model steps per
topic; a topic that exhausts it gets the verdict ``unknown`` rather than a hang.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from raftmeta.lincheck.model import ABSENT, HistoryError, Operation, step

Verdict = Literal["ok", "illegal", "unknown"]
# Model steps a topic's search may take before it gives up with ``unknown``.
DEFAULT_BUDGET = 2_000_000


@dataclass(frozen=True, slots=True)
class TopicFailure:
    """Why one topic's history is not linearizable. ``prefix`` is the longest linearizable prefix
    the search found (Porcupine reports the same), ``state`` the model state after it, and
    ``unplaceable`` the operations that were pending after it -- invoked before ``blocked``
    completed -- none of which can come next. ``blocked`` is the operation whose completion
    forces the choice: it had to take effect by then."""

    topic: str
    prefix: tuple[int, ...]
    state: int
    unplaceable: tuple[int, ...]
    blocked: int


@dataclass(frozen=True, slots=True)
class CheckResult:
    verdict: Verdict
    # topic -> a linearization (op ids in order), for every topic found linearizable.
    witness: dict[str, tuple[int, ...]] = field(default_factory=dict)
    failures: tuple[TopicFailure, ...] = ()
    exhausted: tuple[str, ...] = ()  # topics whose search ran out of budget
    steps: int = 0  # model steps taken, over every topic

    def describe(self) -> str:
        if self.verdict == "ok":
            return f"linearizable ({len(self.witness)} topics, {self.steps} steps)"
        if self.verdict == "unknown":
            return f"unknown: budget exhausted on topics {', '.join(self.exhausted)}"
        first = self.failures[0]
        return (
            f"not linearizable: topic {first.topic!r}, after a linearizable prefix of {len(first.prefix)} "
            f"operations none of {list(first.unplaceable)} can take effect before operation {first.blocked} completes"
        )


@dataclass(frozen=True, slots=True)
class _TopicResult:
    linearizable: bool | None  # None: budget exhausted
    order: tuple[int, ...]
    failure: TopicFailure | None
    steps: int


def check_history(ops: Iterable[Operation], *, budget: int = DEFAULT_BUDGET) -> CheckResult:
    """Check every topic's sub-history; illegal if any topic is, unknown if any ran out of budget."""
    by_topic: dict[str, list[Operation]] = {}
    seen: set[int] = set()
    for op in ops:
        if op.op_id in seen:
            raise HistoryError(f"operation {op.op_id}: op_id appears twice (ids must be unique in a history)")
        seen.add(op.op_id)
        by_topic.setdefault(op.topic, []).append(op)
    witness: dict[str, tuple[int, ...]] = {}
    failures: list[TopicFailure] = []
    exhausted: list[str] = []
    steps = 0
    for topic in sorted(by_topic):
        result = check_topic(topic, by_topic[topic], budget=budget)
        steps += result.steps
        if result.linearizable is None:
            exhausted.append(topic)
        elif result.failure is not None:
            failures.append(result.failure)
        else:
            witness[topic] = result.order
    verdict: Verdict = "illegal" if failures else "unknown" if exhausted else "ok"
    return CheckResult(verdict, witness, tuple(failures), tuple(exhausted), steps)


def check_topic(topic: str, ops: Sequence[Operation], *, budget: int = DEFAULT_BUDGET) -> _TopicResult:
    """The search over one topic's operations (all of ``ops`` must name ``topic``)."""
    n = len(ops)

    # Entries 1..2n: entry 2i+1 is op i's call, 2i+2 its return; 0 is the list's head.
    def time_of(entry: int) -> tuple[float, int]:
        op = ops[(entry - 1) // 2]
        if entry % 2:
            return (op.invoke, 0)
        end: float = math.inf if op.open_ended or op.complete is None else op.complete
        return (end, 1)

    order = sorted(range(1, 2 * n + 1), key=time_of)
    nxt = [0] * (2 * n + 2)
    prv = [0] * (2 * n + 2)
    last = 0
    for entry in order:
        nxt[last], prv[entry] = entry, last
        last = entry
    nxt[last] = -1
    head = 0

    def lift(call: int) -> None:
        for e in (call, call + 1):
            nxt[prv[e]] = nxt[e]
            if nxt[e] != -1:
                prv[nxt[e]] = prv[e]

    def unlift(call: int) -> None:
        for e in (call + 1, call):
            nxt[prv[e]] = e
            if nxt[e] != -1:
                prv[nxt[e]] = e

    open_ended = [op.open_ended for op in ops]
    must_place = sum(not o for o in open_ended)  # operations with a known outcome
    state = ABSENT
    placed = 0  # of the operations with a known outcome
    linearized = 0  # bitset of every operation linearized so far
    unknown_used = 0  # bitset of the open-ended ones among them
    # (known-outcome bitset, state) -> the open-ended bitsets it was reached with (see below).
    cache: dict[tuple[int, int], list[int]] = {}
    calls: list[tuple[int, int]] = []  # (call entry, state before it)
    best: TopicFailure | None = None
    steps = 0
    entry = nxt[head]
    while placed < must_place:
        if entry % 2:  # a call: try it next
            if steps >= budget:
                return _TopicResult(None, (), None, steps)
            steps += 1
            index = (entry - 1) // 2
            ok, after = step(state, ops[index])
            if ok:
                bit = 1 << index
                used = unknown_used | bit if open_ended[index] else unknown_used
                known = (linearized | bit) & ~used
                reached = cache.setdefault((known, after), [])
                # Lowe's memoization, with dominance for open-ended operations: one may always go
                # last (where nothing observes it), so a configuration that used a superset of the
                # open-ended operations of one already explored, with the same known-outcome
                # operations placed and the same state, has no future the other lacks.
                if not any(seen & ~used == 0 for seen in reached):
                    reached.append(used)
                    calls.append((entry, state))
                    state, linearized, unknown_used = after, linearized | bit, used
                    placed += not open_ended[index]
                    lift(entry)
                    entry = nxt[head]
                    continue
            entry = nxt[entry]
            continue
        # A return: its operation had to be linearized by now.
        if best is None or len(calls) > len(best.prefix):
            best = _failure(topic, ops, calls, state, entry, nxt, head)
        if not calls:
            assert best is not None
            return _TopicResult(False, (), best, steps)
        entry, state = calls.pop()
        index = (entry - 1) // 2
        linearized &= ~(1 << index)
        unknown_used &= ~(1 << index)
        placed -= not open_ended[index]
        unlift(entry)
        entry = nxt[entry]
    # Every operation with a known outcome is placed; the open-ended rest go last, in any order.
    order = [ops[(e - 1) // 2].op_id for e, _ in calls]
    order.extend(op.op_id for i, op in enumerate(ops) if not linearized >> i & 1)
    return _TopicResult(True, tuple(order), None, steps)


def _failure(
    topic: str,
    ops: Sequence[Operation],
    calls: list[tuple[int, int]],
    state: int,
    blocked: int,
    nxt: list[int],
    head: int,
) -> TopicFailure:
    pending = []
    entry = nxt[head]
    while entry != blocked:
        if entry % 2:
            pending.append(ops[(entry - 1) // 2].op_id)
        entry = nxt[entry]
    return TopicFailure(
        topic,
        tuple(ops[(e - 1) // 2].op_id for e, _ in calls),
        state,
        tuple(pending),
        ops[(blocked - 1) // 2].op_id,
    )


def failing_window(ops: Sequence[Operation], failure: TopicFailure) -> list[Operation]:
    """The operations of the failing topic that explain ``failure``: the last one of the prefix,
    the last one of the prefix that changed the state (it set the state the rest cannot follow), the
    unplaceable ones, and every operation of the topic overlapping the span from the earliest of
    those to ``blocked``'s completion -- in invocation order."""
    by_id = {op.op_id: op for op in ops if op.topic == failure.topic}
    core = [by_id[i] for i in failure.unplaceable]
    if failure.prefix:
        core.append(by_id[failure.prefix[-1]])
        state, setter = ABSENT, None
        for op_id in failure.prefix:
            _, after = step(state, by_id[op_id])
            if after != state:
                setter = op_id
            state = after
        if setter is not None:
            core.append(by_id[setter])
    start = min(op.invoke for op in core)
    blocked = by_id[failure.blocked]
    end = blocked.complete if blocked.complete is not None else blocked.invoke
    window = {op.op_id: op for op in core}
    for op in by_id.values():
        op_end = math.inf if op.open_ended or op.complete is None else op.complete
        if op.invoke <= end and op_end >= start:
            window.setdefault(op.op_id, op)
    return sorted(window.values(), key=lambda op: (op.invoke, op.op_id))
