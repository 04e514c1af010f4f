"""A node that cannot start is named, with its log's tail, and nothing is left running."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from raftmeta.kraft.cluster import CLUSTER_FILE, KraftCluster, KraftNodeError
from raftmeta.local.quorum import alive

pytestmark = pytest.mark.kraft


def test_a_broker_that_dies_at_start_up_is_named_with_its_log_and_everything_is_stopped(tmp_path: Path) -> None:
    # The broker's listener port is taken: Kafka's storage tool accepts the config, the JVM exits.
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        listener = {
            "listeners": f"PLAINTEXT://127.0.0.1:{port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        }
        with pytest.raises(KraftNodeError) as failure:
            KraftCluster.start(tmp_path, controllers=1, brokers=1, racks=1, broker_config=listener)
    message = str(failure.value)
    assert message.startswith("broker 0 (pid ")
    assert "exited before it was ready" in message
    assert f"tail of {tmp_path / 'broker-0' / 'server.log'}" in message
    assert "Address already in use" in message
    recorded = json.loads((tmp_path / CLUSTER_FILE).read_text())
    assert not any(alive(n["pid"]) for n in recorded["nodes"])
