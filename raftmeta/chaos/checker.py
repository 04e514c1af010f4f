"""The history checks of a chaos run (DESIGN.md §9, invariant 6) and its availability figures.

Checked against the committed log (:mod:`raftmeta.chaos.committed`) and the final state the
leader describes after convergence:

- ``acknowledged-creates-committed``: every ok create's topic id is in the committed log, once,
  under the acknowledged name. A missing one is a *lost acknowledged operation*. (A topic that
  may have been deleted after its create, when the replay starts from a snapshot, can have left
  no record anywhere: it is counted as unverifiable, not lost.)
- ``failed-creates-wrote-nothing``: no batch with a failed create's request id created its topic.
- ``creates-in-real-time-order``: an ok create that completed before another ok create was
  invoked sits at a lower offset.
- ``topic-ids-stable``: a topic acknowledged with id X and never the target of a delete still
  has id X at the end; an ok delete's topic is gone at the end.
- ``final-state-matches-log``: the leader's topics (name -> id) equal the replayed log's.
- ``reads-linearizable`` (invariant 9): a read of a kept topic (never deleted) that found nothing
  was invoked before any create of it was acknowledged; a read that found it saw the id its
  acknowledged create got, or, with none acknowledged, a create of it that may have applied
  (ok or unknown) was invoked before the read completed.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from raftmeta.chaos.committed import CommittedLog
from raftmeta.chaos.history import OUTCOMES, Op
from raftmeta.jobs.checks import Check, listed


@dataclass
class HistoryVerdict:
    checks: list[Check] = field(default_factory=list)
    lost_acknowledged: list[int] = field(default_factory=list)  # op ids
    unverifiable: list[int] = field(default_factory=list)
    unknown_creates_applied: int = 0

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)


def _possibly_deleted_after(op: Op, ops: Iterable[Op]) -> bool:
    """Whether a delete of the same name may have taken effect after ``op`` (a create) did. A delete
    takes effect somewhere between its invocation and its completion -- an unknown one at any time
    after its invocation -- so a delete invoked *before* the create still counts when it completed
    after the create was invoked: under faults a retried delete can land on the re-created topic."""
    return any(
        d.kind == "delete_topic"
        and d.topic == op.topic
        and d.outcome != "fail"
        and (d.outcome == "unknown" or d.complete_ms >= op.invoke_ms)
        for d in ops
    )


def check_history(ops: list[Op], log: CommittedLog, final_topics: dict[str, str] | None) -> HistoryVerdict:
    """``final_topics``: the leader's topics after convergence; None when there was none to read
    (the checks that need it are then left out; the run has already failed on convergence)."""
    verdict = HistoryVerdict()
    creates = [o for o in ops if o.kind == "create_topic"]
    ok_creates = [o for o in creates if o.outcome == "ok"]
    wrong: list[str] = []
    for op in ok_creates:
        offsets = log.topics.get(op.topic_id, {})
        names = log.names_of(op.topic_id)
        if not names and op.topic_id not in log.removed:
            if not log.complete and _possibly_deleted_after(op, ops):
                verdict.unverifiable.append(op.op_id)  # its records may sit in an offset range nobody kept
                continue
            verdict.lost_acknowledged.append(op.op_id)
            wrong.append(f"op {op.op_id}: create of {op.topic!r} acknowledged with id {op.topic_id} is not committed")
        elif len(offsets) > 1 or (names and names != {op.topic}):
            wrong.append(
                f"op {op.op_id}: id {op.topic_id} of {op.topic!r} is committed at offsets {sorted(offsets)} "
                f"as {sorted(names)}"
            )
    verdict.checks.append(
        Check(
            "acknowledged-creates-committed",
            not wrong,
            listed(wrong)
            if wrong
            else f"all {len(ok_creates) - len(verdict.unverifiable)} verifiable acknowledged creates are committed "
            f"once ({len(verdict.unverifiable)} of deleted topics fell in offsets neither the tape nor a node kept)",
        )
    )

    applied = []
    for op in (o for o in creates if o.outcome == "fail"):
        batch = log.request_batch.get(op.request_id)
        if batch is not None and op.topic in log.batch_topics.get(batch, set()):
            applied.append(f"op {op.op_id}: failed create of {op.topic!r} was applied in the batch at {batch}")
    failed_count = sum(1 for o in creates if o.outcome == "fail")
    verdict.checks.append(
        Check(
            "failed-creates-wrote-nothing",
            not applied,
            listed(applied) if applied else f"none of the {failed_count} failed creates wrote a topic",
        )
    )
    verdict.unknown_creates_applied = sum(
        1
        for o in creates
        if o.outcome == "unknown" and o.topic in log.batch_topics.get(log.request_batch.get(o.request_id, -1), set())
    )

    verdict.checks.append(_real_time_order(ok_creates, log))
    verdict.checks.append(_reads_linearizable(ops))
    if final_topics is None:
        return verdict
    verdict.checks.append(_ids_stable(ops, ok_creates, final_topics))
    mismatched = sorted(
        f"{name}: leader says {final_topics.get(name)}, log says {log.live.get(name)}"
        for name in set(final_topics) | set(log.live)
        if final_topics.get(name) != log.live.get(name)
    )
    verdict.checks.append(
        Check(
            "final-state-matches-log",
            not mismatched,
            listed(mismatched)
            if mismatched
            else f"the leader's {len(final_topics)} topics equal the replayed log of node {log.node_id}",
        )
    )
    return verdict


def _reads_linearizable(ops: list[Op]) -> Check:
    reads = [o for o in ops if o.kind == "read_topic" and o.outcome == "ok"]
    creates: dict[str, list[Op]] = {}
    for op in ops:
        if op.kind == "create_topic":
            creates.setdefault(op.topic, []).append(op)
    wrong: list[str] = []
    for read in reads:
        made = creates.get(read.topic, [])
        acknowledged = [c for c in made if c.outcome == "ok"]
        if not read.topic_id:
            before = [c for c in acknowledged if c.complete_ms < read.invoke_ms]
            if before:
                wrong.append(
                    f"op {read.op_id}: read of {read.topic!r} invoked at {read.invoke_ms} found nothing, but op "
                    f"{before[0].op_id} created it (acknowledged at {before[0].complete_ms})"
                )
        elif acknowledged:
            if read.topic_id != acknowledged[0].topic_id:
                wrong.append(
                    f"op {read.op_id}: read of {read.topic!r} saw id {read.topic_id}, its acknowledged create "
                    f"(op {acknowledged[0].op_id}) got {acknowledged[0].topic_id}"
                )
        elif not any(c.outcome == "unknown" and c.invoke_ms <= read.complete_ms for c in made):
            wrong.append(
                f"op {read.op_id}: read of {read.topic!r} saw id {read.topic_id}, which no create could have made"
            )
    return Check(
        "reads-linearizable",
        not wrong,
        listed(wrong)
        if wrong
        else f"all {len(reads)} answered reads saw every create acknowledged before them, and "
        "only topics a create could have made",
    )


def _real_time_order(ok_creates: list[Op], log: CommittedLog) -> Check:
    """Sweep invocations and completions in time order, carrying the highest offset among the
    creates completed so far (completions strictly before an invocation count)."""
    placed = [(o, log.offset_of(o.topic_id)) for o in ok_creates]
    events: list[tuple[int, int, int, Op]] = []
    for op, offset in placed:
        # A create known only from a snapshot has no offset of its own: it cannot be ordered.
        if offset is not None:
            events.append((op.invoke_ms, 0, offset, op))
            events.append((op.complete_ms, 1, offset, op))
    events.sort(key=lambda e: (e[0], e[1]))
    highest_done = -1
    stale = []
    for _, is_completion, offset, op in events:
        if is_completion:
            highest_done = max(highest_done, offset)
        elif offset < highest_done:
            stale.append(f"op {op.op_id} ({op.topic!r}) at offset {offset} was invoked after one at {highest_done}")
    return Check(
        "creates-in-real-time-order",
        not stale,
        listed(stale) if stale else f"all {len(events) // 2} acknowledged creates in the log follow real-time order",
    )


def _ids_stable(ops: list[Op], ok_creates: list[Op], final_topics: dict[str, str]) -> Check:
    problems = []
    for op in ok_creates:
        # Only a delete may change a name's id; a second ok create without one is itself a violation.
        deleted = any(
            o.kind == "delete_topic" and o.topic == op.topic and o.outcome != "fail" and o.invoke_ms >= op.invoke_ms
            for o in ops
        )
        now = final_topics.get(op.topic)
        if not deleted and now is not None and now != op.topic_id:
            problems.append(f"op {op.op_id}: {op.topic!r} was acknowledged with id {op.topic_id}, now has {now}")
    live_ids = set(final_topics.values())
    for op in ops:
        if op.kind == "delete_topic" and op.outcome == "ok" and op.topic_id in live_ids:
            problems.append(f"op {op.op_id}: delete of {op.topic!r} (id {op.topic_id}) acknowledged, topic still live")
    return Check(
        "topic-ids-stable",
        not problems,
        listed(problems) if problems else "no acknowledged topic id changed; every acknowledged delete took effect",
    )


def spark_history(ops: list[Op], log: CommittedLog) -> tuple[list[Op], int]:
    """The ops the Spark history check can judge from the retained records: without those whose
    records a snapshot compacted away (ok creates of since-deleted topics, ok deletes whose
    RemoveTopicRecord is gone). Returns (ops, how many were left out)."""
    if log.base_offset == 0:
        return ops, 0
    kept = []
    for op in ops:
        gone_create = op.kind == "create_topic" and op.outcome == "ok" and op.topic_id not in log.retained_topics
        gone_delete = op.kind == "delete_topic" and op.outcome == "ok" and op.topic_id not in log.retained_removed
        if (gone_create and _possibly_deleted_after(op, ops)) or gone_delete:
            continue
        kept.append(op)
    return kept, len(ops) - len(kept)


# -- availability ---------------------------------------------------------------------------------
def outcome_counts(ops: Iterable[Op]) -> dict[str, int]:
    counts: dict[str, int] = dict.fromkeys(OUTCOMES, 0)
    for op in ops:
        counts[op.outcome] += 1
    return counts


def availability(ops: list[Op], windows: list[tuple[int, int, str, str]], start_ms: int, end_ms: int) -> dict[str, Any]:
    """Ok rate per fault window (ops invoked inside it) and the longest stretch of the workload
    with no op completing ok."""
    per_window = []
    for w_start, w_end, family, detail in windows:
        inside = [o for o in ops if w_start <= o.invoke_ms < w_end]
        ok = sum(1 for o in inside if o.outcome == "ok")
        per_window.append(
            {
                "family": family,
                "detail": detail,
                "start_ms": w_start - start_ms,
                "duration_ms": w_end - w_start,
                "ops": len(inside),
                "ok": ok,
                "ok_rate": round(ok / len(inside), 3) if inside else None,
            }
        )
    marks = sorted([start_ms, *(o.complete_ms for o in ops if o.outcome == "ok"), end_ms])
    gaps = [(b - a, a) for a, b in itertools.pairwise(marks)]
    longest, at = max(gaps, default=(0, start_ms))
    total_ok = sum(1 for o in ops if o.outcome == "ok")
    return {
        "ok_rate": round(total_ok / len(ops), 3) if ops else None,
        "longest_unavailable_ms": longest,
        "longest_unavailable_from_ms": at - start_ms,
        "windows": per_window,
    }
