"""``verify --incremental``: a digest store of the segments already verified, so a growing log is
re-read only where it grew, and a verified segment that changed since is found and named.

The store is a directory (``--digest-store``, by default ``digests`` in the report dir):

- ``segments.json``: per verified segment -- node, file name, offset range, first and last
  epoch, size, batch count and a blake2b-128 of the file's bytes -- and per node the offset it is
  verified through and a pointer to its newest snapshot at that point;
- ``batches/``: the batch-level rows (the data source's ``level=batches``, Parquet) of those
  segments, which the consistency checks read in place of the files.

Only *sealed, committed* segments are stored: not a node's last (active) segment, which still
grows, and not one reaching past the node's high watermark, which a new leader may truncate. So
a stored segment may never change (DESIGN.md §9, invariants 3 and 11): each run hashes the file
again (reading and hashing bytes is cheap next to decoding them), and when the hash
differs, compares the file's batches with the stored rows to name the first offset that differs.

What is re-read is every segment not in the store, or changed, or the active one; the batch rows
of the rest come from ``batches/``, and the cross-node checks run over the union exactly as on a
full read. The store is replaced only when the consistency checks passed, so it never vouches for
a log that failed. The replayed state at the last verified point is kept beside it
(:mod:`raftmeta.jobs.state_store`), and the state checks fold only the records after it into it
(:mod:`raftmeta.jobs.delta`).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from raftmeta.jobs import columns, layout
from raftmeta.jobs.checks import Check, listed
from raftmeta.jobs.consistency import Facts, facts_to_checks, rows_facts, spark_facts
from raftmeta.jobs.datasource import SOURCE_NAME, segments_option

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

STORE_VERSION = 1
SUMMARY = "segments.json"
BATCHES = "batches"
CHECK_NAME = "verified-segments-unchanged"

SegmentKey = tuple[int, str]  # (node id, segment file name)
# Below this many bytes to read, the driver reads and checks the batch rows itself, with the
# single-process rules (``consistency.rows_facts``, tested equal to Spark's): Spark's jobs cost
# seconds however few the rows, and an incremental run reads little. Above it (a first run, a
# store that does not fit), Spark reads them.
DRIVER_READ_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class SegmentDigest:
    node_id: int
    segment: str
    base_offset: int
    next_offset: int
    first_epoch: int
    last_epoch: int
    size_bytes: int
    batches: int
    file_hash: str


@dataclass(frozen=True)
class PrefixDigest:
    """The committed start of a segment that was not stored whole (the active one, which still
    grows): its first ``bytes`` bytes hold ``batches`` batches up to ``next_offset``."""

    node_id: int
    segment: str
    bytes: int
    batches: int
    next_offset: int
    prefix_hash: str


@dataclass(frozen=True)
class NodeMark:
    node_id: int
    # Every committed batch below this offset is in the store (in a whole segment or a prefix).
    verified_through: int
    # The node's newest snapshot when the store was written (the state at that point is in it).
    snapshot: str | None
    snapshot_end_offset: int | None


@dataclass
class DigestStore:
    path: Path
    cluster_id: str | None = None
    segments: dict[SegmentKey, SegmentDigest] = field(default_factory=dict)
    nodes: dict[int, NodeMark] = field(default_factory=dict)
    prefixes: dict[SegmentKey, PrefixDigest] = field(default_factory=dict)

    @property
    def batches_dir(self) -> Path:
        return self.path / BATCHES

    @classmethod
    def load(cls, path: Path) -> DigestStore:
        """The store at ``path``; an empty one if there is none yet."""
        summary = path / SUMMARY
        if not summary.exists():
            return cls(path)
        document = json.loads(summary.read_text())
        if document.get("version") != STORE_VERSION:
            raise ValueError(f"{summary}: digest store version {document.get('version')}, expected {STORE_VERSION}")
        segments = [SegmentDigest(**s) for s in document["segments"]]
        prefixes = [PrefixDigest(**p) for p in document.get("prefixes", [])]
        return cls(
            path,
            document["cluster_id"],
            {(s.node_id, s.segment): s for s in segments},
            {int(n["node_id"]): NodeMark(**n) for n in document["nodes"]},
            {(p.node_id, p.segment): p for p in prefixes},
        )


def file_hash(uri: str) -> str:
    return bytes_hash(layout.read_bytes(uri))


def bytes_hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def segment_name(segment: layout.SegmentFile) -> str:
    return segment.uri.rsplit("/", 1)[-1]


@dataclass
class Plan:
    """Which segments this run reuses from the store and which it reads."""

    reuse: set[SegmentKey] = field(default_factory=set)
    read: set[SegmentKey] = field(default_factory=set)
    changed: list[SegmentKey] = field(default_factory=list)
    # The hash of every sealed segment's file, computed once this run (stored for new ones).
    hashes: dict[SegmentKey, str] = field(default_factory=dict)
    # Segments read from this byte position on: the stored prefix below it is unchanged.
    starts: dict[SegmentKey, int] = field(default_factory=dict)


def plan(store: DigestStore, nodes: list[layout.NodeFiles]) -> Plan:
    """Hash every sealed segment; reuse the stored ones whose file is unchanged, and the stored
    prefix of a segment that was not stored whole when its bytes are unchanged."""
    out = Plan()
    usable = store.cluster_id is None or store.cluster_id == nodes[0].cluster_id
    for node in nodes:
        for index, segment in enumerate(node.segments):
            key = (node.node_id, segment_name(segment))
            data: bytes | None = None
            if index < len(node.segments) - 1:  # the last (active) one may still grow: never stored whole
                data = layout.read_bytes(segment.uri)
                digest = out.hashes[key] = bytes_hash(data)
                stored = store.segments.get(key) if usable else None
                if stored is not None and stored.file_hash == digest and stored.size_bytes == segment.size_bytes:
                    out.reuse.add(key)
                    continue
                if stored is not None:
                    out.changed.append(key)
                    out.read.add(key)
                    continue
            prefix = store.prefixes.get(key) if usable else None
            if prefix is not None:
                data = layout.read_bytes(segment.uri) if data is None else data
                if len(data) >= prefix.bytes and bytes_hash(data[: prefix.bytes]) == prefix.prefix_hash:
                    out.starts[key] = prefix.bytes
                else:
                    out.changed.append(key)
            out.read.add(key)
    out.changed.sort()
    return out


def batch_rows(spark: SparkSession, data_dir: str, store: DigestStore, work: Plan, split_bytes: int) -> DataFrame:
    """Every node's batch rows: the reused segments' from the store, the rest read from the files."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    from raftmeta.jobs.columns import BATCH_SCHEMA

    schema = from_arrow_schema(BATCH_SCHEMA)
    frames: list[DataFrame] = []
    if work.reuse or work.starts:
        key = F.concat_ws(":", "node_id", "segment")
        wanted = key.isin([f"{node}:{name}" for node, name in sorted(work.reuse)])
        for (node, name), start in sorted(work.starts.items()):
            wanted = wanted | ((key == f"{node}:{name}") & (F.col("position") < start))
        stored = spark.read.schema(schema).parquet(str(store.batches_dir))
        frames.append(stored.where(wanted).select(*BATCH_SCHEMA.names))
    if work.read:
        reader = (
            spark.read.format(SOURCE_NAME)
            .option("level", "batches")
            .option("segments", segments_option(work.read, work.starts))
        )
        if split_bytes:
            reader = reader.option("split_bytes", str(split_bytes))
        frames.append(reader.load(data_dir))
    if not frames:
        return spark.createDataFrame([], schema)
    rows = frames[0]
    for frame in frames[1:]:
        rows = rows.unionByName(frame)
    return rows


def changes_check(store: DigestStore, nodes: list[layout.NodeFiles], work: Plan) -> Check:
    """``verified-segments-unchanged``: every stored segment still holds the bytes verified, else
    the node, segment and first offset that differ (the file against the stored batch rows)."""
    import pyarrow.dataset as ds

    if not work.changed:
        return Check(CHECK_NAME, True, f"{len(work.reuse)} verified segments unchanged, {len(work.read)} read")
    uris = {(n.node_id, segment_name(s)): s.uri for n in nodes for s in n.segments}
    stored_rows = ds.dataset(str(store.batches_dir), format="parquet").to_table(
        columns=["node_id", "segment", "base_offset", "epoch", "hash"]
    )
    rows = stored_rows.to_pylist()
    problems: list[str] = []
    for node_id, name in work.changed:
        verified = {r["base_offset"]: r for r in rows if r["node_id"] == node_id and r["segment"] == name}
        now: dict[int | None, dict[str, Any]] = {}
        for arrow_batch in columns.batch_rows(node_id, name, layout.read_bytes(uris[(node_id, name)])):
            for r in arrow_batch.to_pylist():
                now.setdefault(r["base_offset"], r)
        problems.append(f"node {node_id}: {name} changed since it was verified: {_first_difference(verified, now)}")
    return Check(CHECK_NAME, False, listed(problems))


def _first_difference(verified: dict[int, dict[str, Any]], now: dict[int | None, dict[str, Any]]) -> str:
    for base in sorted(verified):
        was = verified[base]
        row = now.get(base)
        if row is None:
            return f"the batch at offset {base} is gone"
        if row["hash"] != was["hash"]:
            return (
                f"the batch at offset {base} differs (hash {columns.hash_text(row['hash'])}, verified "
                f"{columns.hash_text(was['hash'])}{'' if row['crc_ok'] else '; its CRC fails'})"
            )
    if None in now:
        return "it holds damage where no batch header can be read"
    extra = sorted(b for b in now if b is not None and b not in verified)
    if extra:
        return f"it holds a batch at offset {extra[0]} it did not hold"
    return "its bytes differ outside every batch"


def save(
    store: DigestStore, nodes: list[layout.NodeFiles], work: Plan, batches: DataFrame
) -> tuple[Path, dict[str, Any]]:
    """Write the new store's batch rows beside the old (``batches`` is cached) and return the new
    batches dir and summary; :func:`commit` puts them in place once the checks have passed."""
    from pyspark.sql import functions as F

    hw = {n.node_id: n.high_watermark for n in nodes}
    sizes = {(n.node_id, segment_name(s)): s.size_bytes for n in nodes for s in n.segments}
    sealed = sorted(work.hashes)
    keys = [f"{node}:{name}" for node, name in sealed]
    in_sealed = batches.where(F.concat_ws(":", "node_id", "segment").isin(keys))
    per_segment = (
        in_sealed.groupBy("node_id", "segment")
        .agg(
            F.min("base_offset").alias("base_offset"),
            F.max("next_offset").alias("next_offset"),
            F.min("epoch").alias("first_epoch"),
            F.max("epoch").alias("last_epoch"),
            F.count(F.lit(1)).alias("batches"),
            F.min(F.col("crc_ok").cast("int")).alias("all_ok"),
        )
        .collect()
    )
    segments: list[SegmentDigest] = []
    for r in per_segment:
        key = (r["node_id"], r["segment"])
        if r["next_offset"] is None or r["next_offset"] > hw[r["node_id"]] or not r["all_ok"]:
            continue  # not wholly committed (a new leader may truncate it), or damaged: read again next time
        segments.append(
            SegmentDigest(
                r["node_id"], r["segment"], r["base_offset"], r["next_offset"], r["first_epoch"], r["last_epoch"],
                sizes[key], r["batches"], work.hashes[key],
            )
        )  # fmt: skip
    kept = [f"{s.node_id}:{s.segment}" for s in segments]
    prefixes, prefix_rows = _prefixes(nodes, {(s.node_id, s.segment) for s in segments}, batches)
    staging = store.path / f"{BATCHES}.new"
    shutil.rmtree(staging, ignore_errors=True)
    in_sealed.where(F.concat_ws(":", "node_id", "segment").isin(kept)).unionByName(prefix_rows).coalesce(
        1
    ).write.parquet(str(staging))
    return staging, _summary(nodes, segments, prefixes)


def _summary(
    nodes: list[layout.NodeFiles], segments: list[SegmentDigest], prefixes: list[PrefixDigest]
) -> dict[str, Any]:
    marks = []
    for node in nodes:
        mine = [s.next_offset for s in segments if s.node_id == node.node_id]
        mine += [p.next_offset for p in prefixes if p.node_id == node.node_id]
        snapshot = node.newest_snapshot
        marks.append(
            NodeMark(
                node.node_id,
                max(mine, default=0),
                snapshot.uri.rsplit("/", 1)[-1] if snapshot else None,
                snapshot.end_offset if snapshot else None,
            )
        )
    return {
        "version": STORE_VERSION,
        "cluster_id": nodes[0].cluster_id,
        "segments": [asdict(s) for s in sorted(segments, key=lambda s: (s.node_id, s.base_offset))],
        "nodes": [asdict(m) for m in marks],
        "prefixes": [asdict(p) for p in sorted(prefixes, key=lambda p: (p.node_id, p.segment))],
    }


def driver_rows(store: DigestStore, nodes: list[layout.NodeFiles], work: Plan) -> list[dict[str, Any]]:
    """Every node's batch rows read in the driver: the reused ones from the store, the rest from
    the files (from their stored prefix's end on)."""
    import pyarrow.dataset as ds

    from raftmeta.jobs.datasource import FilePartition, read_partition

    rows: list[dict[str, Any]] = []
    if work.reuse or work.starts:
        wanted = None
        for node_id, name in sorted(work.reuse | set(work.starts)):
            one = (ds.field("node_id") == node_id) & (ds.field("segment") == name)
            if (node_id, name) in work.starts:
                one = one & (ds.field("position") < work.starts[(node_id, name)])
            wanted = one if wanted is None else wanted | one
        rows.extend(ds.dataset(str(store.batches_dir), format="parquet").to_table(filter=wanted).to_pylist())
    uris = {(n.node_id, segment_name(s)): s.uri for n in nodes for s in n.segments}
    for node_id, name in sorted(work.read):
        part = FilePartition(uris[(node_id, name)], node_id, name, "batches", -1, work.starts.get((node_id, name), 0))
        for arrow_batch in read_partition(part):
            rows.extend(arrow_batch.to_pylist())
    return rows


def save_rows(
    store: DigestStore, nodes: list[layout.NodeFiles], work: Plan, rows: list[dict[str, Any]]
) -> tuple[Path, dict[str, Any]]:
    """:func:`save` for batch rows in the driver: the same segments and prefixes kept."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from raftmeta.jobs.columns import BATCH_SCHEMA

    hw = {n.node_id: n.high_watermark for n in nodes}
    uris = {(n.node_id, segment_name(s)): s for n in nodes for s in n.segments}
    by_key: dict[SegmentKey, list[dict[str, Any]]] = {}
    for row in rows:
        by_key.setdefault((row["node_id"], row["segment"]), []).append(row)
    segments: list[SegmentDigest] = []
    prefixes: list[PrefixDigest] = []
    kept: list[dict[str, Any]] = []
    for key, mine in sorted(by_key.items()):
        mine.sort(key=lambda r: r["position"])
        ends = [r["next_offset"] for r in mine if r["next_offset"] is not None]
        whole = (
            key in work.hashes and all(r["crc_ok"] for r in mine) and len(ends) == len(mine) and max(ends) <= hw[key[0]]
        )
        if whole:
            epochs = [r["epoch"] for r in mine]
            segments.append(
                SegmentDigest(
                    key[0], key[1], min(r["base_offset"] for r in mine), max(ends), min(epochs), max(epochs),
                    uris[key].size_bytes, len(mine), work.hashes[key],
                )
            )  # fmt: skip
            kept.extend(mine)
            continue
        good: list[dict[str, Any]] = []
        for r in mine:
            if not r["crc_ok"] or r["next_offset"] is None or r["next_offset"] > hw[key[0]]:
                break
            good.append(r)
        if good:
            end = max(r["position"] + r["size_bytes"] for r in good)
            data = layout.read_bytes(uris[key].uri)[:end]
            prefixes.append(
                PrefixDigest(key[0], key[1], end, len(good), max(r["next_offset"] for r in good), bytes_hash(data))
            )
            kept.extend(good)
    staging = store.path / f"{BATCHES}.new"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(kept, schema=BATCH_SCHEMA), staging / "part-0.parquet")
    return staging, _summary(nodes, segments, prefixes)


def _prefixes(
    nodes: list[layout.NodeFiles], whole: set[SegmentKey], batches: DataFrame
) -> tuple[list[PrefixDigest], DataFrame]:
    """The committed start of every segment not stored whole -- its batches up to the first that
    is damaged or not wholly below the node's high watermark -- and those batches' rows. A new
    leader truncates only above the high watermark, so that start never changes; storing it spares
    the next run reading the active segment (or the segment it has become) from the beginning."""
    from pyspark.sql import functions as F

    hw = {n.node_id: n.high_watermark for n in nodes}
    uris = {(n.node_id, segment_name(s)): s.uri for n in nodes for s in n.segments}
    key = F.concat_ws(":", "node_id", "segment")
    candidates = batches.where(key.isin([f"{n}:{name}" for n, name in sorted(set(uris) - whole)]))
    hw_of = F.create_map(*[F.lit(x) for pair in hw.items() for x in pair])
    bad = ~F.col("crc_ok") | F.col("next_offset").isNull() | (F.col("next_offset") > hw_of[F.col("node_id")])
    first_bad = {
        (r["node_id"], r["segment"]): r["first_bad"]
        for r in candidates.groupBy("node_id", "segment")
        .agg(F.min(F.when(bad, F.col("position"))).alias("first_bad"))
        .collect()
    }
    wanted = F.lit(False)
    for (node_id, name), position in sorted(first_bad.items()):
        below = F.lit(True) if position is None else F.col("position") < position
        wanted = wanted | ((key == f"{node_id}:{name}") & below)
    rows = candidates.where(wanted)
    prefixes = []
    for r in (
        rows.groupBy("node_id", "segment")
        .agg(
            F.count(F.lit(1)).alias("batches"),
            F.max("next_offset").alias("next_offset"),
            F.max(F.col("position") + F.col("size_bytes")).alias("bytes"),
        )
        .collect()
    ):
        data = layout.read_bytes(uris[(r["node_id"], r["segment"])])[: r["bytes"]]
        prefixes.append(
            PrefixDigest(r["node_id"], r["segment"], r["bytes"], r["batches"], r["next_offset"], bytes_hash(data))
        )
    return prefixes, rows


def commit(store: DigestStore, staging: Path, summary: dict[str, Any]) -> None:
    """Replace the store with the staged one (the summary last: it is what says what is verified)."""
    store.path.mkdir(parents=True, exist_ok=True)
    (store.path / SUMMARY).unlink(missing_ok=True)
    shutil.rmtree(store.batches_dir, ignore_errors=True)
    staging.rename(store.batches_dir)
    tmp = store.path / f"{SUMMARY}.tmp"
    tmp.write_text(json.dumps(summary, indent=1) + "\n")
    tmp.rename(store.path / SUMMARY)


def discard(staging: Path) -> None:
    shutil.rmtree(staging, ignore_errors=True)


def incremental_facts(
    spark: SparkSession,
    data_dir: str,
    nodes: list[layout.NodeFiles],
    store_path: Path,
    split_bytes_for: Callable[[int], int] = lambda _: 0,
) -> tuple[Facts, Check, dict[str, Any]]:
    """The consistency facts of a full read, reading only what the store at ``store_path`` has
    not verified; the ``verified-segments-unchanged`` check; figures on what was reused. The
    store is replaced when every consistency check passed, and left as it was otherwise.
    ``split_bytes_for``: the task size for reading this many bytes."""
    store = DigestStore.load(store_path)
    work = plan(store, nodes)
    read_bytes = sum(
        s.size_bytes - work.starts.get((n.node_id, segment_name(s)), 0)
        for n in nodes
        for s in n.segments
        if (n.node_id, segment_name(s)) in work.read
    )
    staged: list[tuple[Path, dict[str, Any]]] = []
    if read_bytes <= DRIVER_READ_BYTES:
        rows = driver_rows(store, nodes, work)
        facts = rows_facts(nodes, rows)
        staged.append(save_rows(store, nodes, work, rows))
    else:

        def keep(batches: DataFrame) -> None:
            staged.append(save(store, nodes, work, batches))

        frame = batch_rows(spark, data_dir, store, work, split_bytes_for(read_bytes))
        facts = spark_facts(spark, data_dir, rows=frame, keep=keep)
    check = changes_check(store, nodes, work)
    for staging, summary in staged:
        if check.passed and all(c.passed for c in facts_to_checks(facts)):
            commit(store, staging, summary)
        else:
            discard(staging)
    figures = {
        "segments_reused": len(work.reuse),
        "segments_read": len(work.read),
        "segments_changed": len(work.changed),
        "bytes_read": read_bytes,
    }
    return facts, check, figures
