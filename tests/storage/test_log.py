"""The segment log: append, read by offset, durability, rolling, truncation, deletion, epochs."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from raftmeta.records import codec
from raftmeta.storage.errors import InvalidAppendError, OffsetOutOfRangeError, StorageError
from raftmeta.storage.log import SegmentLog
from raftmeta.storage.segment import Segment

OpenLog = Callable[..., SegmentLog]
Records = Callable[[int, int], list[bytes]]


def fill(log: SegmentLog, make_records: Records, batches: int, *, per_batch: int = 3, epoch_every: int = 10) -> None:
    for i in range(batches):
        log.append_batch(1 + i // epoch_every, make_records(log.log_end_offset, per_batch), 1000 + i)


def all_batches(log: SegmentLog) -> list[codec.Batch]:
    return list(log.iter_batches(log.log_start_offset))


def test_empty_log(open_log: OpenLog) -> None:
    log = open_log()
    assert (log.log_start_offset, log.log_end_offset, log.durable_end_offset, log.last_epoch) == (0, 0, 0, 0)
    assert log.read(0, 1000) == b""
    assert log.epoch_end_offset(5) == (-1, -1)
    assert log.flush() == 0
    log.close()


def test_append_is_durable_only_after_flush(open_log: OpenLog, make_records: Records) -> None:
    log = open_log()
    header = log.append_batch(1, make_records(0, 4), 7)
    assert (header.base_offset, header.next_offset, header.epoch) == (0, 4, 1)
    log.append_batch(1, make_records(4, 2), 8)
    assert log.log_end_offset == 6
    assert log.durable_end_offset == 0, "nothing is durable before a flush"
    assert log.flush() == 6
    assert log.durable_end_offset == 6
    batches = all_batches(log)
    assert [(b.base_offset, b.header.record_count) for b in batches] == [(0, 4), (4, 2)]
    assert batches[1].records() == make_records(4, 2)


def test_read_returns_whole_batches_from_the_one_holding_the_offset(open_log: OpenLog, make_records: Records) -> None:
    log = open_log()
    fill(log, make_records, 40)  # offsets 0..119, 3 per batch
    for offset in (0, 1, 2, 3, 59, 100, 119):
        data = log.read(offset, 10**6)
        first = codec.check_batch(data)
        assert first.base_offset <= offset < first.next_offset
        assert list(codec.iter_batches(data))[-1].next_offset == 120
    assert log.read(120, 100) == b""
    with pytest.raises(OffsetOutOfRangeError):
        log.read(121, 100)


def test_read_respects_max_bytes_but_returns_at_least_one_batch(open_log: OpenLog, make_records: Records) -> None:
    log = open_log()
    fill(log, make_records, 5)
    size = codec.check_batch(log.read(0, 1)).size_bytes
    assert len(log.read(0, 1)) == size, "one whole batch even when it exceeds max_bytes"
    assert len(log.read(0, 2 * size + 1)) == 2 * size
    assert len(log.read(0, 2 * size)) == 2 * size


def test_read_upto_offset_stops_before_batches_crossing_it(open_log: OpenLog, make_records: Records) -> None:
    log = open_log()
    fill(log, make_records, 5)  # batches [0,3) [3,6) [6,9) ...
    batches = list(codec.iter_batches(log.read(0, 10**6, upto_offset=7)))
    assert [b.base_offset for b in batches] == [0, 3]
    assert log.read(6, 10**6, upto_offset=7) == b""


def test_reads_span_segments_and_roll_writes_indexes(open_log: OpenLog, make_records: Records, tmp_path: Path) -> None:
    log = open_log(segment_bytes=2048)
    fill(log, make_records, 100)
    files = log.segment_files()
    assert len(files) > 3
    # every sealed segment was fsynced at roll and has its index; the active one does not
    for f in files[:-1]:
        assert f.with_suffix(".index").is_file()
    assert not files[-1].with_suffix(".index").exists()
    assert log.durable_end_offset >= int(files[-1].stem), "rolling made the sealed segments durable"
    batches = all_batches(log)
    assert [b.base_offset for b in batches] == list(range(0, 300, 3))


def test_finding_an_offset_does_not_scan_from_the_start(
    open_log: OpenLog, make_records: Records, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = open_log(segment_bytes=1024 * 1024, index_interval_bytes=512)
    fill(log, make_records, 2000)  # one big segment
    read_bytes: list[int] = []
    original = Segment.read

    def counting_read(self: Segment, position: int, size: int) -> bytes:
        data = original(self, position, size)
        read_bytes.append(len(data))
        return data

    monkeypatch.setattr(Segment, "read", counting_read)
    data = log.read(5000, 1)
    assert codec.check_batch(data).base_offset <= 5000 < codec.check_batch(data).next_offset
    segment_size = log.segment_files()[0].stat().st_size
    assert sum(read_bytes) < 64 * 1024 < segment_size, "the sparse index bounds the walk"


def test_append_validates_and_writes_nothing_on_refusal(open_log: OpenLog, make_records: Records) -> None:
    log = open_log()
    log.append_batch(2, make_records(0, 2), 0)
    good = codec.encode_batch(2, 2, make_records(2, 1), 0)
    gap = codec.encode_batch(5, 2, make_records(5, 1), 0)
    old_epoch = codec.encode_batch(2, 1, make_records(2, 1), 0)
    bad_crc = bytearray(good)
    bad_crc[-1] ^= 0x40
    for refused, match in ((gap, "starts at offset 5"), (old_epoch, "epoch 1"), (bytes(bad_crc), "CRC32C")):
        with pytest.raises(InvalidAppendError, match=match):
            log.append(refused)
        with pytest.raises(InvalidAppendError):
            log.append(good + refused)  # all-or-nothing for several batches
        assert log.log_end_offset == 2
    with pytest.raises(InvalidAppendError, match="nothing"):
        log.append(b"")
    assert log.segment_files()[0].stat().st_size == len(log.read(0, 10**6))
    assert log.append(good + codec.encode_batch(3, 3, make_records(3, 2), 0)) == 5


def test_follower_stores_leader_bytes_exactly(open_log: OpenLog, make_records: Records, tmp_path: Path) -> None:
    leader = open_log()
    fill(leader, make_records, 30)
    follower = SegmentLog.open(tmp_path / "follower", segment_bytes=4096)
    offset = 0
    while offset < leader.log_end_offset:
        chunk = leader.read(offset, 700)
        offset = follower.append(chunk)
    assert follower.read(0, 10**6) == leader.read(0, 10**6)


def test_epoch_end_offset_is_kafkas_end_offset_for(open_log: OpenLog, make_records: Records) -> None:
    log = open_log()
    for epoch, count in ((1, 4), (1, 2), (3, 5), (6, 1)):
        log.append_batch(epoch, make_records(log.log_end_offset, count), 0)
    # epoch 1: [0, 6), epoch 3: [6, 11), epoch 6: [11, 12)
    assert log.epoch_end_offset(0) == (-1, -1)
    assert log.epoch_end_offset(1) == (1, 6)
    assert log.epoch_end_offset(2) == (1, 6)
    assert log.epoch_end_offset(3) == (3, 11)
    assert log.epoch_end_offset(5) == (3, 11)
    assert log.epoch_end_offset(6) == (6, 12)
    assert log.epoch_end_offset(9) == (6, 12)
    assert log.last_epoch == 6
    assert log.epoch_for_offset(7) == 3


def test_truncate_inside_a_batch_goes_to_its_start(open_log: OpenLog, make_records: Records) -> None:
    log = open_log()
    fill(log, make_records, 10, epoch_every=4)  # epochs 1,1,1,1,2,2,2,2,3,3
    assert log.truncate_to(16) == 15
    assert log.log_end_offset == log.durable_end_offset == 15
    assert log.last_epoch == 2
    assert log.epoch_end_offset(3) == (2, 15)
    assert log.truncate_to(99) == 15, "truncating at or beyond the end is a no-op"
    assert log.truncate_to(12) == 12
    log.append_batch(5, make_records(12, 1), 0)
    assert [b.base_offset for b in all_batches(log)] == [0, 3, 6, 9, 12]
    assert log.epoch_end_offset(4) == (1, 12), "epoch 2 began at 12 and was truncated away"


def test_truncate_across_segments_deletes_later_files(open_log: OpenLog, make_records: Records) -> None:
    log = open_log(segment_bytes=2048)
    fill(log, make_records, 100)
    files = log.segment_files()
    target = int(files[1].stem)  # exactly the start of the second segment
    assert log.truncate_to(target) == target
    assert log.segment_files() == files[:1]
    assert not files[0].with_suffix(".index").exists(), "the first segment is active again"
    for f in files[1:]:
        assert not f.exists()
    log.append_batch(20, make_records(target, 2), 0)
    log.close()
    reopened = SegmentLog.open(files[0].parent, segment_bytes=2048)
    assert reopened.log_end_offset == target + 2
    assert reopened.last_epoch == 20
    with pytest.raises(OffsetOutOfRangeError):
        reopened.delete_before(target + 3)


def test_delete_before_removes_whole_segments_only(open_log: OpenLog, make_records: Records) -> None:
    log = open_log(segment_bytes=2048)
    fill(log, make_records, 100)
    files = log.segment_files()
    cut = int(files[2].stem) + 1  # inside the third segment
    assert log.delete_before(cut) == int(files[2].stem)
    assert log.segment_files() == files[2:]
    assert log.log_start_offset == int(files[2].stem)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    assert log.epoch_end_offset(1)[0] == 1 or log.epoch_end_offset(1) == (-1, -1)


def test_delete_before_the_end_keeps_an_empty_active_segment(open_log: OpenLog, make_records: Records) -> None:
    log = open_log()
    fill(log, make_records, 8, epoch_every=100)
    assert log.delete_before(24) == 24
    assert (log.log_start_offset, log.log_end_offset, log.last_epoch) == (24, 24, 1)
    assert log.epoch_end_offset(1) == (1, 24)
    log.append_batch(2, make_records(24, 1), 0)
    assert log.epoch_end_offset(1) == (1, 24)


def test_reset_to_restarts_the_log_after_a_snapshot(open_log: OpenLog, make_records: Records) -> None:
    log = open_log()
    fill(log, make_records, 5)
    log.reset_to(1000, 7)
    assert (log.log_start_offset, log.log_end_offset, log.durable_end_offset, log.last_epoch) == (1000, 1000, 1000, 7)
    assert log.epoch_end_offset(7) == (7, 1000)
    assert log.epoch_end_offset(3) == (-1, -1)
    log.append_batch(8, make_records(1000, 2), 0)
    assert log.epoch_end_offset(7) == (7, 1000)
    assert [f.name for f in log.segment_files()] == ["00000000000000001000.log"]


def test_a_tail_older_than_the_snapshot_epoch_is_dropped_on_open(open_log: OpenLog, make_records: Records) -> None:
    """Kafka's truncateToLatestSnapshot: a snapshot (9, epoch 4) above records of epoch 1 means
    those records are a stale tail (a crash undid the truncation the snapshot came after)."""
    log = open_log()
    fill(log, make_records, 5)  # offsets 0..14, epoch 1
    log.flush()
    log.close()
    reopened = open_log(snapshot_id=(9, 4))
    assert (reopened.log_start_offset, reopened.log_end_offset, reopened.last_epoch) == (9, 9, 4)
    reopened.close()
    same_epoch = open_log(snapshot_id=(9, 1))  # a continuing tail of the same epoch stays
    assert same_epoch.log_end_offset == 9, "the reset above emptied the log"
    same_epoch.append_batch(4, make_records(9, 3), 0)
    same_epoch.flush()
    same_epoch.close()
    kept = open_log(snapshot_id=(9, 4))
    assert (kept.log_end_offset, kept.last_epoch) == (12, 4)
    kept.close()


def test_clean_reopen_uses_indexes_and_matches(open_log: OpenLog, make_records: Records) -> None:
    log = open_log(segment_bytes=2048)
    fill(log, make_records, 60)
    before = log.read(0, 10**7)
    epochs = [log.epoch_end_offset(e) for e in range(8)]
    log.close()
    with pytest.raises(StorageError, match="closed"):
        log.append_batch(9, [b"x"], 0)
    reopened = open_log(segment_bytes=2048)
    assert reopened.read(0, 10**7) == before
    assert [reopened.epoch_end_offset(e) for e in range(8)] == epochs
    assert reopened.durable_end_offset == reopened.log_end_offset == 180
    active = reopened.segment_files()[-1]
    assert not active.with_suffix(".index").exists(), "the active segment's index is dropped once reopened"


def test_reopen_after_a_crash_keeps_flushed_batches(
    open_log: OpenLog, make_records: Records, crash: Callable[[SegmentLog], None]
) -> None:
    log = open_log(segment_bytes=2048)
    fill(log, make_records, 50)
    log.flush()
    expected = log.read(0, 10**7)
    crash(log)
    reopened = open_log(segment_bytes=2048)
    assert reopened.read(0, 10**7) == expected


def test_concurrent_readers_see_whole_batches(open_log: OpenLog, make_records: Records) -> None:
    log = open_log(segment_bytes=2048)
    stop = threading.Event()
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            while not stop.is_set():
                start = log.log_start_offset
                try:
                    data = log.read(start, 5000)
                except OffsetOutOfRangeError:
                    continue  # the writer deleted the start meanwhile
                for batch in codec.iter_batches(data):
                    assert batch.records()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    for round_ in range(30):
        fill(log, make_records, 10)
        log.flush()
        if round_ % 5 == 4:
            log.truncate_to(log.log_end_offset - 7)
        if round_ % 7 == 6:
            log.delete_before(log.log_end_offset - 40)
    stop.set()
    for t in threads:
        t.join()
    assert errors == []


def test_a_failed_write_leaves_no_partial_batch(
    open_log: OpenLog, make_records: Records, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = open_log()
    log.append_batch(1, make_records(0, 2), 0)
    size_before = log.segment_files()[0].stat().st_size
    original = Segment.write_at_end

    def disk_full(self: Segment, data: bytes | memoryview) -> None:
        original(self, bytes(data)[: len(data) // 2])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Segment, "write_at_end", disk_full)
    with pytest.raises(OSError, match="No space"):
        log.append_batch(1, make_records(2, 3), 0)
    assert log.log_end_offset == 2
    assert log.segment_files()[0].stat().st_size == size_before
    monkeypatch.setattr(Segment, "write_at_end", original)
    log.append_batch(1, make_records(2, 3), 0)
    assert [b.base_offset for b in all_batches(log)] == [0, 2]
