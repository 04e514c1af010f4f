"""A real 3-node quorum with Kafka listeners for the client tests, and what they read back through
the gRPC client to check a Kafka client's work."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from raftmeta.client import SyncControllerClient
from raftmeta.local import quorum as local_quorum
from tests.integration.conftest import FAST_NODE_ARGS


@contextmanager
def kafka_quorum(directory: Path) -> Iterator[local_quorum.LocalQuorum]:
    """3 nodes with Kafka listeners and 6 simulated brokers in 3 racks; on the way out, every node
    is stopped and its log must show no crash."""
    started = local_quorum.up(
        directory, nodes=3, brokers=6, racks=3, node_args=FAST_NODE_ARGS, heartbeat_interval_ms=200, kafka=True
    )
    try:
        yield started
    finally:
        local_quorum.down(local_quorum.LocalQuorum.load(directory))
        for node in started.nodes:
            log = Path(node.log)
            if log.exists():
                text = log.read_text()
                assert "Traceback" not in text, f"node {node.id} crashed:\n{text[-4000:]}"


def placement(client: SyncControllerClient, topic: str) -> list[tuple[int, list[int], list[int]]]:
    """(leader, replicas, ISR) of each partition of ``topic``, as the gRPC client reads them."""
    (described,) = client.describe_topics([topic]).topics
    return [(p.leader, list(p.replicas), list(p.isr)) for p in described.partitions]


def advertised_brokers(quorum: local_quorum.LocalQuorum, client: SyncControllerClient) -> dict[int, str]:
    """What a Kafka client must be told: each alive (unfenced) simulated broker, read through gRPC,
    at the Kafka listener of the (id mod N)-th node in node-id order."""
    nodes = sorted(quorum.nodes, key=lambda n: n.id)
    alive = sorted(b.broker_id for b in client.describe_cluster().brokers if not b.fenced)
    assert alive, "the quorum's fleet registered"
    addresses = [n.kafka_address for n in nodes]
    assert None not in addresses, "every node has a Kafka listener"
    return {b: str(addresses[b % len(addresses)]) for b in alive}
