"""Bugs `raftmeta fuzz --target decoder` found in reading sealed segments, each pinned by the
smallest damage that showed it.

A sealed segment is not rescanned when the log opens (its index says what it holds), so reads
are where damage to it shows. Reads checked the CRC and nothing else the scan checks, and so a
header field the CRC does not cover, or one edited with its CRC recomputed, made a read return
nothing, skip batches, return them out of order, or raise a bare CorruptBatchError that names
neither the file nor the offset. Every such read now raises LogCorruptionError at the damaged
batch, naming the file, the byte and the offset that should be there.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from raftmeta.records import codec
from raftmeta.storage.errors import LogCorruptionError
from raftmeta.storage.log import SegmentLog
from raftmeta.storage.segment import log_file_name
from tests.storage.conftest import records_for

SEGMENT_BYTES = 1024


def _sealed_log(directory: Path) -> list[bytes]:
    """Six batches of 3 records (offsets 0..17) in segments of two batches each."""
    batches: list[bytes] = []
    with SegmentLog.open(directory, segment_bytes=SEGMENT_BYTES) as log:
        for i in range(6):
            data = codec.encode_batch(3 * i, 1 + i // 3, [*records_for(3 * i, 2), b"\x00" * 350], 1000 + i)
            log.append(data)
            batches.append(data)
    assert (directory / log_file_name(6)).exists(), "the first segment holds batches 0 and 1"
    return batches


def _edit(path: Path, position: int, fmt: str, value: int, *, fix_crc: bool, batch_at: int) -> None:
    data = bytearray(path.read_bytes())
    struct.pack_into(fmt, data, position, value)
    if fix_crc:
        (length,) = struct.unpack_from(">i", data, batch_at + 8)
        end = batch_at + codec.LOG_OVERHEAD + length
        struct.pack_into(">I", data, batch_at + 17, codec.crc32c(bytes(data[batch_at + codec.CRC_START : end])))
    path.write_bytes(bytes(data))


def _read_all(directory: Path) -> list[codec.Batch]:
    with SegmentLog.open(directory, segment_bytes=SEGMENT_BYTES) as log:
        return list(log.iter_batches(0))


Damage = Callable[[Path, list[bytes]], tuple[int, int]]  # -> (byte, offset) the error must name


def _base_offset_of_first(segment: Path, batches: list[bytes]) -> tuple[int, int]:
    # Not covered by the CRC. Before: the read took the batch for one beyond the log and
    # returned nothing at all -- a node would have started with an empty log.
    _edit(segment, 0, ">q", 1 << 40, fix_crc=False, batch_at=0)
    return 0, 0


def _base_offset_lower(segment: Path, batches: list[bytes]) -> tuple[int, int]:
    # Before: batch 0 came back as offsets 0..2 again after itself: out of order.
    second = len(batches[0])
    _edit(segment, second, ">q", 0, fix_crc=False, batch_at=second)
    return second, 3


def _count_shrunk_crc_fixed(segment: Path, batches: list[bytes]) -> tuple[int, int]:
    # Before: the read went on at offset 4 in the next segment, which starts at 6: offsets 4 and
    # 5 were silently missing.
    second = len(batches[0])
    _edit(segment, second + 23, ">i", 1, fix_crc=True, batch_at=second)
    return second, 3


def _count_grown_crc_fixed(segment: Path, batches: list[bytes]) -> tuple[int, int]:
    # Before: the batch seemed to end beyond the log, so the read stopped there: a short log.
    _edit(segment, 23, ">i", 1000, fix_crc=True, batch_at=0)
    return 0, 0


def _negative_epoch(segment: Path, batches: list[bytes]) -> tuple[int, int]:
    # Before: a bare CorruptBatchError ("at byte 0") from re-decoding the read's buffer.
    second = len(batches[0])
    _edit(segment, second + 12, ">i", -5, fix_crc=False, batch_at=second)
    return second, 3


def _other_epoch(segment: Path, batches: list[bytes]) -> tuple[int, int]:
    # Not covered by the CRC. Before: returned as written there, disagreeing with the log's
    # epoch index (and with what the node had reported to the leader).
    _edit(segment, 12, ">i", 7, fix_crc=False, batch_at=0)
    return 0, 0


@pytest.mark.parametrize(
    "damage",
    [
        _base_offset_of_first,
        _base_offset_lower,
        _count_shrunk_crc_fixed,
        _count_grown_crc_fixed,
        _negative_epoch,
        _other_epoch,
    ],
)
def test_damage_in_a_sealed_segment_is_reported_where_it_is(tmp_path: Path, damage: Damage) -> None:
    directory = tmp_path / "log"
    batches = _sealed_log(directory)
    segment = directory / log_file_name(0)
    position, offset = damage(segment, batches)
    with pytest.raises(LogCorruptionError) as caught:
        _read_all(directory)
    error = caught.value
    assert (error.path, error.position, error.offset) == (segment, position, offset), str(error)
    assert f"{segment}: corrupt log data at byte {position} (offset {offset})" in str(error)


def test_an_undamaged_sealed_log_reads_back_whole(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    batches = _sealed_log(directory)
    assert [b.data for b in _read_all(directory)] == batches
    with SegmentLog.open(directory, segment_bytes=SEGMENT_BYTES) as log:
        # Reads from the middle of a batch, of a segment, and up to a bound that cuts a batch.
        assert [b.base_offset for b in log.iter_batches(4)] == [3, 6, 9, 12, 15]
        assert [b.base_offset for b in log.iter_batches(0, upto_offset=10)] == [0, 3, 6]
