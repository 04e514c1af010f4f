"""Writing the snapshots the QuorumController's policy asks for, off the node task: the image is
turned into records and written on the disk's snapshot thread, and the result comes back to the
node task as a :class:`~raftmeta.server.inbox.SnapshotTaken` input (an image of None when it
failed: the policy then tries again later)."""

from __future__ import annotations

import time
from collections.abc import Callable, Coroutine, Iterable, Iterator
from typing import Any

from raftmeta.controller.quorum import SnapshotDue
from raftmeta.controller.snapshot import SnapshotEncoder
from raftmeta.metrics.node import NodeMetrics
from raftmeta.raft import SnapshotImage
from raftmeta.records.codec import FramedRecords
from raftmeta.server.inbox import Input, SnapshotTaken
from raftmeta.server.seams import Disk
from raftmeta.v1 import records_pb2


class SnapshotWriter:
    def __init__(
        self,
        disk: Disk,
        put: Callable[[Input], None],
        start: Callable[[Coroutine[Any, Any, None]], None],
        metrics: NodeMetrics,
        log: Callable[[], Any],
    ) -> None:
        self._disk = disk
        self._put = put  # the node's inbox
        self._start = start  # runs a helper task that the node cancels when it stops
        self._metrics = metrics
        self._log = log  # the node's logger as it is bound now
        # Used by one snapshot at a time: the QuorumController asks for the next one only after
        # the last one's SnapshotTaken.
        self._encoder = SnapshotEncoder()

    def start(self, due: SnapshotDue) -> None:
        encoder = self._encoder
        image, created = due.image, due.created

        def records() -> Iterator[bytes | FramedRecords]:
            # On the snapshot thread: images are immutable values, so reading this one while the
            # node task builds the next ones is safe (``created`` is read by lookups only).
            return encoder.stream(image, created)

        self._start(self._take(due.end_offset, due.epoch, records, due.voters))

    async def _take(
        self,
        end_offset: int,
        epoch: int,
        records: Callable[[], Iterable[bytes | FramedRecords]],
        voters: records_pb2.VotersRecord | None,
    ) -> None:
        started = time.perf_counter()
        try:
            data, count = await self._disk.take_snapshot(
                end_offset, epoch, records, int(time.time() * 1000), voters=voters
            )
        except Exception:
            self._log().exception("snapshot failed", end_offset=end_offset)
            self._put(SnapshotTaken(None, 0))
            return
        seconds = time.perf_counter() - started
        self._metrics.snapshot_taken(seconds, len(data))
        self._log().info(
            "snapshot taken",
            end_offset=end_offset,
            epoch=epoch,
            bytes=len(data),
            records=count,
            seconds=round(seconds, 3),
        )
        self._put(SnapshotTaken(SnapshotImage(end_offset, epoch, data), count))
