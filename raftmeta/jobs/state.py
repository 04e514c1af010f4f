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


def _violation_rules(registered_at: Column, pool_of: Column) -> list[tuple[str, Column]]:
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
        # The controller never writes an empty ISR (it keeps the last member when none is live), and a
        # reassignment completes only while an in-sync replica stays: an empty ISR means a change --
        # typically a move dropping its removing replicas too early -- lost the last in-sync copy.
        ("ISR empty: the partition lost its last in-sync replica", F.size(isr) == 0),
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
            "replica outside the topic's broker pool",
            F.col("topic_pool").isNotNull()
            & F.exists(replicas, lambda b: pool_of[b].isNull() | (pool_of[b] != F.col("topic_pool"))),
        ),
        (
            # <= because a snapshot's records all stand at the offset just below its end.
            "replica not a registered broker",
            ~F.forall(replicas, lambda b: registered_at[b].isNotNull() & (registered_at[b] <= F.col("offset"))),
        ),
    ]


def state_checks(records: DataFrame) -> tuple[list[Check], ClusterState]:
    """Invariant 7 on every partition state, plus the final cluster state."""
    from pyspark.sql import functions as F

    records = records.where("crc_ok").cache()
    topics = records.where("record_type = 'topic'").select(
        "topic_id", "topic_name", F.col("offset").alias("created_at"), F.col("pool").alias("topic_pool")
    )
    removed = records.where("record_type = 'remove_topic'").select("topic_id", F.col("offset").alias("removed_at"))
    registrations = (
        records.where("record_type = 'register_broker'").groupBy("broker_id").agg(F.min("offset").alias("at"))
    )
    registered = {r["broker_id"]: r["at"] for r in registrations.collect()}
    # A broker's pool is set by its (latest) registration.
    pools = (
        records.where("record_type = 'register_broker' AND pool IS NOT NULL")
        .groupBy("broker_id")
        .agg(F.max_by("pool", "offset").alias("pool"))
        .collect()
    )
    pool_of = (
        F.create_map(*[F.lit(x) for r in pools for x in (r["broker_id"], r["pool"])])
        if pools
        else F.create_map().cast("map<int,string>")
    )
    registered_at = (
        F.create_map(*[F.lit(x) for pair in registered.items() for x in pair])
        if registered
        else F.create_map().cast("map<int,bigint>")
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
    rules = _violation_rules(registered_at, pool_of)
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
            "every partition state along the log has distinct registered replicas (in the topic's pool, if it "
            "has one), the topic's replication factor, a non-empty ISR within replicas, leader in ISR or -1, and "
            "rising epochs",
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


SNAPSHOT_FRAMING = ("snapshot_header", "snapshot_footer")
PARTITION_FIELDS = ("replicas", "isr", "leader", "leader_epoch", "partition_epoch")


def replay_records(spark: Any, source: str, node_root: str, snapshot_end: int | None) -> DataFrame:
    """The records to replay one node: its newest snapshot (as of the offset just below the
    snapshot's end) followed by its committed log from the snapshot's end on. Without a snapshot,
    just the committed log. Segments below a snapshot may have been deleted, so a replay from the
    log alone would miss everything created before it."""
    from pyspark.sql import functions as F

    log = spark.read.format(source).option("committed", "true").load(node_root)
    if snapshot_end is None:
        return log  # type: ignore[no-any-return]
    base = (
        spark.read.format(source)
        .option("newest_snapshot", "true")
        .load(node_root)
        .where(~F.col("record_type").isin(*SNAPSHOT_FRAMING))
        .withColumn("offset", F.lit(snapshot_end - 1).cast("long"))
        # Batches inside a snapshot file are not the log's batches: nothing may be joined on them
        # (the history job traces a record to its request through the batch it was written in).
        .withColumn("batch_base_offset", F.lit(None).cast("long"))
    )
    return base.unionByName(log.where(F.col("offset") >= snapshot_end))  # type: ignore[no-any-return]


def partitions_as_of(records: DataFrame, end_offset: int) -> DataFrame:
    """Every live partition's state after the records below ``end_offset``."""
    from pyspark.sql import functions as F

    before = records.where(F.col("offset") < end_offset)
    removed = before.where("record_type = 'remove_topic'").select("topic_id")
    return (
        partition_states(before)
        .groupBy("topic_id", "partition_id")
        .agg(F.max_by(F.struct(*PARTITION_FIELDS), F.col("offset")).alias("s"))
        .select("topic_id", "partition_id", "s.*")
        .join(removed, "topic_id", "left_anti")
    )


def snapshot_check(spark: Any, source: str, nodes: list[Any], replayed: DataFrame, replay_base: int) -> Check:
    """Each node's newest snapshot equals the replayed partition state at the snapshot's offset."""
    compared: list[str] = []
    problems: list[str] = []
    for node in nodes:
        snapshot = node.newest_snapshot
        if snapshot is None:
            continue
        if snapshot.end_offset < replay_base:
            compared.append(f"node {node.node_id}: snapshot at {snapshot.end_offset} predates the replay base")
            continue
        rows = (
            spark.read.format(source)
            .option("newest_snapshot", "true")
            .load(node.root)
            .where("record_type = 'partition'")
            .select("topic_id", "partition_id", *PARTITION_FIELDS)
        )
        expected = partitions_as_of(replayed, snapshot.end_offset).select("topic_id", "partition_id", *PARTITION_FIELDS)
        extra = rows.exceptAll(expected)
        missing = expected.exceptAll(rows)
        differences = extra.count() + missing.count()
        if differences:
            example = (extra.limit(1).collect() or missing.limit(1).collect())[0]
            where = f"topic id {example['topic_id']} partition {example['partition_id']}"
            problems.append(
                f"node {node.node_id}: snapshot at offset {snapshot.end_offset} differs from the replayed log in "
                f"{differences} partition states, e.g. {where}"
            )
        else:
            compared.append(f"node {node.node_id} at offset {snapshot.end_offset}")
    if problems:
        return Check("snapshots-match-log", False, listed(problems))
    if not compared:
        return Check("snapshots-match-log", True, "no node has taken a snapshot yet")
    return Check("snapshots-match-log", True, "newest snapshots equal the replayed log: " + "; ".join(compared))
