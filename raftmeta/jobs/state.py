"""Replay the committed metadata in Spark: every partition's state along the way, the final
state, and the checks of DESIGN.md §9 invariant 7 on every state (not only the last).

Input: the record-level rows of one node's replay (after the consistency checks have shown the
nodes agree, the other nodes add nothing). A partition's state after each of its records is
rebuilt by carrying forward the last value of each field (PartitionRecord sets them all; a
PartitionChangeRecord sets some), ordered by offset.

Two passes over the log, and only bounded results reach the driver:

1. the broker, topic and config records (every other record skipped by its first byte), kept in
   memory: per broker, when it registered, its rack, pool and fencing; per topic, its
   ``min.insync.replicas``;
2. everything else in one job: rows are hash-partitioned by topic id and sorted once by
   (topic id, partition id, offset); window functions over that one order give each partition's
   states, its topic's creation and removal, and the first live partition of each topic; the
   states are then counted by (live, replicas, leader, ISR size, health flags), and each such
   group emits weighted (kind, broker) entries -- "broken states", "live partitions", "replicas
   on broker 3", "partitions broker 3 leads", "under-replicated" -- that a last aggregation sums.
   The driver receives a few rows per broker, never a row per partition: the 10 M-partition final
   state used to be collected here and ran the driver out of heap. Offending states are fetched
   (at most EXAMPLES_MAX, in offset order) only when a check fails.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from raftmeta.api.health import DEFAULT_MIN_INSYNC_REPLICAS
from raftmeta.jobs.checks import EXAMPLES_MAX, Check, listed
from raftmeta.jobs.datasource import SOURCE_NAME
from raftmeta.jobs.health import (
    CONFIG_COLUMNS,
    FLAGS,
    TOPIC_COLUMNS,
    HealthResult,
    health_result,
    newest_topics,
    topic_min_isr,
    with_health,
)

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from pyspark.sql import Column, DataFrame, SparkSession

PARTITION_TYPES = ("partition", "partition_change")
TOPIC_TYPES = ("topic", "remove_topic")
BROKER_TYPES = ("register_broker", "fence_broker", "unfence_broker", "unregister_broker")
SNAPSHOT_FRAMING = ("snapshot_header", "snapshot_footer")
PARTITION_FIELDS = ("replicas", "isr", "leader", "leader_epoch", "partition_epoch")
# What the state job decodes: every column costs decoding and JVM ingest, so only what the rules read.
STATE_COLUMNS = (
    "offset", "record_type", "topic_id", "topic_name", "partition_id", "replicas", "isr", "adding_replicas",
    "leader", "leader_epoch", "partition_epoch", "pool", "crc_ok",
)  # fmt: skip
BROKER_COLUMNS = ("offset", "record_type", "broker_id", "rack", "pool", "fenced", "crc_ok")
# The few records read before the main pass, in one pass (each pass frames and CRC-checks every
# batch of the log, ~1 us per record, even when it skips records by their first byte): brokers,
# and the topic and config records that give each topic's min.insync.replicas.
# Remove-topic and request records ride along (a few per topic and request): with a digest store
# they give the stored topic table and the history rows (raftmeta.jobs.state_store).
LIGHT_TYPES = (*BROKER_TYPES, "topic", "config", "remove_topic", "request")
HISTORY_TYPES = ("topic", "remove_topic", "request")
HISTORY_COLUMNS = ("offset", "batch_base_offset", "record_type", "topic_id", "topic_name", "request_id", "crc_ok")
LIGHT_COLUMNS = tuple(
    dict.fromkeys((*BROKER_COLUMNS, *TOPIC_COLUMNS, *CONFIG_COLUMNS, *HISTORY_COLUMNS, "topic_id", "pool"))
)
# What the digest store keeps of every live partition at the end of a verified replay: enough to
# validate its next state and to subtract its share of the counts (raftmeta.jobs.delta).
STORED_COLUMNS = (
    "topic_id", "partition_id", "topic_name", "replicas", "isr", "adding_replicas", "leader", "leader_epoch",
    "partition_epoch", "created_replication_factor",
)  # fmt: skip
# Parquet row groups of about this size: a run that needs a few topics' partitions reads only the
# row groups whose topic id range holds them (the written files are sorted by topic id).
ROW_GROUP_BYTES = 1 << 20

ORPHANS_CHECK = "partitions-of-known-topics"
ORPHANS_OK = "every partition belongs to a topic created before it"
STATES_CHECK = "partition-states-valid"
STATES_OK = (
    "every partition state along the log has distinct registered replicas (in the topic's pool, if it "
    "has one), the topic's replication factor, a non-empty ISR within replicas, leader in ISR or -1, and "
    "rising epochs"
)

# The kinds of entries the state job counts; per-broker ones carry the broker id, the others -1;
# ISR_SIZE carries the ISR size and the replica count; HEALTH + i counts health.FLAGS[i].
ORPHAN, BROKEN, PARTITION, LEADERLESS, RACK_SPREAD, TOPIC, REPLICA, PREFERRED, LEADER, ISR_SIZE = range(10)
HEALTH = 100


@dataclass(frozen=True)
class NodeReplay:
    """The records that replay one node: its newest snapshot (if ``snapshot_end`` is set) as of the
    offset just below the snapshot's end, then its committed log from there."""

    spark: SparkSession
    root: str
    snapshot_end: int | None = None
    # Split segment files into tasks of about this many bytes (0 = one task per file).
    split_bytes: int = 0

    def records(self, kinds: Sequence[str] | None = None, columns: Sequence[str] | None = None) -> DataFrame:
        return replay_records(
            self.spark, SOURCE_NAME, self.root, self.snapshot_end, kinds=kinds, columns=columns,
            split_bytes=self.split_bytes,
        )  # fmt: skip


@dataclass(frozen=True)
class Balance:
    """Counts over the final state's live partitions (the inputs of the balance figures)."""

    topics: int
    partitions: int
    leaderless: int
    rack_spread_violations: int
    replicas: dict[int, int]
    preferred_leaders: dict[int, int]
    leaders: dict[int, int]


@dataclass(frozen=True)
class ClusterState:
    """The final state: brokers and counts (small, on the driver), and the live partitions as a
    DataFrame to query (one row per partition: never collect it whole on a large log)."""

    # broker id -> (rack, pool, fenced), registered brokers only
    brokers: dict[int, tuple[str | None, str | None, bool]]
    records: int
    balance: Balance
    # topic_name, topic_id, partition_id, replicas, isr, leader and adding_replicas of every live partition
    final: DataFrame
    # Health of the final state (raftmeta.jobs.health), counted in the same pass as the balance.
    health: HealthResult
    # What a digest store keeps beside the final rows: every count by (kind, broker, extra), the
    # broker facts the rules read, and min.insync.replicas by topic name (where set).
    counts: dict[tuple[int, int, int], int] = field(default_factory=dict)
    broker_facts: Brokers | None = None
    min_isr: dict[str, int] = field(default_factory=dict)

    @property
    def live_brokers(self) -> set[int]:
        """Registered and unfenced at the end of the log (what Kafka's DescribeCluster lists)."""
        return {broker for broker, (_, _, fenced) in self.brokers.items() if not fenced}

    def partition(self, topic: str, partition: int) -> tuple[list[int], list[int], int] | None:
        """(replicas, isr, leader) of one live partition, or None."""
        from pyspark.sql import functions as F

        rows = self.final.where((F.col("topic_name") == topic) & (F.col("partition_id") == partition)).collect()
        if not rows:
            return None
        row = rows[0]
        return list(row["replicas"] or []), list(row["isr"] or []), row["leader"]

    def topic_names(self, limit: int = 1000) -> list[str]:
        """Names of the live topics (at most ``limit``: for small logs and tests)."""
        names = self.final.select("topic_name").distinct().orderBy("topic_name").limit(limit).collect()
        return [r["topic_name"] for r in names]


@dataclass(frozen=True)
class Brokers:
    registered_at: dict[int, int]  # first registration offset, every broker ever registered
    pool_of: dict[int, str]  # pool of the latest registration that named one
    live: dict[int, tuple[str | None, str | None, bool]]  # not unregistered: (rack, pool, fenced)

    def unfenced(self) -> set[int]:
        """The registered brokers that are not fenced."""
        return {b for b, (_, _, fenced) in self.live.items() if not fenced}


def _brokers(light: DataFrame) -> Brokers:
    """One small job over the broker records (``light``: the LIGHT_TYPES records): a row per broker."""
    from pyspark.sql import functions as F

    register = F.col("record_type") == "register_broker"
    rows = (
        light.where(F.col("crc_ok") & F.col("record_type").isin(*BROKER_TYPES))
        .groupBy("broker_id")
        .agg(
            F.min(F.when(register, F.col("offset"))).alias("registered_at"),
            F.max_by("pool", F.when(register & F.col("pool").isNotNull(), F.col("offset"))).alias("pool_of"),
            F.max_by(F.struct("rack", "pool", "fenced"), F.when(register, F.col("offset"))).alias("registration"),
            F.max_by("record_type", "offset").alias("last_type"),
        )
        .collect()
    )
    live: dict[int, tuple[str | None, str | None, bool]] = {}
    for row in rows:
        reg = row["registration"]
        if reg is None or row["last_type"] == "unregister_broker":
            continue
        fenced = {"fence_broker": True, "unfence_broker": False}.get(row["last_type"], bool(reg["fenced"]))
        live[row["broker_id"]] = (reg["rack"], reg["pool"], fenced)
    return Brokers(
        registered_at={r["broker_id"]: r["registered_at"] for r in rows if r["registered_at"] is not None},
        pool_of={r["broker_id"]: r["pool_of"] for r in rows if r["pool_of"] is not None},
        live=live,
    )


def _literal_map(mapping: Mapping[int, Any], value_type: str) -> Column:
    from pyspark.sql import functions as F

    if not mapping:
        return F.create_map().cast(f"map<int,{value_type}>")
    return F.create_map(*[F.lit(x) for pair in sorted(mapping.items()) for x in pair]).cast(f"map<int,{value_type}>")


def partition_states(records: DataFrame) -> DataFrame:
    """One row per partition record: the partition's full state after it (the input must be
    partition records only; used where no topic context is needed)."""
    from pyspark.sql import Window

    w = Window.partitionBy("topic_id", "partition_id").orderBy("offset")
    return _carry(records.where(_is_partition_record()), w)


def _is_partition_record() -> Column:
    from pyspark.sql import functions as F

    return F.col("record_type").isin(*PARTITION_TYPES)


def _carry(records: DataFrame, w: Any) -> DataFrame:
    """Each row's state after it within window ``w``: fields carried forward, the previous
    epochs and leader, the replication factor the partition was created with, and whether a
    later record of the partition follows. One window operator: every function shares ``w``'s
    partitioning and order (a function over another window's output would add an operator that
    copies every row again)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    upto = w.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    before = w.rowsBetween(Window.unboundedPreceding, -1)
    fields = [f for f in ("replicas", "isr", "adding_replicas", "removing_replicas", "leader") if f in records.columns]
    keys = [c for c in records.columns if c not in fields]
    # A replay from a snapshot taken during a move first sees the partition with its adding
    # replicas listed: the replication factor is what remains without them.
    replication_factor = F.size(F.col("replicas")) - F.size(F.coalesce(F.col("adding_replicas"), F.array()))
    return records.select(
        *keys,
        *[F.last(name, ignorenulls=True).over(upto).alias(name) for name in fields],
        F.lag("leader_epoch").over(w).alias("prev_leader_epoch"),
        F.lag("partition_epoch").over(w).alias("prev_partition_epoch"),
        F.first(replication_factor).over(upto).alias("created_replication_factor"),
        F.lead("offset").over(w).isNull().alias("last_of_partition"),
        # The previous *state's* leader (carried forward), so "did the leader change" is exact.
        F.last("leader", ignorenulls=True).over(before).alias("prev_leader"),
    )


def _violation_rules(brokers: Brokers) -> list[tuple[str, Column]]:
    """(rule, condition that is true when the state breaks it)."""
    from pyspark.sql import functions as F

    registered_at = _literal_map(brokers.registered_at, "bigint")
    pool_of = _literal_map(brokers.pool_of, "string")
    replicas = F.coalesce(F.col("replicas"), F.array())
    isr = F.coalesce(F.col("isr"), F.array())
    adding = F.coalesce(F.col("adding_replicas"), F.array())
    # <= because a snapshot's records all stand at the offset just below its end.
    unregistered: Column = ~F.forall(
        replicas, lambda b: registered_at[b].isNotNull() & (registered_at[b] <= F.col("offset"))
    )
    ids = sorted(brokers.registered_at)
    if ids:
        # Past the last registration the rule is set membership, checked without a lambda per
        # replica (lambdas run interpreted, and this rule runs on every state): a range check
        # when the registered ids are contiguous (the usual case), else a set difference.
        if ids == list(range(ids[0], ids[-1] + 1)):
            outside = (F.array_min(replicas) < ids[0]) | (F.array_max(replicas) > ids[-1])
        else:
            outside = F.size(F.array_except(replicas, F.array(*[F.lit(b) for b in ids]).cast("array<int>"))) > 0
        after_all = F.col("offset") >= F.lit(max(brokers.registered_at.values()))
        unregistered = F.when(after_all, outside).otherwise(unregistered)
    return [
        ("no replicas", F.size(replicas) == 0),
        ("duplicate replica", F.size(F.array_distinct(replicas)) != F.size(replicas)),
        (
            "replica count differs from the replication factor",
            F.size(replicas) - F.size(adding) != F.col("created_replication_factor"),
        ),
        # An ISR equal to the replicas (the usual state) needs no set difference.
        ("ISR not a subset of the replicas", (isr != replicas) & (F.size(F.array_except(isr, replicas)) > 0)),
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
        ("replica not a registered broker", unregistered),
    ]


def _states(records: DataFrame, brokers: Brokers) -> DataFrame:
    """Every partition state with its topic's context and the flags the checks and figures count."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    rows = records.where(F.col("record_type").isin(*PARTITION_TYPES, *TOPIC_TYPES))
    # Partitioning by topic id alone (not topic and partition) lets the per-partition and the
    # per-topic windows below share one shuffle and one sort: (topic, partition, offset), in
    # which a topic's TopicRecord and RemoveTopicRecords (partition id null) come first.
    per_partition = Window.partitionBy("topic_id", "partition_id").orderBy("offset")
    carried = _carry(rows.repartition("topic_id"), per_partition)
    is_topic = F.col("record_type") == "topic"
    per_topic = (
        Window.partitionBy("topic_id")
        .orderBy("partition_id", "offset")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    with_topic = carried.select(
        "*",
        # A topic's first TopicRecord names it and sets its pool; any RemoveTopicRecord ends it.
        F.first(F.when(is_topic, F.struct("offset", "topic_name", "pool")), ignorenulls=True)
        .over(per_topic)
        .alias("topic"),
        F.max(F.col("record_type") == "remove_topic").over(per_topic).alias("removed"),
        # The topic's lowest partition id: its partition counted when counting topics.
        F.min("partition_id").over(per_topic).alias("first_partition_id"),
    )
    broken: Column = F.lit(False)
    for _, condition in _violation_rules(brokers):
        broken = broken | F.coalesce(condition, F.lit(False))
    created_at = F.col("topic.offset")
    orphan = (F.col("record_type") == "partition") & (created_at.isNull() | (created_at > F.col("offset")))
    live = F.col("last_of_partition") & ~F.col("removed")
    return with_topic.where(_is_partition_record()).select(
        "offset", "record_type", "topic_id", "partition_id", "replicas", "isr", "leader", "adding_replicas",
        "created_replication_factor", "prev_leader_epoch", "prev_partition_epoch", "prev_leader", "leader_epoch",
        "partition_epoch",
        F.col("topic.pool").alias("topic_pool"),
        F.col("topic.topic_name").alias("topic_name"),
        orphan.alias("orphan"),
        broken.alias("broken"),
        live.alias("live"),
        (live & (F.col("partition_id") == F.col("first_partition_id"))).alias("first_live_of_topic"),
    )  # fmt: skip


def _counts(
    states: DataFrame, brokers: Brokers, min_isr: DataFrame, default_min_isr: int = DEFAULT_MIN_INSYNC_REPLICAS
) -> DataFrame:
    """Rows of (kind, broker, extra, count): every count the checks and figures need, the health
    of the final state's partitions included, bounded by the number of brokers.

    First the states are grouped by what the figures depend on -- (live, replicas, leader, ISR
    size, health flags) -- which map-side aggregation collapses to a row per distinct assignment;
    the entries per broker ("a replica on broker 3", "broker 3 leads") and the rack spread are
    then computed once per group, weighted by its size, rather than once per partition. The health
    flags are computed here, on the same rows, because the final state is not kept: a second job
    over ``ClusterState.final`` would decode and sort the whole log again (it did, and took as long
    as this one). ``min_isr``: (topic_name, min_isr) of the topics that set it; the others take
    ``default_min_isr``."""
    from pyspark.sql import functions as F

    live = F.col("live")
    empty = F.array().cast("array<int>")
    live_brokers = brokers.unfenced()
    flagged = with_health(states, live_brokers, min_isr, default_min_isr)
    groups = flagged.groupBy(
        live.alias("live"),
        F.when(live, F.coalesce(F.col("replicas"), empty)).alias("replicas"),
        F.when(live, F.coalesce(F.col("leader"), F.lit(-1))).alias("leader"),
        F.when(live, F.size(F.coalesce(F.col("isr"), empty))).alias("isr_size"),
        *[(live & F.col(flag)).alias(flag) for flag in FLAGS],
    ).agg(
        F.count(F.lit(1)).alias("n"),
        F.count(F.when(F.col("orphan"), F.lit(1))).alias("orphans"),
        F.count(F.when(F.col("broken"), F.lit(1))).alias("broken"),
        F.count(F.when(F.col("first_live_of_topic"), F.lit(1))).alias("topics"),
    )

    def entry(kind: int, n: Column, broker: Column | int = -1, extra: Column | int = -1) -> Column:
        b = broker if not isinstance(broker, int) else F.lit(broker)
        x = extra if not isinstance(extra, int) else F.lit(extra)
        return F.struct(
            F.lit(kind).alias("kind"), b.cast("int").alias("broker"), x.cast("int").alias("extra"),
            n.cast("long").alias("n"),
        )  # fmt: skip

    replicas, leader, n = F.col("replicas"), F.col("leader"), F.col("n")
    flags = F.array(
        entry(ORPHAN, F.col("orphans")),
        entry(BROKEN, F.col("broken")),
        entry(TOPIC, F.col("topics")),
        F.when(live, entry(PARTITION, n)),
        F.when(live & (leader < 0), entry(LEADERLESS, n)),
        F.when(live & rack_spread_short(replicas, brokers.live), entry(RACK_SPREAD, n)),
        F.when(live & (F.size(replicas) > 0), entry(PREFERRED, n, replicas[0])),
        F.when(live & (leader >= 0), entry(LEADER, n, leader)),
        F.when(live, entry(ISR_SIZE, n, F.col("isr_size"), F.size(replicas))),
        *[F.when(F.col(flag), entry(HEALTH + i, n)) for i, flag in enumerate(FLAGS)],
    )
    per_replica = F.when(live, F.transform(replicas, lambda b: entry(REPLICA, n, b))).otherwise(
        F.array().cast("array<struct<kind:int,broker:int,extra:int,n:bigint>>")
    )
    return (
        groups.select(F.explode(F.concat(flags, per_replica)).alias("e"))
        .where(F.col("e").isNotNull())
        .groupBy("e.kind", "e.broker", "e.extra")
        .agg(F.sum("e.n").alias("count"))
    )


def rack_spread_short(replicas: Column, live: Mapping[int, tuple[str | None, str | None, bool]]) -> Column:
    """True when ``replicas`` span fewer racks than they could: fewer distinct racks than
    min(replicas, racks of the registered brokers) (``live``: broker -> (rack, pool, fenced)).
    Brokers without a rack count as one rack, as ``partition_rules.rack_view`` counts them."""
    from pyspark.sql import functions as F

    rack_of = _literal_map({b: rack for b, (rack, _, _) in live.items()}, "string")
    racks = len({rack for rack, _, _ in live.values()})
    spanned = F.size(F.array_distinct(F.transform(replicas, lambda b: rack_of[b])))
    return spanned < F.least(F.size(replicas), F.lit(racks))


def state_checks(replay: NodeReplay, store_at: Path | None = None) -> tuple[list[Check], ClusterState]:
    """Invariant 7 on every partition state, plus the final cluster state and its health.

    Two passes over the node's log: the LIGHT_TYPES records (kept in memory: a few per broker
    and topic), then the main pass, which counts everything else in one job. With ``store_at``
    (a digest store's staging dir), the main pass writes the final state's rows there instead of
    counting them on the spot (see :func:`_write_final`), and the light pass writes the topic
    table and the history rows."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    light = replay.records(kinds=LIGHT_TYPES, columns=LIGHT_COLUMNS).where("crc_ok").cache()
    brokers = _brokers(light)
    min_isr = topic_min_isr(newest_topics(light), light)
    observed = Observation("replayed records")
    records = replay.records(columns=STATE_COLUMNS).where("crc_ok").observe(observed, F.count(F.lit(1)).alias("n"))
    # Small (the topics that set it), and the report names each unhealthy partition's minimum.
    min_isr_by_name = {r["topic_name"]: int(r["min_isr"]) for r in min_isr.collect()}
    if store_at is None:
        counts: dict[tuple[int, int, int], int] = {
            (r["kind"], r["broker"], r["extra"]): r["count"]
            for r in _counts(_states(records, brokers), brokers, min_isr).collect()
        }
    else:
        _write_light(light, store_at)
        counts = _write_final(_states(records, brokers), brokers, min_isr, store_at)
    total = observed.get["n"]
    # Released now: the one query that reads it again (the examples of a failed health check) reads the log.
    light.unpersist()

    def count(kind: int) -> int:
        return counts.get((kind, -1, -1), 0)

    def states() -> DataFrame:  # a fresh plan for follow-up queries (an Observation is used once)
        return _states(replay.records(columns=STATE_COLUMNS).where("crc_ok"), brokers)

    checks = [
        _check(ORPHANS_CHECK, count(ORPHAN), lambda: states().where("orphan"), describe_orphan, ORPHANS_OK),
        _check(
            STATES_CHECK,
            count(BROKEN),
            lambda: _broken_rules(states().where("broken"), brokers),
            describe_broken,
            STATES_OK,
        ),
    ]
    final = (
        states()
        .where("live")
        .select(
            "topic_name", "topic_id", "partition_id", "replicas", "isr",
            F.coalesce("leader", F.lit(-1)).alias("leader"), "adding_replicas",
        )
    )  # fmt: skip
    live_brokers = brokers.unfenced()
    health = health_result(
        {flag: count(HEALTH + i) for i, flag in enumerate(FLAGS)},
        isr_sizes_of(counts),
        lambda: with_health(final, live_brokers, min_isr),
    )
    return checks, ClusterState(
        brokers.live, total, balance_of(counts), final, health, counts, brokers, min_isr_by_name
    )


def describe_orphan(r: Any) -> str:
    return f"offset {r['offset']}: partition {r['partition_id']} of unknown topic id {r['topic_id']}"


def describe_broken(r: Any) -> str:
    return (
        f"{r['topic_name'] or r['topic_id']}-{r['partition_id']} at offset {r['offset']}: "
        f"{', '.join(r['rules'])} (replicas {r['replicas']}, isr {r['isr']}, leader {r['leader']})"
    )


def balance_of(counts: dict[tuple[int, int, int], int]) -> Balance:
    """The balance counts among the state job's counts."""

    def count(kind: int) -> int:
        return counts.get((kind, -1, -1), 0)

    def per_broker(kind: int) -> dict[int, int]:
        return {broker: n for (k, broker, _), n in counts.items() if k == kind}

    return Balance(
        topics=count(TOPIC),
        partitions=count(PARTITION),
        leaderless=count(LEADERLESS),
        rack_spread_violations=count(RACK_SPREAD),
        replicas=per_broker(REPLICA),
        preferred_leaders=per_broker(PREFERRED),
        leaders=per_broker(LEADER),
    )


def isr_sizes_of(counts: dict[tuple[int, int, int], int]) -> dict[tuple[int, int], int]:
    return {(size, rf): n for (k, size, rf), n in counts.items() if k == ISR_SIZE}


def _write_final(
    states: DataFrame, brokers: Brokers, min_isr: DataFrame, store_at: Path
) -> dict[tuple[int, int, int], int]:
    """Write the final state's live partitions (STORED_COLUMNS) to ``store_at/partitions`` and
    return the counts :func:`_counts` gives.

    One pass over the log, as without a store: the job that decodes, shuffles and sorts writes the
    live rows, and counts the broken and orphan states -- over every state, not only the live
    ones -- on the way (an Observation); the other counts are then taken from the written rows,
    which are a tenth of the work of the replay. The rows come out of the window sorted by topic id
    in each file, so a later run reads only the row groups of the topics it needs."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    flags = Observation("broken and orphan states")
    watched = states.observe(
        flags,
        F.count(F.when(F.col("orphan"), F.lit(1))).alias("orphans"),
        F.count(F.when(F.col("broken"), F.lit(1))).alias("broken"),
    )
    target = str(store_at / "partitions")
    (
        watched.where("live")
        .select(*STORED_COLUMNS, "first_live_of_topic")
        .write.option("parquet.block.size", ROW_GROUP_BYTES)
        .parquet(target)
    )
    written = states.sparkSession.read.parquet(target).select(
        "*", F.lit(True).alias("live"), F.lit(False).alias("orphan"), F.lit(False).alias("broken")
    )
    counts = {(r["kind"], r["broker"], r["extra"]): r["count"] for r in _counts(written, brokers, min_isr).collect()}
    seen = flags.get
    counts[(ORPHAN, -1, -1)] = int(seen["orphans"])
    counts[(BROKEN, -1, -1)] = int(seen["broken"])
    return counts


def _write_light(light: DataFrame, store_at: Path) -> None:
    """The topic table (a row per topic id: its first TopicRecord's name, pool and offset, and
    whether a RemoveTopicRecord ends it) and the history rows, from the cached light records."""
    from pyspark.sql import functions as F

    is_topic = F.col("record_type") == "topic"
    (
        light.where(F.col("record_type").isin(*TOPIC_TYPES))
        .groupBy("topic_id")
        .agg(
            F.min_by(F.struct("topic_name", "pool", "offset"), F.when(is_topic, F.col("offset"))).alias("t"),
            F.max(F.col("record_type") == "remove_topic").alias("removed"),
        )
        .select(
            "topic_id",
            F.col("t.topic_name").alias("topic_name"),
            F.col("t.pool").alias("pool"),
            F.col("t.offset").alias("created_at"),
            "removed",
        )
        .coalesce(1)
        .write.parquet(str(store_at / "topics"))
    )
    (
        light.where(F.col("record_type").isin(*HISTORY_TYPES))
        .select(*HISTORY_COLUMNS)
        .coalesce(1)
        .write.parquet(str(store_at / "history"))
    )


def _broken_rules(states: DataFrame, brokers: Brokers) -> DataFrame:
    """The names of the rules each (broken) state breaks, as column ``rules``."""
    from pyspark.sql import functions as F

    named = F.array(*[F.when(cond, F.lit(name)) for name, cond in _violation_rules(brokers)])
    return states.select("*", F.filter(named, lambda x: x.isNotNull()).alias("rules"))


def _check(name: str, total: int, offending: Any, describe: Any, ok_detail: str) -> Check:
    if total == 0:
        return Check(name, True, ok_detail)
    rows = offending().orderBy("offset").limit(EXAMPLES_MAX).collect()
    return Check(name, False, listed([describe(r) for r in rows], total))


def replay_records(
    spark: SparkSession,
    source: str,
    node_root: str,
    snapshot_end: int | None,
    *,
    kinds: Sequence[str] | None = None,
    columns: Sequence[str] | None = None,
    split_bytes: int = 0,
) -> DataFrame:
    """The records to replay one node: its newest snapshot (as of the offset just below the
    snapshot's end) followed by its committed log from the snapshot's end on. Without a snapshot,
    just the committed log. Segments below a snapshot may have been deleted, so a replay from the
    log alone would miss everything created before it.

    ``kinds`` and ``columns`` narrow what is decoded (see the data source's options); with a
    snapshot, ``offset`` is always among the columns."""
    from pyspark.sql import functions as F

    from raftmeta.jobs.columns import RECORD_KINDS

    if columns is not None and snapshot_end is not None and "offset" not in columns:
        columns = (*columns, "offset")

    def read(record_kinds: Sequence[str] | None, **flags: str) -> DataFrame:
        reader = spark.read.format(source)
        for key, value in flags.items():
            reader = reader.option(key, value)
        if record_kinds is not None:
            reader = reader.option("record_types", ",".join(record_kinds))
        if columns is not None:
            reader = reader.option("columns", ",".join(columns))
        if split_bytes:
            reader = reader.option("split_bytes", str(split_bytes))
        return reader.load(node_root)

    log = read(kinds, committed="true")
    if snapshot_end is None:
        return log
    # The snapshot's framing records are not metadata: skipped by kind while reading.
    base = read([k for k in (kinds or RECORD_KINDS) if k not in SNAPSHOT_FRAMING], newest_snapshot="true")
    base = base.withColumn("offset", F.lit(snapshot_end - 1).cast("long"))
    if "batch_base_offset" in base.columns:
        # Batches inside a snapshot file are not the log's batches: nothing may be joined on them
        # (the history job traces a record to its request through the batch it was written in).
        base = base.withColumn("batch_base_offset", F.lit(None).cast("long"))
    return base.unionByName(log.where(F.col("offset") >= snapshot_end))


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
    """Each node's newest snapshot equals the replayed partition state at the snapshot's offset.

    ``replayed``: the replay's partition and remove-topic records (offset, record_type, topic_id,
    partition_id and the partition fields)."""
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
            .option("record_types", "partition")
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
