"""The node-wide budget of buffered Kafka request bytes (Kafka's ``queued.max.request.bytes``).

A connection that has read a frame's 4-byte size takes that many bytes from the budget before it
reads the frame, and gives them back once the request is answered (or refused, or the connection
closes). While the budget is spent, connections wait here in arrival order without reading, so
TCP pushes back on their clients: however many connections send large frames, the frames buffered
in the node stay within the budget (plus one frame, below).

Kafka's semantics (its SimpleMemoryPool in non-strict mode, as SocketServer builds it): a frame
gets its bytes as soon as *any* budget is left, so the total may exceed the budget by at most one
frame, and a frame as large as the budget can never wait forever. Unlike Kafka's default (-1,
unbounded), raftmeta always has a budget.
"""

from __future__ import annotations

import asyncio
from collections import deque


class RequestBytesBudget:
    def __init__(self, total_bytes: int) -> None:
        if total_bytes < 1:
            raise ValueError(f"the request bytes budget must be >= 1, got {total_bytes}")
        self.total_bytes = total_bytes
        self.available_bytes = total_bytes
        # (bytes wanted, woken when granted): a grant takes the bytes at once, so nobody can slip
        # in between a grant and the granted connection's turn to run.
        self._waiters: deque[tuple[int, asyncio.Future[None]]] = deque()

    @property
    def waiting(self) -> int:
        """Connections waiting for bytes (they are not reading)."""
        return len(self._waiters)

    async def acquire(self, size: int) -> None:
        """Take ``size`` bytes, waiting (first come, first served) while none are left."""
        if size < 1:
            raise ValueError(f"a frame takes at least 1 byte, got {size}")
        if not self._waiters and self.available_bytes > 0:
            self.available_bytes -= size
            return
        waiter = asyncio.get_running_loop().create_future()
        entry = (size, waiter)
        self._waiters.append(entry)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release(size)  # granted as it was cancelled: the bytes go back
            elif entry in self._waiters:
                self._waiters.remove(entry)
            raise

    def release(self, size: int) -> None:
        self.available_bytes += size
        if self.available_bytes > self.total_bytes:
            raise AssertionError(f"released more than was taken ({self.available_bytes} > {self.total_bytes})")
        while self._waiters and self.available_bytes > 0:
            wanted, waiter = self._waiters.popleft()
            if waiter.cancelled():
                continue
            self.available_bytes -= wanted
            waiter.set_result(None)
