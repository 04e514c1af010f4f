"""Start a node's Kafka listener from its configuration (raftmeta.server.app calls this).

TLS: the listener uses the TLS settings of the node's client listener if it has one, else those
of its raft listener, so a quorum that runs TLS never serves Kafka in plaintext; a CA in those
settings means mutual TLS (client certificates required), as on the gRPC listener.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable

from raftmeta.api.addresses import parse_host_port
from raftmeta.kafka.context import AdminPath, ApiContext, KafkaNode, RaftPath
from raftmeta.kafka.listener import KafkaListener
from raftmeta.server.config import NodeConfig
from raftmeta.tls import TlsConfig


def server_ssl_context(tls: TlsConfig | None) -> ssl.SSLContext | None:
    if tls is None or tls.cert is None or tls.key is None:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(str(tls.cert), str(tls.key))
    if tls.ca is not None:
        context.load_verify_locations(str(tls.ca))
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def kafka_nodes(config: NodeConfig) -> list[KafkaNode]:
    """This node and the peers it was told of, as Kafka brokers (id = node id)."""
    addresses = dict(config.kafka_peers)
    if config.kafka_listener is not None:
        addresses[config.node_id] = config.kafka_listener
    nodes = []
    for node_id, address in sorted(addresses.items()):
        host, port = parse_host_port(address, f"node {node_id}'s Kafka listener", any_port=True)
        nodes.append(KafkaNode(node_id, host, port))
    return nodes


async def start_kafka_listener(
    config: NodeConfig, admin: AdminPath, leads: Callable[[], bool] = lambda: False, raft: RaftPath | None = None
) -> KafkaListener | None:
    """The started listener, or None when ``kafka_listener`` is not set. ``leads`` tells whether
    the node leads the quorum now (raftmeta.kafka.context.ApiContext.leads); ``raft`` is the node's
    raft inbox, for brokers' Fetch of the metadata log."""
    if config.kafka_listener is None:
        return None
    tls = config.client_tls if config.client_listen is not None else config.tls
    ctx = ApiContext(
        admin=admin,
        node_id=config.node_id,
        cluster_id=config.cluster_id,
        nodes=kafka_nodes(config),
        leads=leads,
        raft=raft,
    )
    listener = KafkaListener(
        ctx,
        config.kafka_listener,
        ssl_context=server_ssl_context(tls),
        queued_request_bytes_max=config.kafka_queued_max_request_bytes,
        frame_timeout_s=config.kafka_frame_timeout_ms / 1000,
    )
    await listener.start()
    return listener
