"""Outbound RaftService calls to the other voters.

Each outbound request of the core becomes one unary (or, for FetchSnapshot, one server-streaming)
call with a deadline; the answer is handed back as an Envelope with the request's correlation id.
A failed call is dropped: the core retries by itself (its request timeout). gRPC channels
reconnect with backoff on their own; a broken connection shows up as UNAVAILABLE. With the node's
TLS settings the channels present its certificate and verify the peers against its CA. Every failed
call is also reported to ``unavailable`` (the node checks whether the peer's process is gone:
see :meth:`raftmeta.server.node.Node.peer_unavailable`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import grpc
import grpc.aio

from raftmeta.logs import get_logger
from raftmeta.raft import Envelope
from raftmeta.tls import TlsConfig, material, open_channel
from raftmeta.v1 import raft_pb2, raft_pb2_grpc

REQUEST_RPC: dict[type, str] = {
    raft_pb2.VoteRequest: "Vote",
    raft_pb2.BeginQuorumEpochRequest: "BeginQuorumEpoch",
    raft_pb2.EndQuorumEpochRequest: "EndQuorumEpoch",
    raft_pb2.FetchRequest: "Fetch",
    raft_pb2.FetchSnapshotRequest: "FetchSnapshot",
}


def is_request(message: object) -> bool:
    return type(message) in REQUEST_RPC


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
    ) -> None:
        self.node_id = node_id
        self._deliver = deliver
        self._unavailable = unavailable
        # With TLS, our own certificate is our client certificate: peers with mutual TLS check it
        # (and its CN, node-N) before they take a RaftService call from us.
        tls_material = material(tls)
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

    def send(self, envelope: Envelope) -> None:
        stub = self._stubs.get(envelope.destination)
        if stub is None:
            self._log.warning("no channel to destination", destination=envelope.destination)
            return
        task = asyncio.create_task(self._call(stub, envelope))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

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
        await asyncio.gather(*(channel.close(grace=None) for channel in self._channels.values()))
