"""The Kafka listener: asyncio streams, one reader and one writer per connection.

Kafka answers the requests of one connection in the order they came; the reader decodes each
frame and starts its handler at once (so a slow CreateTopics does not hold a Metadata behind it
in the controller), and the writer sends the answers in request order. At most
``in_flight_max`` requests of a connection are unanswered: past that the reader stops reading
and TCP pushes back on the client. A frame that is too large, truncated or undecodable, or an
api the listener does not serve, closes the connection after the answers already due (what a
Kafka broker does); nothing of it reached the controller.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Sequence
from typing import Any, Final

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


def split_host_port(address: str) -> tuple[str, int]:
    host, colon, port = address.rpartition(":")
    if not colon or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(f"{address!r} is not HOST:PORT")
    return host.strip("[]"), int(port)


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
    ) -> None:
        self.ctx = ctx
        self.address = address
        self.ssl_context = ssl_context
        self.frame_bytes_max = frame_bytes_max
        self.in_flight_max = in_flight_max
        self.idle_timeout_s = idle_timeout_s
        self.connections_max = connections_max
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._log = get_logger("kafka-listener", node_id=ctx.node_id)

    @property
    def sockets(self) -> Sequence[Any]:
        return self._server.sockets if self._server is not None else ()

    async def start(self) -> None:
        host, port = split_host_port(self.address)
        self._server = await asyncio.start_server(self._connection, host, port, ssl=self.ssl_context)

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
                frame = await reader.readexactly(size)
                request = decode_request(frame)
            except asyncio.IncompleteReadError:
                self._log.info("kafka connection closed mid-frame", peer=peer)
                return
            except UnsupportedVersion as exc:
                if is_api_versions(exc):
                    answers.put_nowait(asyncio.create_task(_ready(unsupported_api_versions(exc))))
                    continue
                self._log.warning("kafka request refused; closing the connection", peer=peer, reason=str(exc))
                return
            except FrameError as exc:
                self._log.warning("kafka frame refused; closing the connection", peer=peer, reason=str(exc))
                return
            answers.put_nowait(asyncio.create_task(handle(self.ctx, request)))

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
