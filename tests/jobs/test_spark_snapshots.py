"""Verify with snapshots: the state replay starts from the replayed node's newest snapshot (its
segments below it may be gone), and every node's newest snapshot must equal the replayed log."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from raftmeta.jobs.verify import run_verify
from raftmeta.records import codec
from raftmeta.storage.snapshot import SnapshotId, encode_snapshot
from raftmeta.v1 import records_pb2
from tests.jobs.quorum_logs import LogBatch, segment_files, write_quorum

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark
IMAGE_KINDS = ("topic", "partition", "register_broker")


def image_records(batches: list[LogBatch], end_offset: int, *, forge_leader: int | None = None) -> list[bytes]:
    """What a controller's snapshot at ``end_offset`` holds for this log (topics, partitions, brokers)."""
    out: list[bytes] = []
    for batch in batches:
        header = codec.check_batch(batch.data)
        if header.next_offset > end_offset:
            break
        for raw in codec.split_records(batch.data, header):
            record = records_pb2.MetadataRecord.FromString(raw)
            if record.WhichOneof("record") not in IMAGE_KINDS:
                continue
            if forge_leader is not None and record.WhichOneof("record") == "partition":
                record.partition.leader = forge_leader
                forge_leader = None
            out.append(record.SerializeToString())
    return out


def write_snapshot(root: Path, node_id: int, batches: list[LogBatch], end_offset: int, **forge: int) -> None:
    epoch = max(codec.check_batch(b.data).epoch for b in batches if codec.check_batch(b.data).next_offset <= end_offset)
    sid = SnapshotId(end_offset, epoch)
    data = b"".join(
        encode_snapshot(
            sid, image_records(batches, end_offset, **forge), last_contained_log_timestamp_ms=0, append_timestamp_ms=0
        )
    )
    (root / f"node-{node_id}" / "__cluster_metadata-0" / sid.file_name).write_bytes(data)


def test_replay_starts_from_the_snapshot_when_old_segments_are_gone(spark: SparkSession, tmp_path: Path) -> None:
    logs = write_quorum(tmp_path, topics=12, lagging=False)
    # Node 1 snapshotted at the start of its third segment and deleted the two segments below it.
    segments = segment_files(tmp_path, 1)
    end = int(segments[2].name.removesuffix(".log"))
    write_snapshot(tmp_path, 1, logs[1], end)
    for old in segments[:2]:
        old.unlink()
    result = run_verify(spark, str(tmp_path))
    assert result.passed, [c for c in result.checks if not c.passed]
    assert result.figures["replay_base_offset"] == end
    assert result.figures["topics"] == 12, "topics created before the snapshot come from the snapshot"
    snapshot_verdict = next(c for c in result.checks if c.name == "snapshots-match-log")
    assert f"node 1 at offset {end}" in snapshot_verdict.detail


def test_a_snapshot_that_disagrees_with_the_log_fails(spark: SparkSession, tmp_path: Path) -> None:
    logs = write_quorum(tmp_path, topics=8, lagging=False)
    end = logs[2][6].base_offset
    write_snapshot(tmp_path, 2, logs[2], end, forge_leader=5)
    result = run_verify(spark, str(tmp_path))
    failed = {c.name: c.detail for c in result.checks if not c.passed}
    assert list(failed) == ["snapshots-match-log"]
    assert (
        f"node 2: snapshot at offset {end} differs from the replayed log in 2 partition states"
        in failed["snapshots-match-log"]
    )
