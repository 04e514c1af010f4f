"""Replicas and leaders per broker per topic: the report's topic x broker view.

A cluster-wide skew figure says placement is uneven; this says which topics are uneven and on
which brokers. Counted in Spark (one row per topic and broker it uses), ranked by how far each
topic's busiest broker is above an even share of that topic (``ceil(count / brokers)``), for
replicas and for leaders, the worst first; only the first ``TOPICS_SHOWN`` topics reach the driver.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

TOPICS_SHOWN = 40


def topic_broker_view(final: DataFrame, brokers: Collection[int], topics_total: int) -> dict[str, Any]:
    """``{"brokers", "topics_total", "topics": [{"topic", "partitions", "replicas": {broker: n},
    "leaders": {broker: n}, "excess_replicas", "excess_leaders"}]}`` of the live partitions in
    ``final``, at most ``TOPICS_SHOWN`` topics, the most skewed first (then the largest, then by
    name). ``brokers``: the registered brokers, every one a column even where it holds nothing."""
    from pyspark.sql import functions as F

    ids = sorted(brokers)
    n_brokers = max(1, len(ids))
    per = (
        final.select("topic_name", "leader", F.posexplode(F.coalesce("replicas", F.array().cast("array<int>"))))
        .groupBy("topic_name", F.col("col").alias("broker"))
        .agg(
            F.count(F.lit(1)).alias("replicas"),
            F.count(F.when(F.col("leader") == F.col("col"), 1)).alias("leaders"),
            # Every partition has exactly one replica at position 0 (empty ones are not drawn).
            F.count(F.when(F.col("pos") == 0, 1)).alias("partitions"),
        )
        .cache()
    )
    try:

        def excess(column: str) -> Any:
            # A broker the topic does not use holds 0; the busiest one against an even share.
            share = F.ceil(F.sum(column) / F.lit(n_brokers))
            return F.greatest(F.max(column) - share, F.lit(0))

        ranked = (
            per.groupBy("topic_name")
            .agg(
                F.sum("partitions").alias("partitions"),
                excess("replicas").alias("excess_replicas"),
                excess("leaders").alias("excess_leaders"),
            )
            .orderBy(F.greatest("excess_replicas", "excess_leaders").desc(), F.col("partitions").desc(), "topic_name")
            .limit(TOPICS_SHOWN)
            .collect()
        )
        names = [r["topic_name"] for r in ranked]
        cells = per.where(F.col("topic_name").isin(names)).collect() if names else []
    finally:
        per.unpersist()
    ids = sorted(set(ids) | {int(c["broker"]) for c in cells})  # an unregistered broker a topic still names
    by_topic: dict[str, dict[str, dict[str, int]]] = {name: {"replicas": {}, "leaders": {}} for name in names}
    for c in cells:
        by_topic[c["topic_name"]]["replicas"][str(c["broker"])] = int(c["replicas"])
        by_topic[c["topic_name"]]["leaders"][str(c["broker"])] = int(c["leaders"])
    return {
        "brokers": ids,
        "topics_total": topics_total,
        "topics": [
            {
                "topic": r["topic_name"],
                "partitions": int(r["partitions"]),
                "replicas": by_topic[r["topic_name"]]["replicas"],
                "leaders": by_topic[r["topic_name"]]["leaders"],
                "excess_replicas": int(r["excess_replicas"]),
                "excess_leaders": int(r["excess_leaders"]),
            }
            for r in ranked
        ],
    }
