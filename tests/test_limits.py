"""raftmeta.api.limits and check_controller_request: every limit, a request at it passes and one just
over it is refused with the right status and a message naming the field, the limit and its value;
and the largest request the limits admit still appends a batch that fits in one Fetch response."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import grpc
import pytest
from google.protobuf.message import Message

from placement.rng import JavaRandom
from raftmeta.api import limits
from raftmeta.api.catalogue import check_controller_request
from raftmeta.controller import Controller, ControllerConfig
from raftmeta.controller.configs import TOPIC_CONFIGS
from raftmeta.controller.names import MAX_NAME_LENGTH
from raftmeta.records.codec import encode_batch
from raftmeta.v1 import controller_pb2 as pb

INVALID = grpc.StatusCode.INVALID_ARGUMENT
EXHAUSTED = grpc.StatusCode.RESOURCE_EXHAUSTED
Build = Callable[[int], tuple[str, Message]]


def topic(name: str = "t", **fields: Any) -> pb.CreatableTopic:
    return pb.CreatableTopic(name=name, **fields)


def create(*topics: pb.CreatableTopic, **fields: Any) -> tuple[str, Message]:
    return "CreateTopics", pb.CreateTopicsRequest(topics=list(topics), **fields)


def assignments(partitions: int, replicas: int = 1) -> list[pb.ReplicaAssignment]:
    return [pb.ReplicaAssignment(partition_index=i, broker_ids=list(range(replicas))) for i in range(partitions)]


def grow(**fields: Any) -> tuple[str, Message]:
    return "CreatePartitions", pb.CreatePartitionsRequest(topics=[pb.CreatePartitionsTopic(**fields)])


def register(**fields: Any) -> tuple[str, Message]:
    return "RegisterBroker", pb.RegisterBrokerRequest(broker_id=1, incarnation_id=bytes(range(1, 17)), **fields)


def alter(partitions: int, replicas: int = 1, name: str = "t") -> tuple[str, Message]:
    parts = [pb.ReassignablePartition(partition_index=i, replicas=list(range(replicas))) for i in range(partitions)]
    return "AlterPartitionReassignments", pb.AlterPartitionReassignmentsRequest(
        topics=[pb.ReassignableTopic(name=name, partitions=parts)]
    )


def two_topics(n: int) -> tuple[str, Message]:
    """``n`` partitions over two topics: the per-request sum, not one topic's count, is at stake."""
    return create(topic("a", num_partitions=n // 2), topic("b", num_partitions=n - n // 2))


# (limit, status, field the message names, request builder taking the size to test)
CASES: list[tuple[str, grpc.StatusCode, str, Build]] = [
    # -- counts: RESOURCE_EXHAUSTED ------------------------------------------------------------------
    ("TOPICS_PER_REQUEST_MAX", EXHAUSTED, "len(topics)", lambda n: create(*(topic(f"t{i}") for i in range(n)))),
    (
        "TOPICS_PER_REQUEST_MAX",
        EXHAUSTED,
        "len(topic_names) + len(topic_ids)",
        lambda n: ("DeleteTopics", pb.DeleteTopicsRequest(topic_names=["a"] * (n - 1), topic_ids=[bytes(16)])),
    ),
    (
        "TOPICS_PER_REQUEST_MAX",
        EXHAUSTED,
        "len(topics)",
        lambda n: ("DescribeTopics", pb.DescribeTopicsRequest(topics=["a"] * n)),
    ),
    (
        "TOPICS_PER_REQUEST_MAX",
        EXHAUSTED,
        "len(topics)",
        lambda n: ("CreatePartitions", pb.CreatePartitionsRequest(topics=[pb.CreatePartitionsTopic(name="a")] * n)),
    ),
    (
        "TOPICS_PER_REQUEST_MAX",
        EXHAUSTED,
        "len(topic_partitions)",
        lambda n: ("ElectLeaders", pb.ElectLeadersRequest(topic_partitions=[pb.TopicPartitions(topic="a")] * n)),
    ),
    (
        "TOPICS_PER_REQUEST_MAX",
        EXHAUSTED,
        "len(topics)",
        lambda n: (
            "AlterPartitionReassignments",
            pb.AlterPartitionReassignmentsRequest(topics=[pb.ReassignableTopic(name="a")] * n),
        ),
    ),
    (
        "TOPICS_PER_REQUEST_MAX",
        EXHAUSTED,
        "len(topics)",
        lambda n: (
            "ListPartitionReassignments",
            pb.ListPartitionReassignmentsRequest(topics=[pb.TopicPartitions(topic="a")] * n),
        ),
    ),
    (
        "PARTITIONS_PER_REQUEST_MAX",
        EXHAUSTED,
        "partitions in topic_partitions",
        lambda n: (
            "ElectLeaders",
            pb.ElectLeadersRequest(topic_partitions=[pb.TopicPartitions(topic="a", partitions=range(n))]),
        ),
    ),
    ("PARTITIONS_PER_REQUEST_MAX", EXHAUSTED, "partitions in the request", alter),
    (
        "PARTITIONS_PER_REQUEST_MAX",
        EXHAUSTED,
        "partitions in topics",
        lambda n: (
            "ListPartitionReassignments",
            pb.ListPartitionReassignmentsRequest(topics=[pb.TopicPartitions(topic="a", partitions=range(n))]),
        ),
    ),
    (
        "PARTITIONS_PER_REQUEST_MAX",
        EXHAUSTED,
        "len(caught_up_replicas)",
        lambda n: (
            "BrokerHeartbeat",
            pb.BrokerHeartbeatRequest(caught_up_replicas=[pb.TopicIdPartition(topic_id=bytes(16), partition_id=1)] * n),
        ),
    ),
    (
        # A broker's AlterPartition (an ISR change) is not Kafka's per-topic admin answer: refused whole.
        "REPLICAS_PER_PARTITION_MAX",
        EXHAUSTED,
        "len(topics[0].partitions[0].new_isr_with_epochs)",
        lambda n: (
            "AlterPartition",
            pb.AlterPartitionRequest(
                topics=[
                    pb.AlterPartitionTopic(
                        partitions=[
                            pb.AlterPartitionPartition(
                                new_isr_with_epochs=[pb.BrokerIdAndEpoch(broker_id=i) for i in range(n)]
                            )
                        ]
                    )
                ]
            ),
        ),
    ),
    (
        "CONFIGS_PER_TOPIC_MAX",
        EXHAUSTED,
        "len(topics[0].configs)",
        lambda n: create(topic(configs={f"k{i}": "v" for i in range(n)})),
    ),
    (
        "ENDPOINTS_PER_BROKER_MAX",
        EXHAUSTED,
        "len(endpoints)",
        lambda n: register(endpoints=[pb.BrokerEndpointInfo(name=f"L{i}", host="h", port=1) for i in range(n)]),
    ),
    (
        "LOG_DIRS_PER_BROKER_MAX",
        EXHAUSTED,
        "len(log_dirs)",
        lambda n: register(log_dirs=[i.to_bytes(16, "big") for i in range(1000, 1000 + n)]),
    ),
    (
        "LOG_DIRS_PER_BROKER_MAX",
        EXHAUSTED,
        "len(directories)",
        lambda n: (
            "AssignReplicasToDirs",
            pb.AssignReplicasToDirsRequest(
                directories=[pb.AssignReplicasDirectory(id=i.to_bytes(16, "big")) for i in range(1000, 1000 + n)]
            ),
        ),
    ),
    (
        "LOG_DIRS_PER_BROKER_MAX",
        EXHAUSTED,
        "len(offline_log_dirs)",
        lambda n: (
            "BrokerHeartbeat",
            pb.BrokerHeartbeatRequest(offline_log_dirs=[i.to_bytes(16, "big") for i in range(1000, 1000 + n)]),
        ),
    ),
    (
        "PARTITIONS_PER_REQUEST_MAX",
        EXHAUSTED,
        "partitions in the request",
        lambda n: (
            "AssignReplicasToDirs",
            pb.AssignReplicasToDirsRequest(
                directories=[
                    pb.AssignReplicasDirectory(
                        id=bytes(15) + b"\x64", topics=[pb.AssignReplicasTopic(partitions=list(range(n)))]
                    )
                ]
            ),
        ),
    ),
    # -- lengths: INVALID_ARGUMENT -------------------------------------------------------------------
    ("REQUEST_ID_CHARS_MAX", INVALID, "len(request_id)", lambda n: create(topic(), request_id="r" * n)),
    (
        "REQUEST_ID_CHARS_MAX",
        INVALID,
        "len(request_id)",
        lambda n: ("DeleteTopics", pb.DeleteTopicsRequest(topic_names=["a"], request_id="r" * n)),
    ),
    (
        "REQUEST_ID_CHARS_MAX",
        INVALID,
        "len(request_id)",
        lambda n: ("ElectLeaders", pb.ElectLeadersRequest(request_id="r" * n)),
    ),
    ("TOPIC_NAME_FIELD_CHARS_MAX", INVALID, "len(topics[1].name)", lambda n: create(topic("ok"), topic("a" * n))),
    ("TOPIC_NAME_FIELD_CHARS_MAX", INVALID, "len(topics[0].name)", lambda n: grow(name="a" * n, count=2)),
    (
        "TOPIC_NAME_FIELD_CHARS_MAX",
        INVALID,
        "len(topic_names[0])",
        lambda n: ("DeleteTopics", pb.DeleteTopicsRequest(topic_names=["a" * n])),
    ),
    (
        "TOPIC_NAME_FIELD_CHARS_MAX",
        INVALID,
        "len(topics[0])",
        lambda n: ("DescribeTopics", pb.DescribeTopicsRequest(topics=["a" * n])),
    ),
    (
        "TOPIC_NAME_FIELD_CHARS_MAX",
        INVALID,
        "len(topic_partitions[0].topic)",
        lambda n: ("ElectLeaders", pb.ElectLeadersRequest(topic_partitions=[pb.TopicPartitions(topic="a" * n)])),
    ),
    ("TOPIC_NAME_FIELD_CHARS_MAX", INVALID, "len(topics[0].name)", lambda n: alter(1, name="a" * n)),
    (
        "TOPIC_NAME_FIELD_CHARS_MAX",
        INVALID,
        "len(topics[0].topic)",
        lambda n: (
            "ListPartitionReassignments",
            pb.ListPartitionReassignmentsRequest(topics=[pb.TopicPartitions(topic="a" * n)]),
        ),
    ),
    ("CONFIG_KEY_CHARS_MAX", INVALID, "len(topics[0].configs key)", lambda n: create(topic(configs={"k" * n: "v"}))),
    (
        "CONFIG_VALUE_CHARS_MAX",
        INVALID,
        "len(topics[0].configs['retention.ms'])",
        lambda n: create(topic(configs={"retention.ms": "1" * n})),
    ),
    ("PLACER_CHARS_MAX", INVALID, "len(topics[0].placer)", lambda n: create(topic(placer="p" * n))),
    ("PLACER_CHARS_MAX", INVALID, "len(topics[0].placer)", lambda n: grow(name="t", count=2, placer="p" * n)),
    ("POOL_CHARS_MAX", INVALID, "len(topics[0].broker_pool)", lambda n: create(topic(broker_pool="p" * n))),
    ("POOL_CHARS_MAX", INVALID, "len(pool)", lambda n: register(pool="p" * n)),
    ("RACK_CHARS_MAX", INVALID, "len(rack)", lambda n: register(rack="r" * n)),
    ("CLUSTER_ID_CHARS_MAX", INVALID, "len(cluster_id)", lambda n: register(cluster_id="c" * n)),
    (
        "LISTENER_NAME_CHARS_MAX",
        INVALID,
        "len(endpoints[0].name)",
        lambda n: register(endpoints=[pb.BrokerEndpointInfo(name="L" * n, host="h", port=1)]),
    ),
    (
        "HOST_CHARS_MAX",
        INVALID,
        "len(endpoints[0].host)",
        lambda n: register(endpoints=[pb.BrokerEndpointInfo(name="L", host="h" * n, port=1)]),
    ),
    # -- size: RESOURCE_EXHAUSTED -----------------------------------------------------------------------
    # One topic id of n - 4 bytes: 1 tag byte + a 3-byte length + the bytes = n bytes in all.
    (
        "CONTROLLER_REQUEST_BYTES_MAX",
        EXHAUSTED,
        "DeleteTopicsRequest size in bytes",
        lambda n: ("DeleteTopics", pb.DeleteTopicsRequest(topic_ids=[bytes(n - 4)])),
    ),
]


def _id(case: tuple[str, grpc.StatusCode, str, Build]) -> str:
    return f"{case[0]}-{case[2]}"


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_at_the_limit_passes_and_one_over_is_refused_naming_the_limit(
    case: tuple[str, grpc.StatusCode, str, Build],
) -> None:
    name, status, field, build = case
    value: int = getattr(limits, name)
    method, at_limit = build(value)
    assert check_controller_request(method, at_limit) is None
    method, over = build(value + 1)
    violation = check_controller_request(method, over)
    assert violation is not None
    assert violation.limit == name
    assert violation.status == status
    assert violation.error_code == ("INVALID_REQUEST" if status == INVALID else "POLICY_VIOLATION")
    assert field in violation.message and f"{name}={value}" in violation.message, violation.message
    assert f"={value + 1} " in violation.message, violation.message  # the offending size


def test_the_size_case_is_exact() -> None:
    _, request = CASES[-1][3](limits.CONTROLLER_REQUEST_BYTES_MAX)
    assert request.ByteSize() == limits.CONTROLLER_REQUEST_BYTES_MAX


# Limits Kafka answers per topic: the controller answers them (tests/controller), not this check.
PER_TOPIC_LIMITS = {"PARTITIONS_PER_TOPIC_MAX"}


def test_every_limit_a_client_controls_has_a_case() -> None:
    client_limits = {
        name
        for name in dir(limits)
        if name.endswith("_MAX") and not name.startswith(("GRPC_", "RAFT_", "CONCURRENT_", "KAFKA_"))
    }
    assert client_limits - PER_TOPIC_LIMITS == {case[0] for case in CASES}


@pytest.mark.parametrize(
    ("method", "request_"),
    [
        create(topic("ok", num_partitions=1), topic("big", num_partitions=limits.PARTITIONS_PER_TOPIC_MAX + 1)),
        create(topic("ok", num_partitions=1), topic("wide", replication_factor=limits.REPLICAS_PER_PARTITION_MAX + 1)),
        create(topic("wide", assignments=assignments(1, limits.REPLICAS_PER_PARTITION_MAX + 1))),
        create(topic("many", assignments=assignments(limits.PARTITIONS_PER_TOPIC_MAX + 1))),
        two_topics(limits.PARTITIONS_PER_REQUEST_MAX + 1),
        grow(name="t", count=limits.PARTITIONS_PER_TOPIC_MAX + 1),
        grow(name="t", count=2, assignments=assignments(1, limits.REPLICAS_PER_PARTITION_MAX + 1)),
        alter(1, limits.REPLICAS_PER_PARTITION_MAX + 1),
    ],
)
def test_partitions_and_replicas_of_created_grown_or_moved_topics_are_left_to_the_controller(
    method: str, request_: Message
) -> None:
    """Kafka answers these per topic (or, for the partitions of a whole request, on every topic
    with POLICY_VIOLATION): refusing the request here would fail its valid topics too."""
    assert check_controller_request(method, request_) is None


def test_the_controller_may_only_be_stricter_than_the_limits() -> None:
    with pytest.raises(ValueError, match="max_partitions_per_topic must be <= 10000"):
        ControllerConfig(max_partitions_per_topic=limits.PARTITIONS_PER_TOPIC_MAX + 1)
    with pytest.raises(ValueError, match="max_partitions_per_request must be <= 10000"):
        ControllerConfig(max_partitions_per_request=limits.PARTITIONS_PER_REQUEST_MAX + 1)


def test_the_message_quotes_only_the_start_of_an_overlong_value() -> None:
    violation = check_controller_request(*create(topic("x" * 100_000)))
    assert violation is not None
    assert "len(topics[0].name)=100000 exceeds TOPIC_NAME_FIELD_CHARS_MAX=4096" in violation.message
    assert len(violation.message) < 200


def test_a_name_the_naming_rule_refuses_reaches_the_controller() -> None:
    """Kafka answers a 250-character name per topic (INVALID_TOPIC_EXCEPTION), not by refusing the
    request: the field bound is far above the naming rule."""
    assert MAX_NAME_LENGTH == 249 < limits.TOPIC_NAME_FIELD_CHARS_MAX
    assert check_controller_request(*create(topic("ok"), topic("a" * 250))) is None


def test_a_config_value_over_pythons_int_digit_limit_never_reaches_the_controller() -> None:
    # int() of a string over 4,300 digits raises ValueError: the controller's number parsing would
    # raise on such a value instead of answering INVALID_CONFIG.
    assert limits.CONFIG_VALUE_CHARS_MAX < 4300
    violation = check_controller_request(*create(topic(configs={"retention.ms": "9" * 5000})))
    assert violation is not None and violation.limit == "CONFIG_VALUE_CHARS_MAX"


def test_requests_the_projects_tools_send_pass() -> None:
    # bench commit: 1000-partition topics; the demo and the CLI: small topics, manual assignments.
    assert check_controller_request(*create(topic("bench", num_partitions=1000, replication_factor=3))) is None
    assert check_controller_request(*create(topic("audit", assignments=assignments(3, 3)), request_id="x" * 36)) is None
    for method in ("DescribeCluster", "DescribeQuorum"):
        request = pb.DescribeClusterRequest() if method == "DescribeCluster" else pb.DescribeQuorumRequest()
        assert check_controller_request(method, request) is None


def test_server_options_limit_streams_per_connection() -> None:
    options = dict(limits.grpc_server_options())
    assert options["grpc.max_concurrent_streams"] == limits.CONCURRENT_STREAMS_PER_CONNECTION_MAX >= 64
    # A node reads less than its clients do (FetchResponses are large; nothing a node serves is).
    assert options["grpc.max_receive_message_length"] == limits.GRPC_SERVER_RECEIVE_BYTES_MAX
    assert limits.CONTROLLER_REQUEST_BYTES_MAX < limits.GRPC_SERVER_RECEIVE_BYTES_MAX < limits.GRPC_MESSAGE_BYTES_MAX
    assert len(limits.grpc_server_options()) == len(options)  # no option given twice
    assert "grpc.max_concurrent_streams" not in dict(limits.grpc_channel_options())


# -- the largest admitted request appends a batch that one Fetch response can carry ----------------------
BROKERS = 16
MAX_INT32 = 2**31 - 1


def _controller() -> Controller:
    ids = itertools.count(1)
    controller = Controller(config=ControllerConfig(cluster_id="c"))
    controller.ids = lambda: next(ids).to_bytes(16, "big")
    controller.random = JavaRandom(1)
    offset = 0
    for i in range(BROKERS):
        broker = MAX_INT32 - i  # the longest varints
        for method, request in (
            ("RegisterBroker", pb.RegisterBrokerRequest(broker_id=broker, incarnation_id=bytes([1]) * 16)),
            ("BrokerHeartbeat", pb.BrokerHeartbeatRequest(broker_id=broker, broker_epoch=offset + 1)),
        ):
            handled = controller.handle(method, request, 0)
            if handled.records:
                offset += len(handled.records)
                controller.commit(1, offset)
    return controller


def _largest_request() -> pb.CreateTopicsRequest:
    """As many topics as fit in CONTROLLER_REQUEST_BYTES_MAX, with the longest names, every config
    the controller accepts (each becomes a ConfigRecord naming the topic), PARTITIONS_PER_REQUEST_MAX
    partitions in all and REPLICAS_PER_PARTITION_MAX replicas each, and the longest request id."""
    configs = {name: key.default for name, key in TOPIC_CONFIGS.items()}
    request = pb.CreateTopicsRequest(request_id="r" * limits.REQUEST_ID_CHARS_MAX)
    while True:
        name = f"{len(request.topics):06d}".ljust(MAX_NAME_LENGTH, "x")
        request.topics.add(name=name, replication_factor=BROKERS, num_partitions=1, configs=configs)
        if request.ByteSize() > limits.CONTROLLER_REQUEST_BYTES_MAX:
            del request.topics[-1]
            break
    per_topic, extra = divmod(limits.PARTITIONS_PER_REQUEST_MAX, len(request.topics))
    for i, creatable in enumerate(request.topics):
        creatable.num_partitions = per_topic + (1 if i < extra else 0)
    return request


def test_the_largest_admitted_request_appends_a_batch_one_fetch_can_carry() -> None:
    assert limits.REPLICAS_PER_PARTITION_MAX == BROKERS
    request = _largest_request()
    assert check_controller_request("CreateTopics", request) is None
    handled = _controller().handle("CreateTopics", request, 0)
    assert len(handled.records) > limits.PARTITIONS_PER_REQUEST_MAX  # everything was created
    batch = encode_batch(0, 1, [r.SerializeToString() for r in handled.records], 0)
    # Room for the FetchResponse's own fields (a few dozen bytes) is left by a wide margin.
    assert len(batch) < limits.GRPC_MESSAGE_BYTES_MAX * 3 // 4, len(batch)


def test_servers_accept_the_keepalive_pings_every_channel_sends() -> None:
    """A server that allows fewer pings than its peers send answers GOAWAY too_many_pings (seen in
    node logs between nodes): the server's minimum ping interval must be below the keepalive time."""
    from raftmeta.api.limits import grpc_channel_options, grpc_server_options

    channel = dict(grpc_channel_options())
    server = dict(grpc_server_options())
    assert server["grpc.http2.min_ping_interval_without_data_ms"] < channel["grpc.keepalive_time_ms"]
    assert channel["grpc.keepalive_permit_without_calls"] == 1 and server["grpc.keepalive_permit_without_calls"] == 1
