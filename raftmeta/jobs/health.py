"""Partition health at the end of the log, in Spark: ``raftmeta.api.health``'s rules as column
expressions over ``ClusterState.final``, summed into the report's figures, and the check that
every partition whose replicas' brokers are all registered and unfenced has a full ISR (DESIGN.md
§9 L2, issue 18).

The rules run as Spark expressions rather than a Python UDF (no Python worker per row on a
10 M-partition log); ``tests/jobs/test_spark_health.py`` shows they give what
``raftmeta.api.health.classify`` gives on the same partitions. Only counts and, when the check fails,
at most ``EXAMPLES_MAX`` offending partitions reach the driver.

``min.insync.replicas`` is each topic's last ``ConfigRecord`` for it (resource name = topic name)
written after the newest ``TopicRecord`` of that name (a config of an earlier topic of the same
name went with it), Kafka's default 1 when there is none or the last one deletes it. Both come from
record kinds the data source skips by their first byte, so they cost next to nothing; the flags
and the ISR-size figure share one aggregation over the final state (one pass over the log).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from raftmeta.api.health import DEFAULT_MIN_INSYNC_REPLICAS, MIN_INSYNC_REPLICAS, NO_LEADER
from raftmeta.jobs.checks import EXAMPLES_MAX, Check, listed

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

# PartitionHealth's fields, in its order: each becomes a boolean column of that name.
FLAGS = (
    "under_replicated",
    "unavailable",
    "under_min_isr",
    "at_min_isr",
    "offline",
    "preferred_leader_away",
    "stuck_under_replicated",
)
CONFIG_COLUMNS = ("offset", "record_type", "config_resource", "config_name", "config_value", "crc_ok")
TOPIC_COLUMNS = ("offset", "record_type", "topic_name", "crc_ok")
CHECK_NAME = "isr-full-when-replicas-live"
# A config value both Spark's cast and Python's int() read alike (plain_config_int).
PLAIN_INT = re.compile(r"-?[0-9]{1,10}")
INT32 = range(-(2**31), 2**31)
# The report's figures, by flag (under_replicated_partitions was the ISR-size count before: same key).
FIGURES = {
    "under_replicated": "under_replicated_partitions",
    "under_min_isr": "under_min_isr_partitions",
    "at_min_isr": "at_min_isr_partitions",
    "unavailable": "unavailable_partitions",
    "offline": "offline_partitions",
    "preferred_leader_away": "preferred_leader_away_partitions",
    "stuck_under_replicated": "under_replicated_with_live_replicas",
}


@dataclass(frozen=True)
class HealthResult:
    counts: dict[str, int]  # flag -> partitions
    check: Check
    # (ISR size, replica count) -> partitions, for the ISR-size figure and plot
    isr_sizes: dict[tuple[int, int], int]

    def figures(self) -> dict[str, int]:
        return {FIGURES[flag]: self.counts.get(flag, 0) for flag in FIGURES}


def _int_array(ids: Collection[int]) -> Column:
    from pyspark.sql import functions as F

    return F.array(*[F.lit(int(b)) for b in sorted(ids)]).cast("array<int>")


def health_columns(live_brokers: Collection[int], min_isr: Column | None = None) -> list[Column]:
    """The flags of ``raftmeta.api.health.classify`` as columns named by ``FLAGS``, over columns
    ``replicas``, ``isr``, ``leader`` (nullable) and ``adding_replicas`` (nullable, absent = none) of
    the frame they are selected from; ``min_isr`` defaults to column ``min_isr``."""
    from pyspark.sql import functions as F

    empty = F.array().cast("array<int>")
    replicas = F.coalesce(F.col("replicas"), empty)
    isr = F.coalesce(F.col("isr"), empty)
    adding = F.coalesce(F.col("adding_replicas"), empty)
    leader = F.coalesce(F.col("leader"), F.lit(NO_LEADER))
    minimum = F.col("min_isr") if min_isr is None else min_isr
    live = _int_array(live_brokers)
    has_leader = leader != F.lit(NO_LEADER)
    # Counted with filter, not array_except: a set operation would also drop duplicate replicas.
    factor = F.size(F.filter(replicas, lambda b: ~F.array_contains(adding, b)))
    under_replicated = (factor - F.size(isr)) > 0
    every_replica_live = F.forall(replicas, lambda b: F.array_contains(live, b))
    return [
        under_replicated.alias("under_replicated"),
        (~has_leader | ~F.array_contains(live, leader)).alias("unavailable"),
        (~has_leader | (F.size(isr) < minimum)).alias("under_min_isr"),
        (F.size(isr) == minimum).alias("at_min_isr"),
        (~has_leader).alias("offline"),
        F.when(F.size(replicas) == 0, F.lit(True))
        .otherwise(leader != F.element_at(replicas, 1))
        .alias("preferred_leader_away"),
        (under_replicated & every_replica_live).alias("stuck_under_replicated"),
    ]


def newest_topics(topic_records: DataFrame) -> DataFrame:
    """(topic_name, topic_offset): the offset of the newest TopicRecord of every name (the live
    topic of that name, if there is one). ``topic_records``: the replay's ``TOPIC_COLUMNS``."""
    from pyspark.sql import functions as F

    return (
        topic_records.where(F.col("crc_ok") & (F.col("record_type") == "topic"))
        .groupBy("topic_name")
        .agg(F.max("offset").alias("topic_offset"))
    )


def topic_min_isr(topics: DataFrame, configs: DataFrame) -> DataFrame:
    """(topic_name, min_isr) of every topic that sets ``min.insync.replicas`` (others: the default).
    ``topics``: (topic_name, topic_offset) as :func:`newest_topics` gives; ``configs``: the replay's
    config records (``CONFIG_COLUMNS``)."""
    from pyspark.sql import functions as F

    wanted = configs.where(
        F.col("crc_ok") & (F.col("record_type") == "config") & (F.col("config_name") == MIN_INSYNC_REPLICAS)
    ).select("offset", "config_resource", "config_value")
    return (
        topics.select("topic_name", "topic_offset")
        .join(
            F.broadcast(wanted),
            (F.col("topic_name") == F.col("config_resource")) & (F.col("offset") >= F.col("topic_offset")),
        )
        .groupBy("topic_name")
        # The newest value; a deleted config (null value) means the default again.
        .agg(F.max_by(F.struct(F.col("config_value").alias("v")), F.col("offset")).alias("last"))
        .select("topic_name", F.col("last.v").cast("int").alias("min_isr"))
        .where(F.col("min_isr").isNotNull())
    )


def plain_config_int(value: str | None) -> int | None:
    """A config value as an int when it is a plain decimal in the 32-bit range, else None. Kafka's
    ConfigDef validates ``min.insync.replicas`` before the controller writes it; other spellings
    (spaces, a sign, a fraction, a number past int32) are read by no one rather than by two parsers
    (Python's ``int`` and Spark's cast) that disagree on them. :func:`plain_config_int_column` is
    its Spark twin."""
    if value is None or not PLAIN_INT.fullmatch(value) or int(value) not in INT32:
        return None
    return int(value)


def plain_config_int_column(value: Column) -> Column:
    """:func:`plain_config_int` as a Spark column expression (null where it gives None)."""
    from pyspark.sql import functions as F

    wide = F.when(value.rlike(f"^{PLAIN_INT.pattern}$"), value.try_cast("long"))
    return F.when(wide.between(INT32.start, INT32.stop - 1), wide.cast("int"))


def with_health(
    final: DataFrame,
    live_brokers: Collection[int],
    min_isr: DataFrame,
    default_min_isr: int = DEFAULT_MIN_INSYNC_REPLICAS,
) -> DataFrame:
    """``final`` with its ``min_isr`` and the health flags (``FLAGS``) of every partition; a topic
    without a row in ``min_isr`` takes ``default_min_isr`` (a KRaft log's cluster-wide default,
    else Kafka's)."""
    from pyspark.sql import functions as F

    joined = final.join(F.broadcast(min_isr), "topic_name", "left").withColumn(
        "min_isr", F.coalesce(F.col("min_isr"), F.lit(default_min_isr))
    )
    return joined.select("*", *health_columns(live_brokers))


def partition_health(
    final: DataFrame, topic_records: DataFrame, configs: DataFrame, live_brokers: Collection[int]
) -> HealthResult:
    """The counts of every flag over the live partitions, the ISR sizes, and the check.
    ``topic_records`` and ``configs``: the replay's ``TOPIC_COLUMNS`` and ``CONFIG_COLUMNS``."""
    from pyspark.sql import functions as F

    flagged = with_health(final, live_brokers, topic_min_isr(newest_topics(topic_records), configs))
    empty = F.array().cast("array<int>")
    # One aggregation for every figure: a row per distinct (sizes, flags), a few hundred at most.
    rows = (
        flagged.groupBy(
            F.size(F.coalesce("isr", empty)).alias("isr_size"),
            F.size(F.coalesce("replicas", empty)).alias("replica_count"),
            *FLAGS,
        )
        .count()
        .collect()
    )
    counts = {flag: sum(int(r["count"]) for r in rows if r[flag]) for flag in FLAGS}
    isr_sizes: dict[tuple[int, int], int] = {}
    for r in rows:
        key = (int(r["isr_size"]), int(r["replica_count"]))
        isr_sizes[key] = isr_sizes.get(key, 0) + int(r["count"])
    return health_result(counts, isr_sizes, lambda: flagged)


def health_result(
    counts: dict[str, int], isr_sizes: dict[tuple[int, int], int], flagged: Callable[[], DataFrame]
) -> HealthResult:
    """The result from counts already aggregated (by :func:`partition_health`, or by the state
    job in its one pass over the log); ``flagged`` gives the final state with its flags, queried
    only when the check fails, for its examples."""
    stuck = counts.get("stuck_under_replicated", 0)
    if stuck == 0:
        check = Check(CHECK_NAME, True, health_ok_detail())
    else:
        rows = (
            flagged()
            .where("stuck_under_replicated")
            .orderBy("topic_name", "partition_id")
            .limit(EXAMPLES_MAX)
            .select("topic_name", "partition_id", "replicas", "isr", "leader")
            .collect()
        )
        check = Check(CHECK_NAME, False, listed([describe_stuck(r) for r in rows], stuck))
    return HealthResult(counts, check, isr_sizes)


def health_ok_detail() -> str:
    return (
        "at the end of the log every partition whose replicas' brokers are all registered and unfenced has a full ISR"
    )


def describe_stuck(row: Any) -> str:
    isr, replicas = list(row["isr"] or []), list(row["replicas"] or [])
    return (
        f"{row['topic_name']}-{row['partition_id']} is under-replicated at the end of the log (isr {isr}, replicas "
        f"{replicas}, leader {row['leader']}) although every replica's broker is registered and unfenced"
    )
