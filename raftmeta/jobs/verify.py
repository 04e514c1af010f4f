"""``raftmeta verify``: replay every node's log with Spark and check DESIGN.md §9.

1. Consistency (batch level, all nodes): CRCs, contiguous offsets, non-decreasing epochs, high
   watermarks within the logs, identical committed prefixes.
2. State (record level, the node with the longest committed prefix: after step 1 every other
   node's committed prefix is a prefix of it): invariant 7 on every partition state, and the
   final topics, partitions and brokers.
3. History (with ``--history``): every acknowledged create committed exactly once, nothing
   written by failed requests, creates in real-time order (:mod:`raftmeta.jobs.history`).
4. Balance figures of the final state: per-broker counts aggregated in Spark (the driver never
   holds a per-partition table), spread by the ``placement`` package's metrics, so they are the
   numbers ``raftmeta placement place`` shows for the same cluster.
5. Health of the final state (``raftmeta.jobs.health``): under-replicated, under-min-ISR, offline
   partitions and leaders away from their preferred replica; a partition still under-replicated
   although every replica's broker is registered and unfenced fails a check. Counted by step 2's
   job, on the same rows (a separate job over the final state would replay the log again).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from raftmeta.jobs import layout
from raftmeta.jobs.checks import Check
from raftmeta.jobs.consistency import facts_to_checks, spark_facts
from raftmeta.jobs.datasource import SOURCE_NAME
from raftmeta.jobs.state import PARTITION_TYPES, ClusterState, NodeReplay, snapshot_check, state_checks
from raftmeta.jobs.voters import COLUMNS as VOTER_COLUMNS
from raftmeta.jobs.voters import KINDS as VOTER_KINDS
from raftmeta.jobs.voters import voter_history_check

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Progress = Callable[[str], None]

TASKS_PER_CORE = 2
MIN_SPLIT_BYTES = 4 * 1024 * 1024
# What the snapshot comparison and the history checks read of the replay.
SNAPSHOT_COLUMNS = (
    "offset", "record_type", "topic_id", "partition_id", "replicas", "isr", "adding_replicas", "removing_replicas",
    "leader", "leader_epoch", "partition_epoch", "crc_ok",
)  # fmt: skip
HISTORY_TYPES = ("topic", "remove_topic", "request")
HISTORY_COLUMNS = ("offset", "batch_base_offset", "record_type", "topic_id", "topic_name", "request_id", "crc_ok")


@dataclass(frozen=True)
class VerifyResult:
    passed: bool
    checks: list[Check]
    figures: dict[str, Any]
    state: ClusterState

    def to_json(self, data_dir: str) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "data_dir": str(Path(data_dir).resolve()),
            "checks": [c.to_json() for c in self.checks],
            "figures": self.figures,
        }


def balance_figures(state: ClusterState, isr_sizes: dict[tuple[int, int], int] | None = None) -> dict[str, Any]:
    """Placement balance of the final state plus current leaders.

    The per-broker counts come from Spark (state.balance); their spreads are placement's own
    ``Spread``, over every registered broker (zeros included) and any other broker the assignment
    names, as ``placement.metrics.balance_report`` does, so they are the numbers
    ``raftmeta placement place`` shows for the same assignment. ``isr_sizes``: the ISR-size counts
    if already aggregated (the health job does it in its pass), else one more job computes them."""
    from placement.metrics import Spread

    balance = state.balance
    ids = sorted(state.brokers)

    def counts(per_broker: dict[int, int]) -> dict[int, int]:
        out = dict.fromkeys(ids, 0)
        for broker, n in sorted(per_broker.items()):
            out[broker] = out.get(broker, 0) + n
        return out

    replicas, preferred, current = counts(balance.replicas), counts(balance.preferred_leaders), counts(balance.leaders)
    if isr_sizes is None:
        isr_sizes = isr_size_counts(state)
    return {
        "topics": balance.topics,
        "partitions": balance.partitions,
        "brokers": len(ids),
        "replica_skew": round(Spread.of(replicas).skew, 6),
        "leader_skew": round(Spread.of(preferred).skew, 6),
        "current_leader_skew": round(Spread.of(current).skew, 6),
        "leaderless_partitions": balance.leaderless,
        "rack_spread_violations": balance.rack_spread_violations,
        "replicas_per_broker": {str(k): v for k, v in sorted(replicas.items())},
        "preferred_leaders_per_broker": {str(k): v for k, v in sorted(preferred.items())},
        "leaders_per_broker": {str(k): v for k, v in sorted(current.items())},
        # "in-sync/replicas" -> partitions, e.g. {"3/3": 30, "2/3": 6}; fewer in sync = under-replicated.
        "isr_size_counts": {f"{isr}/{rf}": n for (isr, rf), n in sorted(isr_sizes.items(), key=lambda kv: kv[0])},
        "under_replicated_partitions": sum(n for (isr, rf), n in isr_sizes.items() if isr < rf),
        "replicas_per_rack": _per_rack(replicas, state.brokers),
        "leaders_per_rack": _per_rack(current, state.brokers),
    }


def isr_size_counts(state: ClusterState) -> dict[tuple[int, int], int]:
    """(ISR size, replica count) -> live partitions, aggregated in Spark (no per-partition collect)."""
    from pyspark.sql import functions as F

    rows = (
        state.final.groupBy(
            F.size(F.coalesce("isr", F.array())).alias("isr"), F.size(F.coalesce("replicas", F.array())).alias("rf")
        )
        .count()
        .collect()
    )
    return {(int(r["isr"]), int(r["rf"])): int(r["count"]) for r in rows}


def _per_rack(per_broker: dict[int, int], brokers: dict[int, tuple[str | None, str | None, bool]]) -> dict[str, int]:
    racks: dict[str, int] = {}
    for broker, n in per_broker.items():
        rack = brokers.get(broker, (None, None, False))[0] or "(none)"
        racks[rack] = racks.get(rack, 0) + n
    return dict(sorted(racks.items()))


def split_bytes_for(spark: SparkSession, files_bytes: int) -> int:
    """A task size that gives every core about TASKS_PER_CORE tasks over ``files_bytes`` (a
    1 M-record log is one 38 MiB segment per node: read as one task, it would leave the other
    cores idle), and never below MIN_SPLIT_BYTES (a task costs ~10 ms to schedule). At 1 M
    records 1, 2, 4 and 8 tasks per core took 8.4-9.4, 8.7-9.3, 9.0-10.0 and 10.0-10.3 s."""
    cores = max(1, spark.sparkContext.defaultParallelism)
    return max(MIN_SPLIT_BYTES, -(-files_bytes // (cores * TASKS_PER_CORE)))


def run_verify(
    spark: SparkSession,
    data_dir: str,
    progress: Progress = lambda _: None,
    *,
    history: str | None = None,
    digest_store: Path | None = None,
) -> VerifyResult:
    """Every check of DESIGN.md §9 on the logs under ``data_dir``. With ``digest_store``
    (``verify --incremental``), the segments verified by an earlier run are not read again (see
    :mod:`raftmeta.jobs.digests`), and the store is updated when the logs agree."""
    nodes = layout.discover(data_dir)
    all_bytes = sum(s.size_bytes for n in nodes for s in n.segments)
    incremental: list[Check] = []
    incremental_figures: dict[str, Any] = {}
    if digest_store is None:
        progress(f"checking that {len(nodes)} nodes' logs agree")
        facts = spark_facts(spark, data_dir, split_bytes=split_bytes_for(spark, all_bytes))
    else:
        from raftmeta.jobs.digests import incremental_facts

        progress(f"checking that {len(nodes)} nodes' logs agree (reading what {digest_store} has not verified)")
        facts, changes, reused = incremental_facts(
            spark, data_dir, nodes, digest_store, lambda size: split_bytes_for(spark, size)
        )
        incremental.append(changes)
        incremental_figures = {"incremental": reused}
    longest = max(nodes, key=lambda n: (n.high_watermark, -n.node_id))
    progress(f"replaying node {longest.node_id}'s committed log (high watermark {longest.high_watermark})")
    base = longest.newest_snapshot.end_offset if longest.newest_snapshot else None
    node_bytes = sum(s.size_bytes for s in longest.segments)
    replay = NodeReplay(spark, longest.root, base, split_bytes=split_bytes_for(spark, node_bytes))
    more, state = state_checks(replay)
    checks = [*facts_to_checks(facts), *incremental, *more]
    progress("comparing every node's newest snapshot with the replayed log")
    partition_records = replay.records(kinds=(*PARTITION_TYPES, "remove_topic"), columns=SNAPSHOT_COLUMNS)
    checks.append(snapshot_check(spark, SOURCE_NAME, nodes, partition_records.where("crc_ok"), base or 0))
    progress("checking the voter-set history (KIP-853)")
    checks.append(voter_history_check(replay.records(kinds=VOTER_KINDS, columns=VOTER_COLUMNS)))
    history_figures: dict[str, Any] = {}
    if history is not None:
        from raftmeta.jobs.history import history_checks, read_history

        progress(f"checking the client history {history} against the committed log")
        logged = replay.records(kinds=HISTORY_TYPES, columns=HISTORY_COLUMNS).where("crc_ok").cache()
        more, history_figures = history_checks(read_history(spark, history), logged)
        logged.unpersist()
        checks.extend(more)
    health = state.health
    checks.append(health.check)
    figures: dict[str, Any] = {
        "records": state.records,
        "nodes": len(nodes),
        "batches": facts.batches,
        "replayed_node": longest.node_id,
        "replay_base_offset": base or 0,
        "committed_offset_by_node": {str(k): v for k, v in sorted(facts.committed_offset_by_node.items())},
        "log_end_offset_by_node": {str(k): v for k, v in sorted(facts.log_end_offset_by_node.items())},
        **balance_figures(state, health.isr_sizes),
        # Kafka's health rules (raftmeta.health): under_replicated_partitions counts replicas being
        # added by a reassignment out of the factor, as kafka-topics.sh does.
        **health.figures(),
        **history_figures,
        **incremental_figures,
    }
    return VerifyResult(all(c.passed for c in checks), checks, figures, state)


def write_outputs(result: VerifyResult, data_dir: str, report_dir: Path) -> dict[str, Path]:
    from raftmeta.jobs.report import write_report

    return write_report(report_dir, result.to_json(data_dir), result.state.brokers)
