"""The ``raftmeta`` Spark data source: ``spark.read.format("raftmeta").load(data_dir)``.

Input partitions are planned on the driver from the data dir's layout (one per segment or
snapshot file, or several per file with ``split_bytes``), decoded on executors by
:mod:`raftmeta.jobs.columns` into Arrow record batches (yielded as they are: no per-value
conversion in Python).

Options (strings, as Spark passes them):

- ``level``: ``records`` (default; one row per metadata record) or ``batches`` (one row per
  batch: node, segment, position, base/last/next offset, epoch, count, size, stored CRC and a
  64-bit hash of its bytes, decoded from the header alone: the cheap way to compare nodes, since
  followers store the leader's batches byte for byte).
- ``snapshots``: ``true`` reads the nodes' snapshot files instead of their segments (offsets are
  then positions within the snapshot, from 0); ``newest_snapshot``: ``true`` reads only each
  node's newest snapshot.
- ``committed``: ``true`` keeps only rows below each node's checkpointed high watermark.
- ``columns`` (records level): a comma-separated subset of the columns to decode and return.
  Python data sources get no column pruning from Spark, and every column costs decoding time
  and JVM ingest, so jobs name what they use.
- ``record_types`` (records level): a comma-separated list of record kinds to return (damage
  rows are always returned). Other records are skipped by their first byte, without parsing: a
  pass over the broker records of a 10 M-record log costs little more than reading it.
- ``split_bytes``: split files larger than this into ranges of about this many bytes, each its
  own task (a range holds the batches that start in it), so a big segment keeps every core
  busy; 0 (default) = one task per file.
- ``segments``: read only these files, a comma-separated list of ``NODE:FILE_NAME`` (e.g.
  ``2:00000000000000004711.log``), each optionally from a byte position on (``NODE:FILE@POS``:
  the batches that start there or later); ``verify --incremental`` reads only what its digest
  store has not verified.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from raftmeta.jobs import columns, layout

SOURCE_NAME = "raftmeta"


@dataclass(frozen=True)
class FilePartition(InputPartition):
    """One file (or a byte range of it) for one task. Plain data: pickled from the planner to
    the executors."""

    uri: str
    node_id: int
    name: str
    level: str
    # Rows at or above this offset are dropped when reading committed data only; -1 = keep all.
    high_watermark: int
    # The batches that start in [start, end) of the file; end -1 = to the end of the file.
    start: int = 0
    end: int = -1


@dataclass(frozen=True)
class ReadOptions:
    """What to decode: the columns (None = all) and record kinds (None = all) of record rows."""

    columns: tuple[str, ...] | None = None
    kinds: tuple[str, ...] | None = None


def _flag(options: dict[str, str], key: str) -> bool:
    value = options.get(key, "false").strip().lower()
    if value not in ("true", "false"):
        raise ValueError(f"option {key!r} must be true or false, got {value!r}")
    return value == "true"


def _names(options: dict[str, str], key: str, allowed: Sequence[str]) -> tuple[str, ...] | None:
    if key not in options:
        return None
    names = tuple(n.strip() for n in options[key].split(",") if n.strip())
    unknown = sorted(set(names) - set(allowed))
    if unknown:
        raise ValueError(f"option {key!r}: unknown names {unknown}; allowed: {', '.join(allowed)}")
    return names


def read_options(options: dict[str, str]) -> ReadOptions:
    """The ``columns`` and ``record_types`` options, checked (records level only)."""
    cols = _names(options, "columns", columns.RECORD_SCHEMA.names)
    kinds = _names(options, "record_types", columns.RECORD_KINDS)
    if options.get("level", "records") == "batches" and (cols is not None or kinds is not None):
        raise ValueError("options 'columns' and 'record_types' apply to level=records only")
    return ReadOptions(cols, kinds)


def _split_bytes(options: dict[str, str]) -> int:
    text = options.get("split_bytes", "0").strip()
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"option 'split_bytes' must be a whole number of bytes, got {text!r}") from None
    if value < 0:
        raise ValueError(f"option 'split_bytes' must be 0 or more, got {value}")
    return value


def _segments(options: dict[str, str]) -> dict[tuple[int, str], int] | None:
    """(node id, file name) -> the byte position to read from."""
    if "segments" not in options:
        return None
    out: dict[tuple[int, str], int] = {}
    for item in (i.strip() for i in options["segments"].split(",")):
        if not item:
            continue
        node, sep, rest = item.partition(":")
        name, at, position = rest.partition("@")
        if (
            not sep
            or not node.strip().lstrip("-").isdigit()
            or not name.strip()
            or (at and not position.strip().isdigit())
        ):
            raise ValueError(f"option 'segments': {item!r} is not NODE:FILE_NAME or NODE:FILE_NAME@POSITION")
        out[(int(node), name.strip())] = int(position) if at else 0
    return out


def segments_option(files: Iterable[tuple[int, str]], starts: Mapping[tuple[int, str], int] | None = None) -> str:
    """The ``segments`` option's value for these (node id, file name) pairs, each read from its
    byte position in ``starts`` (default: the file's start)."""
    starts = starts or {}

    def item(node: int, name: str) -> str:
        start = starts.get((node, name), 0)
        return f"{node}:{name}@{start}" if start else f"{node}:{name}"

    return ",".join(item(node, name) for node, name in sorted(files))


def _ranges(size: int, split_bytes: int) -> list[tuple[int, int]]:
    if split_bytes <= 0 or size <= split_bytes:
        return [(0, -1)]
    count = math.ceil(size / split_bytes)
    step = math.ceil(size / count)
    return [(i * step, -1 if i == count - 1 else (i + 1) * step) for i in range(count)]


def plan_partitions(
    data_dir: str,
    *,
    level: str,
    snapshots: bool,
    committed: bool,
    newest_snapshot: bool = False,
    split_bytes: int = 0,
    only: Mapping[tuple[int, str], int] | Collection[tuple[int, str]] | None = None,
) -> list[FilePartition]:
    """The files (or file ranges) to read, one partition each (driver side); ``only``: just
    these (node id, file name) pairs (a mapping: each from its byte position on)."""
    if level not in ("records", "batches"):
        raise ValueError(f"option 'level' must be records or batches, got {level!r}")
    parts: list[FilePartition] = []
    for node in layout.discover(data_dir):
        # A snapshot holds only committed data; its offsets are positions in the file, not log offsets.
        hw = node.high_watermark if committed and not (snapshots or newest_snapshot) else -1
        files: Sequence[layout.SegmentFile | layout.SnapshotFile]
        if newest_snapshot:
            files = [node.newest_snapshot] if node.newest_snapshot else []
        else:
            files = node.snapshots if snapshots else node.segments
        for f in files:
            name = f.uri.rsplit("/", 1)[-1]
            if only is not None and (node.node_id, name) not in only:
                continue
            first = only.get((node.node_id, name), 0) if isinstance(only, Mapping) else 0
            for start, end in _ranges(max(0, f.size_bytes - first), split_bytes):
                parts.append(
                    FilePartition(f.uri, node.node_id, name, level, hw, first + start, -1 if end < 0 else first + end)
                )
    return parts


def read_partition(part: FilePartition, options: ReadOptions | None = None) -> Iterator[pa.RecordBatch]:
    """Decode one file (range) into Arrow batches (executor side; also used by the reference
    checker and the chaos tooling)."""
    options = options or ReadOptions()
    data = layout.read_bytes(part.uri)
    end = None if part.end < 0 else part.end
    if part.level == "batches":
        for batch in columns.batch_rows(part.node_id, part.name, data, start=part.start, end=end):
            kept = batch
            if part.high_watermark >= 0:
                # Committed batches only: those wholly below the high watermark (null = unreadable: dropped).
                kept = batch.filter(pc.less_equal(batch.column("next_offset"), part.high_watermark))
            if kept.num_rows:
                yield kept
        return
    yield from columns.record_rows(
        part.node_id,
        part.name,
        data,
        columns=options.columns,
        kinds=options.kinds,
        start=part.start,
        end=end,
        below=part.high_watermark if part.high_watermark >= 0 else None,
    )


class RaftmetaDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> StructType:
        options = {str(k).lower(): str(v) for k, v in self.options.items()}
        level = options.get("level", "records")
        arrow = columns.BATCH_SCHEMA if level == "batches" else columns.projected_schema(read_options(options).columns)
        spark_schema: StructType = from_arrow_schema(arrow)
        return spark_schema

    def reader(self, schema: StructType) -> DataSourceReader:
        return RaftmetaReader(dict(self.options))


class RaftmetaReader(DataSourceReader):
    def __init__(self, options: dict[str, Any]) -> None:
        self.options = {str(k).lower(): str(v) for k, v in options.items()}
        if "path" not in self.options:
            raise ValueError("the raftmeta source needs a path: spark.read.format('raftmeta').load(DATA_DIR)")
        self.read_options = read_options(self.options)

    def partitions(self) -> Sequence[InputPartition]:
        return plan_partitions(
            self.options["path"],
            level=self.options.get("level", "records"),
            snapshots=_flag(self.options, "snapshots"),
            committed=_flag(self.options, "committed"),
            newest_snapshot=_flag(self.options, "newest_snapshot"),
            split_bytes=_split_bytes(self.options),
            only=_segments(self.options),
        )

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, FilePartition)
        yield from read_partition(partition, self.read_options)
