"""Real node processes on loopback, one quorum per test (each starts in ~2 s)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from raftmeta.client import RetryPolicy, SyncControllerClient
from raftmeta.local import quorum as local_quorum

# Quick failure detection keeps these tests short: elections in ~1-2 s; the broker session stays
# well above that (Kafka: 9 s session vs 2 s fetch timeout) so a leader change fences nobody.
FAST_NODE_ARGS = ["--fetch-timeout-ms", "1000", "--election-timeout-ms", "500", "--session-timeout-ms", "4500"]


@pytest.fixture
def quorum(tmp_path: Path) -> Iterator[local_quorum.LocalQuorum]:
    started = local_quorum.up(
        tmp_path / "q", nodes=3, brokers=6, racks=3, node_args=FAST_NODE_ARGS, heartbeat_interval_ms=200
    )
    try:
        yield started
    finally:
        local_quorum.down(local_quorum.LocalQuorum.load(tmp_path / "q"))
        for node in started.nodes:
            log = Path(node.log)
            if log.exists():
                # Keep failures diagnosable: a node that crashed says why in its log.
                text = log.read_text()
                assert "Traceback" not in text, f"node {node.id} crashed:\n{text[-4000:]}"


@pytest.fixture
def client(quorum: local_quorum.LocalQuorum) -> Iterator[SyncControllerClient]:
    with SyncControllerClient(quorum.bootstrap_server, retry=RetryPolicy(deadline_s=20)) as c:
        yield c
