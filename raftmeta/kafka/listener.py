"""The Kafka listener: asyncio streams, one reader and one writer per connection.

Kafka answers the requests of one connection in the order they came; the reader decodes each
frame and starts its handler at once (so a slow CreateTopics does not hold a Metadata behind it
in the controller), and the writer sends the answers in request order. At most
``in_flight_max`` requests of a connection are unanswered: past that the reader stops reading
and TCP pushes back on the client. A frame that is too large, truncated or undecodable, or an
api the listener does not serve, closes the connection after the answers already due (what a
Kafka broker does); nothing of it reached the controller.

Memory: across connections, the bytes of frames being read or handled come out of one
:class:`RequestBytesBudget` (Kafka's ``queued.max.request.bytes``); a connection that finds it
spent stops reading until bytes come back. Once a frame's size is read, its bytes must all
arrive within ``frame_timeout_s`` or the connection is closed, so a client that trickles a frame
cannot hold its share of the budget for long.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import Sequence
from typing import Any, Final

from raftmeta.api.addresses import parse_host_port
from raftmeta.api.limits import KAFKA_FRAME_TIMEOUT_MS_DEFAULT, KAFKA_QUEUED_REQUEST_BYTES_DEFAULT
from raftmeta.kafka.budget import RequestBytesBudget
from raftmeta.kafka.context import ApiContext
from raftmeta.kafka.dispatch import handle, unsupported_api_versions
from raftmeta.kafka.framing import (
    DEFAULT_FRAME_BYTES_MAX,
    SIZE_BYTES,
    FrameError,
    UnsupportedVersion,
    decode_request,
    frame_size,
    is_api_versions,
)
from raftmeta.logs import get_logger

DEFAULT_IN_FLIGHT_MAX: Final = 16
# Kafka's connections.max.idle.ms (10 minutes): a connection silent this long is closed.
DEFAULT_IDLE_TIMEOUT_S: Final = 600.0
# Connections served at once; more are closed as they arrive, so a client that opens connections
# without end cannot exhaust the node's file descriptors.
DEFAULT_CONNECTIONS_MAX: Final = 1024
# What a connection's stream buffers beyond the frame it reads (asyncio stops reading a socket
# past twice this): small, so connections waiting for the budget hold little outside it.
STREAM_BUFFER_BYTES: Final = 16 * 1024
# The kernel's receive buffer of each connection (Kafka's socket.receive.buffer.bytes is 100 KiB):
# asyncio takes what it holds in one read, so it bounds what a connection waiting for the budget
# holds beyond its stream buffer. Linux doubles the value for its bookkeeping.
SOCKET_RECEIVE_BUFFER_BYTES: Final = 64 * 1024


class KafkaListener:
    def __init__(
        self,
        ctx: ApiContext,
        address: str,
        *,
        ssl_context: ssl.SSLContext | None = None,
        frame_bytes_max: int = DEFAULT_FRAME_BYTES_MAX,
        in_flight_max: int = DEFAULT_IN_FLIGHT_MAX,
        idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S,
        connections_max: int = DEFAULT_CONNECTIONS_MAX,
        queued_request_bytes_max: int = KAFKA_QUEUED_REQUEST_BYTES_DEFAULT,
        frame_timeout_s: float = KAFKA_FRAME_TIMEOUT_MS_DEFAULT / 1000,
    ) -> None:
        if queued_request_bytes_max < frame_bytes_max:
            # Kafka refuses the same (queued.max.request.bytes below socket.request.max.bytes).
            raise ValueError(
                f"the queued request bytes budget ({queued_request_bytes_max}) must be at least the "
                f"largest frame ({frame_bytes_max})"
            )
        self.ctx = ctx
        self.address = address
        self.ssl_context = ssl_context
        self.frame_bytes_max = frame_bytes_max
        self.in_flight_max = in_flight_max
        self.idle_timeout_s = idle_timeout_s
        self.connections_max = connections_max
        self.budget = RequestBytesBudget(queued_request_bytes_max)
        self.frame_timeout_s = frame_timeout_s
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._log = get_logger("kafka-listener", node_id=ctx.node_id)

    @property
    def sockets(self) -> Sequence[Any]:
        return self._server.sockets if self._server is not None else ()

    async def start(self) -> None:
        host, port = parse_host_port(self.address, "--kafka-listener", any_port=True)
        self._server = await asyncio.start_server(
            self._connection, host, port, ssl=self.ssl_context, limit=STREAM_BUFFER_BYTES
        )
        for listening in self._server.sockets:
            # Accepted sockets inherit it: one socket read then takes at most about this much.
            listening.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SOCKET_RECEIVE_BUFFER_BYTES)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        peer = str(writer.get_extra_info("peername"))
        if len(self._connections) >= self.connections_max:
            self._log.warning("kafka connection refused: too many connections", peer=peer, limit=self.connections_max)
            writer.close()
            return
        self._connections.add(task)
        # Answers in request order; None = close once everything before it is sent. A request
        # holds one unit of ``in_flight`` from the moment it is read until its answer is written.
        answers: asyncio.Queue[asyncio.Task[bytes] | None] = asyncio.Queue()
        in_flight = asyncio.Semaphore(self.in_flight_max)
        sender = asyncio.create_task(self._send(answers, in_flight, writer, peer))
        try:
            await self._read(reader, answers, in_flight, peer)
            answers.put_nowait(None)
            await sender
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass
        except asyncio.CancelledError:
            # Only close() cancels a connection. Ending normally matters: Python 3.11's stream
            # server logs a traceback for a cancelled connection task (its callback calls
            # task.exception()).
            pass
        finally:
            sender.cancel()
            with contextlib.suppress(BaseException):
                await sender
            while not answers.empty():
                pending = answers.get_nowait()
                if pending is not None:
                    pending.cancel()
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
            self._connections.discard(task)

    async def _read(
        self,
        reader: asyncio.StreamReader,
        answers: asyncio.Queue[asyncio.Task[bytes] | None],
        in_flight: asyncio.Semaphore,
        peer: str,
    ) -> None:
        while True:
            await in_flight.acquire()
            try:
                async with asyncio.timeout(self.idle_timeout_s):
                    prefix = await _read_prefix(reader)
            except TimeoutError:
                self._log.info("kafka connection idle; closing it", peer=peer, idle_timeout_s=self.idle_timeout_s)
                return
            if prefix is None:
                return  # the client closed between requests
            try:
                size = frame_size(prefix, self.frame_bytes_max)
            except FrameError as exc:
                self._log.warning("kafka frame refused; closing the connection", peer=peer, reason=str(exc))
                return
            await self.budget.acquire(size)
            # The bytes go back when the answer is ready, or at once if there will be none.
            answer: asyncio.Task[bytes] | None = None
            try:
                try:
                    async with asyncio.timeout(self.frame_timeout_s):
                        frame = await reader.readexactly(size)
                except TimeoutError:
                    self._log.warning(
                        "kafka frame not received in time; closing the connection",
                        peer=peer, frame_bytes=size, frame_timeout_s=self.frame_timeout_s,
                    )  # fmt: skip
                    return
                request = decode_request(frame)
                del frame
                answer = asyncio.create_task(handle(self.ctx, request))
            except asyncio.IncompleteReadError:
                self._log.info("kafka connection closed mid-frame", peer=peer)
                return
            except UnsupportedVersion as exc:
                if is_api_versions(exc):
                    answer = asyncio.create_task(_ready(unsupported_api_versions(exc)))
                    continue
                self._log.warning("kafka request refused; closing the connection", peer=peer, reason=str(exc))
                return
            except FrameError as exc:
                self._log.warning("kafka frame refused; closing the connection", peer=peer, reason=str(exc))
                return
            finally:
                self._hold_until_answered(size, answer)
                if answer is not None:
                    answers.put_nowait(answer)

    def _hold_until_answered(self, size: int, answer: asyncio.Task[bytes] | None) -> None:
        """Give a frame's bytes back to the budget once its answer is ready (or now, without one)."""
        if answer is None:
            self.budget.release(size)
        else:
            answer.add_done_callback(lambda _: self.budget.release(size))

    async def _send(
        self,
        answers: asyncio.Queue[asyncio.Task[bytes] | None],
        in_flight: asyncio.Semaphore,
        writer: asyncio.StreamWriter,
        peer: str,
    ) -> None:
        while True:
            pending = await answers.get()
            if pending is None:
                return
            try:
                data = await pending
            except Exception:
                # A handler bug: the client gets a closed connection (it retries), the node stays up.
                self._log.exception("kafka request failed; closing the connection", peer=peer)
                writer.close()
                return
            writer.write(data)
            await writer.drain()
            in_flight.release()


async def _read_prefix(reader: asyncio.StreamReader) -> bytes | None:
    """The next frame's size prefix, or None at a clean end of stream."""
    try:
        return await reader.readexactly(SIZE_BYTES)
    except asyncio.IncompleteReadError as exc:
        if exc.partial:
            raise
        return None


async def _ready(data: bytes) -> bytes:
    return data
