"""Client history against the committed log (DESIGN.md §9, invariant 6).

A history is JSON lines, one per client operation (written by ``raftmeta chaos`` and by any
client that wants its run checked)::

    {"op_id": 7, "request_id": "5f0c...", "kind": "create_topic", "topic": "orders",
     "topic_id": "6yY7kq3dT4C0pn0KwG7Xeg", "invoke_ms": 1700000000123, "complete_ms": 1700000000456,
     "outcome": "ok", "error": ""}

``kind`` is ``create_topic`` or ``delete_topic``; ``outcome`` is ``ok`` (acknowledged), ``fail``
(a definite rejection) or ``unknown`` (timeout, lost connection); ``topic_id`` is the id the
acknowledgement carried (base64url, as Kafka prints it). The controller writes a RequestRecord
with the request id in the same batch as the request's own records, which is how a record is
traced back to the request that wrote it.

Checks:
- ``acknowledged-creates-committed-once``: each ok create's topic id appears in exactly one
  TopicRecord, with the acknowledged name.
- ``failed-requests-wrote-nothing``: no committed batch carries the request id of a failed op
  together with a record for its topic.
- ``acknowledged-deletes-committed``: each ok delete's topic id has a RemoveTopicRecord.
- ``creates-in-real-time-order``: an ok create that completed before another ok create was
  invoked sits at a lower offset (creates are linearizable).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from raftmeta.jobs.checks import EXAMPLES_MAX, Check, listed

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

HISTORY_DDL_FIELDS = (
    ("op_id", "long"),
    ("request_id", "string"),
    ("kind", "string"),
    ("topic", "string"),
    ("topic_id", "string"),
    ("invoke_ms", "long"),
    ("complete_ms", "long"),
    ("outcome", "string"),
    ("error", "string"),
)


def read_history(spark: SparkSession, path: str) -> DataFrame:
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    types = {"long": LongType(), "string": StringType()}
    schema = StructType([StructField(name, types[kind]) for name, kind in HISTORY_DDL_FIELDS])
    return spark.read.schema(schema).option("mode", "FAILFAST").json(path)


def history_checks(history: DataFrame, records: DataFrame) -> tuple[list[Check], dict[str, Any]]:
    """``records``: the committed record-level rows of one node (see :mod:`raftmeta.jobs.verify`)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    history = history.cache()
    topics = records.where("record_type = 'topic'").select(
        F.col("topic_id").alias("logged_id"), F.col("topic_name").alias("logged_name"), "offset", "batch_base_offset"
    )
    requests = records.where("record_type = 'request'").select("request_id", "batch_base_offset")
    removals = records.where("record_type = 'remove_topic'").select(F.col("topic_id").alias("removed_id"), "offset")
    checks: list[Check] = []

    ok_creates = history.where("kind = 'create_topic' AND outcome = 'ok'")
    found = (
        ok_creates.join(topics, ok_creates.topic_id == topics.logged_id, "left")
        .groupBy("op_id", "topic", "topic_id")
        .agg(
            F.count("logged_id").alias("copies"),
            F.min("offset").alias("offset"),
            F.sort_array(F.collect_set("logged_name")).alias("names"),
        )
    )
    wrong = found.where("copies != 1 OR NOT array_contains(names, topic)")
    checks.append(
        _check(
            "acknowledged-creates-committed-once",
            wrong,
            lambda r: (
                f"op {r['op_id']}: create of {r['topic']!r} acknowledged with id {r['topic_id']} "
                + (
                    "is missing from the committed log"
                    if r["copies"] == 0
                    else f"appears {r['copies']} times as {r['names']}"
                )
            ),
            lambda n: f"all {n} acknowledged creates are in the committed log exactly once with their topic ids",
            found.count(),
        )
    )

    failed = history.where("outcome = 'fail' AND request_id IS NOT NULL AND request_id != ''")
    applied = (
        failed.join(requests, "request_id")
        .join(topics, "batch_base_offset")
        .where(F.col("logged_name") == F.col("topic"))
        .select("op_id", "kind", "topic", "request_id", "offset")
    )
    checks.append(
        _check(
            "failed-requests-wrote-nothing",
            applied,
            lambda r: (
                f"op {r['op_id']}: failed {r['kind']} of {r['topic']!r} (request {r['request_id']}) "
                f"was applied at offset {r['offset']}"
            ),
            lambda n: f"none of the {n} failed requests wrote anything",
            failed.count(),
        )
    )

    ok_deletes = history.where("kind = 'delete_topic' AND outcome = 'ok'")
    undeleted = ok_deletes.join(removals, ok_deletes.topic_id == removals.removed_id, "left_anti")
    checks.append(
        _check(
            "acknowledged-deletes-committed",
            undeleted,
            lambda r: f"op {r['op_id']}: delete of {r['topic']!r} (id {r['topic_id']}) acknowledged but not in the log",
            lambda n: f"all {n} acknowledged deletes are in the committed log",
            ok_deletes.count(),
        )
    )

    # Real-time order: walk the ok creates' invocations and completions in time order, carrying the
    # highest offset among creates completed so far. An invocation whose own offset is below that
    # came after a create that had finished, yet was ordered before it. At equal times invocations
    # sort first, so only completions strictly earlier than an invocation count.
    placed = found.where("copies = 1").join(ok_creates.select("op_id", "invoke_ms", "complete_ms"), "op_id")
    invocations = placed.select(
        "op_id",
        F.col("invoke_ms").alias("t"),
        F.lit(0).alias("order"),
        F.col("offset").alias("own_offset"),
        F.lit(None).cast("long").alias("done_offset"),
    )
    completions = placed.select(
        "op_id",
        F.col("complete_ms").alias("t"),
        F.lit(1).alias("order"),
        F.lit(None).cast("long").alias("own_offset"),
        F.col("offset").alias("done_offset"),
    )
    before = Window.orderBy("t", "order").rowsBetween(Window.unboundedPreceding, -1)
    stale = (
        invocations.unionByName(completions)
        .select("*", F.max("done_offset").over(before).alias("max_done"))
        .where("order = 0 AND max_done IS NOT NULL AND own_offset < max_done")
    )
    checks.append(
        _check(
            "creates-in-real-time-order",
            stale,
            lambda r: (
                f"op {r['op_id']} was invoked after a create committed at offset {r['max_done']} completed, "
                f"yet sits at offset {r['own_offset']}"
            ),
            lambda n: f"all {n} acknowledged creates are ordered consistently with real time",
            placed.count(),
        )
    )
    outcomes = {r["outcome"]: r["count"] for r in history.groupBy("outcome").count().collect()}
    unknown_applied = (
        history.where("outcome = 'unknown' AND kind = 'create_topic'")
        .join(requests, "request_id")
        .join(topics, "batch_base_offset")
        .where(F.col("logged_name") == F.col("topic"))
        .count()
    )
    figures = {
        "ops": {k: outcomes.get(k, 0) for k in ("ok", "fail", "unknown")},
        "unknown_creates_applied": unknown_applied,
    }
    history.unpersist()
    return checks, figures


def _check(name: str, offending: DataFrame, describe: Any, ok_detail: Any, considered: int) -> Check:
    total = offending.count()
    if total == 0:
        return Check(name, True, ok_detail(considered))
    rows = offending.orderBy("op_id").limit(EXAMPLES_MAX).collect()
    return Check(name, False, listed([describe(r) for r in rows], total))
