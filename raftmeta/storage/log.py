"""The segment log: the node's replicated log on disk (DESIGN.md §5, docs/storage.md).

Theory of operation
-------------------
The log is a list of segments (``raftmeta.storage.segment``), each a file of whole batches
(docs/log-format.md). Only the last segment, the *active* one, is ever written. Offsets count
records, as in Kafka: a batch of n records starting at b covers offsets b..b+n-1.

Durability is explicit. :meth:`SegmentLog.append` writes to the file but promises nothing;
:meth:`SegmentLog.flush` fsyncs and returns :attr:`durable_end_offset`, the end of the prefix
that survives a crash. A driver does group commit by appending every batch that queued up and
then flushing once. Rolling to a new segment fsyncs the old one first, so every segment but the
active one is durable, and recovery only rescans the active segment.

Threading contract
------------------
One *writer* thread calls the mutating methods (``append``, ``append_batch``, ``flush``,
``truncate_to``, ``delete_before``, ``reset_to``, ``close``); they must not run concurrently
with each other. Any number of other threads may call the read methods (``read``,
``iter_batches``, the offset/epoch properties, ``epoch_end_offset``) at the same time: a lock
guards the segment list, the indexes and the end offsets, and is never held across an fsync, so
readers do not wait for the disk. Readers see only whole batches whose bytes are in the file
(an append publishes its batches after the write), but may see batches that are not yet
durable: pass ``upto_offset=log.durable_end_offset`` (or the high watermark) to avoid that.

Recovery
--------
Opening the log rescans what may hold undurable bytes and cuts it at the first bad batch. Below
the checkpointed high watermark that is refused (unless ``repair``). At or above it, the bytes
past the bad batch decide: nothing intact after it is a torn write at the tail, truncated with a
warning; intact batches after it are corruption in the middle of the log, refused
(:class:`MidLogCorruptionError`) unless ``repair``, because this node may have acknowledged
them. :func:`plan_truncation` and :func:`apply_truncation` are the offline side of that refusal,
for ``raftmeta log repair`` (docs/storage.md, "Damaged disk").
"""

from __future__ import annotations

import bisect
import shlex
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from raftmeta.logs import get_logger
from raftmeta.records import codec
from raftmeta.records.codec import LOG_OVERHEAD, Batch, BatchHeader, CorruptBatchError
from raftmeta.records.walk import PEEK, PEEK_SIZE, IntactBatches
from raftmeta.storage.damage import DamagedBatch, repaired_back, repaired_front
from raftmeta.storage.epoch_index import EpochIndex
from raftmeta.storage.errors import (
    HighWatermarkAboveLogError,
    InvalidAppendError,
    InvalidFileError,
    LogCorruptionError,
    LogGapError,
    MidLogCorruptionError,
    OffsetOutOfRangeError,
    StorageError,
)
from raftmeta.storage.fileio import fsync_dir
from raftmeta.storage.segment import ScanError, Segment, parse_log_file_name
from raftmeta.storage.snapshot import SnapshotId

DEFAULT_SEGMENT_BYTES = 16 * 1024 * 1024
DEFAULT_INDEX_INTERVAL_BYTES = 4096
# Smallest read a fetch issues, so a walk over small batches does not become one pread each.
READ_BLOCK_MIN_BYTES = 4096
ITER_READ_BYTES = 1024 * 1024
REPAIR_HINT = (
    "refusing to start: truncating here would drop data this node may have reported as persisted. "
    "Restore the file, or start with --repair-log to truncate here and refetch from the leader "
    "(docs/storage.md, Recovery)"
)
MID_LOG_HINT = (
    "this is corruption in the middle of the log, not a torn write at its tail. Refusing to start: "
    "truncating here would drop what follows, which this node may have acknowledged as committed. "
    "If the other voters are healthy, accept the truncation with `{command}` (or start once with "
    "--repair-log); the node then refetches them from the leader (docs/storage.md, Damaged disk)"
)


@dataclass(frozen=True, slots=True)
class StoredBatch:
    """One batch as the log holds it: ``damage`` None for an intact batch, else why its bytes
    (``data``) are not the batch of its slot."""

    base_offset: int
    epoch: int
    next_offset: int
    data: bytes
    damage: str | None
    # A damaged slot across an epoch change: the highest epoch its offsets may be of (damage.py).
    max_epoch: int | None = None


class SegmentLog:
    """An append-only, fsync-explicit log of batches in segment files. Use :meth:`open`."""

    def __init__(self, directory: Path, *, segment_bytes: int, index_interval_bytes: int) -> None:
        if segment_bytes < 1024:
            raise ValueError(f"segment_bytes must be >= 1024, got {segment_bytes}")
        if index_interval_bytes < 1:
            raise ValueError(f"index_interval_bytes must be >= 1, got {index_interval_bytes}")
        self.directory = directory
        self.segment_bytes = segment_bytes
        self.index_interval_bytes = index_interval_bytes
        self._segments: list[Segment] = []
        self._bases: list[int] = []
        self._epochs = EpochIndex()
        self._end = 0
        self._durable_end = 0
        self._lock = threading.Lock()
        self._closed = False
        self._log = get_logger("storage.log", log_dir=str(directory))
        # Recovery's rules for damage: report a batch whose slot is known (the node), and the
        # checkpointed high watermark that decides which batches were acknowledged.
        self._report_damage = False
        self._recovery_floor = 0

    # -- opening and recovery -----------------------------------------------------------------

    @classmethod
    def open(
        cls,
        directory: Path,
        *,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
        recovery_floor_offset: int = 0,
        snapshot_id: tuple[int, int] | None = None,
        repair: bool = False,
        recovery_floor_file: Path | None = None,
        report_damage: bool = False,
    ) -> SegmentLog:
        """Open (creating if needed) the log in ``directory`` and recover it.

        ``recovery_floor_offset`` is the checkpointed high watermark (read from
        ``recovery_floor_file``, which errors name): an intact log (with the snapshot) ending
        below it is refused with :class:`HighWatermarkAboveLogError`, and corruption below it is
        refused with :class:`LogCorruptionError` (naming file, byte position and offset) unless
        ``repair`` is true, in which case the log is truncated there and the node must refetch
        the rest from the leader. Damage at or above it with nothing intact after it (a torn
        write) is truncated and logged; damage followed by intact batches (in the same segment
        or a later one) is refused with :class:`MidLogCorruptionError`, unless ``repair``.

        ``snapshot_id`` is ``(end_offset, epoch)`` of the newest valid snapshot: segments wholly
        below it are deleted, and a log that does not reach it is restarted empty at its end
        offset. A log that starts above it (above 0 without one) is refused with
        :class:`LogGapError` before any file is changed, unless ``repair``, which discards it.

        ``report_damage`` (the node's mode): a damaged batch whose slot the batches around it
        prove (raftmeta/storage/damage.py) is neither refused nor truncated but kept, bytes and
        all, in :meth:`damaged_batches` for the raft core to repair from the quorum
        (:meth:`repair_batch`); only damage without a known slot meets the rules above.
        """
        log = cls(directory, segment_bytes=segment_bytes, index_interval_bytes=index_interval_bytes)
        log._report_damage = report_damage
        log._recovery_floor = recovery_floor_offset
        try:
            log._recover(recovery_floor_offset, snapshot_id, repair, recovery_floor_file)
        except BaseException:
            for seg in log._segments:  # a refusal to start must not leak file descriptors
                seg.close()
            raise
        return log

    def _recover(self, floor: int, snapshot_id: tuple[int, int] | None, repair: bool, floor_file: Path | None) -> None:
        started = time.perf_counter()
        self.directory.mkdir(parents=True, exist_ok=True)
        bases = _segment_bases(self.directory)
        # Before anything is changed on disk: a gap below the log is damage, not a tail to cut.
        gap = None if not bases else log_gap(bases[0], snapshot_id[0] if snapshot_id is not None else None)
        if gap is not None and not repair:
            self._refuse_gap(bases, snapshot_id)
        for stale in sorted(self.directory.glob("*.tmp")):
            self._log.info("removing an unfinished temporary file", file=str(stale))
            stale.unlink()
        segments = [
            Segment.open_existing(self.directory, b, index_interval_bytes=self.index_interval_bytes) for b in bases
        ]
        self._segments = segments
        scanned_bytes = 0
        min_epoch = 0
        clean_close_index: Segment | None = None
        i = 0
        while i < len(segments):
            seg = segments[i]
            last = i == len(segments) - 1
            if i > 0 and seg.base_offset != segments[i - 1].next_offset:
                prev = segments[i - 1]
                reason = (
                    f"the next segment file {seg.path.name} starts at offset {seg.base_offset}, not {prev.next_offset}"
                )
                self._cut(i - 1, ScanError(prev.size, prev.next_offset, reason, False), floor, repair)
                break
            error: ScanError | None = None
            try:
                seg.load_index()
                if last:
                    clean_close_index = seg  # removed below, once the open is not refused
            except InvalidFileError as exc:
                if not last or exc.reason != "missing":
                    self._log.warning(
                        "segment index unusable, rebuilding it by a scan", file=str(exc.path), reason=exc.reason
                    )
                scanned_bytes += seg.file_size()
                error = self._scan(seg, min_epoch, None if last else segments[i + 1].base_offset)
                if error is None and not last:
                    seg.fsync()
                    seg.write_index()
            if error is not None:
                self._cut(i, error, floor, repair)
                break
            min_epoch = seg.last_epoch if seg.last_epoch is not None else min_epoch
            i += 1
        self._segments = [s for s in segments if s.fd >= 0]
        if not self._segments:
            base = snapshot_id[0] if snapshot_id is not None else 0
            self._segments = [Segment.create(self.directory, base, index_interval_bytes=self.index_interval_bytes)]
            fsync_dir(self.directory)
        self._rebuild_offsets()
        offset, epoch = snapshot_id if snapshot_id is not None else (0, 0)
        if log_gap(self.log_start_offset, offset) is not None:  # only with repair: refused above otherwise
            self._log.error(
                "repairing: discarding a log that starts above the newest snapshot",
                log_start_offset=self.log_start_offset,
                log_end_offset=self._end,
                snapshot_offset=offset,
            )
            self.reset_to(offset, epoch)
        if snapshot_id is not None:
            self._attach_snapshot(snapshot_id)
        covered = max(self._end, snapshot_id[0] if snapshot_id is not None else 0)
        if covered < floor:
            if not repair:
                self._refuse_floor(covered, floor, floor_file)
            self._log.error(
                "repairing: log ends below the checkpointed high watermark",
                log_end_offset=covered,
                high_watermark=floor,
            )
        if clean_close_index is not None and clean_close_index is self._segments[-1]:
            # A clean close wrote the active segment's index; it goes stale with the next append,
            # so remove it (durably) before anything is written. Not earlier: a refusal to start
            # leaves every file as it was.
            clean_close_index.remove_index()
            fsync_dir(self.directory)
        # Whatever survived the crash may still sit only in the page cache (a process crash):
        # one fsync makes "everything recovered is durable" true before anything is reported.
        self._segments[-1].fsync()
        self._durable_end = self._end
        for seg in self._segments:
            self._report(seg)
        self._log.info(
            "log opened",
            log_start_offset=self.log_start_offset,
            log_end_offset=self._end,
            segments=len(self._segments),
            scanned_bytes=scanned_bytes,
            duration_ms=round((time.perf_counter() - started) * 1000, 3),
        )

    def _scan(self, seg: Segment, min_epoch: int, next_base: int | None) -> ScanError | None:
        return seg.scan(
            min_epoch, report_damage=self._report_damage, high_watermark=self._recovery_floor, next_base=next_base
        )

    def _report(self, seg: Segment) -> None:
        """Log each damaged batch of ``seg`` that recovery kept for repair."""
        for slot in seg.damaged.values():
            self._log.error(
                "damaged batch kept for repair from the quorum",
                file=str(seg.path),
                position=slot.position,
                offset=slot.base_offset,
                epoch=slot.epoch,
                max_epoch=slot.epoch_bound,
                end_offset=slot.next_offset,
                size=slot.size,
                reason=slot.reason,
                high_watermark=self._recovery_floor,
            )

    def _cut(self, index: int, error: ScanError, floor: int, repair: bool) -> None:
        """Truncate the log at a bad batch of segment ``index`` found by recovery; drop later segments.

        Refused below ``floor`` (the checkpointed high watermark), and at or above it when intact
        batches follow the bad one (corruption in the middle, not a torn tail), unless ``repair``.
        """
        seg = self._segments[index]
        later = self._segments[index + 1 :]
        dropped = seg.file_size() - error.position + sum(s.file_size() for s in later)
        fields: dict[str, str | int] = {
            "file": str(seg.path),
            "position": error.position,
            "offset": error.offset,
            "bytes_dropped": dropped,
            "reason": error.reason,
        }
        if error.offset < floor:
            if not repair:
                raise LogCorruptionError(
                    seg.path,
                    error.position,
                    error.offset,
                    f"{error.reason}, below the checkpointed high watermark {floor}; {REPAIR_HINT}",
                )
            self._log.error(
                "repairing: truncating corrupt data below the high watermark", high_watermark=floor, **fields
            )
        else:
            intact = intact_batches_after(seg, error, later)
            if intact.count > 0:
                self._refuse_mid_log(seg, error, intact, floor, repair, fields)
            elif error.truncated:
                self._log.warning("truncating a torn write at the log tail", **fields)
            else:
                self._log.warning("truncating a corrupt batch at the log tail", **fields)
        for s in reversed(later):
            s.delete()
        seg.remove_index()
        # The scan left the in-memory index covering exactly the valid prefix.
        seg.truncate(error.position, error.offset)
        seg.fsync()
        fsync_dir(self.directory)

    def _refuse_mid_log(
        self,
        seg: Segment,
        error: ScanError,
        intact: IntactBatches,
        floor: int,
        repair: bool,
        fields: dict[str, str | int],
    ) -> None:
        """Intact batches follow the bad one: refuse (MidLogCorruptionError), or log the repair."""
        details: dict[str, str | int] = {
            "intact_batches_after": intact.count,
            "intact_first_offset": intact.first_offset,
            "intact_last_offset": intact.last_offset,
            "high_watermark": floor,
        }
        if repair:
            self._log.error("repairing: truncating corruption in the middle of the log", **fields, **details)
            return
        command = repair_command(self.directory, error.offset)
        # Nothing is dropped: the same count, named for what it is.
        fields = {("bytes_after" if k == "bytes_dropped" else k): v for k, v in fields.items()}
        self._log.error(
            "refusing to start: corruption in the middle of the log, intact batches follow it",
            **fields,
            **details,
            repair_command=command,
        )
        span = f"(offsets {intact.first_offset}..{intact.last_offset})"
        follow = (
            f"1 intact batch {span} follows" if intact.count == 1 else f"{intact.count} intact batches {span} follow"
        )
        raise MidLogCorruptionError(
            seg.path,
            error.position,
            error.offset,
            f"{error.reason}; {follow} it: " + MID_LOG_HINT.format(command=command),
            intact_batches_after=intact.count,
            first_intact_offset=intact.first_offset,
            last_intact_offset=intact.last_offset,
            repair_command=command,
        )

    def _refuse_floor(self, covered: int, floor: int, floor_file: Path | None) -> None:
        """Raise HighWatermarkAboveLogError: an intact log ending below the checkpoint is the
        checkpoint's problem to report (its file named), not damage to truncate."""
        command = repair_command(self.directory, covered)
        data_dir = shlex.split(command)[4]
        self._log.error(
            "refusing to start: the checkpointed high watermark is above the log end",
            high_watermark=floor,
            log_end_offset=covered,
            checkpoint=str(floor_file),
            repair_command=command,
        )
        raise HighWatermarkAboveLogError(
            floor_file if floor_file is not None else self.directory,
            high_watermark=floor,
            log_end_offset=covered,
            dump_command=f"raftmeta log dump --data-dir {shlex.quote(data_dir)} --no-records",
            repair_command=command,
        )

    def _refuse_gap(self, bases: list[int], snapshot_id: tuple[int, int] | None) -> None:
        """Raise LogGapError for a log starting at ``bases[0]``, above the snapshot: reads only."""
        offset = snapshot_id[0] if snapshot_id is not None else 0
        end = _readonly_end_offset(self.directory, bases)
        command = repair_command(self.directory, offset)
        name = SnapshotId(*snapshot_id).file_name if snapshot_id is not None else None
        self._log.error(
            "refusing to start: the log starts above the newest snapshot",
            log_start_offset=bases[0],
            log_end_offset=end,
            snapshot=name,
            first_missing_offset=offset,
            repair_command=command,
        )
        raise LogGapError(
            self.directory,
            snapshot_file=name,
            first_missing_offset=offset,
            log_start_offset=bases[0],
            log_end_offset=end,
            repair_command=command,
        )

    def _rebuild_offsets(self) -> None:
        self._bases = [s.base_offset for s in self._segments]
        self._end = self._segments[-1].next_offset
        self._epochs.clear()
        try:
            for seg in self._segments:
                for epoch, start in seg.epochs:
                    self._epochs.assign(epoch, start)
        except ValueError as exc:
            raise StorageError(f"{self.directory}: segment epochs are inconsistent: {exc}") from None

    def _attach_snapshot(self, snapshot_id: tuple[int, int]) -> None:
        offset, epoch = snapshot_id
        # Kafka's truncateToLatestSnapshot: records past the snapshot whose epoch is older than
        # the snapshot's are a stale tail (a truncation the crash undid): the committed record
        # just below the snapshot is newer, so no committed record can follow with an older epoch.
        stale_tail = self._end > offset and self._epochs.last_epoch < epoch
        self._epochs.floor = (offset, epoch)
        if self._end < offset or stale_tail:
            self._log.info(
                "the log does not continue the snapshot; restarting it empty after the snapshot",
                log_start_offset=self.log_start_offset,
                log_end_offset=self._end,
                snapshot_offset=offset,
                snapshot_epoch=epoch,
            )
            self.reset_to(offset, epoch)
        else:
            self.delete_before(offset)

    # -- state --------------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        """First offset still held in a segment (at or below the newest snapshot's offset)."""
        with self._lock:
            return self._segments[0].base_offset

    @property
    def log_end_offset(self) -> int:
        """The offset the next appended record gets (LEO); includes not-yet-durable batches."""
        return self._end

    @property
    def durable_end_offset(self) -> int:
        """End of the prefix that has been fsynced and survives a crash."""
        return self._durable_end

    @property
    def last_epoch(self) -> int:
        """Epoch of the last batch (of the snapshot for an empty log; 0 for nothing at all)."""
        with self._lock:
            return self._epochs.last_epoch

    def epoch_end_offset(self, epoch: int) -> tuple[int, int]:
        """``(largest epoch <= epoch, its end offset)``, or ``(-1, -1)`` if the log knows none.

        As Kafka's LeaderEpochFileCache.endOffsetFor: the end offset of the latest epoch is the
        log end offset; epochs below the log start are answered from the snapshot floor.
        """
        with self._lock:
            return self._epochs.end_offset_for(epoch, self._end)

    def epoch_for_offset(self, offset: int) -> int:
        """Epoch of the batch holding ``offset`` (-1 if unknown)."""
        with self._lock:
            return self._epochs.epoch_for_offset(offset)

    def segment_files(self) -> list[Path]:
        with self._lock:
            return [s.path for s in self._segments]

    # -- writing (the writer thread) ----------------------------------------------------------

    def append(self, data: bytes) -> int:
        """Append one or more whole, already-framed batches (e.g. the leader's bytes from a Fetch).

        Validates every batch first (CRC, base offset == log end offset, epochs non-decreasing)
        and writes nothing if any fails (InvalidAppendError). Returns the new log end offset.
        Not durable until :meth:`flush`.
        """
        self._check_open()
        headers = self._validate(data)
        active = self._segments[-1]
        if active.size > 0 and active.size + len(data) > self.segment_bytes:
            active = self._roll()
        start = active.size
        try:
            active.write_at_end(data)
        except OSError:
            # Leave no half-written batch behind for a later fsync to make durable.
            with self._lock:
                active.truncate(start, active.next_offset)
            raise
        with self._lock:
            pos = start
            for h in headers:
                size = h.size_bytes
                active.note_batch(h.base_offset, h.epoch, h.next_offset, pos, size)
                self._epochs.assign(h.epoch, h.base_offset)
                pos += size
            self._end = headers[-1].next_offset
        return self._end

    def append_batch(
        self,
        epoch: int,
        records: Sequence[bytes],
        append_timestamp_ms: int,
        *,
        control: bool = False,
    ) -> BatchHeader:
        """Frame ``records`` as one batch at the log end offset in ``epoch`` and append it."""
        data = codec.encode_batch(self._end, epoch, records, append_timestamp_ms, control=control)
        self.append(data)
        return codec.decode_header(data)

    def _validate(self, data: bytes) -> list[BatchHeader]:
        if not data:
            raise InvalidAppendError("refused: nothing to append")
        expected = self._end
        last_epoch = self._epochs.last_epoch
        headers: list[BatchHeader] = []
        pos = 0
        while pos < len(data):
            try:
                h = codec.check_batch(data, pos)
            except CorruptBatchError as exc:
                raise InvalidAppendError(f"refused: {exc}") from None
            if h.base_offset != expected:
                raise InvalidAppendError(
                    f"refused: batch at byte {pos} starts at offset {h.base_offset}, the log ends at {expected}"
                )
            if h.epoch < last_epoch:
                raise InvalidAppendError(
                    f"refused: batch at offset {h.base_offset} has epoch {h.epoch}, the log is at epoch {last_epoch}"
                )
            headers.append(h)
            pos += h.size_bytes
            expected = h.next_offset
            last_epoch = h.epoch
        return headers

    def _roll(self) -> Segment:
        """Seal the active segment (fsync, persist its index) and start a new one at the end."""
        old = self._segments[-1]
        old.fsync()
        self._durable_end = max(self._durable_end, old.next_offset)
        new = Segment.create(self.directory, old.next_offset, index_interval_bytes=self.index_interval_bytes)
        # atomic_write fsyncs the directory, which also makes the new segment's entry durable.
        old.write_index()
        with self._lock:
            self._segments.append(new)
            self._bases.append(new.base_offset)
        return new

    def flush(self) -> int:
        """fsync everything appended so far; return the new durable end offset (group commit)."""
        self._check_open()
        end = self._end
        if end != self._durable_end:
            self._segments[-1].fsync()
            self._durable_end = end
        return end

    def truncate_to(self, offset: int) -> int:
        """Remove every batch at or after ``offset`` (divergence with the leader).

        If ``offset`` falls inside a batch, the whole batch goes: returns the real new log end
        offset (<= ``offset``). Durable on return. Truncating below the high watermark is the
        caller's bug: committed data is never truncated (DESIGN.md §9.3).
        """
        self._check_open()
        if offset >= self._end:
            return self._end
        doomed: list[Segment] = []
        with self._lock:
            if offset < self._segments[0].base_offset:
                raise OffsetOutOfRangeError(
                    f"cannot truncate to {offset}, below the log start {self._segments[0].base_offset}"
                )
            i = bisect.bisect_right(self._bases, offset) - 1
            seg = self._segments[i]
            try:
                pos, new_end = seg.locate(offset)
            except CorruptBatchError as exc:
                raise LogCorruptionError(seg.path, exc.position, exc.base_offset, exc.reason) from None
            doomed = self._segments[i + 1 :]
            if new_end == seg.base_offset and i > 0:
                doomed.insert(0, seg)
                i -= 1
                seg = self._segments[i]
            else:
                seg.truncate(pos, new_end)
            seg.remove_index()  # it is the active segment (again): its index lives in memory
            del self._segments[i + 1 :]
            del self._bases[i + 1 :]
            self._epochs.truncate_from_end(new_end)
            self._end = new_end
        for s in reversed(doomed):
            s.delete()
        seg.fsync()
        fsync_dir(self.directory)
        self._durable_end = new_end
        self._log.info("log truncated", requested_offset=offset, log_end_offset=new_end, segments_deleted=len(doomed))
        return new_end

    def delete_before(self, offset: int) -> int:
        """Delete every segment wholly below ``offset`` (a snapshot's end offset); new log start.

        The log keeps the epoch of the record just below ``offset`` as its floor, so divergence
        checks still answer for it. ``offset`` must not exceed the log end offset: a follower
        that installs a snapshot beyond its log calls :meth:`reset_to` instead.
        """
        self._check_open()
        if offset > self._end:
            raise OffsetOutOfRangeError(f"cannot delete below {offset}: beyond the log end {self._end}; use reset_to")
        active = self._segments[-1]
        if active.size > 0 and active.next_offset <= offset:
            self._roll()  # the active segment is wholly below too: seal it so it can go
        with self._lock:
            if offset > 0 and (self._epochs.floor is None or self._epochs.floor[0] < offset):
                self._epochs.floor = (offset, self._epochs.epoch_for_offset(offset - 1))
            k = 0
            while k < len(self._segments) - 1 and self._segments[k].next_offset <= offset:
                k += 1
            doomed = self._segments[:k]
            del self._segments[:k]
            del self._bases[:k]
            start = self._segments[0].base_offset
            self._epochs.truncate_from_start(start)
        for s in doomed:
            s.delete()
        if doomed:
            fsync_dir(self.directory)
            self._log.info("deleted segments below a snapshot", snapshot_offset=offset, segments_deleted=len(doomed))
        return start

    def reset_to(self, offset: int, epoch: int) -> None:
        """Discard the whole log and restart it empty at ``offset`` after a snapshot of ``epoch``.

        For a follower that installed a snapshot its log does not reach (KRaft's
        truncateToLatestSnapshot). Durable on return.
        """
        self._check_open()
        with self._lock:
            doomed = self._segments
            for s in reversed(doomed):
                s.delete()
            self._segments = [Segment.create(self.directory, offset, index_interval_bytes=self.index_interval_bytes)]
            self._bases = [offset]
            self._epochs.clear()
            self._epochs.floor = (offset, epoch)
            self._end = offset
        fsync_dir(self.directory)
        self._durable_end = offset
        self._log.info("log reset after a snapshot", offset=offset, epoch=epoch, segments_deleted=len(doomed))

    def close(self) -> None:
        """Flush, persist the active segment's index (a fast next open), close the files."""
        if self._closed:
            return
        self.flush()
        with self._lock:
            self._segments[-1].write_index()
            for s in self._segments:
                s.close()
            self._closed = True

    def __enter__(self) -> SegmentLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise StorageError(f"{self.directory}: the log is closed")

    # -- reading (any thread) -----------------------------------------------------------------

    def read(
        self,
        from_offset: int,
        max_bytes: int,
        *,
        upto_offset: int | None = None,
        verify_crc: bool = True,
    ) -> bytes:
        """Whole batches from the one holding ``from_offset``, at most ``max_bytes`` in total,
        except that the first batch is always returned whole (as Kafka's Fetch).

        Only batches that end at or below ``upto_offset`` (default: the log end offset) are
        returned. ``b""`` when ``from_offset`` is that limit or beyond it (but within the log).
        Raises OffsetOutOfRangeError outside ``[log_start_offset, log_end_offset]`` and
        LogCorruptionError (file, byte, offset) on a bad batch when ``verify_crc``.
        """
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be >= 1, got {max_bytes}")
        with self._lock:
            self._check_open()
            end = self._end
            start = self._segments[0].base_offset
            if from_offset < start or from_offset > end:
                raise OffsetOutOfRangeError(f"offset {from_offset} is outside the log [{start}, {end}]")
            limit = end if upto_offset is None else min(end, upto_offset)
            if from_offset >= limit:
                return b""
            i = bisect.bisect_right(self._bases, from_offset) - 1
            try:
                pos, expected = self._segments[i].locate(from_offset)
            except CorruptBatchError as exc:
                raise LogCorruptionError(self._segments[i].path, exc.position, exc.base_offset, exc.reason) from None
            parts: list[bytes | memoryview] = []
            taken = 0
            while i < len(self._segments):
                seg = self._segments[i]
                stop, taken = self._collect(seg, pos, expected, max_bytes, taken, limit, parts, verify_crc)
                if stop:
                    break
                i += 1
                pos = 0
                expected = self._segments[i].base_offset if i < len(self._segments) else -1
            return parts[0] if len(parts) == 1 and isinstance(parts[0], bytes) else b"".join(parts)

    def _collect(
        self,
        seg: Segment,
        pos: int,
        expected: int,
        max_bytes: int,
        taken: int,
        limit: int,
        parts: list[bytes | memoryview],
        verify: bool,
    ) -> tuple[bool, int]:
        """Add whole batches of ``seg`` from ``pos`` (where the batch at offset ``expected`` starts)
        to ``parts``; (stop reading, bytes taken).

        With ``verify``, every batch gets the checks recovery's scan makes -- length, magic, count,
        contiguity (the base offset is not covered by the CRC), the epoch the log's epoch index
        records for it, and the CRC -- before it is taken or allowed to end the read: sealed
        segments are not rescanned when the log opens, so a read is where their damage shows,
        and it must show as LogCorruptionError rather than as a short or reordered log.
        """
        block = b""
        block_pos = pos
        run_start = 0  # start (in block) of the batches taken from this block so far
        value = codec.crc32c
        last: tuple[int, int] | None = None  # position and base offset of the last batch taken
        try:
            while pos < seg.size:
                if limit <= expected < seg.next_offset:
                    # The read ends inside this segment: never look at a header past it (it may be
                    # damaged, kept for repair). At the segment's end the checks below still run.
                    return True, taken
                rel = pos - block_pos
                if rel + PEEK_SIZE > len(block):
                    _flush_run(parts, block, run_start, rel)
                    block_pos, rel, run_start = pos, 0, 0
                    block = seg.read(pos, min(max(max_bytes - taken, READ_BLOCK_MIN_BYTES), seg.size - pos))
                    if len(block) < PEEK_SIZE:
                        raise CorruptBatchError(
                            f"{len(block)} bytes left in the segment, less than a batch header",
                            position=pos,
                            base_offset=expected,
                        )
                base, length, epoch, magic, crc, _attrs, count = PEEK.unpack_from(block, rel)
                size = LOG_OVERHEAD + length
                if size < codec.HEADER_SIZE:  # damaged length: never walk backwards or in place
                    raise CorruptBatchError(f"batch_length {length} out of range", position=pos, base_offset=expected)
                if verify:
                    problem = self._header_problem(seg, base, expected, size, epoch, magic, count)
                    if problem is not None:
                        raise CorruptBatchError(problem, position=pos, base_offset=expected)
                if taken > 0 and taken + size > max_bytes:
                    return True, taken
                if rel + size > len(block):
                    _flush_run(parts, block, run_start, rel)
                    block_pos, rel, run_start = pos, 0, 0
                    block = seg.read(pos, min(max(size, max_bytes - taken), seg.size - pos))
                    if len(block) < size:
                        raise CorruptBatchError(
                            f"batch of {size} bytes runs past the segment end", position=pos, base_offset=expected
                        )
                if verify and value(block[rel + codec.CRC_START : rel + size]) != crc:
                    raise CorruptBatchError("CRC32C mismatch", position=pos, base_offset=expected)
                # Only now may the batch end the read: a damaged count must not stop it silently.
                if base + count > limit:
                    return True, taken
                last = (pos, base)
                expected = base + count
                taken += size
                pos += size
            if verify and last is not None and expected != seg.next_offset:
                # The counts do not add up to the offsets the segment holds (the next segment's
                # name says where it starts): a count was damaged and its CRC recomputed.
                raise CorruptBatchError(
                    f"the segment's batches end at offset {expected}, not at its end offset {seg.next_offset}",
                    position=last[0],
                    base_offset=last[1],
                )
            return False, taken
        except CorruptBatchError as exc:
            raise LogCorruptionError(seg.path, exc.position, exc.base_offset, exc.reason) from None
        finally:
            _flush_run(parts, block, run_start, pos - block_pos)

    def _header_problem(
        self, seg: Segment, base: int, expected: int, size: int, epoch: int, magic: int, count: int
    ) -> str | None:
        """What is wrong with a batch header found in ``seg`` where the batch at offset ``expected``
        should be (the segment's end offset comes from its index or scan, not from this header)."""
        if size > codec.BATCH_BYTES_MAX:
            return f"batch of {size} bytes exceeds BATCH_BYTES_MAX={codec.BATCH_BYTES_MAX}"
        if magic != codec.MAGIC:
            return f"magic {magic}, expected {codec.MAGIC}"
        if count < 1:
            return f"record_count {count} < 1"
        if base != expected:
            return f"base offset {base}, expected {expected}"
        if base + count > seg.next_offset:
            return f"{count} records from offset {base} run past the segment's end offset {seg.next_offset}"
        indexed = self._epochs.epoch_for_offset(base)
        if epoch != indexed:
            return f"epoch {epoch}, the log's epoch index has {indexed} for offset {base}"
        return None

    # -- damaged batches kept for repair (``report_damage``) ------------------------------------

    def damaged_batches(self) -> list[DamagedBatch]:
        """The damaged batches whose slot is known, kept on disk until :meth:`repair_batch`, by offset."""
        with self._lock:
            return sorted((d for seg in self._segments for d in seg.damaged.values()), key=lambda d: d.base_offset)

    def iter_stored(self, from_offset: int) -> Iterator[StoredBatch]:
        """Every batch from ``from_offset`` (a batch boundary), intact or damaged with a known slot,
        for the node's start: what the raft core is built from. A bad batch met on the way that
        recovery did not scan (a sealed or cleanly closed segment is trusted through its index) has
        its segment rescanned: with ``report_damage`` its slot is then known, or the read's
        LogCorruptionError stands, naming file, byte and offset."""
        offset = from_offset
        straddling = next((d for d in self.damaged_batches() if d.base_offset < offset < d.next_offset), None)
        if straddling is not None:
            # A damaged range of several batches holds the offset the node's log starts at (the
            # newest snapshot's end): where that batch starts inside the range no byte says.
            with self._lock:
                path = self._segment_of(straddling.base_offset).path
            raise LogCorruptionError(
                path,
                straddling.position,
                straddling.base_offset,
                f"{straddling.reason}; it holds offset {offset}, where the log starts after the newest snapshot, "
                f"at a byte position no header gives; {REPAIR_HINT}",
            )
        while True:
            damaged = next((d for d in self.damaged_batches() if d.base_offset >= offset), None)
            try:
                upto = damaged.base_offset if damaged is not None else None
                for batch in self.iter_batches(offset, upto_offset=upto):
                    yield StoredBatch(batch.base_offset, batch.epoch, batch.next_offset, batch.data, None)
                    offset = batch.next_offset
            except LogCorruptionError as error:
                self._rescan(error)
                continue
            if damaged is None:
                return
            yield StoredBatch(
                damaged.base_offset,
                damaged.epoch,
                damaged.next_offset,
                self._raw(damaged),
                damaged.reason,
                damaged.max_epoch,
            )
            offset = damaged.next_offset

    def _raw(self, slot: DamagedBatch) -> bytes:
        with self._lock:
            return self._segment_of(slot.base_offset).read(slot.position, slot.size)

    def _segment_of(self, offset: int) -> Segment:
        return self._segments[bisect.bisect_right(self._bases, offset) - 1]

    def _rescan(self, error: LogCorruptionError) -> None:
        """Rescan the segment a read found damaged, keeping the damaged batches whose slot is known;
        re-raise ``error`` when that finds no new one to report."""
        if not self._report_damage:
            raise error
        with self._lock:
            i = next((k for k, seg in enumerate(self._segments) if seg.path == error.path), None)
            if i is None:
                raise error
            seg = self._segments[i]
            before = (seg.next_offset, seg.size, set(seg.damaged))
            min_epoch = next((s.last_epoch for s in reversed(self._segments[:i]) if s.last_epoch is not None), 0)
            next_base = self._segments[i + 1].base_offset if i + 1 < len(self._segments) else None
            found = self._scan(seg, min_epoch, next_base)
            if found is not None or (seg.next_offset, seg.size) != before[:2] or set(seg.damaged) == before[2]:
                raise LogCorruptionError(
                    error.path, error.position, error.offset, f"{error.reason}; {REPAIR_HINT}"
                ) from None
            self._rebuild_offsets()
        self._report(seg)

    def repair_batch(self, data: bytes) -> None:
        """Overwrite a damaged batch with an intact copy of it from a peer (the raft core's
        ``Ready.repair``): the copy must pass its CRC and name the damaged slot's base offset,
        epoch and end, and be its size (same offset and epoch: the same batch on every replica).
        A damaged range of several batches (damage.py) is repaired from its front, one batch at a
        time: the copy then names the slot's base offset and epoch and ends inside it, and the
        rest of the slot stays damaged. In place and fsynced on return; nothing else of the log
        changes. StorageError otherwise, nothing written."""
        self._check_open()
        try:
            header = codec.check_batch(data)
        except CorruptBatchError as exc:
            raise InvalidAppendError(f"refused repair: {exc}") from None
        with self._lock:
            seg = self._segment_of(header.base_offset)
            slot = seg.damaged.get(header.base_offset)
            holding = next(
                (d for d in seg.damaged.values() if d.base_offset < header.base_offset < d.next_offset), None
            )
        if slot is None and holding is not None and header.size_bytes == len(data):
            self._repair_back(seg, holding, header, data)
            return
        if slot is None or header.size_bytes != len(data):
            raise InvalidAppendError(
                f"refused repair: no damaged batch at offset {header.base_offset} in {seg.path}"
                if slot is not None or header.size_bytes == len(data)
                else f"refused repair: {len(data)} bytes where the batch header says {header.size_bytes}"
            )
        try:
            rest = repaired_front(slot, header.base_offset, header.epoch, header.next_offset, len(data))
        except ValueError as exc:
            raise InvalidAppendError(f"refused repair in {seg.path}: {exc}") from None
        seg.overwrite(slot, data, rest)  # not under the lock: readers never wait for the disk
        with self._lock:
            seg.repaired(slot, header.epoch, rest)
            if header.epoch != slot.epoch:
                self._rebuild_offsets()  # an epoch starts inside a slot that spanned epochs
        self._log.warning(
            "damaged batch repaired from the quorum",
            file=str(seg.path),
            position=slot.position,
            offset=slot.base_offset,
            epoch=header.epoch,
            end_offset=header.next_offset,
            damaged_left_of_range=0 if rest is None else rest.next_offset - rest.base_offset,
        )

    def _repair_back(self, seg: Segment, slot: DamagedBatch, header: codec.BatchHeader, data: bytes) -> None:
        """:meth:`repair_batch` for a copy at the back of a damaged range (damage.repaired_back)."""
        try:
            front = repaired_back(slot, header.base_offset, header.epoch, header.next_offset, len(data))
        except ValueError as exc:
            raise InvalidAppendError(f"refused repair in {seg.path}: {exc}") from None
        seg.overwrite_back(slot, data, front)  # not under the lock: readers never wait for the disk
        with self._lock:
            seg.repaired_back(front, header.base_offset)
        self._log.warning(
            "damaged batch repaired from the quorum",
            file=str(seg.path),
            position=front.position + front.size,
            offset=header.base_offset,
            epoch=header.epoch,
            end_offset=header.next_offset,
            damaged_left_of_range=front.next_offset - front.base_offset,
        )

    def iter_batches(self, from_offset: int, *, upto_offset: int | None = None) -> Iterator[Batch]:
        """Every batch from the one holding ``from_offset`` (CRC-checked), for replay and scans."""
        offset = from_offset
        while True:
            data = self.read(offset, ITER_READ_BYTES, upto_offset=upto_offset)
            if not data:
                return
            batch: Batch | None = None
            for batch in codec.iter_batches(data, verify_crc=False):
                yield batch
            assert batch is not None
            offset = batch.next_offset


def _flush_run(parts: list[bytes | memoryview], block: bytes, start: int, end: int) -> None:
    if end > start:
        parts.append(block if start == 0 and end == len(block) else memoryview(block)[start:end])


# -- telling a torn tail from corruption in the middle ---------------------------------------------


def intact_batches_after(segment: Segment, error: ScanError, later: Sequence[Segment]) -> IntactBatches:
    """The intact batches past the bad batch ``error`` found in ``segment``: further on in the
    same file (resynchronising past the damage) and in every ``later`` segment file. None
    means the damage is a torn tail; any means it is corruption in the middle of the log."""
    found = segment.intact_batches_from(error.position + 1, error.offset)
    for seg in later:
        found = found.plus(seg.intact_batches_from(0, seg.base_offset))
    return found


def log_gap(log_start_offset: int, snapshot_offset: int | None) -> tuple[int, int] | None:
    """The offsets ``(first, last)`` held in no snapshot and no segment when the log starts above
    the newest usable snapshot's end offset (above 0 with no snapshot), else None.

    Segments are deleted only below a snapshot, so such a gap means a newer snapshot was lost:
    recovery refuses it (LogGapError) and ``raftmeta log dump`` reports it.
    """
    floor = snapshot_offset if snapshot_offset is not None else 0
    return (floor, log_start_offset - 1) if log_start_offset > floor else None


def _readonly_end_offset(directory: Path, bases: list[int]) -> int:
    """The end of the intact batches of the last segment in ``directory``, changing no file."""
    seg = Segment.open_existing(directory, bases[-1], index_interval_bytes=DEFAULT_INDEX_INTERVAL_BYTES)
    try:
        try:
            seg.load_index()
        except InvalidFileError:
            seg.scan(0)  # the valid prefix is what counts; damage is not this refusal's subject
        return seg.next_offset
    finally:
        seg.close()


def repair_command(log_directory: Path, offset: int) -> str:
    """The ``raftmeta log repair`` command line that truncates the log in ``log_directory`` at ``offset``."""
    from raftmeta.storage.datadir import LOG_DIR_NAME  # datadir imports this module

    data_dir = log_directory.parent if log_directory.name == LOG_DIR_NAME else log_directory
    return f"raftmeta log repair --data-dir {shlex.quote(str(data_dir))} --truncate-at {offset}"


# -- offline truncation (``raftmeta log repair``) ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class TruncationPlan:
    """What :func:`apply_truncation` will do to a stopped node's log directory: truncate
    ``segment`` at byte ``position`` (where the batch at ``offset`` starts, or its end) and
    delete ``deleted_segments`` with their index files."""

    directory: Path
    offset: int
    segment: Path
    segment_size: int
    position: int
    deleted_segments: tuple[Path, ...]
    bytes_dropped: int
    dropped: IntactBatches  # the intact batches among the bytes dropped
    damage: ScanError | None  # the first bad batch of ``segment``, if its scan met one
    log_start_offset: int
    # ``offset`` when it is below the log start (a log gap): every segment goes and the log
    # restarts empty there, at the newest snapshot's end offset.
    restart: bool = False

    @property
    def changes_nothing(self) -> bool:
        return self.position == self.segment_size and not self.deleted_segments and not self.restart


def first_segment_base(directory: Path) -> int | None:
    """The base offset of the first segment file in ``directory`` (None: none), from the names alone."""
    bases = _segment_bases(directory) if directory.is_dir() else []
    return bases[0] if bases else None


def _segment_bases(directory: Path) -> list[int]:
    return sorted(b for b in (parse_log_file_name(p.name) for p in directory.iterdir()) if b is not None)


def _check_earlier_segments(directory: Path, bases: list[int], i: int, offset: int) -> int:
    """Check the segments before ``bases[i]`` as recovery would (trust a valid index, else scan)
    and return the last epoch they hold; ValueError if they are damaged or leave a gap, since an
    offset after that damage is not reached through intact batches."""
    min_epoch = 0
    for j in range(i):
        seg = Segment.open_existing(directory, bases[j], index_interval_bytes=DEFAULT_INDEX_INTERVAL_BYTES)
        try:
            try:
                seg.load_index()
            except InvalidFileError:
                damage = seg.scan(min_epoch)
                if damage is not None:
                    raise ValueError(_past_damage(offset, seg.path, damage)) from None
            if seg.next_offset != bases[j + 1]:
                raise ValueError(
                    f"offset {offset} is past a gap: {seg.path.name} ends at offset {seg.next_offset} and the next "
                    f"segment file starts at {bases[j + 1]}: the nearest boundary is {seg.next_offset}"
                )
            min_epoch = seg.last_epoch if seg.last_epoch is not None else min_epoch
        finally:
            seg.close()
    return min_epoch


def plan_truncation(directory: Path, offset: int, snapshot_offset: int | None = None) -> TruncationPlan:
    """Plan truncating the log in ``directory`` (of a stopped node) so that it ends at ``offset``.

    Reads only. ``offset`` must be a batch boundary of the segment holding it, reached through
    intact batches from the segment's start (the checks of recovery's scan: CRC, contiguity,
    epochs); otherwise ValueError says why and names the nearest boundaries. The plan counts
    what is dropped, including the intact batches past any damage.

    A log that starts above ``snapshot_offset`` (the newest snapshot's end offset, None for no
    snapshot: 0), a :func:`log_gap`, may be discarded whole by an ``offset`` equal to that end
    offset: the plan then restarts the log empty there.
    """
    bases = _segment_bases(directory)
    if not bases:
        raise ValueError(f"{directory} holds no segment files")
    i = bisect.bisect_right(bases, offset) - 1
    if i < 0:
        gap = log_gap(bases[0], snapshot_offset)
        if gap is None or offset != gap[0]:
            only = "" if gap is None else f": a log with a gap below it can be restarted empty only at {gap[0]}, "
            only += "" if gap is None else "the newest snapshot's end offset"
            raise ValueError(f"offset {offset} is below the log start {bases[0]}{only}")
        return _plan_restart(directory, bases, offset)
    min_epoch = _check_earlier_segments(directory, bases, i, offset)
    # An index entry for every batch: every batch boundary of the segment is then known.
    seg = Segment.open_existing(directory, bases[i], index_interval_bytes=1)
    later = [Segment.open_existing(directory, b, index_interval_bytes=1) for b in bases[i + 1 :]]
    try:
        damage = seg.scan(min_epoch)
        boundaries = [*zip(seg.offsets, seg.positions, strict=True), (seg.next_offset, seg.size)]
        if damage is not None:
            # An epoch error cuts before an earlier batch than the one that showed it.
            boundaries = [(o, p) for o, p in boundaries if p < damage.position] + [(damage.offset, damage.position)]
        positions = dict(boundaries)
        end = boundaries[-1][0]
        if offset not in positions:
            raise ValueError(_not_a_boundary(seg, offset, boundaries, damage, bases, i))
        position = positions[offset]
        dropped = IntactBatches()
        if offset < end:
            count = sum(1 for o, _ in boundaries[:-1] if o >= offset)
            dropped = IntactBatches(count, offset, end - 1)
        if damage is not None:
            dropped = dropped.plus(intact_batches_after(seg, damage, later))
        else:
            for s in later:
                dropped = dropped.plus(s.intact_batches_from(0, s.base_offset))
        size = seg.file_size()
        return TruncationPlan(
            directory=directory,
            offset=offset,
            segment=seg.path,
            segment_size=size,
            position=position,
            deleted_segments=tuple(s.path for s in later),
            bytes_dropped=size - position + sum(s.file_size() for s in later),
            dropped=dropped,
            damage=damage,
            log_start_offset=bases[0],
        )
    finally:
        seg.close()
        for s in later:
            s.close()


def _plan_restart(directory: Path, bases: list[int], offset: int) -> TruncationPlan:
    """Plan discarding every segment of ``directory`` and restarting the log empty at ``offset``."""
    segments = [Segment.open_existing(directory, b, index_interval_bytes=1) for b in bases]
    try:
        dropped = IntactBatches()
        for seg in segments:
            dropped = dropped.plus(seg.intact_batches_from(0, seg.base_offset))
        sizes = [seg.file_size() for seg in segments]
        return TruncationPlan(
            directory=directory,
            offset=offset,
            segment=segments[0].path,
            segment_size=sizes[0],
            position=0,
            deleted_segments=tuple(seg.path for seg in segments[1:]),
            bytes_dropped=sum(sizes),
            dropped=dropped,
            damage=None,
            log_start_offset=bases[0],
            restart=True,
        )
    finally:
        for seg in segments:
            seg.close()


def _not_a_boundary(
    seg: Segment,
    offset: int,
    boundaries: list[tuple[int, int]],
    damage: ScanError | None,
    bases: list[int],
    i: int,
) -> str:
    end = boundaries[-1][0]
    if offset < end:
        below = max(o for o, _ in boundaries if o < offset)
        above = min(o for o, _ in boundaries if o > offset)
        return (
            f"offset {offset} is inside the batch holding offsets {below}..{above - 1} of {seg.path}, not at a "
            f"batch boundary: the nearest boundaries are {below} and {above}"
        )
    if damage is not None:
        return _past_damage(offset, seg.path, damage)
    if i == len(bases) - 1:
        return f"offset {offset} is beyond the log end {end}"
    return (
        f"offset {offset} is in no segment: {seg.path.name} ends at offset {end} and the next segment file starts "
        f"at {bases[i + 1]}: the nearest boundary is {end}"
    )


def _past_damage(offset: int, path: Path, damage: ScanError) -> str:
    return (
        f"offset {offset} is past offset {damage.offset}, where the damage in {path} at byte {damage.position} starts "
        f"({damage.reason}), so it is not reached through intact batches: the nearest boundary is {damage.offset}"
    )


def apply_truncation(plan: TruncationPlan) -> None:
    """Carry out a :func:`plan_truncation`: delete the later segment files and their indexes
    (newest first), drop the truncated segment's index, truncate it, fsync the file and the
    directory. Refuses (StorageError) if the segment changed size since the plan: the node
    must be stopped."""
    base = parse_log_file_name(plan.segment.name)
    assert base is not None
    seg = Segment.open_existing(plan.directory, base, index_interval_bytes=1)
    try:
        if seg.file_size() != plan.segment_size:
            raise StorageError(
                f"{plan.segment} is {seg.file_size()} bytes, not {plan.segment_size} as planned: "
                "is the node still running? Stop it first"
            )
        for path in reversed(plan.deleted_segments):
            later = parse_log_file_name(path.name)
            assert later is not None
            Segment.open_existing(plan.directory, later, index_interval_bytes=1).delete()
        if plan.restart:
            seg.delete()
            Segment.create(plan.directory, plan.offset, index_interval_bytes=1).close()
        else:
            seg.remove_index()
            seg.truncate(plan.position, plan.offset)
            seg.fsync()
    finally:
        seg.close()
    fsync_dir(plan.directory)
    get_logger("storage.log", log_dir=str(plan.directory)).warning(
        "log truncated offline",
        file=str(plan.segment),
        position=plan.position,
        offset=plan.offset,
        bytes_dropped=plan.bytes_dropped,
        intact_batches_dropped=plan.dropped.count,
        segments_deleted=[p.name for p in ((plan.segment,) if plan.restart else ()) + plan.deleted_segments],
        restarted_empty=plan.restart,
    )
