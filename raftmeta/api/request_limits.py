"""Check a ControllerService request against :mod:`raftmeta.api.limits`, before anything else.

:func:`raftmeta.api.catalogue.check_controller_request` is pure: it reads the request and nothing else (no image, no
configuration), so any node can run it before forwarding, and a request it refuses has reached
no controller and written nothing. It answers the first limit broken, in field order, as a
:class:`LimitViolation` whose message names the field, its size and the limit with its value, e.g.
``len(topics)=20000 exceeds TOPICS_PER_REQUEST_MAX=10000``.

Status (the rule in :mod:`raftmeta.api.limits`): a value that is too long (characters) is
INVALID_ARGUMENT, error code INVALID_REQUEST; a request that asks for too much (bytes, counts) is
RESOURCE_EXHAUSTED, error code POLICY_VIOLATION -- Kafka's code for "Excessively large number of
partitions per request". Neither is retryable as it stands: clients must not retry it.

Everything here is a bound, not a validation: negative counts, duplicate brokers, unknown configs
and the like are the controller's to answer, per item, with Kafka's error codes. So are the limits
Kafka answers per topic (partitions and replicas of a created or grown topic): a request is
refused here only for what fails it as a whole.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf.message import Message

from raftmeta.api import limits
from raftmeta.api.rpc_errors import INVALID_REQUEST, POLICY_VIOLATION
from raftmeta.v1 import controller_pb2

# How much of an over-long value a message quotes.
QUOTE_CHARS = 32


@dataclass(frozen=True, slots=True)
class LimitViolation:
    """A request over a limit: abort the call with ``status``, ``error_code`` and ``message``."""

    limit: str  # the name of the constant in raftmeta.api.limits
    status: grpc.StatusCode
    message: str

    @property
    def error_code(self) -> str:
        """The Kafka error name for the ``raftmeta-error-code`` trailing metadata."""
        return INVALID_REQUEST if self.status == grpc.StatusCode.INVALID_ARGUMENT else POLICY_VIOLATION


def _limit(name: str) -> int:
    value: int = getattr(limits, name)
    return value


def _quote(text: str) -> str:
    return repr(text if len(text) <= QUOTE_CHARS else text[:QUOTE_CHARS] + "...")


def _too_many(field: str, count: int, limit: str) -> LimitViolation | None:
    """A count (or size) over its limit: RESOURCE_EXHAUSTED."""
    value = _limit(limit)
    if count <= value:
        return None
    return LimitViolation(limit, grpc.StatusCode.RESOURCE_EXHAUSTED, f"{field}={count} exceeds {limit}={value}")


def _too_long(field: str, text: str, limit: str) -> LimitViolation | None:
    """A string over its length limit: INVALID_ARGUMENT (quoting only its start)."""
    value = _limit(limit)
    if len(text) <= value:
        return None
    return LimitViolation(
        limit,
        grpc.StatusCode.INVALID_ARGUMENT,
        f"len({field})={len(text)} exceeds {limit}={value} (starts {_quote(text)})",
    )


def _names(field: str, names: Iterable[str]) -> Iterator[LimitViolation | None]:
    for i, name in enumerate(names):
        yield _too_long(f"{field}[{i}]", name, "TOPIC_NAME_FIELD_CHARS_MAX")


def _request_id(request: Any) -> Iterator[LimitViolation | None]:
    yield _too_long("request_id", request.request_id, "REQUEST_ID_CHARS_MAX")


def _placement(field: str, topic: Any) -> Iterator[LimitViolation | None]:
    yield _too_long(f"{field}.placer", topic.placer, "PLACER_CHARS_MAX")
    yield _too_long(f"{field}.broker_pool", topic.broker_pool, "POOL_CHARS_MAX")


# CreateTopics and CreatePartitions bound no counts of partitions or replicas here: those are per
# topic in Kafka, so the controller answers them per topic with Kafka's codes (a topic's partition
# count is INVALID_PARTITIONS, its replication factor INVALID_REPLICATION_FACTOR, a manual
# assignment INVALID_REPLICA_ASSIGNMENT), and the partitions of the whole request are Kafka's
# POLICY_VIOLATION on every topic. Failing the request here would fail the valid topics with it.
def create_topics_limits(request: controller_pb2.CreateTopicsRequest) -> Iterator[LimitViolation | None]:
    yield from _request_id(request)
    yield _too_many("len(topics)", len(request.topics), "TOPICS_PER_REQUEST_MAX")
    for i, topic in enumerate(request.topics):
        field = f"topics[{i}]"
        yield _too_long(f"{field}.name", topic.name, "TOPIC_NAME_FIELD_CHARS_MAX")
        yield _too_many(f"len({field}.configs)", len(topic.configs), "CONFIGS_PER_TOPIC_MAX")
        for key in sorted(topic.configs):
            yield _too_long(f"{field}.configs key", key, "CONFIG_KEY_CHARS_MAX")
            yield _too_long(f"{field}.configs[{_quote(key)}]", topic.configs[key], "CONFIG_VALUE_CHARS_MAX")
        yield from _placement(field, topic)


def create_partitions_limits(request: controller_pb2.CreatePartitionsRequest) -> Iterator[LimitViolation | None]:
    yield from _request_id(request)
    yield _too_many("len(topics)", len(request.topics), "TOPICS_PER_REQUEST_MAX")
    for i, topic in enumerate(request.topics):
        field = f"topics[{i}]"
        yield _too_long(f"{field}.name", topic.name, "TOPIC_NAME_FIELD_CHARS_MAX")
        yield from _placement(field, topic)


def delete_topics_limits(request: controller_pb2.DeleteTopicsRequest) -> Iterator[LimitViolation | None]:
    yield from _request_id(request)
    yield _too_many(
        "len(topic_names) + len(topic_ids)", len(request.topic_names) + len(request.topic_ids), "TOPICS_PER_REQUEST_MAX"
    )
    yield from _names("topic_names", request.topic_names)


def describe_topics_limits(request: controller_pb2.DescribeTopicsRequest) -> Iterator[LimitViolation | None]:
    yield _too_many("len(topics)", len(request.topics), "TOPICS_PER_REQUEST_MAX")
    yield from _names("topics", request.topics)


def register_broker_limits(request: controller_pb2.RegisterBrokerRequest) -> Iterator[LimitViolation | None]:
    yield _too_long("cluster_id", request.cluster_id, "CLUSTER_ID_CHARS_MAX")
    yield _too_long("rack", request.rack, "RACK_CHARS_MAX")
    yield _too_long("pool", request.pool, "POOL_CHARS_MAX")
    yield _too_many("len(endpoints)", len(request.endpoints), "ENDPOINTS_PER_BROKER_MAX")
    for i, endpoint in enumerate(request.endpoints):
        yield _too_long(f"endpoints[{i}].name", endpoint.name, "LISTENER_NAME_CHARS_MAX")
        yield _too_long(f"endpoints[{i}].host", endpoint.host, "HOST_CHARS_MAX")
    yield _too_many("len(log_dirs)", len(request.log_dirs), "LOG_DIRS_PER_BROKER_MAX")


def broker_heartbeat_limits(request: controller_pb2.BrokerHeartbeatRequest) -> Iterator[LimitViolation | None]:
    yield _too_many("len(caught_up_replicas)", len(request.caught_up_replicas), "PARTITIONS_PER_REQUEST_MAX")
    yield _too_many("len(offline_log_dirs)", len(request.offline_log_dirs), "LOG_DIRS_PER_BROKER_MAX")


def unregister_broker_limits(request: controller_pb2.UnregisterBrokerRequest) -> Iterator[LimitViolation | None]:
    yield from _request_id(request)


def alter_partition_limits(request: controller_pb2.AlterPartitionRequest) -> Iterator[LimitViolation | None]:
    yield _too_many("len(topics)", len(request.topics), "TOPICS_PER_REQUEST_MAX")
    total = 0
    for i, topic in enumerate(request.topics):
        for j, partition in enumerate(topic.partitions):
            field = f"len(topics[{i}].partitions[{j}].new_isr_with_epochs)"
            yield _too_many(field, len(partition.new_isr_with_epochs), "REPLICAS_PER_PARTITION_MAX")
        total += len(topic.partitions)
    yield _too_many("partitions in the request", total, "PARTITIONS_PER_REQUEST_MAX")


def assign_replicas_to_dirs_limits(
    request: controller_pb2.AssignReplicasToDirsRequest,
) -> Iterator[LimitViolation | None]:
    yield _too_many("len(directories)", len(request.directories), "LOG_DIRS_PER_BROKER_MAX")
    topics = 0
    total = 0
    for directory in request.directories:
        topics += len(directory.topics)
        total += sum(len(topic.partitions) for topic in directory.topics)
    yield _too_many("topics in the request", topics, "TOPICS_PER_REQUEST_MAX")
    yield _too_many("partitions in the request", total, "PARTITIONS_PER_REQUEST_MAX")


def _topic_partitions(field: str, topics: Any) -> Iterator[LimitViolation | None]:
    """``TopicPartitions`` lists (ElectLeaders, ListPartitionReassignments)."""
    yield _too_many(f"len({field})", len(topics), "TOPICS_PER_REQUEST_MAX")
    for i, topic in enumerate(topics):
        yield _too_long(f"{field}[{i}].topic", topic.topic, "TOPIC_NAME_FIELD_CHARS_MAX")
    total = sum(len(t.partitions) for t in topics)
    yield _too_many(f"partitions in {field}", total, "PARTITIONS_PER_REQUEST_MAX")


def elect_leaders_limits(request: controller_pb2.ElectLeadersRequest) -> Iterator[LimitViolation | None]:
    yield from _request_id(request)
    yield from _topic_partitions("topic_partitions", request.topic_partitions)


def alter_reassignments_limits(
    request: controller_pb2.AlterPartitionReassignmentsRequest,
) -> Iterator[LimitViolation | None]:
    yield from _request_id(request)
    yield _too_many("len(topics)", len(request.topics), "TOPICS_PER_REQUEST_MAX")
    # A target's replicas are the controller's to answer, per partition (a reassignment keeps the
    # topic's replication factor, so a target over REPLICAS_PER_PARTITION_MAX is always refused).
    total = 0
    for i, topic in enumerate(request.topics):
        yield _too_long(f"topics[{i}].name", topic.name, "TOPIC_NAME_FIELD_CHARS_MAX")
        total += len(topic.partitions)
    yield _too_many("partitions in the request", total, "PARTITIONS_PER_REQUEST_MAX")


def list_reassignments_limits(
    request: controller_pb2.ListPartitionReassignmentsRequest,
) -> Iterator[LimitViolation | None]:
    yield from _topic_partitions("topics", request.topics)


def describe_configs_limits(request: controller_pb2.DescribeConfigsRequest) -> Iterator[LimitViolation | None]:
    yield _too_many("len(topics)", len(request.topics), "TOPICS_PER_REQUEST_MAX")
    yield from _names("topics", request.topics)


def alter_configs_limits(request: controller_pb2.IncrementalAlterConfigsRequest) -> Iterator[LimitViolation | None]:
    yield from _request_id(request)
    yield _too_many("len(topics)", len(request.topics), "TOPICS_PER_REQUEST_MAX")
    for i, topic in enumerate(request.topics):
        field = f"topics[{i}]"
        yield _too_long(f"{field}.topic", topic.topic, "TOPIC_NAME_FIELD_CHARS_MAX")
        yield _too_many(f"len({field}.ops)", len(topic.ops), "CONFIGS_PER_TOPIC_MAX")
        for j, op in enumerate(topic.ops):
            yield _too_long(f"{field}.ops[{j}].name", op.name, "CONFIG_KEY_CHARS_MAX")
            yield _too_long(f"{field}.ops[{j}].value", op.value, "CONFIG_VALUE_CHARS_MAX")


def check_size(request: Message) -> LimitViolation | None:
    """The bound every request keeps, whatever its method (DescribeCluster and DescribeQuorum have
    no fields, so only their size is checked; unknown fields count towards it)."""
    size = request.ByteSize()
    return _too_many(f"{type(request).__name__} size in bytes", size, "CONTROLLER_REQUEST_BYTES_MAX")


def first_violation(checks: Iterator[LimitViolation | None]) -> LimitViolation | None:
    return next((v for v in checks if v is not None), None)
