"""A log that starts above the newest usable snapshot: a gap of offsets held nowhere.

It happens when the newest ``.checkpoint`` is gone (an operator's mistake, a partial restore):
the segments below it were deleted when it was taken, so the log now starts above the older
snapshot. That is damage, and start-up refuses it without touching a file, names the gap and
the missing snapshot, and leaves the deletion to ``raftmeta log repair`` (docs/storage.md).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from raftmeta.cli.main import cli
from raftmeta.storage.datadir import NodeStorage, log_dir
from raftmeta.storage.errors import LogGapError
from raftmeta.storage.high_watermark import HIGH_WATERMARK_CHECKPOINT, read_high_watermark
from raftmeta.storage.snapshot import SnapshotId

Records = Callable[[int, int], list[bytes]]
OLDER = SnapshotId(30, 1)
NEWER = SnapshotId(120, 1)


def open_node(data_dir: Path, **kwargs: object) -> NodeStorage:
    options: dict[str, object] = {"cluster_id": "c1", "node_id": 1, "segment_bytes": 2048}
    options.update(kwargs)
    return NodeStorage.open(data_dir, **options)  # type: ignore[arg-type]


def files_of(data_dir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(data_dir)): p.read_bytes() for p in sorted(data_dir.rglob("*")) if p.is_file()}


@pytest.fixture
def gapped(tmp_path: Path, make_records: Records) -> tuple[Path, int, int]:
    """A node dir whose newest snapshot (at 120) was removed: (data dir, log start, log end)."""
    node = open_node(tmp_path / "node-1")
    for _ in range(60):
        node.log.append_batch(1, make_records(node.log.log_end_offset, 3), 0)
    node.log.flush()
    node.take_snapshot(OLDER, make_records(0, 5), last_contained_log_timestamp_ms=0, append_timestamp_ms=0)
    node.take_snapshot(NEWER, make_records(0, 9), last_contained_log_timestamp_ms=0, append_timestamp_ms=0)
    node.checkpoint_high_watermark(node.log.log_end_offset)
    start, end = node.log.log_start_offset, node.log.log_end_offset
    node.close()
    assert OLDER.offset < start <= NEWER.offset < end
    (log_dir(tmp_path / "node-1") / NEWER.file_name).unlink()
    return tmp_path / "node-1", start, end


def test_a_log_above_the_newest_snapshot_is_refused_and_nothing_changes(gapped: tuple[Path, int, int]) -> None:
    data_dir, start, end = gapped
    before = files_of(data_dir)
    with pytest.raises(LogGapError) as refused:
        open_node(data_dir)
    message = str(refused.value)
    assert f"the log starts at offset {start}" in message
    assert f"offsets {OLDER.offset}..{start - 1} are in no snapshot and no segment" in message
    assert OLDER.file_name in message, "names the snapshot the log should continue"
    assert f"a snapshot ending between offsets {start} and {end}" in message, "names the missing file"
    assert f"raftmeta log repair --data-dir {data_dir} --truncate-at {OLDER.offset}" in message
    assert files_of(data_dir) == before, "a refusal changes nothing on disk"
    assert (refused.value.first_missing_offset, refused.value.log_start_offset) == (OLDER.offset, start)


def test_the_refusal_does_not_depend_on_the_high_watermark_checkpoint(gapped: tuple[Path, int, int]) -> None:
    data_dir, start, _ = gapped
    (data_dir / HIGH_WATERMARK_CHECKPOINT).unlink()
    before = files_of(data_dir)
    with pytest.raises(LogGapError, match=f"the log starts at offset {start}"):
        open_node(data_dir)
    assert files_of(data_dir) == before


def test_no_snapshot_at_all_is_the_same_gap(gapped: tuple[Path, int, int]) -> None:
    data_dir, start, _ = gapped
    (log_dir(data_dir) / OLDER.file_name).unlink()
    before = files_of(data_dir)
    with pytest.raises(LogGapError, match=f"offsets 0..{start - 1} are in no snapshot and no segment"):
        open_node(data_dir)
    assert files_of(data_dir) == before


def test_log_dump_shows_the_gap(gapped: tuple[Path, int, int]) -> None:
    data_dir, start, end = gapped
    result = CliRunner().invoke(cli, ["log", "dump", "--data-dir", str(data_dir), "--no-records", "-o", "json"])
    assert result.exit_code == 1, "a gap is damage"
    doc = json.loads(result.stdout)
    assert doc["gap"] == {
        "first_missing_offset": OLDER.offset,
        "log_start_offset": start,
        "log_end_offset": end,
        "snapshot": OLDER.file_name,
    }
    text = CliRunner().invoke(cli, ["log", "dump", "--data-dir", str(data_dir), "--no-records"]).output
    assert f"GAP: offsets {OLDER.offset}..{start - 1} are in no snapshot and no segment" in text


def test_log_repair_restarts_the_log_at_the_snapshot_then_the_node_opens(gapped: tuple[Path, int, int]) -> None:
    data_dir, start, end = gapped
    args = ["log", "repair", "--data-dir", str(data_dir)]
    refused = CliRunner().invoke(cli, [*args, "--truncate-at", str(OLDER.offset + 1), "--yes"])
    assert refused.exit_code == 2
    assert f"below the log start {start}" in refused.output and f"only at {OLDER.offset}" in refused.output
    result = CliRunner().invoke(cli, [*args, "--truncate-at", str(OLDER.offset), "--yes"])
    assert result.exit_code == 0, result.output
    assert f"the log will restart empty at offset {OLDER.offset}" in result.output
    assert f"high-watermark checkpoint: {end} -> {OLDER.offset}" in result.output
    assert read_high_watermark(data_dir) == OLDER.offset
    node = open_node(data_dir)
    assert (node.log.log_start_offset, node.log.log_end_offset) == (OLDER.offset, OLDER.offset)
    assert node.latest_snapshot is not None and node.latest_snapshot.snapshot_id == OLDER
    node.close()


def test_repair_log_at_start_up_still_discards_the_log(gapped: tuple[Path, int, int]) -> None:
    data_dir, _, _ = gapped
    node = open_node(data_dir, repair=True)
    assert (node.log.log_start_offset, node.log.log_end_offset) == (OLDER.offset, OLDER.offset)
    assert node.high_watermark.checkpointed == OLDER.offset
    node.close()
    open_node(data_dir).close()
