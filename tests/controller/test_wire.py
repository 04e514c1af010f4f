"""The snapshot encoder's bytes are protobuf's bytes: partitions straight to wire format, and topics
unchanged since the last snapshot reused rather than re-encoded."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raftmeta.controller import image_to_records
from raftmeta.controller.image import PartitionRegistration
from raftmeta.controller.snapshot import SnapshotEncoder
from raftmeta.controller.topics import _new_partitions, delete_topics
from raftmeta.records.wire import (
    PACKED_CACHE_MAX,
    PartitionEncoder,
    read_partition_state,
    read_partition_state_by_protobuf,
    varint,
)
from raftmeta.v1 import controller_pb2, records_pb2
from tests.controller.helpers import Context

INT32 = st.integers(-(2**31), 2**31 - 1)
SMALL = st.integers(-2, 20_000)  # around the one- and two-byte varint boundaries
IDS = st.lists(st.one_of(SMALL, INT32), max_size=5).map(tuple)
DIRECTORIES = st.lists(st.binary(min_size=16, max_size=16), max_size=4).map(tuple)  # 16-byte ids (KIP-858)


def protobuf_bytes(topic_id: bytes, pid: int, part: PartitionRegistration) -> bytes:
    return records_pb2.MetadataRecord(
        partition=records_pb2.PartitionRecord(
            topic_id=topic_id,
            partition_id=pid,
            replicas=part.replicas,
            isr=part.isr,
            removing_replicas=part.removing_replicas,
            adding_replicas=part.adding_replicas,
            leader=part.leader,
            leader_epoch=part.leader_epoch,
            partition_epoch=part.partition_epoch,
            directories=part.directories,
        )
    ).SerializeToString()


@settings(max_examples=300, deadline=None)
@given(
    topic_id=st.one_of(st.just(b""), st.binary(min_size=16, max_size=16)),
    pid=st.one_of(SMALL, INT32),
    replicas=IDS,
    isr=IDS,
    leader=st.one_of(SMALL, INT32),
    epochs=st.tuples(st.one_of(SMALL, INT32), st.one_of(SMALL, INT32)),
    removing=IDS,
    adding=IDS,
    directories=DIRECTORIES,
)
def test_a_partition_encodes_exactly_as_protobuf_does(
    topic_id: bytes,
    pid: int,
    replicas: tuple[int, ...],
    isr: tuple[int, ...],
    leader: int,
    epochs: tuple[int, int],
    removing: tuple[int, ...],
    adding: tuple[int, ...],
    directories: tuple[bytes, ...],
) -> None:
    part = PartitionRegistration(replicas, isr, leader, epochs[0], epochs[1], removing, adding, directories)
    encoder = PartitionEncoder()
    expected = protobuf_bytes(topic_id, pid, part)
    assert encoder.record(encoder.topic_prefix(topic_id), pid, part) == expected
    assert encoder.record(encoder.topic_prefix(topic_id), pid, part) == expected  # from the cache
    assert records_pb2.MetadataRecord.FromString(expected).partition.replicas == list(replicas)


def test_varint_matches_protobuf_for_boundaries_and_negatives() -> None:
    for value in (1, 127, 128, 16383, 16384, 2**31 - 1, -1, -(2**31)):
        encoded = records_pb2.PartitionRecord(leader=value).SerializeToString()
        assert encoded == b"\x38" + varint(value), value


def test_the_replica_list_cache_is_bounded() -> None:
    encoder = PartitionEncoder()
    prefix = encoder.topic_prefix(bytes(range(16)))
    for n in range(PACKED_CACHE_MAX + 10):
        part = PartitionRegistration((n, n + 1), (n,), n, 0, 0)
        assert encoder.record(prefix, 1, part) == protobuf_bytes(bytes(range(16)), 1, part)
    assert len(encoder._packed) <= PACKED_CACHE_MAX


def grown_context() -> Context:
    ctx = Context()
    ctx.add_brokers([1, 2, 3, 4], racks=["a", "a", "b", "b"])
    ctx.create_ok("alpha", partitions=5, rf=3, configs={"cleanup.policy": "compact"})
    on_3_and_4 = [
        controller_pb2.ReplicaAssignment(partition_index=i, broker_ids=[3 + i % 2, 4 - i % 2]) for i in range(3)
    ]
    ctx.create(controller_pb2.CreatableTopic(name="beta", assignments=on_3_and_4))
    return ctx


def test_snapshot_encoder_bytes_are_the_records_of_image_to_records_across_changes() -> None:
    ctx = grown_context()
    encoder = SnapshotEncoder()

    def expected() -> list[bytes]:
        return [r.SerializeToString() for r in image_to_records(ctx.image)]

    assert encoder.records(ctx.image) == expected()
    beta = ctx.image.topic_by_name("beta")
    beta_bytes = encoder._topics[id(beta)][2]
    ctx.create_ok("gamma", partitions=2, rf=3)
    alpha = ctx.image.topic_by_name("alpha")
    ctx.fence(1)  # alpha has replicas on broker 1: its ISRs shrink, it becomes a new value
    ctx.run(delete_topics, controller_pb2.DeleteTopicsRequest(topic_names=["gamma"]))
    assert ctx.image.topic_by_name("alpha") is not alpha
    assert encoder.records(ctx.image) == expected()
    # beta (brokers 3 and 4 only) is the same value as before: its bytes were reused as they are.
    assert ctx.image.topic_by_name("beta") is beta
    assert encoder._topics[id(beta)][2] is beta_bytes
    assert encoder.records(ctx.image) == expected()


def test_snapshot_encoder_drops_topics_that_are_gone() -> None:
    ctx = grown_context()
    encoder = SnapshotEncoder()
    encoder.records(ctx.image)
    assert len(encoder._topics) == 2
    ctx.run(delete_topics, controller_pb2.DeleteTopicsRequest(topic_names=["alpha", "beta"]))
    assert encoder.records(ctx.image) == [r.SerializeToString() for r in image_to_records(ctx.image)]
    assert encoder._topics == {}


@settings(max_examples=200, deadline=None)
@given(
    topic_id=st.one_of(st.just(b""), st.binary(min_size=16, max_size=16)),
    first=st.one_of(st.integers(-3, 200), st.integers(16_300, 16_400), st.integers(2_000_000, 2_000_010)),
    states=st.lists(
        st.builds(
            PartitionRegistration,
            replicas=IDS,
            isr=IDS,
            leader=st.one_of(SMALL, INT32),
            leader_epoch=SMALL,
            partition_epoch=SMALL,
            removing_replicas=IDS,
            adding_replicas=IDS,
            directories=DIRECTORIES,
        ),
        min_size=1,
        max_size=4,
    ),
    picks=st.lists(st.integers(0, 3), max_size=30),
)
def test_new_records_encode_exactly_as_protobuf_does(
    topic_id: bytes, first: int, states: list[PartitionRegistration], picks: list[int]
) -> None:
    """The create path's encoder (states shared between partitions, encoded once) against protobuf."""
    partitions = [states[i % len(states)] for i in picks]
    encoded = PartitionEncoder().new_records(topic_id, first, partitions)
    assert encoded == [protobuf_bytes(topic_id, first + i, part) for i, part in enumerate(partitions)]


# A new partition's shape (the ISR is the replica list, epochs 0, nothing moving), around the
# bounds of the encoder's packed lists: ids and leaders of one byte, 127+ long lists.
NEW_REPLICAS = st.one_of(
    st.lists(st.integers(-1, 130), min_size=1, max_size=6),
    st.lists(st.integers(0, 127), min_size=126, max_size=129),
).map(tuple)


@settings(max_examples=300, deadline=None)
@given(
    replicas=NEW_REPLICAS,
    leader=st.one_of(st.integers(-1, 130), INT32),
    isr_is_a_copy=st.booleans(),
    first=st.integers(0, 200),
    copies=st.integers(1, 3),
)
def test_new_partitions_encode_exactly_as_protobuf_does(
    replicas: tuple[int, ...], leader: int, isr_is_a_copy: bool, first: int, copies: int
) -> None:
    """The create path's encoding against protobuf on the states a create makes, around the edges
    of the one-byte encoding of replica lists."""
    isr = (*replicas,) if isr_is_a_copy else replicas  # an equal tuple, not the same one
    part = PartitionRegistration(replicas, isr, leader, 0, 0, (), ())
    encoded = PartitionEncoder().new_records(b"\x07" * 16, first, [part] * copies)
    assert encoded == [protobuf_bytes(b"\x07" * 16, first + i, part) for i in range(copies)]


def state_tail(part: PartitionRegistration) -> bytes:
    """A partition's record after topic_id and partition_id: what replay's fast path reads."""
    record = PartitionEncoder().record(b"", 0, part)
    return record[2:] if record[1] < 0x80 else record[3:]


SHAPED = st.tuples(
    st.lists(st.integers(-1, 300), max_size=4).map(tuple),
    st.lists(st.integers(-1, 300), max_size=4).map(tuple),
    st.one_of(st.integers(-1, 300), INT32),
    st.one_of(st.integers(0, 2**21), INT32),
    st.one_of(st.integers(0, 2**29), INT32),
).map(lambda fields: PartitionRegistration(*fields))


@settings(max_examples=500, deadline=None)
@given(
    tail=st.one_of(
        st.binary(max_size=24),
        SHAPED.map(state_tail),
        # a valid state with a byte changed, cut short or lengthened
        st.tuples(SHAPED.map(state_tail), st.integers(0, 40), st.integers(0, 255)).map(
            lambda t: t[0][: t[1] % (len(t[0]) + 1)] + bytes([t[2]]) + t[0][t[1] % (len(t[0]) + 1) + 1 :]
        ),
        st.tuples(SHAPED.map(state_tail), st.binary(max_size=3)).map(lambda t: t[0] + t[1]),
    )
)
def test_reading_a_partition_state_by_hand_equals_protobuf(tail: bytes) -> None:
    """The byte-by-byte reader of replay's fast path is a copy for speed of the protobuf one: the
    same state, or None, for any bytes."""
    assert read_partition_state(tail) == read_partition_state_by_protobuf(tail)


def test_a_state_with_directories_is_left_to_the_general_path() -> None:
    """The fast readers return a state without directories: one whose record holds them (a
    real broker's replicas, KIP-858) must not come back from them with its directories dropped."""
    part = PartitionRegistration((1, 2), (1, 2), 1, 0, 0, (), (), (b"\x11" * 16, b"\x22" * 16))
    assert read_partition_state(state_tail(part)) is None
    assert read_partition_state_by_protobuf(state_tail(part)) is None


def test_the_hand_reader_takes_the_common_shapes_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small broker ids, a leader, small epochs: no protobuf fallback (the reason it exists)."""
    import raftmeta.records.wire as wire

    def refuse(tail: bytes) -> None:
        raise AssertionError(f"fell back to protobuf for {tail.hex()}")

    monkeypatch.setattr(wire, "read_partition_state_by_protobuf", refuse)
    for part in [
        PartitionRegistration((1, 2, 3), (1, 2, 3), 1, 0, 0),
        PartitionRegistration((0, 127, 5), (5, 0), 5, 300, 2**27),
        PartitionRegistration((9,), (), 0, 0, 1),
    ]:
        assert read_partition_state(state_tail(part)) == tuple(part[:5])


def test_a_snapshot_stream_read_halfway_keeps_the_previous_cache() -> None:
    """A snapshot that failed while being written (its stream not read to the end) must not leave
    the encoder a cache missing the topics it did not reach."""
    ctx = grown_context()
    encoder = SnapshotEncoder()
    encoder.records(ctx.image)
    before = dict(encoder._topics)
    ctx.create_ok("gamma", partitions=2, rf=3)
    stream = encoder.stream(ctx.image)
    next(stream)
    stream.close()
    assert encoder._topics == before
    assert encoder.records(ctx.image) == [r.SerializeToString() for r in image_to_records(ctx.image)]


@settings(max_examples=100, deadline=None)
@given(
    replicas=st.lists(st.lists(st.integers(0, 200), min_size=1, max_size=4, unique=True), min_size=1, max_size=20),
    fenced=st.sets(st.integers(0, 200), max_size=3),
    first=st.integers(0, 20_000),
)
def test_a_creates_tails_make_the_records_protobuf_makes(
    replicas: list[list[int]], fenced: set[int], first: int
) -> None:
    """The create path: states and their tails from the table of new partitions (every broker
    live, or some fenced), joined into records, against protobuf's encoding of the same states;
    the table gives a replica list the same state and tail in a later create."""
    live = None if not fenced else {b for partition in replicas for b in partition} - fenced
    replicas = [p for p in replicas if live is None or not live.isdisjoint(p)] or [[0]]
    live = live if live is None or not live.isdisjoint(replicas[0]) else None
    parts, tails = _new_partitions(replicas, live)
    topic_id = b"\x05" * 16
    encoded = PartitionEncoder().records(topic_id, first, tails)
    assert encoded == [protobuf_bytes(topic_id, first + i, part) for i, part in enumerate(parts)]
    assert tails == [PartitionEncoder().tail(part) for part in parts]
    again, again_tails = _new_partitions(replicas, live)
    if live is None:
        assert all(a is b for a, b in zip(again, parts, strict=True))
    assert again_tails == tails
