"""Do the nodes' logs agree? (DESIGN.md §9, invariants 2 and 4.)

Checked at batch granularity, without decoding a record: followers store the leader's batches
byte for byte, so two nodes agree on a batch exactly when its 64-bit hashes are equal, and 10 M
records are ~100 k batch rows. In Spark these rows go to the JVM as they are and every rule is a
join, a grouping or a window function there; Python only frames, CRC-checks and hashes batches.

- ``batch-integrity``: every batch's CRC holds; damage below a node's high watermark fails,
  damage above it is a torn tail that recovery would truncate (reported, not failed).
- ``offsets-contiguous``: each node's batches follow one another with no gap or overlap, and its
  log starts at 0 or at one of its snapshots.
- ``epochs-non-decreasing``: along each node's log.
- ``high-watermark-within-log``: no node claims a committed prefix its log (or snapshot) lacks.
- ``committed-prefixes-agree``: at every committed batch, every node whose committed range covers
  it holds it, with the same hash.

Two implementations compute the same :class:`Facts`: Spark (``spark_facts``, for logs that
outgrow a machine) and a single process (``local_facts``, the reference and the benchmark's
baseline). ``facts_to_checks`` turns either into the report's checks, so their verdicts are
comparable line by line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from raftmeta.jobs import layout
from raftmeta.jobs.checks import EXAMPLES_MAX, Check, listed
from raftmeta.jobs.columns import hash_text
from raftmeta.jobs.datasource import SOURCE_NAME, FilePartition, read_partition

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession


@dataclass
class Facts:
    """Offending items (sorted, at most EXAMPLES_MAX each) and their total counts."""

    batches: int = 0
    corrupt_committed: list[str] = field(default_factory=list)
    corrupt_committed_total: int = 0
    corrupt_tail: list[str] = field(default_factory=list)
    corrupt_tail_total: int = 0
    gaps: list[str] = field(default_factory=list)
    gaps_total: int = 0
    epochs_backwards: list[str] = field(default_factory=list)
    epochs_backwards_total: int = 0
    hw_beyond_log: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    conflicts_total: int = 0
    missing: list[str] = field(default_factory=list)
    missing_total: int = 0
    committed_offset_by_node: dict[int, int] = field(default_factory=dict)
    log_end_offset_by_node: dict[int, int] = field(default_factory=dict)


# The wording of each offending item, shared by both implementations.
def gap_text(node_id: int, base: int, prev_next: int, segment: str) -> str:
    return f"node {node_id}: batch at offset {base} follows offset {prev_next - 1} ({segment})"


def start_text(node_id: int, first: int) -> str:
    return f"node {node_id}: log starts at offset {first}, past its newest snapshot's end (or it has none)"


def backwards_text(node_id: int, base: int, epoch: int, prev_epoch: int) -> str:
    return f"node {node_id}: offset {base} has epoch {epoch} after epoch {prev_epoch}"


def hw_text(node_id: int, hw: int, log_end: int) -> str:
    return f"node {node_id}: high watermark {hw} but log ends at {log_end}"


def conflict_text(base: int, copies: list[tuple[int, int]]) -> str:
    return f"offset {base} (" + ", ".join(f"node {n}: {hash_text(h)}" for n, h in sorted(copies)) + ")"


def missing_text(node_id: int, base: int, hw: int) -> str:
    return f"node {node_id} lacks committed offset {base} (its high watermark is {hw})"


def facts_to_checks(facts: Facts) -> list[Check]:
    tail = (
        " (torn tail above the high watermark, which recovery truncates: "
        f"{listed(facts.corrupt_tail, facts.corrupt_tail_total)})"
        if facts.corrupt_tail_total
        else ""
    )
    return [
        Check(
            "batch-integrity",
            facts.corrupt_committed_total == 0,
            (
                f"damaged committed batches: {listed(facts.corrupt_committed, facts.corrupt_committed_total)}"
                if facts.corrupt_committed_total
                else f"all {facts.batches} batches below the high watermarks pass CRC32C"
            )
            + tail,
        ),
        Check(
            "offsets-contiguous",
            facts.gaps_total == 0,
            f"gaps or overlaps: {listed(facts.gaps, facts.gaps_total)}"
            if facts.gaps_total
            else "every node's batches are contiguous",
        ),
        Check(
            "epochs-non-decreasing",
            facts.epochs_backwards_total == 0,
            f"epoch goes backwards: {listed(facts.epochs_backwards, facts.epochs_backwards_total)}"
            if facts.epochs_backwards_total
            else "epochs never decrease along any node's log",
        ),
        Check(
            "high-watermark-within-log",
            not facts.hw_beyond_log,
            f"high watermark past the log: {listed(facts.hw_beyond_log)}"
            if facts.hw_beyond_log
            else "every node holds its whole committed prefix",
        ),
        Check(
            "committed-prefixes-agree",
            facts.conflicts_total == 0 and facts.missing_total == 0,
            "; ".join(
                part
                for part in (
                    f"different batches at the same offset: {listed(facts.conflicts, facts.conflicts_total)}"
                    if facts.conflicts_total
                    else "",
                    f"committed batches missing on a node: {listed(facts.missing, facts.missing_total)}"
                    if facts.missing_total
                    else "",
                )
                if part
            )
            or "every committed batch is identical on every node that has committed it",
        ),
    ]


def log_start_is_legal(first: int, snapshot_ends: list[int]) -> bool:
    """A log starts at 0, or anywhere up to its newest snapshot's end: storage deletes only whole
    segments below a snapshot, so the first kept segment may begin below it (even below the older
    of the two snapshots it keeps); the snapshot covers every offset before its end."""
    return first == 0 or first <= max(snapshot_ends, default=-1)


def local_facts(data_dir: str) -> Facts:
    """The reference implementation: one process, the same decoder, the same rules."""
    nodes = layout.discover(data_dir)
    return facts_of_walks(nodes, [_walk_node(node, _file_rows(node)) for node in nodes])


def rows_facts(nodes: list[layout.NodeFiles], rows: list[dict[str, Any]]) -> Facts:
    """The same facts from batch rows already at hand (``verify --incremental`` with little to
    read: the stored rows of verified segments and the rows of the rest, in the driver)."""
    by_node: dict[int, list[dict[str, Any]]] = {n.node_id: [] for n in nodes}
    for row in rows:
        by_node[row["node_id"]].append(row)
    for node_rows in by_node.values():
        # File order: segment names are zero-padded base offsets.
        node_rows.sort(key=lambda r: (r["segment"], r["position"]))
    return facts_of_walks(nodes, [_walk_node(node, by_node[node.node_id]) for node in nodes])


def _file_rows(node: layout.NodeFiles) -> Iterator[dict[str, Any]]:
    for segment in node.segments:
        part = FilePartition(segment.uri, node.node_id, segment.uri.rsplit("/", 1)[-1], "batches", -1)
        for arrow_batch in read_partition(part):
            yield from arrow_batch.to_pylist()


def facts_of_walks(nodes: list[layout.NodeFiles], walks: list[_NodeWalk]) -> Facts:
    facts = Facts()
    hw = {n.node_id: n.high_watermark for n in nodes}
    for walk in walks:
        facts.batches += walk.batches
        facts.log_end_offset_by_node[walk.node_id] = walk.log_end
        facts.committed_offset_by_node[walk.node_id] = hw[walk.node_id]
        if hw[walk.node_id] > walk.log_end:
            facts.hw_beyond_log.append(hw_text(walk.node_id, hw[walk.node_id], walk.log_end))
    for name in ("gaps", "epochs_backwards", "corrupt_committed", "corrupt_tail"):
        ordered = [text for walk in walks for text in getattr(walk, name)]
        setattr(facts, name, ordered[:EXAMPLES_MAX])
        setattr(facts, f"{name}_total", len(ordered))
    # base offset -> {node: hash} of committed batches.
    committed: dict[int, dict[int, int]] = {}
    for walk in walks:
        for base, value in walk.committed.items():
            committed.setdefault(base, {})[walk.node_id] = value
    conflicts: list[str] = []
    missing: list[str] = []
    for base in sorted(committed):
        copies = committed[base]
        if len(set(copies.values())) > 1:
            conflicts.append(conflict_text(base, list(copies.items())))
        for walk in walks:
            if walk.node_id not in copies and walk.start <= base < hw[walk.node_id]:
                missing.append(missing_text(walk.node_id, base, hw[walk.node_id]))
    facts.conflicts, facts.conflicts_total = conflicts[:EXAMPLES_MAX], len(conflicts)
    facts.missing, facts.missing_total = missing[:EXAMPLES_MAX], len(missing)
    return facts


@dataclass
class _NodeWalk:
    """What one pass over a node's batches found."""

    node_id: int
    start: int
    log_end: int
    batches: int = 0
    committed: dict[int, int] = field(default_factory=dict)
    gaps: list[str] = field(default_factory=list)
    epochs_backwards: list[str] = field(default_factory=list)
    corrupt_committed: list[str] = field(default_factory=list)
    corrupt_tail: list[str] = field(default_factory=list)


def _walk_node(node: layout.NodeFiles, rows: Iterable[dict[str, Any]]) -> _NodeWalk:
    """One pass over ``node``'s batch rows, in file order."""
    snapshot_end = node.newest_snapshot.end_offset if node.newest_snapshot else 0
    walk = _NodeWalk(node.node_id, start=snapshot_end, log_end=snapshot_end)
    hw = node.high_watermark
    first: int | None = None
    prev_next: int | None = None
    # End of the previous batch whose header was readable (CRC good or not): where damage sits.
    last_next = 0
    prev_epoch = -1
    for row in rows:
        walk.batches += 1
        base = row["base_offset"]
        if not row["crc_ok"]:
            at = base if base is not None else last_next
            last_next = row["next_offset"] if base is not None else last_next
            (walk.corrupt_committed if at < hw else walk.corrupt_tail).append(f"node {node.node_id}: {row['error']}")
            continue
        if first is None:
            first = base
        elif base != prev_next:
            assert prev_next is not None
            walk.gaps.append(gap_text(node.node_id, base, prev_next, row["segment"]))
        if row["epoch"] < prev_epoch:
            walk.epochs_backwards.append(backwards_text(node.node_id, base, row["epoch"], prev_epoch))
        prev_next, prev_epoch, last_next = row["next_offset"], row["epoch"], row["next_offset"]
        walk.log_end = max(walk.log_end, row["next_offset"])
        if row["next_offset"] <= hw:
            walk.committed[base] = row["hash"]
    if first is not None:
        walk.start = first
        if not log_start_is_legal(first, [s.end_offset for s in node.snapshots]):
            walk.gaps.insert(0, start_text(node.node_id, first))
    return walk


def spark_facts(
    spark: SparkSession,
    data_dir: str,
    *,
    split_bytes: int = 0,
    rows: DataFrame | None = None,
    keep: Callable[[DataFrame], None] | None = None,
) -> Facts:
    """The same facts computed by Spark over the batch-level rows of every node.

    Two jobs on a clean log, over the cached batch rows: per-node counts (which also fill the
    cache), then one pass -- a per-node window in offset order, a grouping by base offset, a
    global sum -- that counts gaps, backward epochs, conflicting and missing batches at once.
    Only failures fetch their offending items (at most EXAMPLES_MAX each, in order).

    ``rows``: the batch rows to check instead of reading every segment (``verify --incremental``
    passes the stored rows of verified segments plus the rows of the others); ``keep`` is called
    with the cached rows before they are released (the digest store saves them).
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    nodes = layout.discover(data_dir)
    snapshot_ends = {n.node_id: [s.end_offset for s in n.snapshots] for n in nodes}
    hw = {n.node_id: n.high_watermark for n in nodes}
    facts = Facts()
    if rows is None:
        reader = spark.read.format(SOURCE_NAME).option("level", "batches")
        if split_bytes:
            reader = reader.option("split_bytes", str(split_bytes))
        rows = reader.load(data_dir)
    batches: DataFrame = rows.cache()
    hw_of = F.create_map(*[F.lit(x) for pair in hw.items() for x in pair])
    ok = F.col("crc_ok")

    per_node = (
        batches.groupBy("node_id")
        .agg(
            F.count(F.lit(1)).alias("batches"),
            F.min(F.when(ok, F.col("base_offset"))).alias("first"),
            F.max(F.when(ok, F.col("next_offset"))).alias("end"),
            F.count(F.when(~ok, F.lit(1))).alias("damaged"),
        )
        .collect()
    )
    first_base = {r["node_id"]: r["first"] for r in per_node if r["first"] is not None}
    facts.batches = sum(r["batches"] for r in per_node)
    if any(r["damaged"] for r in per_node):
        _damage(facts, batches, hw_of)

    w = Window.partitionBy("node_id").orderBy("base_offset")
    ordered = batches.where(ok).select(
        "node_id", "segment", "base_offset", "next_offset", "epoch", "hash",
        F.lag("next_offset").over(w).alias("prev_next"), F.lag("epoch").over(w).alias("prev_epoch"),
        (F.col("next_offset") <= hw_of[F.col("node_id")]).alias("committed"),
    )  # fmt: skip
    is_gap = F.col("prev_next").isNotNull() & (F.col("prev_next") != F.col("base_offset"))
    is_back = F.col("prev_epoch").isNotNull() & (F.col("epoch") < F.col("prev_epoch"))
    committed = F.col("committed")
    by_offset = ordered.groupBy("base_offset").agg(
        F.count(F.when(is_gap, F.lit(1))).alias("gaps"),
        F.count(F.when(is_back, F.lit(1))).alias("backs"),
        F.size(F.collect_set(F.when(committed, F.col("hash")))).alias("hashes"),
        F.collect_set(F.when(committed, F.col("node_id"))).alias("holders"),
    )
    snapshot_end = {n.node_id: n.newest_snapshot.end_offset if n.newest_snapshot else 0 for n in nodes}
    start_of = {n.node_id: first_base.get(n.node_id, snapshot_end[n.node_id]) for n in nodes}
    expected = F.array(*[
        F.when((F.lit(start_of[n]) <= F.col("base_offset")) & (F.col("base_offset") < F.lit(hw[n])), F.lit(n))
        for n in sorted(hw)
    ])  # fmt: skip
    # Only offsets some node has committed can be missing elsewhere.
    lacking = F.when(
        F.size("holders") > 0, F.array_except(F.filter(expected, lambda x: x.isNotNull()), F.col("holders"))
    ).otherwise(F.array().cast("array<int>"))
    with_lacking = by_offset.select("*", lacking.alias("lacking"))
    totals = with_lacking.agg(
        F.sum("gaps").alias("gaps"),
        F.sum("backs").alias("backs"),
        F.count(F.when(F.col("hashes") > 1, F.lit(1))).alias("conflicts"),
        F.sum(F.size("lacking")).alias("missing"),
    ).collect()[0]

    gaps_total = totals["gaps"] or 0
    gaps: list[str] = []
    if gaps_total:
        gaps = [
            gap_text(r["node_id"], r["base_offset"], r["prev_next"], r["segment"])
            for r in ordered.where(is_gap).orderBy("node_id", "base_offset").limit(EXAMPLES_MAX).collect()
        ]
    for node_id, first in sorted(first_base.items()):
        if not log_start_is_legal(first, snapshot_ends[node_id]):
            gaps.insert(0, start_text(node_id, first))
            gaps_total += 1
    facts.gaps, facts.gaps_total = gaps[:EXAMPLES_MAX], gaps_total
    facts.epochs_backwards_total = totals["backs"] or 0
    if facts.epochs_backwards_total:
        facts.epochs_backwards = [
            backwards_text(r["node_id"], r["base_offset"], r["epoch"], r["prev_epoch"])
            for r in ordered.where(is_back).orderBy("node_id", "base_offset").limit(EXAMPLES_MAX).collect()
        ]

    ends = {r["node_id"]: r["end"] for r in per_node}
    for node in nodes:
        log_end = max(ends.get(node.node_id) or 0, snapshot_end[node.node_id])
        facts.log_end_offset_by_node[node.node_id] = log_end
        facts.committed_offset_by_node[node.node_id] = hw[node.node_id]
        if hw[node.node_id] > log_end:
            facts.hw_beyond_log.append(hw_text(node.node_id, hw[node.node_id], log_end))

    facts.conflicts_total = totals["conflicts"] or 0
    if facts.conflicts_total:
        copies = (
            ordered.where(committed)
            .groupBy("base_offset")
            .agg(F.collect_list(F.struct("node_id", "hash")).alias("copies"))
            .where(F.size(F.array_distinct("copies.hash")) > 1)
        )
        facts.conflicts = [
            conflict_text(r["base_offset"], [(c["node_id"], c["hash"]) for c in r["copies"]])
            for r in copies.orderBy("base_offset").limit(EXAMPLES_MAX).collect()
        ]
    facts.missing_total = totals["missing"] or 0
    if facts.missing_total:
        missing_rows = with_lacking.where(F.size("lacking") > 0).select(
            "base_offset", F.explode("lacking").alias("node_id")
        )
        facts.missing = [
            missing_text(r["node_id"], r["base_offset"], hw[r["node_id"]])
            for r in missing_rows.orderBy("base_offset", "node_id").limit(EXAMPLES_MAX).collect()
        ]
    if keep is not None:
        keep(batches)
    batches.unpersist()
    return facts


def _damage(facts: Facts, batches: DataFrame, hw_of: Column) -> None:
    """Damaged batches, committed (below the node's high watermark) or a torn tail above it."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    in_file_order = Window.partitionBy("node_id").orderBy("segment", "position")
    at = F.coalesce("base_offset", F.lag("next_offset").over(in_file_order), F.lit(0))
    below_hw = (at < hw_of[F.col("node_id")]).alias("committed")
    damaged = batches.select("node_id", "segment", "position", "error", "crc_ok", below_hw).where("NOT crc_ok").cache()
    totals = damaged.agg(
        F.count(F.when(F.col("committed"), F.lit(1))).alias("committed"), F.count(F.lit(1)).alias("all")
    )
    row = totals.collect()[0]
    facts.corrupt_committed_total = row["committed"]
    facts.corrupt_tail_total = row["all"] - row["committed"]
    for in_prefix, target in ((True, facts.corrupt_committed), (False, facts.corrupt_tail)):
        examples = damaged.where(F.col("committed") == in_prefix).orderBy("node_id", "segment", "position")
        target.extend(f"node {r['node_id']}: {r['error']}" for r in examples.limit(EXAMPLES_MAX).collect())
    damaged.unpersist()
