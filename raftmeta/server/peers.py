"""Outbound RaftService calls to the other voters.

Each outbound request of the core becomes one unary (or, for FetchSnapshot, one server-streaming)
call with a deadline; the answer is handed back as an Envelope with the request's correlation id.
Fetches, the one request sent continuously, go by default over one long-lived ``FetchStream``
per peer instead (:class:`FetchStreamCall`): a message on an open stream costs about half the
CPU and latency of a unary call here, and a replication round is two such messages.
A failed call is dropped: the core retries by itself (its request timeout). gRPC channels
reconnect with backoff on their own; a broken connection shows up as UNAVAILABLE. With the node's
TLS settings the channels present its certificate and verify the peers against its CA. Every failed
call is also reported to ``unavailable`` (the node checks whether the peer's process is gone:
see raftmeta/server/probe.py).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

import grpc
import grpc.aio

from raftmeta.logs import get_logger
from raftmeta.raft import Envelope
from raftmeta.server.seams import PeerLink, PeersFactory
from raftmeta.tls import TlsConfig, material, open_channel
from raftmeta.v1 import raft_pb2, raft_pb2_grpc

if TYPE_CHECKING:  # config imports FetchRpc from here
    from raftmeta.server.config import NodeConfig

REQUEST_RPC: dict[type, str] = {
    raft_pb2.VoteRequest: "Vote",
    raft_pb2.BeginQuorumEpochRequest: "BeginQuorumEpoch",
    raft_pb2.EndQuorumEpochRequest: "EndQuorumEpoch",
    raft_pb2.FetchRequest: "Fetch",
    raft_pb2.FetchSnapshotRequest: "FetchSnapshot",
}


# The end-of-stream sentinel of a grpc.aio call's read() (not in the type stubs).
STREAM_EOF: Any = getattr(grpc.aio, "EOF")  # noqa: B009

FetchRpc = Literal["stream", "unary"]
FETCH_RPCS: tuple[FetchRpc, ...] = ("stream", "unary")


def is_request(message: object) -> bool:
    return type(message) in REQUEST_RPC


class FetchStreamCall:
    """One open ``FetchStream`` call to a peer.

    Requests are written in order and the peer answers each one, in order, so the answers are
    matched to the requests' correlation ids by position. Writes are serialized (gRPC allows one
    outstanding write per call). When the call ends -- the peer died, restarted or refused a
    request -- the requests still waiting are dropped (the core retries) and ``failed`` is told.
    """

    def __init__(
        self,
        stub: raft_pb2_grpc.RaftServiceStub,
        peer: int,
        node_id: int,
        deliver: Callable[[Envelope], None],
        failed: Callable[[int, str], None],
    ) -> None:
        self.peer = peer
        self._node_id = node_id
        self._deliver = deliver
        self._failed = failed
        # No request iterator: requests go in with write(), answers come out with read().
        self._call: Any = stub.FetchStream()  # type: ignore[call-arg]
        # (correlation id, monotonic send time) of the requests not answered yet, oldest first.
        self._waiting: deque[tuple[int, float]] = deque()
        self._outgoing: deque[raft_pb2.FetchRequest] = deque()
        self._writer: asyncio.Task[None] | None = None
        self._reader = asyncio.create_task(self._read())
        self.closed = False

    def oldest_wait_s(self, now: float) -> float:
        return now - self._waiting[0][1] if self._waiting else 0.0

    def send(self, correlation_id: int, request: raft_pb2.FetchRequest, now: float) -> None:
        self._waiting.append((correlation_id, now))
        self._outgoing.append(request)
        if self._writer is None:
            self._writer = asyncio.create_task(self._write())

    async def _write(self) -> None:
        try:
            while self._outgoing:
                await self._call.write(self._outgoing.popleft())
        except (grpc.aio.AioRpcError, asyncio.InvalidStateError) as exc:
            # The reader sees the same end of the call and reports it; nothing more to do here.
            self._outgoing.clear()
            self.cancel(f"write failed: {type(exc).__name__}")
        finally:
            self._writer = None

    async def _read(self) -> None:
        reason = "closed by the peer"
        try:
            while True:
                response = await self._call.read()
                if response is STREAM_EOF:
                    break
                if not self._waiting:
                    reason = "an answer nobody asked for"
                    break
                correlation_id, _ = self._waiting.popleft()
                self._deliver(Envelope(self.peer, self._node_id, correlation_id, response))
        except grpc.aio.AioRpcError as exc:
            reason = exc.code().name
        except asyncio.CancelledError:
            reason = "cancelled"
        finally:
            self._end(reason)

    def _end(self, reason: str) -> None:
        if self.closed:
            return
        self.closed = True
        self._waiting.clear()
        self._call.cancel()
        if reason != "cancelled":
            self._failed(self.peer, reason)

    def cancel(self, reason: str) -> None:
        """End the call now (stuck, or the node is closing); the reader reports ``reason``."""
        if not self.closed:
            self._reader.cancel()
            self._end(reason)

    async def close(self) -> None:
        self.cancel("cancelled")
        await asyncio.gather(self._reader, *([self._writer] if self._writer else []), return_exceptions=True)


class Peers:
    def __init__(
        self,
        node_id: int,
        voters: dict[int, str],
        deliver: Callable[[Envelope], None],
        *,
        request_timeout_ms: int,
        fetch_max_wait_ms: int,
        unavailable: Callable[[int], None] | None = None,
        tls: TlsConfig | None = None,
        fetch_rpc: FetchRpc = "stream",
    ) -> None:
        self.node_id = node_id
        self._deliver = deliver
        self._unavailable = unavailable
        # With TLS, our own certificate is our client certificate: peers with mutual TLS check it
        # (and its CN, node-N) before they take a RaftService call from us.
        tls_material = material(tls)
        self._tls_material = tls_material
        self._channels = {
            peer: open_channel(address, tls_material) for peer, address in voters.items() if peer != node_id
        }
        self._stubs = {peer: raft_pb2_grpc.RaftServiceStub(channel) for peer, channel in self._channels.items()}
        self._request_timeout_s = request_timeout_ms / 1000
        # A Fetch may be parked by the leader for up to its max wait: allow for it.
        self._fetch_timeout_s = (fetch_max_wait_ms + request_timeout_ms) / 1000
        self._tasks: set[asyncio.Task[None]] = set()
        self._log = get_logger("peers", node_id=node_id)
        self.failures = 0
        self._fetch_rpc = fetch_rpc
        self._fetch_streams: dict[int, FetchStreamCall] = {}

    def learn(self, addresses: dict[int, str]) -> None:
        for peer, address in addresses.items():
            if peer == self.node_id:
                continue
            old = self._channels.pop(peer, None)
            if old is not None:
                self._close_later(old)
            self._channels[peer] = open_channel(address, self._tls_material)
            self._stubs[peer] = raft_pb2_grpc.RaftServiceStub(self._channels[peer])
            stream = self._fetch_streams.pop(peer, None)
            if stream is not None:
                stream.cancel("the peer's address changed")

    def _close_later(self, channel: grpc.aio.Channel) -> None:
        task = asyncio.create_task(channel.close(grace=None))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def send(self, envelope: Envelope) -> None:
        stub = self._stubs.get(envelope.destination)
        if stub is None:
            self._log.warning("no channel to destination", destination=envelope.destination)
            return
        message = envelope.message
        if self._fetch_rpc == "stream" and isinstance(message, raft_pb2.FetchRequest):
            self._send_fetch(stub, envelope.destination, envelope.correlation_id, message)
            return
        task = asyncio.create_task(self._call(stub, envelope))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _send_fetch(
        self, stub: raft_pb2_grpc.RaftServiceStub, peer: int, correlation_id: int, request: raft_pb2.FetchRequest
    ) -> None:
        now = time.monotonic()
        stream = self._fetch_streams.get(peer)
        if stream is not None and not stream.closed and stream.oldest_wait_s(now) > self._fetch_timeout_s:
            # A request has waited longer than a unary Fetch's deadline: the peer is paused,
            # partitioned or wedged. A new request would only queue behind it on this stream.
            stream.cancel("no answer within the fetch deadline")
        if stream is None or stream.closed:
            stream = FetchStreamCall(stub, peer, self.node_id, self._deliver, self._stream_failed)
            self._fetch_streams[peer] = stream
        stream.send(correlation_id, request, now)

    def _stream_failed(self, peer: int, reason: str) -> None:
        self.failures += 1
        self._log.debug("fetch stream ended", peer=peer, reason=reason)
        if self._unavailable is not None:
            self._unavailable(peer)

    async def _call(self, stub: raft_pb2_grpc.RaftServiceStub, envelope: Envelope) -> None:
        message: Any = envelope.message
        rpc_name = REQUEST_RPC[type(message)]
        timeout = self._fetch_timeout_s if rpc_name == "Fetch" else self._request_timeout_s
        try:
            if rpc_name == "FetchSnapshot":
                stream: Any = stub.FetchSnapshot(message, timeout=timeout)
                async for response in stream:
                    self._deliver(Envelope(envelope.destination, self.node_id, envelope.correlation_id, response))
                return
            response = await getattr(stub, rpc_name)(message, timeout=timeout)
        except grpc.aio.AioRpcError as exc:
            self.failures += 1
            self._log.debug("peer call failed", peer=envelope.destination, rpc=rpc_name, code=exc.code().name)
            if self._unavailable is not None:
                # Any failure, not only UNAVAILABLE: a call in flight when the peer's process dies
                # does not always end with that code. The node's probe tells dead from slow.
                self._unavailable(envelope.destination)
            return
        self._deliver(Envelope(envelope.destination, self.node_id, envelope.correlation_id, response))

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await asyncio.gather(*(stream.close() for stream in self._fetch_streams.values()))
        await asyncio.gather(*(channel.close(grace=None) for channel in self._channels.values()))


def grpc_peers(config: NodeConfig) -> PeersFactory:
    """The node's default peers: RaftService calls over gRPC to the configured voters' addresses."""

    def make(deliver: Callable[[Envelope], None], unavailable: Callable[[int], None]) -> PeerLink:
        return Peers(
            config.node_id,
            config.voters,
            deliver,
            request_timeout_ms=config.request_timeout_ms,
            fetch_max_wait_ms=config.fetch_max_wait_ms,
            unavailable=unavailable,
            tls=config.tls,
            fetch_rpc=config.fetch_rpc,
        )

    return make
