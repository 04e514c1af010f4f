"""The reassignment checks of a chaos run: the history's AlterPartitionReassignments ops against
the committed log (invariant 6), and every partition move in the log against KIP-455's rules.

Both come from one walk of the tape through the controller's replay code
(:func:`raftmeta.chaos.replay.replay_tape`), which already refuses any state that breaks
invariant 7 (leader ∈ ISR ⊆ replicas, adding/removing a consistent part of the replicas, epochs
that follow: ``committed-log-replays``). On top of it, each partition record is judged as a
transition from the state before it (``original`` = replicas - adding, ``target`` = replicas -
removing):

- ``reassignments-consistent``:
  - the ISR is never empty (a move must not lose the last in-sync replica; the controller never
    writes an empty ISR, so an empty one means a change dropped it);
  - a move *starts* from the partition's replicas (original == the replicas before, as sets), and
    while it runs its original replicas stay the same and its target keeps the replication factor;
  - its target changes only through an AlterPartitionReassignments request (a re-target);
  - a move *ends* either completed -- replicas == the target, exactly, or the new target of the
    request that re-targets it when the replicas that target adds are already in sync -- or
    cancelled by a request, restoring the original replicas (as a set; exactly for a cancel op);
  - outside a move the replica set never changes, and the order only through a request.
- ``acknowledged-reassignments-committed``: an ok op's request is committed exactly once (the
  replay refuses a request id answered twice), with the answer the client got (NONE), and right
  after its records the partition is moving to the requested target (or, for a cancel, not moving).
  An ok move that wrote nothing asked for what the partition already had or was moving to (the
  controller answers it without a record): some committed state of that partition had that
  target. Anything else is a lost acknowledged operation.
- ``failed-reassignments-wrote-nothing``: a rejected op's request id is nowhere in the log.

An op whose request falls in offsets the replay did not walk (a tape gap bridged by a snapshot)
is found in the request table, which snapshots keep. An ok move that wrote nothing can only be
matched against the states the replay saw, so when the replay skipped offsets such an op is
counted as unverifiable, never as lost.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from raftmeta.chaos.history import CANCEL_REASSIGNMENT, REASSIGN, Op
from raftmeta.chaos.replay import ReplayReport, Step, replay_tape
from raftmeta.controller.image import MetadataImage, PartitionRegistration
from raftmeta.controller.reassign import is_reassigning as _moving
from raftmeta.controller.reassign import original_replicas, target_replicas
from raftmeta.jobs.checks import Check, listed
from raftmeta.storage.snapshot import SnapshotId
from raftmeta.v1 import controller_pb2, errors_pb2, records_pb2

REASSIGN_METHOD = "AlterPartitionReassignments"
KINDS = (REASSIGN, CANCEL_REASSIGNMENT)
COUNTS = ("started", "completed", "cancelled", "retargeted", "dropped_with_topic", "in_flight_at_end")


@dataclass
class MoveVerdict:
    checks: list[Check] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTS, 0))
    lost_acknowledged: list[int] = field(default_factory=list)  # op ids
    figures: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)


class MoveAudit:
    """The replay observer: judges every partition transition and every reassignment request."""

    def __init__(self, ops: Iterable[Op]) -> None:
        self.ops = {op.request_id: op for op in ops if op.kind in KINDS}
        self.counts: Counter[str] = Counter()
        self.problems: list[str] = []
        self.op_problems: list[str] = []  # acknowledged ops whose committed request is wrong
        self.rejected: list[str] = []  # rejected ops whose request was committed
        self.committed: dict[str, int] = {}  # request id -> offset of its RequestRecord on the tape
        # (topic, partition, target) of every partition state seen: an ok move that wrote nothing
        # must have asked for one of these.
        self.targets: set[tuple[str, int, tuple[int, ...]]] = set()
        self.unknown_applied = 0

    # ---- observer -------------------------------------------------------------------------------
    def on_resume(self, offset: int, image: MetadataImage) -> None:
        for topic in image.topics_sorted():
            for pid, part in enumerate(topic.partitions):
                self.targets.add((topic.name, pid, target_replicas(part)))

    def on_step(self, step: Step) -> None:
        kind = step.record.WhichOneof("record")
        if kind == "partition":
            rec = step.record.partition
            self._after_change(step, rec.topic_id, rec.partition_id, None)
        elif kind == "partition_change":
            change = step.record.partition_change
            self._after_change(
                step, change.topic_id, change.partition_id, step.before.partition(change.topic_id, change.partition_id)
            )
        elif kind == "remove_topic":
            topic = step.before.topics.get(step.record.remove_topic.topic_id)
            if topic is not None:
                self.counts["dropped_with_topic"] += sum(1 for part in topic.partitions if _moving(part))
        elif kind == "request" and step.record.request.request_id in self.ops:
            self._request(step, self.ops[step.record.request.request_id])

    # ---- partition transitions ------------------------------------------------------------------
    def _after_change(self, step: Step, topic_id: bytes, pid: int, prev: PartitionRegistration | None) -> None:
        topic = step.after.topics[topic_id]
        cur = topic.partitions[pid]
        self.targets.add((topic.name, pid, target_replicas(cur)))
        where = f"{topic.name}-{pid} at offset {step.offset}"
        problems = self.problems
        if not cur.isr:
            problems.append(f"{where}: the ISR is empty: the partition lost its last in-sync replica ({_show(cur)})")
        if _moving(cur) and len(target_replicas(cur)) != len(original_replicas(cur)):
            problems.append(f"{where}: the move's target changes the replication factor ({_show(cur)})")
        if prev is None:
            return
        by_request = step.request is not None and step.request.method == REASSIGN_METHOD
        if not _moving(prev) and _moving(cur):
            self.counts["started"] += 1
            if set(original_replicas(cur)) != set(prev.replicas):
                problems.append(
                    f"{where}: a move started from replicas {list(prev.replicas)} but its original replicas are "
                    f"{list(original_replicas(cur))} ({_show(cur)})"
                )
        elif _moving(prev) and _moving(cur):
            if set(original_replicas(cur)) != set(original_replicas(prev)):
                problems.append(
                    f"{where}: the original replicas of a move changed from {list(original_replicas(prev))} to "
                    f"{list(original_replicas(cur))}"
                )
            if target_replicas(cur) != target_replicas(prev):
                self.counts["retargeted"] += 1
                if not by_request:
                    problems.append(
                        f"{where}: a move's target changed from {list(target_replicas(prev))} to "
                        f"{list(target_replicas(cur))} without a reassignment request"
                    )
        elif _moving(prev):
            self._ended(where, step, prev, cur, by_request)
        elif cur.replicas != prev.replicas and (set(cur.replicas) != set(prev.replicas) or not by_request):
            problems.append(
                f"{where}: replicas changed from {list(prev.replicas)} to {list(cur.replicas)} outside a reassignment"
            )

    def _ended(
        self, where: str, step: Step, prev: PartitionRegistration, cur: PartitionRegistration, by_request: bool
    ) -> None:
        target, original = target_replicas(prev), original_replicas(prev)
        op = self.ops.get(step.request.request_id) if step.request is not None and by_request else None
        if cur.replicas == target:
            self.counts["completed"] += 1
            return
        if op is not None and op.kind == REASSIGN and cur.replicas == op.replicas:
            # A new target whose adding replicas were all in sync already (they were adding for the
            # move it replaced, and caught up): the re-target completes in the same record.
            self.counts["retargeted"] += 1
            self.counts["completed"] += 1
            return
        exact = op is not None and op.kind == CANCEL_REASSIGNMENT
        restored = cur.replicas == original if exact else set(cur.replicas) == set(original)
        if by_request and restored:
            self.counts["cancelled"] += 1
            return
        self.problems.append(
            f"{where}: a move from {list(original)} to {list(target)} ended with replicas {list(cur.replicas)}"
            + (
                ": neither the target (completed) nor the original replicas (cancelled)"
                if not restored
                else ": the original replicas came back without a cancel request"
            )
        )

    # ---- requests -------------------------------------------------------------------------------
    def _request(self, step: Step, op: Op) -> None:
        request = step.record.request
        self.committed[request.request_id] = step.offset
        where = f"op {op.op_id} ({op.kind} of {op.topic}-{op.partition}, request at offset {step.offset})"
        if op.outcome == "unknown":
            self.unknown_applied += 1
            return
        answer = _stored_error(request)
        if op.outcome == "fail":
            self.rejected.append(f"{where}: rejected, yet committed with the answer {answer}")
            return
        if answer != "NONE":
            self.op_problems.append(f"{where}: acknowledged, but the committed answer is {answer}")
            return
        topic = step.after.topic_by_name(op.topic)
        part = topic.partitions[op.partition] if topic is not None and op.partition < len(topic.partitions) else None
        if part is None:
            self.op_problems.append(f"{where}: acknowledged, but the partition does not exist after its records")
        elif op.kind == REASSIGN and target_replicas(part) != op.replicas:
            self.op_problems.append(
                f"{where}: acknowledged target {list(op.replicas)}, but after its records the partition is "
                f"{_show(part)}"
            )
        elif op.kind == CANCEL_REASSIGNMENT and _moving(part):
            self.op_problems.append(f"{where}: acknowledged cancel, but the partition still moves: {_show(part)}")


def check_reassignments(
    ops: list[Op],
    batches: Mapping[int, bytes],
    snapshots: Mapping[SnapshotId, bytes],
    log_requests: set[str] | None = None,
) -> MoveVerdict:
    """Replay the tape and judge the reassignment ops of ``ops``. ``log_requests``: the request ids
    the replayed node's snapshot and log still hold (the final request table, whatever the tape
    missed)."""
    audit = MoveAudit(ops)
    report = replay_tape(batches, snapshots, audit)
    verdict = MoveVerdict()
    verdict.counts.update(audit.counts)
    verdict.counts["in_flight_at_end"] = len(report.image.reassigning)
    verdict.checks.append(
        Check(
            "committed-log-replays",
            not report.errors,
            listed(report.errors)
            if report.errors
            else f"{report.records} committed records replayed through the controller's replay (leader ∈ ISR ⊆ "
            f"replicas, consistent adding/removing replicas, epochs that follow)" + _coverage(report),
        )
    )
    counts = verdict.counts
    verdict.checks.append(
        Check(
            "reassignments-consistent",
            not audit.problems,
            listed(audit.problems)
            if audit.problems
            else f"{counts['started']} moves started, {counts['completed']} completed with replicas = target, "
            f"{counts['cancelled']} cancelled with the original replicas restored, {counts['retargeted']} re-targeted "
            f"by a request, {counts['dropped_with_topic']} dropped with their topic, {counts['in_flight_at_end']} "
            "in flight at the end; no ISR ever emptied",
        )
    )
    committed = set(audit.committed) | {rid for rid, _ in report.image.requests.in_order()} | (log_requests or set())
    _judge_ops(audit, verdict, report, committed)
    verdict.figures = {
        "replay": report.to_json(),
        "unknown_applied": audit.unknown_applied,
        "ops": {kind: dict(Counter(o.outcome for o in audit.ops.values() if o.kind == kind)) for kind in KINDS},
    }
    return verdict


def _judge_ops(audit: MoveAudit, verdict: MoveVerdict, report: ReplayReport, committed: set[str]) -> None:
    """The history side: every ok op committed (or a no-op), every failed op absent."""
    wrong = list(audit.op_problems)
    rejected = list(audit.rejected)
    unverifiable = 0
    ok = [o for o in audit.ops.values() if o.outcome == "ok"]
    for op in ok:
        if op.request_id in committed:
            continue
        if op.kind == REASSIGN and (op.topic, op.partition, op.replicas) in audit.targets:
            continue  # answered without a record: the partition already had, or was moving to, that target
        if report.stopped_at is not None or report.resumed_from:
            # The partition may have had that target only in offsets the replay did not walk.
            unverifiable += 1
            continue
        verdict.lost_acknowledged.append(op.op_id)
        wrong.append(
            f"op {op.op_id}: {op.kind} of {op.topic}-{op.partition}"
            + (
                f" to {list(op.replicas)} was acknowledged, but its request is not committed and no committed "
                "state of the partition has that target"
                if op.kind == REASSIGN
                else " was acknowledged, but its request is not committed"
            )
        )
    failed = [o for o in audit.ops.values() if o.outcome == "fail"]
    rejected.extend(
        f"op {o.op_id}: rejected {o.kind} of {o.topic}-{o.partition} (request {o.request_id}) is in the request table"
        for o in failed
        if o.request_id in committed and o.request_id not in audit.committed  # the tape's own are already listed
    )
    on_tape = sum(1 for o in ok if o.request_id in audit.committed)
    verdict.checks.append(
        Check(
            "acknowledged-reassignments-committed",
            not wrong,
            listed(wrong)
            if wrong
            else f"all {len(ok) - unverifiable} verifiable acknowledged reassignment ops are committed once with "
            f"their answer and effect ({on_tape} checked record by record, the rest no-ops or in the request table; "
            f"{unverifiable} no-ops unverifiable: the replay skipped offsets)",
        )
    )
    verdict.checks.append(
        Check(
            "failed-reassignments-wrote-nothing",
            not rejected,
            listed(rejected) if rejected else f"none of the {len(failed)} rejected reassignment ops wrote anything",
        )
    )


def _stored_error(request: records_pb2.RequestRecord) -> str:
    """The per-partition error the committed answer holds (single-partition requests)."""
    if request.method != REASSIGN_METHOD:
        return f"an answer to {request.method}"
    response = controller_pb2.AlterPartitionReassignmentsResponse.FromString(request.response)
    codes = [p.error_code for t in response.results for p in t.partitions]
    return ",".join(errors_pb2.ErrorCode.Name(c) for c in codes) or "empty"


def _show(part: PartitionRegistration) -> str:
    text = f"replicas {list(part.replicas)}, isr {list(part.isr)}, leader {part.leader}"
    if _moving(part):
        text += f", adding {list(part.adding_replicas)}, removing {list(part.removing_replicas)}"
    return text


def _coverage(report: ReplayReport) -> str:
    text = ""
    if report.resumed_from:
        text += f"; resumed from snapshots at {report.resumed_from} after gaps in the tape"
    if report.stopped_at is not None:
        text += f"; stopped at offset {report.stopped_at} (a gap no copied snapshot bridges)"
    return text
