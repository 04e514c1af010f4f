"""The node task's inputs and its inbox (raftmeta/server/node.py): what the gRPC servicers, the
writer thread, the timers and the snapshot thread hand to the one task that owns the
QuorumController."""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import Message

from raftmeta.raft import Envelope, SnapshotImage


@dataclass(frozen=True, slots=True)
class RaftInput:
    envelope: Envelope
    reply: asyncio.Future[Any] | None  # set for inbound requests


@dataclass(frozen=True, slots=True)
class AdminInput:
    method: str
    request: Message
    reply: asyncio.Future[Any]
    enqueued: float = 0.0  # time.perf_counter() when queued (the event-queue-time metric)


@dataclass(frozen=True, slots=True)
class Flushed:
    durable_end_offset: int
    ready_seq: int


@dataclass(frozen=True, slots=True)
class Tick:
    pass


@dataclass(frozen=True, slots=True)
class SnapshotTaken:
    """A snapshot written (``image``, its record count), or failed (``image`` None)."""

    image: SnapshotImage | None
    records: int


@dataclass(frozen=True, slots=True)
class LeaderGone:
    """The leader of ``epoch`` refused a TCP connection: its process is gone."""

    leader_id: int
    epoch: int


Input = RaftInput | AdminInput | Flushed | Tick | SnapshotTaken | LeaderGone


class Inbox:
    """The node task's input queue: a deque and at most one waiter. ``asyncio.Queue.get`` under
    ``wait_for`` costs a Task and extra loop rounds on every wake-up; this node task wakes up
    thousands of times a second, and the wake-up is on the commit path."""

    def __init__(self) -> None:
        self._items: deque[Input] = deque()
        self._waiter: asyncio.Future[None] | None = None

    def put_nowait(self, item: Input) -> None:
        self._items.append(item)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def get_nowait(self) -> Input:
        return self._items.popleft()

    def qsize(self) -> int:
        return len(self._items)

    def empty(self) -> bool:
        return not self._items

    async def wait(self, timeout_s: float) -> None:
        """Until an item is queued or ``timeout_s`` passed."""
        if self._items:
            return
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiter = waiter
        timer = loop.call_later(timeout_s, _release, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            self._waiter = None


def _release(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
