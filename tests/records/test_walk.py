"""The one walk over a file's batches (raftmeta/records/walk.py): batches and damage located by
byte position and offset; recovery's fast intact check held equal to the codec's definition; and
the readers that use the walk (log dump's file walk, the Spark jobs' scan) seeing the same
batches and damage on the same bytes."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raftmeta.jobs import columns
from raftmeta.records import codec
from raftmeta.records.codec import CorruptBatchError
from raftmeta.records.walk import (
    Damage,
    FoundBatch,
    find_intact_batches,
    intact_batch_size,
    next_offset_after,
    peek_intact,
    position_of,
    walk_batches,
)
from raftmeta.storage.inspect import BatchEntry, Corruption, walk_file


def log_bytes(counts: list[int], *, first_offset: int = 0, epoch: int = 1) -> tuple[bytes, list[int]]:
    """Batches of ``counts`` records from ``first_offset`` on, and each batch's byte position."""
    parts: list[bytes] = []
    positions: list[int] = []
    offset = first_offset
    size = 0
    for count in counts:
        batch = codec.encode_batch(offset, epoch, [bytes([offset % 251]) * (1 + offset % 7)] * count, 1_700_000_000_000)
        positions.append(size)
        parts.append(batch)
        size += len(batch)
        offset += count
    return b"".join(parts), positions


def flip(data: bytes, position: int) -> bytes:
    buf = bytearray(data)
    buf[position] ^= 0xFF
    return bytes(buf)


def test_walk_of_a_clean_log_yields_every_batch_in_order() -> None:
    data, positions = log_bytes([1, 3, 2], first_offset=10)
    found = list(walk_batches(data, first_offset=10))
    assert all(isinstance(f, FoundBatch) and f.crc_ok for f in found)
    batches = [f for f in found if isinstance(f, FoundBatch)]
    assert [b.position for b in batches] == positions
    assert [b.header.base_offset for b in batches] == [10, 11, 14]
    assert [len(b.records()) for b in batches] == [1, 3, 2]
    assert b"".join(b.data for b in batches) == data


def test_a_crc_mismatch_is_reported_and_the_walk_goes_on() -> None:
    data, positions = log_bytes([2, 2, 2])
    damaged = flip(data, positions[1] + codec.HEADER_SIZE + 2)  # a record byte of the second batch
    found = list(walk_batches(damaged, first_offset=0))
    (damage,) = [f for f in found if isinstance(f, Damage)]
    assert (damage.kind, damage.position, damage.offset, damage.truncated) == ("crc", positions[1], 2, False)
    assert damage.reason.startswith("CRC32C mismatch (stored ")
    assert [(f.position, f.crc_ok) for f in found if isinstance(f, FoundBatch)] == [
        (positions[0], True),
        (positions[1], False),
        (positions[2], True),
    ]


def test_an_unreadable_length_ends_the_walk_naming_the_expected_offset() -> None:
    data, positions = log_bytes([2, 2, 2])
    buf = bytearray(data)
    buf[positions[1] + 8 : positions[1] + 12] = (3).to_bytes(4, "big")  # batch_length below a header's
    found = list(walk_batches(bytes(buf), first_offset=0))
    assert isinstance(found[0], FoundBatch)
    damage = found[-1]
    assert isinstance(damage, Damage)
    assert (damage.kind, damage.position, damage.offset, damage.claimed_offset) == ("unreadable", positions[1], 2, 2)
    assert damage.message() == f"corrupt batch at byte {positions[1]} (base offset 2): batch_length 3 out of range"
    assert len(found) == 2


def test_bytes_ending_inside_a_batch_are_truncated_damage() -> None:
    data, positions = log_bytes([1, 1])
    found = list(walk_batches(data[:-5], first_offset=0))
    damage = found[-1]
    assert isinstance(damage, Damage)
    assert (damage.kind, damage.position, damage.offset, damage.truncated) == ("unreadable", positions[1], 1, True)


def test_a_batch_at_the_wrong_offset_is_reported_only_when_contiguity_is_asked_for() -> None:
    data, _ = log_bytes([2, 2], first_offset=5)
    found = list(walk_batches(data, first_offset=4))
    (damage,) = [f for f in found if isinstance(f, Damage)]
    assert (damage.kind, damage.position, damage.offset, damage.claimed_offset) == ("offset", 0, 4, 5)
    assert damage.reason == "batch starts at offset 5, expected 4"
    assert not [f for f in walk_batches(data) if isinstance(f, Damage)]


def test_from_offset_and_a_byte_range_select_batches() -> None:
    data, positions = log_bytes([2, 2, 2, 2])
    from_four = [f.header.base_offset for f in walk_batches(data, from_offset=4) if isinstance(f, FoundBatch)]
    assert from_four == [4, 6]
    in_range = [
        f.position for f in walk_batches(data, start=positions[1], end=positions[3]) if isinstance(f, FoundBatch)
    ]
    assert in_range == positions[1:3]
    # Damage before ``start`` is not looked at: those batches are walked by length alone.
    damaged = flip(data, positions[0] + codec.HEADER_SIZE + 1)
    assert [f for f in walk_batches(damaged, start=positions[1]) if isinstance(f, Damage)] == []


def test_header_walks_find_positions_and_the_end_offset() -> None:
    data, positions = log_bytes([3, 1, 2], first_offset=100)
    assert position_of(data, 0) == 0
    assert position_of(data, 101) == positions[1]
    assert position_of(data, 103) == positions[1]  # the first batch at or after the offset
    assert position_of(data, 104) == positions[2]
    assert position_of(data, 106) == len(data)
    assert next_offset_after(data) == 106
    assert next_offset_after(b"") == -1


def test_next_offset_after_refuses_a_length_that_would_walk_backwards() -> None:
    data, positions = log_bytes([1, 1])
    buf = bytearray(data)
    buf[positions[1] + 8 : positions[1] + 12] = (-40).to_bytes(4, "big", signed=True)
    with pytest.raises(CorruptBatchError, match="batch_length -40 out of range"):
        next_offset_after(bytes(buf))


@st.composite
def damaged_logs(draw: st.DrawFn) -> bytes:
    counts = draw(st.lists(st.integers(1, 4), min_size=1, max_size=4))
    data, _ = log_bytes(counts, first_offset=draw(st.integers(0, 1 << 40)), epoch=draw(st.integers(0, 5)))
    buf = bytearray(data)
    for _ in range(draw(st.integers(0, 3))):
        buf[draw(st.integers(0, len(buf) - 1))] = draw(st.integers(0, 255))
    return bytes(buf[: draw(st.integers(0, len(buf)))])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(damaged_logs())
def test_the_fast_intact_check_is_the_codec_check(data: bytes) -> None:
    """Recovery's scan and damage search read fixed fields without building a header
    (:func:`peek_intact`); at every byte position it must accept exactly the batches
    :func:`codec.check_batch` accepts, with the same fields."""
    for position in range(len(data)):
        fields = peek_intact(data, position, 0)
        try:
            header = codec.check_batch(data, position)
        except CorruptBatchError:
            assert fields is None
            assert intact_batch_size(data, position, 0) == 0
            continue
        assert fields == (
            header.base_offset,
            header.batch_length,
            header.epoch,
            header.magic,
            header.crc,
            header.attributes,
            header.record_count,
        )
        assert intact_batch_size(data, position, 0) == header.size_bytes
        assert peek_intact(data, position, header.base_offset + 1) is None  # below min_offset


def test_find_intact_batches_resynchronises_after_damage() -> None:
    data, positions = log_bytes([2, 3, 1, 4], first_offset=1 << 33)
    damaged = flip(data, positions[1] + 9)  # the second batch's length: its end is lost
    found = find_intact_batches(damaged, positions[1] + 1, 1 << 33)
    assert (found.count, found.first_offset, found.last_offset) == (2, (1 << 33) + 5, (1 << 33) + 9)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(data=damaged_logs())
def test_log_dump_and_the_spark_reader_see_the_same_batches_and_damage(tmp_path: Path, data: bytes) -> None:
    """The two damage-tolerant readers of a segment -- ``log dump``'s file walk and the Spark
    jobs' scan -- are one walk: same batches, bytes and CRC verdicts, and the unreadable damage
    at the same byte."""
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    dumped = list(walk_file(path, last_segment=True))
    scanned = list(columns.scan_batches(data, path.name))
    dumped_batches = [(e.position, e.header, e.crc_ok, e.data) for e in dumped if isinstance(e, BatchEntry)]
    scanned_batches = [(r.position, r.header, r.crc_ok, r.data) for r in scanned if r.header is not None]
    assert dumped_batches == scanned_batches
    # The Spark jobs check contiguity themselves (across nodes and segments), so only the damage
    # that ends a walk is theirs to report.
    dumped_ends = [
        c.position
        for c in dumped
        if isinstance(c, Corruption) and not c.reason.startswith(("CRC32C", "batch starts at offset"))
    ]
    scanned_ends = [r.position for r in scanned if r.header is None]
    assert dumped_ends == scanned_ends
    for raw in scanned:
        if raw.header is not None and not raw.crc_ok:
            assert (
                raw.error
                == f"{path.name}: CRC32C mismatch at byte {raw.position} (base offset {raw.header.base_offset})"
            )
