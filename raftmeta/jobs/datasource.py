"""The ``raftmeta`` Spark data source: ``spark.read.format("raftmeta").load(data_dir)``.

One input partition per segment file (or snapshot file), planned on the driver from the data
dir's layout, decoded on executors by :mod:`raftmeta.jobs.columns` into Arrow record batches
(yielded as they are: no per-value conversion in Python).

Options (strings, as Spark passes them):

- ``level``: ``records`` (default; one row per metadata record) or ``batches`` (one row per
  batch with its digest: the cheap way to compare nodes, since followers store the leader's
  batches byte for byte).
- ``snapshots``: ``true`` reads the nodes' snapshot files instead of their segments (offsets are
  then positions within the snapshot, from 0); ``newest_snapshot``: ``true`` reads only each
  node's newest snapshot.
- ``committed``: ``true`` keeps only rows below each node's checkpointed high watermark.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from raftmeta.jobs import columns, layout

SOURCE_NAME = "raftmeta"


@dataclass(frozen=True)
class FilePartition(InputPartition):
    """One file for one task. Plain data: pickled from the planner to the executors."""

    uri: str
    node_id: int
    name: str
    level: str
    # Rows at or above this offset are dropped when reading committed data only; -1 = keep all.
    high_watermark: int


def _flag(options: dict[str, str], key: str) -> bool:
    value = options.get(key, "false").strip().lower()
    if value not in ("true", "false"):
        raise ValueError(f"option {key!r} must be true or false, got {value!r}")
    return value == "true"


def plan_partitions(
    data_dir: str, *, level: str, snapshots: bool, committed: bool, newest_snapshot: bool = False
) -> list[FilePartition]:
    """The files to read, one partition each (driver side)."""
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
            parts.append(FilePartition(f.uri, node.node_id, f.uri.rsplit("/", 1)[-1], level, hw))
    return parts


def read_partition(part: FilePartition) -> Iterator[pa.RecordBatch]:
    """Decode one file into Arrow batches (executor side; also used by the reference checker)."""
    data = layout.read_bytes(part.uri)
    if part.level == "batches":
        batches = columns.batch_rows(part.node_id, part.name, data)
        offset_column = "next_offset"
    else:
        batches = columns.record_rows(part.node_id, part.name, data)
        offset_column = "offset"
    for batch in batches:
        kept = batch
        if part.high_watermark >= 0:
            # Committed rows only: a record below the high watermark; a batch wholly below it.
            offsets = batch.column(offset_column).to_pylist()
            inclusive = offset_column == "next_offset"
            keep = [
                o is not None and (o <= part.high_watermark if inclusive else o < part.high_watermark) for o in offsets
            ]
            kept = batch.filter(pa.array(keep))
        if kept.num_rows:
            yield kept


class RaftmetaDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> StructType:
        level = self.options.get("level", "records")
        arrow = columns.BATCH_SCHEMA if level == "batches" else columns.RECORD_SCHEMA
        spark_schema: StructType = from_arrow_schema(arrow)
        return spark_schema

    def reader(self, schema: StructType) -> DataSourceReader:
        return RaftmetaReader(dict(self.options))


class RaftmetaReader(DataSourceReader):
    def __init__(self, options: dict[str, Any]) -> None:
        self.options = {str(k).lower(): str(v) for k, v in options.items()}
        if "path" not in self.options:
            raise ValueError("the raftmeta source needs a path: spark.read.format('raftmeta').load(DATA_DIR)")

    def partitions(self) -> Sequence[InputPartition]:
        return plan_partitions(
            self.options["path"],
            level=self.options.get("level", "records"),
            snapshots=_flag(self.options, "snapshots"),
            committed=_flag(self.options, "committed"),
            newest_snapshot=_flag(self.options, "newest_snapshot"),
        )

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, FilePartition)
        yield from read_partition(partition)
