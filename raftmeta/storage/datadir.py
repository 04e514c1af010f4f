"""One node's data dir, opened as a whole (DESIGN.md §5, docs/storage.md)::

    DATA_DIR/
      meta.properties                  cluster.id, node.id
      quorum-state                     JSON: epoch, voted id, leader id, voters
      high-watermark-checkpoint        JSON: the checkpointed high watermark
      __cluster_metadata-0/
        00000000000000000000.log       segments, named by base offset
        00000000000000000000.index     sparse offset + epoch index of a sealed segment
        00000000000000001234-0000000003.checkpoint   snapshots: <end offset>-<epoch>

:meth:`NodeStorage.open` checks the identity, reads the quorum state, loads the newest valid
snapshot, opens and recovers the log against the checkpointed high watermark, deletes segments
wholly below the snapshot and prunes old snapshots. The order matters: the snapshot decides
where the log may start, and the high watermark decides which damage is a torn write (truncate)
and which is lost committed data (refuse, unless ``repair``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from raftmeta.logs import get_logger
from raftmeta.raft.types import QuorumStateData
from raftmeta.storage.errors import InvalidFileError
from raftmeta.storage.fileio import set_aside
from raftmeta.storage.high_watermark import (
    HIGH_WATERMARK_CHECKPOINT,
    CommittedTruncationRefusedError,
    HighWatermarkCheckpoint,
    read_high_watermark,
)
from raftmeta.storage.log import DEFAULT_INDEX_INTERVAL_BYTES, DEFAULT_SEGMENT_BYTES, SegmentLog, first_segment_base
from raftmeta.storage.meta_properties import MetaProperties, ensure_meta_properties
from raftmeta.storage.quorum_state import QuorumStateFile
from raftmeta.storage.snapshot import (
    CORRUPT_SUFFIX,
    KEEP_SNAPSHOTS,
    Snapshot,
    SnapshotChunkWriter,
    SnapshotId,
    SnapshotStore,
)

LOG_DIR_NAME = "__cluster_metadata-0"


def log_dir(data_dir: Path) -> Path:
    return data_dir / LOG_DIR_NAME


@dataclass
class NodeStorage:
    """Everything a node keeps on disk. Build with :meth:`open`; owned by the writer thread,
    except that ``log``'s read methods may be used from any thread (see SegmentLog)."""

    data_dir: Path
    meta: MetaProperties
    quorum_state_file: QuorumStateFile
    quorum_state: QuorumStateData | None
    # None when the file was read; "missing" or "unreadable (...)" otherwise (a new node's
    # file is missing too: the core tells the two apart by the log).
    quorum_state_problem: str | None
    high_watermark: HighWatermarkCheckpoint
    log: SegmentLog
    snapshots: SnapshotStore
    latest_snapshot: Snapshot | None
    # The slot of a damaged newest snapshot set aside with no fallback (the node's mode): the log
    # starts there with no state below it until the leader's snapshot is installed.
    missing_snapshot: SnapshotId | None = None

    @classmethod
    def open(
        cls,
        data_dir: Path,
        *,
        cluster_id: str,
        node_id: int,
        repair: bool = False,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
        high_watermark_interval_ms: int = 1000,
        directory_id: bytes = b"",
        report_damage: bool = False,
    ) -> NodeStorage:
        """Open and recover a node's data dir (created if empty).

        Raises DataDirMismatchError for another cluster's or node's dir; InvalidFileError for a
        damaged high-watermark checkpoint (the node's mode sets it aside as ``.corrupt`` and
        recovers as if it were missing, see _read_floor); LogGapError for a log that starts above the newest
        snapshot (a lost snapshot), before any file is changed; HighWatermarkAboveLogError for an
        intact log that ends below the checkpoint; LogCorruptionError or SnapshotError (naming
        file and offset) for damage below the checkpointed high watermark, damage above it with
        intact batches after it (MidLogCorruptionError), or damage in the newest snapshot. A
        missing or unreadable quorum-state is not refused: the file is set aside and
        ``quorum_state_problem`` says why (the core recovers from the log). With
        ``repair=True`` (``raftmeta node --repair-log``) such damage is cut away instead, the
        high-watermark checkpoint is lowered to what is left, and the node refetches the rest
        from the leader; docs/storage.md explains the risk. ``report_damage`` (the node's mode):
        a damaged batch whose slot is known is kept and listed by ``log.damaged_batches()`` for
        repair from the quorum instead (SegmentLog.open).
        """
        logger = get_logger("storage.datadir", data_dir=str(data_dir))
        meta = ensure_meta_properties(data_dir, cluster_id, node_id, required_directory_id=directory_id)
        quorum_state_file = QuorumStateFile(data_dir)
        quorum_state_problem: str | None = None
        try:
            quorum_state = quorum_state_file.read()
            if quorum_state is None:
                quorum_state_problem = "missing"
        except InvalidFileError as exc:
            # Refusing to start would not bring the vote back; the consensus core starts from
            # the log's epoch instead and grants no vote in it (NodeStorage.quorum_state_problem).
            # The damaged file is kept beside, for the operator to inspect.
            kept = quorum_state_file.set_aside()
            quorum_state = None
            quorum_state_problem = f"unreadable ({exc.reason}; moved to {kept.name})"
            logger.warning("quorum-state is unreadable", reason=exc.reason, moved_to=str(kept))
        floor, checkpoint_problem = _read_floor(data_dir, tolerate_damage=report_damage)
        snapshots = SnapshotStore(log_dir(data_dir))
        log_dir(data_dir).mkdir(parents=True, exist_ok=True)
        # The node's mode may fall back from a damaged snapshot to an older one and the log: it
        # needs where the log starts, read from the segment file names before anything changes.
        first_segment = first_segment_base(log_dir(data_dir)) if report_damage else None
        latest = snapshots.load_latest(
            repair=repair, log_start_offset=first_segment, missing_ok=report_damage
        )  # ignores .part files
        # A damaged newest snapshot with no fallback (the node's mode): the log is held to its slot.
        start = latest.snapshot_id if latest is not None else snapshots.missing
        log = SegmentLog.open(
            log_dir(data_dir),
            segment_bytes=segment_bytes,
            index_interval_bytes=index_interval_bytes,
            recovery_floor_offset=floor,
            recovery_floor_file=data_dir / HIGH_WATERMARK_CHECKPOINT,
            snapshot_id=start,
            repair=repair,
            report_damage=report_damage,
        )
        # Only now: a refusal to start (a log gap, damage) must leave every file as it was.
        snapshots.remove_partial()
        if checkpoint_problem is not None:
            kept = set_aside(data_dir / HIGH_WATERMARK_CHECKPOINT, CORRUPT_SUFFIX)
            logger.error(
                "high-watermark checkpoint is unreadable: recovering as if it were missing",
                reason=checkpoint_problem,
                moved_to=kept.name,
                recovered_log_end=log.log_end_offset,
            )
        high_watermark = HighWatermarkCheckpoint(data_dir, interval_ms=high_watermark_interval_ms)
        recovered = max(log.log_end_offset, start.offset if start is not None else 0)
        if repair and recovered < high_watermark.checkpointed:
            logger.error(
                "repairing: lowering the high-watermark checkpoint to the recovered log",
                checkpointed=high_watermark.checkpointed,
                recovered=recovered,
            )
            high_watermark.reset(recovered)
        snapshots.prune(KEEP_SNAPSHOTS)
        return cls(
            data_dir=data_dir,
            meta=meta,
            quorum_state_file=quorum_state_file,
            quorum_state=quorum_state,
            quorum_state_problem=quorum_state_problem,
            high_watermark=high_watermark,
            log=log,
            snapshots=snapshots,
            latest_snapshot=latest,
            missing_snapshot=snapshots.missing,
        )

    def write_quorum_state(self, state: QuorumStateData) -> None:
        """Durably persist the election state; act on it only after this returns."""
        self.quorum_state_file.write(state)
        self.quorum_state = state

    def truncate_log(self, offset: int) -> int:
        """Truncate the log for a divergence; refused (CommittedTruncationRefusedError, nothing
        removed) below the checkpointed high watermark: those offsets are committed."""
        checkpointed = self.high_watermark.checkpointed
        if offset < checkpointed:
            raise CommittedTruncationRefusedError(self.data_dir, offset, checkpointed)
        return self.log.truncate_to(offset)

    def checkpoint_high_watermark(self, high_watermark: int, now_ms: int | None = None) -> int:
        """Lazily (every ``interval_ms`` when ``now_ms`` is given, else now) persist the high
        watermark, clamped to the durable log end; returns the value on disk."""
        durable = max(self.log.durable_end_offset, self._snapshot_offset())
        if now_ms is None:
            return self.high_watermark.write(high_watermark, durable)
        return self.high_watermark.maybe_write(high_watermark, durable, now_ms)

    def take_snapshot(
        self,
        snapshot_id: SnapshotId,
        records: Iterable[bytes],
        *,
        last_contained_log_timestamp_ms: int,
        append_timestamp_ms: int,
    ) -> Snapshot:
        """Write a snapshot of the committed image (the controller's records), then delete the
        segments wholly below it and prune old snapshots (keep 2).

        ``snapshot_id.offset`` must be within the log (a committed batch boundary) and
        ``snapshot_id.epoch`` the epoch of the record just below it; a mismatch is a caller bug
        (ValueError) and writes nothing.
        """
        offset, epoch = snapshot_id
        if offset > self.log.log_end_offset:
            raise ValueError(f"snapshot at {offset} is beyond the log end {self.log.log_end_offset}")
        below = self.log.epoch_for_offset(offset - 1) if offset > 0 else -1
        if below not in (-1, epoch):
            raise ValueError(f"snapshot {snapshot_id} names epoch {epoch}, but offset {offset - 1} has epoch {below}")
        self.snapshots.write(
            snapshot_id,
            records,
            last_contained_log_timestamp_ms=last_contained_log_timestamp_ms,
            append_timestamp_ms=append_timestamp_ms,
        )
        snapshot = self.snapshots.read(snapshot_id)  # what a restart will load: check it now
        self.log.delete_before(offset)
        self._set_latest(snapshot)
        return snapshot

    def receive_snapshot(self, snapshot_id: SnapshotId) -> SnapshotChunkWriter:
        """Start receiving a snapshot from the leader (FetchSnapshot); feed it the chunks with
        ``write_chunk(position, data)``, then call :meth:`install_snapshot` with it."""
        return self.snapshots.chunk_writer(snapshot_id)

    def install_snapshot(self, writer: SnapshotChunkWriter, *, keep_log: bool = False) -> Snapshot:
        """Validate and rename a received snapshot, then replace the whole log by an empty log
        starting at the snapshot's end offset (the raft core's ``install_snapshot`` contract;
        Kafka's truncateFullyAndStartAt). A bad file raises SnapshotError and changes nothing.

        ``keep_log`` (the core's ``install_keeps_log``: the snapshot replaces a damaged batch the
        leader holds only in its snapshot): the log from the snapshot's end on stays, only the
        segments wholly below it go."""
        snapshot = writer.finish()
        offset, epoch = snapshot.snapshot_id
        if keep_log and self.log.log_start_offset <= offset <= self.log.log_end_offset:
            self.log.delete_before(offset)
        else:
            self.log.reset_to(offset, epoch)
        self._set_latest(snapshot)
        self.missing_snapshot = None  # the state below the log is here again
        return snapshot

    def install_snapshot_data(self, snapshot_id: SnapshotId, data: bytes) -> Snapshot:
        """:meth:`install_snapshot` for a snapshot received whole (the core's SnapshotImage.data)."""
        writer = self.receive_snapshot(snapshot_id)
        try:
            writer.write_chunk(0, data)
        except BaseException:
            writer.abort()
            raise
        return self.install_snapshot(writer)

    def _set_latest(self, snapshot: Snapshot) -> None:
        if self.latest_snapshot is None or snapshot.snapshot_id > self.latest_snapshot.snapshot_id:
            self.latest_snapshot = snapshot
        self.snapshots.prune(KEEP_SNAPSHOTS)

    def _snapshot_offset(self) -> int:
        return self.latest_snapshot.snapshot_id.offset if self.latest_snapshot is not None else 0

    def close(self) -> None:
        self.log.close()


def _read_floor(data_dir: Path, *, tolerate_damage: bool) -> tuple[int, str | None]:
    """The checkpointed high watermark recovery holds the log to, and why the file was not
    believed (None if it was). In the node's mode a damaged checkpoint is read as a missing one
    (0: the floor of a node that never checkpointed), not refused: the checkpoint only bounds
    which damage recovery may cut, and the node's mode cuts none whose slot is known -- it
    repairs it from the quorum -- while the core learns the high watermark from its leader
    again. Elsewhere (``raftmeta log``, the jobs) the damage is refused naming the file."""
    try:
        return read_high_watermark(data_dir), None
    except InvalidFileError as exc:
        if not tolerate_damage:
            raise
        return 0, exc.reason
