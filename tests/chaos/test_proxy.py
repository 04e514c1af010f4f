"""The fault-injecting link proxy on its own: forwarding, one-way drops, heal, delay."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from raftmeta.chaos.proxy import LinkProxy, Network
from raftmeta.local import quorum as local_quorum


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(1024):
        writer.write(data)
        await writer.drain()
    writer.close()


@pytest_asyncio.fixture
async def link() -> AsyncIterator[tuple[LinkProxy, Network]]:
    server = await asyncio.start_server(_echo, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    network = Network()
    (proxy_port,) = local_quorum.free_ports(1)
    proxy = LinkProxy(1, 2, proxy_port, f"127.0.0.1:{port}", network)
    await proxy.start()
    try:
        yield proxy, network
    finally:
        await proxy.close()
        server.close()
        await server.wait_closed()


async def _roundtrip(proxy: LinkProxy, payload: bytes, timeout_s: float = 2.0) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.listen_port)
    try:
        writer.write(payload)
        await writer.drain()
        return await asyncio.wait_for(reader.readexactly(len(payload)), timeout_s)
    finally:
        writer.close()
        await writer.wait_closed()


@pytest.mark.asyncio
async def test_bytes_pass_both_ways_when_the_link_is_up(link: tuple[LinkProxy, Network]) -> None:
    proxy, _ = link
    assert await _roundtrip(proxy, b"hello") == b"hello"
    assert proxy.bytes_forwarded == 10  # 5 bytes each way


@pytest.mark.asyncio
async def test_one_way_block_drops_only_that_direction_and_heal_closes_the_damaged_connection(
    link: tuple[LinkProxy, Network],
) -> None:
    proxy, network = link
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.listen_port)
    try:
        network.block({(2, 1)})  # answers from 2 to 1 vanish; requests from 1 still reach 2
        writer.write(b"ping")
        await writer.drain()
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(reader.read(10), 0.5)
        assert proxy.bytes_dropped == 4  # the echo came back and was discarded
        network.unblock({(2, 1)})
        # The stream lost bytes, so the proxy closes it once the link passes again.
        assert await asyncio.wait_for(reader.read(10), 2.0) == b""
    finally:
        writer.close()
        await writer.wait_closed()
    assert await _roundtrip(proxy, b"again") == b"again"


@pytest.mark.asyncio
async def test_delay_holds_bytes_in_order(link: tuple[LinkProxy, Network]) -> None:
    proxy, network = link
    network.set_delay({(1, 2)}, 200)
    began = time.monotonic()
    assert await _roundtrip(proxy, b"slow-but-in-order") == b"slow-but-in-order"
    assert time.monotonic() - began >= 0.2
    network.heal()
    assert network.delay_s(1, 2) == 0
