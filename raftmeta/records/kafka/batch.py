"""Kafka's record batch, magic 2 (the ``__cluster_metadata`` log's and its snapshots' framing),
read and written byte for byte. Layout (big-endian; header 61 bytes)::

    0  baseOffset            int64
    8  batchLength           int32   bytes after this field
    12 partitionLeaderEpoch  int32
    16 magic                 int8    2
    17 crc                   uint32  CRC32C of bytes [21, end of batch)
    21 attributes            int16   bits 0-2 compression, 3 timestamp type, 4 transactional,
                                     5 control, 6 delete horizon
    23 lastOffsetDelta       int32
    27 baseTimestamp         int64
    35 maxTimestamp          int64
    43 producerId            int64
    51 producerEpoch         int16
    53 baseSequence          int32
    57 recordsCount          int32
    61 records

and a record: length (varint), attributes (int8), timestampDelta (varlong), offsetDelta
(varint), key and value (varint length, -1 for null, then the bytes), headers (varint count; each
a key string and a nullable value, varint-length-prefixed). Varints are zigzag, as protobuf's
sint32/sint64.

kio's record batch reader turns timestamps into datetimes truncated to the second and raises
bare ValueErrors, so it cannot give bytes back exactly nor name a position; this module reads
the varints with kio's native readers and keeps every field as it is, so that
``encode_batch(decode_batch(b)) == b``. The metadata log is never compressed (KRaft writes its
batches uncompressed); a compressed batch is refused by name, never misread.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

import google_crc32c
from kio.serial.readers import read_signed_varint, read_signed_varlong

from raftmeta.records.codec import BATCH_BYTES_MAX, CorruptBatchError, TruncatedBatchError
from raftmeta.records.wire import varint as unsigned_varint

MAGIC: Final = 2
HEADER: Final = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE: Final = HEADER.size  # 61
LOG_OVERHEAD: Final = 12  # baseOffset and batchLength: the bytes batchLength does not count
CRC_START: Final = 21
MAGIC_POSITION: Final = 16
COMPRESSION_MASK: Final = 0x07
ATTR_TRANSACTIONAL: Final = 0x10
ATTR_CONTROL: Final = 0x20
ATTR_DELETE_HORIZON: Final = 0x40
COMPRESSION_NAMES: Final = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


@dataclass(frozen=True, slots=True)
class Header:
    """A record header: a key string and a nullable value."""

    key: str
    value: bytes | None


@dataclass(frozen=True, slots=True)
class Record:
    """One record of a batch, as stored: offset and timestamp relative to the batch's."""

    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()
    attributes: int = 0


@dataclass(frozen=True, slots=True)
class RecordBatch:
    """A record batch v2; its length, CRC and record count follow from its content."""

    base_offset: int
    partition_leader_epoch: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records: tuple[Record, ...]

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1


def _zigzag32(value: int) -> bytes:
    return unsigned_varint(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def _zigzag64(value: int) -> bytes:
    return unsigned_varint(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def _bytes_field(value: bytes | None) -> bytes:
    return b"\x01" if value is None else _zigzag32(len(value)) + value


def encode_record(record: Record) -> bytes:
    body = b"".join(
        (
            struct.pack(">b", record.attributes),
            _zigzag64(record.timestamp_delta),
            _zigzag32(record.offset_delta),
            _bytes_field(record.key),
            _bytes_field(record.value),
            _zigzag32(len(record.headers)),
            *(_bytes_field(h.key.encode("utf-8")) + _bytes_field(h.value) for h in record.headers),
        )
    )
    return _zigzag32(len(body)) + body


def encode_batch(batch: RecordBatch) -> bytes:
    """The batch's bytes: length, CRC32C and record count computed from its content."""
    if not batch.records:
        raise ValueError("a record batch holds at least one record")
    body = b"".join(encode_record(r) for r in batch.records)
    tail = (
        struct.pack(
            ">hiqqqhii",
            batch.attributes,
            batch.last_offset_delta,
            batch.base_timestamp,
            batch.max_timestamp,
            batch.producer_id,
            batch.producer_epoch,
            batch.base_sequence,
            len(batch.records),
        )
        + body
    )
    return frame_tail(batch.base_offset, batch.partition_leader_epoch, tail)


def frame_tail(base_offset: int, partition_leader_epoch: int, tail: bytes) -> bytes:
    """A batch from what its CRC covers (``tail``: attributes onwards): its first 21 bytes --
    base offset, length, epoch, magic and the CRC32C of ``tail`` -- then ``tail``."""
    batch_length = len(tail) + (CRC_START - LOG_OVERHEAD)
    if batch_length + LOG_OVERHEAD > BATCH_BYTES_MAX:
        raise ValueError(f"batch of {batch_length} bytes exceeds BATCH_BYTES_MAX={BATCH_BYTES_MAX}")
    crc = google_crc32c.value(tail)
    return struct.pack(">qiibI", base_offset, batch_length, partition_leader_epoch, MAGIC, crc) + tail


def batch_size(data: bytes, position: int = 0) -> int:
    """The size of the batch at ``position`` by its length header (no other check)."""
    if len(data) - position < LOG_OVERHEAD:
        raise TruncatedBatchError(
            f"{len(data) - position} bytes left, less than the 12-byte length prefix", position=position
        )
    base_offset, batch_length = struct.unpack_from(">qi", data, position)
    if batch_length < HEADER_SIZE - LOG_OVERHEAD or batch_length + LOG_OVERHEAD > BATCH_BYTES_MAX:
        raise CorruptBatchError(f"batchLength {batch_length} out of range", position=position, base_offset=base_offset)
    return LOG_OVERHEAD + int(batch_length)


def decode_batch(data: bytes, position: int = 0, *, verify_crc: bool = True) -> RecordBatch:
    """The batch at ``position`` of ``data``; CorruptBatchError (TruncatedBatchError when the
    bytes end inside it) naming the byte position, the base offset and the field that is wrong."""
    size = batch_size(data, position)
    base_offset = struct.unpack_from(">q", data, position)[0]
    if len(data) - position < HEADER_SIZE:
        raise TruncatedBatchError(
            f"{len(data) - position} bytes left, less than the {HEADER_SIZE}-byte header",
            position=position,
            base_offset=base_offset,
        )
    (
        _base,
        _length,
        leader_epoch,
        magic,
        crc,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    ) = HEADER.unpack_from(data, position)

    def corrupt(reason: str) -> CorruptBatchError:
        return CorruptBatchError(reason, position=position, base_offset=base_offset)

    if magic != MAGIC:
        raise corrupt(f"magic {magic}, expected {MAGIC} (Kafka's record batch v2)")
    end = position + size
    if end > len(data):
        raise TruncatedBatchError(
            f"batch needs {size} bytes, only {len(data) - position} left", position=position, base_offset=base_offset
        )
    if verify_crc:
        actual = google_crc32c.value(data[position + CRC_START : end])
        if actual != crc:
            raise corrupt(f"CRC32C mismatch (stored {crc:#010x}, computed {actual:#010x})")
    compression = attributes & COMPRESSION_MASK
    if compression:
        name = COMPRESSION_NAMES.get(compression, f"codec {compression}")
        raise corrupt(f"attributes: {name} compression; a metadata log batch is uncompressed")
    if count < 0:
        raise corrupt(f"recordsCount {count} < 0")
    records: list[Record] = []
    pos = position + HEADER_SIZE
    for index in range(count):
        try:
            record, pos = _decode_record(data, pos, end)
        except ValueError as exc:
            raise corrupt(f"record {index} of {count}: {exc}") from exc
        records.append(record)
    if pos != end:
        raise corrupt(f"{end - pos} bytes after the {count} records")
    return RecordBatch(
        base_offset,
        leader_epoch,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        tuple(records),
    )


def _varint(data: bytes, pos: int, end: int, what: str, *, long: bool = False) -> tuple[int, int]:
    if pos >= end:
        raise ValueError(f"{what}: the batch ends inside a varint")
    try:
        value, size = (read_signed_varlong if long else read_signed_varint)(data, pos)
    except Exception as exc:  # kio's native reader: underflow, overlong
        raise ValueError(f"{what}: not a varint ({exc})") from exc
    if pos + size > end:
        raise ValueError(f"{what}: the varint runs past the batch")
    return int(value), pos + size


def _nullable_bytes(data: bytes, pos: int, end: int, what: str) -> tuple[bytes | None, int]:
    size, pos = _varint(data, pos, end, f"{what} length")
    if size == -1:
        return None, pos
    if size < 0 or pos + size > end:
        raise ValueError(f"{what} length {size} runs past the batch")
    return data[pos : pos + size], pos + size


def _decode_record(data: bytes, pos: int, end: int) -> tuple[Record, int]:
    length, pos = _varint(data, pos, end, "record length")
    record_end = pos + length
    if length < 0 or record_end > end:
        raise ValueError(f"record length {length} runs past the batch")
    if length < 1:
        raise ValueError("record length 0 leaves no room for its attributes")
    attributes = struct.unpack_from(">b", data, pos)[0]
    pos += 1
    timestamp_delta, pos = _varint(data, pos, record_end, "timestampDelta", long=True)
    offset_delta, pos = _varint(data, pos, record_end, "offsetDelta")
    key, pos = _nullable_bytes(data, pos, record_end, "key")
    value, pos = _nullable_bytes(data, pos, record_end, "value")
    header_count, pos = _varint(data, pos, record_end, "headers count")
    if header_count < 0:
        raise ValueError(f"headers count {header_count} < 0")
    headers: list[Header] = []
    for _ in range(header_count):
        header_key, pos = _nullable_bytes(data, pos, record_end, "header key")
        if header_key is None:
            raise ValueError("a header key is null")
        header_value, pos = _nullable_bytes(data, pos, record_end, "header value")
        headers.append(Header(header_key.decode("utf-8"), header_value))
    if pos != record_end:
        raise ValueError(f"{record_end - pos} bytes left in the record")
    return Record(offset_delta, timestamp_delta, key, value, tuple(headers), attributes), pos


def iter_batches(data: bytes, *, verify_crc: bool = True) -> Iterator[tuple[int, RecordBatch]]:
    """Every batch of ``data`` (a segment's or a snapshot's bytes) with its byte position; the
    first bad one raises (CorruptBatchError naming its position and base offset)."""
    pos = 0
    while pos < len(data):
        batch = decode_batch(data, pos, verify_crc=verify_crc)
        yield pos, batch
        pos += batch_size(data, pos)
