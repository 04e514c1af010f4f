"""``raftmeta verify --reader jvm|python`` of a KRaft quorum's metadata logs: the checks of
:mod:`raftmeta.jobs.kraft_verify`, the same names and verdicts, in Spark SQL over the rows of
:mod:`raftmeta.jobs.kafka_log_rows` -- decoded in Spark's JVM by Kafka's own code (``jvm``) or by
raftmeta's Python reader (``python``). No Python UDF runs on the per-record path: the checks are
column expressions, windows, aggregations and joins, and only bounded results (a row per batch
problem, per node, per broker or topic, at most EXAMPLES_MAX examples) reach the driver.

- ``batch-integrity``, ``offsets-contiguous``, ``epochs-non-decreasing``: over one row per batch;
- ``logs-agree``: the batches' SHA-256 digests grouped by base offset across nodes;
- ``partition-states-valid``: invariant 7 on every partition state of the longest complete log,
  with :mod:`raftmeta.jobs.state`'s column rules; the epochs Kafka's replay gives a
  PartitionChangeRecord (partition epoch +1, leader epoch +1 when it names a leader) by windows;
- ``snapshots-match-log``: each node's newest snapshot's partitions against the log's states at
  the snapshot's offset, a join.

The placement balance figures of the live partitions at the end (replicas, preferred and current
leaders per broker, rack spread, ISR sizes) and their health flags (each topic at its
``min.insync.replicas``: its own config, else the cluster's default) are counted in the same job that checks the states,
by :mod:`raftmeta.jobs.state`'s own aggregation (``_counts``), and spread in the driver by
:func:`raftmeta.jobs.kraft_verify.balance_figures`, the driver-side path's function, over a row
per broker and kind.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from raftmeta.api.health import DEFAULT_MIN_INSYNC_REPLICAS, MIN_INSYNC_REPLICAS
from raftmeta.jobs.checks import EXAMPLES_MAX, Check, listed
from raftmeta.jobs.health import newest_topics, plain_config_int_column, topic_min_isr
from raftmeta.jobs.kafka_log_rows import DAMAGE_RECORD, DAMAGE_TRUNCATED, LOG_FILE_SUFFIXES, Reader, read_log_rows
from raftmeta.jobs.kraft_verify import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    KraftVerifyResult,
    balance_figures,
    find_kraft_logs,
)
from raftmeta.jobs.partition_rules import ISR_EMPTY
from raftmeta.jobs.state import BROKEN, PARTITION, TOPIC, _brokers, _carry, _counts, _violation_rules
from raftmeta.jobs.unhealthy import Unhealthy, health_verdict, needs_listing, unhealthy_partitions
from raftmeta.jobs.verify import split_bytes_for
from raftmeta.storage.datadir import LOG_DIR_NAME
from raftmeta.storage.segment import parse_log_file_name
from raftmeta.storage.snapshot import parse_snapshot_name

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

# Kafka's record names -> the snake-case kinds raftmeta's Spark rules read (raftmeta/jobs/state.py).
KINDS = {
    "PartitionRecord": "partition",
    "PartitionChangeRecord": "partition_change",
    "TopicRecord": "topic",
    "RemoveTopicRecord": "remove_topic",
    "RegisterBrokerRecord": "register_broker",
    "UnregisterBrokerRecord": "unregister_broker",
    "FenceBrokerRecord": "fence_broker",
    "UnfenceBrokerRecord": "unfence_broker",
    "BrokerRegistrationChangeRecord": "broker_change",
    "ConfigRecord": "config",
}
NO_LEADER_CHANGE = -2
VOTER_RECORDS = ("VotersRecord", "LeaderChangeMessage")
_COMPARED = ("replicas", "isr", "adding_replicas", "leader", "leader_epoch", "partition_epoch")


@dataclass(frozen=True, slots=True)
class NodeSpan:
    """One node's log as the batch pass found it."""

    node: int | None
    log_dir: str
    first_offset: int
    next_offset: int
    name: str = ""


def verify_kraft_spark(spark: SparkSession, data_dir: Path, reader: Reader) -> KraftVerifyResult:
    """Every check on the KRaft metadata logs under ``data_dir``, in Spark."""
    from pyspark.sql import functions as F

    log_dirs = [str(p) for p in find_kraft_logs(data_dir)]
    if not log_dirs:
        raise ValueError(f"{data_dir} holds no metadata log directory ({LOG_DIR_NAME}) in Kafka's format")
    # Every core busy however the log is cut into segments (a KRaft segment grows to 1 GiB).
    rows = read_log_rows(spark, log_dirs, reader, split_bytes=split_bytes_for(spark, log_bytes(log_dirs)))
    batches = _batches(rows.where(F.col("file").endswith(".log"))).cache()
    try:
        spans, voters = _spans_and_voters(batches, log_dirs)
        names = {s.log_dir: s.name for s in spans}
        checks = [
            _batch_integrity(batches, names, spans),
            _offsets_contiguous(batches, names, spans),
            _epochs_non_decreasing(batches, names),
            _logs_agree(batches, names, spans),
        ]
        batch_count = batches.where(F.col("batch_digest").isNotNull()).count()
        complete = [s for s in spans if s.first_offset == 0] or spans
        longest = max(complete, key=lambda s: s.next_offset)
        intact = batches.where((F.col("log_dir") == longest.log_dir) & F.col("crc_ok") & F.col("damage").isNull())
        records = intact.agg(F.sum("records")).first()[0] or 0  # type: ignore[index]
    finally:
        batches.unpersist()
    log = rows.where(
        (F.col("log_dir") == longest.log_dir)
        & F.col("file").endswith(".log")
        & F.col("crc_ok")
        & F.col("damage").isNull()
    )
    replay = _replay(log.where(F.col("record_type").isin(*KINDS))).cache()
    try:
        states_check, counts, health = _partition_states(replay, longest)
        checks.append(states_check)
        checks.append(_snapshots_match_log(spark, replay, spans, longest, reader))
    finally:
        replay.unpersist()
    figures: dict[str, Any] = {
        "nodes": len(spans),
        "controllers": sorted(voters),
        "batches": batch_count,
        "records": records,
        "reader": reader,
        **counts,
    }
    return KraftVerifyResult(checks, figures, health)


def log_bytes(log_dirs: list[str]) -> int:
    """The bytes of the segments and snapshots the verify reads."""
    return sum(p.stat().st_size for d in log_dirs for p in Path(d).iterdir() if p.name.endswith(LOG_FILE_SUFFIXES))


def _batches(rows: DataFrame) -> DataFrame:
    """One row per batch (or per unreadable stretch) of the segment files."""
    from pyspark.sql import functions as F

    voter = F.when(F.col("record_type").isin(*VOTER_RECORDS), F.struct("offset", "record_type", "voters"))
    return rows.groupBy("node", "log_dir", "file", "position").agg(
        F.first("base_offset").alias("base_offset"),
        F.first("last_offset").alias("last_offset"),
        F.first("partition_leader_epoch").alias("epoch"),
        F.first("crc_ok").alias("crc_ok"),
        F.first("batch_digest").alias("batch_digest"),
        F.max("damage").alias("damage"),
        F.max(F.when(F.col("damage") == DAMAGE_RECORD, F.col("offset"))).alias("damaged_offset"),
        F.collect_list(voter).alias("voter_records"),
        F.count("record_index").alias("records"),
    )


def _spans_and_voters(batches: DataFrame, log_dirs: list[str]) -> tuple[list[NodeSpan], set[int]]:
    """Each node's offsets and name ("controller 3001", "broker 1"), and the voters: of the newest
    VotersRecord in any node's log, else of the newest LeaderChange (as kraft_verify names them)."""
    from pyspark.sql import functions as F

    held = batches.where(F.col("batch_digest").isNotNull())
    per_node = {
        r["log_dir"]: r
        for r in held.groupBy("log_dir")
        .agg(F.first("node").alias("node"), F.min("base_offset").alias("first"), F.max("last_offset").alias("last"))
        .collect()
    }
    newest: dict[str, tuple[int, set[int]]] = {}
    for r in held.select(F.explode("voter_records").alias("v")).select("v.*").collect():
        if r["offset"] > newest.get(r["record_type"], (-1, set()))[0]:
            newest[r["record_type"]] = (r["offset"], set(r["voters"] or ()))
    voters = newest.get("VotersRecord", (-1, set()))[1] or newest.get("LeaderChangeMessage", (-1, set()))[1]
    spans = []
    for log_dir in log_dirs:
        found = per_node.get(log_dir)
        node = found["node"] if found is not None else None
        name = log_dir if node is None else f"{'controller' if node in voters else 'broker'} {node}"
        first, last = (found["first"], found["last"]) if found is not None else (-1, -2)
        spans.append(NodeSpan(node, log_dir, first, last + 1, name))
    return spans, voters


def _last_segments(spans: list[NodeSpan]) -> dict[str, str]:
    last: dict[str, str] = {}
    for span in spans:
        segments = sorted(p.name for p in Path(span.log_dir).glob("*.log") if parse_log_file_name(p.name) is not None)
        if segments:
            last[span.log_dir] = segments[-1]
    return last


def _batch_integrity(batches: DataFrame, names: dict[str, str], spans: list[NodeSpan]) -> Check:
    from pyspark.sql import functions as F

    last = _last_segments(spans)
    damaged = batches.where(~F.coalesce(F.col("crc_ok"), F.lit(True)) | F.col("damage").isNotNull()).collect()
    problems, torn = [], []
    for r in sorted(damaged, key=lambda r: (names[r["log_dir"]], r["file"], r["position"])):
        where = f"{names[r['log_dir']]}: {r['file']} at byte {r['position']}"
        if r["damage"] == DAMAGE_TRUNCATED and last.get(r["log_dir"]) == r["file"]:
            torn.append(f"{names[r['log_dir']]}: {r['file']} ends inside the batch at byte {r['position']} (torn tail)")
        elif r["damage"] == DAMAGE_RECORD:
            problems.append(f"{where} (offset {r['damaged_offset']}): a record does not decode")
        elif r["damage"] is not None:
            problems.append(f"{where} (offset {r['base_offset']}): {r['damage']}")
        else:
            problems.append(f"{where} (offset {r['base_offset']}): CRC32C mismatch")
    total = batches.where(F.col("batch_digest").isNotNull()).count()
    detail = listed(problems + torn) if problems else "; ".join([f"{total} batches intact", *torn])
    return Check("batch-integrity", not problems, detail)


def _offsets_contiguous(batches: DataFrame, names: dict[str, str], spans: list[NodeSpan]) -> Check:
    """Each batch starts where the one before it in the node's log ends (the file's base offset
    for a file's first); each segment starts where the one before it ends; the log starts at 0
    or at a snapshot's offset."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    held = batches.where(F.col("batch_digest").isNotNull())
    w = Window.partitionBy("log_dir").orderBy("file", "position")
    file_base = F.regexp_extract("file", r"^(\d{20})\.log$", 1).cast("long")
    ordered = held.select(
        "log_dir", "file", "position", "base_offset",
        F.lag("last_offset").over(w).alias("previous_last"),
        F.lag("file").over(w).alias("previous_file"),
        file_base.alias("file_base"),
    )  # fmt: skip
    first_in_file = F.col("previous_file").isNull() | (F.col("previous_file") != F.col("file"))
    expected = F.when(first_in_file, F.col("file_base")).otherwise(F.col("previous_last") + 1)
    problems: list[str] = []
    rows = ordered.where(
        (F.col("base_offset") != expected)
        | (first_in_file & F.col("previous_last").isNotNull() & (F.col("file_base") != F.col("previous_last") + 1))
    ).select("*", first_in_file.alias("first_in_file"), expected.alias("expected"))
    for r in sorted(rows.collect(), key=lambda r: (names[r["log_dir"]], r["file"], r["position"])):
        name = names[r["log_dir"]]
        if r["first_in_file"] and r["previous_last"] is not None and r["file_base"] != r["previous_last"] + 1:
            problems.append(
                f"{name}: {r['file']} starts at offset {r['file_base']}, the segment before it ends at "
                f"{r['previous_last'] + 1}"
            )
        if r["base_offset"] != r["expected"]:
            problems.append(
                f"{name}: {r['file']} at byte {r['position']}: batch starts at offset {r['base_offset']}, "
                f"expected {r['expected']}"
            )
    for span in spans:
        snapshots = {
            sid.offset for p in Path(span.log_dir).glob("*.checkpoint") if (sid := parse_snapshot_name(p.name))
        }
        if span.first_offset > 0 and span.first_offset not in snapshots:
            problems.append(f"{span.name}: the log starts at offset {span.first_offset} and no snapshot ends there")
    ranges = ", ".join(f"{s.name} {s.first_offset}..{s.next_offset - 1}" for s in spans)
    return Check("offsets-contiguous", not problems, listed(problems) if problems else ranges)


def _epochs_non_decreasing(batches: DataFrame, names: dict[str, str]) -> Check:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    w = Window.partitionBy("log_dir").orderBy("file", "position").rowsBetween(Window.unboundedPreceding, -1)
    held = batches.where(F.col("batch_digest").isNotNull())
    before = held.select("log_dir", "base_offset", "epoch", F.max("epoch").over(w).alias("highest"))
    rows = before.where(F.col("epoch") < F.col("highest")).orderBy("log_dir", "base_offset").collect()
    problems = [
        f"{names[r['log_dir']]}: offset {r['base_offset']} has epoch {r['epoch']} after epoch {r['highest']}"
        for r in rows
    ]
    return Check("epochs-non-decreasing", not problems, listed(problems) if problems else "every node")


def _logs_agree(batches: DataFrame, names: dict[str, str], spans: list[NodeSpan]) -> Check:
    """At every base offset two nodes hold, the same batch by digest; a node whose log covers an
    offset another node holds a batch at, but holds none there, has lost it."""
    from pyspark.sql import functions as F

    held = batches.where(F.col("batch_digest").isNotNull()).select("log_dir", "base_offset", "batch_digest")
    per_offset = held.groupBy("base_offset").agg(
        F.count("*").alias("holders"),
        F.count_distinct("batch_digest").alias("digests"),
        F.collect_list(F.struct("log_dir", "batch_digest")).alias("held"),
    )
    spans_df = held.sparkSession.createDataFrame(
        [(s.log_dir, s.first_offset, s.next_offset) for s in spans], "log_dir string, first long, next long"
    )
    covering = (
        per_offset.select("base_offset")
        .crossJoin(F.broadcast(spans_df))
        .where((F.col("base_offset") >= F.col("first")) & (F.col("base_offset") < F.col("next")))
    )
    missing = (
        covering.join(held, ["log_dir", "base_offset"], "left_anti")
        .groupBy("base_offset")
        .agg(F.collect_list("log_dir").alias("missing"))
    )
    bad = per_offset.join(missing, "base_offset", "left").where((F.col("digests") > 1) | F.col("missing").isNotNull())
    problems = []
    order = {s.log_dir: i for i, s in enumerate(spans)}
    for r in bad.orderBy("base_offset").limit(EXAMPLES_MAX).collect():
        holders = sorted((h["log_dir"] for h in r["held"]), key=order.__getitem__)
        if r["missing"]:
            lost = sorted(r["missing"], key=order.__getitem__)
            problems.append(
                f"offset {r['base_offset']}: {', '.join(names[d] for d in lost)} hold no batch there, "
                f"{', '.join(names[d] for d in holders)} do"
            )
        if r["digests"] > 1:
            groups: dict[str, list[str]] = {}
            for h in sorted(r["held"], key=lambda h: order[h["log_dir"]]):
                groups.setdefault(h["batch_digest"], []).append(names[h["log_dir"]])
            ranked = sorted(groups.values(), key=len, reverse=True)
            odd = [name for group in ranked[1:] for name in group]
            problems.append(
                f"offset {r['base_offset']}: {', '.join(odd)} hold another batch than {', '.join(ranked[0])}"
            )
    total = bad.count() if problems else 0
    compared = per_offset.where(F.col("holders") >= 2).count()
    detail = listed(problems, total) if problems else f"{compared} batches held by two or more nodes, all identical"
    return Check("logs-agree", not problems, detail)


def _replay(records: DataFrame) -> DataFrame:
    """The topic, broker and partition records in raftmeta's column shape: Kafka's kinds renamed,
    an unchanged leader (-2) as null (carried forward), and each PartitionChangeRecord given the
    epochs Kafka's replay gives it: its creation's partition epoch plus the changes since, its
    creation's leader epoch plus the changes since that named a leader."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    kind = F.create_map(*[F.lit(x) for pair in KINDS.items() for x in pair])[F.col("record_type")]
    change = F.col("record_type") == "PartitionChangeRecord"
    shaped = records.select(
        "offset", kind.alias("record_type"), "topic_id", "topic_name", "partition_id", "replicas", "isr",
        "adding_replicas", "removing_replicas",
        F.when(change & (F.col("leader") == NO_LEADER_CHANGE), None).otherwise(F.col("leader")).alias("leader"),
        # A PartitionRecord without an ELR leaves it empty; a change record without one keeps it.
        F.when(F.col("record_type") == "PartitionRecord", F.coalesce("elr", F.array().cast("array<int>")))
        .otherwise(F.col("elr")).alias("elr"),
        "leader_epoch", "partition_epoch", "broker_id", "rack", "fenced",
        F.lit(None).cast("string").alias("pool"), F.lit(True).alias("crc_ok"),
        # A config as health.topic_min_isr reads it (a topic's, by name), its value read as the
        # driver's path reads it (plain_config_int), and the resource the cluster default is of.
        F.when(F.col("config_resource_type") == TOPIC_RESOURCE, F.col("config_resource_name")).alias("config_resource"),
        "config_resource_type", "config_resource_name", "config_name",
        plain_config_int_column(F.col("config_value")).cast("string").alias("config_value"),
    )  # fmt: skip
    is_partition = F.col("record_type").isin("partition", "partition_change")
    created = (F.col("record_type") == "partition").cast("int")
    w = Window.partitionBy("topic_id", "partition_id").orderBy("offset")
    upto = w.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    partitions = shaped.where(is_partition).withColumn("generation", F.sum(created).over(upto))
    g = Window.partitionBy("topic_id", "partition_id", "generation").orderBy("offset")
    gupto = g.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    is_change = F.col("record_type") == "partition_change"
    partitions = partitions.select(
        *[c for c in partitions.columns if c not in ("leader_epoch", "partition_epoch")],
        (
            F.first("leader_epoch").over(gupto)
            + F.sum((is_change & F.col("leader").isNotNull()).cast("int")).over(gupto)
        ).alias("leader_epoch"),
        (F.first("partition_epoch").over(gupto) + F.sum(is_change.cast("int")).over(gupto))
        .cast("int")
        .alias("partition_epoch"),
        F.last("elr", ignorenulls=True).over(gupto).alias("elr_now"),
    )
    others = shaped.where(~is_partition).select(
        "*", F.lit(None).cast("bigint").alias("generation"), F.lit(None).cast("array<int>").alias("elr_now")
    )
    return partitions.unionByName(others)


def _light(replay: DataFrame) -> DataFrame:
    """The broker records as raftmeta's ``_brokers`` reads them (a registration change that
    fences or unfences counts as a fence or an unfence)."""
    from pyspark.sql import functions as F

    change = F.col("record_type") == "broker_change"
    kind = F.when(change, F.when(F.col("fenced"), "fence_broker").otherwise("unfence_broker")).otherwise(
        F.col("record_type")
    )
    brokers = replay.where(F.col("broker_id").isNotNull() & ~(change & F.col("fenced").isNull()))
    return brokers.select("offset", kind.alias("record_type"), "broker_id", "rack", "pool", "fenced", "crc_ok")


def _min_isr(replay: DataFrame) -> tuple[DataFrame, int]:
    """Each topic's ``min.insync.replicas`` where it sets one -- (topic_name, min_isr), by
    :func:`raftmeta.jobs.health.topic_min_isr`'s rule -- and the cluster's default for the others
    (the newest cluster-level ConfigRecord's, resource type 4 without a name; Kafka's when there is
    none or it was deleted): what the driver's path (``KafkaReplay.min_isr_of``) gives."""
    from pyspark.sql import functions as F

    configs = replay.where((F.col("record_type") == "config") & (F.col("config_name") == MIN_INSYNC_REPLICAS))
    topics = topic_min_isr(newest_topics(replay), configs)
    cluster = (
        configs.where((F.col("config_resource_type") == BROKER_RESOURCE) & (F.col("config_resource_name") == ""))
        .orderBy(F.col("offset").desc())
        .select("config_value")
        .first()
    )
    default = DEFAULT_MIN_INSYNC_REPLICAS if cluster is None or cluster[0] is None else int(cluster[0])
    return topics, default


def _partition_states(replay: DataFrame, longest: NodeSpan) -> tuple[Check, dict[str, Any], dict[str, Any]]:
    """``partition-states-valid`` and the figures of the live partitions at the end of the log --
    topics, partitions, the balance figures and the health flags' counts
    (:func:`raftmeta.jobs.kraft_verify.balance_figures`) -- in one job over the states:
    :func:`raftmeta.jobs.state._counts`, the per-broker entries of raftmeta's own replay, summed
    per (kind, broker), a row per broker and kind to the driver; then the health verdict, and the
    unhealthy partitions named (a query over the final states, run only when the counts say some
    partition is unhealthy)."""
    from pyspark.sql import Observation, Window
    from pyspark.sql import functions as F

    brokers = _brokers(_light(replay))
    names = topic_names(replay)
    partitions = replay.where("record_type in ('partition', 'partition_change') and generation > 0")
    topics = replay.where("record_type in ('topic', 'remove_topic')")
    # Partitioned by topic id alone, as raftmeta's own replay is (state.py, ``_states``): the
    # per-partition window and the per-topic ones share one shuffle and one sort (topic,
    # partition, offset), in which a topic's own records (partition id null) come first.
    carried = _carry(
        partitions.unionByName(topics).repartition("topic_id"),
        Window.partitionBy("topic_id", "partition_id").orderBy("offset"),
    )
    topic = Window.partitionBy("topic_id")
    is_topic = F.col("record_type") == "topic"
    with_topic = carried.select(
        *[c for c in carried.columns if c != "topic_name"],
        F.max_by("topic_name", F.when(is_topic, F.col("offset"))).over(topic).alias("topic_name"),
        F.min(F.when(F.col("record_type") == "remove_topic", F.col("offset"))).over(topic).alias("removed_at"),
        F.min("partition_id").over(topic).alias("first_partition_id"),
    )
    states = with_topic.where(
        F.col("record_type").isin("partition", "partition_change")
        & (F.col("removed_at").isNull() | (F.col("offset") < F.col("removed_at")))
    ).withColumn("topic_pool", F.lit(None).cast("string"))  # Kafka has no broker pools: the rule never fires

    def broken(name: str, condition: Column) -> Column:
        if name == ISR_EMPTY:  # Kafka's ELR (KIP-966) empties the ISR and keeps who may lead
            condition = condition & (F.size(F.coalesce("elr_now", F.array())) == 0)
        return F.coalesce(condition, F.lit(False))

    rules = F.array(*[F.when(broken(name, cond), F.lit(name)) for name, cond in _violation_rules(brokers)])
    checked = states.select("*", F.filter(rules, lambda x: x.isNotNull()).alias("rules"))
    live = F.col("last_of_partition") & F.col("removed_at").isNull()
    observed = Observation("kafka partition states")
    flagged = checked.select(
        "*",
        (F.size("rules") > 0).alias("broken"),
        F.lit(False).alias("orphan"),  # a change of a partition never created: counted below, by generation
        live.alias("live"),
        (live & (F.col("partition_id") == F.col("first_partition_id"))).alias("first_live_of_topic"),
    ).observe(observed, F.count(F.lit(1)).alias("states"))
    min_isr, default_min_isr = _min_isr(replay)
    counts = {
        (r["kind"], r["broker"], r["extra"]): r["count"]
        for r in _counts(flagged, brokers, min_isr, default_min_isr).collect()
    }
    orphans = replay.where("record_type = 'partition_change' and generation = 0")
    problems: list[str] = [
        f"{names.get(r['topic_id'], r['topic_id'])}-{r['partition_id']} at offset {r['offset']}: "
        "a PartitionChangeRecord of a partition the log never created"
        for r in orphans.orderBy("offset").limit(EXAMPLES_MAX).collect()
    ]
    offending = checked.where(F.size("rules") > 0).select("offset", "topic_id", "partition_id", F.explode("rules"))
    if counts.get((BROKEN, -1, -1), 0):
        problems += [
            f"{names.get(r['topic_id'], r['topic_id'])}-{r['partition_id']} at offset {r['offset']}: {r['col']}"
            for r in offending.orderBy("offset").limit(EXAMPLES_MAX).collect()
        ]
    total = offending.count() + orphans.count() if problems else 0
    figures = {
        "states": int(observed.get["states"]),
        "topics": counts.get((TOPIC, -1, -1), 0),
        "partitions": counts.get((PARTITION, -1, -1), 0),
        "brokers": len(brokers.live),
        **balance_figures(counts, brokers),
    }
    detail = (
        listed(problems, total)
        if problems
        else f"{figures['states']} partition states along {longest.name}'s log, offsets "
        f"{longest.first_offset}..{longest.next_offset - 1}"
    )
    unhealthy = Unhealthy(0, [])
    if needs_listing(figures):
        final = checked.where(live).select(
            "topic_name", "partition_id", "replicas", "isr", F.coalesce("leader", F.lit(-1)).alias("leader"),
            "adding_replicas",
        )  # fmt: skip
        by_name = {r["topic_name"]: int(r["min_isr"]) for r in min_isr.collect()}
        unhealthy = unhealthy_partitions(final, brokers.live, by_name, brokers.unfenced(), default_min_isr)
    health = {**health_verdict(figures), "unhealthy_partitions": unhealthy.to_json()}
    return Check("partition-states-valid", not problems, detail), figures, health


def topic_names(replay: DataFrame) -> dict[str, str]:
    """Each topic id's name (a row per TopicRecord reaches the driver: one per topic)."""
    return {r["topic_id"]: r["topic_name"] for r in replay.where("record_type = 'topic'").collect()}


def _partitions_at(states: DataFrame, end: int) -> DataFrame:
    """Each partition's last state below offset ``end``, its topic not removed by then."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    below = states.where(F.col("offset") < end)
    removed = below.where("record_type = 'remove_topic'").select("topic_id")
    partitions = below.where("record_type in ('partition', 'partition_change')")
    carried = _carry(partitions, Window.partitionBy("topic_id", "partition_id").orderBy("offset"))
    return (
        carried.groupBy("topic_id", "partition_id")
        .agg(F.max_by(F.struct(*_COMPARED), F.col("offset")).alias("s"))
        .select("topic_id", "partition_id", "s.*")
        .join(removed, "topic_id", "left_anti")
    )


def _snapshots_match_log(
    spark: SparkSession, replay: DataFrame, spans: list[NodeSpan], longest: NodeSpan, reader: Reader
) -> Check:
    from pyspark.sql import functions as F

    problems: list[str] = []
    compared = 0
    names = topic_names(replay)
    for span in spans:
        snapshots = sorted(
            (sid.offset, p.name)
            for p in Path(span.log_dir).glob("*.checkpoint")
            if (sid := parse_snapshot_name(p.name))
        )
        if not snapshots:
            continue
        end, name = snapshots[-1]
        if end > longest.next_offset:
            problems.append(
                f"{span.name}: {name} ends at offset {end}, past {longest.name}'s log ({longest.next_offset})"
            )
            continue
        rows = read_log_rows(spark, [span.log_dir], reader, files=[name])
        for r in rows.where(F.col("damage").isNotNull() | ~F.col("crc_ok")).collect():
            what = r["damage"] or "CRC32C mismatch"
            problems.append(f"{span.name}: {name} at byte {r['position']} (offset {r['base_offset']}): {what}")
        snapshot = _partitions_at(_replay(rows.where(F.col("record_type").isin(*KINDS))), end + 1)
        log = _partitions_at(replay, end)
        mine = snapshot.select("topic_id", "partition_id", F.struct(*_COMPARED).alias("mine"))
        logs = log.select("topic_id", "partition_id", F.struct(*_COMPARED).alias("logs"))
        differ = mine.join(logs, ["topic_id", "partition_id"], "full_outer").where(
            F.col("mine").isNull() | F.col("logs").isNull() | (F.col("mine") != F.col("logs"))
        )
        compared += 1
        for r in differ.orderBy("topic_id", "partition_id").limit(EXAMPLES_MAX).collect():
            at = f"{span.name}: {name}: {names.get(r['topic_id'], r['topic_id'])}-{r['partition_id']}"
            if r["mine"] is None or r["logs"] is None:
                problems.append(f"{at} is {'missing from the snapshot' if r['mine'] is None else 'not in the log'}")
                continue
            fields = [f"{f} {r['mine'][f]} (log {r['logs'][f]})" for f in _COMPARED if r["mine"][f] != r["logs"][f]]
            problems.append(f"{at}: {', '.join(fields)}")
    detail = listed(problems) if problems else f"{compared} nodes' newest snapshots equal {longest.name}'s log"
    return Check("snapshots-match-log", not problems, detail)
