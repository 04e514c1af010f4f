"""Replicas' log directories (KIP-858): registrations, new partitions, changes, replay, snapshots
and AssignReplicasToDirs, against the cases of Kafka's own tests (ReplicationControlManagerTest,
PartitionChangeBuilderTest, ClusterControlManagerTest) taken as golden data."""

from __future__ import annotations

import functools
import re
from typing import Any

import pytest

from raftmeta.api.ids import uuid_from_str
from raftmeta.controller.assign_dirs import assign_replicas_to_dirs
from raftmeta.controller.brokers import register_broker
from raftmeta.controller.delta import ImageBuilder
from raftmeta.controller.directories import LOST, MIGRATING, UNASSIGNED, default_dir
from raftmeta.controller.errors import ReplayError
from raftmeta.controller.image import MetadataImage, PartitionRegistration
from raftmeta.controller.partition_change import PartitionChangeBuilder
from raftmeta.controller.reassign import alter_partition_reassignments
from raftmeta.controller.snapshot import image_from_records, image_to_records
from raftmeta.records import codec
from raftmeta.records.decode import LazyRecords, decode_records, record_bytes
from raftmeta.records.kafka.mapping import from_kafka_value_bytes, to_kafka_value
from raftmeta.v1 import controller_pb2, errors_pb2, records_pb2
from tests.controller.helpers import Context, incarnation

U = uuid_from_str
FOO_ID = U("FbrrdcfiR-KC2CPSTHaJrg")


def register(ctx: Context, broker_id: int, dirs: list[bytes]) -> Any:
    return ctx.run(
        register_broker,
        controller_pb2.RegisterBrokerRequest(broker_id=broker_id, incarnation_id=incarnation(broker_id), log_dirs=dirs),
    )


def brokers_with_dirs(ctx: Context, dirs: dict[int, list[bytes]]) -> None:
    """Kafka's ``registerBrokersWithDirs`` then ``unfenceBrokers``."""
    for broker_id, broker_dirs in dirs.items():
        assert register(ctx, broker_id, broker_dirs).response.error_code == errors_pb2.NONE
        ctx.heartbeat(broker_id)


def create_manual(ctx: Context, name: str, assignment: list[list[int]]) -> bytes:
    result = ctx.create(
        controller_pb2.CreatableTopic(
            name=name,
            assignments=[
                controller_pb2.ReplicaAssignment(partition_index=i, broker_ids=brokers)
                for i, brokers in enumerate(assignment)
            ],
        )
    )
    (topic,) = result.response.topics
    assert topic.error_code == errors_pb2.NONE, topic.error_message
    return bytes(topic.topic_id)


def assign_request(ctx: Context, broker_id: int, assignment: dict[tuple[bytes, int], bytes]) -> Any:
    """Kafka's ``AssignmentsHelper.buildRequestData``: grouped by directory, then topic."""
    request = controller_pb2.AssignReplicasToDirsRequest(
        broker_id=broker_id, broker_epoch=ctx.image.brokers[broker_id].epoch
    )
    by_dir: dict[bytes, dict[bytes, list[int]]] = {}
    for (topic_id, pid), directory in assignment.items():
        by_dir.setdefault(directory, {}).setdefault(topic_id, []).append(pid)
    for directory, topics in by_dir.items():
        item = request.directories.add(id=directory)
        for topic_id, pids in topics.items():
            item.topics.add(topic_id=topic_id, partitions=pids)
    return request


def answers(response: controller_pb2.AssignReplicasToDirsResponse) -> dict[bytes, dict[tuple[bytes, int], str]]:
    return {
        bytes(d.id): {
            (bytes(t.topic_id), p.partition_index): errors_pb2.ErrorCode.Name(p.error_code)
            for t in d.topics
            for p in t.partitions
        }
        for d in response.directories
    }


def change_fields(records: Any) -> list[tuple[Any, ...]]:
    """What Kafka's PartitionChangeRecords say (raftmeta's epochs aside), sorted as Kafka's test
    sorts them (by topic and partition, the order within a partition kept)."""
    out = []
    for record in records:
        c = record.partition_change
        out.append(
            (
                bytes(c.topic_id),
                c.partition_id,
                c.leader if c.HasField("leader") else None,
                tuple(c.isr.ids) if c.HasField("isr") else None,
                tuple(c.replicas.ids) if c.HasField("replicas") else None,
                tuple(c.directories.ids) if c.HasField("directories") else None,
            )
        )
    return sorted(out, key=lambda f: (f[0], f[1]))


def test_handle_assign_replicas_to_dirs_is_kafkas() -> None:
    """ReplicationControlManagerTest.testHandleAssignReplicasToDirs, its data and its answers."""
    ctx = Context()
    dir1b1, dir2b1, dir1b2 = U("hO2YI5bgRUmByNPHiHxjNQ"), U("R3Gb1HLoTzuKMgAkH5Vtpw"), U("TBGa8UayQi6KguqF5nC0sw")
    offline_dir = U("zvAf9BKZRyyrEWz4FX2nLA")
    brokers_with_dirs(ctx, {1: [dir1b1, dir2b1], 2: [dir1b2]})
    topic_a = create_manual(ctx, "a", [[1, 2], [1, 2], [1, 2]])
    topic_b = create_manual(ctx, "b", [[1, 2], [1, 2]])
    topic_c = create_manual(ctx, "c", [[2]])
    unknown = U("nLU9hKNXSZuMe5PO2A4dVQ")
    request = assign_request(
        ctx,
        1,
        {
            (topic_a, 0): dir1b1,
            (topic_a, 1): dir2b1,
            (topic_a, 2): offline_dir,  # unknown/offline dir
            (topic_b, 0): dir1b1,
            (topic_b, 1): LOST,
            (unknown, 1): dir2b1,  # expect UNKNOWN_TOPIC_ID
            (topic_a, 137): dir1b1,  # expect UNKNOWN_TOPIC_OR_PARTITION
            (topic_c, 0): dir1b1,  # expect NOT_LEADER_OR_FOLLOWER
        },
    )
    result = ctx.call(assign_replicas_to_dirs, request)
    assert result.response.error_code == errors_pb2.NONE
    assert answers(result.response) == {
        dir1b1: {
            (topic_a, 0): "NONE",
            (topic_a, 137): "UNKNOWN_TOPIC_OR_PARTITION",
            (topic_b, 0): "NONE",
            (topic_c, 0): "NOT_LEADER_OR_FOLLOWER",
        },
        dir2b1: {(topic_a, 1): "NONE", (unknown, 1): "UNKNOWN_TOPIC_ID"},
        offline_dir: {(topic_a, 2): "NONE"},
        LOST: {(topic_b, 1): "NONE"},
    }
    assert change_fields(result.records) == sorted(
        [
            (topic_a, 0, None, None, None, (dir1b1, dir1b2)),
            (topic_a, 1, None, None, None, (dir2b1, dir1b2)),
            (topic_a, 2, None, None, None, (offline_dir, dir1b2)),
            (topic_b, 0, None, None, None, (dir1b1, dir1b2)),
            (topic_b, 1, None, None, None, (LOST, dir1b2)),
            # a-2 went to a directory that is not online, b-1 to LOST: broker 1 leaves them.
            (topic_a, 2, 2, (2,), None, None),
            (topic_b, 1, 2, (2,), None, None),
        ],
        key=lambda f: (f[0], f[1]),
    )
    ctx.replay(result.records)
    in_isr = {
        broker: {
            (t.topic_id, pid)
            for t in ctx.image.topics_sorted()
            for pid, p in enumerate(t.partitions)
            if broker in p.isr
        }
        for broker in (1, 2)
    }
    assert in_isr == {
        1: {(topic_a, 0), (topic_a, 1), (topic_b, 0)},
        2: {(topic_a, 2), (topic_b, 1), (topic_c, 0), (topic_a, 0), (topic_a, 1), (topic_b, 0)},
    }
    assert ctx.partition("a", 0).directories == (dir1b1, dir1b2)


def test_a_stale_or_unregistered_sender_is_refused_and_nothing_written() -> None:
    ctx = Context()
    dir1 = U("hO2YI5bgRUmByNPHiHxjNQ")
    brokers_with_dirs(ctx, {1: [dir1]})
    topic_a = create_manual(ctx, "a", [[1]])
    request = assign_request(ctx, 1, {(topic_a, 0): dir1})
    request.broker_epoch += 1
    stale = ctx.call(assign_replicas_to_dirs, request)
    assert stale.response.error_code == errors_pb2.STALE_BROKER_EPOCH
    assert not stale.records and not stale.response.directories
    request.broker_id = 9
    unknown = ctx.call(assign_replicas_to_dirs, request)
    assert unknown.response.error_code == errors_pb2.STALE_BROKER_EPOCH
    assert "No broker registration found for broker id 9" in unknown.response.error_message
    assert not unknown.records


def test_a_directory_id_of_the_wrong_size_is_refused_naming_the_field() -> None:
    ctx = Context()
    brokers_with_dirs(ctx, {1: [U("hO2YI5bgRUmByNPHiHxjNQ")]})
    request = controller_pb2.AssignReplicasToDirsRequest(broker_id=1, broker_epoch=ctx.image.brokers[1].epoch)
    request.directories.add(id=b"\x01" * 15)
    result = ctx.call(assign_replicas_to_dirs, request)
    assert result.response.error_code == errors_pb2.INVALID_REQUEST
    assert result.response.error_message.startswith("directories[0].id: a directory id is 16 bytes")
    assert not result.records


def test_an_assignment_already_in_place_writes_nothing() -> None:
    """A broker's AssignmentsManager sends again what it sent before (a retry, a restart)."""
    ctx = Context()
    dir1, dir2 = U("hO2YI5bgRUmByNPHiHxjNQ"), U("R3Gb1HLoTzuKMgAkH5Vtpw")
    brokers_with_dirs(ctx, {1: [dir1, dir2]})
    topic_a = create_manual(ctx, "a", [[1]])
    assert ctx.partition("a", 0).directories == (UNASSIGNED,)
    first = ctx.run(assign_replicas_to_dirs, assign_request(ctx, 1, {(topic_a, 0): dir2}))
    assert len(first.records) == 1 and ctx.partition("a", 0).directories == (dir2,)
    again = ctx.call(assign_replicas_to_dirs, assign_request(ctx, 1, {(topic_a, 0): dir2}))
    assert again.records == () and answers(again.response) == {dir2: {(topic_a, 0): "NONE"}}


def test_a_partition_named_twice_gets_one_record_with_its_last_directory() -> None:
    ctx = Context()
    dir1, dir2 = U("hO2YI5bgRUmByNPHiHxjNQ"), U("R3Gb1HLoTzuKMgAkH5Vtpw")
    brokers_with_dirs(ctx, {1: [dir1, dir2]})
    topic_a = create_manual(ctx, "a", [[1]])
    request = controller_pb2.AssignReplicasToDirsRequest(broker_id=1, broker_epoch=ctx.image.brokers[1].epoch)
    for directory in (dir1, dir2):
        request.directories.add(id=directory).topics.add(topic_id=topic_a, partitions=[0])
    result = ctx.run(assign_replicas_to_dirs, request)
    assert len(result.records) == 1
    assert ctx.partition("a", 0).directories == (dir2,)


# ---- new partitions: Kafka's defaultDir -------------------------------------------------------------


def test_new_replicas_start_in_their_brokers_default_directory() -> None:
    """ClusterControlManager.defaultDir: the only directory, UNASSIGNED with several, MIGRATING with
    none (kept as no directories at all when every replica is MIGRATING)."""
    ctx = Context()
    one, two_a, two_b = U("hO2YI5bgRUmByNPHiHxjNQ"), U("R3Gb1HLoTzuKMgAkH5Vtpw"), U("TBGa8UayQi6KguqF5nC0sw")
    brokers_with_dirs(ctx, {1: [one], 2: [two_a, two_b]})
    ctx.add_brokers([3])  # no directories: a simulated broker
    assert [default_dir(ctx.image, b) for b in (1, 2, 3, 4)] == [one, UNASSIGNED, MIGRATING, UNASSIGNED]
    create_manual(ctx, "t", [[1, 2, 3]])
    create_manual(ctx, "u", [[3], [1]])
    assert ctx.partition("t", 0).directories == (one, UNASSIGNED, MIGRATING)
    assert ctx.partition("u", 0).directories == ()
    assert ctx.partition("u", 1).directories == (one,)
    ctx.create_ok("placed", partitions=4, rf=3)
    for pid in range(4):
        part = ctx.partition("placed", pid)
        assert part.directories == tuple(default_dir(ctx.image, b) for b in part.replicas)


def test_without_directories_records_and_states_stay_as_before() -> None:
    ctx = Context()
    ctx.add_brokers([1, 2, 3])
    ctx.create_ok("t", partitions=3, rf=3)
    assert all(not r.partition.directories for r in ctx.log if r.WhichOneof("record") == "partition")
    assert all(p.directories == () for p in ctx.image.topic_by_name("t").partitions)  # type: ignore[union-attr]


# ---- PartitionChangeBuilder: PartitionChangeBuilderTest's cases ---------------------------------------


def _built(part: PartitionRegistration, builder_steps: Any) -> tuple[Any, ...]:
    builder = PartitionChangeBuilder(part, FOO_ID, 0, lambda b: True, default_dir=lambda b: UNASSIGNED)
    record = builder_steps(builder).build()
    assert record is not None
    return change_fields([record])[0]


def test_keeps_directories_after_reassignment() -> None:
    """PartitionChangeBuilderTest.testKeepsDirectoriesAfterReassignment."""
    d2, d1, d3 = U("v1PVrX6uS5m8CByXlLfmWg"), U("iU2znv45Q9yQkOpkTSy3jA"), U("fM5NKyWTQHqEihjIkUl99Q")
    new5 = U("RNJ5oFjjSSWMMFRwqdCfJg")
    part = PartitionRegistration((2, 1, 3), (2, 1, 3), 1, 100, 200, (), (), (d2, d1, d3))
    fields = _built(part, lambda b: b.set_target_replicas([3, 1, 5, 4]).set_directory(5, new5))
    assert fields == (FOO_ID, 0, 1, None, (3, 1, 5, 4), (d3, d1, new5, UNASSIGNED))


def test_update_directories() -> None:
    """PartitionChangeBuilderTest.testUpdateDirectories: only the directories change."""
    d2, d1, d3 = U("S1zMYZczRjWmucidLqGA5g"), U("9eRNXTvFTsWUJObvW51V5A"), U("UpePYVBgRAi3c4ujQrf3Kg")
    part = PartitionRegistration((2, 1, 3), (2, 1, 3), 2, 100, 200, (), (), (d2, d1, d3))
    fields = _built(part, lambda b: b.set_directory(3, U("pN1VKs9zRzK4APflpegAVg")).set_directory(1, LOST))
    assert fields == (FOO_ID, 0, None, None, None, (d2, LOST, U("pN1VKs9zRzK4APflpegAVg")))


def test_reassignment_rearranges_directories_with_replicas() -> None:
    """PartitionChangeBuilderTest.testReassignmentRearrangesReplicas (FOO) and
    testAddingReplicaReassignment: kept replicas keep their directories, a new one gets the default."""
    foo_dirs = (U("dpdvA5AZSWySmnPFTnu5Kw"), U("V60B3cglScq3Xk8BX1NxAQ"), UNASSIGNED)
    foo = PartitionRegistration((2, 1, 3), (2, 1, 3), 1, 100, 200, (), (), foo_dirs)
    by_broker = dict(zip(foo.replicas, foo_dirs, strict=True))
    assert _built(foo, lambda b: b.set_target_replicas([3, 2, 1])) == (
        FOO_ID, 0, None, None, (3, 2, 1), (by_broker[3], by_broker[2], by_broker[1]),
    )  # fmt: skip
    adding = _built(foo, lambda b: b.set_target_replicas([1, 2, 3, 4]).set_target_adding([4]))
    assert adding[4:] == ((1, 2, 3, 4), (by_broker[1], by_broker[2], by_broker[3], UNASSIGNED))


def test_a_reassignment_puts_a_new_replica_in_its_brokers_directory() -> None:
    ctx = Context()
    d1, d2, d3, d4 = (U(s) for s in ("hO2YI5bgRUmByNPHiHxjNQ", "R3Gb1HLoTzuKMgAkH5Vtpw", "TBGa8UayQi6KguqF5nC0sw",
                                      "zvAf9BKZRyyrEWz4FX2nLA"))  # fmt: skip
    brokers_with_dirs(ctx, {1: [d1], 2: [d2], 3: [d3], 4: [d4]})
    create_manual(ctx, "t", [[1, 2, 3]])
    request = controller_pb2.AlterPartitionReassignmentsRequest()
    request.topics.add(name="t").partitions.add(partition_index=0, replicas=[4, 2, 3])
    result = ctx.run(alter_partition_reassignments, request)
    assert result.response.results[0].partitions[0].error_code == errors_pb2.NONE
    part = ctx.partition("t", 0)
    assert dict(zip(part.replicas, part.directories, strict=True)) == {1: d1, 2: d2, 3: d3, 4: d4}


def test_a_builder_adding_a_replica_without_a_default_directory_fails_loudly() -> None:
    part = PartitionRegistration((1,), (1,), 1, 0, 0, (), (), (U("hO2YI5bgRUmByNPHiHxjNQ"),))
    builder = PartitionChangeBuilder(part, FOO_ID, 0, lambda b: True).set_target_replicas([1, 2])
    with pytest.raises(RuntimeError, match="replica 2 is new to the partition"):
        builder.build()


# ---- registrations: ClusterControlManager.registerBroker's checks -----------------------------------


@pytest.mark.parametrize(
    ("dirs", "message"),
    [
        ([LOST], "Reserved directory ID in request"),
        ([bytes(15) + b"\x63"], "Reserved directory ID in request"),
        ([U("hO2YI5bgRUmByNPHiHxjNQ")] * 2, "Duplicate directory ID in request"),
        ([U("TBGa8UayQi6KguqF5nC0sw")], "Broker 1 is already registered with directory TBGa8UayQi6KguqF5nC0sw"),
        ([b"\x07" * 15], "log_dirs[0]: a directory id is a 16-byte uuid, got 15 bytes"),
    ],
)
def test_a_registration_with_bad_directories_is_refused(dirs: list[bytes], message: str) -> None:
    ctx = Context()
    brokers_with_dirs(ctx, {1: [U("TBGa8UayQi6KguqF5nC0sw")]})
    result = register(ctx, 2, dirs)
    assert result.response.error_code == errors_pb2.INVALID_REGISTRATION
    assert result.response.error_message == message
    assert result.records == () and 2 not in ctx.image.brokers


def test_a_registration_keeps_its_directories_in_the_record_and_the_image() -> None:
    ctx = Context()
    dirs = [U("hO2YI5bgRUmByNPHiHxjNQ"), U("R3Gb1HLoTzuKMgAkH5Vtpw")]
    result = register(ctx, 1, dirs)
    (record,) = result.records
    assert list(record.register_broker.log_dirs) == dirs
    assert ctx.image.brokers[1].log_dirs == tuple(dirs)
    changed = ctx.call(
        register_broker,
        controller_pb2.RegisterBrokerRequest(broker_id=1, incarnation_id=incarnation(1), log_dirs=dirs[:1]),
    )
    assert changed.response.error_code == errors_pb2.INVALID_REQUEST  # same incarnation, other directories


# ---- replay, Kafka's format and snapshots ------------------------------------------------------------


def _change(**fields: Any) -> records_pb2.MetadataRecord:
    return records_pb2.MetadataRecord(partition_change=records_pb2.PartitionChangeRecord(**fields))


def _one_partition_image(directories: tuple[bytes, ...]) -> MetadataImage:
    return MetadataImage.empty().replay_all(
        [
            records_pb2.MetadataRecord(topic=records_pb2.TopicRecord(name="t", topic_id=FOO_ID)),
            records_pb2.MetadataRecord(
                partition=records_pb2.PartitionRecord(
                    topic_id=FOO_ID, replicas=[1, 2], isr=[1, 2], leader=1, directories=directories
                )
            ),
        ]
    )


def test_replay_keeps_directories_and_reads_all_migrating_as_none() -> None:
    d1, d2 = U("hO2YI5bgRUmByNPHiHxjNQ"), U("R3Gb1HLoTzuKMgAkH5Vtpw")
    assert _one_partition_image((d1, d2)).partition(FOO_ID, 0).directories == (d1, d2)  # type: ignore[union-attr]
    assert _one_partition_image((MIGRATING, MIGRATING)).partition(FOO_ID, 0).directories == ()  # type: ignore[union-attr]
    image = _one_partition_image(())
    directories = records_pb2.DirectoryList(ids=[d2, d1])
    after = image.replay(_change(topic_id=FOO_ID, directories=directories, leader_epoch=0, partition_epoch=1))
    assert after.partition(FOO_ID, 0).directories == (d2, d1)  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("directories", "change", "message"),
    [
        ((U("hO2YI5bgRUmByNPHiHxjNQ"),), None, "1 directories for 2 replicas"),
        ((), {"directories": records_pb2.DirectoryList(ids=[MIGRATING])}, "1 directories for 2 replicas"),
        ((), {"directories": records_pb2.DirectoryList(ids=[b"\x01" * 3] * 2)}, "a directory id is 16 bytes, got 3"),
        (
            (U("hO2YI5bgRUmByNPHiHxjNQ"), U("R3Gb1HLoTzuKMgAkH5Vtpw")),
            {"replicas": records_pb2.BrokerIdList(ids=[1, 2, 3])},
            "replicas [1, 2, 3] changed without directories while the partition keeps 2",
        ),
    ],
)
def test_replay_refuses_directories_that_do_not_fit_the_replicas(
    directories: tuple[bytes, ...], change: dict[str, Any] | None, message: str
) -> None:
    """Kafka's InvalidReplicaDirectoriesException (PartitionRegistration.checkDirectories)."""

    def apply() -> None:
        image = _one_partition_image(directories)
        image.replay(_change(topic_id=FOO_ID, leader_epoch=0, partition_epoch=1, **(change or {})))

    with pytest.raises(ReplayError, match=re.escape(message)):
        apply()


def test_replicas_growing_while_every_directory_is_migrating_stay_migrating() -> None:
    """Kafka's merge: absent directories and all MIGRATING give MIGRATING for the new list too."""
    image = _one_partition_image(())
    after = image.replay(
        _change(topic_id=FOO_ID, replicas=records_pb2.BrokerIdList(ids=[1, 2, 3]), leader_epoch=0, partition_epoch=1)
    )
    assert after.partition(FOO_ID, 0).directories == ()  # type: ignore[union-attr]


def test_directories_survive_kafkas_format_and_a_snapshot() -> None:
    """The log's batches (read back through replay's fast path over the records' bytes and the
    general one over parsed records), Kafka's format and a snapshot rebuild the same image,
    directories and registered log dirs included."""
    ctx = Context()
    d1, d2, d3 = U("hO2YI5bgRUmByNPHiHxjNQ"), U("R3Gb1HLoTzuKMgAkH5Vtpw"), U("TBGa8UayQi6KguqF5nC0sw")
    brokers_with_dirs(ctx, {1: [d1], 2: [d2, d3]})
    topic_a = create_manual(ctx, "a", [[1, 2], [2, 1]])
    ctx.run(assign_replicas_to_dirs, assign_request(ctx, 2, {(topic_a, 0): d3, (topic_a, 1): d2}))
    assert ctx.partition("a", 0).directories == (d1, d3)
    batch = codec.encode_batch(0, 1, [r.SerializeToString() for r in ctx.log], 0)
    replayed = MetadataImage.empty().replay_all(decode_records(batch))
    assert replayed == ctx.image
    # A follower's replay: PartitionRecords read from their bytes (the fast path declines those
    # with directories, the general path reads them).
    assert MetadataImage.empty().replay_all(LazyRecords(record_bytes(batch))) == ctx.image
    # Kafka's format of the same records (what brokers and Kafka's tools read) maps back to them.
    kafka = [from_kafka_value_bytes(*to_kafka_value(r), -1) for r in ctx.log]
    assert MetadataImage.empty().replay_all(LazyRecords(kafka)) == ctx.image
    builder = ImageBuilder(MetadataImage.empty())
    builder.replay_all(image_to_records(ctx.image))
    assert builder.build() == ctx.image
    assert image_from_records(image_to_records(ctx.image)) == ctx.image
    assert replayed.brokers[2].log_dirs == (d2, d3)


def test_default_dir_is_bound_per_image() -> None:
    ctx = Context()
    brokers_with_dirs(ctx, {1: [U("hO2YI5bgRUmByNPHiHxjNQ")]})
    provider = functools.partial(default_dir, ctx.image)
    assert provider(1) == U("hO2YI5bgRUmByNPHiHxjNQ") and provider(2) == UNASSIGNED
