"""The node takes part in its quorum before its Kafka listener is up: starting that listener
(kio's schemas imported, 0.4-0.7 s on a loaded machine) must not delay a restarted or wiped
voter's first Fetch (the wiped-follower phases in docs/performance.md)."""

from __future__ import annotations

import asyncio
import importlib
import os
import signal
import socket
import threading
from pathlib import Path
from typing import Any

import pytest

from raftmeta.server import app
from raftmeta.server.config import NodeConfig
from raftmeta.server.node import Node

CLUSTER_ID = "0tInpP8uQ1eFQthtY7WMZg"


async def stop(serving: asyncio.Task[None]) -> None:
    """End serve() as an operator does (SIGTERM: its handler stops the node and closes every
    listener), not by cancelling it, which leaves sockets open."""
    os.kill(os.getpid(), signal.SIGTERM)
    await serving


def free_address() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return f"127.0.0.1:{port}"


@pytest.mark.timeout(60)
def test_the_node_leads_before_its_kafka_listener_has_started(tmp_path: Path, monkeypatch: Any) -> None:
    listen = free_address()
    config = NodeConfig(
        node_id=1,
        listen=listen,
        voters={1: listen},
        data_dir=tmp_path,
        cluster_id=CLUSTER_ID,
        kafka_listener=free_address(),
    )
    seen: dict[str, bool] = {}

    async def slow_kafka_listener(config: NodeConfig, admin: Any, leads: Any, raft: Any = None) -> None:
        # Returns only once the node, running without it, has elected itself (a single voter).
        node = admin.node
        while not node.is_leader:
            await node.leader_changed.wait()
            node.leader_changed.clear()
        seen["leading before the Kafka listener"] = True

    import raftmeta.kafka.server

    monkeypatch.setattr(raftmeta.kafka.server, "start_kafka_listener", slow_kafka_listener)

    async def scenario() -> None:
        ready = asyncio.Event()
        serving = asyncio.create_task(app.serve(config, ready=ready))
        waiting = asyncio.create_task(ready.wait())
        done, _ = await asyncio.wait({serving, waiting}, return_when=asyncio.FIRST_COMPLETED)
        assert waiting in done, "serve() ended before it was ready"
        await stop(serving)

    asyncio.run(scenario())
    assert seen == {"leading before the Kafka listener": True}


@pytest.mark.timeout(60)
def test_the_kafka_listeners_modules_are_imported_while_the_node_runs(tmp_path: Path, monkeypatch: Any) -> None:
    listen = free_address()
    config = NodeConfig(
        node_id=1, listen=listen, voters={1: listen}, data_dir=tmp_path, cluster_id=CLUSTER_ID,
        kafka_listener=free_address(),
    )  # fmt: skip
    leading = threading.Event()
    imported: list[str] = []
    nodes: list[Node] = []

    class SeenNode(Node):
        def __init__(self, config: NodeConfig) -> None:
            super().__init__(config)
            nodes.append(self)

    def slow_import(name: str) -> Any:
        # An import that ends only once the node leads: on the event loop's thread it never would.
        assert leading.wait(timeout=30), "the node did not run while the Kafka listener was imported"
        imported.append(name)
        return importlib.import_module(name)

    monkeypatch.setattr(app, "Node", SeenNode)
    monkeypatch.setattr(app, "import_module", slow_import)

    async def scenario() -> None:
        ready = asyncio.Event()
        serving = asyncio.create_task(app.serve(config, ready=ready))
        await asyncio.sleep(0)  # serve() makes its node before its first await
        (node,) = nodes
        while True:  # set at each role change, the first one in node.run(): not missed here
            await node.leader_changed.wait()
            if node.is_leader:
                break
        leading.set()
        await ready.wait()
        await stop(serving)

    asyncio.run(scenario())
    assert imported == [app.KAFKA_SERVER_MODULE]
