"""Corruption in the middle of the log vs a torn tail (docs/storage.md, "Damaged disk").

Recovery truncates a bad batch at or above the checkpointed high watermark only when nothing
intact follows it (a torn write at the tail). Intact batches after it, in the same segment or
in later ones, make it corruption in the middle of the log: the node refuses to start, names
the file, byte, offset and how many intact batches follow, and leaves every byte in place
until ``raftmeta log repair`` (or ``--repair-log``) accepts the truncation.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import structlog
from click.testing import CliRunner

from raftmeta.cli import log as log_cli
from raftmeta.cli.main import cli
from raftmeta.records import codec, walk
from raftmeta.records.walk import find_intact_batches
from raftmeta.storage.datadir import NodeStorage, log_dir
from raftmeta.storage.errors import LogCorruptionError, MidLogCorruptionError
from raftmeta.storage.high_watermark import read_high_watermark
from raftmeta.storage.log import SegmentLog, plan_truncation
from raftmeta.storage.snapshot import SnapshotId
from tests.storage.conftest import records_for, simulate_crash

Records = Callable[[int, int], list[bytes]]


@dataclass(frozen=True)
class Placed:
    """One batch of the log as it lies on disk."""

    path: Path
    position: int
    base_offset: int
    next_offset: int
    size: int


def batches_on_disk(directory: Path) -> list[Placed]:
    out: list[Placed] = []
    for path in sorted(directory.glob("*.log")):
        data = path.read_bytes()
        for batch in codec.iter_batches(data):
            position = out[-1].position + out[-1].size if out and out[-1].path == path else 0
            out.append(Placed(path, position, batch.base_offset, batch.next_offset, len(batch.data)))
    return out


def build_node(data_dir: Path, batches: int, *, high_watermark: int, segment_bytes: int = 1 << 20) -> list[Placed]:
    """A node's data dir holding ``batches`` batches of 1, 2, 3, 1, 2, 3... records (epochs rising),
    with the high watermark checkpointed at ``high_watermark``, left as after a crash (no index
    for the active segment). Batches start at offsets 0, 1, 3, 6, 7, 9, 12..."""
    node = NodeStorage.open(data_dir, cluster_id="c1", node_id=1, segment_bytes=segment_bytes)
    for i in range(batches):
        node.log.append_batch(1 + i // 10, records_for(node.log.log_end_offset, 1 + i % 3), 1_700_000_000_000 + i)
    node.log.flush()
    boundaries = {0, *(b.next_offset for b in node.log.iter_batches(0))}
    assert high_watermark in boundaries, "the high watermark of a real node is a batch boundary"
    node.checkpoint_high_watermark(high_watermark)
    simulate_crash(node.log)
    return batches_on_disk(log_dir(data_dir))


def flip(path: Path, position: int) -> bytes:
    data = bytearray(path.read_bytes())
    data[position] ^= 0x40
    path.write_bytes(data)
    return bytes(data)


def open_node(data_dir: Path, **kwargs: Any) -> NodeStorage:
    return NodeStorage.open(data_dir, cluster_id="c1", node_id=1, segment_bytes=1 << 20, **kwargs)


def repair(*args: str, answer: str | None = None) -> tuple[int, str]:
    """``raftmeta log repair ARGS``: exit code and output (stdout alone with ``-o json``)."""
    result = CliRunner().invoke(cli, ["log", "repair", *args], input=answer)
    return result.exit_code, result.stdout if "json" in args else result.output


# -- recovery ----------------------------------------------------------------------------------


def test_a_flip_above_the_checkpoint_with_intact_batches_after_it_is_refused(tmp_path: Path) -> None:
    data_dir = tmp_path / "node-1"
    placed = build_node(data_dir, 40, high_watermark=21)
    victim = next(b for b in placed if b.base_offset >= 21)  # the first batch above the checkpoint
    index = placed.index(victim)
    damaged = flip(victim.path, victim.position + 40)  # a record byte: a CRC mismatch
    with structlog.testing.capture_logs() as logs, pytest.raises(MidLogCorruptionError) as info:
        open_node(data_dir)
    error = info.value
    assert (error.path, error.position, error.offset) == (victim.path, victim.position, victim.base_offset)
    after = placed[index + 1 :]
    assert error.intact_batches_after == len(after) == 40 - 1 - index
    assert (error.first_intact_offset, error.last_intact_offset) == (after[0].base_offset, after[-1].next_offset - 1)
    message = str(error)
    assert f"{victim.path}: corrupt log data at byte {victim.position} (offset {victim.base_offset})" in message
    assert "CRC32C mismatch" in message
    assert (
        f"{len(after)} intact batches (offsets {after[0].base_offset}..{after[-1].next_offset - 1}) follow it"
        in message
    )
    assert f"`raftmeta log repair --data-dir {data_dir} --truncate-at {victim.base_offset}`" in message
    assert "--repair-log" in message
    assert victim.path.read_bytes() == damaged, "a refusal changes nothing: the intact batches are still on disk"
    (event,) = [e for e in logs if e["log_level"] == "error"]
    assert event["event"] == "refusing to start: corruption in the middle of the log, intact batches follow it"
    assert event["file"] == str(victim.path)
    assert (event["position"], event["offset"]) == (victim.position, victim.base_offset)
    assert event["intact_batches_after"] == len(after)
    assert event["high_watermark"] == 21
    assert event["repair_command"] == error.repair_command
    assert "CRC32C mismatch" in event["reason"]


def test_damage_in_the_last_batch_is_still_a_tail(tmp_path: Path, make_records: Records) -> None:
    data_dir = tmp_path / "node-1"
    placed = build_node(data_dir, 12, high_watermark=6)
    last = placed[-1]
    flip(last.path, last.position + 40)
    with structlog.testing.capture_logs() as logs:
        node = open_node(data_dir)
    assert node.log.log_end_offset == last.base_offset
    assert last.path.stat().st_size == last.position
    node.close()
    assert [e["event"] for e in logs if e["log_level"] == "warning"] == ["truncating a corrupt batch at the log tail"]


def test_a_torn_write_is_still_truncated(tmp_path: Path) -> None:
    data_dir = tmp_path / "node-1"
    placed = build_node(data_dir, 12, high_watermark=6)
    end = placed[-1].next_offset
    size = placed[-1].path.stat().st_size
    with placed[-1].path.open("ab") as f:
        f.write(codec.encode_batch(end, 2, records_for(end, 3), 0)[:-7])  # all but its last 7 bytes
    with structlog.testing.capture_logs() as logs:
        node = open_node(data_dir)
    assert node.log.log_end_offset == end
    assert placed[-1].path.stat().st_size == size
    node.close()
    assert [e["event"] for e in logs if e["log_level"] == "warning"] == ["truncating a torn write at the log tail"]


def test_a_damaged_length_is_resynchronised_past(tmp_path: Path) -> None:
    """A length that cannot be trusted hides where the next batch starts: the search finds it."""
    data_dir = tmp_path / "node-1"
    placed = build_node(data_dir, 30, high_watermark=0)
    victim = placed[10]
    data = bytearray(victim.path.read_bytes())
    data[victim.position + 8 : victim.position + 12] = (40_000).to_bytes(4, "big")  # past the file end
    victim.path.write_bytes(data)
    with pytest.raises(MidLogCorruptionError) as info:
        open_node(data_dir)
    assert (info.value.position, info.value.offset) == (victim.position, victim.base_offset)
    assert info.value.intact_batches_after == 19
    assert info.value.first_intact_offset == placed[11].base_offset


def test_intact_batches_in_later_segments_count(tmp_path: Path) -> None:
    data_dir = tmp_path / "node-1"
    placed = build_node(data_dir, 60, high_watermark=0, segment_bytes=2048)
    segments = sorted(log_dir(data_dir).glob("*.log"))
    assert len(segments) >= 3
    first = [b for b in placed if b.path == segments[0]]
    victim = first[-1]  # the last batch of a sealed segment: nothing after it in that file
    segments[0].with_suffix(".index").unlink()  # as if never indexed: the segment is scanned
    flip(victim.path, victim.position + 40)
    with pytest.raises(MidLogCorruptionError) as info:
        NodeStorage.open(data_dir, cluster_id="c1", node_id=1, segment_bytes=2048)
    assert info.value.path == segments[0]
    assert info.value.intact_batches_after == len(placed) - len(first)
    assert info.value.last_intact_offset == placed[-1].next_offset - 1
    assert sorted(log_dir(data_dir).glob("*.log")) == segments, "no segment file was deleted"


def test_repair_log_truncates_corruption_in_the_middle(tmp_path: Path) -> None:
    data_dir = tmp_path / "node-1"
    placed = build_node(data_dir, 40, high_watermark=21)
    victim = next(b for b in placed if b.base_offset >= 21)
    flip(victim.path, victim.position + 40)
    with structlog.testing.capture_logs() as logs:
        node = open_node(data_dir, repair=True)
    assert node.log.log_end_offset == victim.base_offset
    assert victim.path.stat().st_size == victim.position
    node.close()
    (event,) = [e for e in logs if e["log_level"] == "error"]
    assert event["event"] == "repairing: truncating corruption in the middle of the log"
    assert event["intact_batches_after"] == len(placed) - 1 - placed.index(victim)


def test_below_the_checkpoint_the_refusal_is_unchanged(tmp_path: Path) -> None:
    data_dir = tmp_path / "node-1"
    placed = build_node(data_dir, 40, high_watermark=60)
    victim = next(b for b in placed if b.next_offset > 30)
    flip(victim.path, victim.position + 40)
    with pytest.raises(LogCorruptionError) as info:
        open_node(data_dir)
    assert type(info.value) is LogCorruptionError
    assert "below the checkpointed high watermark 60" in str(info.value)


def test_a_16_mib_segment_with_a_zeroed_page_is_counted_quickly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lost page write (4 KiB of zeros) in the middle of a full segment: refused, counting the
    batches after it exactly. Quickly, by construction rather than by a clock: the search past the
    damage checks in Python only positions that ``bytes.find`` found with both a reachable base
    offset and the magic byte -- the batches themselves and a handful of others -- so a fill of one
    byte costs one check (the time is ``raftmeta bench``'s business, not a test's)."""
    checks = _count_calls(monkeypatch, walk, "peek_intact")
    parts: list[bytes] = []
    offsets: list[tuple[int, int]] = []  # (position, base offset) of every batch
    size = offset = 0
    while size < 16 * 1024 * 1024:
        batch = codec.encode_batch(offset, 1, records_for(offset, 1 + offset % 3), offset)
        offsets.append((size, offset))
        parts.append(batch)
        size += len(batch)
        offset += 1 + offset % 3
    data = bytearray(b"".join(parts))
    page = (len(data) // 2) // 4096 * 4096 + 1000
    data[page : page + 4096] = bytes(4096)
    directory = tmp_path / "log"
    directory.mkdir()
    (directory / "00000000000000000000.log").write_bytes(data)
    first_bad = max(i for i, (p, _) in enumerate(offsets) if p < page)
    # The first batch after the zeros whose bytes are all still there (the top bytes of a base
    # offset are zeros anyway, so a batch whose header the page only touches there is intact).
    first_after = min(
        i for i, (p, _) in enumerate(offsets) if i > first_bad and data[p : p + len(parts[i])] == parts[i]
    )
    assert offsets[first_after][0] >= page + 4096 - 8
    with pytest.raises(MidLogCorruptionError) as info:
        SegmentLog.open(directory)
    assert (info.value.position, info.value.offset) == offsets[first_bad]
    assert info.value.intact_batches_after == len(offsets) - first_after
    assert info.value.first_intact_offset == offsets[first_after][1]
    # One check a batch after the damage, and a few positions inside the zeros' neighbourhood.
    assert checks[0] <= (len(offsets) - first_after) + 16, checks[0]
    for fill in (b"\x00", b"\x01", b"\xff"):  # nothing intact in a fill, found by bytes.find
        checks[0] = 0
        assert find_intact_batches(fill * (16 * 1024 * 1024), 0, 0).count == 0
        assert checks[0] <= 1, (fill, checks[0])


def _count_calls(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[int]:
    """Counts the calls of ``module.name`` (a one-element list, so the test can reset it)."""
    calls = [0]
    original = getattr(module, name)

    def counting(*args: Any) -> Any:
        calls[0] += 1
        return original(*args)

    monkeypatch.setattr(module, name, counting)
    return calls


# -- raftmeta log repair -----------------------------------------------------------------------


@pytest.fixture
def damaged(tmp_path: Path) -> tuple[Path, list[Placed], Placed]:
    """A node refusing to start: 60 batches in several segments, checkpoint at 30, one damaged
    batch above the checkpoint with intact batches after it (in its segment and later ones). The
    damaged segment is sealed but has no index (a crash between the roll's fsync and the index
    write, or a damaged index), so recovery scans it."""
    data_dir = tmp_path / "node-1"
    placed = build_node(data_dir, 60, high_watermark=30, segment_bytes=2048)
    victim = next(
        b for i, b in enumerate(placed) if b.base_offset >= 40 and b.position > 0 and placed[i + 1].path == b.path
    )
    assert victim.path != placed[-1].path
    victim.path.with_suffix(".index").unlink()
    flip(victim.path, victim.position + 40)
    with pytest.raises(MidLogCorruptionError):
        NodeStorage.open(data_dir, cluster_id="c1", node_id=1, segment_bytes=2048)
    return data_dir, placed, victim


def test_log_repair_truncates_and_the_node_then_opens(damaged: tuple[Path, list[Placed], Placed]) -> None:
    data_dir, placed, victim = damaged
    later_segments = sorted(p for p in log_dir(data_dir).glob("*.log") if p.name > victim.path.name)
    assert later_segments, "the damaged segment is not the last one"
    after = placed[placed.index(victim) + 1 :]
    code, out = repair("--data-dir", str(data_dir), "--truncate-at", str(victim.base_offset), "--yes", "-o", "json")
    assert code == 0, out
    doc = json.loads(out)
    assert doc["applied"] is True
    assert (doc["segment"], doc["position"], doc["truncate_at"]) == (
        str(victim.path),
        victim.position,
        victim.base_offset,
    )
    assert doc["damage"]["offset"] == victim.base_offset and doc["damage"]["position"] == victim.position
    assert "CRC32C mismatch" in doc["damage"]["reason"]
    drop = doc["drop"]
    assert drop["batches"] == len(after)
    assert (drop["first_offset"], drop["last_offset"]) == (after[0].base_offset, after[-1].next_offset - 1)
    assert drop["bytes"] == sum(b.size for b in placed[placed.index(victim) :])
    assert drop["deleted_segments"] == [str(p) for p in later_segments]
    assert doc["high_watermark"] == {"checkpointed": 30, "after": 30}
    assert doc["warnings"] == []
    assert victim.path.stat().st_size == victim.position
    assert not victim.path.with_suffix(".index").exists()
    for path in later_segments:
        assert not path.exists() and not path.with_suffix(".index").exists()
    node = NodeStorage.open(data_dir, cluster_id="c1", node_id=1, segment_bytes=2048)
    assert node.log.log_end_offset == victim.base_offset
    kept = b"".join(b.data for b in node.log.iter_batches(0))
    originals = b"".join(p.path.read_bytes()[p.position : p.position + p.size] for p in placed[: placed.index(victim)])
    assert kept == originals, "every batch before the damage is kept byte for byte"
    node.close()


def test_log_repair_without_yes_and_without_a_terminal_changes_nothing(
    damaged: tuple[Path, list[Placed], Placed],
) -> None:
    data_dir, _, victim = damaged
    files = {p: p.read_bytes() for p in log_dir(data_dir).iterdir()}
    code, out = repair("--data-dir", str(data_dir), "--truncate-at", str(victim.base_offset))
    assert code == 2
    assert f"truncate {victim.path.name} at byte {victim.position}" in out
    assert "pass --yes" in out
    assert {p: p.read_bytes() for p in log_dir(data_dir).iterdir()} == files


def test_log_repair_asks_on_a_terminal(
    damaged: tuple[Path, list[Placed], Placed], monkeypatch: pytest.MonkeyPatch
) -> None:
    data_dir, _, victim = damaged
    monkeypatch.setattr(log_cli, "_interactive", lambda: True)
    size = victim.path.stat().st_size
    code, out = repair("--data-dir", str(data_dir), "--truncate-at", str(victim.base_offset), answer="n\n")
    assert code == 1 and "declined" in out
    assert victim.path.stat().st_size == size
    code, out = repair("--data-dir", str(data_dir), "--truncate-at", str(victim.base_offset), answer="y\n")
    assert code == 0, out
    assert "drop: " in out and "truncated: the log ends at offset" in out
    assert victim.path.stat().st_size == victim.position


def test_log_repair_lowers_a_checkpoint_above_the_offset(tmp_path: Path) -> None:
    data_dir = tmp_path / "node-1"
    placed = build_node(data_dir, 40, high_watermark=60)
    victim = next(b for b in placed if b.base_offset >= 30)
    flip(victim.path, victim.position + 40)
    with pytest.raises(LogCorruptionError, match="below the checkpointed high watermark 60"):
        open_node(data_dir)
    code, out = repair("--data-dir", str(data_dir), "--truncate-at", str(victim.base_offset), "--yes")
    assert code == 0, out
    assert f"high-watermark checkpoint: 60 -> {victim.base_offset}" in out
    assert "WARNING: lowers the high-watermark checkpoint" in out
    assert read_high_watermark(data_dir) == victim.base_offset
    node = open_node(data_dir)
    assert node.log.log_end_offset == victim.base_offset
    assert node.high_watermark.checkpointed == victim.base_offset
    node.close()


def test_log_repair_refuses_offsets_it_cannot_truncate_at(damaged: tuple[Path, list[Placed], Placed]) -> None:
    data_dir, placed, victim = damaged
    files = {p: p.read_bytes() for p in log_dir(data_dir).iterdir()}
    inside = next(b for b in placed if b.next_offset - b.base_offset >= 2 and b.base_offset < victim.base_offset)
    code, out = repair("--data-dir", str(data_dir), "--truncate-at", str(inside.base_offset + 1), "--yes")
    assert code == 2
    assert f"the nearest boundaries are {inside.base_offset} and {inside.next_offset}" in out
    past = placed[placed.index(victim) + 1]  # in the same segment
    next_segment = next(b for b in placed if b.path > victim.path)  # the start of a later segment
    for offset in (past.base_offset, next_segment.base_offset, next_segment.next_offset):
        code, out = repair("--data-dir", str(data_dir), "--truncate-at", str(offset), "--yes")
        assert code == 2
        assert f"offset {offset} is past offset {victim.base_offset}, where the damage in {victim.path} at byte " in out
        assert "not reached through intact batches" in out and f"the nearest boundary is {victim.base_offset}" in out
    code, out = repair("--data-dir", str(data_dir / "missing"), "--truncate-at", "0", "--yes")
    assert code == 2
    assert {p: p.read_bytes() for p in log_dir(data_dir).iterdir()} == files


def test_log_repair_refuses_offsets_outside_the_log(tmp_path: Path) -> None:
    node = NodeStorage.open(tmp_path / "node-1", cluster_id="c1", node_id=1, segment_bytes=2048)
    for i in range(30):
        node.log.append_batch(1, records_for(node.log.log_end_offset, 2), i)
    node.log.flush()
    node.checkpoint_high_watermark(40)
    node.take_snapshot(SnapshotId(40, 1), [b""], last_contained_log_timestamp_ms=0, append_timestamp_ms=0)
    node.close()
    code, out = repair("--data-dir", str(tmp_path / "node-1"), "--truncate-at", "38", "--yes")
    assert code == 2
    assert "below the end offset 40 of the newest snapshot" in out
    code, out = repair("--data-dir", str(tmp_path / "node-1"), "--truncate-at", "61", "--yes")
    assert code == 2
    assert "offset 61 is beyond the log end 60" in out
    plan = plan_truncation(log_dir(tmp_path / "node-1"), 40)
    assert plan.dropped.count == 10 and plan.dropped.first_offset == 40 and plan.dropped.last_offset == 59
    code, out = repair("--data-dir", str(tmp_path / "node-1"), "--truncate-at", "60", "-o", "json")
    assert code == 0 and json.loads(out)["applied"] is False, "nothing to do at the log end"
