"""The one walk over a file's batches, pure: it takes a file's bytes (a segment, a snapshot) and
does no IO -- opening and reading the files stays in the drivers (raftmeta/storage, the Spark
jobs' data source).

Three walks, one rule each:

- :func:`walk_batches`, the read-only walk of ``raftmeta log dump``, the fuzz log check and the
  Spark jobs' reader: every batch with its CRC verdict, and every piece of damage as a
  :class:`Damage` (byte position, the offset expected there, why). It goes on where it safely
  can -- past a batch whose CRC fails but whose length is plausible -- and stops where a length
  cannot be trusted. The caller names the file.
- :func:`intact_batch_size` / :func:`find_intact_batches`, recovery's questions: is the batch
  here whole and CRC-clean, and which intact batches lie past damage (docs/storage.md, "Damaged
  disk"). :func:`peek_intact` is the check itself, shared with recovery's scan of a segment.
- :func:`position_of` / :func:`next_offset_after`, walks of the length headers alone (no CRC),
  to find where a batch starts or where the bytes end.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import google_crc32c

from raftmeta.records import codec
from raftmeta.records.codec import CRC_START, LOG_OVERHEAD, BatchHeader, CorruptBatchError, TruncatedBatchError

if TYPE_CHECKING:
    from collections.abc import Iterator

# Enough bytes to see the base offset, length, epoch, magic, CRC, attributes and record count:
# the fixed-layout fields hot paths read without building a BatchHeader.
PEEK = struct.Struct(">qiibIhi")
PEEK_SIZE = PEEK.size  # 27
MIN_BATCH_LENGTH = codec.HEADER_SIZE - LOG_OVERHEAD
MAGIC_POSITION = 16  # byte of the magic within a batch
MAGIC_BYTE = bytes([codec.MAGIC])


class FoundBatch(NamedTuple):
    """One batch found by :func:`walk_batches`; ``crc_ok`` False means its bytes do not match its CRC.
    (A tuple: made once per batch on the Spark reader's path, where a frozen dataclass's
    construction cost a third of the walk's time per batch.)"""

    position: int
    header: BatchHeader
    crc_ok: bool
    data: bytes

    def records(self) -> list[bytes]:
        return codec.split_records(self.data, self.header)


@dataclass(frozen=True, slots=True)
class Damage:
    """Damage found by :func:`walk_batches` at byte ``position``.

    ``offset``: the offset expected there (-1 unknown). ``claimed_offset``: the base offset the
    bad bytes claim (-1 when even that could not be read). ``kind``: ``unreadable`` (the header
    or length cannot be trusted: the walk stops here), ``crc`` (the batch's bytes do not match its
    CRC; the batch is still reported, with ``crc_ok`` False) or ``offset`` (the batch does not
    start at the offset the one before it ends at). ``truncated``: the bytes end inside a batch.
    """

    position: int
    offset: int
    reason: str
    kind: str
    claimed_offset: int = -1
    truncated: bool = False

    def message(self) -> str:
        """The damage as one line naming the byte position and the offset (no file name)."""
        return str(CorruptBatchError(self.reason, position=self.position, base_offset=self.claimed_offset))


def walk_batches(
    data: bytes, *, first_offset: int = -1, from_offset: int = 0, start: int = 0, end: int | None = None
) -> Iterator[FoundBatch | Damage]:
    """Every batch of ``data`` (a segment's or a snapshot's bytes) and every piece of damage found.

    ``first_offset``: the offset the bytes should start at (-1: unknown; each batch after the
    first is still checked to start where the one before it ends).
    Batches wholly below ``from_offset`` are not yielded (their damage is). Only batches that
    start in ``[start, end)`` are looked at; the ones before are walked by their length headers
    alone (no CRC), which is how a split of a segment finds its first batch.
    """
    pos = 0
    expected = first_offset
    stop = len(data) if end is None else min(end, len(data))
    decode_header = codec.decode_header
    crc_value = google_crc32c.value
    while pos < stop:
        try:
            header = decode_header(data, pos)
        except CorruptBatchError as exc:
            if pos >= start:
                yield Damage(
                    pos,
                    expected,
                    exc.reason,
                    "unreadable",
                    exc.base_offset,
                    isinstance(exc, TruncatedBatchError),
                )
            return  # the length cannot be trusted: nothing after this point can be found reliably
        batch_end = pos + header.size_bytes
        if pos < start:
            expected = header.next_offset
            pos = batch_end
            continue
        batch = data[pos:batch_end]
        crc_ok = crc_value(batch[CRC_START:]) == header.crc
        if not crc_ok:
            problem = codec.crc_mismatch(batch, header)
            yield Damage(pos, header.base_offset, problem or "CRC32C mismatch", "crc", header.base_offset)
        if expected >= 0 and header.base_offset != expected:
            yield Damage(
                pos,
                expected,
                f"batch starts at offset {header.base_offset}, expected {expected}",
                "offset",
                header.base_offset,
            )
        if header.next_offset > from_offset:
            yield FoundBatch(pos, header, crc_ok, batch)
        expected = header.next_offset
        pos = batch_end


def position_of(data: bytes, offset: int) -> int:
    """The byte position of the first batch of ``data`` at or after ``offset``, walking the length
    headers alone; the position of the first unreadable header when it comes first (a
    :func:`walk_batches` from there reports the damage), or ``len(data)``."""
    pos = 0
    size = len(data)
    while pos < size:
        try:
            header = codec.decode_header(data, pos)
        except CorruptBatchError:
            return pos
        if header.base_offset >= offset:
            return pos
        pos += header.size_bytes
    return pos


def next_offset_after(data: bytes) -> int:
    """The offset after the last batch of ``data`` (whole batches, as a log read returns them),
    walking the length headers alone; -1 for no bytes."""
    pos = 0
    next_offset = -1
    size = len(data)
    peek = PEEK.unpack_from
    while pos < size:
        base, length, _epoch, _magic, _crc, _attrs, count = peek(data, pos)
        if length < MIN_BATCH_LENGTH:  # damaged: never walk backwards or in place
            raise CorruptBatchError(f"batch_length {length} out of range", position=pos, base_offset=base)
        next_offset = base + count
        pos += LOG_OVERHEAD + length
    return next_offset


def peek_intact(buf: bytes, position: int, min_offset: int) -> tuple[int, int, int, int, int, int, int] | None:
    """The fixed fields of the batch at ``position`` of ``buf`` (``PEEK``'s: base offset, length,
    epoch, magic, CRC, attributes, record count) if it is intact, else None.

    Intact: the whole batch is in ``buf``, its header is plausible (magic, length within
    bounds, at least one record, epoch >= 0, base offset >= ``min_offset`` and >= 0) and its
    CRC32C matches: :func:`codec.check_batch`'s checks without building a header (recovery time
    of a segment of small batches is mostly per-batch overhead), minus the ones that need the
    batches before it (contiguity, epoch order). tests/records/test_walk.py holds the two equal.
    """
    end = len(buf)
    if position < 0 or position + PEEK_SIZE > end:
        return None
    fields = PEEK.unpack_from(buf, position)
    base, length, epoch, magic, crc, _attrs, count = fields
    size = LOG_OVERHEAD + length
    if (
        magic != codec.MAGIC
        or length < MIN_BATCH_LENGTH
        or size > codec.BATCH_BYTES_MAX
        or position + size > end
        or count < 1
        or epoch < 0
        or base < min_offset
        or base < 0
        or google_crc32c.value(buf[position + CRC_START : position + size]) != crc
    ):
        return None
    return fields


def intact_batch_size(buf: bytes, position: int, min_offset: int) -> int:
    """Size of the batch at ``position`` of ``buf`` if it is intact (:func:`peek_intact`), else 0."""
    fields = peek_intact(buf, position, min_offset)
    return 0 if fields is None else LOG_OVERHEAD + fields[1]


@dataclass(frozen=True, slots=True)
class IntactBatches:
    """Intact batches found past damage: how many, and the offsets they cover (-1: none)."""

    count: int = 0
    first_offset: int = -1  # lowest base offset among them
    last_offset: int = -1  # highest last offset among them

    def plus(self, other: IntactBatches) -> IntactBatches:
        if other.count == 0:
            return self
        if self.count == 0:
            return other
        return IntactBatches(
            self.count + other.count,
            min(self.first_offset, other.first_offset),
            max(self.last_offset, other.last_offset),
        )


def _next_candidate(buf: bytes, start: int, marker: bytes) -> int:
    """The first position >= ``start`` where a batch whose base offset's upper 4 bytes are
    ``marker`` could begin (the magic byte 16 bytes further on), or -1.

    Two ``bytes.find`` calls leapfrog each other, so a run of zeros (no magic byte) or of
    magic bytes (no marker) is skipped at the speed of ``find``, not position by position.
    """
    position = start
    while True:
        magic_at = buf.find(MAGIC_BYTE, position + MAGIC_POSITION)
        if magic_at < 0:
            return -1
        candidate = magic_at - MAGIC_POSITION
        marker_at = buf.find(marker, candidate)
        if marker_at < 0:
            return -1
        if marker_at == candidate:
            return candidate
        position = marker_at  # no candidate in [candidate, marker_at): no marker there


def find_intact_batches(buf: bytes, start: int, min_offset: int) -> IntactBatches:
    """Every intact batch (see :func:`peek_intact`) in ``buf`` from byte ``start`` on.

    After damage the next batch boundary is unknown, so the search resynchronises: it tries
    each position where a batch header could start, and from an intact batch follows the
    chain of batches after it. A candidate must have the magic byte and a base offset at or
    above ``min_offset`` whose upper 4 bytes are those of an offset the buffer can reach (a
    record takes at least 4 bytes, so the base offsets in ``buf`` stay below
    ``min_offset + len(buf)``): that marker is what ``bytes.find`` looks for, and only the
    rare position that has both gets its CRC checked. A 16 MiB segment takes a fraction of a
    second, and about a second at worst for contrived fills of markers and magic bytes.
    """
    end = len(buf)
    markers = [
        high.to_bytes(4, "big") for high in range(min_offset >> 32, ((min_offset + end) >> 32) + 1) if high < 1 << 31
    ]
    found, first, last = 0, -1, -1
    position = start
    while position < end:
        fields = peek_intact(buf, position, min_offset)
        if fields is not None:
            base, length, _epoch, _magic, _crc, _attrs, count = fields
            first = base if found == 0 else min(first, base)
            last = max(last, base + count - 1)
            found += 1
            position += LOG_OVERHEAD + length
            continue
        candidates = [c for c in (_next_candidate(buf, position + 1, m) for m in markers) if c >= 0]
        if not candidates:
            break
        position = min(candidates)
    return IntactBatches(found, first, last)
