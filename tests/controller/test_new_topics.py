"""The shortcuts that build an image without reading records field by field give exactly the
image replay gives:

- the leader replays a CreateTopics result's records with its ``new_topics`` as the memo
  (``ImageBuilder.replay_all(records, memo=...)``): the topics come from the values the records
  were built from, not from reading the records back;
- replay takes a new partition's state from its serialized bytes (``delta._partition_state``)
  instead of reading its protobuf fields, and falls back to reading them for anything else.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raftmeta.controller import ImageBuilder, MetadataImage, PartitionRegistration, ReplayError, delta, image_to_records
from raftmeta.controller.delta import NewTopic
from raftmeta.controller.topics import create_partitions, create_topics
from raftmeta.records.decode import LazyRecords
from raftmeta.records.wire import PartitionEncoder, varint
from raftmeta.v1 import controller_pb2, records_pb2
from tests.controller.helpers import Context

RACKS = ["a", "b", "c", None]
NAMES = ["t", "t.x", "t_x", "orders", "a.b", "a_b", "bad name", "__cluster_metadata"]


def replayed(image: MetadataImage, records: Any) -> MetadataImage:
    builder = ImageBuilder(image)
    builder.replay_all(records)
    return builder.build()


def memo_replayed(image: MetadataImage, records: Any, memo: Sequence[NewTopic]) -> MetadataImage:
    builder = ImageBuilder(image)
    builder.replay_all(records, memo=memo)
    return builder.build()


@st.composite
def clusters(draw: st.DrawFn) -> Context:
    """Brokers in racks and maybe pools, some fenced, and a few topics already there."""
    ctx = Context(seed=draw(st.integers(0, 2**32)))
    count = draw(st.integers(1, 7))
    pools = draw(st.booleans())
    for broker in range(count):
        ctx.register(broker, rack=draw(st.sampled_from(RACKS)), pool=("p" if broker % 2 else "q") if pools else None)
        ctx.heartbeat(broker)
    for broker in range(1, count):  # broker 0 stays unfenced: "existing.topic" needs one
        if draw(st.integers(0, 3)) == 0:
            ctx.heartbeat(broker, want_fence=True)
    if draw(st.booleans()):
        ctx.create_ok("existing.topic", partitions=draw(st.integers(1, 5)))
    return ctx


@st.composite
def creatable(draw: st.DrawFn, brokers: int) -> controller_pb2.CreatableTopic:
    topic = controller_pb2.CreatableTopic(name=draw(st.sampled_from(NAMES)))
    if draw(st.integers(0, 4)) == 0:  # a manual assignment
        replicas = st.lists(st.integers(0, brokers), min_size=1, max_size=3)
        for index, ids in enumerate(draw(st.lists(replicas, min_size=1, max_size=4))):
            topic.assignments.add(partition_index=index, broker_ids=ids)
    else:
        topic.num_partitions = draw(st.sampled_from([-1, 1, 2, 3, 7, 40]))
        topic.replication_factor = draw(st.sampled_from([-1, 1, 2, 3]))
        topic.placer = draw(st.sampled_from(["", "striped", "legacy", "balanced"]))
    if draw(st.booleans()):
        topic.broker_pool = draw(st.sampled_from(["p", "q"]))
    if draw(st.booleans()):
        topic.configs["retention.ms"] = draw(st.sampled_from(["1000", "-1", "x"]))
    if draw(st.booleans()):
        topic.configs["cleanup.policy"] = "compact"
    return topic


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_replay_with_and_without_the_memo_gives_the_same_image(data: st.DataObject) -> None:
    ctx = data.draw(clusters())
    brokers = len(ctx.image.brokers)
    topics = data.draw(st.lists(creatable(brokers), min_size=1, max_size=4))
    request = controller_pb2.CreateTopicsRequest(topics=topics, validate_only=data.draw(st.booleans()))
    result = ctx.call(create_topics, request)
    assert result.new_topics is not None
    # The records are exactly the new topics' records, in order.
    assert [r.topic.name for r in result.records if r.WhichOneof("record") == "topic"] == [
        t.name for t in result.new_topics
    ]
    expected = replayed(ctx.image, result.records)
    shortcut = memo_replayed(ctx.image, result.records, result.new_topics)
    assert shortcut == expected
    assert image_to_records(shortcut) == image_to_records(expected)
    for new in result.new_topics:
        made = shortcut.topic_by_name(new.name)
        assert made is not None
        assert list(made.configs.items()) == list(expected.topics[new.topic_id].configs.items())


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_a_controller_applying_new_topics_matches_a_follower_replaying_the_log(data: st.DataObject) -> None:
    """Leader (shortcut) and follower (replay of the committed records) end with equal images."""
    from raftmeta.controller import Controller

    ctx = data.draw(clusters())
    leader = Controller(ctx.image, ids=ctx.ids, random=ctx.random, committed_offset=0)
    follower = Controller(ctx.image, committed_offset=0)
    offset = 0
    for index in range(data.draw(st.integers(1, 4))):
        topics = data.draw(st.lists(creatable(len(ctx.image.brokers)), min_size=1, max_size=3))
        request = controller_pb2.CreateTopicsRequest(topics=topics, request_id=f"r{index}")
        handled = leader.handle("CreateTopics", request, 0)
        if handled.records:
            offset += len(handled.records)
            leader.commit(1, offset)
            follower.apply_committed(
                [records_pb2.MetadataRecord.FromString(r.SerializeToString()) for r in handled.records], offset
            )
    assert leader.committed_image == follower.committed_image


def test_create_partitions_records_are_protobufs_records() -> None:
    ctx = Context()
    ctx.add_brokers([0, 1, 2, 3], racks=["a", "b", "a", "b"])
    ctx.create_ok("grow", partitions=130, rf=2)
    ctx.heartbeat(3, want_fence=True)
    request = controller_pb2.CreatePartitionsRequest(
        topics=[controller_pb2.CreatePartitionsTopic(name="grow", count=300)]
    )
    result = ctx.run(create_partitions, request)
    grown = ctx.image.topic_by_name("grow")
    assert grown is not None and len(grown.partitions) == 300
    for record in result.records:
        p = record.partition
        expected = records_pb2.MetadataRecord()
        expected.partition.topic_id = p.topic_id
        expected.partition.partition_id = p.partition_id
        expected.partition.replicas.extend(p.replicas)
        expected.partition.isr.extend([b for b in p.replicas if b != 3])
        expected.partition.leader = expected.partition.isr[0]
        assert record.SerializeToString() == expected.SerializeToString()


def creation_records(topic: NewTopic) -> list[records_pb2.MetadataRecord]:
    records = [records_pb2.MetadataRecord(topic=records_pb2.TopicRecord(name=topic.name, topic_id=topic.topic_id))]
    records.extend(
        records_pb2.MetadataRecord.FromString(data)
        for data in PartitionEncoder().new_records(topic.topic_id, 0, topic.partitions)
    )
    return records


def test_the_memo_refuses_what_replay_refuses() -> None:
    ctx = Context()
    ctx.add_brokers([1, 2, 3])
    ctx.create_ok("taken")
    good = PartitionRegistration((1, 2), (1, 2), 1, 0, 0)
    cases = [
        NewTopic("taken", (9).to_bytes(16, "big"), None, {}, (good,)),  # the name exists
        NewTopic("fresh", bytes(16), None, {}, (good,)),  # zero id
        NewTopic("bad name", (9).to_bytes(16, "big"), None, {}, (good,)),
        NewTopic("dup", (9).to_bytes(16, "big"), None, {}, (good, PartitionRegistration((1, 1), (1,), 1, 0, 0))),
        NewTopic("isr", (9).to_bytes(16, "big"), None, {}, (good, good, PartitionRegistration((1, 2), (3,), 3, 0, 0))),
        NewTopic("lead", (9).to_bytes(16, "big"), None, {}, (PartitionRegistration((1, 2), (2,), 1, 0, 0),)),
    ]
    for case in cases:
        records = creation_records(case)
        with pytest.raises(ReplayError) as shortcut:
            memo_replayed(ctx.image, records, (case,))
        with pytest.raises(ReplayError) as replay:
            replayed(ctx.image, records)
        assert str(shortcut.value) == str(replay.value)


def test_a_memo_that_does_not_describe_the_records_is_refused() -> None:
    """The memo must be the topics whose records open the batch: another topic, or more records
    than the batch holds, is a bug, refused before anything is built."""
    ctx = Context()
    ctx.add_brokers([1, 2])
    good = PartitionRegistration((1, 2), (1, 2), 1, 0, 0)
    topic = NewTopic("t", (9).to_bytes(16, "big"), None, {}, (good, good))
    other = topic._replace(topic_id=(8).to_bytes(16, "big"))
    records = creation_records(topic)
    with pytest.raises(ValueError, match="is not the next record"):
        memo_replayed(ctx.image, records, (other,))
    with pytest.raises(ValueError, match="more records than its batch holds"):
        memo_replayed(ctx.image, records[:-1], (topic,))


def test_the_memo_keeps_the_encoding_replay_from_bytes_keeps() -> None:
    """With ``keep_encoded`` (every controller), a topic replayed from its memo keeps the bytes of
    its PartitionRecords for the next snapshot, as replay from those bytes does."""
    ctx = Context()
    ctx.add_brokers([1, 2])
    good = PartitionRegistration((1, 2), (1, 2), 1, 0, 0)
    topic = NewTopic("t", (9).to_bytes(16, "big"), None, {}, (good, good))
    records = LazyRecords([r.SerializeToString() for r in creation_records(topic)])
    encodings = []
    for memo in ((topic,), ()):
        builder = ImageBuilder(ctx.image, keep_encoded=True)
        builder.replay_all(records, memo=memo)
        builder.build()
        encodings.append(builder.encoded)
    with_memo, without = encodings
    assert len(with_memo) == 1 and with_memo == without


# ---- replay's fast path for partition records ----------------------------------------------------
def general_replay(image: MetadataImage, records: list[records_pb2.MetadataRecord]) -> MetadataImage | str:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(delta, "_PARTITION_STATES", {})
        patch.setattr(delta, "_partition_state", lambda tail: None)
        return outcome(image, records)


def outcome(image: MetadataImage, records: Sequence[records_pb2.MetadataRecord]) -> MetadataImage | str:
    try:
        return replayed(image, records)
    except ReplayError as error:
        return f"ReplayError: {error}"


TOPIC_IDS = [(1).to_bytes(16, "big"), (2).to_bytes(16, "big"), b"\x01" * 15, b""]
BROKER = st.sampled_from([-1, 0, 1, 2, 3, 200, 2**31 - 1])
IDS = st.lists(BROKER, max_size=4)


@st.composite
def partition_records(draw: st.DrawFn) -> records_pb2.MetadataRecord:
    record = records_pb2.MetadataRecord()
    p = record.partition
    p.topic_id = draw(st.sampled_from(TOPIC_IDS[:2]) if draw(st.integers(0, 9)) else st.sampled_from(TOPIC_IDS))
    p.partition_id = draw(st.integers(-1, 3))
    replicas = draw(st.sampled_from([[1, 2, 3], [2, 3, 1], [0, 1], [3]]) if draw(st.booleans()) else IDS)
    p.replicas.extend(replicas)
    isr = replicas if draw(st.booleans()) else draw(IDS)
    p.isr.extend(isr)
    # bool(isr): with the bare list, mypy would expect the draw to give a list too
    p.leader = isr[0] if bool(isr) and draw(st.booleans()) else draw(BROKER)
    if draw(st.integers(0, 4)) == 0:
        p.leader_epoch = draw(st.integers(-2, 3))
        p.partition_epoch = draw(st.integers(-2, 3))
    if draw(st.integers(0, 6)) == 0:
        p.adding_replicas.extend(draw(IDS))
    if draw(st.integers(0, 6)) == 0:
        p.removing_replicas.extend(draw(IDS))
    data = record.SerializeToString()
    if draw(st.integers(0, 9)) == 0:  # an unknown field in the PartitionRecord (field 99, varint 7)
        body = p.SerializeToString() + b"\x98\x06\x07"
        data = b"\x12" + varint(len(body)) + body  # a body can pass 127 bytes: a multi-byte length
    return records_pb2.MetadataRecord.FromString(data)


def topic_stream(data: st.DataObject) -> list[records_pb2.MetadataRecord]:
    records: list[records_pb2.MetadataRecord] = []
    for index, topic_id in enumerate(TOPIC_IDS[:2]):
        records.append(records_pb2.MetadataRecord(topic=records_pb2.TopicRecord(name=f"t{index}", topic_id=topic_id)))
    records.extend(data.draw(st.lists(partition_records(), max_size=12)))
    return records


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_fast_path_replay_equals_reading_the_fields(data: st.DataObject) -> None:
    """Random partition records -- valid and not, moving, with unknown fields, odd ids -- give the
    same image or the same ReplayError with and without the fast path."""
    ctx = Context()
    ctx.add_brokers([0, 1, 2, 3])
    records = topic_stream(data)
    # Mostly sequential partition ids, so that most records are accepted.
    next_pid = dict.fromkeys(TOPIC_IDS, 0)
    for record in records:
        if record.WhichOneof("record") == "partition" and data.draw(st.integers(0, 5)):
            record.partition.partition_id = next_pid[record.partition.topic_id]
            next_pid[record.partition.topic_id] += 1
    assert outcome(ctx.image, records) == general_replay(ctx.image, records)
    # A second pass with every state learnt by the first.
    assert outcome(ctx.image, records) == general_replay(ctx.image, records)
    # Records replayed from their bytes (a snapshot's, a follower's batches).
    serialized = LazyRecords([record.SerializeToString() for record in records])
    assert outcome(ctx.image, serialized) == general_replay(ctx.image, records)


@pytest.mark.parametrize("count", [1, 127, 128, 129, 16_383, 16_384, 16_390])
def test_fast_path_partition_ids_across_varint_sizes(count: int) -> None:
    """Partition ids of one, two and three varint bytes (the fast path reads up to two)."""
    topic_id = (5).to_bytes(16, "big")
    parts = [PartitionRegistration((1, 2, 0), (1, 2, 0), 1, 0, 0), PartitionRegistration((0, 1), (0,), 0, 0, 0)]
    partitions = tuple(parts[i % 2] for i in range(count))
    records = [records_pb2.MetadataRecord(topic=records_pb2.TopicRecord(name="big", topic_id=topic_id))]
    records.extend(
        records_pb2.MetadataRecord.FromString(data) for data in PartitionEncoder().new_records(topic_id, 0, partitions)
    )
    ctx = Context()
    ctx.add_brokers([0, 1, 2])
    image = outcome(ctx.image, records)
    assert isinstance(image, MetadataImage)
    assert image == general_replay(ctx.image, records)
    made = image.topic_by_name("big")
    assert made is not None and made.partitions == partitions
    assert image.replica_counts == {0: count, 1: count, 2: (count + 1) // 2}
    if count < 2:
        return
    # A record out of order is refused with the same message either way.
    skipped = [*records[:-2], records[-1]]
    assert outcome(ctx.image, skipped) == general_replay(ctx.image, skipped)
    assert str(outcome(ctx.image, skipped)).startswith("ReplayError: PartitionRecord big-")


def test_fast_path_counts_partitions_of_an_existing_topic() -> None:
    """Records for a topic created in an earlier builder go into the load counters at once."""
    ctx = Context()
    ctx.add_brokers([1, 2, 3], racks=["a", "b", "c"])
    ctx.create_ok("grow", partitions=2, rf=3)
    grown = ctx.call(
        create_partitions,
        controller_pb2.CreatePartitionsRequest(topics=[controller_pb2.CreatePartitionsTopic(name="grow", count=40)]),
    )
    records = [records_pb2.MetadataRecord.FromString(r.SerializeToString()) for r in grown.records]
    fast = outcome(ctx.image, records)
    assert isinstance(fast, MetadataImage)
    assert fast == general_replay(ctx.image, records)
    assert fast.partition_count == 40
    assert fast.replica_counts == {1: 40, 2: 40, 3: 40}


def test_serialized_bytes_that_are_no_record_are_refused_by_name() -> None:
    """A follower's committed batches are replayed from their bytes: bytes that pass the batch CRC
    but do not parse stop the replay with a ReplayError that says what they are."""
    ctx = Context()
    with pytest.raises(ReplayError, match="not a MetadataRecord"):
        replayed(ctx.image, LazyRecords([b"\xff\xff\xff"]))
