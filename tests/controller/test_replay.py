"""Replay: refusals of impossible records, determinism, prefix independence, snapshots."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raftmeta.controller import (
    NO_LEADER,
    ImageBuilder,
    MetadataImage,
    ReplayError,
    image_from_records,
    image_to_records,
)
from raftmeta.controller.delta import _tally
from raftmeta.controller.image import PartitionRegistration
from raftmeta.controller.pmap import PMap
from raftmeta.controller.topics import create_partitions, delete_topics, elect_leaders
from raftmeta.v1 import controller_pb2, records_pb2
from tests.controller.helpers import Context, incarnation

T1 = (1).to_bytes(16, "big")
T2 = (2).to_bytes(16, "big")


def rec(**kwargs: object) -> records_pb2.MetadataRecord:
    return records_pb2.MetadataRecord(**kwargs)  # type: ignore[arg-type]


def topic_rec(name: str, topic_id: bytes) -> records_pb2.MetadataRecord:
    return rec(topic=records_pb2.TopicRecord(name=name, topic_id=topic_id))


def part_rec(
    topic_id: bytes, pid: int, replicas: list[int], isr: list[int] | None = None, leader: int | None = None
) -> records_pb2.MetadataRecord:
    isr = replicas if isr is None else isr
    return rec(
        partition=records_pb2.PartitionRecord(
            topic_id=topic_id, partition_id=pid, replicas=replicas, isr=isr, leader=isr[0] if leader is None else leader
        )
    )


def change_rec(
    topic_id: bytes, pid: int, leader_epoch: int, partition_epoch: int, **kw: object
) -> records_pb2.MetadataRecord:
    return rec(
        partition_change=records_pb2.PartitionChangeRecord(
            topic_id=topic_id,
            partition_id=pid,
            leader_epoch=leader_epoch,
            partition_epoch=partition_epoch,
            **kw,  # type: ignore[arg-type]
        )
    )


BASE = [topic_rec("a", T1), part_rec(T1, 0, [1, 2, 3])]


@pytest.mark.parametrize(
    ("records", "match"),
    [
        ([rec()], "no record set"),
        ([part_rec(T2, 0, [1])], "no topic with id"),
        ([topic_rec("b", T1)], "duplicate topic id"),
        ([topic_rec("a", T2)], "a topic named 'a' already exists"),
        ([topic_rec("bad name", T2)], "illegal topic name"),
        ([topic_rec("z", bytes(16))], "16 non-zero bytes"),
        ([part_rec(T1, 2, [1])], "expected partition id 1"),
        ([part_rec(T1, 0, [1])], "expected partition id 1"),
        ([part_rec(T1, 1, [1, 1])], "name a broker twice"),
        ([part_rec(T1, 1, [], leader=-1)], "at least one replica"),
        ([part_rec(T1, 1, [1, 2], [1, 3])], "ISR member 3 is not a replica"),
        ([part_rec(T1, 1, [1, 2], [1, 1])], "ISR \\[1, 1\\] names a broker twice"),
        ([part_rec(T1, 1, [1, 2], [1, 1]), part_rec(T1, 2, [1, 1])], "ISR \\[1, 1\\] names a broker twice"),
        ([part_rec(T1, 1, [2, 1]), part_rec(T1, 2, [2, 2])], "replicas \\[2, 2\\] name a broker twice"),
        ([change_rec(T1, 0, 0, 1, isr=records_pb2.BrokerIdList(ids=[2, 2]))], "ISR \\[2, 2\\] names a broker twice"),
        ([part_rec(T1, 1, [1, 2], [2], leader=1)], "leader 1 is not in the ISR"),
        ([change_rec(T1, 5, 0, 1)], "no such partition"),
        ([change_rec(T1, 0, 0, 2)], "do not follow"),
        ([change_rec(T1, 0, 0, 1, leader=2)], "do not follow"),
        ([change_rec(T1, 0, 1, 1)], "do not follow"),
        ([change_rec(T1, 0, 1, 1, leader=4)], "leader 4 is not in the ISR"),
        ([rec(remove_topic=records_pb2.RemoveTopicRecord(topic_id=T1)), change_rec(T1, 0, 1, 1, leader=2)], "removed"),
        ([rec(remove_topic=records_pb2.RemoveTopicRecord(topic_id=T2))], "no topic with id"),
        (
            [
                rec(
                    config=records_pb2.ConfigRecord(
                        resource_type=records_pb2.CONFIG_RESOURCE_TYPE_TOPIC, resource_name="q", name="x", value="1"
                    )
                )
            ],
            "no topic named 'q'",
        ),
        ([rec(fence_broker=records_pb2.FenceBrokerRecord(broker_id=7, broker_epoch=1))], "no broker registration"),
        ([rec(request=records_pb2.RequestRecord(request_id="", method="CreateTopics"))], "request_id must be"),
    ],
)
def test_impossible_records_are_refused_and_change_nothing(
    records: list[records_pb2.MetadataRecord], match: str
) -> None:
    image = MetadataImage.empty().replay_all(BASE)
    before = image_to_records(image)
    with pytest.raises(ReplayError, match=match):
        image.replay_all(records)
    assert image_to_records(image) == before


def test_broker_records_check_epochs() -> None:
    register = rec(
        register_broker=records_pb2.RegisterBrokerRecord(broker_id=1, incarnation_id=incarnation(1), broker_epoch=5)
    )
    image = MetadataImage.empty().replay(register)
    with pytest.raises(ReplayError, match="does not rise"):
        image.replay(register)
    with pytest.raises(ReplayError, match="registered with epoch 5, not 4"):
        image.replay(rec(unfence_broker=records_pb2.UnfenceBrokerRecord(broker_id=1, broker_epoch=4)))
    gone = image.replay(rec(unregister_broker=records_pb2.UnregisterBrokerRecord(broker_id=1, broker_epoch=5)))
    assert gone.brokers == {}


def test_duplicate_request_id_is_refused() -> None:
    record = rec(request=records_pb2.RequestRecord(request_id="r", method="CreateTopics", response=b""))
    image = MetadataImage.empty().replay(record)
    with pytest.raises(ReplayError, match="already answered"):
        image.replay(record)


def test_replay_leaves_the_old_image_untouched() -> None:
    image = MetadataImage.empty().replay_all(BASE)
    changed = image.replay(change_rec(T1, 0, 1, 1, leader=2))
    assert image.partition(T1, 0).leader == 1  # type: ignore[union-attr]
    assert changed.partition(T1, 0).leader == 2  # type: ignore[union-attr]
    assert image.leader_counts == {1: 1}
    assert changed.leader_counts == {2: 1}


def test_control_and_framing_records_change_nothing() -> None:
    image = MetadataImage.empty().replay_all(BASE)
    for record in (
        rec(leader_change=records_pb2.LeaderChangeRecord(leader_id=1, leader_epoch=3)),
        rec(no_op=records_pb2.NoOpRecord()),
        rec(snapshot_header=records_pb2.SnapshotHeaderRecord(version=1)),
        rec(snapshot_footer=records_pb2.SnapshotFooterRecord(version=1)),
    ):
        assert image.replay(record) == image


def test_pmap_is_persistent() -> None:
    empty: PMap[int, int] = PMap()
    maps = [empty]
    for i in range(500):
        maps.append(maps[-1].set(i % 200, i))
    final = maps[-1]
    assert len(final) == 200
    assert dict(final.items()) == {k: (400 + k if k < 100 else 200 + k) for k in range(200)}
    assert len(maps[10]) == 10 and maps[10][9] == 9
    trimmed = final.delete(5)
    assert 5 in final and 5 not in trimmed and len(trimmed) == 199
    with pytest.raises(KeyError):
        trimmed.delete(5)
    assert trimmed == {k: v for k, v in final.items() if k != 5}
    assert trimmed.get(5, "gone") == "gone"


class Colliding:
    """A key whose hash collides with every other Colliding key."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __hash__(self) -> int:
        return 12345

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Colliding) and other.n == self.n


KEYS = st.one_of(
    st.integers(-3, 3),  # hash(-1) == hash(-2) in CPython
    st.integers(0, 2**70).map(lambda n: n << 40),  # low hash bits all zero
    st.text(max_size=3),
    st.integers(0, 40).map(Colliding),
)


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(
        st.lists(st.tuples(KEYS, st.one_of(st.none(), st.integers())), max_size=60),
        min_size=1,
        max_size=12,
    )
)
def test_pmap_behaves_like_a_dict_and_never_changes_older_maps(steps: list[list[tuple[object, int | None]]]) -> None:
    from raftmeta.controller.pmap import DELETED

    current: PMap[object, int] = PMap()
    model: dict[object, int] = {}
    history: list[tuple[PMap[object, int], dict[object, int]]] = []
    for step in steps:
        changes = {key: (DELETED if value is None else value) for key, value in step}
        current = current.evolve(changes)
        for key, value in changes.items():
            if value is DELETED:
                model.pop(key, None)
            else:
                model[key] = value
        history.append((current, dict(model)))
    for snapshot, expected in history:
        assert len(snapshot) == len(expected)
        assert snapshot == expected
        assert dict(snapshot.iter_items()) == expected
        for key, value in expected.items():
            assert key in snapshot and snapshot[key] == value
    assert PMap(model) == model


def test_pmap_layers_merge_and_fold_without_changing_older_maps() -> None:
    """Enough single-key updates (and deletions of base keys) to fill the top layer many times,
    merge it into the middle layer and fold that into new bases; every version stays intact."""
    from raftmeta.controller.pmap import DELETED

    current: PMap[int, int] = PMap({k: -k for k in range(3000)})
    model = {k: -k for k in range(3000)}
    versions: list[tuple[PMap[int, int], dict[int, int]]] = []
    for step in range(6000):
        key = (step * 7919) % 4500  # revisits keys: updates, deletions and re-insertions
        if step % 5 == 0:
            current = current.evolve({key: DELETED})
            model.pop(key, None)
        else:
            current = current.evolve({key: step})
            model[key] = step
        if step % 250 == 0:
            versions.append((current, dict(model)))
    versions.append((current, dict(model)))
    for version, expected in versions:
        assert len(version) == len(expected)
        assert dict(version.iter_items()) == expected
        assert all(version.get(k, "missing") == expected.get(k, "missing") for k in range(4500))
        assert all((k in version) == (k in expected) for k in range(4500))


# ---- generated record streams ----------------------------------------------------------------
OPS = st.lists(
    st.tuples(
        st.sampled_from(["register", "beat", "fence", "create", "grow", "delete", "elect", "config", "request"]),
        st.integers(0, 5),
        st.integers(1, 4),
        st.booleans(),
    ),
    min_size=1,
    max_size=40,
)


def stream_from(ops: list[tuple[str, int, int, bool]]) -> list[records_pb2.MetadataRecord]:
    """Drive the handlers with ``ops``; every record they write is a valid continuation."""
    ctx = Context()
    ctx.image = MetadataImage.empty(request_table_capacity=4)
    requests = 0
    for op, a, b, flag in ops:
        broker = a % 4 + 1
        if op == "register":
            if broker not in ctx.image.brokers or ctx.image.brokers[broker].fenced:
                ctx.register(broker, rack=f"r{broker % 2}", generation=b)
        elif op == "beat" and broker in ctx.image.brokers:
            ctx.heartbeat(broker, want_fence=flag and b == 4)
        elif op == "fence" and broker in ctx.image.brokers and not ctx.image.brokers[broker].fenced:
            ctx.fence(broker)
        elif op == "create":
            configs = {"unclean.leader.election.enable": "true"} if flag else {}
            ctx.create(
                controller_pb2.CreatableTopic(
                    name=f"t{a}", num_partitions=b, replication_factor=min(b, 3), configs=configs
                )
            )
        elif op == "grow":
            ctx.run(
                create_partitions,
                controller_pb2.CreatePartitionsRequest(
                    topics=[controller_pb2.CreatePartitionsTopic(name=f"t{a}", count=b + 2)]
                ),
            )
        elif op == "delete":
            ctx.run(delete_topics, controller_pb2.DeleteTopicsRequest(topic_names=[f"t{a}"]))
        elif op == "elect":
            kind = controller_pb2.ELECTION_TYPE_UNCLEAN if flag else controller_pb2.ELECTION_TYPE_PREFERRED
            ctx.run(elect_leaders, controller_pb2.ElectLeadersRequest(election_type=kind))
        elif op == "config":
            value = "true" if flag else None
            ctx.replay(
                [
                    rec(
                        config=records_pb2.ConfigRecord(
                            resource_type=records_pb2.CONFIG_RESOURCE_TYPE_BROKER,
                            name="unclean.leader.election.enable",
                            value=value,
                        )
                    )
                ]
            )
        elif op == "request":
            requests += 1
            ctx.replay(
                [
                    rec(
                        request=records_pb2.RequestRecord(
                            request_id=f"req-{requests}", method="CreateTopics", response=bytes([a])
                        )
                    )
                ]
            )
    return ctx.log


def check_invariants(image: MetadataImage) -> None:
    """DESIGN.md §9 invariant 7, and the derived counters."""
    replicas: dict[int, int] = {}
    leaders: dict[int, int] = {}
    count = 0
    for topic in image.topics.values():
        assert image.topic_ids[topic.name] == topic.topic_id
        for part in topic.partitions:
            count += 1
            assert len(set(part.replicas)) == len(part.replicas)
            assert set(part.isr) <= set(part.replicas)
            assert part.leader == NO_LEADER or part.leader in part.isr
            for broker in part.replicas:
                replicas[broker] = replicas.get(broker, 0) + 1
            if part.leader != NO_LEADER:
                leaders[part.leader] = leaders.get(part.leader, 0) + 1
    assert count == image.partition_count
    assert image.replica_counts == replicas
    assert image.leader_counts == leaders
    assert len(image.requests) <= image.requests.capacity


@settings(max_examples=40, deadline=None)
@given(ops=OPS, data=st.data())
def test_any_prefix_then_the_rest_equals_the_whole(ops: list[tuple[str, int, int, bool]], data: st.DataObject) -> None:
    records = stream_from(ops)
    empty = MetadataImage.empty(request_table_capacity=4)
    whole = empty.replay_all(records)
    check_invariants(whole)
    split = data.draw(st.integers(0, len(records)), label="split")
    assert empty.replay_all(records[:split]).replay_all(records[split:]) == whole
    one_by_one = empty
    for record in records:
        one_by_one = one_by_one.replay(record)
    assert one_by_one == whole
    # A snapshot taken at the split point, then the rest of the log, gives the same image too.
    snap = image_to_records(empty.replay_all(records[:split]))
    assert image_from_records(snap, request_table_capacity=4).replay_all(records[split:]) == whole
    assert image_from_records(image_to_records(whole), request_table_capacity=4) == whole


def test_builder_is_the_same_code_as_image_replay() -> None:
    records = stream_from([("register", 0, 1, False), ("beat", 0, 1, False), ("create", 1, 3, False)])
    builder = ImageBuilder(MetadataImage.empty(request_table_capacity=4))
    for record in records:
        builder.replay(record)
    assert builder.build() == MetadataImage.empty(request_table_capacity=4).replay_all(records)


def test_builder_is_single_use_because_the_image_shares_its_dicts() -> None:
    builder = ImageBuilder(MetadataImage.empty())
    builder.replay_all(BASE)
    image = builder.build()
    with pytest.raises(RuntimeError, match="single use"):
        builder.replay(rec(no_op=records_pb2.NoOpRecord()))
    with pytest.raises(RuntimeError, match="already called"):
        builder.build()
    assert image.partition_count == 1


def test_a_failed_builder_can_never_build() -> None:
    builder = ImageBuilder(MetadataImage.empty())
    with pytest.raises(ReplayError):
        builder.replay_all([*BASE, part_rec(T1, 7, [1])])
    with pytest.raises(RuntimeError, match="a replay failed"):
        builder.build()
    with pytest.raises(RuntimeError, match="single use"):
        builder.replay(BASE[0])


@settings(max_examples=100, deadline=None)
@given(
    orders=st.lists(
        st.tuples(st.permutations(range(6)).map(lambda p: tuple(p[:3])), st.sampled_from([0, 1, 2, -1])),
        min_size=1,
        max_size=80,
    ),
    count=st.integers(17, 300),
    shared=st.booleans(),
)
def test_a_topics_load_is_counted_the_same_however_its_states_are_shared(
    orders: list[tuple[tuple[int, ...], int]], count: int, shared: bool
) -> None:
    """The load counters of a topic's partitions (delta._tally): counted per distinct state when
    the partitions share a few state objects, one by one when they share none -- the same counts
    as a plain loop over the partitions either way."""

    def state(replicas: tuple[int, ...], pick: int) -> PartitionRegistration:
        leader = NO_LEADER if pick < 0 else replicas[pick]
        return PartitionRegistration(replicas, replicas, leader, 0, 0, (), ())

    made = [state(*orders[i % len(orders)]) for i in range(len(orders))]
    partitions = [made[i % len(made)] if shared else state(*orders[i % len(orders)]) for i in range(count)]
    counts, leaders = {7: 1}, {7: 1}  # what the image counted before
    _tally(partitions, counts, leaders)
    expected_counts, expected_leaders = {7: 1}, {7: 1}
    for part in partitions:
        for broker in part.replicas:
            expected_counts[broker] = expected_counts.get(broker, 0) + 1
        if part.leader != NO_LEADER:
            expected_leaders[part.leader] = expected_leaders.get(part.leader, 0) + 1
    assert (counts, leaders) == (expected_counts, expected_leaders)
