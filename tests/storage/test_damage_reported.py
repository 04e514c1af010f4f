"""A damaged batch whose slot is known is kept and reported for repair from the quorum, never
refused or dropped (docs/storage.md, "Repair from the quorum"): ``report_damage``, the node's mode.

The slot is known from the intact batches around the damage (raftmeta/storage/damage.py). Its
bytes stay on disk until :meth:`SegmentLog.repair_batch` overwrites them in place with the intact
copy; a crash mid-repair leaves bytes the next start finds damaged again. A damaged range of several
batches is one slot, repaired from its front; across an epoch change it spans both epochs. Damage
without a known slot (a torn tail) meets recovery's old rules.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from raftmeta.cli.main import cli
from raftmeta.records import codec
from raftmeta.storage.damage import repairable_batches
from raftmeta.storage.datadir import NodeStorage, log_dir
from raftmeta.storage.errors import InvalidAppendError, LogCorruptionError, SnapshotError
from raftmeta.storage.snapshot import SnapshotId, parse_snapshot_name
from tests.storage.conftest import simulate_crash, topic_record
from tests.storage.test_mid_log_corruption import Placed, build_node, flip


def open_reporting(data_dir: Path) -> NodeStorage:
    return NodeStorage.open(data_dir, cluster_id="c1", node_id=1, segment_bytes=1 << 20, report_damage=True)


def stored(node: NodeStorage) -> list[tuple[int, int, int, bool]]:
    return [(b.base_offset, b.epoch, b.next_offset, b.damage is not None) for b in node.log.iter_stored(0)]


def slots(placed: list[Placed]) -> list[tuple[int, int]]:
    return [(p.base_offset, p.next_offset) for p in placed]


@pytest.mark.parametrize("high_watermark", [0, 21, 200])
def test_a_flipped_bit_is_kept_and_reported_with_its_slot_then_repaired_in_place(
    tmp_path: Path, high_watermark: int
) -> None:
    data_dir = tmp_path / "node-1"
    placed = build_node(data_dir, 40, high_watermark=min(high_watermark, 78))
    victim = placed[17]
    original = victim.path.read_bytes()
    copy = original[victim.position : victim.position + victim.size]
    damaged = flip(victim.path, victim.position + 40)  # a record byte: a CRC mismatch

    node = open_reporting(data_dir)
    (slot,) = node.log.damaged_batches()
    assert (slot.base_offset, slot.next_offset, slot.position, slot.size) == (
        victim.base_offset,
        victim.next_offset,
        victim.position,
        victim.size,
    )
    assert slot.epoch == codec.check_batch(copy).epoch and "CRC32C mismatch" in slot.reason
    assert victim.path.read_bytes() == damaged, "the damaged bytes stay on disk, nothing is cut"
    assert node.log.log_end_offset == placed[-1].next_offset
    got = stored(node)
    assert [(b, n) for b, _, n, _ in got] == slots(placed)
    assert [b for b, _, _, bad in got if bad] == [victim.base_offset]

    node.log.repair_batch(copy)
    assert victim.path.read_bytes() == original, "repaired in place, byte for byte"
    assert node.log.damaged_batches() == []
    simulate_crash(node.log)
    again = open_reporting(data_dir)
    assert again.log.damaged_batches() == [] and not any(bad for *_, bad in stored(again))


def test_a_crash_mid_repair_leaves_the_slot_damaged_for_the_next_start(tmp_path: Path) -> None:
    data_dir = tmp_path / "node-1"
    placed = build_node(data_dir, 20, high_watermark=12)
    victim = placed[5]
    copy = victim.path.read_bytes()[victim.position : victim.position + victim.size]
    flip(victim.path, victim.position + victim.size - 3)
    half = bytearray(victim.path.read_bytes())
    half[victim.position : victim.position + victim.size // 2] = copy[: victim.size // 2]  # the write cut short
    victim.path.write_bytes(half)
    node = open_reporting(data_dir)
    assert [d.base_offset for d in node.log.damaged_batches()] == [victim.base_offset]


def test_damage_in_a_cleanly_closed_segment_is_found_by_the_start_up_read(tmp_path: Path) -> None:
    """A clean close writes the active segment's index, so the next open trusts it and scans
    nothing: the node's start-up read (iter_stored) meets the damage and rescans that segment."""
    data_dir = tmp_path / "node-1"
    placed = build_node(data_dir, 30, high_watermark=30)
    open_reporting(data_dir).close()  # a clean close: the index is written
    victim = placed[11]
    flip(victim.path, victim.position + 50)
    node = open_reporting(data_dir)
    assert node.log.damaged_batches() == [], "the index is trusted at open"
    got = stored(node)
    assert [b for b, _, _, bad in got if bad] == [victim.base_offset]
    assert [(b, n) for b, _, n, _ in got] == slots(placed)


def test_a_misdirected_write_is_reported_in_the_slot_it_overwrote(tmp_path: Path) -> None:
    """Another slot's intact batch (the same size) written where batch 9 belongs: its CRC passes,
    its header names another offset. The neighbours prove the slot, and the same epoch on both
    sides says its epoch."""
    data_dir = tmp_path / "node-1"
    placed = build_node(data_dir, 30, high_watermark=42)
    target = placed[12]  # batches of 1, 2, 3 records: 12 and 15 hold one record each, epoch 2
    source = placed[15]
    assert target.size == source.size
    data = bytearray(target.path.read_bytes())
    data[target.position : target.position + target.size] = data[source.position : source.position + source.size]
    target.path.write_bytes(data)
    node = open_reporting(data_dir)
    (slot,) = node.log.damaged_batches()
    assert (slot.base_offset, slot.next_offset, slot.epoch) == (target.base_offset, target.next_offset, 2)
    assert f"offset {source.base_offset}" in slot.reason


def zero(placed: list[Placed], first: int, last: int) -> tuple[bytes, bytes]:
    """Zero batches ``first``..``last`` of ``placed`` (one file): the original and damaged bytes."""
    a, b = placed[first], placed[last]
    original = a.path.read_bytes()
    data = bytearray(original)
    data[a.position : b.position + b.size] = bytes(b.position + b.size - a.position)
    a.path.write_bytes(data)
    return original, bytes(data)


def test_damage_spanning_several_batches_of_one_epoch_is_one_slot_repaired_from_its_front(tmp_path: Path) -> None:
    """A zeroed range across batch boundaries: no header frames the batches inside, but the
    intact batches around it are both of epoch 1, so every offset between is of epoch 1 and the
    range is one slot. It is repaired batch by batch from its front; a copy of another batch of
    it, or of another epoch, is refused."""
    data_dir = tmp_path / "node-1"
    placed = build_node(data_dir, 30, high_watermark=42)
    first, last = placed[6], placed[8]
    original, damaged = zero(placed, 6, 8)
    copies = [original[p.position : p.position + p.size] for p in placed[6:9]]

    node = open_reporting(data_dir)
    (slot,) = node.log.damaged_batches()
    assert (slot.base_offset, slot.epoch, slot.next_offset) == (first.base_offset, 1, last.next_offset)
    assert (slot.position, slot.size) == (first.position, last.position + last.size - first.position)
    assert "no batch header frames" in slot.reason
    assert first.path.read_bytes() == damaged, "the damaged bytes stay on disk, nothing is cut"
    got = stored(node)
    assert [b for b, _, _, bad in got if bad] == [first.base_offset]
    assert [(b, n) for b, _, n, bad in got if not bad] == [s for i, s in enumerate(slots(placed)) if not 6 <= i <= 8]

    for wrong in (copies[1], original[placed[11].position : placed[11].position + placed[11].size]):
        with pytest.raises(InvalidAppendError, match="refused repair"):
            node.log.repair_batch(wrong)
    assert first.path.read_bytes() == damaged, "nothing written"
    node.log.repair_batch(copies[0])
    (rest,) = node.log.damaged_batches()
    assert (rest.base_offset, rest.next_offset, rest.position) == (
        placed[7].base_offset,
        last.next_offset,
        placed[7].position,
    )
    simulate_crash(node.log)  # the front is repaired on disk; the next start finds the rest
    node = open_reporting(data_dir)
    assert [(d.base_offset, d.next_offset) for d in node.log.damaged_batches()] == [
        (placed[7].base_offset, last.next_offset)
    ]
    node.log.repair_batch(copies[1])
    node.log.repair_batch(copies[2])
    assert node.log.damaged_batches() == []
    assert first.path.read_bytes() == original, "repaired in place, byte for byte"
    assert [b.base_offset for b in node.log.iter_batches(0)] == [p.base_offset for p in placed]


def test_damage_across_an_epoch_change_is_one_slot_spanning_both_epochs_repaired_from_its_front(
    tmp_path: Path,
) -> None:
    """Batches 8-10 zeroed: the batch before is of epoch 1, the one after of epoch 2, so the range
    holds an epoch change at an offset no byte says. It is one slot of epochs 1..2, kept on disk;
    it takes its front batches of either epoch in its span (never one of another epoch, nor one
    that overruns it), and each repair puts the epoch change where the copy says, so reads check
    the repaired batches against the right epoch."""
    data_dir = tmp_path / "node-1"
    placed = build_node(data_dir, 30, high_watermark=42)
    first, last = placed[8], placed[10]
    epochs = [1 + i // 10 for i in range(len(placed))]  # build_node's: batch 10 starts epoch 2
    original, damaged = zero(placed, 8, 10)
    copies = [original[p.position : p.position + p.size] for p in placed[8:11]]

    node = open_reporting(data_dir)
    (slot,) = node.log.damaged_batches()
    assert (slot.base_offset, slot.epoch, slot.max_epoch, slot.next_offset) == (
        first.base_offset,
        1,
        2,
        last.next_offset,
    )
    assert first.path.read_bytes() == damaged, "the damaged bytes stay on disk, nothing is cut"
    (kept,) = [b for b in node.log.iter_stored(0) if b.damage is not None]
    assert (kept.base_offset, kept.epoch, kept.max_epoch) == (first.base_offset, 1, 2)

    outside = original[placed[20].position : placed[20].position + placed[20].size]  # epoch 3
    for wrong in (copies[1], outside):
        with pytest.raises(InvalidAppendError, match="refused repair"):
            node.log.repair_batch(wrong)
    assert first.path.read_bytes() == damaged, "nothing written"
    node.log.repair_batch(copies[0])
    node.log.repair_batch(copies[1])
    (rest,) = node.log.damaged_batches()
    assert (rest.base_offset, rest.epoch, rest.max_epoch) == (last.base_offset, 1, 2)
    node.log.repair_batch(copies[2])  # epoch 2 starts here
    assert node.log.damaged_batches() == []
    assert first.path.read_bytes() == original, "repaired in place, byte for byte"
    assert node.log.epoch_for_offset(last.base_offset) == 2
    assert node.log.epoch_for_offset(last.base_offset - 1) == 1
    assert [(b.base_offset, b.epoch) for b in node.log.iter_batches(0)] == [
        (p.base_offset, e) for p, e in zip(placed, epochs, strict=True)
    ]


def test_a_slot_across_an_epoch_change_repaired_up_to_the_later_epoch_leaves_a_rest_of_that_epoch(
    tmp_path: Path,
) -> None:
    """The front of a slot of epochs 1..2 repaired with a batch of epoch 2: the epoch change is at
    the slot's base, the rest is of epoch 2 alone, and a batch of epoch 1 no longer fits it."""
    data_dir = tmp_path / "node-1"
    placed = build_node(data_dir, 30, high_watermark=42)
    original, _ = zero(placed, 10, 12)
    node = open_reporting(data_dir)
    (slot,) = node.log.damaged_batches()
    assert (slot.epoch, slot.max_epoch) == (1, 2)
    node.log.repair_batch(original[placed[10].position : placed[10].position + placed[10].size])
    (rest,) = node.log.damaged_batches()
    assert (rest.base_offset, rest.epoch, rest.max_epoch) == (placed[11].base_offset, 2, None)
    assert node.log.epoch_for_offset(placed[10].base_offset) == 2


@pytest.mark.parametrize(("target", "source"), [(13, 14), (14, 12)])
def test_a_misdirected_write_of_another_size_is_a_damaged_range(tmp_path: Path, target: int, source: int) -> None:
    """Another batch's intact bytes of another size written where batch ``target`` starts: a
    longer one runs into the batch after it, a shorter one leaves the end of the target's bytes
    behind it. Either way no header frames the bytes up to the next intact batch, whose epoch is
    the batch before's: one damaged range, repaired from its front."""
    data_dir = tmp_path / "node-1"
    placed = build_node(data_dir, 30, high_watermark=42)
    t, src = placed[target], placed[source]
    assert t.size != src.size
    original = t.path.read_bytes()
    data = bytearray(original)
    data[t.position : t.position + src.size] = original[src.position : src.position + src.size]
    t.path.write_bytes(data)
    after = placed[target + 1] if src.size < t.size else placed[target + 2]
    node = open_reporting(data_dir)
    (slot,) = node.log.damaged_batches()
    assert (slot.base_offset, slot.epoch, slot.next_offset) == (t.base_offset, 2, after.base_offset)
    for p in placed[target : placed.index(after)]:
        node.log.repair_batch(original[p.position : p.position + p.size])
    assert node.log.damaged_batches() == [] and t.path.read_bytes() == original


def test_a_torn_tail_is_still_truncated(tmp_path: Path) -> None:
    data_dir = tmp_path / "node-1"
    placed = build_node(data_dir, 10, high_watermark=6)
    last = placed[-1]
    data = last.path.read_bytes()
    last.path.write_bytes(data[: len(data) - 5])
    node = open_reporting(data_dir)
    assert node.log.damaged_batches() == [] and node.log.log_end_offset == last.base_offset


def test_a_damaged_last_batch_below_the_checkpoint_is_reported_not_refused(tmp_path: Path) -> None:
    data_dir = tmp_path / "node-1"
    placed = build_node(data_dir, 10, high_watermark=19)
    last = placed[-1]
    assert last.next_offset == 19
    flip(last.path, last.position + last.size - 2)
    node = open_reporting(data_dir)
    assert [(d.base_offset, d.next_offset) for d in node.log.damaged_batches()] == [(last.base_offset, 19)]


def test_a_repair_with_a_copy_that_does_not_fill_the_slot_is_refused(tmp_path: Path) -> None:
    data_dir = tmp_path / "node-1"
    placed = build_node(data_dir, 20, high_watermark=12)
    victim, other = placed[5], placed[6]
    data = victim.path.read_bytes()
    damaged = flip(victim.path, victim.position + 40)
    node = open_reporting(data_dir)
    with pytest.raises(InvalidAppendError, match="refused repair"):
        node.log.repair_batch(data[other.position : other.position + other.size])
    bad = bytearray(data[victim.position : victim.position + victim.size])
    bad[-1] ^= 1
    with pytest.raises(InvalidAppendError, match="refused repair"):
        node.log.repair_batch(bytes(bad))
    assert [d.base_offset for d in node.log.damaged_batches()] == [victim.base_offset]
    assert victim.path.read_bytes() == damaged, "nothing written"


def test_log_dump_names_the_damage_a_node_repairs_from_the_quorum(tmp_path: Path) -> None:
    data_dir = tmp_path / "node-1"
    placed = build_node(data_dir, 30, high_watermark=42)
    victim = placed[9]
    flip(victim.path, victim.position + 45)
    result = CliRunner().invoke(cli, ["log", "dump", "--data-dir", str(data_dir), "--no-records", "--output", "json"])
    assert result.exit_code == 1, "damage found"
    document = json.loads(result.stdout)
    (slot,) = document["repairable"]
    assert (slot["offset"], slot["end_offset"], slot["position"]) == (
        victim.base_offset,
        victim.next_offset,
        victim.position,
    )
    text = CliRunner().invoke(cli, ["log", "dump", "--data-dir", str(data_dir), "--no-records"]).output
    assert f"REPAIRABLE: offsets {victim.base_offset}..{victim.next_offset - 1}" in text


def test_log_dump_names_both_epochs_of_a_slot_across_an_epoch_change(tmp_path: Path) -> None:
    data_dir = tmp_path / "node-1"
    placed = build_node(data_dir, 30, high_watermark=42)
    zero(placed, 8, 10)  # batch 10 starts epoch 2
    result = CliRunner().invoke(cli, ["log", "dump", "--data-dir", str(data_dir), "--no-records", "--output", "json"])
    (slot,) = json.loads(result.stdout)["repairable"]
    assert (slot["offset"], slot["end_offset"], slot["epoch"], slot["max_epoch"]) == (
        placed[8].base_offset,
        placed[10].next_offset,
        1,
        2,
    )
    text = CliRunner().invoke(cli, ["log", "dump", "--data-dir", str(data_dir), "--no-records"]).output
    assert f"REPAIRABLE: offsets {placed[8].base_offset}..{placed[10].next_offset - 1} (epochs 1..2)" in text


def test_the_dumps_read_only_walk_finds_what_recovery_keeps(tmp_path: Path) -> None:
    """repairable_batches (the dump's walk) and Segment.scan with report_damage (recovery) apply
    one rule: for flips all over a log, and two at once, they name the same slots."""
    src = tmp_path / "src"
    placed = build_node(src, 12, high_watermark=19)
    segment = placed[0].path.read_bytes()
    rng = random.Random(5)
    compared = 0
    for trial in range(60):
        data = bytearray(segment)
        for _ in range(1 + trial % 2):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        data_dir = tmp_path / f"t{trial}"
        shutil.copytree(src, data_dir)
        (log_dir(data_dir) / placed[0].path.name).write_bytes(data)
        walked = repairable_batches(bytes(data), 0, high_watermark=19, next_segment_base=None)
        try:
            node = open_reporting(data_dir)
        except LogCorruptionError:
            continue  # damage without a known slot first: refused (the walk stops there too)
        assert node.log.damaged_batches() == walked, trial
        compared += len(walked)
        simulate_crash(node.log)
    assert compared >= 30, "most flips leave a known slot"


def test_the_last_batch_of_a_sealed_segment_has_its_end_from_the_next_segments_name(tmp_path: Path) -> None:
    """Nothing follows it in its file, but the next segment file starts where it ends: its slot is
    known whatever the checkpoint, and the batches after it (next segment) are read past it."""
    data_dir = tmp_path / "node-1"
    placed = build_node(data_dir, 40, high_watermark=0, segment_bytes=1024)
    files = sorted({p.path for p in placed})
    assert len(files) >= 3
    victim = [p for p in placed if p.path == files[0]][-1]
    copy = victim.path.read_bytes()[victim.position : victim.position + victim.size]
    flip(victim.path, victim.position + victim.size - 4)
    node = open_reporting(data_dir)
    assert node.log.damaged_batches() == [], "a sealed segment is trusted through its index at open"
    got = stored(node)
    assert [(b, n) for b, _, n, _ in got] == slots(placed)
    assert [b for b, _, _, bad in got if bad] == [victim.base_offset]
    node.log.repair_batch(copy)
    assert not any(bad for *_, bad in stored(node))


def snapshot_at(node: NodeStorage, offset: int) -> Path:
    snapshot_id = SnapshotId(offset, node.log.epoch_for_offset(offset - 1))
    node.take_snapshot(
        snapshot_id, [topic_record(f"s{offset}")], last_contained_log_timestamp_ms=0, append_timestamp_ms=0
    )
    return node.snapshots.path(snapshot_id)


def damage_file(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x04
    path.write_bytes(data)


@pytest.mark.parametrize("older", [False, True])
def test_a_damaged_snapshot_falls_back_to_an_older_one_and_the_log_that_covers_it(tmp_path: Path, older: bool) -> None:
    """The log still holds everything from the older snapshot's end (from 0 without one): the same
    state. The damaged file is kept beside, as ``.corrupt``."""
    data_dir = tmp_path / "node-1"
    placed = build_node(data_dir, 40, high_watermark=78)
    node = open_reporting(data_dir)
    first = snapshot_at(node, 42) if older else None
    newest = snapshot_at(node, 60)
    node.close()
    damage_file(newest)
    with pytest.raises(SnapshotError):
        NodeStorage.open(data_dir, cluster_id="c1", node_id=1, segment_bytes=1 << 20)  # offline: refused

    node = open_reporting(data_dir)
    expected = SnapshotId(42, node.log.epoch_for_offset(41)) if older else None
    assert (node.latest_snapshot.snapshot_id if node.latest_snapshot else None) == expected
    assert first is None or first.exists()
    assert not newest.exists() and newest.with_name(newest.name + ".corrupt").exists(), "kept beside"
    assert node.log.log_end_offset == placed[-1].next_offset


def test_a_damaged_snapshot_the_log_does_not_reach_behind_is_set_aside_and_reported_missing(tmp_path: Path) -> None:
    """No fallback: offline it is refused, changing nothing; the node's mode sets it aside as
    ``.corrupt`` (kept) and starts its log at the snapshot's slot with the state reported missing
    (the core fetches the leader's snapshot)."""
    data_dir = tmp_path / "node-1"
    build_node(data_dir, 40, high_watermark=78, segment_bytes=1024)
    node = open_reporting(data_dir)
    newest = snapshot_at(node, 60)  # deletes the segments wholly below it: the log starts above 0
    log_start, log_end = node.log.log_start_offset, node.log.log_end_offset
    assert log_start > 0
    node.close()
    damage_file(newest)
    damaged = newest.read_bytes()
    with pytest.raises(SnapshotError, match="refusing to start"):
        NodeStorage.open(data_dir, cluster_id="c1", node_id=1, segment_bytes=1 << 20)
    assert newest.read_bytes() == damaged, "refused: nothing moved"

    reopened = open_reporting(data_dir)
    slot = parse_snapshot_name(newest.name)
    assert reopened.latest_snapshot is None and reopened.missing_snapshot == slot
    assert not newest.exists()
    assert newest.with_name(newest.name + ".corrupt").read_bytes() == damaged, "kept, never deleted"
    assert (reopened.log.log_start_offset, reopened.log.log_end_offset) == (log_start, log_end), "the log is kept"
    reopened.close()
    # Stopped before it installed its leader's snapshot: it starts the same way again.
    again = open_reporting(data_dir)
    assert again.latest_snapshot is None and again.missing_snapshot == slot
    assert (again.log.log_start_offset, again.log.log_end_offset) == (log_start, log_end)
    again.close()


def test_a_damaged_snapshot_with_the_log_starting_above_it_stops_the_node_naming_the_offsets(tmp_path: Path) -> None:
    """No fallback, and the log starts above the damaged snapshot's end (its first segment lost too):
    the offsets in between are on no file of this node, so taking the leader's snapshot would not
    join its log. The node's mode refuses to start, naming the snapshot, the state it held and the
    offsets missing, and changes nothing."""
    data_dir = tmp_path / "node-1"
    build_node(data_dir, 40, high_watermark=78, segment_bytes=1024)
    node = open_reporting(data_dir)
    newest = snapshot_at(node, 60)
    node.close()
    first, *_ = sorted(log_dir(data_dir).glob("*.log"))
    first.unlink()
    first.with_suffix(".index").unlink(missing_ok=True)
    log_start = min(int(p.stem) for p in log_dir(data_dir).glob("*.log"))
    assert log_start > 60
    damage_file(newest)
    before = {p.name: p.read_bytes() for p in log_dir(data_dir).iterdir()}
    with pytest.raises(SnapshotError, match="refusing to start") as refused:
        open_reporting(data_dir)
    slot = parse_snapshot_name(newest.name)
    assert slot is not None
    assert f"the state below offset {slot.offset} (epoch {slot.epoch}) is in no other intact snapshot" in str(
        refused.value
    )
    assert f"offsets {slot.offset}..{log_start - 1} are on no file of this node" in str(refused.value)
    assert {p.name: p.read_bytes() for p in log_dir(data_dir).iterdir()} == before, "nothing changed"


def test_with_no_fallback_a_damaged_older_snapshot_is_set_aside_too(tmp_path: Path) -> None:
    """Left under its name, retention would delete it once newer snapshots arrive."""
    data_dir = tmp_path / "node-1"
    build_node(data_dir, 40, high_watermark=78, segment_bytes=1024)
    node = open_reporting(data_dir)
    older = snapshot_at(node, 30)
    newest = snapshot_at(node, 60)
    assert node.log.log_start_offset > 30
    node.close()
    damage_file(older)
    damage_file(newest)
    contents = {older: older.read_bytes(), newest: newest.read_bytes()}
    reopened = open_reporting(data_dir)
    assert reopened.missing_snapshot == parse_snapshot_name(newest.name)
    for path, data in contents.items():
        assert not path.exists()
        assert path.with_name(path.name + ".corrupt").read_bytes() == data
    reopened.close()


def test_a_damaged_range_holding_the_offset_the_log_starts_at_is_refused(tmp_path: Path) -> None:
    """The node's start-up read begins at the newest snapshot's end: inside a damaged range, the
    byte where that batch starts is unknown, so the read refuses, naming file, byte and offset."""
    data_dir = tmp_path / "node-1"
    placed = build_node(data_dir, 30, high_watermark=42)
    zero(placed, 6, 8)
    node = open_reporting(data_dir)
    inside = placed[7].base_offset
    with pytest.raises(LogCorruptionError, match=rf"byte {placed[6].position} .*holds offset {inside}"):
        list(node.log.iter_stored(inside))
    assert [d.base_offset for d in node.log.damaged_batches()] == [placed[6].base_offset], "nothing changed"


def test_a_damaged_range_is_repaired_from_its_back_for_a_snapshot_that_ends_inside_it(tmp_path: Path) -> None:
    """A leader's snapshot ends inside a follower's damaged range: the leader's batches from there
    to the range's end go at the range's back, last first, each in the last bytes still damaged
    (the batches were this node's, so they fit exactly); the range's front stays damaged, and the
    log can start where the snapshot ends -- a crash on the way included."""
    data_dir = tmp_path / "node-1"
    placed = build_node(data_dir, 30, high_watermark=42)
    first, last = placed[5], placed[8]  # epoch 1, as the batches around it
    original, damaged = zero(placed, 5, 8)
    copies = [original[p.position : p.position + p.size] for p in placed[5:9]]
    node = open_reporting(data_dir)
    for wrong in (copies[2], original[placed[11].position : placed[11].position + placed[11].size]):
        with pytest.raises(InvalidAppendError, match="refused repair"):
            node.log.repair_batch(wrong)  # not the back: it ends inside the range / past it
    assert first.path.read_bytes() == damaged, "nothing written"
    node.log.repair_batch(copies[3])
    (front,) = node.log.damaged_batches()
    assert (front.base_offset, front.next_offset, front.position) == (
        first.base_offset,
        last.base_offset,
        first.position,
    )
    simulate_crash(node.log)  # the back is repaired on disk; the next start finds the front
    node = open_reporting(data_dir)
    assert [(d.base_offset, d.next_offset) for d in node.log.damaged_batches()] == [
        (first.base_offset, last.base_offset)
    ]
    node.log.repair_batch(copies[2])
    (front,) = node.log.damaged_batches()
    assert (front.base_offset, front.next_offset) == (first.base_offset, placed[7].base_offset)
    data = first.path.read_bytes()
    assert data[placed[7].position :] == original[placed[7].position :], "in place, byte for byte"
    assert data[: placed[7].position] == damaged[: placed[7].position], "the front stays as it was"
    got = [(b.base_offset, b.damage is None) for b in node.log.iter_stored(placed[7].base_offset)]
    assert got == [(p.base_offset, True) for p in placed[7:]], "the log can start at the snapshot's end"
