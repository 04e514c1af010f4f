"""One segment of the log: a ``.log`` file of whole batches, its sparse offset index, and the
epochs that start inside it. Not thread-safe on its own; :class:`raftmeta.storage.log.SegmentLog`
serialises access.

A segment is named by the offset of its first batch (``00000000000000000042.log``, Kafka's
naming). While it is the active (last) segment its index lives only in memory and is rebuilt by
scanning the file on open; when the log rolls past it (or closes cleanly) the segment is
fsynced and its index is written to ``<base>.index`` (docs/log-format.md) so that opening the
log never rescans sealed segments.

The offset index is sparse: one entry (first offset of a batch, byte position) per
``index_interval_bytes`` of data, so finding offset X reads at most that many bytes of headers
after a binary search, never the segment from its start.

When recovery meets a bad batch it must tell a torn tail from damage in the middle of the log:
:func:`raftmeta.records.walk.find_intact_batches` looks past the bad bytes for batches that are
still intact (docs/storage.md, "Damaged disk").
"""

from __future__ import annotations

import bisect
import os
import struct
from array import array
from dataclasses import dataclass
from pathlib import Path

from raftmeta.records import codec
from raftmeta.records.codec import HEADER_SIZE, LOG_OVERHEAD, BatchHeader, CorruptBatchError
from raftmeta.records.walk import PEEK, PEEK_SIZE, IntactBatches, find_intact_batches, peek_intact
from raftmeta.storage.damage import DamagedBatch, damaged_slot
from raftmeta.storage.errors import InvalidFileError
from raftmeta.storage.fileio import atomic_write, pread_exact, pwrite_all

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
INDEX_MAGIC = b"RMIX"
INDEX_VERSION = 1
# magic, version, base_offset, next_offset, log_size_bytes, offset entries, epoch entries
INDEX_HEADER = struct.Struct(">4sB3xqqqii")
OFFSET_ENTRY = struct.Struct(">qq")  # first offset of a batch, byte position in the .log
EPOCH_ENTRY = struct.Struct(">iq")  # epoch, offset its first batch in this segment starts at
INDEX_CRC = struct.Struct(">I")
WALK_BLOCK_BYTES = 16 * 1024


def log_file_name(base_offset: int) -> str:
    return f"{base_offset:020d}{LOG_SUFFIX}"


def index_file_name(base_offset: int) -> str:
    return f"{base_offset:020d}{INDEX_SUFFIX}"


def parse_log_file_name(name: str) -> int | None:
    """The base offset of a segment file name, or None if it is not one."""
    stem, dot, suffix = name.partition(".")
    if dot and "." + suffix == LOG_SUFFIX and len(stem) == 20 and stem.isdigit():
        return int(stem)
    return None


@dataclass(frozen=True, slots=True)
class ScanError:
    """Where a scan of a segment stopped: the first bad byte and the offset it should hold."""

    position: int
    offset: int
    reason: str
    truncated: bool  # the file ends inside a batch (a torn write) rather than holding bad bytes


class Segment:
    def __init__(self, directory: Path, base_offset: int, fd: int, *, index_interval_bytes: int) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.path = directory / log_file_name(base_offset)
        self.index_path = directory / index_file_name(base_offset)
        self.fd = fd
        self.index_interval_bytes = index_interval_bytes
        self.size = 0
        self.next_offset = base_offset
        self.offsets = array("q")
        self.positions = array("q")
        self.epochs: list[tuple[int, int]] = []
        self._bytes_since_index = 0
        # Batches of this file whose slot is known but whose bytes are damaged (a scan with
        # ``report_damage``), by base offset: kept in place until a repair overwrites them.
        self.damaged: dict[int, DamagedBatch] = {}

    # -- opening ------------------------------------------------------------------------------

    @classmethod
    def create(cls, directory: Path, base_offset: int, *, index_interval_bytes: int) -> Segment:
        fd = os.open(directory / log_file_name(base_offset), os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        return cls(directory, base_offset, fd, index_interval_bytes=index_interval_bytes)

    @classmethod
    def open_existing(cls, directory: Path, base_offset: int, *, index_interval_bytes: int) -> Segment:
        fd = os.open(directory / log_file_name(base_offset), os.O_RDWR)
        return cls(directory, base_offset, fd, index_interval_bytes=index_interval_bytes)

    def file_size(self) -> int:
        return os.fstat(self.fd).st_size

    @property
    def is_empty(self) -> bool:
        return self.size == 0

    @property
    def last_epoch(self) -> int | None:
        return self.epochs[-1][0] if self.epochs else None

    # -- building the in-memory index ----------------------------------------------------------

    def _reset_index(self) -> None:
        self.size = 0
        self.next_offset = self.base_offset
        self.offsets = array("q")
        self.positions = array("q")
        self.epochs = []
        self._bytes_since_index = 0
        self.damaged = {}

    def note_batch(
        self, base_offset: int, epoch: int, next_offset: int, position: int, size: int, *, indexed: bool = False
    ) -> None:
        """Account for a batch now present at ``position`` (appended, or found by a scan);
        ``indexed``: give it an index entry whatever the interval (a damaged batch: walks of the
        headers start past it, never through it)."""
        if indexed or not self.offsets or self._bytes_since_index >= self.index_interval_bytes:
            self.offsets.append(base_offset)
            self.positions.append(position)
            self._bytes_since_index = 0
        self._bytes_since_index += size
        if not self.epochs or self.epochs[-1][0] != epoch:
            self.epochs.append((epoch, base_offset))
        self.size = position + size
        self.next_offset = next_offset

    def note_damaged(self, slot: DamagedBatch) -> None:
        """Account for a damaged batch whose slot is known: indexed, and so is the batch after it."""
        self.note_batch(slot.base_offset, slot.epoch, slot.next_offset, slot.position, slot.size, indexed=True)
        self._bytes_since_index = self.index_interval_bytes
        self.damaged[slot.base_offset] = slot

    def scan(
        self, min_epoch: int, *, report_damage: bool = False, high_watermark: int = 0, next_base: int | None = None
    ) -> ScanError | None:
        """Rebuild the index by reading and checking every batch (CRC, contiguity, epochs).

        Stops at the first bad batch and returns where; the index then covers the valid prefix.
        With ``report_damage``, a bad batch whose slot the bytes around it prove
        (:func:`raftmeta.storage.damage.damaged_slot`, given the checkpointed ``high_watermark``
        and ``next_base``, the next segment file's base offset) is kept in :attr:`damaged` and
        the scan goes on past it.
        """
        self._reset_index()
        buf = pread_exact(self.fd, self.file_size(), 0)
        pos = 0
        expected = self.base_offset
        last_epoch = min_epoch
        end = len(buf)
        epoch_positions: list[int] = []  # byte position of each entry of self.epochs
        while pos < end:
            # The checks of codec.check_batch without building a BatchHeader (walk.peek_intact);
            # check_batch itself only for the precise reason of a batch that fails them.
            fields = peek_intact(buf, pos, 0)
            if report_damage and (fields is None or fields[0] != expected):
                slot = damaged_slot(
                    buf, pos, expected, last_epoch, high_watermark=high_watermark, next_segment_base=next_base
                )
                if slot is not None:
                    if not self.epochs or self.epochs[-1][0] != slot.epoch:
                        epoch_positions.append(pos)
                    self.note_damaged(slot)
                    expected = slot.next_offset
                    pos += slot.size
                    last_epoch = slot.epoch
                    continue
            if fields is None:
                try:
                    codec.check_batch(buf, pos)
                except CorruptBatchError as exc:
                    return ScanError(pos, expected, exc.reason, isinstance(exc, codec.TruncatedBatchError))
                raise AssertionError(f"walk.peek_intact and codec.check_batch disagree at byte {pos}")
            base, length, epoch, _magic, _crc, _attrs, count = fields
            size = LOG_OVERHEAD + length
            if base != expected:
                return ScanError(pos, expected, f"base offset {base}, expected {expected}", False)
            if epoch < last_epoch:
                # The epoch is outside the CRC (as in Kafka), so either this batch's epoch dropped
                # or an earlier one's rose. Cut before every batch of a higher epoch: that drops
                # the damaged batch in both cases (and maybe good ones, which are refetched).
                reason = f"epoch {epoch} after epoch {last_epoch} at offset {base}"
                for (entry_epoch, start), position in zip(self.epochs, epoch_positions, strict=True):
                    if entry_epoch > epoch:
                        return ScanError(position, start, reason, False)
                return ScanError(pos, expected, reason, False)
            if not self.epochs or self.epochs[-1][0] != epoch:
                epoch_positions.append(pos)
            expected = base + count
            self.note_batch(base, epoch, expected, pos, size)
            pos += size
            last_epoch = epoch
        return None

    def intact_batches_from(self, position: int, min_offset: int) -> IntactBatches:
        """The intact batches of the file from byte ``position`` on (:func:`find_intact_batches`),
        whatever the in-memory index says; reads the file, changes nothing."""
        size = self.file_size() - position
        if size <= 0:
            return IntactBatches()
        return find_intact_batches(pread_exact(self.fd, size, position), 0, min_offset)

    # -- the persisted index of a sealed segment ----------------------------------------------

    def encode_index(self) -> bytes:
        parts = [
            INDEX_HEADER.pack(
                INDEX_MAGIC,
                INDEX_VERSION,
                self.base_offset,
                self.next_offset,
                self.size,
                len(self.offsets),
                len(self.epochs),
            )
        ]
        parts.extend(OFFSET_ENTRY.pack(o, p) for o, p in zip(self.offsets, self.positions, strict=True))
        parts.extend(EPOCH_ENTRY.pack(e, s) for e, s in self.epochs)
        body = b"".join(parts)
        return body + INDEX_CRC.pack(codec.crc32c(body))

    def write_index(self) -> None:
        """Persist the index (atomically); only for a segment whose data is already fsynced."""
        atomic_write(self.index_path, self.encode_index())

    def remove_index(self) -> bool:
        try:
            self.index_path.unlink()
        except FileNotFoundError:
            return False
        return True

    def load_index(self) -> None:
        """Load ``<base>.index``; raise InvalidFileError if it is missing, damaged or stale."""
        path = self.index_path
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise InvalidFileError(path, "missing") from None
        if len(data) < INDEX_HEADER.size + INDEX_CRC.size:
            raise InvalidFileError(path, f"{len(data)} bytes, too short for an index")
        body, (crc,) = data[:-4], INDEX_CRC.unpack_from(data, len(data) - 4)
        if codec.crc32c(body) != crc:
            raise InvalidFileError(path, "CRC32C mismatch")
        magic, version, base, next_offset, log_size, n_offsets, n_epochs = INDEX_HEADER.unpack_from(body, 0)
        if magic != INDEX_MAGIC or version != INDEX_VERSION:
            raise InvalidFileError(path, f"not a version-{INDEX_VERSION} segment index")
        if base != self.base_offset:
            raise InvalidFileError(path, f"describes base offset {base}, not {self.base_offset}")
        expected_len = INDEX_HEADER.size + n_offsets * OFFSET_ENTRY.size + n_epochs * EPOCH_ENTRY.size
        if len(body) != expected_len:
            raise InvalidFileError(path, "entry counts do not match the file size")
        actual_size = self.file_size()
        if log_size != actual_size:
            raise InvalidFileError(path, f"stale: indexes {log_size} bytes, the log file has {actual_size}")
        self._reset_index()
        pos = INDEX_HEADER.size
        for _ in range(n_offsets):
            offset, position = OFFSET_ENTRY.unpack_from(body, pos)
            self.offsets.append(offset)
            self.positions.append(position)
            pos += OFFSET_ENTRY.size
        for _ in range(n_epochs):
            self.epochs.append(EPOCH_ENTRY.unpack_from(body, pos))
            pos += EPOCH_ENTRY.size
        self.size = log_size
        self.next_offset = next_offset
        if self.positions:
            self._bytes_since_index = log_size - self.positions[-1]

    # -- reading ------------------------------------------------------------------------------

    def read(self, position: int, size: int) -> bytes:
        return pread_exact(self.fd, size, position)

    def find_position(self, offset: int) -> int:
        """Byte position of the batch holding ``offset`` (``size`` if offset is the next one)."""
        return self.locate(offset)[0]

    def locate(self, offset: int) -> tuple[int, int]:
        """``(byte position, base offset)`` of the batch holding ``offset``; ``(size, next_offset)``
        if offset is the next one.

        A binary search in the sparse index, then a walk over at most ``index_interval_bytes``
        of batch headers, read in blocks. The walk starts at an indexed batch whose offset the
        index vouches for and checks that each header continues the one before: a damaged base
        offset, count or length raises CorruptBatchError instead of leading the walk astray (to
        a wrong batch, or past batches that a read would then silently skip).
        """
        if offset >= self.next_offset:
            return self.size, self.next_offset
        for slot in self.damaged.values():
            if slot.base_offset <= offset < slot.next_offset:
                return slot.position, slot.base_offset  # inside a damaged range: no header frames it
        i = bisect.bisect_right(self.offsets, offset) - 1
        if i >= 0 and self.offsets[i] == offset:
            return self.positions[i], offset  # the index vouches for it: no header to trust (it may be damaged)
        pos, expected = (self.positions[i], self.offsets[i]) if i >= 0 else (0, self.base_offset)
        block = b""
        block_start = pos
        while pos < self.size:
            rel = pos - block_start
            if rel + PEEK_SIZE > len(block):
                block_start = pos
                block = self.read(pos, min(WALK_BLOCK_BYTES, self.size - pos))
                rel = 0
                if len(block) < PEEK_SIZE:
                    break
            base, length, _, _, _, _, count = PEEK.unpack_from(block, rel)
            if length < HEADER_SIZE - LOG_OVERHEAD:  # damaged: never walk backwards or in place
                raise CorruptBatchError(f"batch_length {length} out of range", position=pos, base_offset=expected)
            if base != expected or count < 1:
                raise CorruptBatchError(
                    f"batch header says base offset {base} and {count} records, expected a batch at offset {expected}",
                    position=pos,
                    base_offset=expected,
                )
            if offset < base + count:
                return pos, base
            expected = base + count
            pos += LOG_OVERHEAD + length
        raise CorruptBatchError(
            f"offset {offset} not found by walking batch headers", position=pos, base_offset=expected
        )

    def peek_header(self, position: int) -> BatchHeader:
        """The full header of the batch at ``position`` (no CRC check)."""
        raw = self.read(position, HEADER_SIZE)
        return BatchHeader(*codec.HEADER.unpack_from(raw, 0))

    # -- writing ------------------------------------------------------------------------------

    def write_at_end(self, data: bytes | memoryview) -> None:
        """Write ``data`` after the current end. The caller then :meth:`note_batch`es each batch."""
        pwrite_all(self.fd, data, self.size)

    def truncate(self, position: int, next_offset: int) -> None:
        """Drop every byte from ``position`` (a batch boundary, whose batch starts ``next_offset``)."""
        os.ftruncate(self.fd, position)
        keep = bisect.bisect_left(self.positions, position)
        del self.offsets[keep:]
        del self.positions[keep:]
        self.epochs = [(e, s) for e, s in self.epochs if s < next_offset]
        self.damaged = {b: d for b, d in self.damaged.items() if b < next_offset}
        self.size = position
        self.next_offset = next_offset
        self._bytes_since_index = position - self.positions[-1] if self.positions else 0

    def overwrite(self, slot: DamagedBatch, data: bytes, rest: DamagedBatch | None = None) -> None:
        """Put ``data`` (an intact copy of the batch, the same size) in place of the damaged batch
        of ``slot`` and fsync: a crash on the way leaves old or new bytes there, or a mix of them
        that fails the CRC, and the next start finds that slot damaged again. ``rest``: what stays
        damaged of a damaged range whose front ``data`` is (damage.repaired_front), indexed as a
        damaged batch is."""
        assert len(data) == (slot.size if rest is None else rest.position - slot.position), "a repair fills its slot"
        pwrite_all(self.fd, data, slot.position)
        os.fsync(self.fd)

    def repaired(self, slot: DamagedBatch, epoch: int, rest: DamagedBatch | None) -> None:
        """The index after :meth:`overwrite` (under the log's lock): ``slot`` is intact, its front
        batch of ``epoch``, and ``rest`` (if any) damaged and indexed. A slot across an epoch
        change learns where an epoch starts inside it."""
        del self.damaged[slot.base_offset]
        if epoch != slot.epoch:
            self._epoch_starts_at(epoch, slot.base_offset)
        if rest is not None:
            i = bisect.bisect_left(self.offsets, rest.base_offset)
            self.offsets.insert(i, rest.base_offset)
            self.positions.insert(i, rest.position)
            self.damaged[rest.base_offset] = rest

    def overwrite_back(self, slot: DamagedBatch, data: bytes, front: DamagedBatch) -> None:
        """Put ``data`` (an intact batch) in the last bytes of the damaged range ``slot`` and fsync,
        ``front`` staying damaged (damage.repaired_back). A crash on the way leaves the range
        damaged as it was, or its back intact: the next start finds either."""
        assert front.position + front.size + len(data) == slot.position + slot.size, "a repair fills its slot"
        pwrite_all(self.fd, data, front.position + front.size)
        os.fsync(self.fd)

    def repaired_back(self, front: DamagedBatch, base_offset: int) -> None:
        """The index after :meth:`overwrite_back` (under the log's lock): the range is ``front`` now,
        and the batch at ``base_offset`` starts where it ends."""
        self.damaged[front.base_offset] = front
        i = bisect.bisect_left(self.offsets, base_offset)
        self.offsets.insert(i, base_offset)
        self.positions.insert(i, front.position + front.size)

    def _epoch_starts_at(self, epoch: int, offset: int) -> None:
        """``epoch`` starts at ``offset``, inside a repaired slot that spanned epochs: it ends the
        epoch in force there, and an entry the scan gave ``epoch`` further on (the batch after the
        slot) now starts here."""
        kept = [(e, s) for e, s in self.epochs if s < offset]
        later = [(e, s) for e, s in self.epochs if s > offset and e != epoch]
        assert all(e > epoch for e, _ in later), "a repair keeps the epochs non-decreasing"
        self.epochs = [*kept, (epoch, offset), *later]

    def fsync(self) -> None:
        os.fsync(self.fd)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def delete(self) -> None:
        """Close and unlink the segment and its index (the caller fsyncs the directory)."""
        self.close()
        self.remove_index()
        self.path.unlink(missing_ok=True)
