"""``raftmeta verify``: replay every node's log with Spark and check DESIGN.md §9.

1. Consistency (batch level, all nodes): CRCs, contiguous offsets, non-decreasing epochs, high
   watermarks within the logs, identical committed prefixes.
2. State (record level, the node with the longest committed prefix: after step 1 every other
   node's committed prefix is a prefix of it): invariant 7 on every partition state, and the
   final topics, partitions and brokers.
3. History (with ``--history``): every acknowledged create committed exactly once, nothing
   written by failed requests, creates in real-time order (:mod:`raftmeta.jobs.history`).
4. Balance figures of the final state, computed by the ``placement`` package's metrics, so they
   are the numbers ``raftmeta placement place`` shows for the same cluster.
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
from raftmeta.jobs.state import ClusterState, replay_records, snapshot_check, state_checks

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Progress = Callable[[str], None]


@dataclass(frozen=True)
class VerifyResult:
    passed: bool
    checks: list[Check]
    figures: dict[str, Any]
    state: ClusterState

    def to_json(self, data_dir: str) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "data_dir": data_dir,
            "checks": [c.to_json() for c in self.checks],
            "figures": self.figures,
        }


def balance_figures(state: ClusterState) -> dict[str, Any]:
    """Placement balance of the final state (placement's metrics) plus current leaders."""
    from placement import UsableBroker
    from placement.metrics import Spread, balance_report

    brokers = [
        UsableBroker(b, rack=rack, fenced=fenced, pool=pool)
        for b, (rack, pool, fenced) in sorted(state.brokers.items())
    ]
    assignment = {topic: [parts[p][0] for p in sorted(parts)] for topic, parts in sorted(state.topics.items())}
    report = balance_report(assignment, brokers)
    current = {b.id: 0 for b in brokers}
    for parts in state.topics.values():
        for _, _, leader in parts.values():
            if leader >= 0:
                current[leader] = current.get(leader, 0) + 1
    current_spread = Spread.of(current)
    return {
        "topics": len(state.topics),
        "partitions": report.partitions,
        "brokers": len(brokers),
        "replica_skew": round(report.replica_skew, 6),
        "leader_skew": round(report.leader_skew, 6),
        "current_leader_skew": round(current_spread.skew, 6),
        "leaderless_partitions": sum(
            1 for parts in state.topics.values() for *_, leader in parts.values() if leader < 0
        ),
        "rack_spread_violations": report.rack_spread_violations,
        "replicas_per_broker": {str(k): v for k, v in sorted(report.replicas.per_broker.items())},
        "preferred_leaders_per_broker": {str(k): v for k, v in sorted(report.leaders.per_broker.items())},
        "leaders_per_broker": {str(k): v for k, v in sorted(current.items())},
    }


def run_verify(
    spark: SparkSession, data_dir: str, progress: Progress = lambda _: None, *, history: str | None = None
) -> VerifyResult:
    nodes = layout.discover(data_dir)
    progress(f"checking that {len(nodes)} nodes' logs agree")
    facts = spark_facts(spark, data_dir)
    checks = facts_to_checks(facts)
    longest = max(nodes, key=lambda n: (n.high_watermark, -n.node_id))
    progress(f"replaying node {longest.node_id}'s committed log (high watermark {longest.high_watermark})")
    base = longest.newest_snapshot.end_offset if longest.newest_snapshot else None
    records = replay_records(spark, SOURCE_NAME, longest.root, base).cache()
    more, state = state_checks(records)
    checks.extend(more)
    progress("comparing every node's newest snapshot with the replayed log")
    checks.append(snapshot_check(spark, SOURCE_NAME, nodes, records, base or 0))
    history_figures: dict[str, Any] = {}
    if history is not None:
        from raftmeta.jobs.history import history_checks, read_history

        progress(f"checking the client history {history} against the committed log")
        more, history_figures = history_checks(read_history(spark, history), records.where("crc_ok"))
        checks.extend(more)
    progress("computing balance figures")
    figures: dict[str, Any] = {
        "records": state.records,
        "nodes": len(nodes),
        "batches": facts.batches,
        "replayed_node": longest.node_id,
        "replay_base_offset": base or 0,
        "committed_offset_by_node": {str(k): v for k, v in sorted(facts.committed_offset_by_node.items())},
        "log_end_offset_by_node": {str(k): v for k, v in sorted(facts.log_end_offset_by_node.items())},
        **balance_figures(state),
        **history_figures,
    }
    return VerifyResult(all(c.passed for c in checks), checks, figures, state)


def write_outputs(result: VerifyResult, data_dir: str, report_dir: Path) -> dict[str, Path]:
    from raftmeta.jobs.report import write_report

    return write_report(report_dir, result.to_json(data_dir), result.state.brokers)
