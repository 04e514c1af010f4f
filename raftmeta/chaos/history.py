"""The client history of a chaos run, in the JSON-lines format ``raftmeta verify --history``
checks (raftmeta/jobs/history.py documents the fields).

One line per operation, written when it completes: ``op_id``, ``request_id``, ``kind``
(``create_topic``, ``delete_topic``, ``create_partitions``, ``reassign_partition`` or
``cancel_reassignment``), ``topic``, ``topic_id`` (base64url, for ok creates and deletes),
``invoke_ms`` / ``complete_ms`` (wall clock), ``outcome`` (``ok``, ``fail`` or ``unknown``) and
``error``. The rest is ours and Spark ignores it: ``worker`` (which client), for the two
reassignment kinds ``partition`` and ``replicas`` (the requested target; empty for a cancel), and
``count`` (``create_topic``: the partitions asked for; ``create_partitions``: the new total).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any, Literal

Outcome = Literal["ok", "fail", "unknown"]
OUTCOMES: tuple[Outcome, ...] = ("ok", "fail", "unknown")
REASSIGN = "reassign_partition"
CANCEL_REASSIGNMENT = "cancel_reassignment"


@dataclass(frozen=True, slots=True)
class Op:
    op_id: int
    request_id: str
    kind: str
    topic: str
    topic_id: str
    invoke_ms: int
    complete_ms: int
    outcome: Outcome
    error: str
    worker: int = 0
    partition: int = -1  # reassignment ops: the partition moved or cancelled
    replicas: tuple[int, ...] = ()  # reassign_partition: the requested target replicas
    count: int = 0  # create_topic: partitions asked for; create_partitions: the new total

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_json(data: dict[str, Any]) -> Op:
        return Op(**{**data, "replicas": tuple(data.get("replicas", ()))})


class HistoryWriter:
    """Appends ops to a JSON-lines file as they complete (flushed, so a crashed run keeps them)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.ops: list[Op] = []
        self._file: IO[str] = path.open("w", encoding="utf-8")

    def record(self, op: Op) -> None:
        self.ops.append(op)
        self._file.write(json.dumps(op.to_json()) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def read_history(path: Path) -> list[Op]:
    ops = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            ops.append(Op.from_json(json.loads(line)))
    return ops


def write_history(path: Path, ops: list[Op]) -> None:
    path.write_text("".join(json.dumps(op.to_json()) + "\n" for op in ops), encoding="utf-8")
