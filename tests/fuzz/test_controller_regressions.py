"""Bugs `raftmeta fuzz` found in the controller's handlers, each pinned by the smallest request
that showed it. Each used to end in an exception out of ``Controller.handle`` (which kills the
node task) or in a log that breaks DESIGN.md §9 invariant 8."""

from __future__ import annotations

import itertools

import pytest

from placement.rng import JavaRandom
from raftmeta.controller import Controller
from raftmeta.controller import topics as handlers
from raftmeta.controller.configs import TOPIC_CONFIGS, normalize_value
from raftmeta.controller.errors import ApiError
from raftmeta.v1 import controller_pb2, errors_pb2
from tests.controller.helpers import Context, error_of, incarnation


def _committing_controller() -> tuple[Controller, list[int]]:
    ids = itertools.count(1)
    controller = Controller(ids=lambda: next(ids).to_bytes(16, "big"), random=JavaRandom(3))
    offset = [-1]
    return controller, offset


def _run(controller: Controller, offset: list[int], method: str, request: object) -> object:
    handled = controller.handle(method, request, 0)  # type: ignore[arg-type]
    if handled.done:
        return handled.response
    offset[0] += len(handled.records)
    controller.commit(1, offset[0])
    return handled.response


def test_elect_leaders_naming_a_partition_twice_is_refused_not_a_crash() -> None:
    controller, offset = _committing_controller()
    for broker in (0, 1):
        _run(
            controller,
            offset,
            "RegisterBroker",
            controller_pb2.RegisterBrokerRequest(broker_id=broker, incarnation_id=incarnation(broker)),
        )
        epoch = controller.image.brokers[broker].epoch
        _run(
            controller,
            offset,
            "BrokerHeartbeat",
            controller_pb2.BrokerHeartbeatRequest(broker_id=broker, broker_epoch=epoch),
        )
    topic = controller_pb2.CreatableTopic(name="t", num_partitions=2, replication_factor=2)
    _run(controller, offset, "CreateTopics", controller_pb2.CreateTopicsRequest(topics=[topic]))
    # Reorder partition 0's replicas: its preferred leader is now an in-sync follower.
    replicas = list(reversed(controller.image.topic_by_name("t").partitions[0].replicas))  # type: ignore[union-attr]
    move = controller_pb2.ReassignablePartition(partition_index=0, replicas=replicas)
    _run(
        controller,
        offset,
        "AlterPartitionReassignments",
        controller_pb2.AlterPartitionReassignmentsRequest(
            topics=[controller_pb2.ReassignableTopic(name="t", partitions=[move])]
        ),
    )
    before = controller.image
    request = controller_pb2.ElectLeadersRequest(
        topic_partitions=[
            controller_pb2.TopicPartitions(topic="t", partitions=[0, 1]),
            controller_pb2.TopicPartitions(topic="t", partitions=[0]),
        ]
    )
    # Before the fix: two PartitionChangeRecords with the same epochs, a ReplayError out of handle.
    handled = controller.handle("ElectLeaders", request, 0)
    assert handled.done and not handled.records
    assert controller.image == before
    codes = [[(p.partition, p.error_code) for p in r.partitions] for r in handled.response.results]  # type: ignore[union-attr]
    assert codes == [
        [(0, errors_pb2.INVALID_REQUEST), (1, errors_pb2.ELECTION_NOT_NEEDED)],
        [(0, errors_pb2.INVALID_REQUEST)],
    ]
    message = handled.response.results[0].partitions[0].error_message  # type: ignore[union-attr]
    assert message == "Partition t-0 appears more than once in the request."
    # Named once, the same election goes through.
    once = controller_pb2.ElectLeadersRequest(
        topic_partitions=[controller_pb2.TopicPartitions(topic="t", partitions=[0])]
    )
    answer = _run(controller, offset, "ElectLeaders", once)
    assert answer.results[0].partitions[0].error_code == errors_pb2.NONE  # type: ignore[attr-defined]
    assert controller.image.topic_by_name("t").partitions[0].leader == replicas[0]  # type: ignore[union-attr]


@pytest.mark.parametrize("key", sorted(k for k, v in TOPIC_CONFIGS.items() if v.type in ("LONG", "INT")))
def test_a_number_too_long_for_int_is_invalid_config_not_a_crash(key: str) -> None:
    # Before the fix: int() refused more than 4300 digits with a ValueError out of the handler.
    result = normalize_value(TOPIC_CONFIGS[key], "9" * 5000)
    assert isinstance(result, ApiError)
    assert result.code == errors_pb2.INVALID_CONFIG
    assert f"for configuration {key}: Not a number of type" in result.message


def test_integer_configs_keep_their_java_parsing() -> None:
    retention = TOPIC_CONFIGS["retention.ms"]
    assert normalize_value(retention, "0" * 5000 + "1") == "1"  # leading zeros, as Long.parseLong
    assert normalize_value(retention, "+0") == "0"
    assert normalize_value(retention, "-1") == "-1"
    assert normalize_value(retention, "9223372036854775807") == "9223372036854775807"
    too_big = normalize_value(retention, "9223372036854775808")
    assert isinstance(too_big, ApiError)
    assert "Not a number of type LONG" in too_big.message
    too_small = normalize_value(TOPIC_CONFIGS["min.insync.replicas"], "-" + "0" * 30 + "5")
    assert isinstance(too_small, ApiError)
    assert "Value must be at least 1" in too_small.message


def _pools() -> Context:
    ctx = Context()
    ctx.add_brokers([1, 2, 3], pool="gold")
    ctx.add_brokers([4, 5, 6], pool="silver")
    return ctx


def test_manual_assignment_of_a_pooled_topic_stays_in_the_pool() -> None:
    ctx = _pools()
    assignment = [controller_pb2.ReplicaAssignment(partition_index=0, broker_ids=[1, 4])]
    result = ctx.run(
        handlers.create_topics,
        controller_pb2.CreateTopicsRequest(
            topics=[controller_pb2.CreatableTopic(name="m", broker_pool="gold", assignments=assignment)]
        ),
    )
    assert error_of(result) == (
        "INVALID_REPLICA_ASSIGNMENT",
        "Broker 4 of partition 0 is not in broker pool 'gold': the replicas of a topic in a pool stay in that pool.",
    )
    assert not result.records
    inside = [controller_pb2.ReplicaAssignment(partition_index=0, broker_ids=[2, 1])]
    ok = ctx.run(
        handlers.create_topics,
        controller_pb2.CreateTopicsRequest(
            topics=[controller_pb2.CreatableTopic(name="m", broker_pool="gold", assignments=inside)]
        ),
    )
    assert error_of(ok) == ("NONE", "")


def _grow(ctx: Context, name: str, count: int, **kwargs: object) -> tuple[str, str]:
    result = ctx.run(
        handlers.create_partitions,
        controller_pb2.CreatePartitionsRequest(
            topics=[controller_pb2.CreatePartitionsTopic(name=name, count=count, **kwargs)]  # type: ignore[arg-type]
        ),
    )
    (answer,) = result.response.results
    if answer.error_code != errors_pb2.NONE:
        assert not result.records, "a refused item writes nothing"
    return errors_pb2.ErrorCode.Name(answer.error_code), answer.error_message


def test_create_partitions_keeps_a_pooled_topic_in_its_pool() -> None:
    ctx = _pools()
    ctx.create_ok("g", 2, 2, broker_pool="gold")
    outside = [controller_pb2.ReplicaAssignment(partition_index=2, broker_ids=[4, 5])]
    assert _grow(ctx, "g", 3, assignments=outside) == (
        "INVALID_REPLICA_ASSIGNMENT",
        "Broker 4 of partition 2 is not in broker pool 'gold': the replicas of a topic in a pool stay in that pool.",
    )
    assert _grow(ctx, "g", 3, broker_pool="silver") == (
        "INVALID_REQUEST",
        "Topic g was created in broker pool 'gold': its new partitions stay there, not in 'silver'.",
    )
    assert _grow(ctx, "g", 4) == ("NONE", "")
    assert _grow(ctx, "g", 5, broker_pool="gold") == ("NONE", "")
    g = ctx.image.topic_by_name("g")
    assert g is not None
    assert {b for p in g.partitions for b in p.replicas} <= {1, 2, 3}


def test_a_topic_without_a_pool_grows_in_the_pool_the_request_names() -> None:
    ctx = _pools()
    ctx.create_ok("free", 1, 2)
    outside = [controller_pb2.ReplicaAssignment(partition_index=1, broker_ids=[1, 4])]
    code, _ = _grow(ctx, "free", 2, broker_pool="silver", assignments=outside)
    assert code == "INVALID_REPLICA_ASSIGNMENT"
    assert _grow(ctx, "free", 3, broker_pool="silver") == ("NONE", "")
    added = ctx.partition("free", 2)
    assert set(added.replicas) <= {4, 5, 6}
