"""The unhealthy partitions named, and the health verdict beside the consistency one.

Consistency says whether the nodes' logs agree; health says whether the cluster they describe
is in good shape. A log can be perfectly consistent and describe eight partitions under min ISR:
the report shows both verdicts, and names the partitions (topic, partition, leader, replicas,
ISR, why) so a platform engineer sees where the problem is, not only how big it is.

The partitions are picked in Spark (the health flags of ``raftmeta.jobs.health`` and the rack
spread rule of the state job, as column expressions); at most ``LISTED_MAX`` rows reach the
driver, the worst first. The query runs only when the counts already say something is unhealthy.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from raftmeta.api.health import DEFAULT_MIN_INSYNC_REPLICAS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

# Why a partition is unhealthy, worst first (the order the list is sorted by), with its label.
REASONS = {
    "offline": "offline (no leader)",
    "leader_not_live": "leader not live (fenced or unregistered)",
    "under_min_isr": "under min ISR",
    "under_replicated": "under-replicated",
    "rack_spread_short": "rack spread short",
}
LISTED_MAX = 100
HEALTHY, WARN, FAILED = "HEALTHY", "WARN", "FAILED"
# figure -> (verdict it gives when above zero, how to say it); the order is the reasons' order.
VERDICT_RULES = {
    "offline_partitions": (FAILED, "offline (no leader)"),
    "unavailable_partitions": (FAILED, "unavailable (no leader, or a fenced or unregistered one)"),
    "under_min_isr_partitions": (FAILED, "under min ISR (acks=all produce refused)"),
    "under_replicated_partitions": (WARN, "under-replicated"),
    "rack_spread_violations": (WARN, "with replicas on fewer racks than they could span"),
    "fenced_brokers": (WARN, "fenced"),
}


@dataclass(frozen=True)
class Unhealthy:
    """The unhealthy partitions of the final state: how many, and the first ``LISTED_MAX``."""

    total: int
    listed: list[dict[str, Any]]

    def to_json(self) -> dict[str, Any]:
        return {"total": self.total, "listed": self.listed, "listed_max": LISTED_MAX}


def unhealthy_partitions(
    final: DataFrame,
    brokers: Mapping[int, tuple[str | None, str | None, bool]],
    min_isr: Mapping[str, int],
    live_brokers: Collection[int],
    default_min_isr: int = DEFAULT_MIN_INSYNC_REPLICAS,
) -> Unhealthy:
    """Every live partition that is offline, led by a broker that is not live, under min ISR,
    under-replicated or short of rack spread, worst first then by topic and partition
    (``brokers``: registered broker -> (rack, pool, fenced); ``min_isr``: topic -> its
    ``min.insync.replicas`` where set, ``default_min_isr`` elsewhere). :func:`ranked` is the
    driver-side twin of its order and limit."""
    from pyspark.sql import functions as F

    from raftmeta.jobs.health import with_health
    from raftmeta.jobs.state import rack_spread_short

    spark = final.sparkSession
    minimums = spark.createDataFrame(sorted(min_isr.items()), "topic_name string, min_isr int")
    partitions = final.select("topic_name", "partition_id", "replicas", "isr", "leader", "adding_replicas")
    flagged = with_health(partitions, live_brokers, minimums, default_min_isr).select(
        "*",
        rack_spread_short(F.coalesce("replicas", F.array().cast("array<int>")), brokers).alias("rack_spread_short"),
        # Kafka's "unavailable" less the offline ones: a leader the controller has fenced or lost.
        (F.col("unavailable") & ~F.col("offline")).alias("leader_not_live"),
    )
    reasons = F.filter(F.array(*[F.when(F.col(r), F.lit(r)) for r in REASONS]), lambda r: r.isNotNull())
    worst = F.coalesce(*[F.when(F.col(r), F.lit(i)) for i, r in enumerate(REASONS)])
    picked = flagged.where(F.size(reasons) > 0).select(
        "topic_name", "partition_id", "leader", "replicas", "isr", "min_isr", reasons.alias("reasons"),
        worst.alias("worst"),
    )  # fmt: skip
    # One row more than listed says whether a count is needed (a second query, only then).
    rows = picked.orderBy("worst", "topic_name", "partition_id").limit(LISTED_MAX + 1).collect()
    total = len(rows) if len(rows) <= LISTED_MAX else picked.count()
    listed = [
        {
            "topic": r["topic_name"],
            "partition": r["partition_id"],
            "leader": r["leader"],
            "replicas": list(r["replicas"] or []),
            "isr": list(r["isr"] or []),
            "min_isr": r["min_isr"],
            "why": list(r["reasons"]),
        }
        for r in rows[:LISTED_MAX]
    ]
    return Unhealthy(total, listed)


def reasons_of(flags: Mapping[str, bool]) -> list[str]:
    """The reasons (keys of ``REASONS``) among ``flags``, worst first."""
    return [reason for reason in REASONS if flags.get(reason)]


def ranked(partitions: Iterable[dict[str, Any]]) -> Unhealthy:
    """Unhealthy partitions picked in the driver (each in the listed shape, ``why`` from
    :func:`reasons_of`), in :func:`unhealthy_partitions`' order: worst first, then by topic
    (none first, as Spark orders nulls) and partition; at most ``LISTED_MAX`` listed."""
    worst = {reason: i for i, reason in enumerate(REASONS)}
    order = sorted(
        partitions, key=lambda p: (worst[p["why"][0]], p["topic"] is not None, p["topic"] or "", p["partition"])
    )
    return Unhealthy(len(order), order[:LISTED_MAX])


def needs_listing(figures: Mapping[str, Any]) -> bool:
    """Whether the counts say some partition is unhealthy (else the listing query is skipped)."""
    keys = (
        "offline_partitions", "unavailable_partitions", "under_min_isr_partitions", "under_replicated_partitions",
        "rack_spread_violations",
    )  # fmt: skip
    return any(figures.get(k, 0) > 0 for k in keys)


def health_verdict(figures: Mapping[str, Any]) -> dict[str, Any]:
    """FAILED when a partition is offline, unavailable (its leader not live) or under min ISR
    (writes with acks=all fail), WARN when
    one is under-replicated or short of rack spread or a broker is fenced, else HEALTHY; with
    the reasons as sentences, the worst first."""
    verdict = HEALTHY
    reasons: list[str] = []
    for key, (level, words) in VERDICT_RULES.items():
        n = int(figures.get(key, 0))
        if n <= 0:
            continue
        if level == FAILED or verdict == HEALTHY:
            verdict = level
        noun = ("broker" if key == "fenced_brokers" else "partition") + ("" if n == 1 else "s")
        reasons.append(f"{n:,} {noun} {words}")
    return {"verdict": verdict, "reasons": reasons}
