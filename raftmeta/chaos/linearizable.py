"""The chaos run's client history held to the linearizability checker (:mod:`raftmeta.lincheck`).

The history's operations become the model's: ``create_topic`` (ok, TOPIC_ALREADY_EXISTS or
unknown, with the partitions asked for), ``delete_topic`` (ok, UNKNOWN_TOPIC_OR_PARTITION or
unknown), ``create_partitions`` (ok, INVALID_PARTITIONS, UNKNOWN_TOPIC_OR_PARTITION or unknown)
and ``read_topic`` (a describe: absent when it found nothing, *listed* when it found the topic --
the read records the id, not the count). A definite refusal the model does not know (an invalid
name, replication factor or config, refused on purpose by the workload) took no effect and is left
out, as is an unknown create that asked for no partitions (Kafka refuses it whatever the state).
Reassignments change neither existence nor counts and are left out.
"""

from __future__ import annotations

from dataclasses import dataclass

from raftmeta.chaos.history import Op
from raftmeta.controller.topics import is_not_an_increase
from raftmeta.jobs.checks import Check
from raftmeta.lincheck import LISTED, CheckResult, HistoryError, Operation, check_history
from raftmeta.lincheck.timeline import render_failure

CHECK = "history-linearizable"
TIMELINE = "linearizability.html"
KINDS = {"create_topic": "create", "delete_topic": "delete", "create_partitions": "create_partitions"}
# Kafka's error names (the prefix of Op.error) that are outcomes of the model.
MODELLED_ERRORS = {
    "create": {"TOPIC_ALREADY_EXISTS": "topic_already_exists"},
    "delete": {"UNKNOWN_TOPIC_OR_PARTITION": "unknown_topic_or_partition"},
    "create_partitions": {
        "INVALID_PARTITIONS": "invalid_partitions",
        "UNKNOWN_TOPIC_OR_PARTITION": "unknown_topic_or_partition",
    },
}


def model_operations(ops: list[Op]) -> list[Operation]:
    modelled = []
    for op in ops:
        converted = _operation(op)
        if converted is not None:
            modelled.append(converted)
    return modelled


def _operation(op: Op) -> Operation | None:
    if op.kind == "read_topic":
        if op.outcome != "ok":
            return None  # a read that failed or never answered observed nothing
        return _made(op, "describe", "ok", observed=LISTED if op.topic_id else 0)
    kind = KINDS.get(op.kind)
    if kind is None:
        return None
    arg = op.count if kind != "delete" else 0
    if op.outcome == "ok":
        return _made(op, kind, "ok", arg=arg)
    if op.outcome == "unknown":
        return None if kind != "delete" and arg < 1 else _made(op, kind, "unknown", arg=arg)
    modelled = MODELLED_ERRORS[kind].get(op.error.split(":", 1)[0])
    if modelled == "invalid_partitions" and not is_not_an_increase(op.error):
        modelled = None  # INVALID_PARTITIONS for a count over the limit: refused whatever the state
    return None if modelled is None else _made(op, kind, modelled, arg=arg)


def _made(op: Op, kind: str, result: str, *, arg: int = 0, observed: int | None = None) -> Operation:
    return Operation(op.op_id, op.worker, op.topic, kind, op.invoke_ms, op.complete_ms, result, arg, observed)


@dataclass(frozen=True, slots=True)
class Linearizability:
    check: Check
    result: CheckResult | None  # None when the history could not be read as the model's
    operations: list[Operation]

    def timeline(self, replay: str) -> str | None:
        """The failing window's HTML page, when the checker refused the history."""
        if self.result is None or not self.result.failures:
            return None
        title = f"raftmeta chaos: {self.check.detail}"
        return render_failure(self.operations, self.result.failures[0], title=title, replay=replay)


def check_linearizable(ops: list[Op]) -> Linearizability:
    try:
        operations = model_operations(ops)
        result = check_history(operations)
    except HistoryError as error:
        return Linearizability(Check(CHECK, False, f"the history does not fit the model: {error}"), None, [])
    if result.verdict == "ok":
        detail = (
            f"the {len(operations)} operations on topic existence and counts are linearizable ({result.steps} steps)"
        )
        return Linearizability(Check(CHECK, True, detail), result, operations)
    detail = f"the client history of {len(operations)} operations is {result.describe()}"
    return Linearizability(Check(CHECK, False, detail), result, operations)
