"""The read-only walk over a Kafka-format file's batches (a ``__cluster_metadata`` segment or a
``.checkpoint`` snapshot), pure: every batch with its CRC verdict and its records decoded, and
every piece of damage as raftmeta's walk reports it (:class:`raftmeta.records.walk.Damage`: byte
position, the offset expected there, why). Like that walk it goes on past a batch whose CRC
fails or whose records do not decode (its length is still plausible) and stops where a length
cannot be trusted.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import google_crc32c

from raftmeta.records.codec import CorruptBatchError, TruncatedBatchError
from raftmeta.records.kafka.batch import CRC_START, RecordBatch, batch_size, decode_batch
from raftmeta.records.kafka.frames import LogRecord, MalformedRecordError, batch_records
from raftmeta.records.walk import Damage


@dataclass(frozen=True, slots=True)
class FoundKafkaBatch:
    """One batch found by :func:`walk_kafka_batches`: where, its stored CRC and whether its bytes
    match it, the batch, and its records with their offsets (None when one does not decode: the
    damage says which and why)."""

    position: int
    size: int
    crc: int
    crc_ok: bool
    batch: RecordBatch
    records: tuple[tuple[int, LogRecord], ...] | None


def walk_kafka_batches(data: bytes, *, first_offset: int = -1) -> Iterator[FoundKafkaBatch | Damage]:
    """Every batch of ``data`` and every piece of damage found; ``first_offset`` is the offset
    the bytes should start at (-1: unknown; each batch is still checked to follow on)."""
    pos = 0
    expected = first_offset
    while pos < len(data):
        try:
            size = batch_size(data, pos)
            batch = decode_batch(data, pos, verify_crc=False)
        except CorruptBatchError as exc:
            truncated = isinstance(exc, TruncatedBatchError)
            yield Damage(pos, expected, exc.reason, "unreadable", exc.base_offset, truncated)
            return  # the length cannot be trusted: nothing after this point can be found reliably
        stored = int.from_bytes(data[pos + CRC_START - 4 : pos + CRC_START], "big")
        actual = google_crc32c.value(data[pos + CRC_START : pos + size])
        crc_ok = actual == stored
        if not crc_ok:
            reason = f"CRC32C mismatch (stored {stored:#010x}, computed {actual:#010x})"
            yield Damage(pos, batch.base_offset, reason, "crc", batch.base_offset)
        if expected >= 0 and batch.base_offset != expected:
            reason = f"batch starts at offset {batch.base_offset}, expected {expected}"
            yield Damage(pos, expected, reason, "offset", batch.base_offset)
        records: tuple[tuple[int, LogRecord], ...] | None
        try:
            records = tuple(batch_records(batch))
        except MalformedRecordError as exc:
            records = None
            yield Damage(pos, exc.offset, str(exc), "record", batch.base_offset)
        yield FoundKafkaBatch(pos, size, stored, crc_ok, batch, records)
        expected = batch.next_offset
        pos += size
