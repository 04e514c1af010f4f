"""The sequential specification the client histories are held to: one topic name's metadata.

A topic's state is :data:`ABSENT` (0) or its partition count (>= 1). Operations, each with
Kafka's outcome codes (lower-cased error names):

- ``create`` (``arg`` = partitions): ``ok`` when absent (the topic now has ``arg`` partitions),
  ``topic_already_exists`` when present (no change);
- ``delete``: ``ok`` when present (now absent), ``unknown_topic_or_partition`` when absent;
- ``create_partitions`` (``arg`` = the new total count, as Kafka's CreatePartitions takes it):
  ``ok`` when present with fewer than ``arg`` (now ``arg``), ``invalid_partitions`` when present
  with ``arg`` or more (Kafka refuses both "already has" and "higher than requested"),
  ``unknown_topic_or_partition`` when absent;
- ``describe``: ``ok`` with ``observed``, the state it saw (0 = the topic was not there), or
  :data:`LISTED` when it saw the topic without its partitions (a listing of names, or a page that
  stopped inside the topic's partitions): present, count not shown.

``unknown`` (the client never learned the outcome) accepts either answer: the operation took
effect as it would have at its linearization point. With its completion at +infinity (the
treatment of Porcupine and etcd's robustness tests) it may also be placed after every other
operation, which is how "it never took effect" is expressed.
"""

from __future__ import annotations

from dataclasses import dataclass

ABSENT = 0
LISTED = -1  # a describe's observation: present, partition count not shown
KINDS = ("create", "delete", "create_partitions", "describe")
OK = "ok"
UNKNOWN = "unknown"
TOPIC_ALREADY_EXISTS = "topic_already_exists"
UNKNOWN_TOPIC = "unknown_topic_or_partition"
INVALID_PARTITIONS = "invalid_partitions"
# The outcomes each kind can have.
RESULTS: dict[str, tuple[str, ...]] = {
    "create": (OK, TOPIC_ALREADY_EXISTS, UNKNOWN),
    "delete": (OK, UNKNOWN_TOPIC, UNKNOWN),
    "create_partitions": (OK, INVALID_PARTITIONS, UNKNOWN_TOPIC, UNKNOWN),
    "describe": (OK, UNKNOWN),
}
# Kinds whose ``arg`` is a partition count (>= 1).
COUNTED = ("create", "create_partitions")


class HistoryError(ValueError):
    """An operation that does not describe anything the model knows: names the field and the rule."""


@dataclass(frozen=True, slots=True)
class Operation:
    """One client operation. ``complete`` is None when the client never learned the outcome (then
    ``result`` is ``unknown``); an ``unknown`` operation with a completion time (the client gave up
    then) is still open-ended: it may have taken effect later."""

    op_id: int
    client: int
    topic: str
    kind: str
    invoke: int
    complete: int | None
    result: str
    arg: int = 0  # create: partitions; create_partitions: the new total
    observed: int | None = None  # describe ok: 0 (absent) or the partition count seen

    def __post_init__(self) -> None:
        where = f"operation {self.op_id}"
        if self.kind not in KINDS:
            raise HistoryError(f"{where}: kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if self.result not in RESULTS[self.kind]:
            raise HistoryError(
                f"{where}: result {self.result!r} is not an outcome of {self.kind} ({', '.join(RESULTS[self.kind])})"
            )
        # A create refused because the topic exists asks nothing of its count: the controller
        # answers TOPIC_ALREADY_EXISTS before it looks at the count (the chaos workload's
        # invalid-on-purpose creates ask for 0 partitions).
        counted = self.kind in COUNTED and not (self.kind == "create" and self.result == TOPIC_ALREADY_EXISTS)
        if counted and self.arg < 1:
            raise HistoryError(f"{where}: arg (a partition count) must be >= 1 for {self.kind}, got {self.arg}")
        if self.kind not in COUNTED and self.arg != 0:
            raise HistoryError(f"{where}: arg must be 0 for {self.kind}, got {self.arg}")
        reads = self.kind == "describe" and self.result == OK
        if reads and (self.observed is None or self.observed < LISTED):
            raise HistoryError(
                f"{where}: observed must be 0 (absent), a partition count or {LISTED} (listed) "
                "for a describe that answered"
            )
        if not reads and self.observed is not None:
            raise HistoryError(f"{where}: observed is only for a describe that answered ({self.kind} {self.result})")
        if self.complete is None and self.result != UNKNOWN:
            raise HistoryError(f"{where}: complete may be missing only when the result is unknown")
        if self.complete is not None and self.complete < self.invoke:
            raise HistoryError(f"{where}: complete {self.complete} is before invoke {self.invoke}")

    @property
    def open_ended(self) -> bool:
        """Whether the operation may take effect at any time after its invocation."""
        return self.result == UNKNOWN


def step(state: int, op: Operation) -> tuple[bool, int]:
    """Whether ``op`` with its recorded outcome can happen in ``state``, and the state after it."""
    kind, result = op.kind, op.result
    present = state != ABSENT
    if kind == "describe":
        seen = op.observed == state or (op.observed == LISTED and present)
        return (result == UNKNOWN or seen), state
    if kind == "create":
        if not present:
            return result in (OK, UNKNOWN), op.arg
        return result in (TOPIC_ALREADY_EXISTS, UNKNOWN), state
    if kind == "delete":
        if present:
            return result in (OK, UNKNOWN), ABSENT
        return result in (UNKNOWN_TOPIC, UNKNOWN), state
    # create_partitions
    if not present:
        return result in (UNKNOWN_TOPIC, UNKNOWN), state
    if state < op.arg:
        return result in (OK, UNKNOWN), op.arg
    return result in (INVALID_PARTITIONS, UNKNOWN), state


def describe_state(state: int) -> str:
    if state == LISTED:
        return "listed"
    return "absent" if state == ABSENT else f"{state} partitions"


def describe_operation(op: Operation) -> str:
    """E.g. ``create(3) -> ok``, ``describe -> 2 partitions``, ``delete -> unknown``."""
    call = f"{op.kind}({op.arg})" if op.kind in COUNTED else op.kind
    if op.kind == "describe" and op.result == OK:
        assert op.observed is not None
        return f"{call} -> {describe_state(op.observed)}"
    return f"{call} -> {op.result}"
