"""The state half of the digest store: what ``verify --incremental`` keeps of a verified replay so
that the next run checks only the records after it (:mod:`raftmeta.jobs.delta`).

``DIGEST_STORE/state/``:

- ``state.json``: the *verified point* (the replayed node's high watermark when it was stored:
  every record below it was replayed and passed), the counts the report's figures are made of
  (per broker, per rack, ISR sizes, health), the broker facts the rules read, each topic's
  ``min.insync.replicas``, the voter-record rows, the snapshot comparison's verdict, the records
  count, every node's newest snapshot (name, end, size, hash) and, per node that had committed
  the point, a hash of its batches between the last segment the digest store keeps and the point
  (the unsealed part of its log, which the segment digests do not cover);
- ``gen-0/``, ``gen-1/``, ...: layers of rows, a newer layer's row replacing an older one's.
  ``gen-0`` is written by the full replay's own job (Spark: ``partitions/`` is a directory of
  files sorted by topic id, with small row groups), later ones by the incremental runs (one file
  each, only the partitions and topics they changed). Each holds ``partitions`` (a row per live
  partition: its last state), ``topics`` (a row per topic id: name, pool, creation offset,
  removed) and ``history`` (the topic, remove-topic and request records the history checks read).

A run that reads the store loads the topic table (a row per topic) and only the partitions of the
topics its new records touch: Parquet row-group statistics on the sorted topic ids skip the rest.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from raftmeta.jobs import layout
from raftmeta.jobs.checks import Check
from raftmeta.jobs.columns import scan_batches
from raftmeta.jobs.partition_rules import PartitionState
from raftmeta.jobs.state import Brokers

if TYPE_CHECKING:
    from collections.abc import Collection

    import pyarrow as pa

STATE_DIR = "state"
SUMMARY = "state.json"
STATE_VERSION = 1
# A run that would add a layer past this many replays in full and writes one layer again: every
# layer is one more file to open per lookup.
MAX_GENERATIONS = 32
PARTS = ("partitions", "topics", "history")


class StoredStateRefused(Exception):
    """The stored state cannot be read (damaged, or written by another version)."""


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str | None
    pool: str | None
    created_at: int | None
    removed: bool


@dataclass
class StoredState:
    """``state.json``; ``root`` is the state directory."""

    root: Path
    cluster_id: str
    point: int
    base: int | None
    records: int
    generations: int
    counts: dict[tuple[int, int, int], int]
    brokers: Brokers
    min_isr: dict[str, int]
    voter_rows: list[dict[str, Any]]
    snapshot_check: Check
    snapshots: dict[int, list[Any]]
    # node id -> (first offset, hash) of its batches from there up to the point
    tails: dict[int, tuple[int, str]] = field(default_factory=dict)

    def generation_dir(self, generation: int) -> Path:
        return self.root / f"gen-{generation}"

    def paths(self, part: str, generations: int | None = None) -> list[str]:
        """Every layer's files of ``part``, oldest first (a Spark output dir or one file each)."""
        count = self.generations if generations is None else generations
        out = []
        for generation in range(count):
            path = self.generation_dir(generation) / part
            out.append(str(path if path.exists() else path.with_suffix(".parquet")))
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "cluster_id": self.cluster_id,
            "point": self.point,
            "base": self.base,
            "records": self.records,
            "generations": self.generations,
            "counts": [[k, b, x, n] for (k, b, x), n in sorted(self.counts.items())],
            "brokers": {
                "registered_at": {str(k): v for k, v in sorted(self.brokers.registered_at.items())},
                "pool_of": {str(k): v for k, v in sorted(self.brokers.pool_of.items())},
                "live": {str(k): list(v) for k, v in sorted(self.brokers.live.items())},
            },
            "min_isr": dict(sorted(self.min_isr.items())),
            "voter_rows": self.voter_rows,
            "snapshot_check": self.snapshot_check.to_json(),
            "snapshots": {str(k): v for k, v in sorted(self.snapshots.items())},
            "tails": {str(k): list(v) for k, v in sorted(self.tails.items())},
        }


def state_root(store: Path) -> Path:
    return store / STATE_DIR


def load(store: Path) -> StoredState | None:
    """The stored state, None when there is none; StoredStateRefused when it cannot be used."""
    root = state_root(store)
    summary = root / SUMMARY
    if not summary.exists():
        return None
    try:
        d = json.loads(summary.read_text())
        if d.get("version") != STATE_VERSION:
            raise StoredStateRefused(f"stored state version {d.get('version')}, expected {STATE_VERSION}")
        brokers = Brokers(
            {int(k): int(v) for k, v in d["brokers"]["registered_at"].items()},
            {int(k): str(v) for k, v in d["brokers"]["pool_of"].items()},
            {int(k): (v[0], v[1], bool(v[2])) for k, v in d["brokers"]["live"].items()},
        )
        check = d["snapshot_check"]
        state = StoredState(
            root, d["cluster_id"], int(d["point"]), d["base"], int(d["records"]), int(d["generations"]),
            {(k, b, x): n for k, b, x, n in d["counts"]}, brokers, {str(k): int(v) for k, v in d["min_isr"].items()},
            list(d["voter_rows"]), Check(check["name"], check["passed"], check["detail"]),
            {int(k): v for k, v in d["snapshots"].items()}, {int(k): (v[0], v[1]) for k, v in d["tails"].items()},
        )  # fmt: skip
    except StoredStateRefused:
        raise
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise StoredStateRefused(f"{summary} is damaged: {exc!r}") from None
    missing = [p for part in PARTS for p in state.paths(part) if not Path(p).exists()]
    if missing:
        raise StoredStateRefused(f"stored state files are missing: {missing[0]}")
    return state


def tail_digest(node: layout.NodeFiles, start: int, end: int) -> str | None:
    """A hash of ``node``'s batches from offset ``start`` to ``end`` (their bytes, in order), or
    None when they do not run exactly from one to the other with good CRCs."""
    digest = hashlib.blake2b(digest_size=16)
    expect = start
    segments = node.segments
    for index, segment in enumerate(segments):
        following = segments[index + 1].base_offset if index + 1 < len(segments) else None
        if (following is not None and following <= start) or expect >= end:
            continue
        name = segment.uri.rsplit("/", 1)[-1]
        for raw in scan_batches(layout.read_bytes(segment.uri), name):
            if raw.header is None or not raw.crc_ok:
                return None
            base = raw.header.base_offset
            if base < start:
                continue
            if base >= end:
                break
            if base != expect:
                return None
            digest.update(raw.data)
            expect = raw.header.next_offset
    return digest.hexdigest() if expect == end else None


def snapshot_identities(nodes: list[layout.NodeFiles]) -> dict[int, list[Any]]:
    """Every node's newest snapshot: name, end offset, size and a hash of its bytes."""
    out: dict[int, list[Any]] = {}
    for node in nodes:
        snapshot = node.newest_snapshot
        if snapshot is None:
            continue
        digest = hashlib.blake2b(layout.read_bytes(snapshot.uri), digest_size=16).hexdigest()
        out[node.node_id] = [snapshot.uri.rsplit("/", 1)[-1], snapshot.end_offset, snapshot.size_bytes, digest]
    return out


def tails(nodes: list[layout.NodeFiles], verified_through: dict[int, int], point: int) -> dict[int, tuple[int, str]]:
    """(first offset, hash) of every node's batches from its last stored segment's end up to
    ``point``, for the nodes that had committed the point."""
    out: dict[int, tuple[int, str]] = {}
    for node in nodes:
        if node.high_watermark < point:
            continue
        start = min(verified_through.get(node.node_id, 0), point)
        digest = tail_digest(node, start, point)
        if digest is not None:
            out[node.node_id] = (start, digest)
    return out


def read_topics(state: StoredState) -> dict[str, TopicInfo]:
    """Every stored topic id, the newest layer's row winning."""
    import pyarrow.dataset as ds

    out: dict[str, TopicInfo] = {}
    for path in state.paths("topics"):
        for r in ds.dataset(path, format="parquet").to_table().to_pylist():
            out[r["topic_id"]] = TopicInfo(r["topic_name"], r["pool"], r["created_at"], bool(r["removed"]))
    return out


def read_partitions(state: StoredState, topic_ids: Collection[str]) -> dict[tuple[str, int], PartitionState]:
    """The stored partitions of these topics, the newest layer's row winning. The row groups of
    other topics are skipped by their statistics, so this costs what the topics hold."""
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    out: dict[tuple[str, int], PartitionState] = {}
    if not topic_ids:
        return out
    wanted = pc.field("topic_id").isin(sorted(topic_ids))
    for path in state.paths("partitions"):
        for r in ds.dataset(path, format="parquet").to_table(filter=wanted).to_pylist():
            out[(r["topic_id"], r["partition_id"])] = PartitionState.from_row(r)
    return out


def read_partitions_involving(
    state: StoredState, brokers: Collection[int], replicas_over: int | None = None
) -> dict[tuple[str, int], PartitionState]:
    """The stored partitions (newest layer's row winning) whose replicas or leader include one of
    ``brokers``, or, with ``replicas_over``, that have more replicas than that. Every layer is
    read (O(image)), but the rows are selected in Arrow: only the matches become Python objects.
    Rows of removed topics are left in; the caller knows which topics are removed."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    out: dict[tuple[str, int], PartitionState] = {}
    ids = pa.array(sorted(brokers), pa.int32())
    for path in state.paths("partitions"):
        table = ds.dataset(path, format="parquet").to_table()
        mask = np.zeros(table.num_rows, dtype=bool)
        if len(ids):
            mask |= pc.fill_null(pc.is_in(table["leader"], value_set=ids), False).to_numpy(zero_copy_only=False)
            # One array: list_parent_indices of a chunked column counts from each chunk's start.
            replicas = table["replicas"].combine_chunks()
            hits = pc.is_in(pc.list_flatten(replicas), value_set=ids)
            mask[pc.filter(pc.list_parent_indices(replicas), hits).to_numpy()] = True
        if replicas_over is not None:
            longer = pc.greater(pc.list_value_length(table["replicas"]), replicas_over)
            mask |= pc.fill_null(longer, False).to_numpy(zero_copy_only=False)
        if out:
            # A newer layer's row replaces an older one's even when the newer row no longer matches.
            replaced = table.filter(pa.array(~mask)).select(["topic_id", "partition_id"]).to_pydict()
            for key in zip(replaced["topic_id"], replaced["partition_id"], strict=True):
                out.pop(key, None)
        for partition in PartitionState.from_table(table.filter(pa.array(mask))):
            out[(partition.topic_id, partition.partition_id)] = partition
    return out


def write_layer(root: Path, generation: int, parts: dict[str, pa.Table]) -> Path:
    """Write one layer's files (an incremental run's changes)."""
    import pyarrow.parquet as pq

    target = root / f"gen-{generation}"
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    for part, table in parts.items():
        pq.write_table(table.sort_by("topic_id") if part == "partitions" else table, target / f"{part}.parquet")
    return target


def write_summary(state: StoredState) -> None:
    """``state.json``, replaced atomically: the file that says what is stored."""
    tmp = state.root / f"{SUMMARY}.tmp"
    tmp.write_text(json.dumps(state.to_json(), indent=1) + "\n")
    tmp.rename(state.root / SUMMARY)


def staging(store: Path) -> Path:
    """Where a full replay writes a new state (layer 0) before it is known to pass."""
    path = store / f"{STATE_DIR}.new"
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def commit_staged(store: Path, staged: Path, state: StoredState) -> None:
    """Replace the stored state with the staged one (its summary last)."""
    root = state_root(store)
    shutil.rmtree(root, ignore_errors=True)
    staged.rename(root)
    state.root = root
    write_summary(state)


def discard(staged: Path) -> None:
    shutil.rmtree(staged, ignore_errors=True)


__all__ = [
    "MAX_GENERATIONS",
    "StoredState",
    "StoredStateRefused",
    "TopicInfo",
    "commit_staged",
    "discard",
    "load",
    "read_partitions",
    "read_partitions_involving",
    "read_topics",
    "snapshot_identities",
    "staging",
    "tail_digest",
    "tails",
    "write_layer",
    "write_summary",
]
