"""The simulated disk has the real storage's crash semantics (raftmeta/storage): fsync barriers,
durable truncation, a lagging high-watermark checkpoint, an in-order prefix of unflushed writes
kept by a crash."""

from __future__ import annotations

from raftmeta.raft import Entry, SnapshotImage
from raftmeta.sim.disk import SimDisk
from raftmeta.sim.rng import SeededRandom


def entry(offset: int, epoch: int) -> Entry:
    return Entry(offset, epoch, offset + 1, b"%d-%d" % (offset, epoch))


def test_an_fsync_covers_only_the_writes_before_it_started() -> None:
    disk = SimDisk()
    disk.append(entry(0, 1))
    disk.append(entry(1, 1))
    barrier, reported = disk.flush_begin()
    disk.append(entry(2, 1))  # written while the fsync runs
    disk.flush_end(barrier)
    assert reported == 2
    assert disk.durable_end_offset == 2
    assert [e.base_offset for e in disk.durable] == [0, 1]
    assert not disk.durably_holds(entry(2, 1))


def test_a_flush_completing_after_a_truncation_reports_what_it_synced() -> None:
    """The race a driver's report must get right: the fsync started before the truncation and
    reports the old end (3); the truncated log's new tail (offset 1 of epoch 2) is not durable."""
    disk = SimDisk()
    for offset in range(3):
        disk.append(entry(offset, 1))
    barrier, reported = disk.flush_begin()
    disk.truncate_to(1)  # durable on return, with what was written before it
    disk.append(entry(1, 2))
    disk.flush_end(barrier)
    assert reported == 3
    assert disk.durable_end_offset == 1
    assert disk.durably_holds(entry(0, 1)) and not disk.durably_holds(entry(1, 2))


def test_a_crash_loses_unflushed_writes_or_keeps_an_in_order_prefix() -> None:
    disk = SimDisk()
    disk.append(entry(0, 1))
    disk.flush_end(disk.flush_begin()[0])
    for offset in range(1, 4):
        disk.append(entry(offset, 1))
    assert disk.crash(SeededRandom(1), keep_unflushed=False) == 3
    assert [e.base_offset for e in disk.entries] == [0]
    kept: set[int] = set()
    for seed in range(30):
        disk = SimDisk()
        for offset in range(4):
            disk.append(entry(offset, 1))
        disk.crash(SeededRandom(seed), keep_unflushed=True)
        offsets = [e.base_offset for e in disk.entries]
        assert offsets == list(range(len(offsets))), "a prefix, in order"
        kept.add(len(offsets))
    assert len(kept) > 2


def test_the_high_watermark_checkpoint_is_clamped_to_the_durable_log_and_monotonic() -> None:
    disk = SimDisk()
    disk.append(entry(0, 1))
    disk.append(entry(1, 1))
    disk.checkpoint_high_watermark(2)
    assert disk.hw_checkpoint == 0, "nothing durable yet"
    disk.flush_end(disk.flush_begin()[0])
    disk.checkpoint_high_watermark(2)
    assert disk.hw_checkpoint == 2
    disk.checkpoint_high_watermark(1)
    assert disk.hw_checkpoint == 2


def test_a_snapshot_trim_while_an_fsync_runs_leaves_it_covering_only_what_was_written_before_it() -> None:
    """A snapshot deletes the segments below its end while an fsync of them is in flight (a
    follower applies and snapshots what it has just appended): the fsync still covers only the
    writes made before it started, not a write made after it in the snapshot's place."""
    disk = SimDisk()
    for offset in range(2):
        disk.append(entry(offset, 1))
    barrier, reported = disk.flush_begin()
    disk.trim(SnapshotImage(2, 1, b""), 2)  # the snapshot covers both batches: durable on return
    disk.append(entry(2, 1))  # written after the fsync started
    disk.flush_end(barrier)
    assert reported == 2
    assert disk.durable_end_offset == 2
    assert not disk.durably_holds(entry(2, 1)), "the fsync began before this write"
    assert disk.crash(SeededRandom(0), keep_unflushed=False) == 1
    assert disk.end_offset == 2


def test_crash_points_around_a_truncation_racing_an_fsync() -> None:
    """An fsync of offsets 0-2 (epoch 1) is in flight; the log is truncated to 1 and offset 1 of
    epoch 2 appended. A crash at any point keeps offset 0 and never a truncated batch of epoch 1:
    before the new append, after it (kept only as an unflushed write the disk may have written),
    and after the old fsync completes."""
    for point in ("after_truncation", "after_new_append", "after_old_fsync"):
        for seed in range(20):
            disk = SimDisk()
            for offset in range(3):
                disk.append(entry(offset, 1))
            barrier, _reported = disk.flush_begin()
            disk.truncate_to(1)
            if point != "after_truncation":
                disk.append(entry(1, 2))
            if point == "after_old_fsync":
                disk.flush_end(barrier)
            disk.crash(SeededRandom(seed), keep_unflushed=True)
            kept = [(e.base_offset, e.epoch) for e in disk.entries]
            assert kept[:1] == [(0, 1)], (point, seed, kept)
            assert kept in ([(0, 1)], [(0, 1), (1, 2)]), (point, seed, kept)
            if point == "after_truncation":
                assert kept == [(0, 1)]
