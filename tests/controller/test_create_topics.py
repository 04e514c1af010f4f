"""CreateTopics: every rule of DESIGN.md §6, with Kafka's error codes and messages.

Kafka style: build the context, call the handler, assert on the response, replay the records."""

from __future__ import annotations

import pytest

from raftmeta.api.limits import REPLICAS_PER_PARTITION_MAX
from raftmeta.controller import ControllerConfig
from raftmeta.controller.names import COLLISION_WARNING
from raftmeta.controller.topics import create_topics
from raftmeta.v1 import controller_pb2, errors_pb2, records_pb2
from tests.controller.helpers import Context, error_of, topic


@pytest.fixture
def ctx() -> Context:
    context = Context()
    context.add_brokers([1, 2, 3], racks=["a", "b", "c"])
    return context


def test_success_writes_topic_then_configs_then_partitions(ctx: Context) -> None:
    result = ctx.create(topic("orders", 3, 2, configs={"retention.ms": "1000", "cleanup.policy": "compact"}))
    (created,) = result.response.topics
    assert (created.error_code, created.num_partitions, created.replication_factor) == (errors_pb2.NONE, 3, 2)
    assert dict(created.configs) == {"cleanup.policy": "compact", "retention.ms": "1000"}
    assert len(created.topic_id) == 16
    kinds = [r.WhichOneof("record") for r in result.records]
    assert kinds == ["topic", "config", "config", "partition", "partition", "partition"]
    assert [r.config.name for r in result.records[1:3]] == ["cleanup.policy", "retention.ms"]
    assert [r.partition.partition_id for r in result.records[3:]] == [0, 1, 2]
    orders = ctx.image.topic_by_name("orders")
    assert orders is not None
    assert orders.topic_id == created.topic_id
    assert dict(orders.configs) == {"cleanup.policy": "compact", "retention.ms": "1000"}
    for part in orders.partitions:
        assert len(part.replicas) == 2
        assert part.isr == part.replicas
        assert part.leader == part.replicas[0]
        assert (part.leader_epoch, part.partition_epoch) == (0, 0)


def test_validate_only_gives_the_same_answers_and_writes_nothing(ctx: Context) -> None:
    topics = [topic("good", 2, 3), topic("bad", 1, 4), topic("x y", 1, 1), topic("cfg", 1, 1, configs={"a.b": "1"})]
    dry = ctx.call(create_topics, controller_pb2.CreateTopicsRequest(topics=topics, validate_only=True))
    assert dry.records == ()
    real = ctx.create(*topics)
    assert [
        (t.name, t.error_code, t.error_message, t.num_partitions, t.replication_factor) for t in dry.response.topics
    ] == [(t.name, t.error_code, t.error_message, t.num_partitions, t.replication_factor) for t in real.response.topics]
    assert dry.response.topics[0].topic_id == b""
    assert ctx.image.topic_by_name("good") is not None


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "Topic name is invalid: the empty string is not allowed"),
        (".", "Topic name is invalid: '.' is not allowed"),
        ("..", "Topic name is invalid: '..' is not allowed"),
        ("a" * 250, f"Topic name is invalid: the length of '{'a' * 250}' is longer than the max allowed length 249"),
        (
            "bad/name",
            "Topic name is invalid: 'bad/name' contains one or more characters other than ASCII alphanumerics, "
            "'.', '_' and '-'",
        ),
        (
            "é",
            "Topic name is invalid: 'é' contains one or more characters other than ASCII alphanumerics, "
            "'.', '_' and '-'",
        ),
    ],
)
def test_illegal_names(ctx: Context, name: str, message: str) -> None:
    result = ctx.create(topic(name, 1, 1))
    assert error_of(result) == ("INVALID_TOPIC_EXCEPTION", message)
    assert result.records == ()


def test_legal_edge_names(ctx: Context) -> None:
    for name in ("a" * 249, "...", "a-b", "A.b-9"):
        ctx.create_ok(name)
    assert len(ctx.image.topics) == 4


def test_collision_chars_warn_and_collide(ctx: Context) -> None:
    result = ctx.create(topic("metrics.cpu", 1, 1))
    assert list(result.response.topics[0].warnings) == [COLLISION_WARNING]
    assert list(ctx.create(topic("plain", 1, 1)).response.topics[0].warnings) == []
    clash = ctx.create(topic("metrics_cpu", 1, 1))
    assert error_of(clash) == (
        "INVALID_TOPIC_EXCEPTION",
        "Topic 'metrics_cpu' collides with existing topic: metrics.cpu",
    )
    # Within one request too, and the collision ends when the topic is deleted.
    both = ctx.create(topic("a.b", 1, 1), topic("a_b", 1, 1))
    assert error_of(both, 0) == ("NONE", "")
    assert error_of(both, 1) == ("INVALID_TOPIC_EXCEPTION", "Topic 'a_b' collides with existing topic: a.b")


def test_the_metadata_topic_cannot_be_created(ctx: Context) -> None:
    assert error_of(ctx.create(topic("__cluster_metadata", 1, 1))) == (
        "INVALID_REQUEST",
        "Creation of internal topic __cluster_metadata is prohibited.",
    )
    ctx.create_ok("__consumer_offsets")  # Kafka's other internal topics are ordinary names here


def test_existing_topic(ctx: Context) -> None:
    ctx.create_ok("t")
    assert error_of(ctx.create(topic("t", 1, 1))) == ("TOPIC_ALREADY_EXISTS", "Topic 't' already exists.")


def test_duplicate_names_in_one_request(ctx: Context) -> None:
    result = ctx.create(topic("d", 1, 1), topic("e", 1, 1), topic("d", 1, 1))
    assert error_of(result, 0) == ("INVALID_REQUEST", "Duplicate topic name.")
    assert error_of(result, 1) == ("NONE", "")
    assert error_of(result, 2) == ("INVALID_REQUEST", "Duplicate topic name.")
    assert ctx.image.topic_by_name("d") is None


@pytest.mark.parametrize("partitions", [0, -2, -100])
def test_non_positive_partitions(ctx: Context, partitions: int) -> None:
    assert error_of(ctx.create(topic("p", partitions, 1))) == (
        "INVALID_PARTITIONS",
        "Number of partitions was set to an invalid non-positive value.",
    )


@pytest.mark.parametrize("rf", [0, -2])
def test_non_positive_replication_factor(ctx: Context, rf: int) -> None:
    assert error_of(ctx.create(topic("r", 1, rf))) == (
        "INVALID_REPLICATION_FACTOR",
        "Replication factor must be larger than 0, or -1 to use the default value.",
    )


def test_minus_one_and_absent_mean_the_configured_defaults() -> None:
    ctx = Context(ControllerConfig(default_num_partitions=4, default_replication_factor=2))
    ctx.add_brokers([1, 2, 3])
    for request in (topic("absent"), topic("minus", -1, -1)):
        (created,) = ctx.create(request).response.topics
        assert (created.error_code, created.num_partitions, created.replication_factor) == (errors_pb2.NONE, 4, 2)


def test_replication_factor_above_registered_brokers(ctx: Context) -> None:
    assert error_of(ctx.create(topic("big", 1, 4))) == (
        "INVALID_REPLICATION_FACTOR",
        "Unable to replicate the partition 4 time(s): The target replication factor of 4 cannot be reached "
        "because only 3 broker(s) are registered.",
    )


def test_all_brokers_fenced(ctx: Context) -> None:
    for broker in (1, 2, 3):
        ctx.fence(broker)
    code, message = error_of(ctx.create(topic("f", 1, 1)))
    assert code == "INVALID_REPLICATION_FACTOR"
    assert message.startswith("Unable to replicate the partition 1 time(s): ")
    assert "fenced" in message


def test_no_brokers_at_all() -> None:
    ctx = Context()
    code, message = error_of(ctx.create(topic("lonely", 1, 1)))
    assert code == "INVALID_REPLICATION_FACTOR"
    assert message.startswith("Unable to replicate the partition 1 time(s): ")


def test_fenced_replicas_are_placed_but_left_out_of_the_isr(ctx: Context) -> None:
    ctx.fence(3)
    ctx.create_ok("half", 6, 3)
    half = ctx.image.topic_by_name("half")
    assert half is not None
    for part in half.partitions:
        assert 3 in part.replicas
        assert 3 not in part.isr
        assert part.leader == part.isr[0]
        assert part.leader != 3


def test_broker_pool_restricts_placement() -> None:
    ctx = Context()
    ctx.add_brokers([1, 2], pool="gold")
    ctx.add_brokers([3, 4], pool="silver")
    ctx.create_ok("g", 4, 2, broker_pool="gold")
    g = ctx.image.topic_by_name("g")
    assert g is not None
    assert {b for p in g.partitions for b in p.replicas} == {1, 2}
    code, message = error_of(ctx.create(topic("g3", 1, 3, broker_pool="gold")))
    assert code == "INVALID_REPLICATION_FACTOR"
    assert "gold" in message
    code, message = error_of(ctx.create(topic("none", 1, 1, broker_pool="bronze")))
    assert code == "INVALID_REQUEST"
    assert "bronze" in message


def test_legacy_placer_and_unknown_placer(ctx: Context) -> None:
    ctx.create_ok("legacy", 3, 3, placer="legacy")
    assert error_of(ctx.create(topic("odd", 1, 1, placer="random"))) == (
        "INVALID_REQUEST",
        "Unknown placer 'random': expected one of striped, legacy, balanced.",
    )


def _manual(*assignments: tuple[int, list[int]]) -> controller_pb2.CreatableTopic:
    return controller_pb2.CreatableTopic(
        name="m",
        assignments=[controller_pb2.ReplicaAssignment(partition_index=i, broker_ids=b) for i, b in assignments],
    )


def test_manual_assignment_success(ctx: Context) -> None:
    result = ctx.create(_manual((1, [3, 1]), (0, [2, 3])))
    (created,) = result.response.topics
    assert (created.error_code, created.num_partitions, created.replication_factor) == (errors_pb2.NONE, 2, 2)
    m = ctx.image.topic_by_name("m")
    assert m is not None
    assert [p.replicas for p in m.partitions] == [(2, 3), (3, 1)]
    assert [p.leader for p in m.partitions] == [2, 3]


def test_manual_assignment_with_fenced_replicas_elects_a_live_leader(ctx: Context) -> None:
    ctx.fence(2)
    ctx.create(_manual((0, [2, 3])))
    assert ctx.partition("m", 0)[:3] == ((2, 3), (3,), 3)


@pytest.mark.parametrize(
    ("assignments", "code", "message"),
    [
        (
            [(0, [1]), (0, [2])],
            "INVALID_REPLICA_ASSIGNMENT",
            "Found multiple manual partition assignments for partition 0",
        ),
        (
            [(0, [1]), (2, [2])],
            "INVALID_REPLICA_ASSIGNMENT",
            "partitions should be a consecutive 0-based integer sequence",
        ),
        ([(1, [1])], "INVALID_REPLICA_ASSIGNMENT", "partitions should be a consecutive 0-based integer sequence"),
        (
            [(0, [1, 9])],
            "INVALID_REPLICA_ASSIGNMENT",
            "partition 0: The manual partition assignment includes broker 9, but no such broker is registered.",
        ),
        (
            [(0, [1, 1])],
            "INVALID_REPLICA_ASSIGNMENT",
            "partition 0: The manual partition assignment includes the broker 1 more than once.",
        ),
        (
            [(0, [1, 2]), (1, [3])],
            "INVALID_REPLICA_ASSIGNMENT",
            "partition 1: The manual partition assignment includes a partition with 1 replica(s), but this is not "
            "consistent with previous partitions, which have 2 replica(s).",
        ),
        (
            [(0, [])],
            "INVALID_REPLICA_ASSIGNMENT",
            "partition 0: The manual partition assignment includes an empty replica list.",
        ),
    ],
)
def test_manual_assignment_rules(
    ctx: Context, assignments: list[tuple[int, list[int]]], code: str, message: str
) -> None:
    result = ctx.create(_manual(*assignments))
    assert error_of(result) == (code, message)
    assert result.records == ()


def test_manual_assignment_all_fenced(ctx: Context) -> None:
    ctx.fence(1)
    ctx.fence(2)
    assert error_of(ctx.create(_manual((0, [3]), (1, [1])))) == (
        "INVALID_REPLICA_ASSIGNMENT",
        "All brokers specified in the manual partition assignment for partition 1 are fenced or in controlled "
        "shutdown.",
    )


def test_manual_assignment_excludes_counts(ctx: Context) -> None:
    with_rf = _manual((0, [1]))
    with_rf.replication_factor = 1
    assert error_of(ctx.create(with_rf)) == (
        "INVALID_REQUEST",
        "A manual partition assignment was specified, but replication factor was not set to -1.",
    )
    with_count = _manual((0, [1]))
    with_count.num_partitions = 1
    assert error_of(ctx.create(with_count)) == (
        "INVALID_REQUEST",
        "A manual partition assignment was specified, but numPartitions was not set to -1.",
    )
    minus_one = _manual((0, [1]))
    minus_one.num_partitions = -1
    minus_one.replication_factor = -1
    assert error_of(ctx.create(minus_one)) == ("NONE", "")


@pytest.mark.parametrize(
    ("configs", "message"),
    [
        ({"retention.msx": "1"}, "Unknown topic config name: retention.msx"),
        ({"retention.ms": "abc"}, "Invalid value abc for configuration retention.ms: Not a number of type LONG"),
        ({"retention.ms": "-2"}, "Invalid value -2 for configuration retention.ms: Value must be at least -1"),
        ({"retention.bytes": "1.5"}, "Invalid value 1.5 for configuration retention.bytes: Not a number of type LONG"),
        (
            {"retention.bytes": str(1 << 63)},
            f"Invalid value {1 << 63} for configuration retention.bytes: Not a number of type LONG",
        ),
        (
            {"cleanup.policy": "lru"},
            "Invalid value lru for configuration cleanup.policy: String must be one of: compact, delete",
        ),
        ({"cleanup.policy": "delete,delete"}, "Configuration 'cleanup.policy' values must not be duplicated."),
        (
            {"min.insync.replicas": "0"},
            "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1",
        ),
        (
            {"min.insync.replicas": "4000000000"},
            "Invalid value 4000000000 for configuration min.insync.replicas: Not a number of type INT",
        ),
        (
            {"unclean.leader.election.enable": "yes"},
            "Invalid value yes for configuration unclean.leader.election.enable: "
            "Expected value to be either true or false",
        ),
        (
            {"segment.bytes": "1024"},
            "Invalid value 1024 for configuration segment.bytes: Value must be at least 1048576",
        ),
        (
            {"compression.type": "brotli"},
            "Invalid value brotli for configuration compression.type: String must be one of: uncompressed, zstd, "
            "lz4, snappy, gzip, producer",
        ),
        ({"segment.ms": "0"}, "Invalid value 0 for configuration segment.ms: Value must be at least 1"),
        (
            {"retention.ms": "5", "zzz": "1"},
            "Unknown topic config name: zzz",
        ),
    ],
)
def test_invalid_configs(ctx: Context, configs: dict[str, str], message: str) -> None:
    result = ctx.create(topic("c", 1, 1, configs=configs))
    assert error_of(result) == ("INVALID_CONFIG", message)
    assert result.records == ()


def test_valid_configs_are_normalised(ctx: Context) -> None:
    configs = {
        "retention.ms": " -1 ",
        "retention.bytes": "+100",
        "cleanup.policy": "delete, compact",
        "min.insync.replicas": "2",
        "unclean.leader.election.enable": "TRUE",
        "segment.bytes": "1048576",
    }
    (created,) = ctx.create(topic("c", 1, 1, configs=configs)).response.topics
    assert dict(created.configs) == {
        "retention.ms": "-1",
        "retention.bytes": "100",
        "cleanup.policy": "delete,compact",
        "min.insync.replicas": "2",
        "unclean.leader.election.enable": "true",
        "segment.bytes": "1048576",
    }


def test_partition_bounds_per_request_and_per_topic() -> None:
    ctx = Context(ControllerConfig(max_partitions_per_request=10, max_partitions_per_topic=6))
    ctx.add_brokers([1, 2])
    over = ctx.create(topic("a", 6, 1), topic("b", 5, 1))
    for index in (0, 1):
        assert error_of(over, index) == (
            "POLICY_VIOLATION",
            "Excessively large number of partitions per request: 11 requested, the limit is 10.",
        )
    assert over.records == ()
    assert error_of(ctx.create(topic("a", 7, 1))) == (
        "INVALID_PARTITIONS",
        "Number of partitions 7 exceeds the limit of 6 partitions per topic.",
    )
    ok = ctx.create(topic("a", 6, 1), topic("b", 4, 1))
    assert [t.error_code for t in ok.response.topics] == [errors_pb2.NONE, errors_pb2.NONE]


def test_one_bad_topic_does_not_stop_the_others(ctx: Context) -> None:
    result = ctx.create(topic("ok1", 1, 1), topic("bad", 1, 9), topic("ok2", 2, 1))
    assert [t.error_code for t in result.response.topics] == [
        errors_pb2.NONE,
        errors_pb2.INVALID_REPLICATION_FACTOR,
        errors_pb2.NONE,
    ]
    names = [r.topic.name for r in result.records if r.WhichOneof("record") == "topic"]
    assert names == ["ok1", "ok2"]
    assert ctx.image.topic_by_name("bad") is None


def test_placement_is_deterministic_for_the_same_random_seed() -> None:
    layouts = []
    for _ in range(2):
        ctx = Context(seed=7)
        ctx.add_brokers([1, 2, 3, 4, 5, 6], racks=["a", "a", "b", "b", "c", "c"])
        result = ctx.create(topic("t", 6, 3))
        layouts.append([tuple(r.partition.replicas) for r in result.records if r.HasField("partition")])
    assert layouts[0] == layouts[1]
    for replicas in layouts[0]:
        assert len({(b - 1) // 2 for b in replicas}) == 3, "striped placement spans every rack"


def test_topic_ids_come_from_the_injected_source(ctx: Context) -> None:
    first = ctx.create_ok("one")
    second = ctx.create_ok("two")
    assert first == (1).to_bytes(16, "big")
    assert second == (2).to_bytes(16, "big")
    record = records_pb2.TopicRecord(name="one", topic_id=first)
    assert record.topic_id == ctx.image.topic_ids["one"]


def test_balanced_placer_counts_load_from_the_image_and_from_earlier_topics_of_the_request() -> None:
    ctx = Context()
    ctx.add_brokers([1, 2, 3, 4, 5, 6], racks=["a", "a", "b", "b", "c", "c"])
    result = ctx.create(topic("b1", 5, 3, placer="balanced"), topic("b2", 7, 2, placer="balanced"))
    assert [t.error_code for t in result.response.topics] == [errors_pb2.NONE, errors_pb2.NONE]
    replicas = sorted(ctx.image.replica_counts.values())
    leaders = sorted(ctx.image.leader_counts.values())
    assert sum(replicas) == 29 and replicas[-1] - replicas[0] <= 1
    assert sum(leaders) == 12 and leaders[-1] - leaders[0] <= 1
    ctx.create_ok("b3", 5, 1, placer="balanced")
    replicas = sorted(ctx.image.replica_counts.values())
    assert sum(replicas) == 34 and replicas[-1] - replicas[0] <= 1, "new replicas go to the least-loaded brokers"


def test_the_requested_pool_is_recorded_inherited_and_kept_in_snapshots() -> None:
    from raftmeta.controller import topics as topic_handlers
    from raftmeta.controller.snapshot import image_from_records, image_to_records

    ctx = Context()
    ctx.add_brokers([1, 2], pool="gold")
    ctx.add_brokers([3, 4], pool="silver")
    ctx.create_ok("g", 2, 2, broker_pool="gold")
    (topic_record,) = [r.topic for r in ctx.log if r.WhichOneof("record") == "topic"]
    assert topic_record.broker_pool == "gold", "verify checks replicas against the pool in the log"
    g = ctx.image.topic_by_name("g")
    assert g is not None
    assert g.pool == "gold"
    # Added partitions stay in the topic's pool when the request names none.
    grown = ctx.run(
        topic_handlers.create_partitions,
        controller_pb2.CreatePartitionsRequest(topics=[controller_pb2.CreatePartitionsTopic(name="g", count=6)]),
    )
    assert grown.response.results[0].error_code == errors_pb2.NONE, grown.response.results[0].error_message
    g = ctx.image.topic_by_name("g")
    assert g is not None
    assert {b for p in g.partitions for b in p.replicas} == {1, 2}
    restored = image_from_records(image_to_records(ctx.image))
    restored_topic = restored.topic_by_name("g")
    assert restored_topic is not None
    assert restored_topic.pool == "gold"


# -- raftmeta's own per-partition replica limit (issue 46, item 9): per topic, with Kafka's codes ----
def test_a_replication_factor_above_the_replica_limit_fails_only_its_topic() -> None:
    context = Context()
    context.add_brokers(list(range(1, REPLICAS_PER_PARTITION_MAX + 3)))  # enough brokers for the factor
    too_many = REPLICAS_PER_PARTITION_MAX + 1
    result = context.create(topic("a", 1, 3), topic("wide", 1, too_many), topic("b", 2, REPLICAS_PER_PARTITION_MAX))
    assert [t.error_code for t in result.response.topics] == [
        errors_pb2.NONE,
        errors_pb2.INVALID_REPLICATION_FACTOR,
        errors_pb2.NONE,
    ]
    assert error_of(result, 1)[1] == (
        f"Replication factor {too_many} exceeds the limit of {REPLICAS_PER_PARTITION_MAX} replicas per partition."
    )
    assert context.image.topic_by_name("wide") is None
    assert context.image.topic_by_name("a") is not None and context.image.topic_by_name("b") is not None


def test_a_replication_factor_above_the_brokers_gets_kafkas_answer_even_above_the_limit(ctx: Context) -> None:
    result = ctx.create(topic("ok", 1, 1), topic("rf99", 1, 99))
    assert [t.error_code for t in result.response.topics] == [errors_pb2.NONE, errors_pb2.INVALID_REPLICATION_FACTOR]
    assert error_of(result, 1)[1].startswith("Unable to replicate the partition 99 time(s): ")


def test_a_manual_assignment_above_the_replica_limit_fails_only_its_topic() -> None:
    context = Context()
    brokers = list(range(1, REPLICAS_PER_PARTITION_MAX + 3))
    context.add_brokers(brokers)
    wide = controller_pb2.ReplicaAssignment(partition_index=0, broker_ids=brokers[: REPLICAS_PER_PARTITION_MAX + 1])
    result = context.create(topic("wide", assignments=[wide]), topic("ok", 1, 1))
    assert [t.error_code for t in result.response.topics] == [errors_pb2.INVALID_REPLICA_ASSIGNMENT, errors_pb2.NONE]
    assert error_of(result, 0)[1] == (
        f"Partition 0 has {REPLICAS_PER_PARTITION_MAX + 1} replicas; the limit is "
        f"{REPLICAS_PER_PARTITION_MAX} replicas per partition."
    )
