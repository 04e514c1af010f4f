"""The high-watermark checkpoint carries a checksum, and a value above the log is the checkpoint's
problem: a wrong but plausible value is refused naming the file, never believed or blamed on the log."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from raftmeta.cli.main import cli
from raftmeta.storage.checksummed_json import checksum
from raftmeta.storage.datadir import NodeStorage, log_dir
from raftmeta.storage.errors import HighWatermarkAboveLogError, InvalidFileError, LogCorruptionError
from raftmeta.storage.high_watermark import (
    HIGH_WATERMARK_CHECKPOINT,
    HighWatermarkCheckpoint,
    read_high_watermark,
)

Records = Callable[[int, int], list[bytes]]


def open_node(data_dir: Path, **kwargs: object) -> NodeStorage:
    return NodeStorage.open(data_dir, cluster_id="c1", node_id=1, **kwargs)  # type: ignore[arg-type]


def files_of(data_dir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(data_dir)): p.read_bytes() for p in sorted(data_dir.rglob("*")) if p.is_file()}


def test_the_checkpoint_is_written_with_a_checksum(tmp_path: Path) -> None:
    HighWatermarkCheckpoint(tmp_path).write(150, durable_end_offset=200)
    doc = json.loads((tmp_path / HIGH_WATERMARK_CHECKPOINT).read_text())
    assert doc == {"version": 2, "high_watermark": 150, "crc32c": checksum({"version": 2, "high_watermark": 150})}
    assert read_high_watermark(tmp_path) == 150


def test_a_plausible_but_wrong_value_is_refused_naming_the_file(tmp_path: Path) -> None:
    HighWatermarkCheckpoint(tmp_path).write(150, durable_end_offset=200)
    path = tmp_path / HIGH_WATERMARK_CHECKPOINT
    path.write_text(path.read_text().replace('"high_watermark": 150', '"high_watermark": 160'))
    with pytest.raises(InvalidFileError, match=f"{HIGH_WATERMARK_CHECKPOINT}: checksum mismatch"):
        read_high_watermark(tmp_path)


@pytest.mark.parametrize(
    ("content", "names"),
    [
        ('{"version": 2, "high_watermark": 4}', "'crc32c' must be an integer"),
        ('{"version": 1, "high_watermark": 4, "crc32c": 1}', "unknown fields ['crc32c']"),
        ('{"version": 3, "high_watermark": 4, "crc32c": 1}', "unsupported version 3"),
        ('{"version": 1}', "'high_watermark' is missing"),
        ("[1]", "not a JSON object"),
    ],
)
def test_damage_and_unknown_formats_are_refused(tmp_path: Path, content: str, names: str) -> None:
    (tmp_path / HIGH_WATERMARK_CHECKPOINT).write_text(content)
    with pytest.raises(InvalidFileError, match=HIGH_WATERMARK_CHECKPOINT) as refused:
        read_high_watermark(tmp_path)
    assert names in str(refused.value)


def test_a_version_1_file_is_read_and_the_next_write_adds_the_checksum(tmp_path: Path) -> None:
    (tmp_path / HIGH_WATERMARK_CHECKPOINT).write_text('{"version": 1, "high_watermark": 40}\n')
    checkpoint = HighWatermarkCheckpoint(tmp_path)
    assert checkpoint.checkpointed == 40
    checkpoint.write(50, durable_end_offset=50)
    assert json.loads((tmp_path / HIGH_WATERMARK_CHECKPOINT).read_text())["version"] == 2


def test_a_damaged_checkpoint_refuses_the_start_and_changes_nothing(tmp_path: Path, make_records: Records) -> None:
    node = open_node(tmp_path)
    node.log.append_batch(1, make_records(0, 3), 0)
    node.log.flush()
    node.checkpoint_high_watermark(3)
    node.close()
    path = tmp_path / HIGH_WATERMARK_CHECKPOINT
    path.write_text(path.read_text().replace('"high_watermark": 3', '"high_watermark": 2'))
    before = files_of(tmp_path)
    with pytest.raises(InvalidFileError, match=f"{path}: checksum mismatch"):
        open_node(tmp_path)
    assert files_of(tmp_path) == before


def test_a_checkpoint_above_the_log_end_is_a_checkpoint_problem(tmp_path: Path, make_records: Records) -> None:
    node = open_node(tmp_path)
    for _ in range(4):
        node.log.append_batch(1, make_records(node.log.log_end_offset, 3), 0)
    node.log.flush()
    node.close()
    # A checkpoint that does not belong with this log (restored from another backup), checksum intact.
    HighWatermarkCheckpoint(tmp_path).write(40, durable_end_offset=40)
    before = files_of(tmp_path)
    with pytest.raises(HighWatermarkAboveLogError) as refused:
        open_node(tmp_path)
    assert not isinstance(refused.value, LogCorruptionError), "not blamed on the log"
    message = str(refused.value)
    assert f"{tmp_path / HIGH_WATERMARK_CHECKPOINT}: the checkpointed high watermark 40 is above" in message
    assert "the end of the log and snapshot, 12" in message and "offsets 12..39" in message
    assert f"raftmeta log repair --data-dir {tmp_path} --truncate-at 12" in message
    assert "--repair-log to truncate" not in message, "no advice to truncate the log"
    assert files_of(tmp_path) == before
    # The command it names lowers the checkpoint and changes no segment; the node then opens.
    segments = {p.name: p.read_bytes() for p in log_dir(tmp_path).glob("*.log")}
    result = CliRunner().invoke(cli, ["log", "repair", "--data-dir", str(tmp_path), "--truncate-at", "12", "--yes"])
    assert result.exit_code == 0, result.output
    assert "high-watermark checkpoint: 40 -> 12" in result.output
    assert {p.name: p.read_bytes() for p in log_dir(tmp_path).glob("*.log")} == segments
    node = open_node(tmp_path)
    assert (node.log.log_end_offset, node.high_watermark.checkpointed) == (12, 12)
    node.close()


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda data: data.replace(b'"high_watermark": 5', b'"high_watermark": 4'), id="bit-flip"),
        pytest.param(lambda data: data[: len(data) // 2], id="truncated"),
        pytest.param(lambda data: bytes(len(data)), id="zeroed"),
    ],
)
def test_the_nodes_mode_sets_a_damaged_checkpoint_aside_and_starts_as_if_it_were_missing(
    tmp_path: Path, make_records: Records, damage: Callable[[bytes], bytes]
) -> None:
    """The node's mode (report_damage) does not refuse: the file is kept as ``.corrupt`` byte for
    byte, recovery holds the log to 0 (a missing checkpoint's floor), the intact log is kept whole
    and the next checkpoint writes a fresh file."""
    node = open_node(tmp_path)
    node.log.append_batch(1, make_records(0, 3), 0)
    node.log.append_batch(1, make_records(3, 2), 0)
    node.log.flush()
    node.checkpoint_high_watermark(5)
    node.close()
    path = tmp_path / HIGH_WATERMARK_CHECKPOINT
    damaged = damage(path.read_bytes())
    path.write_bytes(damaged)

    reopened = open_node(tmp_path, report_damage=True)
    assert reopened.high_watermark.checkpointed == 0
    assert reopened.log.log_end_offset == 5, "the intact log is kept whole"
    assert (tmp_path / f"{HIGH_WATERMARK_CHECKPOINT}.corrupt").read_bytes() == damaged
    assert not path.exists()
    reopened.checkpoint_high_watermark(5)
    reopened.close()
    assert read_high_watermark(tmp_path) == 5
    assert (tmp_path / f"{HIGH_WATERMARK_CHECKPOINT}.corrupt").read_bytes() == damaged, "never deleted"


def test_a_damaged_checkpoint_set_aside_twice_keeps_both_files(tmp_path: Path, make_records: Records) -> None:
    node = open_node(tmp_path)
    node.log.append_batch(1, make_records(0, 3), 0)
    node.log.flush()
    node.close()
    path = tmp_path / HIGH_WATERMARK_CHECKPOINT
    for content in (b"first damage", b"second damage"):
        path.write_bytes(content)
        open_node(tmp_path, report_damage=True).close()
    assert (tmp_path / f"{HIGH_WATERMARK_CHECKPOINT}.corrupt").read_bytes() == b"first damage"
    assert (tmp_path / f"{HIGH_WATERMARK_CHECKPOINT}.corrupt.1").read_bytes() == b"second damage"
