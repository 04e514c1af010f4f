"""One client connection to a Kafka listener, asyncio, with requests pipelined on it.

A Kafka connection answers its requests in the order they were sent, each answer carrying the
request's correlation id; this connection keeps the requests in flight in a map by that id, so
several tasks may share it (or each have its own). Requests and responses are kio's entities
(:mod:`raftmeta.kafka.requests`), so the same code speaks to raftmeta's listener and to a real
Kafka broker or controller. A broken connection fails every request in flight with
:class:`ConnectionError`; the connection is not reopened (the caller decides where to go next).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from typing import Any, Final

from raftmeta.api.addresses import parse_host_port
from raftmeta.kafka.framing import SIZE_BYTES
from raftmeta.kafka.requests import decode_response, encode_request

# A response header begins with the correlation id in every header version (v0 and v1).
CORRELATION_ID_BYTES: Final = 4
# The largest response accepted (a Metadata answer of a large cluster is megabytes).
RESPONSE_BYTES_MAX: Final = 256 * 1024 * 1024


class KafkaConnection:
    def __init__(
        self, address: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str
    ) -> None:
        self.address = address
        self.client_id = client_id
        self._reader = reader
        self._writer = writer
        self._correlation = itertools.count(1)
        self._pending: dict[int, tuple[int, int, asyncio.Future[Any]]] = {}
        self._broken: BaseException | None = None
        self._receiver = asyncio.create_task(self._receive())

    @classmethod
    async def open(cls, address: str, client_id: str, timeout_s: float) -> KafkaConnection:
        host, port = parse_host_port(address, "Kafka address")
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout_s)
        return cls(address, reader, writer, client_id)

    @property
    def broken(self) -> bool:
        return self._broken is not None

    async def call(self, api_key: int, version: int, values: dict[str, Any], timeout_s: float) -> Any:
        """Send one request and wait for its answer (a kio response entity). A timeout raises
        :class:`TimeoutError` and breaks the connection: a later answer to it would be read as
        another request's, so nothing else may be sent on it."""
        if self._broken is not None:
            raise ConnectionError(f"{self.address}: connection broken ({self._broken})")
        correlation_id = next(self._correlation)
        frame = encode_request(api_key, version, values, correlation_id, self.client_id)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[correlation_id] = (api_key, version, future)
        self._writer.write(len(frame).to_bytes(SIZE_BYTES, "big") + frame)
        try:
            await self._writer.drain()
            return await asyncio.wait_for(future, timeout_s)
        except TimeoutError:
            self._break(TimeoutError(f"{self.address}: no answer to api key {api_key} within {timeout_s} s"))
            raise
        except OSError as exc:
            self._break(exc)
            raise ConnectionError(f"{self.address}: {type(exc).__name__}: {exc}") from exc
        finally:
            self._pending.pop(correlation_id, None)

    async def close(self) -> None:
        self._break(ConnectionError("closed"))
        self._receiver.cancel()
        with contextlib.suppress(asyncio.CancelledError, OSError):
            await self._receiver
        with contextlib.suppress(OSError):
            self._writer.close()
            await self._writer.wait_closed()

    async def _receive(self) -> None:
        try:
            while True:
                size = int.from_bytes(await self._reader.readexactly(SIZE_BYTES), "big")
                if not CORRELATION_ID_BYTES <= size <= RESPONSE_BYTES_MAX:
                    raise ConnectionError(f"{self.address}: answer of {size} bytes")
                frame = await self._reader.readexactly(size)
                correlation_id = int.from_bytes(frame[:CORRELATION_ID_BYTES], "big", signed=True)
                pending = self._pending.get(correlation_id)
                if pending is None:
                    raise ConnectionError(f"{self.address}: answer to unknown correlation id {correlation_id}")
                api_key, version, future = pending
                _, body = decode_response(frame, api_key, version)
                if not future.done():
                    future.set_result(body)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a reset, a cut frame, or bytes kio cannot read (it raises many kinds)
            self._break(exc if isinstance(exc, ConnectionError) else ConnectionError(f"{self.address}: {exc!r}"))

    def _break(self, reason: BaseException) -> None:
        if self._broken is None:
            self._broken = reason
        for _, _, future in self._pending.values():
            if not future.done():
                future.set_exception(ConnectionError(f"{self.address}: {reason}"))
        self._pending.clear()
        self._writer.transport.abort()
