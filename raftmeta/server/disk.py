"""All of a node's disk IO, on one writer thread, so fsync never blocks the event loop.

The node task awaits each operation, which keeps the core's order (persist the quorum state
before sending the messages that rely on it; truncate before append). ``flush`` is driven by a
separate flusher task (see :class:`raftmeta.server.node.Node`): while one fsync runs, appends
queue up behind it on the same thread, and the next fsync covers all of them (group commit).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from raftmeta.raft import QuorumStateData
from raftmeta.storage.datadir import NodeStorage
from raftmeta.storage.quorum_state import QuorumStateData as StoredQuorumState
from raftmeta.storage.snapshot import Snapshot, SnapshotId

T = TypeVar("T")


class DiskWriter:
    def __init__(self, storage: NodeStorage, voters: Sequence[int]) -> None:
        self.storage = storage
        self.voters = tuple(sorted(voters))
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="raftmeta-writer")
        self.fsyncs = 0

    async def _run(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn)

    async def write_quorum_state(self, state: QuorumStateData) -> None:
        stored = StoredQuorumState(state.epoch, voted_id=state.voted_id, leader_id=state.leader_id, voters=self.voters)
        await self._run(lambda: self.storage.write_quorum_state(stored))

    async def truncate_and_append(self, truncate_to: int | None, batches: Sequence[bytes]) -> None:
        def work() -> None:
            log = self.storage.log
            if truncate_to is not None:
                log.truncate_to(truncate_to)
            for data in batches:
                log.append(data)

        await self._run(work)

    async def flush(self) -> int:
        """fsync the log; the durable end offset."""

        def work() -> int:
            durable = self.storage.log.flush()
            self.fsyncs += 1
            return durable

        return await self._run(work)

    async def unflushed_end(self) -> int:
        """The log end, as if it were durable: only for the test-only ``unsafe_skip_fsync`` mode."""
        return await self._run(lambda: self.storage.log.log_end_offset)

    async def checkpoint_high_watermark(self, high_watermark: int) -> int:
        now_ms = int(time.monotonic() * 1000)
        return await self._run(lambda: self.storage.checkpoint_high_watermark(high_watermark, now_ms))

    async def take_snapshot(self, end_offset: int, epoch: int, records: Sequence[bytes], timestamp_ms: int) -> Snapshot:
        def work() -> Snapshot:
            return self.storage.take_snapshot(
                SnapshotId(end_offset, epoch),
                records,
                last_contained_log_timestamp_ms=timestamp_ms,
                append_timestamp_ms=timestamp_ms,
            )

        return await self._run(work)

    async def install_snapshot(self, end_offset: int, epoch: int, data: bytes) -> Snapshot:
        """Write a snapshot fetched from the leader and make the log continue from it."""

        def work() -> Snapshot:
            writer = self.storage.receive_snapshot(SnapshotId(end_offset, epoch))
            try:
                writer.write_chunk(0, data)
                return self.storage.install_snapshot(writer)
            except BaseException:
                writer.abort()
                raise

        return await self._run(work)

    async def read_file(self, snapshot: Snapshot) -> bytes:
        return await self._run(snapshot.path.read_bytes)

    async def close(self) -> None:
        await self._run(self.storage.close)
        self._executor.shutdown(wait=True)
