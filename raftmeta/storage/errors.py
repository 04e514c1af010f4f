"""Errors raised by the storage drivers.

Every error that concerns a file names it (and, for the log, the byte position and offset),
so an operator reading a refusal to start knows exactly what to inspect or repair.
"""

from __future__ import annotations

from pathlib import Path


class StorageError(Exception):
    """Base class of every storage failure that is not a programming error."""


class DataDirMismatchError(StorageError):
    """The data dir belongs to another cluster or node (meta.properties disagrees)."""


class InvalidFileError(StorageError):
    """A small state file (meta.properties, quorum-state, HW checkpoint, index) is unreadable."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class LogCorruptionError(StorageError):
    """Corrupt log data where truncating it could lose data the node already reported.

    Raised by recovery when the damage sits below the checkpointed high watermark (or, as
    :class:`MidLogCorruptionError`, when intact batches follow it), and by reads that meet a bad
    batch. ``path`` and ``position`` locate the bad bytes; ``offset`` is
    the first log offset that is not intact.
    """

    def __init__(self, path: Path, position: int, offset: int, reason: str) -> None:
        super().__init__(f"{path}: corrupt log data at byte {position} (offset {offset}): {reason}")
        self.path = path
        self.position = position
        self.offset = offset
        self.reason = reason


class MidLogCorruptionError(LogCorruptionError):
    """Corrupt log data followed by intact batches: damage in the middle of the log, not a torn
    write at its tail, so recovery refuses to truncate it even at or above the checkpointed high
    watermark (docs/storage.md, "Damaged disk").

    ``intact_batches_after`` is how many CRC-valid batches follow the damage (in the same
    segment and in later ones), covering ``first_intact_offset`` .. ``last_intact_offset``;
    ``repair_command`` is the ``raftmeta log repair`` command line that accepts the truncation.
    """

    def __init__(
        self,
        path: Path,
        position: int,
        offset: int,
        reason: str,
        *,
        intact_batches_after: int,
        first_intact_offset: int,
        last_intact_offset: int,
        repair_command: str,
    ) -> None:
        super().__init__(path, position, offset, reason)
        self.intact_batches_after = intact_batches_after
        self.first_intact_offset = first_intact_offset
        self.last_intact_offset = last_intact_offset
        self.repair_command = repair_command


class InvalidAppendError(StorageError):
    """An append was refused (bad CRC, not contiguous, epoch going backwards); nothing was written."""


class OffsetOutOfRangeError(StorageError):
    """A read or truncation asked for an offset outside [log_start_offset, log_end_offset]."""


class SnapshotError(StorageError):
    """A snapshot file is corrupt, incomplete or misnamed; names the file."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"snapshot {path}: {reason}")
        self.path = path
        self.reason = reason


class LogGapError(StorageError):
    """The log starts above the newest usable snapshot: offsets ``first_missing_offset`` ..
    ``log_start_offset - 1`` are in no snapshot and no segment. Segments are deleted only below a
    snapshot, so a newer snapshot (ending between ``log_start_offset`` and ``log_end_offset``)
    was lost: an operator's mistake or a partial restore. Nothing is changed on disk; the
    message names the gap, the snapshot the log should continue (``snapshot_file``, None when
    there is none) and ``repair_command``, which discards the log (docs/storage.md, "Damaged disk").
    """

    def __init__(
        self,
        directory: Path,
        *,
        snapshot_file: str | None,
        first_missing_offset: int,
        log_start_offset: int,
        log_end_offset: int,
        repair_command: str,
    ) -> None:
        newest = "no snapshot" if snapshot_file is None else f"the newest snapshot {snapshot_file}"
        super().__init__(
            f"{directory}: the log starts at offset {log_start_offset}, but {newest} ends at offset "
            f"{first_missing_offset}: offsets {first_missing_offset}..{log_start_offset - 1} are in no snapshot and "
            f"no segment. Segments are deleted only below a snapshot, so a newer snapshot file "
            f"(<end offset>-<epoch>.checkpoint, a snapshot ending between offsets {log_start_offset} and "
            f"{log_end_offset}) is missing. Refusing to start; nothing was changed. Restore the missing snapshot "
            f"file, or, if the other voters are healthy, discard this node's log with `{repair_command}` (or start "
            "once with --repair-log); the node then refetches from the leader (docs/storage.md, Damaged disk)"
        )
        self.directory = directory
        self.snapshot_file = snapshot_file
        self.first_missing_offset = first_missing_offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset
        self.repair_command = repair_command


class HighWatermarkAboveLogError(StorageError):
    """The checkpointed high watermark is above the end of the (intact) log and snapshot: the
    checkpoint claims committed offsets this node does not hold. A problem of the checkpoint's
    (restored from another backup, written by hand) or a lost log tail; either way nothing is
    changed, and ``repair_command`` lowers the checkpoint to the log end without touching a
    segment (docs/storage.md, "Damaged disk").
    """

    def __init__(
        self, checkpoint: Path, *, high_watermark: int, log_end_offset: int, dump_command: str, repair_command: str
    ) -> None:
        super().__init__(
            f"{checkpoint}: the checkpointed high watermark {high_watermark} is above the end of the log and "
            f"snapshot, {log_end_offset}: offsets {log_end_offset}..{high_watermark - 1} it says this node holds "
            "as committed are not here. Either the checkpoint does not belong with this log (restored from "
            "another backup, edited) or the log lost its tail (`" + dump_command + "` shows the log). Refusing to "
            "start; nothing was changed. If the other voters are healthy, lower the checkpoint to the log end "
            f"with `{repair_command}` (it changes no segment) or start once with --repair-log; the node then "
            "refetches the rest from the leader (docs/storage.md, Damaged disk)"
        )
        self.path = checkpoint
        self.high_watermark = high_watermark
        self.log_end_offset = log_end_offset
        self.repair_command = repair_command
