"""The brokers a Kafka client is told about: Metadata's and DescribeCluster's broker list.

A Kafka broker lists the alive brokers of its metadata image: every registered broker that is not
fenced (KRaftMetadataCache.getAliveBrokerNodes; one in controlled shutdown is still listed), and
reports a random one of them as the controller (getRandomAliveBrokerId: KRaft clients never talk
to the controller, any broker forwards). raftmeta answers the same from the node's own committed
image (a STALE DescribeCluster through the admin path: no leader round trip, as a broker answers
from its metadata cache, and an answer even without a leader), with two differences a client
cannot tell apart from a real cluster:

* the simulated brokers have no Kafka listener, so each is advertised at a raftmeta node's: broker
  ``b`` at the ``b mod N``-th of the N nodes in node-id order. Every node answers admin calls and
  forwards them to the leader, so any node's address is correct; the mapping only has to be
  deterministic (a broker keeps its address when others fail or recover).
* the controller reported is not random: it is the lowest alive broker advertised at the node
  asked, so the client keeps talking to that node (the lowest alive broker when none is).

Where no broker is alive -- a quorum without a fleet, every broker fenced, or the read refused --
the nodes are listed as the brokers (broker id = node id) with the node asked as
the controller: an empty list would leave a Kafka client nowhere to send its next request.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from raftmeta.kafka.context import ApiContext, CallRefused, KafkaNode, call
from raftmeta.v1 import controller_pb2


@dataclass(frozen=True, slots=True)
class AdvertisedBroker:
    """A broker as Kafka clients see it: its id and rack, and the Kafka listener it is reached at."""

    broker_id: int
    rack: str | None
    host: str
    port: int
    fenced: bool = False


@dataclass(frozen=True, slots=True)
class AdvertisedCluster:
    brokers: tuple[AdvertisedBroker, ...]
    controller_id: int

    def values(self) -> list[dict[str, Any]]:
        """The brokers as Metadata's and DescribeCluster's entries (each names the id differently)."""
        return [
            {"node_id": b.broker_id, "broker_id": b.broker_id, "host": b.host, "port": b.port, "rack": b.rack,
             "is_fenced": b.fenced}
            for b in self.brokers
        ]  # fmt: skip


def node_for(broker_id: int, nodes: Sequence[KafkaNode]) -> KafkaNode:
    """The node whose Kafka listener advertises ``broker_id``: the (id mod N)-th in node-id order."""
    return _node_for(broker_id, sorted(nodes, key=lambda n: n.node_id))


def _node_for(broker_id: int, ordered: Sequence[KafkaNode]) -> KafkaNode:
    """:func:`node_for` with the nodes already in node-id order (sorted once per answer)."""
    return ordered[broker_id % len(ordered)]


def nodes_as_brokers(node_id: int, nodes: Sequence[KafkaNode]) -> AdvertisedCluster:
    """The fallback when no broker is alive: the nodes themselves, the node asked as controller."""
    ordered = sorted(nodes, key=lambda n: n.node_id)
    return AdvertisedCluster(tuple(AdvertisedBroker(n.node_id, None, n.host, n.port) for n in ordered), node_id)


def advertise(
    node_id: int,
    nodes: Sequence[KafkaNode],
    registered: Sequence[controller_pb2.BrokerDescription],
    include_fenced: bool = False,
) -> AdvertisedCluster:
    """The alive (unfenced) brokers of ``registered`` at their nodes' addresses, by id; with
    ``include_fenced`` (DescribeCluster v2, KIP-1073) the fenced ones too, marked fenced."""
    alive = sorted(b.broker_id for b in registered if not b.fenced)
    if not alive:
        return nodes_as_brokers(node_id, nodes)
    listed = sorted((b for b in registered if include_fenced or not b.fenced), key=lambda b: b.broker_id)
    ordered = sorted(nodes, key=lambda n: n.node_id)
    brokers = []
    for broker in listed:
        node = _node_for(broker.broker_id, ordered)
        rack = broker.rack if broker.HasField("rack") else None
        brokers.append(AdvertisedBroker(broker.broker_id, rack, node.host, node.port, broker.fenced))
    # The alive brokers advertised at the node asked: the client keeps talking to it.
    here = [b for b in alive if _node_for(b, ordered).node_id == node_id]
    return AdvertisedCluster(tuple(brokers), (here or alive)[0])


async def advertised_cluster(ctx: ApiContext, include_fenced: bool = False) -> AdvertisedCluster:
    """The brokers to list, read from this node's committed image (DescribeCluster, STALE); a
    refused read lists the nodes, so the client can still reach one and retry."""
    try:
        response: controller_pb2.DescribeClusterResponse = await call(
            ctx, "DescribeCluster", controller_pb2.DescribeClusterRequest(consistency=controller_pb2.STALE)
        )
    except CallRefused:
        return nodes_as_brokers(ctx.node_id, ctx.nodes)
    return advertise(ctx.node_id, ctx.nodes, response.brokers, include_fenced)
