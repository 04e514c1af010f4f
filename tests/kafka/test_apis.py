"""Each Kafka API's translation to raftmeta's controller requests and back, through the real
decode → handler → encode path, with a fake admin path standing in for the node."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from typing import Any

import grpc
import pytest
from kio.schema.errors import ErrorCode

from raftmeta.api.rpc_errors import error_metadata
from raftmeta.controller.configs import TOPIC_CONFIGS
from raftmeta.kafka import cluster
from raftmeta.kafka.dispatch import handle
from raftmeta.kafka.framing import FrameError, decode_request
from raftmeta.kafka.versions import SUPPORTED
from raftmeta.server.services import AdminCallError
from raftmeta.v1 import controller_pb2, errors_pb2
from tests.kafka.fakes import fleet, full_admin, orders
from tests.kafka.helpers import CLUSTER_ID, FakeAdmin, context, decode_response, request_bytes
from tests.kafka.samples import REQUESTS, TOPIC_ID
from tests.kafka.test_framing import EVERY_VERSION


def ask(admin: FakeAdmin, api_key: int, version: int, values: dict[str, Any]) -> Any:
    """Send one request through decode → handler → encode and decode the answer as a client."""
    request = decode_request(request_bytes(api_key, version, values, correlation_id=99))
    frame = asyncio.run(handle(context(admin), request))
    correlation_id, response = decode_response(frame, api_key, version)
    assert correlation_id == 99
    return response


def top(api_key: int) -> int:
    return SUPPORTED[api_key][1]


@pytest.mark.parametrize(("api_key", "version"), EVERY_VERSION)
def test_every_api_answers_at_every_advertised_version(api_key: int, version: int) -> None:
    response = ask(full_admin(), api_key, version, REQUESTS[api_key])
    assert type(response).__version__ == version


def test_api_versions_lists_what_is_served() -> None:
    response = ask(FakeAdmin(), 18, 3, REQUESTS[18])
    assert response.error_code == ErrorCode.none
    assert {k.api_key: (k.min_version, k.max_version) for k in response.api_keys} == SUPPORTED


# -- Metadata ---------------------------------------------------------------------------------------


def test_metadata_lists_the_alive_brokers_at_the_nodes_listeners() -> None:
    admin = full_admin()
    response = ask(admin, 3, top(3), {**REQUESTS[3], "topics": None})
    # Broker b at the (b mod 3)-th node (ids 1, 2, 3 -> ports 9101..9103); fenced broker 4 is not
    # listed, as a Kafka broker lists only the unfenced registrations.
    assert [(b.node_id, b.host, b.port, b.rack) for b in response.brokers] == [
        (0, "127.0.0.1", 9101, "r0"),
        (1, "127.0.0.1", 9102, "r1"),
        (2, "127.0.0.1", 9103, "r2"),
        (3, "127.0.0.1", 9101, "r0"),
        (5, "127.0.0.1", 9103, "r2"),
    ]
    # The controller reported is a broker advertised at the node asked (node 2): the lowest, 1.
    assert response.controller_id == 1 and response.cluster_id == CLUSTER_ID
    assert admin.calls == [
        # The node's own image, as a Kafka broker answers from its metadata cache: no leader round trip.
        ("DescribeCluster", controller_pb2.DescribeClusterRequest(consistency=controller_pb2.STALE)),
        # None = every topic; this node (2) follows, so through the leader (see below for a leader).
        ("DescribeTopics", controller_pb2.DescribeTopicsRequest()),
    ]
    (topic,) = response.topics
    assert (topic.name, topic.topic_id, topic.error_code) == ("orders", TOPIC_ID, ErrorCode.none)
    assert [(p.partition_index, p.leader_id, p.replica_nodes, p.isr_nodes) for p in topic.partitions] == [
        (0, 0, (0, 1), (0, 1)),
        (1, 1, (1, 2), (1, 2)),
        (2, 2, (2, 3), (2, 3)),
    ]


@pytest.mark.parametrize(("leads", "consistency"), [(True, controller_pb2.STALE), (False, controller_pb2.LINEARIZABLE)])
def test_topics_are_read_from_the_leaders_image_at_once_and_through_the_leader_elsewhere(
    leads: bool, consistency: int
) -> None:
    # A Kafka broker answers from its metadata cache; the leader's image holds every write it
    # acknowledged, a follower's learns them a Fetch later (a topic just created would be missing).
    admin = full_admin()
    ctx = dataclasses.replace(context(admin), leads=lambda: leads)
    for api_key, version, values in ((3, top(3), REQUESTS[3]), (75, 0, REQUESTS[75])):
        request = decode_request(request_bytes(api_key, version, values))
        asyncio.run(handle(ctx, request))
    described: list[Any] = [request for method, request in admin.calls if method == "DescribeTopics"]
    assert [r.consistency for r in described] == [consistency, consistency]


def test_metadata_of_an_empty_topic_list_asks_only_the_brokers_and_v0_empty_means_all() -> None:
    admin = full_admin()
    assert ask(admin, 3, top(3), {**REQUESTS[3], "topics": []}).topics == ()
    assert admin.methods() == ["DescribeCluster"]
    assert [t.name for t in ask(admin, 3, 0, {"topics": []}).topics] == ["orders"]


def test_metadata_unknown_topic_and_leaderless_partition() -> None:
    admin = full_admin()
    response = ask(admin, 3, top(3), {**REQUESTS[3], "topics": [{"name": "nope", "topic_id": None}]})
    assert [(t.name, t.error_code) for t in response.topics] == [("nope", ErrorCode.unknown_topic_or_partition)]
    leaderless = orders(1)
    leaderless.partitions[0].leader = -1
    admin.answers["DescribeTopics"] = lambda r: controller_pb2.DescribeTopicsResponse(topics=[leaderless])
    (topic,) = ask(admin, 3, top(3), {**REQUESTS[3], "topics": None}).topics
    assert topic.partitions[0].error_code == ErrorCode.leader_not_available


def test_metadata_when_no_controller_answers_names_the_error_per_topic() -> None:
    def refuse(request: Any) -> AdminCallError:
        return AdminCallError(grpc.StatusCode.UNAVAILABLE, "NOT_CONTROLLER: ...", error_metadata("NOT_CONTROLLER"))

    admin = FakeAdmin(answers={"DescribeTopics": refuse, "DescribeCluster": refuse})
    response = ask(admin, 3, top(3), REQUESTS[3])
    assert [(t.name, t.error_code) for t in response.topics] == [("orders", ErrorCode.not_controller)]
    # The brokers could not be read either: the nodes are listed, so the client can retry at one.
    assert [b.node_id for b in response.brokers] == [1, 2, 3]


# -- CreateTopics -----------------------------------------------------------------------------------


def _create(admin: FakeAdmin, topics: list[dict[str, Any]], version: int = 7, **extra: Any) -> Any:
    return ask(admin, 19, version, {"topics": topics, "timeout": 5000, "validate_only": False, **extra})


def test_create_topics_translates_counts_configs_placer_and_pool() -> None:
    admin = full_admin()
    configs = [
        {"name": "retention.ms", "value": "1000"},
        {"name": "raftmeta.placer", "value": "balanced"},
        {"name": "raftmeta.broker.pool", "value": "ssd"},
    ]
    response = _create(
        admin,
        [{"name": "a", "num_partitions": 3, "replication_factor": 2, "assignments": [], "configs": configs}],
        validate_only=True,
    )
    ((method, sent),) = admin.calls
    assert method == "CreateTopics"
    assert sent == controller_pb2.CreateTopicsRequest(
        topics=[
            controller_pb2.CreatableTopic(
                name="a",
                num_partitions=3,
                replication_factor=2,
                configs={"retention.ms": "1000"},
                placer="balanced",
                broker_pool="ssd",
            )
        ],
        validate_only=True,
        timeout_ms=5000,
    )
    (result,) = response.topics
    assert (result.name, result.error_code, result.num_partitions, result.replication_factor) == ("a", 0, 3, 2)
    assert ("retention.ms", "1000", 1) in [(c.name, c.value, c.config_source) for c in result.configs]


def test_create_topics_answers_every_topic_config_defaults_included() -> None:
    # As a Kafka broker does (CreateTopics v5+): each config with its value and source, DEFAULT_CONFIG
    # (5) for those left at their default, DYNAMIC_TOPIC_CONFIG (1) for those the request set.
    admin = full_admin()
    configs = [{"name": "retention.ms", "value": "1000"}]
    topic = {"name": "a", "num_partitions": 3, "replication_factor": 2, "assignments": [], "configs": configs}
    (result,) = _create(admin, [topic], validate_only=True).topics
    expected = {name: (key.default, 5) for name, key in TOPIC_CONFIGS.items()} | {"retention.ms": ("1000", 1)}
    assert {c.name: (c.value, c.config_source) for c in result.configs} == expected
    assert [c.name for c in result.configs] == sorted(expected)


def test_create_topics_defaults_and_manual_assignment() -> None:
    admin = full_admin()
    _create(
        admin,
        [
            {"name": "d", "num_partitions": -1, "replication_factor": -1, "assignments": [], "configs": []},
            {
                "name": "m",
                "num_partitions": -1,
                "replication_factor": -1,
                "configs": [],
                "assignments": [
                    {"partition_index": 0, "broker_ids": [1, 2]},
                    {"partition_index": 1, "broker_ids": [2, 3]},
                ],
            },
        ],
    )
    default, manual = admin.sent(0).topics
    assert not default.HasField("num_partitions") and not default.HasField("replication_factor")
    assert not manual.HasField("num_partitions") and not manual.HasField("replication_factor")
    assert [(a.partition_index, list(a.broker_ids)) for a in manual.assignments] == [(0, [1, 2]), (1, [2, 3])]


def test_create_topics_counts_that_match_the_assignment_are_dropped_others_kept() -> None:
    # kafka-python sends explicit counts with an assignment; matching ones are what Kafka's -1 means.
    admin = full_admin()
    assignment = [{"partition_index": 0, "broker_ids": [1, 2]}, {"partition_index": 1, "broker_ids": [2, 3]}]
    _create(
        admin,
        [
            {"name": "same", "num_partitions": 2, "replication_factor": 2, "configs": [], "assignments": assignment},
            {"name": "diff", "num_partitions": 3, "replication_factor": 3, "configs": [], "assignments": assignment},
        ],
    )
    same, diff = admin.sent(0).topics
    assert not same.HasField("num_partitions") and not same.HasField("replication_factor")
    assert (diff.num_partitions, diff.replication_factor) == (3, 3)  # the controller refuses these


def test_create_topics_duplicate_names_never_reach_the_controller() -> None:
    admin = full_admin()
    topic = {"name": "twice", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
    response = _create(admin, [topic, topic, {**topic, "name": "once"}])
    assert [(t.name, t.error_code) for t in response.topics] == [
        ("twice", ErrorCode.invalid_request),
        ("once", ErrorCode.none),
    ]
    assert [t.name for t in admin.sent(0).topics] == ["once"]


def test_create_topics_per_topic_errors_pass_through() -> None:
    admin = FakeAdmin(
        answers={
            "CreateTopics": lambda r: controller_pb2.CreateTopicsResponse(
                topics=[
                    controller_pb2.CreatableTopicResult(
                        name="x", error_code=errors_pb2.TOPIC_ALREADY_EXISTS, error_message="Topic 'x' already exists."
                    )
                ]
            )
        }
    )
    (result,) = _create(
        admin, [{"name": "x", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}]
    ).topics
    assert (result.error_code, result.error_message) == (ErrorCode.topic_already_exists, "Topic 'x' already exists.")
    assert (result.num_partitions, result.replication_factor, result.configs) == (-1, -1, ())
    assert result.topic_id is None  # Kafka's zero uuid, as kio reads it


@pytest.mark.parametrize(
    ("status", "code", "expected"),
    [
        (grpc.StatusCode.RESOURCE_EXHAUSTED, "POLICY_VIOLATION", ErrorCode.policy_violation),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, "THROTTLING_QUOTA_EXCEEDED", ErrorCode.throttling_quota_exceeded),
        (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REQUEST", ErrorCode.invalid_request),
        (grpc.StatusCode.INTERNAL, "UNKNOWN_SERVER_ERROR", ErrorCode.unknown_server_error),
    ],
)
def test_a_refused_call_is_each_topics_kafka_error(
    status: grpc.StatusCode, code: str | None, expected: ErrorCode
) -> None:
    metadata = error_metadata(code) if code else ()
    admin = FakeAdmin(answers={"CreateTopics": lambda r: AdminCallError(status, "refused: why", metadata)})
    topics: list[dict[str, Any]] = [
        {"name": n, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []} for n in ("a", "b")
    ]
    response = _create(admin, topics, timeout=100)
    assert [(t.name, t.error_code, t.error_message) for t in response.topics] == [
        ("a", expected, "refused: why"),
        ("b", expected, "refused: why"),
    ]


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (grpc.StatusCode.CANCELLED, "CANCELLED"),  # the leader it was forwarded to died with it open
        (grpc.StatusCode.INTERNAL, "Received RST_STREAM with error code 2"),
        (grpc.StatusCode.UNKNOWN, "Unexpected <class 'OSError'>: [Errno 28] No space left on device"),
        (grpc.StatusCode.DEADLINE_EXCEEDED, "CreateTopics was not committed before the deadline"),
        (grpc.StatusCode.UNAVAILABLE, "NOT_CONTROLLER: no leader"),  # retried until the timeout
    ],
)
def test_a_write_that_may_have_been_applied_is_request_timed_out(status: grpc.StatusCode, message: str) -> None:
    """As Kafka's forwarding answers a request whose outcome it does not know (ForwardingManager's
    onTimeout): REQUEST_TIMED_OUT, never a code that tells the client nothing was written (before:
    UNKNOWN_SERVER_ERROR for a dying leader, NOT_CONTROLLER when leadership moved)."""
    metadata = error_metadata("NOT_CONTROLLER") if status == grpc.StatusCode.UNAVAILABLE else ()
    admin = FakeAdmin(answers={"CreateTopics": lambda r: AdminCallError(status, message, metadata)})
    topics = [{"name": "a", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}]
    (result,) = _create(admin, topics, timeout=100).topics
    assert result.error_code == ErrorCode.request_timed_out
    assert result.error_message == f"{message} (the request may have been applied: its outcome is unknown)"


def test_create_topics_old_version_has_no_counts_in_the_answer() -> None:
    response = _create(
        full_admin(),
        [{"name": "a", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
        version=2,
    )
    assert [(t.name, t.error_code) for t in response.topics] == [("a", ErrorCode.none)]


# -- DeleteTopics -----------------------------------------------------------------------------------


def test_delete_topics_by_name_and_by_id() -> None:
    admin = full_admin()
    response = ask(admin, 20, 5, {"topic_names": ["orders"], "timeout": 5000})
    assert admin.calls[-1] == (
        "DeleteTopics",
        controller_pb2.DeleteTopicsRequest(topic_names=["orders"], timeout_ms=5000),
    )
    assert [(r.name, r.error_code) for r in response.responses] == [("orders", ErrorCode.none)]
    admin.answers["DeleteTopics"] = lambda r: controller_pb2.DeleteTopicsResponse(
        responses=[controller_pb2.DeletableTopicResult(name="orders", topic_id=i) for i in r.topic_ids]
    )
    response = ask(admin, 20, 6, {"topics": [{"name": None, "topic_id": TOPIC_ID}], "timeout": 5000})
    assert admin.calls[-1][1] == controller_pb2.DeleteTopicsRequest(topic_ids=[TOPIC_ID.bytes], timeout_ms=5000)
    assert [(r.name, r.topic_id) for r in response.responses] == [("orders", TOPIC_ID)]


# -- CreatePartitions -------------------------------------------------------------------------------


def test_create_partitions_manual_assignment_is_indexed_from_the_current_count() -> None:
    admin = full_admin()  # "orders" has 3 partitions
    response = ask(
        admin,
        37,
        3,
        {
            "topics": [{"name": "orders", "count": 5, "assignments": [{"broker_ids": [1, 2]}, {"broker_ids": [2, 3]}]}],
            "timeout": 5000,
            "validate_only": True,
        },
    )
    assert admin.methods() == ["DescribeTopics", "CreatePartitions"]
    # The counts the new indexes follow are the controller's own (linearizable), not a node's image.
    assert admin.sent(0).consistency == controller_pb2.LINEARIZABLE
    sent = admin.calls[1][1]
    assert sent == controller_pb2.CreatePartitionsRequest(
        topics=[
            controller_pb2.CreatePartitionsTopic(
                name="orders",
                count=5,
                assignments=[
                    controller_pb2.ReplicaAssignment(partition_index=3, broker_ids=[1, 2]),
                    controller_pb2.ReplicaAssignment(partition_index=4, broker_ids=[2, 3]),
                ],
            )
        ],
        validate_only=True,
        timeout_ms=5000,
    )
    assert [(r.name, r.error_code) for r in response.results] == [("orders", ErrorCode.none)]


def test_create_partitions_without_assignment_reads_nothing_first() -> None:
    admin = full_admin()
    ask(admin, 37, 0, REQUESTS[37])
    assert admin.methods() == ["CreatePartitions"]


# -- Configs ----------------------------------------------------------------------------------------


def test_describe_configs_topics_brokers_and_other_resources() -> None:
    admin = full_admin()
    response = ask(
        admin,
        32,
        4,
        {
            "resources": [
                {"resource_type": 2, "resource_name": "orders", "configuration_keys": None},
                {"resource_type": 2, "resource_name": "orders2", "configuration_keys": ["retention.ms"]},
                {"resource_type": 4, "resource_name": "1", "configuration_keys": None},
                {"resource_type": 16, "resource_name": "g", "configuration_keys": None},
            ],
            "include_synonyms": False,
            "include_documentation": False,
        },
    )
    assert admin.calls == [
        ("DescribeConfigs", controller_pb2.DescribeConfigsRequest(topics=["orders", "orders2"], include_defaults=True))
    ]
    everything, filtered, broker, other = response.results
    assert [(c.name, c.value, c.config_source, c.is_sensitive) for c in everything.configs] == [
        ("cleanup.policy", "delete", 5, False),
        ("retention.ms", "1000", 1, False),
    ]
    assert [c.name for c in filtered.configs] == ["retention.ms"]
    # Kafka's ConfigType: cleanup.policy is a LIST (7), retention.ms a LONG (5).
    assert [int(c.config_type) for c in everything.configs] == [7, 5]
    assert (broker.error_code, broker.configs) == (ErrorCode.none, ())
    assert other.error_code == ErrorCode.invalid_request


def test_describe_configs_v0_style_is_default_flag_is_not_sent_after_v0() -> None:
    response = ask(full_admin(), 32, 1, REQUESTS[32])
    assert [c.config_source for c in response.results[0].configs] == [5, 1]


def test_incremental_alter_configs_maps_ops_and_refuses_non_topics() -> None:
    admin = full_admin()
    response = ask(
        admin,
        44,
        1,
        {
            "resources": [
                {
                    "resource_type": 2,
                    "resource_name": "orders",
                    "configs": [
                        {"name": "retention.ms", "config_operation": 0, "value": "5"},
                        {"name": "retention.bytes", "config_operation": 1, "value": None},
                        {"name": "cleanup.policy", "config_operation": 2, "value": "compact"},
                        {"name": "cleanup.policy", "config_operation": 3, "value": "delete"},
                    ],
                },
                {"resource_type": 4, "resource_name": "1", "configs": []},
            ],
            "validate_only": True,
        },
    )
    op = controller_pb2.AlterConfigOp
    assert admin.calls == [
        (
            "IncrementalAlterConfigs",
            controller_pb2.IncrementalAlterConfigsRequest(
                topics=[
                    controller_pb2.AlterConfigsTopic(
                        topic="orders",
                        ops=[
                            op(name="retention.ms", op=op.SET, value="5"),
                            op(name="retention.bytes", op=op.DELETE),
                            op(name="cleanup.policy", op=op.APPEND, value="compact"),
                            op(name="cleanup.policy", op=op.SUBTRACT, value="delete"),
                        ],
                    )
                ],
                validate_only=True,
            ),
        )
    ]
    assert [(r.resource_name, r.error_code) for r in response.responses] == [
        ("orders", ErrorCode.none),
        ("1", ErrorCode.invalid_request),
    ]


def test_incremental_alter_configs_null_values_are_refused_but_for_delete() -> None:
    admin = full_admin()
    resources = [
        {"resource_type": 2, "resource_name": "orders", "configs": [
            {"name": "retention.ms", "config_operation": 1, "value": None}]},  # DELETE: no value needed
        {"resource_type": 2, "resource_name": "audit", "configs": [
            {"name": "retention.ms", "config_operation": 0, "value": None},
            {"name": "cleanup.policy", "config_operation": 2, "value": None}]},
    ]  # fmt: skip
    response = ask(admin, 44, top(44), {"resources": resources, "validate_only": False})
    assert [t.topic for t in admin.sent(0).topics] == ["orders"]
    assert [(r.resource_name, r.error_code, r.error_message) for r in response.responses] == [
        ("orders", ErrorCode.none, None),
        ("audit", ErrorCode.invalid_request, "Null value not supported for : retention.ms, cleanup.policy"),
    ]


@pytest.mark.parametrize("version", range(SUPPORTED[33][0], SUPPORTED[33][1] + 1))
def test_legacy_alter_configs_replaces_through_the_same_controller_alteration(version: int) -> None:
    admin = full_admin()
    response = ask(
        admin,
        33,
        version,
        {
            "resources": [
                {
                    "resource_type": 2,
                    "resource_name": "orders",
                    "configs": [{"name": "retention.ms", "value": "5"}, {"name": "segment.ms", "value": "6"}],
                },
                {
                    "resource_type": 2,
                    "resource_name": "audit",
                    "configs": [{"name": "retention.ms", "value": None}, {"name": "cleanup.policy", "value": None}],
                },
                {"resource_type": 4, "resource_name": "1", "configs": [{"name": "log.retention.ms", "value": "1"}]},
            ],
            "validate_only": True,
        },
    )
    op = controller_pb2.AlterConfigOp
    unset = [name for name in TOPIC_CONFIGS if name not in ("retention.ms", "segment.ms")]
    assert admin.calls == [
        (
            "IncrementalAlterConfigs",
            controller_pb2.IncrementalAlterConfigsRequest(
                topics=[
                    controller_pb2.AlterConfigsTopic(
                        topic="orders",
                        ops=[op(name="retention.ms", op=op.SET, value="5"), op(name="segment.ms", op=op.SET, value="6")]
                        + [op(name=name, op=op.DELETE) for name in unset],
                    )
                ],
                validate_only=True,
            ),
        )
    ]
    # A null value is refused before the controller, with a Kafka broker's code and message.
    assert [(r.resource_type, r.resource_name, r.error_code, r.error_message) for r in response.responses] == [
        (2, "orders", ErrorCode.none, None),
        (2, "audit", ErrorCode.invalid_request, "Null value not supported for : retention.ms, cleanup.policy"),
        (4, "1", ErrorCode.invalid_request, "resource type 4 cannot be altered in raftmeta (only topics can)"),
    ]


def test_legacy_alter_configs_a_topic_named_twice_goes_to_the_controller_as_it_is() -> None:
    admin = full_admin()
    twice = [
        {"resource_type": 2, "resource_name": "orders", "configs": [{"name": "retention.ms", "value": "5"}]},
        {"resource_type": 2, "resource_name": "orders", "configs": [{"name": "retention.ms", "value": None}]},
    ]
    ask(admin, 33, top(33), {"resources": twice, "validate_only": False})
    # Without ops: the controller refuses both (a resource may appear once), whatever their configs.
    assert [t.topic for t in admin.sent(0).topics] == ["orders", "orders"]
    assert [list(t.ops) for t in admin.sent(0).topics] == [[], []]


def test_legacy_alter_configs_per_topic_errors_and_a_refused_call() -> None:
    admin = full_admin()
    admin.answers["IncrementalAlterConfigs"] = lambda r: controller_pb2.IncrementalAlterConfigsResponse(
        results=[
            controller_pb2.AlterConfigsResult(topic="orders"),
            controller_pb2.AlterConfigsResult(
                topic="gone", error_code=errors_pb2.UNKNOWN_TOPIC_OR_PARTITION, error_message="no such topic"
            ),
        ]
    )
    request = {
        "resources": [
            {"resource_type": 2, "resource_name": "orders", "configs": []},
            {"resource_type": 2, "resource_name": "gone", "configs": []},
        ],
        "validate_only": False,
    }
    response = ask(admin, 33, top(33), request)
    assert [(r.resource_name, r.error_code, r.error_message) for r in response.responses] == [
        ("orders", ErrorCode.none, None),
        ("gone", ErrorCode.unknown_topic_or_partition, "no such topic"),
    ]
    over = AdminCallError(grpc.StatusCode.RESOURCE_EXHAUSTED, "too many", error_metadata("POLICY_VIOLATION"))
    refused = ask(FakeAdmin(answers={"IncrementalAlterConfigs": lambda r: over}), 33, top(33), request)
    assert [(r.error_code, r.error_message) for r in refused.responses] == [
        (ErrorCode.policy_violation, "too many")
    ] * 2


def test_legacy_alter_configs_null_configs_are_refused_when_read_and_reach_no_controller() -> None:
    # A null (-1) config list cannot be built from kio's types: the resource is written by hand.
    # The field is not nullable: the frame is refused as Kafka's parser refuses it (the connection
    # closes), rather than read as "replace with nothing".
    name = b"orders"
    body = b"\x00\x00\x00\x01" + b"\x02" + len(name).to_bytes(2, "big") + name + b"\xff\xff\xff\xff" + b"\x00"
    header = request_bytes(33, 0, {"resources": [], "validate_only": False})[: -len(b"\x00\x00\x00\x00\x00")]
    with pytest.raises(FrameError, match=r"non-nullable field AlterConfigsResource\.configs was serialized as null"):
        decode_request(header + body)


# -- Cluster ----------------------------------------------------------------------------------------


def test_describe_cluster_lists_the_alive_brokers_as_metadata_does() -> None:
    admin = full_admin()
    response = ask(admin, 60, 2, REQUESTS[60])
    assert (response.cluster_id, response.controller_id) == (CLUSTER_ID, 1)
    assert [(b.broker_id, b.port, b.rack, b.is_fenced) for b in response.brokers] == [
        (0, 9101, "r0", False),
        (1, 9102, "r1", False),
        (2, 9103, "r2", False),
        (3, 9101, "r0", False),
        (5, 9103, "r2", False),
    ]
    assert admin.methods() == ["DescribeCluster"]


def test_describe_cluster_v2_lists_fenced_brokers_when_asked() -> None:
    response = ask(full_admin(), 60, 2, {**REQUESTS[60], "include_fenced_brokers": True})
    assert [(b.broker_id, b.port, b.is_fenced) for b in response.brokers] == [
        (0, 9101, False),
        (1, 9102, False),
        (2, 9103, False),
        (3, 9101, False),
        (4, 9102, True),
        (5, 9103, False),
    ]
    assert response.controller_id == 1


def test_controller_id_is_a_broker_at_the_node_asked_else_the_lowest_alive() -> None:
    admin = full_admin()
    admin.answers["DescribeCluster"] = lambda r: fleet(fenced=(1,))
    assert ask(admin, 60, 2, REQUESTS[60]).controller_id == 4  # 1 is fenced; 4 is also at node 2
    admin.answers["DescribeCluster"] = lambda r: fleet(fenced=(0, 1, 3, 4))
    response = ask(admin, 3, top(3), {**REQUESTS[3], "topics": []})
    assert [b.node_id for b in response.brokers] == [2, 5]
    assert response.controller_id == 2  # no alive broker is at node 2: the lowest alive one


@pytest.mark.parametrize("registered", [(), tuple(range(6))], ids=["no-fleet", "all-fenced"])
def test_without_an_alive_broker_the_nodes_are_listed(registered: tuple[int, ...]) -> None:
    admin = full_admin()
    answer = fleet(fenced=registered)
    if not registered:
        del answer.brokers[:]
    admin.answers["DescribeCluster"] = lambda r: answer
    for response in (ask(admin, 60, 2, REQUESTS[60]), ask(admin, 3, top(3), {**REQUESTS[3], "topics": []})):
        assert [(b.port, b.rack) for b in response.brokers] == [(9101, None), (9102, None), (9103, None)]
        assert response.controller_id == 2


def test_a_refused_broker_read_lists_the_nodes_and_still_answers_the_topics() -> None:
    admin = full_admin()
    admin.answers["DescribeCluster"] = lambda r: AdminCallError(grpc.StatusCode.RESOURCE_EXHAUSTED, "over", ())
    response = ask(admin, 3, top(3), {**REQUESTS[3], "topics": None})
    assert [b.node_id for b in response.brokers] == [1, 2, 3] and response.controller_id == 2
    assert [t.name for t in response.topics] == ["orders"]


def test_describe_cluster_for_controllers_lists_the_nodes_and_reads_nothing() -> None:
    admin = FakeAdmin()
    response = ask(admin, 60, 2, {**REQUESTS[60], "endpoint_type": 2})
    assert (response.endpoint_type, response.controller_id) == (2, 2)
    assert [(b.broker_id, b.port) for b in response.brokers] == [(1, 9101), (2, 9102), (3, 9103)]
    assert admin.calls == []


def test_describe_quorum_maps_ms_ago_to_timestamps() -> None:
    from raftmeta.kafka.framing import decode_request as decode

    request = decode(
        request_bytes(
            55,
            2,
            {
                "topics": [
                    {
                        "topic_name": "__cluster_metadata",
                        "partitions": [{"partition_index": 0}, {"partition_index": 1}],
                    },
                    {"topic_name": "other", "partitions": [{"partition_index": 0}]},
                ]
            },
        )
    )
    values = asyncio.run(cluster.describe_quorum(context(full_admin()), request, wall_ms=lambda: 1_000_000))
    metadata, other = values["topics"]
    zero, one = metadata["partitions"]
    assert (zero["error_code"], zero["leader_id"], zero["leader_epoch"], zero["high_watermark"]) == (0, 2, 4, 100)
    assert [
        (v["replica_id"], v["log_end_offset"], v["last_fetch_timestamp"], v["last_caught_up_timestamp"])
        for v in zero["current_voters"]
    ] == [(1, 100, 999_990, 999_980), (2, 100, 1_000_000, 1_000_000), (3, 90, -1, -1)]
    assert one["error_code"] == other["partitions"][0]["error_code"] == errors_pb2.UNKNOWN_TOPIC_OR_PARTITION
    assert [n["node_id"] for n in values["nodes"]] == [1, 2, 3]


# -- Partitions -------------------------------------------------------------------------------------


def test_elect_leaders_null_means_every_partition_and_empty_means_none() -> None:
    admin = full_admin()
    ask(admin, 43, 2, {"election_type": 1, "topic_partitions": None, "timeout": 5000})
    assert admin.calls == [
        (
            "ElectLeaders",
            controller_pb2.ElectLeadersRequest(election_type=controller_pb2.ELECTION_TYPE_UNCLEAN, timeout_ms=5000),
        )
    ]
    assert (
        ask(admin, 43, 2, {"election_type": 0, "topic_partitions": [], "timeout": 5000}).replica_election_results == ()
    )
    assert len(admin.calls) == 1
    response = ask(admin, 43, 0, REQUESTS[43])
    assert admin.calls[-1][1].election_type == controller_pb2.ELECTION_TYPE_PREFERRED  # type: ignore[attr-defined]
    assert [
        (r.topic, [(p.partition_id, p.error_code) for p in r.partition_result])
        for r in response.replica_election_results
    ] == [("orders", [(0, ErrorCode.election_not_needed), (1, ErrorCode.election_not_needed)])]


def test_alter_reassignments_null_replicas_cancel() -> None:
    admin = full_admin()
    response = ask(
        admin,
        45,
        0,
        {
            "timeout": 5000,
            "topics": [
                {
                    "name": "orders",
                    "partitions": [
                        {"partition_index": 0, "replicas": [3, 4]},
                        {"partition_index": 1, "replicas": None},
                    ],
                }
            ],
        },
    )
    sent = admin.calls[0][1]
    assert sent == controller_pb2.AlterPartitionReassignmentsRequest(
        timeout_ms=5000,
        topics=[
            controller_pb2.ReassignableTopic(
                name="orders",
                partitions=[
                    controller_pb2.ReassignablePartition(partition_index=0, replicas=[3, 4]),
                    controller_pb2.ReassignablePartition(partition_index=1, cancel=True),
                ],
            )
        ],
    )
    assert [(p.partition_index, p.error_code) for p in response.responses[0].partitions] == [
        (0, ErrorCode.none),
        (1, ErrorCode.none),
    ]


def test_list_reassignments() -> None:
    admin = full_admin()
    response = ask(admin, 46, 0, {"timeout": 5000, "topics": [{"name": "orders", "partition_indexes": [0]}]})
    assert admin.calls[0][1] == controller_pb2.ListPartitionReassignmentsRequest(
        topics=[controller_pb2.TopicPartitions(topic="orders", partitions=[0])]
    )
    (partition,) = response.topics[0].partitions
    assert (partition.replicas, partition.adding_replicas, partition.removing_replicas) == ((3, 4, 0), (3, 4), (0,))


def test_describe_topic_partitions_hands_its_limit_and_cursor_to_the_controller() -> None:
    admin = full_admin()
    page = orders(partitions=2)
    admin.answers["DescribeTopics"] = lambda r: controller_pb2.DescribeTopicsResponse(
        topics=[page], next_cursor=controller_pb2.DescribeTopicsCursor(topic_name="orders", partition_index=2)
    )
    cursor = {"topic_name": "orders", "partition_index": 0}
    response = ask(admin, 75, 0, {"topics": [{"name": "orders"}], "response_partition_limit": 2, "cursor": cursor})
    assert admin.calls[0][1] == controller_pb2.DescribeTopicsRequest(
        topics=["orders"],
        response_partition_limit=2,
        cursor=controller_pb2.DescribeTopicsCursor(topic_name="orders", partition_index=0),
    )
    assert [p.partition_index for p in response.topics[0].partitions] == [0, 1]
    assert (response.next_cursor.topic_name, response.next_cursor.partition_index) == ("orders", 2)


def test_describe_topic_partitions_without_a_cursor_sends_none_and_a_whole_answer_has_none() -> None:
    admin = full_admin()
    response = ask(admin, 75, 0, {"topics": [], "response_partition_limit": 2000, "cursor": None})
    assert not admin.calls[0][1].HasField("cursor")
    assert [t.name for t in response.topics] == ["orders"] and response.next_cursor is None


def test_metadata_reads_every_page_and_joins_a_topic_cut_between_two() -> None:
    admin = full_admin()
    whole = orders(partitions=5)

    def paged(request: controller_pb2.DescribeTopicsRequest) -> controller_pb2.DescribeTopicsResponse:
        start = request.cursor.partition_index
        part = controller_pb2.TopicDescription()
        part.CopyFrom(whole)
        del part.partitions[:]
        part.partitions.extend(whole.partitions[start : start + 2])
        answer = controller_pb2.DescribeTopicsResponse(topics=[part])
        if start + 2 < len(whole.partitions):
            answer.next_cursor.topic_name = "orders"
            answer.next_cursor.partition_index = start + 2
        return answer

    admin.answers["DescribeTopics"] = paged
    response = ask(admin, 3, top(3), REQUESTS[3])
    pages = [request for method, request in admin.calls if method == "DescribeTopics"]
    assert [page.cursor.partition_index for page in pages] == [0, 2, 4]  # type: ignore[attr-defined]
    (topic,) = response.topics
    assert [p.partition_index for p in topic.partitions] == [0, 1, 2, 3, 4]


# -- retries ----------------------------------------------------------------------------------------


def test_mutating_requests_carry_a_request_id_and_reads_do_not() -> None:
    admin = full_admin()
    _create(admin, [{"name": "a", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}])
    ask(admin, 3, top(3), REQUESTS[3])
    assert admin.methods() == ["CreateTopics", "DescribeCluster", "DescribeTopics"]
    (request_id,) = admin.request_ids
    assert request_id.startswith("kafka-") and len(request_id) <= 64


def test_no_reachable_leader_is_retried_with_the_same_request_id() -> None:
    admin = full_admin()
    create = admin.answers["CreateTopics"]
    attempts = iter([
        AdminCallError(grpc.StatusCode.UNAVAILABLE, "failed to connect to all addresses"),
        AdminCallError(grpc.StatusCode.UNAVAILABLE, "NOT_CONTROLLER", error_metadata("NOT_CONTROLLER")),
    ])  # fmt: skip
    admin.answers["CreateTopics"] = lambda r: next(attempts, None) or create(r)
    response = _create(admin, [{"name": "a", "num_partitions": 1, "replication_factor": 1, "assignments": [],
                                "configs": []}])  # fmt: skip
    assert [(t.name, t.error_code) for t in response.topics] == [("a", ErrorCode.none)]
    assert len(admin.request_ids) == 3 and len(set(admin.request_ids)) == 1


def test_other_refusals_are_not_retried() -> None:
    admin = FakeAdmin(answers={"CreateTopics": lambda r: AdminCallError(
        grpc.StatusCode.RESOURCE_EXHAUSTED, "over", error_metadata("POLICY_VIOLATION"))})  # fmt: skip
    _create(admin, [{"name": "a", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}])
    assert len(admin.calls) == 1


def test_no_leader_until_the_deadline_is_request_timed_out_for_a_write() -> None:
    """A write retried until the timeout may have reached a leader that was then deposed: Kafka's
    forwarding answers REQUEST_TIMED_OUT there. A read has no outcome to hide: NOT_CONTROLLER."""
    refusal = AdminCallError(grpc.StatusCode.UNAVAILABLE, "NOT_CONTROLLER", error_metadata("NOT_CONTROLLER"))
    admin = FakeAdmin(answers={"CreateTopics": lambda r: refusal})
    response = _create(admin, [{"name": "a", "num_partitions": 1, "replication_factor": 1, "assignments": [],
                                "configs": []}], timeout=300)  # fmt: skip
    assert [(t.name, t.error_code) for t in response.topics] == [("a", ErrorCode.request_timed_out)]
    assert len(admin.calls) >= 2 and len(set(admin.request_ids)) == 1


def test_a_write_no_node_could_be_sent_is_not_controller() -> None:
    """Nothing reached a leader (the forwarding connection was refused): nothing was applied."""
    refusal = AdminCallError(grpc.StatusCode.UNAVAILABLE, "failed to connect to all addresses")
    admin = FakeAdmin(answers={"CreateTopics": lambda r: refusal})
    response = _create(admin, [{"name": "a", "num_partitions": 1, "replication_factor": 1, "assignments": [],
                                "configs": []}], timeout=300)  # fmt: skip
    assert [(t.name, t.error_code) for t in response.topics] == [("a", ErrorCode.not_controller)]


def test_add_and_remove_raft_voter_reach_the_quorum_with_the_voters_key() -> None:
    admin = full_admin()
    directory = uuid.UUID(int=7)
    added = ask(admin, 80, 0, REQUESTS[80])
    assert (added.error_code, added.error_message) == (0, None)
    method = admin.methods()[-1]
    request = admin.sent(-1)
    assert method == "AddRaftVoter"
    assert (request.voter_id, request.voter_directory_id) == (4, directory.bytes)
    assert [(x.name, x.host, x.port) for x in request.listeners] == [("CONTROLLER", "127.0.0.1", 9094)]
    removed = ask(admin, 81, 0, REQUESTS[81])
    assert (removed.error_code, removed.error_message) == (errors_pb2.VOTER_NOT_FOUND, "no voter 4")
    # Another cluster's request is refused before it reaches the quorum.
    calls = len(admin.calls)
    foreign = ask(admin, 81, 0, {**REQUESTS[81], "cluster_id": "someone-else"})
    assert foreign.error_code == errors_pb2.INCONSISTENT_CLUSTER_ID and len(admin.calls) == calls


def test_describe_topic_partitions_gives_empty_elr_lists_not_null() -> None:
    # Kafka's brokers answer the KIP-966 lists as empty lists when a partition has no ELR; Kafka's
    # kafka-topics --describe streams them and fails on null.
    admin = full_admin()
    response = ask(admin, 75, 0, {"topics": [{"name": "orders"}], "response_partition_limit": 2000, "cursor": None})
    for partition in response.topics[0].partitions:
        assert (partition.eligible_leader_replicas, partition.last_known_elr) == ((), ())
