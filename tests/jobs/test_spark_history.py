"""The history job: acknowledged creates committed once, failed requests absent, creates in
real-time order, acknowledged deletes committed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from raftmeta.api.ids import uuid_to_str
from raftmeta.jobs.history import history_checks, read_history
from tests.jobs.quorum_logs import write_quorum

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark


def op(
    op_id: int, topic_index: int, outcome: str = "ok", *, invoke_ms: int | None = None, **extra: Any
) -> dict[str, Any]:
    invoke = 1000 * topic_index if invoke_ms is None else invoke_ms
    return {
        "op_id": op_id,
        "request_id": f"req-{topic_index}",
        "kind": "create_topic",
        "topic": f"topic-{topic_index}",
        "topic_id": uuid_to_str(topic_index.to_bytes(16, "big")) if outcome == "ok" else "",
        "invoke_ms": invoke,
        "complete_ms": invoke + 500,
        "outcome": outcome,
        "error": "",
        **extra,
    }


def checks_for(
    spark: SparkSession, root: Path, ops: list[dict[str, Any]]
) -> tuple[dict[str, tuple[bool, str]], dict[str, Any]]:
    path = root / "history.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in ops))
    records = spark.read.format("raftmeta").option("committed", "true").load(str(root / "node-1"))
    checks, figures = history_checks(read_history(spark, str(path)), records)
    return {c.name: (c.passed, c.detail) for c in checks}, figures


def test_consistent_history_passes(spark: SparkSession, tmp_path: Path) -> None:
    write_quorum(tmp_path, topics=6)
    ops = [op(i, i) for i in range(5)]
    ops.append({**op(5, 5, "unknown"), "topic_id": ""})
    ops.append({**op(6, 9, "fail"), "error": "TOPIC_ALREADY_EXISTS"})
    verdict, figures = checks_for(spark, tmp_path, ops)
    assert all(ok for ok, _ in verdict.values()), verdict
    assert figures["ops"] == {"ok": 5, "fail": 1, "unknown": 1}
    assert figures["unknown_creates_applied"] == 1


def test_each_kind_of_lost_or_phantom_operation_is_named(spark: SparkSession, tmp_path: Path) -> None:
    write_quorum(tmp_path, topics=6)
    ops = [
        op(0, 0),
        {**op(1, 99), "topic_id": uuid_to_str(b"\x63" * 16)},  # acknowledged, never committed
        {**op(2, 3, "fail"), "error": "REQUEST_TIMED_OUT"},  # said failed, but applied
        op(3, 4, invoke_ms=100_000),  # completed long after ...
        op(4, 5, invoke_ms=200_000),
        op(5, 2, invoke_ms=300_000),  # ... invoked after both finished, yet at a lower offset
        {**op(6, 1), "kind": "delete_topic"},  # acknowledged delete that never happened
    ]
    verdict, _ = checks_for(spark, tmp_path, ops)
    failed = {name: detail for name, (ok, detail) in verdict.items() if not ok}
    assert set(failed) == {
        "acknowledged-creates-committed-once",
        "failed-requests-wrote-nothing",
        "creates-in-real-time-order",
        "acknowledged-deletes-committed",
    }
    assert "op 1: create of 'topic-99'" in failed["acknowledged-creates-committed-once"]
    assert "is missing from the committed log" in failed["acknowledged-creates-committed-once"]
    assert (
        "op 2: failed create_topic of 'topic-3' (request req-3) was applied at offset"
        in failed["failed-requests-wrote-nothing"]
    )
    assert failed["creates-in-real-time-order"].startswith("op 5 was invoked after a create committed at offset")
    assert "op 6: delete of 'topic-1'" in failed["acknowledged-deletes-committed"]
