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

With a digest store (``verify --incremental``), step 1 reads only what the store has not verified
(:mod:`raftmeta.jobs.digests`) and steps 2-5 start from the state stored at the last verified
point, checking only the records after it (:mod:`raftmeta.jobs.delta`), or replay in full and say
why; the reports are the same.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from raftmeta.jobs import layout
from raftmeta.jobs.checks import Check
from raftmeta.jobs.consistency import facts_to_checks, spark_facts
from raftmeta.jobs.datasource import SOURCE_NAME
from raftmeta.jobs.racks import rack_of
from raftmeta.jobs.state import (
    HISTORY_COLUMNS,
    HISTORY_TYPES,
    PARTITION_TYPES,
    ClusterState,
    NodeReplay,
    snapshot_check,
    state_checks,
)
from raftmeta.jobs.voters import COLUMNS as VOTER_COLUMNS
from raftmeta.jobs.voters import KINDS as VOTER_KINDS
from raftmeta.jobs.voters import check_voter_history, voter_rows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

Progress = Callable[[str], None]

TASKS_PER_CORE = 2
MIN_SPLIT_BYTES = 4 * 1024 * 1024
# What the snapshot comparison and the history checks read of the replay.
SNAPSHOT_COLUMNS = (
    "offset", "record_type", "topic_id", "partition_id", "replicas", "isr", "adding_replicas", "removing_replicas",
    "leader", "leader_epoch", "partition_epoch", "crc_ok",
)  # fmt: skip


@dataclass(frozen=True)
class VerifyResult:
    passed: bool
    checks: list[Check]
    figures: dict[str, Any]
    state: ClusterState
    # The cluster's health at the end of the log, beside the checks' verdict: {"verdict",
    # "reasons", "unhealthy_partitions": {"total", "listed", "listed_max"}} (raftmeta.jobs.unhealthy).
    health: dict[str, Any] = field(default_factory=dict)

    def to_json(self, data_dir: str) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "data_dir": str(Path(data_dir).resolve()),
            "health": self.health,
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
        "fenced_brokers": sum(1 for _, _, fenced in state.brokers.values() if fenced),
        # rack -> its registered brokers (racks.NO_RACK: brokers without a rack)
        "brokers_per_rack": _brokers_per_rack(state.brokers),
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


def _brokers_per_rack(brokers: dict[int, tuple[str | None, str | None, bool]]) -> dict[str, list[int]]:
    racks: dict[str, list[int]] = {}
    for broker in sorted(brokers):
        racks.setdefault(rack_of(broker, brokers), []).append(broker)
    return dict(sorted(racks.items()))


def _per_rack(per_broker: dict[int, int], brokers: dict[int, tuple[str | None, str | None, bool]]) -> dict[str, int]:
    racks: dict[str, int] = {}
    for broker, n in per_broker.items():
        rack = rack_of(broker, brokers)
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
    topic_view: bool = False,
) -> VerifyResult:
    """Every check of DESIGN.md §9 on the logs under ``data_dir``. With ``digest_store``
    (``verify --incremental``), the segments verified by an earlier run are not read again (see
    :mod:`raftmeta.jobs.digests`), the state checks fold only the records after the stored state's
    point into it (:mod:`raftmeta.jobs.delta`), and the store is updated when the logs agree (the
    state: when every check passed). ``topic_view`` adds the report's topic x broker figure
    (``raftmeta.jobs.topic_brokers``: one more query over the final state)."""
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
        incremental_figures = dict(reused)
    longest = max(nodes, key=lambda n: (n.high_watermark, -n.node_id))
    base = longest.newest_snapshot.end_offset if longest.newest_snapshot else None
    node_bytes = sum(s.size_bytes for s in longest.segments)
    replay = NodeReplay(spark, longest.root, base, split_bytes=split_bytes_for(spark, node_bytes))
    consistent = all(c.passed for c in (*facts_to_checks(facts), *incremental))
    outcome: StateOutcome | None = None
    if digest_store is not None:
        outcome, how = _delta_state(spark, digest_store, longest, nodes, consistent, progress)
        incremental_figures["state_replay"] = how
    if outcome is None:
        outcome = _full_state(spark, replay, longest, nodes, base, digest_store, progress)
    state = outcome.state
    checks = [*facts_to_checks(facts), *incremental, *outcome.checks]
    history_figures: dict[str, Any] = {}
    if history is not None:
        from raftmeta.jobs.history import history_checks, read_history

        progress(f"checking the client history {history} against the committed log")
        logged = outcome.history_records().where("crc_ok").cache()
        more, history_figures = history_checks(read_history(spark, history), logged)
        logged.unpersist()
        checks.extend(more)
    health = state.health
    checks.append(health.check)
    passed = all(c.passed for c in checks)
    if digest_store is not None:
        stored_at = outcome.keep(passed and consistent, longest, nodes, digest_store)
        if stored_at is not None:
            incremental_figures["state_stored_at"] = stored_at
    figures: dict[str, Any] = {
        "records": state.records,
        "nodes": len(nodes),
        "batches": facts.batches,
        "replayed_node": longest.node_id,
        "replay_base_offset": base or 0,
        "committed_offset_by_node": {str(k): v for k, v in sorted(facts.committed_offset_by_node.items())},
        "log_end_offset_by_node": {str(k): v for k, v in sorted(facts.log_end_offset_by_node.items())},
        **balance_figures(state, health.isr_sizes),
        # Kafka's health rules (raftmeta.api.health): under_replicated_partitions counts replicas being
        # added by a reassignment out of the factor, as kafka-topics.sh does.
        **health.figures(),
        **history_figures,
    }
    if digest_store is not None:
        figures["incremental"] = incremental_figures
    if topic_view:
        from raftmeta.jobs.topic_brokers import topic_broker_view

        progress("counting replicas and leaders per topic and broker")
        figures["topic_broker"] = topic_broker_view(state.final, state.brokers, figures["topics"])
    return VerifyResult(passed, checks, figures, state, _health(state, figures, progress))


def _health(state: ClusterState, figures: dict[str, Any], progress: Progress) -> dict[str, Any]:
    """The health verdict of the final state and its unhealthy partitions, named."""
    from raftmeta.jobs.unhealthy import Unhealthy, health_verdict, needs_listing, unhealthy_partitions

    unhealthy = Unhealthy(0, [])
    if needs_listing(figures):
        progress("naming the unhealthy partitions")
        unhealthy = unhealthy_partitions(state.final, state.brokers, state.min_isr, state.live_brokers)
    return {**health_verdict(figures), "unhealthy_partitions": unhealthy.to_json()}


@dataclass
class StateOutcome:
    """The state side of a verify: its checks (state, snapshots, voters), the final state, the
    committed records the history checks read, and how to keep the state in the digest store."""

    checks: list[Check]
    state: ClusterState
    history_records: Callable[[], DataFrame]
    # (passed, replayed node, nodes, store) -> the stored point, or None when nothing was stored
    keep: Callable[[bool, layout.NodeFiles, list[layout.NodeFiles], Path], int | None]


def _full_state(
    spark: SparkSession,
    replay: NodeReplay,
    longest: layout.NodeFiles,
    nodes: list[layout.NodeFiles],
    base: int | None,
    digest_store: Path | None,
    progress: Progress,
) -> StateOutcome:
    """The whole committed log replayed (from the newest snapshot); with a digest store, the job
    also writes the final state there (staged until the verify has passed)."""
    from raftmeta.jobs import state_store

    progress(f"replaying node {longest.node_id}'s committed log (high watermark {longest.high_watermark})")
    staged = state_store.staging(digest_store) if digest_store is not None else None
    more, state = state_checks(replay, None if staged is None else staged / "gen-0")
    progress("comparing every node's newest snapshot with the replayed log")
    partition_records = replay.records(kinds=(*PARTITION_TYPES, "remove_topic"), columns=SNAPSHOT_COLUMNS)
    snapshots = snapshot_check(spark, SOURCE_NAME, nodes, partition_records.where("crc_ok"), base or 0)
    progress("checking the voter-set history (KIP-853)")
    voters = voter_rows(replay.records(kinds=VOTER_KINDS, columns=VOTER_COLUMNS))

    def keep(passed: bool, node: layout.NodeFiles, all_nodes: list[layout.NodeFiles], store: Path) -> int | None:
        if staged is None:
            return None
        if not passed or state.broker_facts is None:
            state_store.discard(staged)
            return None
        stored = state_store.StoredState(
            staged, node.cluster_id, node.high_watermark, base, state.records, 1, state.counts, state.broker_facts,
            state.min_isr, voters, snapshots, state_store.snapshot_identities(all_nodes),
            state_store.tails(all_nodes, _verified_through(store), node.high_watermark),
        )  # fmt: skip
        state_store.commit_staged(store, staged, stored)
        return stored.point

    return StateOutcome(
        [*more, snapshots, check_voter_history(voters)],
        state,
        lambda: replay.records(kinds=HISTORY_TYPES, columns=HISTORY_COLUMNS),
        keep,
    )


def _delta_state(
    spark: SparkSession,
    store: Path,
    longest: layout.NodeFiles,
    nodes: list[layout.NodeFiles],
    consistent: bool,
    progress: Progress,
) -> tuple[StateOutcome | None, str]:
    """The state side from the stored state and the records after its point, or None and why not
    (the caller then replays in full); the second value is the report's ``state_replay``."""
    from raftmeta.jobs import delta, state_store

    try:
        stored = state_store.load(store)
    except state_store.StoredStateRefused as exc:
        progress(f"not using the stored state ({exc}): replaying in full")
        return None, f"full: {exc}"
    if stored is None:
        return None, "full: no stored state"
    if not consistent:
        return None, "full: a verified segment changed or the logs disagree"
    why = delta.refusal(stored, longest, nodes)
    if why is not None:
        return None, f"full: {why}"
    progress(f"decoding node {longest.node_id}'s records from the stored point {stored.point}")
    table = delta.decode(longest, stored.point)
    topics = state_store.read_topics(stored)
    rows = [r for r in table.to_pylist() if r["crc_ok"]]
    why = delta.unprovable(rows, stored, topics)
    if why is not None:
        return None, f"full: {why}"
    progress(f"checking {table.num_rows} records after the stored point {stored.point}")
    result = delta.replay(stored, rows, topics)
    generation = stored.generations
    state_store.write_layer(stored.root, generation, result.layer)
    state = result.state.with_final(delta.final_rows(spark, stored, generation + 1))
    voters = stored.voter_rows + result.voter_rows

    def history_records() -> DataFrame:
        from pyspark.sql.pandas.types import from_arrow_schema

        schema = from_arrow_schema(result.history.schema)
        old = spark.read.schema(schema).parquet(*stored.paths("history"))
        return old.unionByName(spark.createDataFrame(result.history.to_pandas(), schema))

    def keep(passed: bool, node: layout.NodeFiles, all_nodes: list[layout.NodeFiles], path: Path) -> int | None:
        if not passed:
            return None
        stored.point, stored.generations = node.high_watermark, generation + 1
        stored.records, stored.counts, stored.voter_rows = state.records, state.counts, voters
        # The delta folded the new broker and min.insync.replicas records in: the next run starts from them.
        stored.brokers, stored.min_isr = result.state.brokers, result.state.min_isr
        stored.tails = state_store.tails(all_nodes, _verified_through(path), node.high_watermark)
        state_store.write_summary(stored)
        return stored.point

    checks = [*result.checks, stored.snapshot_check, check_voter_history(voters)]
    return StateOutcome(checks, state, history_records, keep), (
        f"from the stored state at offset {stored.point} ({result.records} records after it)"
    )


def _verified_through(store: Path) -> dict[int, int]:
    from raftmeta.jobs.digests import DigestStore

    return {n: mark.verified_through for n, mark in DigestStore.load(store).nodes.items()}


def write_outputs(result: VerifyResult, data_dir: str, report_dir: Path) -> dict[str, Path]:
    from raftmeta.jobs.report import write_report

    return write_report(report_dir, result.to_json(data_dir), result.state.brokers)
