"""Replay the committed metadata in Spark: every partition's state along the way, the final
state, and the checks of DESIGN.md §9 invariant 7 on every state (not only the last).

Input: the record-level rows of one node's committed prefix (after the consistency checks have
shown the nodes agree, the other nodes add nothing). A partition's state after each of its
records is rebuilt by carrying forward the last value of each field (PartitionRecord sets them
all; a PartitionChangeRecord sets some), ordered by offset.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from raftmeta.jobs.checks import EXAMPLES_MAX, Check, listed

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

PARTITION_TYPES = ("partition", "partition_change")


@dataclass(frozen=True)
class ClusterState:
    """The final state, small enough for the driver (one row per partition / broker)."""

    # topic name -> partition id -> (replicas, isr, leader)
    topics: dict[str, dict[int, tuple[list[int], list[int], int]]]
    # broker id -> (rack, pool, fenced)
    brokers: dict[int, tuple[str | None, str | None, bool]]
    records: int


def partition_states(records: DataFrame) -> DataFrame:
    """One row per partition record: the partition's full state after it."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    w = Window.partitionBy("topic_id", "partition_id").orderBy("offset")
    upto = w.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    fields = ("replicas", "isr", "adding_replicas", "removing_replicas", "leader")
    carried: list[Column] = [F.last(name, ignorenulls=True).over(upto).alias(name) for name in fields]
    keys = ("offset", "record_type", "topic_id", "partition_id", "leader_epoch", "partition_epoch")
    filled = (
        records.where(F.col("record_type").isin(*PARTITION_TYPES))
        .select(*keys, *fields)
        .select(
            *keys,
            *carried,
            F.lag("leader_epoch").over(w).alias("prev_leader_epoch"),
            F.lag("partition_epoch").over(w).alias("prev_partition_epoch"),
            F.first("replicas").over(w).alias("created_replicas"),
        )
    )
    # The previous *state's* leader (carried forward), so "did the leader change" is exact.
    return filled.select("*", F.lag("leader").over(w).alias("prev_leader"))


def _violation_rules(registered_at: Column) -> list[tuple[str, Column]]:
    """(rule, condition that is true when the state breaks it)."""
    from pyspark.sql import functions as F

    replicas = F.coalesce(F.col("replicas"), F.array())
    isr = F.coalesce(F.col("isr"), F.array())
    adding = F.coalesce(F.col("adding_replicas"), F.array())
    return [
        ("no replicas", F.size(replicas) == 0),
        ("duplicate replica", F.size(F.array_distinct(replicas)) != F.size(replicas)),
        (
            "replica count differs from the replication factor",
            F.size(replicas) - F.size(adding) != F.size(F.col("created_replicas")),
        ),
        ("ISR not a subset of the replicas", F.size(F.array_except(isr, replicas)) > 0),
        ("leader outside the ISR", (F.col("leader") != -1) & ~F.array_contains(isr, F.col("leader"))),
        (
            "partition epoch did not rise by one",
            F.col("prev_partition_epoch").isNotNull() & (F.col("partition_epoch") != F.col("prev_partition_epoch") + 1),
        ),
        (
            "leader epoch went backwards",
            F.col("prev_leader_epoch").isNotNull() & (F.col("leader_epoch") < F.col("prev_leader_epoch")),
        ),
        (
            "leader changed without a new leader epoch",
            F.col("prev_leader").isNotNull()
            & (F.col("leader") != F.col("prev_leader"))
            & (F.col("leader_epoch") <= F.col("prev_leader_epoch")),
        ),
        (
            "replica not a registered broker",
            ~F.forall(replicas, lambda b: registered_at[b].isNotNull() & (registered_at[b] < F.col("offset"))),
        ),
    ]


def state_checks(records: DataFrame) -> tuple[list[Check], ClusterState]:
    """Invariant 7 on every partition state, plus the final cluster state."""
    from pyspark.sql import functions as F

    records = records.where("crc_ok").cache()
    topics = records.where("record_type = 'topic'").select(
        "topic_id", "topic_name", F.col("offset").alias("created_at")
    )
    removed = records.where("record_type = 'remove_topic'").select("topic_id", F.col("offset").alias("removed_at"))
    registrations = (
        records.where("record_type = 'register_broker'").groupBy("broker_id").agg(F.min("offset").alias("at"))
    )
    registered = {r["broker_id"]: r["at"] for r in registrations.collect()}
    registered_at = (
        F.create_map(*[F.lit(x) for pair in registered.items() for x in pair]) if registered else F.create_map()
    )

    states = partition_states(records).join(topics, "topic_id", "left").cache()
    checks: list[Check] = []

    orphans = states.where("record_type = 'partition' AND (created_at IS NULL OR created_at > offset)")
    checks.append(
        _check(
            "partitions-of-known-topics",
            orphans,
            lambda r: f"offset {r['offset']}: partition {r['partition_id']} of unknown topic id {r['topic_id']}",
            "every partition belongs to a topic created before it",
        )
    )
    rules = _violation_rules(registered_at)
    broken = F.filter(
        F.array(*[F.when(cond, F.lit(name)) for name, cond in rules]),
        lambda x: x.isNotNull(),
    )
    bad = states.select("*", broken.alias("broken")).where(F.size("broken") > 0)
    checks.append(
        _check(
            "partition-states-valid",
            bad,
            lambda r: (
                f"{r['topic_name'] or r['topic_id']}-{r['partition_id']} at offset {r['offset']}: "
                f"{', '.join(r['broken'])} (replicas {r['replicas']}, isr {r['isr']}, leader {r['leader']})"
            ),
            "every partition state along the log has distinct registered replicas, the topic's replication "
            "factor, ISR within replicas, leader in ISR or -1, and rising epochs",
        )
    )

    latest = (
        states.groupBy("topic_id", "partition_id")
        .agg(F.max_by(F.struct("replicas", "isr", "leader", "topic_name"), F.col("offset")).alias("s"))
        .join(removed, "topic_id", "left_anti")
    )
    final_topics: dict[str, dict[int, tuple[list[int], list[int], int]]] = {}
    for row in latest.select("partition_id", "s.*").collect():
        final_topics.setdefault(row["topic_name"] or "?", {})[row["partition_id"]] = (
            list(row["replicas"] or []),
            list(row["isr"] or []),
            row["leader"] if row["leader"] is not None else -1,
        )
    broker_rows = (
        records.where(
            F.col("record_type").isin("register_broker", "fence_broker", "unfence_broker", "unregister_broker")
        )
        .groupBy("broker_id")
        .agg(
            F.max_by(
                F.struct("rack", "pool"), F.when(F.col("record_type") == "register_broker", F.col("offset"))
            ).alias("r"),
            F.max_by("record_type", "offset").alias("last_type"),
            F.max_by("fenced", F.when(F.col("record_type") == "register_broker", F.col("offset"))).alias(
                "registered_fenced"
            ),
        )
        .collect()
    )
    brokers: dict[int, tuple[str | None, str | None, bool]] = {}
    for row in broker_rows:
        if row["last_type"] == "unregister_broker":
            continue
        fenced = {"fence_broker": True, "unfence_broker": False}.get(row["last_type"], bool(row["registered_fenced"]))
        brokers[row["broker_id"]] = (row["r"]["rack"], row["r"]["pool"], fenced)
    count = records.count()
    states.unpersist()
    records.unpersist()
    return checks, ClusterState(final_topics, brokers, count)


def _check(name: str, offending: DataFrame, describe: Any, ok_detail: str) -> Check:
    total = offending.count()
    if total == 0:
        return Check(name, True, ok_detail)
    rows = offending.orderBy("offset").limit(EXAMPLES_MAX).collect()
    return Check(name, False, listed([describe(r) for r in rows], total))
