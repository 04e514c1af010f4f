"""All of a node's disk IO, on one writer thread, so fsync never blocks the event loop.

One thread runs every operation in submission order, which is what keeps the core's order
(truncate before append, append before the fsync that reports it). The node task awaits the
quorum state and snapshot installs (the messages of the same Ready rely on them), but only
*submits* appends, truncations and high-watermark checkpoints: they need no fsync before the
Ready's messages go out, and awaiting them would park the node task behind a running fsync.
``flush`` is driven by the node's group commit (raftmeta/server/group_commit.py): while one
fsync runs, appends queue up behind it on the same thread, and the next fsync covers all of them.
A failed background write is fatal (``on_failure``): the core already counts the batch as
appended.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

from raftmeta.raft import Entry, QuorumStateData, SnapshotImage
from raftmeta.records.codec import FramedRecords
from raftmeta.server.config import NodeConfig
from raftmeta.server.seams import DurableState
from raftmeta.storage.datadir import NodeStorage
from raftmeta.storage.quorum_state import check_voters
from raftmeta.storage.snapshot import KEEP_SNAPSHOTS, Snapshot, SnapshotId, decode_snapshot
from raftmeta.v1 import records_pb2

T = TypeVar("T")


def without_records(snapshot: Snapshot) -> Snapshot:
    """The snapshot kept as the storage's latest, without its decoded records: they are read once
    (start-up, install) and would otherwise stay in memory until the next snapshot -- one bytes
    object per record, about twice the file's size (80 bytes per partition)."""
    return dataclasses.replace(snapshot, records=[])


async def open_disk(config: NodeConfig) -> DiskWriter:
    """The node's data dir, opened (and checked, or repaired with ``--repair-log``) off the loop."""
    storage = await asyncio.to_thread(
        NodeStorage.open,
        config.data_dir,
        cluster_id=config.cluster_id,
        node_id=config.node_id,
        repair=config.repair_log,
        segment_bytes=config.segment_bytes,
        directory_id=config.voter_directory_ids.get(config.node_id, b""),
        # A damaged batch whose slot is known goes to the raft core for repair from the quorum.
        report_damage=True,
    )
    return DiskWriter(storage, list(config.voters))


class DiskWriter:
    """The real :class:`~raftmeta.server.seams.Disk`."""

    def __init__(self, storage: NodeStorage, voters: Sequence[int]) -> None:
        self.storage = storage
        self.voters = tuple(sorted(voters))
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="raftmeta-writer")
        self._snapshot_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="raftmeta-snapshot")
        self.fsyncs = 0
        # Called with each fsync's duration in seconds (the node's fsync histogram), on the
        # thread that ran it.
        self.on_fsync: Callable[[float], None] | None = None
        self._hw_queued_ms = -(1 << 62)
        # Jobs handed to the writer thread, and jobs it finished: each counter is written by one
        # thread only (the event loop's, the writer's), so comparing them needs no lock.
        self._submitted = 0
        self._completed = 0

    @property
    def idle(self) -> bool:
        """Nothing queued on or running in the writer thread."""
        return self._completed == self._submitted

    def _queue(self, fn: Callable[[], T]) -> Future[T]:
        self._submitted += 1

        def job() -> T:
            try:
                return fn()
            finally:
                self._completed += 1

        return self._executor.submit(job)

    async def _run(self, fn: Callable[[], T]) -> T:
        return await asyncio.wrap_future(self._queue(fn))

    def append_and_flush_now(self, truncate_to: int | None, batches: Sequence[bytes]) -> int:
        """Truncate/append and fsync on the caller's thread; return the durable end offset.

        Only for a follower with an idle writer thread (nothing to order against): its fsync is
        the whole of its share of the commit path, and the two thread hand-offs of the queued
        path (append and fsync jobs, then the completion back to the loop) cost more than the
        ~0.15 ms the loop is blocked here."""
        if not self.idle:
            raise RuntimeError("append_and_flush_now with writer jobs pending: they must come first")
        self._truncate_and_append_now(truncate_to, batches)
        durable = self._timed_flush()
        self.fsyncs += 1
        return durable

    def _timed_flush(self) -> int:
        on_fsync = self.on_fsync
        if on_fsync is None:
            return self.storage.log.flush()
        started = time.perf_counter()
        durable = self.storage.log.flush()
        on_fsync(time.perf_counter() - started)
        return durable

    def _truncate_and_append_now(self, truncate_to: int | None, batches: Sequence[bytes]) -> None:
        log = self.storage.log
        if truncate_to is not None:
            self.storage.truncate_log(truncate_to)
        if len(batches) == 1:
            log.append(batches[0])
        elif batches:
            log.append(b"".join(batches))  # one write for the whole Ready

    async def load(self) -> DurableState:
        """The data dir read back. A quorum-state written for another voter set is refused."""
        storage = self.storage
        snapshot = storage.latest_snapshot
        snapshot_bytes = await self.read_file(snapshot) if snapshot is not None else b""
        if snapshot is not None:
            storage.latest_snapshot = without_records(snapshot)  # the records go to the caller alone
        stored = storage.quorum_state
        if stored is not None:
            check_voters(storage.quorum_state_file.path, stored, self.voters)
        missing = storage.missing_snapshot
        start_offset = snapshot.snapshot_id.offset if snapshot is not None else missing.offset if missing else 0
        log = storage.log
        stored_batches = await self._run(lambda: list(log.iter_stored(max(start_offset, log.log_start_offset))))
        return DurableState(
            # The voter list an older file names was checked above; the core keeps none (KIP-853).
            quorum_state=dataclasses.replace(stored, voters=()) if stored else None,
            quorum_state_problem=storage.quorum_state_problem,
            entries=[Entry(b.base_offset, b.epoch, b.next_offset, b.data) for b in stored_batches],
            damaged=[b.base_offset for b in stored_batches if b.damage is not None],
            damaged_epochs={b.base_offset: b.max_epoch for b in stored_batches if b.max_epoch is not None},
            snapshot=(
                SnapshotImage(snapshot.snapshot_id.offset, snapshot.snapshot_id.epoch, snapshot_bytes)
                if snapshot is not None
                else None
            ),
            snapshot_records=snapshot.records if snapshot is not None else [],
            high_watermark=storage.high_watermark.checkpointed,
            log_start_offset=log.log_start_offset,
            log_end_offset=log.log_end_offset,
            directory_id=storage.meta.directory_id,
            missing_snapshot=(missing.offset, missing.epoch) if missing is not None else None,
        )

    async def write_quorum_state(self, state: QuorumStateData) -> None:
        # No voter list: the voter set in force is the log's and changes (KIP-853); a file written
        # with one (before voter changes) is still checked against --voters when read.
        await self._run(lambda: self.storage.write_quorum_state(state))

    def submit(self, fn: Callable[[], object], on_failure: Callable[[BaseException], None]) -> None:
        """Queue ``fn`` behind everything submitted before it, without waiting for it."""

        def done(future: Future[object]) -> None:
            error = future.exception()
            if error is not None:
                on_failure(error)

        self._queue(fn).add_done_callback(done)

    async def repair(self, truncate_to: int | None, copies: Sequence[bytes]) -> None:
        """Overwrite damaged batches with intact copies, each fsynced (the core counts a repaired
        batch as durable at once), then truncate (if asked), behind everything queued before. The
        copies lie below the truncation; one may be the front of a damaged range the truncation
        cuts inside (at the rest's first offset, a boundary only once the front is repaired)."""

        def work() -> None:
            for data in copies:
                self.storage.log.repair_batch(data)
            if truncate_to is not None:
                self.storage.truncate_log(truncate_to)

        await self._run(work)

    def truncate_and_append(
        self, truncate_to: int | None, batches: Sequence[bytes], on_failure: Callable[[BaseException], None]
    ) -> None:
        """Queue a truncation and/or appends (page cache only: the next flush makes them durable)."""

        self.submit(lambda: self._truncate_and_append_now(truncate_to, batches), on_failure)

    def flush(self, done: Callable[[int], None], on_failure: Callable[[BaseException], None], *, fsync: bool) -> None:
        """Queue an fsync of the log behind every append submitted so far; ``done(durable end
        offset)`` runs on the event loop. ``fsync=False`` is the test-only ``unsafe_skip_fsync``
        mode: report the log end as durable without syncing."""
        loop = asyncio.get_running_loop()

        def work() -> int:
            log = self.storage.log
            if not fsync:
                return log.log_end_offset
            durable = self._timed_flush()
            self.fsyncs += 1
            return durable

        def finished(future: Future[int]) -> None:
            error = future.exception()
            if error is not None:
                on_failure(error)
                return
            with contextlib.suppress(RuntimeError):  # the loop closed: the node is gone
                loop.call_soon_threadsafe(done, future.result())

        self._queue(work).add_done_callback(finished)

    def checkpoint_high_watermark(self, high_watermark: int, on_failure: Callable[[BaseException], None]) -> None:
        """Queue a lazy high-watermark checkpoint (written at most once per storage interval).

        Not queued at all within the interval of the last one queued: the storage would skip it
        anyway, and every job queued wakes the writer thread (which then competes with the node
        task for the GIL) -- once per Ready with a commit, i.e. hundreds of times a second."""
        now_ms = int(time.monotonic() * 1000)
        if now_ms - self._hw_queued_ms < self.storage.high_watermark.interval_ms:
            return
        self._hw_queued_ms = now_ms
        self.submit(lambda: self.storage.checkpoint_high_watermark(high_watermark, now_ms), on_failure)

    async def take_snapshot(
        self,
        end_offset: int,
        epoch: int,
        records: Callable[[], Iterable[bytes | FramedRecords]],
        timestamp_ms: int,
        *,
        voters: records_pb2.VotersRecord | None = None,
    ) -> tuple[bytes, int]:
        """Write a snapshot and delete the segments wholly below it; return its file's bytes (the
        core serves FetchSnapshot from them) and its record count.

        The costly part -- turning a big image into records, writing and fsyncing the file,
        reading it back to check it (as ``NodeStorage.take_snapshot`` does) -- runs on a thread of
        its own: on the writer thread it would hold up appends and group commit for as long
        (seconds for a few hundred thousand records). Only the log's part (delete the segments
        below, make it the latest snapshot) runs on the writer thread, in order with appends."""
        snapshot_id = SnapshotId(end_offset, epoch)

        def write() -> tuple[Snapshot, bytes, int]:
            payload = records()
            store = self.storage.snapshots
            store.write(
                snapshot_id,
                payload,
                last_contained_log_timestamp_ms=timestamp_ms,
                append_timestamp_ms=timestamp_ms,
                voters=voters,
            )
            path = store.path(snapshot_id)
            data = path.read_bytes()
            # What a restart will load: check it now (every batch's CRC, every record's framing).
            snapshot = decode_snapshot(path, data, snapshot_id, keep_records=False)
            return snapshot, data, snapshot.record_count

        loop = asyncio.get_running_loop()
        snapshot, data, count = await loop.run_in_executor(self._snapshot_executor, write)

        def attach() -> None:
            storage = self.storage
            storage.log.delete_before(end_offset)
            if storage.latest_snapshot is None or snapshot_id > storage.latest_snapshot.snapshot_id:
                storage.latest_snapshot = snapshot
            storage.snapshots.prune(KEEP_SNAPSHOTS)

        await self._run(attach)
        return data, count

    async def install_snapshot(
        self, end_offset: int, epoch: int, data: bytes, *, keep_log: bool = False
    ) -> list[bytes]:
        """Write a snapshot fetched from the leader and make the log continue from it (``keep_log``:
        the log from its end on stays, see NodeStorage.install_snapshot); return its records."""

        def work() -> Snapshot:
            writer = self.storage.receive_snapshot(SnapshotId(end_offset, epoch))
            try:
                writer.write_chunk(0, data)
                snapshot = self.storage.install_snapshot(writer, keep_log=keep_log)
            except BaseException:
                writer.abort()
                raise
            if self.storage.latest_snapshot is snapshot:
                self.storage.latest_snapshot = without_records(snapshot)
            return snapshot

        return (await self._run(work)).records

    async def read_file(self, snapshot: Snapshot) -> bytes:
        return await self._run(snapshot.path.read_bytes)

    async def close(self) -> None:
        # A snapshot being written finishes first (its .part file would otherwise be left behind).
        await asyncio.to_thread(self._snapshot_executor.shutdown, wait=True, cancel_futures=True)
        await self._run(self.storage.close)
        self._executor.shutdown(wait=True)
