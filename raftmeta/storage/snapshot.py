"""Snapshots: the metadata image at an offset, framed as batches (KIP-630, DESIGN.md §4).

A snapshot is ``__cluster_metadata-0/<20-digit end offset>-<10-digit epoch>.checkpoint``
(Kafka's naming). The end offset is exclusive: the snapshot holds the effect of every record
below it, and the record just below it has ``epoch``. The file is a sequence of batches in the
log's format (docs/log-format.md), all with that epoch and offsets counting from 0:

1. a control batch holding exactly one ``SnapshotHeaderRecord``;
2. data batches holding the image's ``MetadataRecord``s, as the controller serialized them;
3. a control batch holding exactly one ``SnapshotFooterRecord``.

Every batch has its CRC32C; the header and footer prove the file is complete. Files are written
under ``<name>.part``, fsynced, renamed and the directory fsynced, so a name ending in
``.checkpoint`` is always a whole snapshot unless the disk damaged it later -- which
:func:`read_snapshot` detects. Storage never looks inside the image's records.

For FetchSnapshot, :class:`SnapshotReader` serves raw byte ranges and
:class:`SnapshotChunkWriter` receives them into ``.part`` and validates before renaming.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path
from typing import NamedTuple

from raftmeta.logs import get_logger
from raftmeta.records import codec
from raftmeta.records.codec import CorruptBatchError, FramedRecords
from raftmeta.records.decode import NotARecordError, parse_record
from raftmeta.records.snapshot_batches import (
    DEFAULT_BATCH_BYTES,
    DEFAULT_BATCH_RECORDS,
    SNAPSHOT_VERSION,
    snapshot_batches,
)
from raftmeta.storage.errors import SnapshotError
from raftmeta.storage.fileio import fsync_dir, pread_exact, pwrite_all, set_aside, write_all
from raftmeta.v1 import records_pb2

SNAPSHOT_SUFFIX = ".checkpoint"
PART_SUFFIX = ".part"
CORRUPT_SUFFIX = ".corrupt"
KEEP_SNAPSHOTS = 2
_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")


class SnapshotId(NamedTuple):
    """``(end_offset, epoch)``: the snapshot covers offsets below ``offset``; the last had ``epoch``."""

    offset: int
    epoch: int

    @property
    def file_name(self) -> str:
        return f"{self.offset:020d}-{self.epoch:010d}{SNAPSHOT_SUFFIX}"


def parse_snapshot_name(name: str) -> SnapshotId | None:
    match = _NAME.match(name)
    if match is None:
        return None
    return SnapshotId(int(match.group(1)), int(match.group(2)))


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A validated snapshot: its id, header and the image's serialized MetadataRecords."""

    snapshot_id: SnapshotId
    path: Path
    last_contained_log_timestamp_ms: int
    records: list[bytes]
    size_bytes: int
    # The voter set in force at the snapshot's end (KIP-853), when the writer knew one.
    voters: records_pb2.VotersRecord | None = None
    # The image's records in the file (``records`` may have been left out: ``keep_records``).
    record_count: int = 0


def encode_snapshot(
    snapshot_id: SnapshotId,
    records: Iterable[bytes | FramedRecords],
    *,
    last_contained_log_timestamp_ms: int,
    append_timestamp_ms: int,
    batch_records: int = DEFAULT_BATCH_RECORDS,
    batch_bytes: int = DEFAULT_BATCH_BYTES,
    voters: records_pb2.VotersRecord | None = None,
) -> Iterator[bytes]:
    """The batches of snapshot ``snapshot_id``'s file (raftmeta/records/snapshot_batches.py, which
    the simulator encodes with too)."""
    return snapshot_batches(
        snapshot_id.epoch,
        records,
        last_contained_log_timestamp_ms=last_contained_log_timestamp_ms,
        append_timestamp_ms=append_timestamp_ms,
        batch_records=batch_records,
        batch_bytes=batch_bytes,
        voters=voters,
    )


def decode_snapshot(path: Path, data: bytes, snapshot_id: SnapshotId, *, keep_records: bool = True) -> Snapshot:
    """Validate a whole snapshot file's bytes; raise SnapshotError naming what is wrong.
    ``keep_records`` False checks every record's framing all the same, without making the
    records (checking a snapshot just written: a list of ten million records would be ~0.6 GiB
    of a node's peak for nothing, and making them is two thirds of the check's time)."""
    # The batches are checked where they lie in ``data``: a copy of each (as iter_batches makes)
    # would double the file's size in memory while it is read -- 1.1 GiB at 10M partitions.
    headers, _, error = codec.scan_valid_prefix(data)
    if error is not None:
        raise SnapshotError(path, str(error))
    if len(headers) < 2:
        raise SnapshotError(path, f"{len(headers)} batches: a snapshot has at least a header and a footer")
    positions = [0, *accumulate(h.size_bytes for h in headers)]
    expected = 0
    for batch_header in headers:
        if batch_header.base_offset != expected:
            raise SnapshotError(path, f"batch at offset {batch_header.base_offset}, expected {expected}")
        if batch_header.epoch != snapshot_id.epoch:
            raise SnapshotError(
                path,
                f"batch at offset {batch_header.base_offset} has epoch {batch_header.epoch}, not {snapshot_id.epoch}",
            )
        expected = batch_header.next_offset

    def batch(index: int) -> codec.Batch:
        start = positions[index]
        return codec.Batch(headers[index], data[start : start + headers[index].size_bytes])

    header = _single_control(path, batch(0), "snapshot_header")
    _single_control(path, batch(len(headers) - 1), "snapshot_footer")
    if header.snapshot_header.version != SNAPSHOT_VERSION:
        raise SnapshotError(path, f"unsupported snapshot version {header.snapshot_header.version}")
    records: list[bytes] = []
    count = 0
    voters: records_pb2.VotersRecord | None = None
    first_body = 1
    if len(headers) > 2 and headers[1].is_control:
        voters = _single_control(path, batch(1), "voters").voters
        first_body = 2
    for index in range(first_body, len(headers) - 1):
        batch_header, position = headers[index], positions[index]
        if batch_header.is_control:
            raise SnapshotError(path, f"unexpected control batch at offset {batch_header.base_offset}")
        try:
            if keep_records:
                split = codec.split_records(data, batch_header, position)
                count += len(split)
                records.extend(split)
            else:
                count += codec.check_records(data, batch_header, position)
        except CorruptBatchError as exc:
            raise SnapshotError(path, str(exc)) from None
    return Snapshot(
        snapshot_id=snapshot_id,
        path=path,
        last_contained_log_timestamp_ms=header.snapshot_header.last_contained_log_timestamp_ms,
        records=records,
        size_bytes=len(data),
        voters=voters,
        record_count=count,
    )


def _single_control(path: Path, batch: codec.Batch, kind: str) -> records_pb2.MetadataRecord:
    where = f"batch at offset {batch.base_offset}"
    if not batch.header.is_control or batch.header.record_count != 1:
        raise SnapshotError(path, f"{where} should be a control batch holding one {kind}")
    try:
        message = parse_record(batch.records()[0])
    except NotARecordError as exc:
        raise SnapshotError(path, f"{where}: {exc}") from None
    if message.WhichOneof("record") != kind:
        raise SnapshotError(path, f"{where} holds {message.WhichOneof('record')}, expected {kind}")
    return message


def read_snapshot(path: Path) -> Snapshot:
    snapshot_id = parse_snapshot_name(path.name)
    if snapshot_id is None:
        raise SnapshotError(path, "not named <20-digit offset>-<10-digit epoch>.checkpoint")
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise SnapshotError(path, "missing") from None
    return decode_snapshot(path, data, snapshot_id)


class SnapshotReader:
    """Raw byte ranges of one snapshot file, for FetchSnapshot (the receiver validates)."""

    def __init__(self, path: Path) -> None:
        snapshot_id = parse_snapshot_name(path.name)
        if snapshot_id is None:
            raise SnapshotError(path, "not a snapshot file name")
        self.snapshot_id = snapshot_id
        self.path = path
        self._fd = os.open(path, os.O_RDONLY)
        self.size_bytes = os.fstat(self._fd).st_size

    def read_chunk(self, position: int, max_bytes: int) -> bytes:
        """Up to ``max_bytes`` from ``position``; ``b""`` at the end."""
        if position < 0 or position > self.size_bytes or max_bytes < 1:
            raise ValueError(f"position {position} outside [0, {self.size_bytes}] or max_bytes {max_bytes} < 1")
        return pread_exact(self._fd, min(max_bytes, self.size_bytes - position), position)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> SnapshotReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SnapshotChunkWriter:
    """Receives a snapshot in chunks (FetchSnapshot) into ``<name>.part``.

    Chunks must arrive in order (``position`` equal to the bytes received so far).
    :meth:`finish` fsyncs, validates the whole file and renames it into place; on a bad file it
    deletes the part and raises SnapshotError, so the caller can fetch again.
    """

    def __init__(self, directory: Path, snapshot_id: SnapshotId) -> None:
        self.snapshot_id = snapshot_id
        self.path = directory / snapshot_id.file_name
        self.part_path = directory / (snapshot_id.file_name + PART_SUFFIX)
        self._fd = os.open(self.part_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        self.received_bytes = 0

    def write_chunk(self, position: int, data: bytes) -> int:
        if self._fd < 0:
            raise SnapshotError(self.part_path, "writer is closed")
        if position != self.received_bytes:
            raise SnapshotError(self.part_path, f"chunk at byte {position}, expected byte {self.received_bytes}")
        pwrite_all(self._fd, data, position)
        self.received_bytes += len(data)
        return self.received_bytes

    def finish(self) -> Snapshot:
        if self._fd < 0:
            raise SnapshotError(self.part_path, "writer is closed")
        try:
            os.fsync(self._fd)
            data = pread_exact(self._fd, self.received_bytes, 0)
        finally:
            os.close(self._fd)
            self._fd = -1
        try:
            snapshot = decode_snapshot(self.path, data, self.snapshot_id)
        except SnapshotError:
            self.part_path.unlink(missing_ok=True)
            raise
        os.replace(self.part_path, self.path)
        fsync_dir(self.path.parent)
        return snapshot

    def abort(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self.part_path.unlink(missing_ok=True)


class SnapshotStore:
    """The snapshots of one log directory: list, write, load the newest valid one, prune."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._log = get_logger("storage.snapshot", log_dir=str(directory))
        # Set by load_latest(missing_ok=True): the slot of a damaged newest snapshot with no
        # fallback, set aside; the node starts without the state below its log.
        self.missing: SnapshotId | None = None

    def path(self, snapshot_id: SnapshotId) -> Path:
        return self.directory / snapshot_id.file_name

    def ids(self) -> list[SnapshotId]:
        """Snapshot ids present, oldest first (``.part`` and ``.corrupt`` files excluded)."""
        if not self.directory.is_dir():
            return []
        found = (parse_snapshot_name(p.name) for p in self.directory.iterdir())
        return sorted(s for s in found if s is not None)

    def latest_id(self) -> SnapshotId | None:
        ids = self.ids()
        return ids[-1] if ids else None

    def remove_partial(self) -> None:
        """Delete ``.part`` files left by a crash during a write or a transfer."""
        for part in sorted(self.directory.glob(f"*{SNAPSHOT_SUFFIX}{PART_SUFFIX}")):
            self._log.info("removing an unfinished snapshot", file=str(part))
            part.unlink()

    def write(
        self,
        snapshot_id: SnapshotId,
        records: Iterable[bytes | FramedRecords],
        *,
        last_contained_log_timestamp_ms: int,
        append_timestamp_ms: int,
        batch_records: int = DEFAULT_BATCH_RECORDS,
        voters: records_pb2.VotersRecord | None = None,
    ) -> Path:
        """Write a snapshot atomically (``.part``, fsync, rename, fsync dir); returns its path."""
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.path(snapshot_id)
        if path.exists():
            raise SnapshotError(path, "already exists")
        part = path.with_name(path.name + PART_SUFFIX)
        fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            for batch in encode_snapshot(
                snapshot_id,
                records,
                last_contained_log_timestamp_ms=last_contained_log_timestamp_ms,
                append_timestamp_ms=append_timestamp_ms,
                batch_records=batch_records,
                voters=voters,
            ):
                write_all(fd, batch)
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            part.unlink(missing_ok=True)
            raise
        os.close(fd)
        os.replace(part, path)
        fsync_dir(self.directory)
        self._log.info("snapshot written", file=str(path), offset=snapshot_id.offset, epoch=snapshot_id.epoch)
        return path

    def read(self, snapshot_id: SnapshotId) -> Snapshot:
        return read_snapshot(self.path(snapshot_id))

    def load_latest(
        self, *, repair: bool = False, log_start_offset: int | None = None, missing_ok: bool = False
    ) -> Snapshot | None:
        """The newest snapshot, validated. A damaged one is refused (SnapshotError) unless
        ``repair``: then it is renamed to ``.corrupt`` (kept for inspection) and the next
        newest is tried.

        ``log_start_offset`` (the node's mode: where its first segment file starts, None without
        one): a damaged snapshot is also set aside, without ``repair``, when the log still holds
        everything from an older intact snapshot's end (from 0 when there is none) -- the older
        snapshot and the log then give the same state, nothing is lost. Without such a fallback
        it is refused as above, unless ``missing_ok`` (the node's mode) and the log reaches the
        newest snapshot's end (or is empty): then the damaged snapshot is set aside all the same,
        :attr:`missing` names its slot (end offset and epoch, from its file name) and None is
        returned -- the node fetches its leader's snapshot (docs/storage.md, "A damaged snapshot
        with no fallback"). A node that stopped before it had one starts the same way again."""
        ids = self.ids()
        if missing_ok and not repair:
            still = self._still_missing(ids, log_start_offset)
            if still is not None:
                self.missing = still
                self._log.error(
                    "still without the state below the log: fetching the leader's snapshot",
                    set_aside=still.file_name + CORRUPT_SUFFIX,
                    offset=still.offset,
                    epoch=still.epoch,
                    log_start_offset=log_start_offset,
                )
                return None
        for i in range(len(ids) - 1, -1, -1):
            try:
                return self.read(ids[i])
            except SnapshotError as exc:
                fallback = self._fallback(ids[:i], log_start_offset)
                newest = i == len(ids) - 1
                missing = (
                    missing_ok
                    and not repair
                    and fallback is None
                    and newest
                    and (log_start_offset is None or log_start_offset <= ids[i].offset)
                )
                if missing:
                    aside = set_aside(exc.path, CORRUPT_SUFFIX)
                    self._set_aside_damaged(ids[:i])
                    fsync_dir(self.directory)
                    self.missing = ids[i]
                    self._log.error(
                        "damaged snapshot set aside: no fallback, fetching the leader's snapshot",
                        file=str(exc.path),
                        reason=exc.reason,
                        moved_to=str(aside),
                        offset=ids[i].offset,
                        epoch=ids[i].epoch,
                        log_start_offset=log_start_offset,
                    )
                    return None
                if not repair and fallback is None:
                    raise SnapshotError(exc.path, _no_fallback(exc.reason, ids[i], log_start_offset)) from None
                aside = exc.path.with_name(exc.path.name + CORRUPT_SUFFIX)
                if repair:
                    self._log.error(
                        "repairing: setting a corrupt snapshot aside", file=str(exc.path), reason=exc.reason
                    )
                else:
                    self._log.error(
                        "damaged snapshot set aside: falling back to an older snapshot and the log",
                        file=str(exc.path),
                        reason=exc.reason,
                        moved_to=str(aside),
                        fallback_offset=fallback,
                        log_start_offset=log_start_offset,
                    )
                os.replace(exc.path, aside)
                fsync_dir(self.directory)
        return None

    def _still_missing(self, ids: list[SnapshotId], log_start_offset: int | None) -> SnapshotId | None:
        """The slot of a snapshot set aside with no fallback on an earlier start, if the node
        stopped before it installed its leader's: the newest ``.corrupt`` snapshot, newer than
        every snapshot here, that the log reaches while starting above every one of them."""
        if log_start_offset is None or not self.directory.is_dir():
            return None
        suffix = CORRUPT_SUFFIX
        aside = [parse_snapshot_name(p.name[: -len(suffix)]) for p in self.directory.glob(f"*{suffix}")]
        newest = max((a for a in aside if a is not None), default=None)
        floor = max((i.offset for i in ids), default=0)
        if newest is None or (ids and newest <= ids[-1]):
            return None
        return newest if floor < log_start_offset <= newest.offset else None

    def _set_aside_damaged(self, older: list[SnapshotId]) -> None:
        """Set the damaged ones of ``older`` aside as ``.corrupt`` too: left under their names,
        retention (:meth:`prune`) would delete them once newer snapshots arrive."""
        for snapshot_id in older:
            try:
                self.read(snapshot_id)
            except SnapshotError as exc:
                aside = set_aside(exc.path, CORRUPT_SUFFIX)
                self._log.error(
                    "damaged older snapshot set aside", file=str(exc.path), reason=exc.reason, moved_to=str(aside)
                )

    def _fallback(self, older: list[SnapshotId], log_start_offset: int | None) -> int | None:
        """Where the state is rebuilt from if the snapshot after ``older`` is set aside: the end of
        the newest intact one of ``older`` (0: none) that the log reaches back to, or None."""
        if log_start_offset is None:
            return None
        for snapshot_id in reversed(older):
            if snapshot_id.offset < log_start_offset:
                return None  # the log starts above it: the offsets in between are nowhere else
            try:
                self.read(snapshot_id)
            except SnapshotError:
                continue
            return snapshot_id.offset
        return 0 if log_start_offset == 0 else None

    def reader(self, snapshot_id: SnapshotId) -> SnapshotReader:
        return SnapshotReader(self.path(snapshot_id))

    def chunk_writer(self, snapshot_id: SnapshotId) -> SnapshotChunkWriter:
        self.directory.mkdir(parents=True, exist_ok=True)
        return SnapshotChunkWriter(self.directory, snapshot_id)

    def prune(self, keep: int = KEEP_SNAPSHOTS) -> list[SnapshotId]:
        """Delete all but the ``keep`` newest snapshots; returns the deleted ids."""
        if keep < 1:
            raise ValueError("keep at least one snapshot")
        doomed = self.ids()[:-keep]
        for snapshot_id in doomed:
            self.path(snapshot_id).unlink(missing_ok=True)
        if doomed:
            fsync_dir(self.directory)
            self._log.info("pruned old snapshots", deleted=[s.file_name for s in doomed])
        return doomed


def _no_fallback(reason: str, damaged: SnapshotId, log_start_offset: int | None) -> str:
    """Why a damaged snapshot with no fallback refuses the start, naming the offsets lost with it."""
    gap = ""
    if log_start_offset is not None and log_start_offset > damaged.offset:
        gap = (
            f", and the log starts at offset {log_start_offset}, above its end: offsets {damaged.offset}.."
            f"{log_start_offset - 1} are on no file of this node either, so it cannot take its leader's snapshot "
            "and keep its log"
        )
    return (
        f"{reason}; the state below offset {damaged.offset} (epoch {damaged.epoch}) is in no other intact snapshot"
        f"{gap}; refusing to start (start with --repair-log to set it aside)"
    )
