"""The request strategies: every message they build goes over the wire, and the inputs that break
servers -- edge integers, unknown enum numbers, duplicates, very long and non-ASCII strings --
are actually drawn."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st

from raftmeta.fuzz.protobuf import INT32_MAX, INT32_MIN, messages, mutated
from raftmeta.fuzz.requests import METHODS, ClusterView, FuzzRequest, requests
from raftmeta.v1 import controller_pb2

VIEW = ClusterView.from_responses(
    controller_pb2.DescribeTopicsResponse(
        topics=[
            controller_pb2.TopicDescription(
                name="orders",
                topic_id=bytes(range(1, 17)),
                partitions=[controller_pb2.PartitionDescription(partition=0, leader=2, replicas=[1, 2], isr=[1, 2])],
            )
        ]
    ),
    controller_pb2.DescribeClusterResponse(
        brokers=[
            controller_pb2.BrokerDescription(broker_id=1, broker_epoch=3, pool="fast"),
            controller_pb2.BrokerDescription(broker_id=2, broker_epoch=4),
        ]
    ),
    ["r-1"],
)
SETTINGS = settings(max_examples=150, deadline=None, database=None, derandomize=True)


@SETTINGS
@given(requests(VIEW))
def test_every_request_survives_the_wire(fuzzed: FuzzRequest) -> None:
    request_type, _ = METHODS[fuzzed.method]
    assert isinstance(fuzzed.request, request_type)
    assert request_type.FromString(fuzzed.request.SerializeToString()) == fuzzed.request


def test_every_controller_service_method_is_fuzzed() -> None:
    names = {m.name for m in controller_pb2.DESCRIPTOR.services_by_name["ControllerService"].methods}
    assert set(METHODS) == names

    seen: set[str] = set()

    @settings(max_examples=300, deadline=None, database=None, derandomize=True)
    @given(requests(VIEW))
    def collect(fuzzed: FuzzRequest) -> None:
        seen.add(fuzzed.method)

    collect()
    assert seen == names


def _finds(strategy: st.SearchStrategy[Any], condition: Any) -> Any:
    return find(
        strategy,
        condition,
        settings=settings(max_examples=2000, database=None, suppress_health_check=list(HealthCheck)),
    )


def test_edge_values_are_drawn() -> None:
    topics = messages(controller_pb2.CreatableTopic.DESCRIPTOR)
    assert _finds(topics, lambda t: t.HasField("num_partitions") and t.num_partitions == INT32_MIN)
    assert _finds(topics, lambda t: t.HasField("replication_factor") and t.replication_factor == INT32_MAX)
    assert _finds(topics, lambda t: t.name in (".", ".."))
    assert _finds(topics, lambda t: len(t.name) > 249)
    assert _finds(topics, lambda t: any(ord(c) > 127 for c in t.name))
    assert _finds(topics, lambda t: len(t.configs) >= 2)
    elect = messages(controller_pb2.ElectLeadersRequest.DESCRIPTOR)
    known = set(controller_pb2.ElectionType.values())
    assert _finds(elect, lambda r: r.election_type not in known)


def test_duplicates_are_drawn_in_repeated_fields() -> None:
    def has_duplicate(values: Any) -> bool:
        items = [v.SerializeToString() if hasattr(v, "SerializeToString") else v for v in values]
        return len(items) != len(set(items))

    delete = messages(controller_pb2.DeleteTopicsRequest.DESCRIPTOR)
    assert _finds(delete, lambda r: has_duplicate(r.topic_names))
    create = messages(controller_pb2.CreateTopicsRequest.DESCRIPTOR)
    assert _finds(create, lambda r: has_duplicate(r.topics))


def test_mutations_change_a_valid_request_a_little() -> None:
    valid = controller_pb2.CreateTopicsRequest(
        topics=[controller_pb2.CreatableTopic(name="orders", num_partitions=3, replication_factor=2)],
        request_id="r-1",
    )

    @settings(max_examples=100, deadline=None, database=None, derandomize=True)
    @given(mutated(valid))
    def differs(changed: controller_pb2.CreateTopicsRequest) -> None:
        assert isinstance(changed, controller_pb2.CreateTopicsRequest)
        assert valid.request_id == "r-1" and valid.topics[0].name == "orders", "the original is left alone"

    differs()
    assert _finds(mutated(valid), lambda r: len(r.topics) == 2 and r.topics[0] == r.topics[1])
    assert _finds(
        mutated(valid), lambda r: r.topics and r.topics[0].name == "orders" and r.topics[0].num_partitions != 3
    )
