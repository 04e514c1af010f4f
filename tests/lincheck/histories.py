"""Seeded client histories of topic metadata, for the linearizability checker's tests.

:func:`linearizable_history` runs the model itself: each client issues operations one after
another, each takes effect at a point drawn inside its [invoke, complete] window (so windows of
different clients overlap and the checker has orders to search), and its outcome is the one the
model gives at that point -- linearizable by construction. Some outcomes become unknown: the
client lost the answer, and the operation either took effect or never did.

:func:`planted_history` then breaks one such history the way a broken store would:
``stale_read`` (a describe answers the state from before a change that completed before it was
invoked), ``lost_create`` and ``resurrected_delete`` (the same, for a create or a delete),
``double_create`` (a create answered ok on a topic that already existed) and
``wrong_partition_count`` (a describe shows a count the topic never had).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

from raftmeta.lincheck.model import ABSENT, LISTED, Operation, step

PLANTED = ("stale_read", "lost_create", "resurrected_delete", "double_create", "wrong_partition_count")
KIND_WEIGHTS = {"create": 30, "delete": 20, "create_partitions": 15, "describe": 35}


@dataclass(frozen=True, slots=True)
class Change:
    """An operation that took effect and changed its topic's state."""

    op: Operation
    point: float  # when it took effect
    before: int
    after: int


@dataclass(frozen=True, slots=True)
class Execution:
    ops: list[Operation]
    changes: list[Change]


@dataclass(frozen=True, slots=True)
class Shape:
    clients: int
    topics: int
    per_client: int  # operations each client issues, one after another
    unknown_rate: float  # the chance an outcome is lost


def execute(rng: random.Random, shape: Shape) -> Execution:
    names = [f"t{i}" for i in range(shape.topics)]
    # (point, tiebreak, op draft, outcome lost, takes effect)
    drafts: list[tuple[float, float, Operation, bool, bool]] = []
    op_id = 0
    for client in range(shape.clients):
        free = rng.randint(0, 5)
        for _ in range(shape.per_client):
            invoke = free + rng.randint(0, 4)
            complete = invoke + rng.randint(0, 12)
            kind = rng.choices(list(KIND_WEIGHTS), weights=list(KIND_WEIGHTS.values()))[0]
            arg = rng.randint(1, 3) if kind == "create" else rng.randint(1, 5) if kind == "create_partitions" else 0
            unknown = rng.random() < shape.unknown_rate
            takes_effect = not unknown or rng.random() < 0.5
            # Unknown ops that took effect may do so after the client gave up, as a retry landing late.
            end = complete + (rng.randint(0, 20) if unknown else 0)
            point = rng.uniform(invoke, end)
            draft = Operation(op_id, client, rng.choice(names), kind, invoke, complete, "unknown", arg=arg)
            drafts.append((point, rng.random(), draft, unknown, takes_effect))
            op_id += 1
            free = complete + 1
    state = dict.fromkeys(names, ABSENT)
    ops: list[Operation] = []
    changes: list[Change] = []
    for point, _, draft, unknown, takes_effect in sorted(drafts, key=lambda d: (d[0], d[1])):
        if not takes_effect:
            ops.append(_unknown(rng, draft))
            continue
        before = state[draft.topic]
        result, observed = _outcome(draft, before)
        done = replace(draft, result=result, observed=observed)
        ok, after = step(before, done)
        assert ok, done
        state[draft.topic] = after
        if after != before:
            changes.append(Change(done, point, before, after))
        ops.append(_unknown(rng, done) if unknown else done)
    ops.sort(key=lambda op: op.op_id)
    return Execution(ops, changes)


def _unknown(rng: random.Random, op: Operation) -> Operation:
    """The client never learned the outcome: it gave up at its completion time, or never did."""
    return replace(op, result="unknown", observed=None, complete=op.complete if rng.random() < 0.5 else None)


def _outcome(op: Operation, state: int) -> tuple[str, int | None]:
    if op.kind == "describe":
        # One read in four is a listing of names: it sees presence, not the count.
        return "ok", LISTED if op.arg == 0 and state != ABSENT and op.op_id % 4 == 0 else state
    for result in ("ok", "topic_already_exists", "unknown_topic_or_partition", "invalid_partitions"):
        try:
            ok, _ = step(state, replace(op, result=result))
        except ValueError:
            continue  # not an outcome of this kind
        if ok:
            return result, None
    raise AssertionError(f"no outcome for {op} in state {state}")


def linearizable_history(seed: int) -> list[Operation]:
    rng = random.Random(seed)
    return execute(rng, _shape(rng)).ops


def _shape(rng: random.Random) -> Shape:
    """Mostly small histories over a few names; one in ten long and contended on one or two
    names, where the search has to lean on its cache."""
    if rng.random() < 0.1:
        return Shape(rng.randint(5, 6), 1, rng.randint(10, 20), 0.05)
    return Shape(rng.randint(2, 5), rng.randint(1, 3), rng.randint(3, 10), rng.choice((0.0, 0.1, 0.25)))


def planted_history(seed: int, kind: str) -> list[Operation]:
    """A history with one planted anomaly of ``kind``: executions are drawn from ``seed`` on
    until one has an operation to break that way."""
    rng = random.Random(seed)
    while True:
        execution = execute(rng, _shape(rng))
        broken = _plant(rng, execution, kind)
        if broken is not None:
            return broken


def _plant(rng: random.Random, execution: Execution, kind: str) -> list[Operation] | None:
    ops = execution.ops
    reads = [op for op in ops if op.kind == "describe" and op.result == "ok"]
    target: Operation | None = None
    if kind == "double_create":
        refused = [op for op in ops if op.kind == "create" and op.result == "topic_already_exists"]
        if refused:
            target = replace(rng.choice(refused), result="ok")
    elif kind == "wrong_partition_count":
        if reads:
            read = rng.choice(reads)
            held = [c.after for c in execution.changes if c.op.topic == read.topic]
            target = replace(read, observed=max(held, default=0) + 1)
    else:
        wanted = {"stale_read": None, "lost_create": "create", "resurrected_delete": "delete"}[kind]
        candidates = []
        for read in reads:
            done = [
                c
                for c in execution.changes
                if c.op.topic == read.topic and c.op.complete is not None and c.op.complete < read.invoke
            ]
            if not done or (wanted is not None and done[-1].op.kind != wanted):
                continue
            stale = done[-1].before
            # A listing shows presence only: stale for it means present where now absent, or absent.
            shown = LISTED if stale != ABSENT and read.observed == LISTED else stale
            if shown != read.observed:
                candidates.append(replace(read, observed=shown))
        if candidates:
            target = rng.choice(candidates)
    if target is None:
        return None
    return [target if op.op_id == target.op_id else op for op in ops]
