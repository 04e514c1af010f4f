"""raftmeta.kafka.brokers: which brokers a Kafka client is told about, and at which addresses."""

from __future__ import annotations

from raftmeta.kafka.brokers import advertise, node_for
from raftmeta.kafka.context import KafkaNode
from raftmeta.v1 import controller_pb2

# Given out of id order: the mapping follows node ids, not the order a node was configured with.
NODES = (KafkaNode(3, "10.0.0.3", 9092), KafkaNode(1, "10.0.0.1", 9092), KafkaNode(2, "10.0.0.2", 9092))


def _broker(broker_id: int, fenced: bool = False, rack: str | None = None) -> controller_pb2.BrokerDescription:
    broker = controller_pb2.BrokerDescription(broker_id=broker_id, fenced=fenced)
    if rack is not None:
        broker.rack = rack
    return broker


def test_broker_ids_map_to_nodes_in_node_id_order_not_by_equal_ids() -> None:
    # Broker 1 is not node 1: brokers 0, 1, 2 are at the 1st, 2nd and 3rd node by id, then it wraps.
    assert [node_for(b, NODES).node_id for b in range(7)] == [1, 2, 3, 1, 2, 3, 1]


def test_a_broker_keeps_its_address_when_others_are_fenced() -> None:
    everyone = advertise(1, NODES, [_broker(b) for b in range(4)])
    one_fenced = advertise(1, NODES, [_broker(0, fenced=True)] + [_broker(b) for b in range(1, 4)])
    assert {b.broker_id: b.host for b in one_fenced.brokers} == {
        b.broker_id: b.host for b in everyone.brokers if b.broker_id != 0
    }
    # Node 1 advertises brokers 0 and 3; with 0 fenced, 3 is the controller it names.
    assert (everyone.controller_id, one_fenced.controller_id) == (0, 3)


def test_a_rack_is_passed_on_and_an_unset_one_is_null() -> None:
    cluster = advertise(2, NODES, [_broker(0, rack="rack-a"), _broker(1)])
    assert [(b.broker_id, b.rack) for b in cluster.brokers] == [(0, "rack-a"), (1, None)]
    assert cluster.controller_id == 1
