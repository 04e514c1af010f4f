"""The record batch format: pure encode/decode, shared by the node, the consensus core,
``raftmeta log dump``, the simulator and the Spark jobs. docs/log-format.md has the byte table.

A batch is the unit of replication: the records of one client request travel as one batch, a
follower stores the leader's batch byte for byte (same base offset, epoch, bytes and CRC), so
committed batches are identical across nodes and can be compared by hash without decoding.

Layout (big-endian, as Kafka's RecordBatch v2 starts; header 35 bytes)::

    0  base_offset        int64   offset of the first record
    8  batch_length       int32   bytes after this field (so a batch is 12 + batch_length bytes)
    12 epoch              int32   leader epoch that appended the batch
    16 magic              int8    format version, 1
    17 crc                uint32  CRC32C (Castagnoli) of bytes [21, end of batch)
    21 attributes         int16   bit 0: control batch (LeaderChangeRecord, snapshot framing)
    23 record_count       int32   >= 1
    27 append_timestamp   int64   ms since the Unix epoch, the leader's clock at append
    35 records            record_count x (uint32 length, MetadataRecord bytes)

The CRC covers everything after itself, so base_offset, length and epoch are not covered --
exactly as Kafka does, so a leader could in principle re-stamp them; we never do, and the
decoder still cross-checks length against the records it finds.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import google_crc32c

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

MAGIC = 1
HEADER = struct.Struct(">qiibIhiq")
HEADER_SIZE = HEADER.size  # 35
LENGTH_PREFIX = struct.Struct(">qi")  # base_offset, batch_length: enough to find the next batch
LOG_OVERHEAD = LENGTH_PREFIX.size  # 12: bytes before batch_length's count starts
CRC_START = 21
RECORD_LENGTH = struct.Struct(">I")
_pack_length = RECORD_LENGTH.pack
ATTR_CONTROL = 0x1
# A hard bound so a corrupt length field cannot make a reader allocate gigabytes.
BATCH_BYTES_MAX = 64 * 1024 * 1024


class CorruptBatchError(ValueError):
    """A batch failed a structural or CRC check.

    ``position`` is the byte position of the batch within the buffer or file being decoded;
    ``base_offset`` is the log offset it claims (-1 when even that could not be read).
    """

    def __init__(self, reason: str, *, position: int, base_offset: int = -1) -> None:
        where = f"at byte {position}" + (f" (base offset {base_offset})" if base_offset >= 0 else "")
        super().__init__(f"corrupt batch {where}: {reason}")
        self.reason = reason
        self.position = position
        self.base_offset = base_offset


class TruncatedBatchError(CorruptBatchError):
    """The buffer ends inside a batch: a torn write at the tail of a log, or a short read."""


@dataclass(frozen=True, slots=True)
class BatchHeader:
    base_offset: int
    batch_length: int
    epoch: int
    magic: int
    crc: int
    attributes: int
    record_count: int
    append_timestamp_ms: int

    @property
    def size_bytes(self) -> int:
        """Total size of the batch on disk, header included."""
        return LOG_OVERHEAD + self.batch_length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.record_count - 1

    @property
    def next_offset(self) -> int:
        """The offset the batch after this one starts at."""
        return self.base_offset + self.record_count

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)


@dataclass(frozen=True, slots=True)
class Batch:
    """One decoded batch: its header and its exact bytes (header included)."""

    header: BatchHeader
    data: bytes

    @property
    def base_offset(self) -> int:
        return self.header.base_offset

    @property
    def epoch(self) -> int:
        return self.header.epoch

    @property
    def next_offset(self) -> int:
        return self.header.next_offset

    def records(self) -> list[bytes]:
        """The serialized MetadataRecords of the batch, in offset order."""
        return split_records(self.data, self.header)


def crc32c(data: bytes | memoryview) -> int:
    return int(google_crc32c.value(bytes(data)))


def encode_batch(
    base_offset: int,
    epoch: int,
    records: Sequence[bytes],
    append_timestamp_ms: int,
    *,
    control: bool = False,
) -> bytes:
    """Frame ``records`` (serialized MetadataRecords) as one batch."""
    if not records:
        raise ValueError("a batch holds at least one record")
    return encode_framed_batch(
        base_offset, epoch, frame_records(records), len(records), append_timestamp_ms, control=control
    )


def frame_records(records: Sequence[bytes]) -> bytes:
    """``records`` as a batch's body holds them: each after its length (``RECORD_LENGTH``)."""
    # Length prefixes and records interleaved by slice assignment, the prefixes from a table
    # through C-level maps: a batch holds up to thousands of records (a create, a snapshot), and
    # this is ~0.05 us a record, where packing each length in a Python loop took ~0.07.
    parts: list[bytes] = [b""] * (2 * len(records))
    parts[::2] = map(_LENGTH_PREFIXES.__getitem__, map(len, records))
    parts[1::2] = records
    return b"".join(parts)


def frame_record(record: bytes) -> bytes:
    """One record as a batch's body holds it (:func:`frame_records` of one)."""
    return _LENGTH_PREFIXES[len(record)] + record


class _LengthPrefixes(dict[int, bytes]):
    """Record length -> its packed ``RECORD_LENGTH`` prefix, the common lengths kept."""

    def __missing__(self, length: int) -> bytes:
        prefix = _pack_length(length)
        if length < 4096:
            self[length] = prefix
        return prefix


_LENGTH_PREFIXES = _LengthPrefixes()


def encode_framed_batch(
    base_offset: int,
    epoch: int,
    body: bytes,
    record_count: int,
    append_timestamp_ms: int,
    *,
    control: bool = False,
) -> bytes:
    """One batch of ``record_count`` records already framed as ``body`` (:func:`frame_records`,
    or pieces of such bodies joined)."""
    if record_count < 1:
        raise ValueError("a batch holds at least one record")
    if base_offset < 0 or epoch < 0:
        raise ValueError(f"base_offset and epoch must be >= 0, got {base_offset}, {epoch}")
    attributes = ATTR_CONTROL if control else 0
    batch_length = HEADER_SIZE - LOG_OVERHEAD + len(body)
    if batch_length + LOG_OVERHEAD > BATCH_BYTES_MAX:
        raise ValueError(f"batch of {batch_length} bytes exceeds BATCH_BYTES_MAX={BATCH_BYTES_MAX}")
    tail = struct.pack(">hiq", attributes, record_count, append_timestamp_ms) + body
    crc = google_crc32c.value(tail)
    return struct.pack(">qiibI", base_offset, batch_length, epoch, MAGIC, crc) + tail


class FramedRecords(NamedTuple):
    """``record_count`` records framed as a batch body holds them (:func:`frame_records`): a run of
    records that goes into a batch as one piece."""

    body: bytes
    record_count: int

    @classmethod
    def of(cls, records: Sequence[bytes]) -> FramedRecords:
        return cls(frame_records(records), len(records))

    def records(self) -> list[bytes]:
        """The records, unframed."""
        return [bytes(record) for record, _ in self._walk()]

    def pieces(self, max_bytes: int) -> Iterator[FramedRecords]:
        """The run cut between records into pieces of at most ``max_bytes`` (a record longer than
        that is a piece by itself); the run itself when it fits."""
        if len(self.body) <= max_bytes:
            yield self
            return
        start = count = previous = 0
        for _, end in self._walk():
            if count and end - start > max_bytes:
                yield FramedRecords(self.body[start:previous], count)
                start, count = previous, 0
            count += 1
            previous = end
        yield FramedRecords(self.body[start:], count)

    def _walk(self) -> Iterator[tuple[memoryview, int]]:
        """Each record and where its framing ends in ``body``."""
        view = memoryview(self.body)
        unpack = RECORD_LENGTH.unpack_from
        position = 0
        for _ in range(self.record_count):
            start = position + RECORD_LENGTH.size
            try:
                position = start + unpack(view, position)[0]
            except struct.error:
                position = -1
            if not 0 <= position <= len(view):
                raise ValueError(f"framed records: a record's length runs past the run's {len(view)} bytes")
            yield view[start:position], position
        if position != len(view):
            raise ValueError(f"framed records: {self.record_count} records end at byte {position} of {len(view)}")


def decode_header(buf: bytes | memoryview, position: int = 0) -> BatchHeader:
    """Read and sanity-check the header at ``position`` (no CRC check: see :func:`check_batch`)."""
    available = len(buf) - position
    if available < LOG_OVERHEAD:
        raise TruncatedBatchError(f"{available} bytes left, less than the 12-byte length prefix", position=position)
    base_offset, batch_length = LENGTH_PREFIX.unpack_from(buf, position)
    if batch_length < HEADER_SIZE - LOG_OVERHEAD or batch_length + LOG_OVERHEAD > BATCH_BYTES_MAX:
        raise CorruptBatchError(f"batch_length {batch_length} out of range", position=position, base_offset=base_offset)
    if available < HEADER_SIZE:
        raise TruncatedBatchError(
            f"{available} bytes left, less than the {HEADER_SIZE}-byte header",
            position=position,
            base_offset=base_offset,
        )
    header = BatchHeader(*HEADER.unpack_from(buf, position))
    if header.magic != MAGIC:
        raise CorruptBatchError(f"magic {header.magic}, expected {MAGIC}", position=position, base_offset=base_offset)
    if header.record_count < 1:
        raise CorruptBatchError(f"record_count {header.record_count} < 1", position=position, base_offset=base_offset)
    if base_offset < 0 or header.epoch < 0:
        raise CorruptBatchError("negative base offset or epoch", position=position, base_offset=base_offset)
    if available < header.size_bytes:
        raise TruncatedBatchError(
            f"batch needs {header.size_bytes} bytes, only {available} left",
            position=position,
            base_offset=base_offset,
        )
    return header


def check_batch(buf: bytes | memoryview, position: int = 0) -> BatchHeader:
    """Decode the header at ``position`` and verify the CRC; raise CorruptBatchError if bad."""
    header = decode_header(buf, position)
    problem = crc_mismatch(buf, header, position)
    if problem is not None:
        raise CorruptBatchError(problem, position=position, base_offset=header.base_offset)
    return header


def crc_mismatch(buf: bytes | memoryview, header: BatchHeader, position: int = 0) -> str | None:
    """Why the batch at ``position`` (whose ``header`` is read) fails its CRC32C, or None if it
    passes: the CRC rule of every reader (:func:`check_batch`, raftmeta/records/walk.py)."""
    end = position + header.size_bytes
    covered = buf[position + CRC_START : end]
    actual = google_crc32c.value(covered if isinstance(covered, bytes) else bytes(covered))
    if actual == header.crc:
        return None
    return f"CRC32C mismatch (stored {header.crc:#010x}, computed {actual:#010x})"


def _framing_error(header: BatchHeader, position: int, reason: str) -> CorruptBatchError:
    """What split_records and check_records raise when the record framing and the header disagree."""
    return CorruptBatchError(reason, position=position, base_offset=header.base_offset)


def _trailing(header: BatchHeader, position: int, extra: int) -> CorruptBatchError:
    return _framing_error(header, position, f"{extra} trailing bytes after {header.record_count} records")


_PREFIX_PAST_END = "record length prefix runs past the batch"
_RECORD_PAST_END = "record runs past the batch"


def _framing_error_of(data: bytes | memoryview, header: BatchHeader, position: int) -> CorruptBatchError:
    """The first place where the records' length prefixes and the header disagree, read record by
    record: the rule that :func:`split_records` and :func:`check_records` enforce. Called once
    their own loop (no check per record) did not end exactly at the batch's end."""
    pos = position + HEADER_SIZE
    end = position + header.size_bytes
    unpack = RECORD_LENGTH.unpack_from
    for _ in range(header.record_count):
        if pos + 4 > end:
            return _framing_error(header, position, _PREFIX_PAST_END)
        pos += 4 + unpack(data, pos)[0]
        if pos > end:
            return _framing_error(header, position, _RECORD_PAST_END)
    if pos != end:
        return _trailing(header, position, end - pos)
    return _framing_error(header, position, "record framing disagrees with the batch")  # unreachable


def _records_end(data: bytes | memoryview, header: BatchHeader, position: int) -> int:
    """Where the batch's records end by their length prefixes, -1 if a prefix lies past ``data``."""
    pos = position + HEADER_SIZE
    unpack = RECORD_LENGTH.unpack_from
    try:
        for _ in range(header.record_count):
            pos += 4 + unpack(data, pos)[0]
    except struct.error:
        return -1
    return pos


def split_records(data: bytes | memoryview, header: BatchHeader, position: int = 0) -> list[bytes]:
    """The record payloads of the batch at ``position``; checks the count and length agree.

    Lengths are unsigned, so positions only grow: records that end exactly at the batch's end
    all lie inside it, and one check after the loop is the check of every record (a third less
    time than checking each, on a follower's hottest path). Anything else is refused with the
    first disagreement (:func:`_framing_error_of`)."""
    pos = position + HEADER_SIZE
    end = position + header.size_bytes
    out: list[bytes] = []
    append = out.append
    unpack = RECORD_LENGTH.unpack_from
    try:
        if isinstance(data, bytes):
            for _ in range(header.record_count):
                start = pos + 4
                pos = start + unpack(data, pos)[0]
                append(data[start:pos])
        else:
            for _ in range(header.record_count):
                start = pos + 4
                pos = start + unpack(data, pos)[0]
                append(bytes(data[start:pos]))
    except struct.error:  # a length prefix past the end of ``data``
        pos = -1
    if pos != end:
        raise _framing_error_of(data, header, position)
    return out


def check_records(data: bytes | memoryview, header: BatchHeader, position: int = 0) -> int:
    """:func:`split_records`' checks without making the records: the record count (checking a
    batch that is not read, as a snapshot just written is: no copies)."""
    if _records_end(data, header, position) != position + header.size_bytes:
        raise _framing_error_of(data, header, position)
    return header.record_count


def iter_batches(buf: bytes | memoryview, *, verify_crc: bool = True, start_position: int = 0) -> Iterator[Batch]:
    """Yield every batch in ``buf``; raise CorruptBatchError / TruncatedBatchError at the first bad one.

    ``start_position`` is added to reported positions (the buffer's offset within its file).
    """
    pos = 0
    size = len(buf)
    while pos < size:
        try:
            header = check_batch(buf, pos) if verify_crc else decode_header(buf, pos)
        except CorruptBatchError as exc:
            exc_type = type(exc)
            raise exc_type(exc.reason, position=exc.position + start_position, base_offset=exc.base_offset) from None
        end = pos + header.size_bytes
        yield Batch(header, bytes(buf[pos:end]))
        pos = end


def scan_valid_prefix(
    buf: bytes | memoryview,
) -> tuple[list[BatchHeader], int, CorruptBatchError | None]:
    """Headers of the longest valid prefix of ``buf``, the byte length of that prefix, and the
    error that stopped the scan (None if the whole buffer is valid). Used by recovery."""
    headers: list[BatchHeader] = []
    pos = 0
    size = len(buf)
    while pos < size:
        try:
            header = check_batch(buf, pos)
        except CorruptBatchError as exc:
            return headers, pos, exc
        headers.append(header)
        pos += header.size_bytes
    return headers, pos, None
