"""Read-only walks over a log directory or a snapshot file, for ``raftmeta log dump`` and
offline tools (the Spark jobs can use them too).

Unlike recovery, nothing here changes a file: damage is reported (file, byte position, offset,
reason) and the walk goes on where it safely can -- past a batch whose CRC fails but whose
length is plausible, and on to the next segment file when a batch's length cannot be trusted.
The walk over a file's bytes is the records' one (:func:`raftmeta.records.walk.walk_batches`);
this module opens the files and names them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from raftmeta.records import codec
from raftmeta.records.codec import BatchHeader
from raftmeta.records.walk import Damage, walk_batches
from raftmeta.storage.damage import DamagedBatch, repairable_batches
from raftmeta.storage.segment import parse_log_file_name


@dataclass(frozen=True, slots=True)
class BatchEntry:
    """One batch found in a file; ``crc_ok`` False means its bytes do not match its CRC."""

    path: Path
    position: int
    header: BatchHeader
    crc_ok: bool
    data: bytes

    def records(self) -> list[bytes]:
        return codec.split_records(self.data, self.header)


@dataclass(frozen=True, slots=True)
class Corruption:
    """Damage found at ``position`` of ``path``; ``offset`` is the offset expected there (-1 unknown).

    ``torn_tail``: the last segment ends inside a batch -- a write in progress on a live node,
    or a torn write that recovery will truncate -- rather than holding bad bytes.
    """

    path: Path
    position: int
    offset: int
    reason: str
    torn_tail: bool = False


def segment_files(log_dir: Path) -> list[Path]:
    """Segment files of a log directory, in offset order."""
    found = [(parse_log_file_name(p.name), p) for p in log_dir.iterdir()] if log_dir.is_dir() else []
    return [p for base, p in sorted((b, p) for b, p in found if b is not None)]


def walk_file(
    path: Path, *, first_offset: int = -1, from_offset: int = 0, last_segment: bool = False
) -> Iterator[BatchEntry | Corruption]:
    """Every batch of one file (a segment or a snapshot), and every piece of damage found.

    ``first_offset`` is the offset the file should start at (-1: unknown; later batches are still
    checked to follow on).
    Batches wholly below ``from_offset`` are skipped (but still checked for damage).
    ``last_segment`` marks a file ending inside a batch as a torn tail rather than damage.
    """
    for found in walk_batches(path.read_bytes(), first_offset=first_offset, from_offset=from_offset):
        if isinstance(found, Damage):
            torn = last_segment and found.truncated
            yield Corruption(path, found.position, found.offset, found.reason, torn_tail=torn)
        else:
            yield BatchEntry(path, found.position, found.header, found.crc_ok, found.data)


def walk_log_dir(log_dir: Path, *, from_offset: int = 0) -> Iterator[BatchEntry | Corruption]:
    """Every batch of every segment of ``log_dir`` from ``from_offset``, and all damage found."""
    files = segment_files(log_dir)
    for i, path in enumerate(files):
        next_base = parse_log_file_name(files[i + 1].name) if i + 1 < len(files) else None
        if next_base is not None and next_base <= from_offset:
            continue  # wholly below the requested offset
        base = parse_log_file_name(path.name)
        assert base is not None
        yield from walk_file(path, first_offset=base, from_offset=from_offset, last_segment=i == len(files) - 1)


def repairable_in_log_dir(log_dir: Path, high_watermark: int) -> list[tuple[Path, DamagedBatch]]:
    """The damaged batches of ``log_dir`` whose slot is known: the ones a node started on it
    keeps and repairs from the quorum (docs/storage.md, "Repair from the quorum"), with their
    segment file. Reads only."""
    files = segment_files(log_dir)
    out: list[tuple[Path, DamagedBatch]] = []
    for i, path in enumerate(files):
        base = parse_log_file_name(path.name)
        next_base = parse_log_file_name(files[i + 1].name) if i + 1 < len(files) else None
        assert base is not None
        slots = repairable_batches(path.read_bytes(), base, high_watermark=high_watermark, next_segment_base=next_base)
        out.extend((path, slot) for slot in slots)
    return out
