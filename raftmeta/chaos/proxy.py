"""Fault-injecting TCP proxies, one per directed node-to-node link, all in the chaos process.

Node ``i`` reaches peer ``j`` at the listen address of proxy ``(i, j)``, which forwards to
``j``'s real address. Every connection through proxy ``(i, j)`` was opened by ``i``, so its
client-to-server bytes are messages *from i to j* (requests) and its server-to-client bytes are
messages *from j to i* (responses).

Semantics (kept deliberately simple, like ``iptables -j DROP`` per direction):

- The :class:`Network` holds, per ordered pair ``(src, dst)``, whether bytes from ``src`` to
  ``dst`` pass, and a delay. A "one-way partition ``src -/-> dst``" blocks that pair only: the
  requests ``src`` sends to ``dst`` vanish, and so do ``src``'s responses to ``dst``'s own
  requests (they travel on proxy ``(dst, src)`` in its server-to-client direction).
- Blocked bytes are discarded, not buffered: the peer sees silence (gRPC deadlines fire, as with
  a cut cable) rather than a reset. The HTTP/2 stream of a connection that lost bytes is
  damaged, so when its directions are all passing again the proxy closes it ("tainted"); gRPC
  reconnects at once because the connection had been READY.
- Delayed bytes keep their order: each direction is a queue drained at ``arrival + delay``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from raftmeta.api.addresses import parse_host_port

# One read from a socket; bounded so a delayed direction's queue holds at most this per chunk.
CHUNK_BYTES_MAX = 64 * 1024
# Chunks queued per delayed direction before the reader waits (TCP backpressure takes over).
QUEUE_CHUNKS_MAX = 1024

Link = tuple[int, int]


@dataclass
class Network:
    """Which directed links pass bytes, and with what delay. Changes notify the proxies."""

    blocked: set[Link] = field(default_factory=set)
    delay_ms: dict[Link, int] = field(default_factory=dict)
    _listeners: list[Callable[[], None]] = field(default_factory=list)

    def passes(self, src: int, dst: int) -> bool:
        return (src, dst) not in self.blocked

    def delay_s(self, src: int, dst: int) -> float:
        return self.delay_ms.get((src, dst), 0) / 1000

    def block(self, links: set[Link]) -> None:
        self.blocked |= links
        self._changed()

    def unblock(self, links: set[Link]) -> None:
        self.blocked -= links
        self._changed()

    def set_delay(self, links: set[Link], delay_ms: int) -> None:
        for link in links:
            if delay_ms > 0:
                self.delay_ms[link] = delay_ms
            else:
                self.delay_ms.pop(link, None)
        self._changed()

    def heal(self) -> None:
        self.blocked.clear()
        self.delay_ms.clear()
        self._changed()

    def on_change(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)

    def _changed(self) -> None:
        for listener in self._listeners:
            listener()


@dataclass(eq=False)  # identity: kept in a set
class _Connection:
    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    tainted: bool = False

    def close(self) -> None:
        for task in self.tasks:
            task.cancel()
        for writer in (self.client, self.upstream):
            with contextlib.suppress(Exception):
                writer.close()


class LinkProxy:
    """Proxy for the connections node ``src`` opens to node ``dst``."""

    def __init__(self, src: int, dst: int, listen_port: int, target: str, network: Network) -> None:
        self.src = src
        self.dst = dst
        self.listen_port = listen_port
        self.target_host, self.target_port = parse_host_port(target, f"the link {src}->{dst}'s target")
        self.network = network
        self._server: asyncio.Server | None = None
        self._connections: set[_Connection] = set()
        self.bytes_dropped = 0
        self.bytes_forwarded = 0
        network.on_change(self._on_network_change)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.listen_port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.listen_port)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for connection in list(self._connections):
            connection.close()
        tasks = [t for c in self._connections for t in c.tasks]
        await asyncio.gather(*tasks, return_exceptions=True)
        self._connections.clear()
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    def _on_network_change(self) -> None:
        # A connection that lost bytes cannot carry HTTP/2 any more; once its link passes both
        # ways again, close it so both ends reconnect cleanly.
        if self.network.passes(self.src, self.dst) and self.network.passes(self.dst, self.src):
            for connection in [c for c in self._connections if c.tainted]:
                connection.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(self.target_host, self.target_port)
        except OSError:
            writer.close()  # the peer is down: refuse as it would
            return
        connection = _Connection(writer, up_writer)
        self._connections.add(connection)
        connection.tasks = [
            asyncio.create_task(self._pump(connection, reader, up_writer, self.src, self.dst)),
            asyncio.create_task(self._pump(connection, up_reader, writer, self.dst, self.src)),
        ]
        try:
            await asyncio.gather(*connection.tasks, return_exceptions=True)
        finally:
            connection.close()
            self._connections.discard(connection)

    async def _pump(
        self,
        connection: _Connection,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        src: int,
        dst: int,
    ) -> None:
        queue: asyncio.Queue[tuple[float, bytes] | None] = asyncio.Queue(QUEUE_CHUNKS_MAX)
        sender = asyncio.create_task(self._send(queue, writer))
        try:
            while True:
                try:
                    data = await reader.read(CHUNK_BYTES_MAX)
                except OSError:
                    break
                if not data:
                    break
                if not self.network.passes(src, dst):
                    connection.tainted = True
                    self.bytes_dropped += len(data)
                    continue
                await queue.put((time.monotonic() + self.network.delay_s(src, dst), data))
            await queue.put(None)
            await sender
        finally:
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await sender
            # One direction ended: end the whole connection (gRPC never half-closes).
            connection.close()

    async def _send(self, queue: asyncio.Queue[tuple[float, bytes] | None], writer: asyncio.StreamWriter) -> None:
        while True:
            item = await queue.get()
            if item is None:
                return
            due, data = item
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            try:
                writer.write(data)
                await writer.drain()
            except OSError:
                return
            self.bytes_forwarded += len(data)


class ProxyMesh:
    """All proxies of a cluster: ``(i, j) -> LinkProxy`` for every ordered pair of nodes."""

    def __init__(self, addresses: dict[int, str], ports: dict[Link, int], network: Network) -> None:
        self.network = network
        self.proxies = {
            (src, dst): LinkProxy(src, dst, ports[(src, dst)], addresses[dst], network)
            for src in addresses
            for dst in addresses
            if src != dst
        }

    def voters_for(self, node_id: int, addresses: dict[int, str], voters: list[int]) -> dict[int, str]:
        """The bootstrap voter map node ``node_id`` is started with (``--voters``): itself at its
        real address, every other voter at the proxy of the link towards it."""
        return {j: addresses[j] if j == node_id else self.proxies[(node_id, j)].address for j in voters}

    def peers_for(self, node_id: int, voters: list[int]) -> dict[int, str]:
        """Where node ``node_id`` reaches the nodes that are not bootstrap voters
        (``--peer-addresses``): the proxy of the link towards each, so a node the membership
        faults make a voter is still reached through the proxies."""
        return {
            dst: proxy.address for (src, dst), proxy in self.proxies.items() if src == node_id and dst not in voters
        }

    async def start(self) -> None:
        for proxy in self.proxies.values():
            await proxy.start()

    async def close(self) -> None:
        await asyncio.gather(*(proxy.close() for proxy in self.proxies.values()), return_exceptions=True)

    def bytes_dropped(self) -> int:
        return sum(p.bytes_dropped for p in self.proxies.values())

    def bytes_by_node(self) -> dict[int, int]:
        """Bytes forwarded on the links to and from each node: a node's Raft traffic crossed the
        proxies (an observer's too, once it fetches or is made a voter)."""
        out: dict[int, int] = {}
        for (src, dst), proxy in self.proxies.items():
            for node in (src, dst):
                out[node] = out.get(node, 0) + proxy.bytes_forwarded
        return out
