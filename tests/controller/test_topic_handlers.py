"""CreatePartitions, DeleteTopics, DescribeTopics and ElectLeaders."""

from __future__ import annotations

import pytest

from placement.rng import JavaRandom
from raftmeta.controller import NO_LEADER, ControllerConfig, RequestError
from raftmeta.controller.topics import (
    _describe_topic,
    _Descriptions,
    create_partitions,
    delete_topics,
    describe_topics,
    elect_leaders,
)
from raftmeta.v1 import controller_pb2, errors_pb2, records_pb2
from tests.controller.helpers import Context, CounterIds


@pytest.fixture
def ctx() -> Context:
    context = Context()
    context.add_brokers([1, 2, 3, 4])
    context.create_ok("t", 2, 2)
    return context


def grow(
    ctx: Context, name: str, count: int, assignments: list[list[int]] | None = None, **kw: object
) -> tuple[str, str]:
    result = ctx.run(
        create_partitions,
        controller_pb2.CreatePartitionsRequest(
            topics=[
                controller_pb2.CreatePartitionsTopic(
                    name=name,
                    count=count,
                    assignments=[controller_pb2.ReplicaAssignment(broker_ids=a) for a in assignments or []],
                    **kw,  # type: ignore[arg-type]
                )
            ]
        ),
    )
    (item,) = result.response.results
    return errors_pb2.ErrorCode.Name(item.error_code), item.error_message


def test_create_partitions_grows_with_the_topics_replication_factor(ctx: Context) -> None:
    assert grow(ctx, "t", 5) == ("NONE", "")
    t = ctx.image.topic_by_name("t")
    assert t is not None
    assert len(t.partitions) == 5
    assert all(len(p.replicas) == 2 and p.isr == p.replicas for p in t.partitions)


def test_create_partitions_manual(ctx: Context) -> None:
    assert grow(ctx, "t", 4, [[4, 3], [1, 2]]) == ("NONE", "")
    assert [ctx.partition("t", i)[0] for i in (2, 3)] == [(4, 3), (1, 2)]


def test_create_partitions_legacy_add_partitions_rule(ctx: Context) -> None:
    assert grow(ctx, "t", 4, placer="legacy") == ("NONE", "")
    assert len(ctx.image.topic_by_name("t").partitions) == 4  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("name", "count", "assignments", "expected"),
    [
        ("nope", 3, None, ("UNKNOWN_TOPIC_OR_PARTITION", "This server does not host this topic-partition.")),
        ("t", 2, None, ("INVALID_PARTITIONS", "Topic already has 2 partition(s).")),
        ("t", 1, None, ("INVALID_PARTITIONS", "The topic t currently has 2 partition(s); 1 would not be an increase.")),
        (
            "t",
            4,
            [[1, 2]],
            (
                "INVALID_REPLICA_ASSIGNMENT",
                "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified.",
            ),
        ),
        (
            "t",
            3,
            [[1]],
            (
                "INVALID_REPLICA_ASSIGNMENT",
                "partition 2: The manual partition assignment includes a partition with 1 replica(s), but this is "
                "not consistent with previous partitions, which have 2 replica(s).",
            ),
        ),
        (
            "t",
            3,
            [[1, 7]],
            (
                "INVALID_REPLICA_ASSIGNMENT",
                "partition 2: The manual partition assignment includes broker 7, but no such broker is registered.",
            ),
        ),
    ],
)
def test_create_partitions_rules(
    ctx: Context, name: str, count: int, assignments: list[list[int]] | None, expected: tuple[str, str]
) -> None:
    before = ctx.image
    assert grow(ctx, name, count, assignments) == expected
    assert ctx.image == before


def test_create_partitions_bounds() -> None:
    ctx = Context(ControllerConfig(max_partitions_per_topic=4, max_partitions_per_request=5))
    ctx.add_brokers([1])
    ctx.create_ok("t", 1, 1)
    assert grow(ctx, "t", 5) == (
        "INVALID_PARTITIONS",
        "Number of partitions 5 exceeds the limit of 4 partitions per topic.",
    )
    ctx.create_ok("u", 1, 1)
    result = ctx.call(
        create_partitions,
        controller_pb2.CreatePartitionsRequest(
            topics=[
                controller_pb2.CreatePartitionsTopic(name="t", count=4),
                controller_pb2.CreatePartitionsTopic(name="u", count=4),
            ]
        ),
    )
    assert [r.error_code for r in result.response.results] == [errors_pb2.POLICY_VIOLATION] * 2
    assert result.records == ()


def test_create_partitions_validate_only_and_duplicates(ctx: Context) -> None:
    result = ctx.call(
        create_partitions,
        controller_pb2.CreatePartitionsRequest(
            topics=[controller_pb2.CreatePartitionsTopic(name="t", count=3)], validate_only=True
        ),
    )
    assert result.records == ()
    assert result.response.results[0].error_code == errors_pb2.NONE
    dup = ctx.call(
        create_partitions,
        controller_pb2.CreatePartitionsRequest(
            topics=[
                controller_pb2.CreatePartitionsTopic(name="t", count=3),
                controller_pb2.CreatePartitionsTopic(name="t", count=4),
            ]
        ),
    )
    assert [(r.error_code, r.error_message) for r in dup.response.results] == [
        (errors_pb2.INVALID_REQUEST, "Duplicate topic name.")
    ] * 2


def test_delete_topics_by_name_and_id(ctx: Context) -> None:
    u = ctx.create_ok("u", 1, 1)
    result = ctx.run(
        delete_topics,
        controller_pb2.DeleteTopicsRequest(topic_names=["t", "missing"], topic_ids=[u, b"\x09" * 16, b"short"]),
    )
    codes = [(errors_pb2.ErrorCode.Name(r.error_code), r.name) for r in result.response.responses]
    assert codes == [
        ("NONE", "t"),
        ("UNKNOWN_TOPIC_OR_PARTITION", "missing"),
        ("NONE", "u"),
        ("UNKNOWN_TOPIC_ID", ""),
        ("INVALID_REQUEST", ""),
    ]
    assert [r.WhichOneof("record") for r in result.records] == ["remove_topic", "remove_topic"]
    assert len(ctx.image.topics) == 0
    assert ctx.image.partition_count == 0
    assert all(v == 0 for v in ctx.image.replica_counts.values())


def test_a_zero_topic_id_is_refused_naming_it_as_kafka_prints_it(ctx: Context) -> None:
    """The one text form of a topic id (raftmeta/api/ids.py), in error messages too."""
    result = ctx.run(delete_topics, controller_pb2.DeleteTopicsRequest(topic_ids=[bytes(16)]))
    [answer] = result.response.responses
    assert answer.error_code == errors_pb2.INVALID_REQUEST
    assert answer.error_message == "Invalid topic id 'AAAAAAAAAAAAAAAAAAAAAA': expected 16 non-zero bytes."
    assert result.records == ()


def test_delete_the_same_topic_by_name_and_id_writes_one_record(ctx: Context) -> None:
    tid = ctx.image.topic_ids["t"]
    result = ctx.run(delete_topics, controller_pb2.DeleteTopicsRequest(topic_names=["t"], topic_ids=[tid]))
    assert [r.error_code for r in result.response.responses] == [errors_pb2.NONE, errors_pb2.NONE]
    assert len(result.records) == 1


def test_deleted_name_can_be_reused(ctx: Context) -> None:
    ctx.run(delete_topics, controller_pb2.DeleteTopicsRequest(topic_names=["t"]))
    new_id = ctx.create_ok("t", 1, 1)
    assert ctx.image.topic_ids["t"] == new_id


def test_describe_topics(ctx: Context) -> None:
    ctx.create_ok("a", 1, 1, {"retention.ms": "5"})
    everything = ctx.call(describe_topics, controller_pb2.DescribeTopicsRequest()).response
    assert [t.name for t in everything.topics] == ["a", "t"]
    assert dict(everything.topics[0].configs) == {"retention.ms": "5"}
    named = ctx.call(describe_topics, controller_pb2.DescribeTopicsRequest(topics=["t", "zz"])).response
    assert [(t.name, t.error_code) for t in named.topics] == [
        ("t", errors_pb2.NONE),
        ("zz", errors_pb2.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    p0 = named.topics[0].partitions[0]
    stored = ctx.partition("t", 0)
    assert (p0.partition, p0.leader, list(p0.replicas), list(p0.isr)) == (
        0,
        stored.leader,
        list(stored.replicas),
        list(stored.isr),
    )


def _elect(ctx: Context, unclean: bool = False, **parts: list[int]) -> list[tuple[str, int, str]]:
    request = controller_pb2.ElectLeadersRequest(
        election_type=controller_pb2.ELECTION_TYPE_UNCLEAN if unclean else controller_pb2.ELECTION_TYPE_PREFERRED,
        topic_partitions=[controller_pb2.TopicPartitions(topic=t, partitions=p) for t, p in parts.items()],
    )
    result = ctx.run(elect_leaders, request)
    return [
        (r.topic, p.partition, errors_pb2.ErrorCode.Name(p.error_code))
        for r in result.response.results
        for p in r.partitions
    ]


def test_preferred_leader_election_on_request() -> None:
    ctx = Context()
    ctx.add_brokers([1, 2, 3])
    ctx.create(
        controller_pb2.CreatableTopic(
            name="p", assignments=[controller_pb2.ReplicaAssignment(partition_index=0, broker_ids=[1, 2, 3])]
        )
    )
    assert _elect(ctx, p=[0]) == [("p", 0, "ELECTION_NOT_NEEDED")]
    ctx.fence(1)
    assert ctx.partition("p", 0).leader == 2
    assert _elect(ctx, p=[0]) == [("p", 0, "PREFERRED_LEADER_NOT_AVAILABLE")]
    # Broker 1 is back but not yet in the ISR (the simulated broker never re-joins by itself).
    ctx.heartbeat(1)
    assert _elect(ctx, p=[0]) == [("p", 0, "PREFERRED_LEADER_NOT_AVAILABLE")]
    tid = ctx.image.topic_ids["p"]
    ctx.replay(
        [
            records_pb2.MetadataRecord(
                partition_change=records_pb2.PartitionChangeRecord(
                    topic_id=tid,
                    partition_id=0,
                    isr=records_pb2.BrokerIdList(ids=[2, 3, 1]),
                    leader_epoch=1,
                    partition_epoch=2,
                )
            )
        ]
    )
    assert _elect(ctx, p=[0, 5], q=[0]) == [
        ("p", 0, "NONE"),
        ("p", 5, "UNKNOWN_TOPIC_OR_PARTITION"),
        ("q", 0, "UNKNOWN_TOPIC_OR_PARTITION"),
    ]
    assert ctx.partition("p", 0)[2:5] == (1, 2, 3)


def test_unclean_election_on_request() -> None:
    ctx = Context()
    ctx.add_brokers([1, 2])
    ctx.create(
        controller_pb2.CreatableTopic(
            name="u", assignments=[controller_pb2.ReplicaAssignment(partition_index=0, broker_ids=[1, 2])]
        )
    )
    assert _elect(ctx, unclean=True, u=[0]) == [("u", 0, "ELECTION_NOT_NEEDED")]
    ctx.fence(1)
    ctx.fence(2)
    assert ctx.partition("u", 0)[:3] == ((1, 2), (2,), NO_LEADER)
    assert _elect(ctx, unclean=True, u=[0]) == [("u", 0, "ELIGIBLE_LEADERS_NOT_AVAILABLE")]
    # Broker 1 returns; clean election cannot use it (not in the ISR), an unclean one can.
    ctx.heartbeat(1)
    assert ctx.partition("u", 0).leader == NO_LEADER
    assert _elect(ctx, unclean=True, u=[0]) == [("u", 0, "NONE")]
    assert ctx.partition("u", 0)[:3] == ((1, 2), (1,), 1)
    assert ctx.log[-1].partition_change.unclean_election


def test_elect_all_partitions_when_none_named() -> None:
    ctx = Context()
    ctx.add_brokers([1, 2])
    ctx.create_ok("a", 2, 2)
    result = ctx.call(elect_leaders, controller_pb2.ElectLeadersRequest())
    # Kafka's electLeaders with no partitions named lists only the partitions it acted on.
    assert [(r.topic, len(r.partitions)) for r in result.response.results] == [("a", 0)]
    assert result.records == ()


@pytest.mark.parametrize("unclean", [False, True])
def test_electing_every_partition_answers_as_naming_each_less_those_not_needed(unclean: bool) -> None:
    """The every-partition path passes over partitions that need no election before building an
    answer for them; what it answers and writes must be what naming every partition gives,
    without the ELECTION_NOT_NEEDED entries (Kafka's electLeaders)."""
    ctx = Context()
    ctx.add_brokers([1, 2, 3])
    ctx.create_ok("a", 4, 3)
    ctx.create_ok("b", 3, 2)
    ctx.create(
        controller_pb2.CreatableTopic(
            name="c", assignments=[controller_pb2.ReplicaAssignment(partition_index=0, broker_ids=[1, 2])]
        )
    )
    # Brokers 1 and 2 fenced, 1 back but in no ISR: c-0 has no leader (its ISR is 2 alone), a's
    # partitions that preferred 1 or 2 are led by 3. Then 1 re-joins the ISR of one of them.
    ctx.fence(1)
    ctx.fence(2)
    ctx.heartbeat(1)
    a = ctx.image.topic_by_name("a")
    assert a is not None
    pid = next(i for i, part in enumerate(a.partitions) if part.preferred_leader == 1)
    part = a.partitions[pid]
    ctx.replay(
        [
            records_pb2.MetadataRecord(
                partition_change=records_pb2.PartitionChangeRecord(
                    topic_id=a.topic_id,
                    partition_id=pid,
                    isr=records_pb2.BrokerIdList(ids=[*part.isr, 1]),
                    leader_epoch=part.leader_epoch,
                    partition_epoch=part.partition_epoch + 1,
                )
            )
        ]
    )
    image = ctx.image
    election_type = controller_pb2.ELECTION_TYPE_UNCLEAN if unclean else controller_pb2.ELECTION_TYPE_PREFERRED
    every = elect_leaders(
        image, controller_pb2.ElectLeadersRequest(election_type=election_type), 0, CounterIds(), JavaRandom(0)
    )
    named = elect_leaders(
        image,
        controller_pb2.ElectLeadersRequest(
            election_type=election_type,
            topic_partitions=[
                controller_pb2.TopicPartitions(topic=t.name, partitions=range(len(t.partitions)))
                for t in image.topics_sorted()
            ],
        ),
        0,
        CounterIds(),
        JavaRandom(0),
    )
    for result in named.response.results:
        kept = [p for p in result.partitions if p.error_code != errors_pb2.ELECTION_NOT_NEEDED]
        del result.partitions[:]
        result.partitions.extend(kept)
    assert every.response == named.response and every.records == named.records
    # The case exercises an election that acts and one that cannot, not only passed-over ones.
    acted = sorted((r.topic, p.partition, p.error_code) for r in every.response.results for p in r.partitions)
    if unclean:
        # c-0 and any partition of b on brokers 1 and 2 get 1 as their leader.
        assert ("c", 0, errors_pb2.NONE) in acted and {code for *_, code in acted} == {errors_pb2.NONE}
    else:
        assert ("a", pid, errors_pb2.NONE) in acted
        assert {code for *_, code in acted} == {errors_pb2.NONE, errors_pb2.PREFERRED_LEADER_NOT_AVAILABLE}
    assert [r.topic for r in every.response.results] == ["a", "b", "c"]


@pytest.mark.parametrize("placer", ["striped", "legacy", "balanced"])
def test_create_partitions_with_every_placer_stays_in_the_pool(placer: str) -> None:
    ctx = Context()
    ctx.add_brokers([1, 2, 3], pool="gold")
    ctx.add_brokers([4, 5, 6], pool="silver")
    ctx.create_ok("g", 2, 2, broker_pool="gold")
    assert grow(ctx, "g", 6, placer=placer, broker_pool="gold") == ("NONE", "")
    g = ctx.image.topic_by_name("g")
    assert g is not None
    assert len(g.partitions) == 6
    assert {b for p in g.partitions for b in p.replicas} <= {1, 2, 3}
    assert all(len(p.replicas) == 2 for p in g.partitions)


# DescribeTopics pages as Kafka's DescribeTopicPartitions. The cases are KRaftMetadataCacheTest's
# testGetTopicMetadataForDescribeTopicPartitionsResponse (topics test0 with 3 partitions and test1
# with 1), and DescribeTopicPartitionsRequestHandler's rules for the cursor.
@pytest.fixture
def kafka_case() -> Context:
    context = Context()
    context.add_brokers([0, 1, 2, 3])
    context.create_ok("test0", 3, 2)
    context.create_ok("test1", 1, 2)
    return context


def page(
    ctx: Context, topics: list[str], limit: int, cursor: tuple[str, int] | None = None, *, names_only: bool = False
) -> tuple[list[tuple[str, int, list[int]]], tuple[str, int] | None]:
    request = controller_pb2.DescribeTopicsRequest(
        topics=topics, response_partition_limit=limit, exclude_partitions=names_only
    )
    if cursor is not None:
        request.cursor.topic_name, request.cursor.partition_index = cursor
    response = ctx.call(describe_topics, request).response
    described = [(t.name, t.error_code, [p.partition for p in t.partitions]) for t in response.topics]
    following = response.next_cursor
    return described, (following.topic_name, following.partition_index) if response.HasField("next_cursor") else None


def test_describe_pages_basic(kafka_case: Context) -> None:
    assert page(kafka_case, ["test0", "test1"], 10) == ([("test0", 0, [0, 1, 2]), ("test1", 0, [0])], None)


def test_describe_pages_quota_reached_inside_a_topic(kafka_case: Context) -> None:
    assert page(kafka_case, ["test0", "test1"], 2) == ([("test0", 0, [0, 1])], ("test0", 2))


def test_describe_pages_from_a_start_index(kafka_case: Context) -> None:
    assert page(kafka_case, ["test0"], 10, ("test0", 1)) == ([("test0", 0, [1, 2])], None)


def test_describe_pages_quota_reached_at_a_topic_boundary(kafka_case: Context) -> None:
    # The page ends with test0 whole: the cursor points at the start of the next topic.
    assert page(kafka_case, ["test0", "test1"], 1, ("test0", 2)) == ([("test0", 0, [2])], ("test1", 0))


def test_describe_pages_an_unknown_topic_takes_nothing_from_the_limit(kafka_case: Context) -> None:
    # Kafka's "When the first topic does not exist" ("Non-exist" sorts before "test0").
    unknown = errors_pb2.UNKNOWN_TOPIC_OR_PARTITION
    assert page(kafka_case, ["Non-exist", "test0"], 1, ("Non-exist", 1)) == (
        [("Non-exist", unknown, []), ("test0", 0, [0])],
        ("test0", 1),
    )


def test_describe_pages_every_topic_in_name_order_from_the_cursor(kafka_case: Context) -> None:
    kafka_case.create_ok("a", 2, 1)
    assert page(kafka_case, [], 3) == ([("a", 0, [0, 1]), ("test0", 0, [0])], ("test0", 1))
    assert page(kafka_case, [], 3, ("test0", 1)) == ([("test0", 0, [1, 2]), ("test1", 0, [0])], None)
    # A cursor topic that does not exist (deleted between pages) starts at the next name.
    assert page(kafka_case, [], 0, ("b", 7)) == ([("test0", 0, [0, 1, 2]), ("test1", 0, [0])], None)


def test_describe_names_each_topic_once_in_name_order(kafka_case: Context) -> None:
    assert page(kafka_case, ["test1", "test0", "test1"], 0) == ([("test0", 0, [0, 1, 2]), ("test1", 0, [0])], None)


def test_describe_limit_is_capped_by_the_configured_maximum() -> None:
    ctx = Context(ControllerConfig(max_request_partition_size_limit=2))
    ctx.add_brokers([1, 2])
    ctx.create_ok("t", 3, 1)
    for limit in (0, 2, 1000):
        assert page(ctx, [], limit) == ([("t", 0, [0, 1])], ("t", 2))


def test_describe_without_partitions_pages_by_topic(kafka_case: Context) -> None:
    """Listing topics (exclude_partitions): no partitions, each topic counting as one against the
    limit, the cursor at the next topic's start; unknown named topics still take nothing."""
    kafka_case.create_ok("a", 2, 1)
    assert page(kafka_case, [], 2, names_only=True) == ([("a", 0, []), ("test0", 0, [])], ("test1", 0))
    assert page(kafka_case, [], 2, ("test1", 0), names_only=True) == ([("test1", 0, [])], None)
    unknown = errors_pb2.UNKNOWN_TOPIC_OR_PARTITION
    assert page(kafka_case, ["Non-exist", "test1", "a"], 1, names_only=True) == (
        [("Non-exist", unknown, []), ("a", 0, [])],
        ("test1", 0),
    )
    # Ids and configs come as in a full describe.
    request = controller_pb2.DescribeTopicsRequest(topics=["test0"], exclude_partitions=True)
    [listed] = kafka_case.call(describe_topics, request).response.topics
    [full] = kafka_case.call(describe_topics, controller_pb2.DescribeTopicsRequest(topics=["test0"])).response.topics
    del full.partitions[:]
    assert listed == full


@pytest.mark.parametrize(
    ("request_fields", "message"),
    [
        (
            {"exclude_partitions": True, "cursor": {"topic_name": "test0", "partition_index": 1}},
            "cursor.partition_index=1: must be 0 with exclude_partitions",
        ),
        ({"topics": ["test0"], "cursor": {"topic_name": "test1"}}, "cursor.topic_name 'test1' must be one of"),
        ({"response_partition_limit": -1}, "response_partition_limit=-1: must be >= 0"),
        ({"cursor": {"topic_name": "test0", "partition_index": -2}}, "cursor.partition_index=-2: must be >= 0"),
    ],
)
def test_describe_refuses_a_malformed_page_request(
    kafka_case: Context, request_fields: dict[str, object], message: str
) -> None:
    with pytest.raises(RequestError, match=message):
        kafka_case.call(describe_topics, controller_pb2.DescribeTopicsRequest(**request_fields))  # type: ignore[arg-type]


@pytest.mark.parametrize("create_between_pages", [False, True])
def test_every_topic_read_page_by_page_names_each_topic_once_in_order(create_between_pages: bool) -> None:
    """Pages of every topic (names only): each page's names are picked without a sort from an
    image not seen before and by bisection from the sorted names of the image of the last page
    (topics._PageNames) -- the same names in the same order either way, also when topics are
    created between pages (one at the cursor or after it is read, one before it is not)."""
    ctx = Context()
    ctx.add_brokers([0, 1, 2])
    expected = {f"t{i:02d}" for i in range(0, 40, 2)}
    for name in sorted(expected):
        ctx.create_ok(name, 1, 1)
    seen: list[str] = []
    described, cursor = page(ctx, [], 3, names_only=True)
    seen.extend(name for name, _, _ in described)
    step = 0
    while cursor is not None:
        step += 1
        if create_between_pages and step % 2:
            name = f"t{(step * 7) % 40 + 1:02d}"  # odd: between the even names
            if name not in expected and ctx.image.topic_by_name(name) is None:
                ctx.create_ok(name, 1, 1)
                if name >= cursor[0]:
                    expected.add(name)
        described, cursor = page(ctx, [], 3, cursor, names_only=True)
        seen.extend(name for name, _, _ in described)
    assert seen == sorted(expected)


def _described_fresh(ctx: Context, name: str) -> bytes:
    """A whole topic's description built field by field, bypassing the kept descriptions."""
    topic = ctx.image.topic_by_name(name)
    assert topic is not None
    response = controller_pb2.DescribeTopicsResponse()
    _describe_topic(response.topics.add(), topic, 0, len(topic.partitions))
    return response.SerializeToString()


def test_a_kept_description_is_the_topic_as_it_is_now(ctx: Context) -> None:
    """Describing a topic again answers from its kept description (topics._Descriptions), which
    is the description built field by field; once the topic changes -- partitions added -- the
    answer follows the new value."""
    request = controller_pb2.DescribeTopicsRequest(topics=["t"])
    first = ctx.call(describe_topics, request).response.SerializeToString()
    assert ctx.call(describe_topics, request).response.SerializeToString() == first == _described_fresh(ctx, "t")
    assert grow(ctx, "t", 3) == ("NONE", "")
    grown = ctx.call(describe_topics, request).response
    assert [p.partition for p in grown.topics[0].partitions] == [0, 1, 2]
    assert grown.SerializeToString() == _described_fresh(ctx, "t") != first


def test_kept_descriptions_stay_within_their_bytes_oldest_out_first() -> None:
    ctx = Context()
    ctx.add_brokers([1, 2, 3])
    for name in ("a", "b", "c"):
        ctx.create_ok(name, 4, 2)
    topics = [ctx.image.topic_by_name(name) for name in ("a", "b", "c")]
    fresh = []
    for topic in topics:
        assert topic is not None
        described = controller_pb2.TopicDescription()
        _describe_topic(described, topic, 0, len(topic.partitions))
        fresh.append(described)
    size = max(len(d.SerializeToString()) for d in fresh)
    kept = _Descriptions(max_bytes=2 * size)
    response = controller_pb2.DescribeTopicsResponse()
    for topic in topics:
        assert topic is not None
        kept.add_whole(response.topics, topic)
    assert list(response.topics) == fresh
    assert [t for t, _ in kept._by_id.values()] == topics[1:]  # "a", the oldest, went first
    assert kept._bytes <= 2 * size
    for topic in topics[1:]:
        assert topic is not None
        kept.add_whole(response.topics, topic)  # from the kept bytes
    assert list(response.topics)[3:] == fresh[1:]
    tiny = _Descriptions(max_bytes=10)  # no description fits: none is kept, each is still answered
    assert topics[0] is not None
    tiny.add_whole(response.topics, topics[0])
    assert tiny._by_id == {} and response.topics[-1] == fresh[0]
