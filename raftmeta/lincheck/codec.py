"""Operations to and from JSON objects: the format of recorded histories (one operation a line)
and of the differential test's exchange with Porcupine (tests/porcupine)."""

from __future__ import annotations

from typing import Any

from raftmeta.lincheck.model import HistoryError, Operation

FIELDS = ("op_id", "client", "topic", "kind", "invoke", "complete", "result", "arg", "observed")
REQUIRED = ("op_id", "client", "topic", "kind", "invoke", "result")


def operation_to_json(op: Operation) -> dict[str, Any]:
    return {name: getattr(op, name) for name in FIELDS}


def operation_from_json(data: dict[str, Any]) -> Operation:
    missing = [name for name in REQUIRED if name not in data]
    if missing:
        raise HistoryError(f"operation {data.get('op_id', '?')}: missing field(s) {', '.join(missing)}")
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise HistoryError(f"operation {data['op_id']}: unknown field(s) {', '.join(unknown)}")
    for name in ("op_id", "client", "invoke", "arg"):
        if name in data and (not isinstance(data[name], int) or isinstance(data[name], bool)):
            raise HistoryError(f"operation {data['op_id']}: {name} must be an integer, got {data[name]!r}")
    for name in ("complete", "observed"):
        value = data.get(name)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            raise HistoryError(f"operation {data['op_id']}: {name} must be an integer or null, got {value!r}")
    return Operation(
        op_id=data["op_id"],
        client=data["client"],
        topic=str(data["topic"]),
        kind=str(data["kind"]),
        invoke=data["invoke"],
        complete=data.get("complete"),
        result=str(data["result"]),
        arg=data.get("arg", 0),
        observed=data.get("observed"),
    )
