"""Fuzz of the batch decoder and of segment recovery and reads (docs/log-format.md).

Inputs are random bytes, random but CRC-correct batches, and real batch sequences damaged by
one to a few mutations: bit flips, truncations, edits of a header field or of a record length
prefix (each with the CRC left stale or recomputed, so that the structural checks behind the
CRC are reached too), batches dropped, duplicated or swapped, bytes inserted or deleted, and
splices of two logs. Each input is fed to one of three families:

- ``buffer``: :func:`codec.iter_batches`, :func:`codec.scan_valid_prefix`, ``Batch.records()``
  and the read-only walk of ``raftmeta log dump`` (:func:`inspect.walk_file`);
- ``recovery``: the bytes as the active segment of a log, opened by :class:`SegmentLog` with a
  checkpointed high watermark (``floor``) below which damage must be refused, not truncated;
- ``sealed``: a sealed segment (its index written at close) damaged in place, then read back
  through ``SegmentLog.iter_batches``, as a node does at start-up and for Fetch.

The verdict comes from a reference model written from the format's documentation, not from the
code under test: the only allowed outcomes are the valid batches it predicts (CRC-correct, with
record framing that adds up) or the project's corruption error, raised exactly where the first
invalid batch starts and naming that byte (and the offset, where one can be read). Any other
exception, a valid batch that is not returned, an invalid one that is, or an error in the wrong
place is a failure.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import struct
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog
from hypothesis import strategies as st

from raftmeta.fuzz.protobuf import Bounds, messages
from raftmeta.logs import configured_structlog
from raftmeta.records import codec
from raftmeta.records.codec import BATCH_BYTES_MAX, CRC_START, HEADER_SIZE, LOG_OVERHEAD, CorruptBatchError
from raftmeta.storage.errors import HighWatermarkAboveLogError, LogCorruptionError, MidLogCorruptionError
from raftmeta.storage.inspect import BatchEntry, Corruption, walk_file
from raftmeta.storage.log import SegmentLog
from raftmeta.storage.segment import log_file_name
from raftmeta.v1 import records_pb2

FAMILIES = ("buffer", "recovery", "sealed")
# Smallest segment size the log accepts: small batches then spread over several segments.
SEGMENT_BYTES = 1024
HEADER_FIELDS: dict[str, tuple[int, str]] = {
    "base_offset": (0, ">q"),
    "batch_length": (8, ">i"),
    "epoch": (12, ">i"),
    "magic": (16, ">b"),
    "crc": (17, ">I"),
    "attributes": (21, ">h"),
    "record_count": (23, ">i"),
    "append_timestamp": (27, ">q"),
}
_FORMAT_RANGES = {">q": (-(2**63), 2**63 - 1), ">i": (-(2**31), 2**31 - 1), ">b": (-128, 127), ">I": (0, 2**32 - 1)}
_FORMAT_RANGES[">h"] = (-(2**15), 2**15 - 1)
_SMALL = Bounds(list_max=3, map_max=2, text_max=12, long_text_max=200, depth_max=2)


def _sample_records() -> list[bytes]:
    topic_id = bytes(range(1, 17))
    records = [
        records_pb2.MetadataRecord(topic=records_pb2.TopicRecord(name="orders", topic_id=topic_id)),
        records_pb2.MetadataRecord(
            partition=records_pb2.PartitionRecord(
                topic_id=topic_id, partition_id=0, replicas=[1, 2, 3], isr=[1, 2, 3], leader=1
            )
        ),
        records_pb2.MetadataRecord(
            register_broker=records_pb2.RegisterBrokerRecord(
                broker_id=1, incarnation_id=bytes(16 * [7]), broker_epoch=4, rack="rack-a", fenced=True
            )
        ),
        records_pb2.MetadataRecord(
            leader_change=records_pb2.LeaderChangeRecord(
                leader_id=1, leader_epoch=2, voters=[records_pb2.Voter(voter_id=1)]
            )
        ),
        records_pb2.MetadataRecord(no_op=records_pb2.NoOpRecord()),
    ]
    return [r.SerializeToString() for r in records]


SAMPLE_RECORDS = _sample_records()


# ---- inputs -----------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class DecoderCase:
    """One input: the bytes fed to the decoder, and the valid batches they were made from."""

    family: str  # buffer | recovery | sealed
    origin: str  # random | mutated
    original: tuple[bytes, ...]  # the valid batches before damage (empty for random bytes)
    data: bytes  # buffer / recovery: the whole input; sealed: the damaged first segment
    mutations: tuple[str, ...] = ()
    floor: int = 0  # recovery: the checkpointed high watermark

    def describe(self) -> dict[str, Any]:
        """Everything needed to reproduce the case (bytes as hex)."""
        return {
            "family": self.family,
            "origin": self.origin,
            "mutations": list(self.mutations),
            "floor": self.floor,
            "data_hex": self.data.hex(),
            "original_hex": [b.hex() for b in self.original],
        }


@functools.cache
def record_payloads(bounds: Bounds = _SMALL) -> st.SearchStrategy[bytes]:
    """Record payloads: real MetadataRecords, arbitrary ones, and bytes that are no record at all."""
    arbitrary = messages(records_pb2.MetadataRecord.DESCRIPTOR, bounds=bounds).map(lambda m: m.SerializeToString())
    return st.one_of(st.sampled_from(SAMPLE_RECORDS), arbitrary, st.binary(max_size=24))


@st.composite
def valid_logs(draw: st.DrawFn, min_batches: int = 1, max_batches: int = 5, padding: int = 0) -> tuple[bytes, ...]:
    """Valid batches as a leader writes them: offsets contiguous from 0, epochs non-decreasing.
    ``padding`` adds a record of about that many bytes to each batch (to fill segments)."""
    offset = 0
    epoch = draw(st.integers(0, 3))
    batches: list[bytes] = []
    for _ in range(draw(st.integers(min_batches, max_batches))):
        epoch += draw(st.sampled_from((0, 0, 1)))
        payloads = draw(st.lists(record_payloads(), min_size=1, max_size=4))
        if padding:
            payloads.append(b"\x00" * draw(st.integers(padding, padding + padding // 2)))
        control = draw(st.integers(0, 5)) == 0
        timestamp = draw(st.integers(0, 2**41))
        batches.append(codec.encode_batch(offset, epoch, payloads, timestamp, control=control))
        offset += len(payloads)
    return tuple(batches)


def _positions(batches: tuple[bytes, ...] | list[bytes]) -> list[int]:
    out, pos = [], 0
    for b in batches:
        out.append(pos)
        pos += len(b)
    return out


def _recompute_crc(buf: bytearray, pos: int) -> None:
    """Make the CRC of the batch at ``pos`` match its bytes, as its length field now bounds them."""
    if pos + HEADER_SIZE > len(buf):
        return
    (length,) = struct.unpack_from(">i", buf, pos + 8)
    end = min(len(buf), pos + LOG_OVERHEAD + max(length, HEADER_SIZE - LOG_OVERHEAD))
    struct.pack_into(">I", buf, pos + 17, codec.crc32c(bytes(buf[pos + CRC_START : end])))


def _field_values(name: str, fmt: str, batch: bytes) -> st.SearchStrategy[int]:
    low, high = _FORMAT_RANGES[fmt]
    (current,) = struct.unpack_from(fmt, batch, HEADER_FIELDS[name][0])
    edges = [low, high, 0, -1, 1, current - 1, current + 1]
    if name == "batch_length":
        edges += [HEADER_SIZE - LOG_OVERHEAD - 1, HEADER_SIZE - LOG_OVERHEAD, BATCH_BYTES_MAX - LOG_OVERHEAD + 1]
    in_range = sorted({e for e in edges if low <= e <= high})
    return st.one_of(st.sampled_from(in_range), st.integers(low, high))


@st.composite
def _damage(draw: st.DrawFn, batches: tuple[bytes, ...], *, in_place: bool) -> tuple[bytes, tuple[str, ...]]:
    """The batches concatenated and damaged; ``in_place`` keeps the length (flips and edits only)."""
    notes: list[str] = []
    current = list(batches)
    if not in_place and len(current) > 1 and draw(st.integers(0, 3)) == 0:
        op = draw(st.sampled_from(("drop", "duplicate", "swap")))
        i = draw(st.integers(0, len(current) - 1))
        j = draw(st.integers(0, len(current) - 1))
        if op == "drop":
            del current[i]
        elif op == "duplicate":
            current.insert(j, current[i])
        else:
            current[i], current[j] = current[j], current[i]
        notes.append(f"{op} batch {i}" + (f" at {j}" if op != "drop" else ""))
    positions = _positions(current)
    buf = bytearray(b"".join(current))
    ops = (
        ("field", "record_length", "flip")
        if in_place
        else ("field", "record_length", "flip", "truncate", "insert", "delete", "garbage", "splice")
    )
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(ops))
        if op == "field" and current:
            i = draw(st.integers(0, len(current) - 1))
            name = draw(st.sampled_from(sorted(HEADER_FIELDS)))
            at, fmt = HEADER_FIELDS[name]
            value = draw(_field_values(name, fmt, current[i]))
            if positions[i] + at + struct.calcsize(fmt) > len(buf):
                continue  # an earlier truncation or deletion took the field away
            struct.pack_into(fmt, buf, positions[i] + at, value)
            fix = name != "crc" and draw(st.booleans())
            if fix:
                _recompute_crc(buf, positions[i])
            notes.append(f"batch {i} {name}={value}" + (" (CRC recomputed)" if fix else ""))
        elif op == "record_length" and current:
            i = draw(st.integers(0, len(current) - 1))
            header = codec.decode_header(current[i])
            prefixes, pos = [], HEADER_SIZE
            for payload in codec.split_records(current[i], header):
                prefixes.append(pos)
                pos += 4 + len(payload)
            j = draw(st.integers(0, len(prefixes) - 1))
            (length,) = struct.unpack_from(">I", current[i], prefixes[j])
            value = draw(st.sampled_from(sorted({0, max(0, length - 1), length + 1, 2**31, 2**32 - 1})))
            if positions[i] + prefixes[j] + 4 > len(buf):
                continue
            struct.pack_into(">I", buf, positions[i] + prefixes[j], value)
            fix = draw(st.booleans())
            if fix:
                _recompute_crc(buf, positions[i])
            notes.append(f"batch {i} record {j} length={value}" + (" (CRC recomputed)" if fix else ""))
        elif op == "flip" and buf:
            for _ in range(draw(st.integers(1, 3))):
                bit = draw(st.integers(0, len(buf) * 8 - 1))
                buf[bit // 8] ^= 1 << (bit % 8)
                notes.append(f"flip bit {bit % 8} of byte {bit // 8}")
        elif op == "truncate":
            cut = draw(st.integers(0, len(buf)))
            del buf[cut:]
            notes.append(f"truncate to {cut} bytes")
        elif op == "insert":
            at = draw(st.integers(0, len(buf)))
            extra = draw(st.binary(min_size=1, max_size=16))
            buf[at:at] = extra
            notes.append(f"insert {extra.hex()} at byte {at}")
        elif op == "delete" and buf:
            start = draw(st.integers(0, len(buf) - 1))
            end = draw(st.integers(start + 1, min(len(buf), start + 40)))
            del buf[start:end]
            notes.append(f"delete bytes {start}..{end - 1}")
        elif op == "garbage":
            extra = draw(st.binary(min_size=1, max_size=64))
            buf.extend(extra)
            notes.append(f"append {len(extra)} garbage bytes")
        elif op == "splice":
            other = b"".join(draw(valid_logs(max_batches=3)))
            cut_here = draw(st.integers(0, len(buf)))
            cut_there = draw(st.integers(0, len(other)))
            buf[cut_here:] = other[cut_there:]
            notes.append(f"splice another log from its byte {cut_there} at byte {cut_here}")
    return bytes(buf), tuple(notes)


@st.composite
def _random_batches(draw: st.DrawFn) -> bytes:
    """Batches with random header fields and bodies but a correct CRC: past the CRC check, onto
    the structural ones."""
    out = bytearray()
    for _ in range(draw(st.integers(1, 3))):
        body = draw(st.binary(max_size=48))
        length = draw(st.one_of(st.just(HEADER_SIZE - LOG_OVERHEAD + len(body)), st.integers(-(2**31), 2**31 - 1)))
        header = bytearray(HEADER_SIZE)
        struct.pack_into(
            ">qiibIhiq",
            header,
            0,
            draw(st.one_of(st.just(len(out)), st.integers(-(2**63), 2**63 - 1))),
            length,
            draw(st.one_of(st.integers(0, 3), st.integers(-(2**31), 2**31 - 1))),
            draw(st.sampled_from((1, 1, 1, 0, 2, -1))),
            0,
            draw(st.integers(-(2**15), 2**15 - 1)),
            draw(st.one_of(st.integers(-1, 4), st.integers(-(2**31), 2**31 - 1))),
            draw(st.integers(-(2**63), 2**63 - 1)),
        )
        batch = header + body
        _recompute_crc(batch, 0)
        out += batch
    return bytes(out)


@st.composite
def decoder_cases(draw: st.DrawFn, families: tuple[str, ...] = FAMILIES) -> DecoderCase:
    family = draw(st.sampled_from(families))
    if family == "sealed":
        original = draw(valid_logs(min_batches=3, max_batches=6, padding=300))
        first = _first_segment(original)
        data, notes = draw(_damage(original[:first], in_place=True))
        return DecoderCase(family, "mutated", original, data, notes)
    origin = draw(st.sampled_from(("mutated", "mutated", "mutated", "random")))
    if origin == "random":
        data = draw(st.one_of(st.binary(max_size=120), _random_batches()))
        return DecoderCase(family, origin, (), data)
    original = draw(valid_logs())
    data, notes = draw(_damage(original, in_place=False))
    floor = 0
    if family == "recovery":
        ends = [0] + [codec.decode_header(b).next_offset for b in original]
        floor = draw(st.sampled_from(ends))
    return DecoderCase(family, origin, original, data, notes, floor)


def _first_segment(batches: tuple[bytes, ...]) -> int:
    """How many batches SegmentLog puts in its first segment (it rolls before overflowing one)."""
    size = 0
    for i, batch in enumerate(batches):
        if size > 0 and size + len(batch) > SEGMENT_BYTES:
            return i
        size += len(batch)
    return len(batches)


# ---- the reference model ---------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class RefBatch:
    position: int
    size: int
    base_offset: int
    epoch: int
    count: int
    framing_ok: bool  # the record lengths add up to the batch, record_count of them

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.count


def reference_batch(data: bytes, pos: int) -> RefBatch | None:
    """The batch at ``pos`` if it is valid as docs/log-format.md defines it (CRC included), else None."""
    if len(data) - pos < HEADER_SIZE:
        return None
    base, length, epoch, magic, crc, _attrs, count, _ts = struct.unpack_from(">qiibIhiq", data, pos)
    size = LOG_OVERHEAD + length
    if length < HEADER_SIZE - LOG_OVERHEAD or size > BATCH_BYTES_MAX or pos + size > len(data):
        return None
    if magic != 1 or count < 1 or base < 0 or epoch < 0:
        return None
    if codec.crc32c(data[pos + CRC_START : pos + size]) != crc:
        return None
    at, end, found = pos + HEADER_SIZE, pos + size, 0
    while found < count and at + 4 <= end:
        (record_length,) = struct.unpack_from(">I", data, at)
        at += 4 + record_length
        found += 1
    return RefBatch(pos, size, base, epoch, count, found == count and at == end)


def reference_prefix(data: bytes) -> tuple[list[RefBatch], int]:
    """The valid batches at the start of ``data`` and the byte where the first invalid one starts."""
    out: list[RefBatch] = []
    pos = 0
    while pos < len(data):
        batch = reference_batch(data, pos)
        if batch is None:
            break
        out.append(batch)
        pos += batch.size
    return out, pos


def reference_log(data: bytes) -> tuple[list[RefBatch], int, int]:
    """What recovery must keep of a segment starting at offset 0: valid batches, contiguous
    offsets, epochs never decreasing (on a decrease, cut before every batch of a higher epoch).
    Returns (kept batches, byte length kept, offset after the last kept batch)."""
    batches, _ = reference_prefix(data)
    kept: list[RefBatch] = []
    expected = 0
    for batch in batches:
        if batch.base_offset != expected:
            break
        if kept and batch.epoch < kept[-1].epoch:
            kept = [b for b in kept if b.epoch <= batch.epoch]
            break
        kept.append(batch)
        expected = batch.next_offset
    if not kept:
        return [], 0, 0
    return kept, kept[-1].position + kept[-1].size, kept[-1].next_offset


# ---- checks --------------------------------------------------------------------------------------
@dataclass(slots=True)
class CaseResult:
    outcome: str
    failures: list[str] = field(default_factory=list)


_NUMBERS = re.compile(r"0x[0-9a-f]+|(?<!\w)-?\d+(?!\w)")


def reason_class(reason: str) -> str:
    """A corruption reason without its numbers, for counting outcomes."""
    return _NUMBERS.sub("N", reason)


def _names_byte(message: str, position: int) -> bool:
    return f"at byte {position}" in message


def check_buffer(case: DecoderCase) -> CaseResult:
    data = case.data
    expected, stop = reference_prefix(data)
    result = CaseResult("valid")
    got: list[codec.Batch] = []
    error: CorruptBatchError | None = None
    try:
        for batch in codec.iter_batches(data):
            got.append(batch)
    except CorruptBatchError as exc:
        error = exc
    except Exception as exc:
        result.failures.append(f"iter_batches raised {type(exc).__name__}: {exc}")
        return result
    result.failures += _compare(data, expected, stop, got, error)
    if error is not None:
        result.outcome = f"corrupt: {reason_class(error.reason)}"
    for batch, ref in zip(got, expected, strict=False):
        result.failures += _check_records(batch, ref)
    _no_dropped_batches(case, got, result)
    result.failures += _check_scan(data, expected, stop, error)
    result.failures += _check_walk(data, expected, stop)
    return result


def _compare(
    data: bytes, expected: list[RefBatch], stop: int, got: list[codec.Batch], error: CorruptBatchError | None
) -> list[str]:
    problems: list[str] = []
    for i, (batch, ref) in enumerate(zip(got, expected, strict=False)):
        if batch.data != data[ref.position : ref.position + ref.size]:
            problems.append(f"batch {i} at byte {ref.position}: decoded bytes differ from the batch there")
    if len(got) > len(expected):
        problems.append(f"yielded an invalid batch at byte {stop} (the reference model rejects it)")
    elif len(got) < len(expected):
        lost = expected[len(got)]
        problems.append(f"stopped at byte {lost.position} but the batch there is valid")
    elif stop < len(data):
        if error is None:
            problems.append(f"no corruption error for the invalid bytes at byte {stop}")
        elif error.position != stop or not _names_byte(str(error), stop):
            problems.append(f"corruption error at byte {error.position} ({error}), expected at byte {stop}")
        elif isinstance(error, codec.TruncatedBatchError) and not _runs_past_end(data, stop):
            problems.append(f"TruncatedBatchError at byte {stop}, but the batch there fits in the buffer")
    elif error is not None:
        problems.append(f"corruption error {error} for a buffer of valid batches")
    return problems


def _runs_past_end(data: bytes, pos: int) -> bool:
    if len(data) - pos < HEADER_SIZE:
        return True
    length: int = struct.unpack_from(">i", data, pos + 8)[0]
    return pos + LOG_OVERHEAD + length > len(data)


def _check_records(batch: codec.Batch, ref: RefBatch) -> list[str]:
    try:
        payloads = batch.records()
    except CorruptBatchError as exc:
        if ref.framing_ok:
            return [f"records() of the valid batch at byte {ref.position} raised: {exc}"]
        if f"base offset {ref.base_offset}" not in str(exc):
            return [f"record framing error does not name base offset {ref.base_offset}: {exc}"]
        return []
    except Exception as exc:
        return [f"records() of the batch at byte {ref.position} raised {type(exc).__name__}: {exc}"]
    if not ref.framing_ok:
        return [f"records() accepted the batch at byte {ref.position} whose record lengths do not add up"]
    if len(payloads) != ref.count:
        return [f"records() returned {len(payloads)} records, the batch at byte {ref.position} holds {ref.count}"]
    return []


def _no_dropped_batches(case: DecoderCase, got: list[codec.Batch], result: CaseResult) -> None:
    """Every original batch wholly before the first damaged byte must come out unchanged."""
    if not case.original:
        return
    whole = b"".join(case.original)
    first_diff = next((i for i, (a, b) in enumerate(zip(whole, case.data, strict=False)) if a != b), None)
    if first_diff is None:
        first_diff = min(len(whole), len(case.data))
    for i, (batch, pos) in enumerate(zip(case.original, _positions(case.original), strict=True)):
        if pos + len(batch) > first_diff:
            break
        if i >= len(got) or got[i].data != batch:
            result.failures.append(f"original batch {i} (byte {pos}) is intact but was not returned")
            return


def _check_scan(data: bytes, expected: list[RefBatch], stop: int, error: CorruptBatchError | None) -> list[str]:
    try:
        headers, length, scan_error = codec.scan_valid_prefix(data)
    except Exception as exc:
        return [f"scan_valid_prefix raised {type(exc).__name__}: {exc}"]
    if [h.base_offset for h in headers] != [b.base_offset for b in expected] or length != stop:
        return [f"scan_valid_prefix kept {len(headers)} batches / {length} bytes, expected {len(expected)} / {stop}"]
    if (scan_error is None) != (error is None):
        return [f"scan_valid_prefix and iter_batches disagree: {scan_error} vs {error}"]
    return []


def _check_walk(data: bytes, expected: list[RefBatch], stop: int) -> list[str]:
    """``raftmeta log dump``'s walk must report the same valid batches, then damage at ``stop``."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / log_file_name(0)
        path.write_bytes(data)
        try:
            items: list[BatchEntry | Corruption] = list(walk_file(path, last_segment=True))
        except Exception as exc:
            return [f"walk_file raised {type(exc).__name__}: {exc}"]
    good = 0
    for item in items:
        if isinstance(item, Corruption) and item.reason.startswith("batch starts at offset"):
            continue  # the walk also checks contiguity, which the buffer decoder does not
        if isinstance(item, Corruption) or not item.crc_ok:
            break
        good += 1
    if good < len(expected):
        return [f"walk_file reported damage at batch {good}, before the first invalid batch (byte {stop})"]
    if stop < len(data) and not any(isinstance(i, Corruption) for i in items):
        return [f"walk_file reported no damage for the invalid bytes at byte {stop}"]
    return []


def intact_batch_after(data: bytes, start: int, min_offset: int) -> bool:
    """The reference for telling damage in the middle of a log from a torn tail, by brute force:
    does a whole, valid batch (codec.check_batch) start at any byte from ``start`` on, claiming
    an offset the log could reach -- at least ``min_offset``, and with the high 32 bits of one
    below ``min_offset + len(data)`` (a record takes at least 4 bytes)? Garbage that happens to
    frame a CRC-valid batch with an absurd base offset is not a batch the node wrote."""
    reach = (min_offset + len(data)) >> 32
    for position in range(start, len(data)):
        try:
            header = codec.check_batch(data, position)
        except codec.CorruptBatchError:
            continue
        if header.base_offset >= min_offset and header.base_offset >> 32 <= reach:
            return True
    return False


def check_recovery(case: DecoderCase) -> CaseResult:
    kept, kept_bytes, end_offset = reference_log(case.data)
    result = CaseResult("recovered" if kept_bytes == len(case.data) else "truncated")
    # Damage above the floor with intact batches after it is refused as well (docs/storage.md).
    mid_log = end_offset >= case.floor and intact_batch_after(case.data, kept_bytes + 1, end_offset)
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "log"
        directory.mkdir()
        (directory / log_file_name(0)).write_bytes(case.data)
        try:
            log = SegmentLog.open(directory, segment_bytes=SEGMENT_BYTES, recovery_floor_offset=case.floor)
        except LogCorruptionError as exc:
            result.outcome = "refused"
            if end_offset >= case.floor and not mid_log:
                result.failures.append(
                    f"refused to open although the damage is above the floor {case.floor} "
                    f"and nothing intact follows it: {exc}"
                )
            elif mid_log and not isinstance(exc, MidLogCorruptionError):
                result.failures.append(f"damage in the middle refused as {type(exc).__name__}: {exc}")
            elif exc.position != kept_bytes or exc.offset != end_offset or not _names_byte(str(exc), kept_bytes):
                result.failures.append(
                    f"refusal names byte {exc.position} offset {exc.offset}, expected byte {kept_bytes} "
                    f"offset {end_offset}: {exc}"
                )
            return result
        except HighWatermarkAboveLogError as exc:
            # An intact log that ends below the floor: the checkpoint's problem, not damage.
            result.outcome = "refused"
            if kept_bytes != len(case.data) or exc.log_end_offset != end_offset or end_offset >= case.floor:
                result.failures.append(
                    f"refused as a checkpoint above the log (log end {exc.log_end_offset}), but the reference keeps "
                    f"{kept_bytes} of {len(case.data)} bytes ending at offset {end_offset}, floor {case.floor}: {exc}"
                )
            return result
        except Exception as exc:
            result.failures.append(f"SegmentLog.open raised {type(exc).__name__}: {exc}")
            return result
        try:
            if end_offset < case.floor:
                result.failures.append(
                    f"opened a log that ends at offset {end_offset}, below the floor {case.floor}, without refusing"
                )
            if mid_log:
                result.failures.append(
                    f"opened a log damaged at byte {kept_bytes} with intact batches after it, without refusing"
                )
            if log.log_end_offset != end_offset:
                result.failures.append(f"recovered log ends at offset {log.log_end_offset}, expected {end_offset}")
            got = _read_all(log, len(kept) + 2, result)
            for i, ref in enumerate(kept):
                if i >= len(got) or got[i].data != case.data[ref.position : ref.position + ref.size]:
                    result.failures.append(f"valid batch {i} (byte {ref.position}) was not kept by recovery")
                    break
                result.failures += _check_records(got[i], ref)
            if len(got) > len(kept):
                result.failures.append(f"recovery kept {len(got)} batches, only {len(kept)} are valid")
        finally:
            log.close()
        size = (directory / log_file_name(0)).stat().st_size if (directory / log_file_name(0)).exists() else 0
        if size != kept_bytes:
            result.failures.append(f"segment file is {size} bytes after recovery, expected {kept_bytes}")
    return result


def _read_all(log: SegmentLog, most: int, result: CaseResult) -> list[codec.Batch]:
    got: list[codec.Batch] = []
    for batch in log.iter_batches(log.log_start_offset):
        got.append(batch)
        if len(got) > most:
            result.failures.append(f"iter_batches returned more than {most} batches: it does not terminate")
            break
    return got


def check_sealed(case: DecoderCase) -> CaseResult:
    original = case.original
    first = _first_segment(original)
    positions = _positions(original[:first])
    damaged = next((i for i, p in enumerate(positions) if case.data[p : p + len(original[i])] != original[i]), None)
    result = CaseResult("valid")
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "log"
        with SegmentLog.open(directory, segment_bytes=SEGMENT_BYTES) as log:
            for data in original:
                log.append(data)
        segment = directory / log_file_name(0)
        if segment.stat().st_size != len(case.data):
            raise AssertionError("the first segment does not hold the expected batches")
        segment.write_bytes(case.data)
        try:
            log = SegmentLog.open(directory, segment_bytes=SEGMENT_BYTES)
        except Exception as exc:
            result.failures.append(f"SegmentLog.open raised {type(exc).__name__}: {exc}")
            return result
        got: list[codec.Batch] = []
        try:
            for batch in _iter_log(log, len(original) * 3):
                got.append(batch)
        except LogCorruptionError as exc:
            result.outcome = f"corrupt: {reason_class(exc.reason)}"
            if damaged is None:
                result.failures.append(f"read of an undamaged log failed: {exc}")
            elif exc.path != segment or not _names_byte(str(exc), exc.position) or exc.position < positions[damaged]:
                result.failures.append(f"corruption reported at byte {exc.position} of {exc.path.name}: {exc}")
        except _NoEnd as exc:
            result.failures.append(str(exc))
        except Exception as exc:
            result.failures.append(f"reading raised {type(exc).__name__}: {exc}")
        finally:
            log.close()
    errored = result.outcome != "valid"
    expected_next = 0
    for i, batch in enumerate(got):
        ref = reference_batch(batch.data, 0)
        if ref is None:
            result.failures.append(f"read returned an invalid batch (index {i}, base offset {batch.base_offset})")
            break
        result.failures += _check_records(batch, ref)
        if batch.base_offset != expected_next:
            result.failures.append(
                f"read returned base offset {batch.base_offset} after offset {expected_next}: batches out of order"
            )
            break
        expected_next = batch.next_offset
        if i >= len(original) or batch.data != original[i]:
            # Only the fields the CRC does not cover (base offset, epoch) can change a valid batch.
            result.outcome = "changed but valid"
            if damaged is None or i < damaged:
                result.failures.append(f"intact batch {i} was returned changed")
    if not errored and len(got) != len(original):
        result.failures.append(f"read returned {len(got)} of {len(original)} batches without an error")
    return result


class _NoEnd(Exception):
    pass


def _iter_log(log: SegmentLog, most: int) -> Iterator[codec.Batch]:
    for n, batch in enumerate(log.iter_batches(0)):
        if n >= most:
            raise _NoEnd(f"iter_batches returned more than {most} batches from a log of fewer: it does not terminate")
        yield batch


CHECKS: dict[str, Callable[[DecoderCase], CaseResult]] = {
    "buffer": check_buffer,
    "recovery": check_recovery,
    "sealed": check_sealed,
}


@contextlib.contextmanager
def without_fsync() -> Iterator[None]:
    """fsync as a no-op while decoder cases run: they test what recovery and reads make of the
    bytes, not durability (no crash happens), and an fsync costs milliseconds on a busy disk."""
    real = os.fsync
    os.fsync = _no_fsync
    try:
        yield
    finally:
        os.fsync = real


def _no_fsync(fd: object) -> None:
    del fd


@contextlib.contextmanager
def quiet_storage_logs() -> Iterator[None]:
    """Recovery logs every truncation it makes as a warning, which is right for a node and noise
    for a fuzz run that damages thousands of logs on purpose: show errors only while it runs."""
    configured_structlog()  # the run's own configuration first, or it would replace this one later
    previous = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    try:
        yield
    finally:
        structlog.configure(**previous)


def check_case(case: DecoderCase) -> CaseResult:
    """Run ``case`` through its family's decoder; never raises (an unexpected error is a failure)."""
    try:
        result = CHECKS[case.family](case)
    except Exception as exc:
        return CaseResult("harness error", [f"{type(exc).__name__}: {exc}"])
    if result.failures:
        result.outcome = f"{case.family} FAILED"
    else:
        result.outcome = f"{case.family}: {result.outcome}"
    return result


__all__ = [
    "FAMILIES",
    "CaseResult",
    "DecoderCase",
    "check_case",
    "decoder_cases",
    "quiet_storage_logs",
    "reference_batch",
    "reference_log",
    "reference_prefix",
    "valid_logs",
    "without_fsync",
]
