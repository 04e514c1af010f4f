"""A port picked free and taken by another process before the JVM bound it: the launcher sees the
bind failure in the node's log and starts it again on a new port (the controllers all together:
their addresses are in each one's formatted voter set; a broker alone), keeping the failed run's
logs beside the new ones."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from raftmeta.api.addresses import parse_host_port
from raftmeta.kraft import cluster as launcher
from raftmeta.kraft.cluster import CLUSTER_FILE, PORT_TAKEN, KraftCluster
from raftmeta.local.quorum import free_ports as pick_free_ports

pytestmark = pytest.mark.kraft


@pytest.fixture
def held_ports() -> Iterator[list[int]]:
    """Two ports this test listens on: any JVM told to bind them fails."""
    with ExitStack() as stack:
        ports = []
        for _ in range(2):
            sock = stack.enter_context(socket.socket())
            sock.bind(("127.0.0.1", 0))
            sock.listen()
            ports.append(sock.getsockname()[1])
        yield ports


def _port(address: str) -> int:
    return parse_host_port(address, "node address")[1]


def _logged(*paths: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in paths if p.exists())


def test_nodes_whose_ports_were_taken_start_again_on_new_ones(
    tmp_path: Path, held_ports: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The picks, in the order the launcher makes them: the controllers' (a held port, as if taken
    # after the pick), the controllers' again, the broker's (the other held port), the broker's again.
    script: list[list[int] | None] = [[held_ports[0]], None, [held_ports[1]], None]
    picks: list[list[int]] = []

    def free_ports(count: int) -> list[int]:
        scripted = script.pop(0) if script else None
        picks.append(scripted if scripted is not None else pick_free_ports(count))
        return picks[-1]

    monkeypatch.setattr(launcher, "free_ports", free_ports)
    cluster = KraftCluster.start(tmp_path, controllers=1, brokers=1, racks=1)
    try:
        assert script == [] and len(picks) == 4
        [controller], [broker] = cluster.controllers, cluster.brokers
        assert _port(controller.address) == picks[1][0] and _port(broker.address) == picks[3][0]
        assert not {_port(controller.address), _port(broker.address)} & set(held_ports)
        # The failed runs' logs, kept: the controller's whole first folder, the broker's logs.
        first = tmp_path / "controller-3001.port-taken-1"
        assert PORT_TAKEN in _logged(first / "server.log", first / "console.log")
        broker_dir = tmp_path / "broker-0"
        assert PORT_TAKEN in _logged(broker_dir / "server.log.port-taken-1", broker_dir / "console.log.port-taken-1")
        assert PORT_TAKEN not in _logged(broker_dir / "server.log", broker_dir / "console.log")
        # The cluster file names the nodes as they run now.
        recorded = json.loads((tmp_path / CLUSTER_FILE).read_text())
        assert {n["address"] for n in recorded["nodes"]} == {controller.address, broker.address}
    finally:
        cluster.stop()
