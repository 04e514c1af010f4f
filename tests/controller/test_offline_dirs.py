"""A broker's offline log directories (KIP-858), reported in its BrokerHeartbeat: Kafka's
``ReplicationControlManager.handleDirectoriesOffline`` against the case of Kafka's own
``ReplicationControlManagerTest.testHandleDirectoriesOffline``, taken as golden data, and the
record it writes through replay, Kafka's format and a snapshot."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import pytest

from raftmeta.api.ids import uuid_from_str
from raftmeta.controller.assign_dirs import assign_replicas_to_dirs
from raftmeta.controller.brokers import broker_heartbeat
from raftmeta.controller.directories import UNASSIGNED
from raftmeta.controller.elections import fence_records, offline_dirs_steps
from raftmeta.controller.errors import ReplayError
from raftmeta.controller.image import MetadataImage
from raftmeta.controller.result import ControllerConfig
from raftmeta.controller.snapshot import image_from_records, image_to_records
from raftmeta.controller.work import UNBOUNDED
from raftmeta.records.decode import LazyRecords
from raftmeta.records.kafka.frames import MetadataRecord
from raftmeta.records.kafka.mapping import from_kafka_value_bytes, to_kafka_record, to_kafka_value
from raftmeta.v1 import controller_pb2, errors_pb2, records_pb2
from tests.controller.helpers import Context
from tests.controller.test_directories import assign_request, brokers_with_dirs, change_fields, create_manual
from tests.controller.test_work import run_work

U = uuid_from_str
B1, B2 = 101, 102
DIR1_B1, DIR2_B1 = U("suitdzfTTdqoWcy8VqmkUg"), U("yh3acnzGSeurSTj8aIhOjw")
DIR1_B2, DIR2_B2 = U("OmpmJ8RjQliQlEFht56DwQ"), U("w05baLpsT5Oz0LvKTKXoDw")


def kafkas_cluster(config: ControllerConfig | None = None) -> tuple[Context, bytes, bytes]:
    """testHandleDirectoriesOffline's cluster: two brokers with two directories each, topics a and
    b with two partitions on both, each broker's partition 0 in its first directory and 1 in its
    second."""
    ctx = Context(config)
    brokers_with_dirs(ctx, {B1: [DIR1_B1, DIR2_B1], B2: [DIR1_B2, DIR2_B2]})
    topic_a = create_manual(ctx, "a", [[B1, B2], [B1, B2]])
    topic_b = create_manual(ctx, "b", [[B1, B2], [B1, B2]])
    for broker, (first, second) in ((B1, (DIR1_B1, DIR2_B1)), (B2, (DIR1_B2, DIR2_B2))):
        assignment = {(topic_a, 0): first, (topic_a, 1): second, (topic_b, 0): first, (topic_b, 1): second}
        result = ctx.run(assign_replicas_to_dirs, assign_request(ctx, broker, assignment))
        assert result.response.error_code == errors_pb2.NONE
    return ctx, topic_a, topic_b


def heartbeat(ctx: Context, broker_id: int, offline: list[bytes], **fields: Any) -> Any:
    request = controller_pb2.BrokerHeartbeatRequest(
        broker_id=broker_id, broker_epoch=ctx.image.brokers[broker_id].epoch, offline_log_dirs=offline, **fields
    )
    return ctx.call(broker_heartbeat, request)


def of_kind(records: Any, kind: str) -> list[records_pb2.MetadataRecord]:
    return [r for r in records if r.WhichOneof("record") == kind]


def test_handle_directories_offline_is_kafkas() -> None:
    """Kafka's case: broker 101 reports its first directory offline (and broker 102's, which is
    not its own and changes nothing). Kafka's records: partitions a-0 and b-0 (101's replicas in
    that directory) lead on 102 with ISR [102], then the registration keeps [dir2b1]; three in all."""
    ctx, topic_a, topic_b = kafkas_cluster()
    epoch = ctx.image.brokers[B1].epoch
    before = ctx.partition("a", 0)
    result = heartbeat(ctx, B1, [DIR1_B1, DIR1_B2])
    assert result.response.error_code == errors_pb2.NONE
    assert of_kind(result.records, "broker_log_dirs_change") == [
        records_pb2.MetadataRecord(
            broker_log_dirs_change=records_pb2.BrokerLogDirsChangeRecord(
                broker_id=B1, broker_epoch=epoch, log_dirs=[DIR2_B1]
            )
        )
    ]
    assert change_fields(of_kind(result.records, "partition_change")) == sorted(
        [(topic_a, 0, B2, (B2,), None, None), (topic_b, 0, B2, (B2,), None, None)]
    )
    assert len(result.records) == 3
    # As Kafka's controller writes them: the partitions first, the registration's change last.
    assert result.records[-1].WhichOneof("record") == "broker_log_dirs_change"
    ctx.replay(result.records)
    assert ctx.image.brokers[B1].log_dirs == (DIR2_B1,)
    assert ctx.image.brokers[B1].epoch == epoch and not ctx.image.brokers[B1].fenced
    # Each change is a leader change: both epochs rise.
    after = ctx.partition("a", 0)
    assert (after.leader_epoch, after.partition_epoch) == (before.leader_epoch + 1, before.partition_epoch + 1)
    # The partitions in the directory still online keep their leader and ISR.
    assert (ctx.partition("a", 1).leader, ctx.partition("a", 1).isr) == (B1, (B1, B2))


def test_a_directory_reported_again_or_never_registered_writes_nothing() -> None:
    """A broker repeats its offline directories in every heartbeat: once a directory has left its
    registration (Kafka's ``directoryIntersection`` is empty) nothing more is written; neither is
    anything for directories it never registered (another broker's, a reserved id)."""
    ctx, _, _ = kafkas_cluster()
    ctx.replay(heartbeat(ctx, B1, [DIR1_B1]).records)
    for offline in ([DIR1_B1], [DIR1_B2, DIR2_B2], [bytes(16), bytes(15) + b"\x02"]):
        result = heartbeat(ctx, B1, offline)
        assert (result.response.error_code, result.records) == (errors_pb2.NONE, ())
        assert not result.response.is_fenced


def test_a_malformed_directory_id_is_refused_naming_it_and_nothing_written() -> None:
    ctx, _, _ = kafkas_cluster()
    result = heartbeat(ctx, B1, [DIR1_B1, b"\x01" * 15])
    assert result.response.error_code == errors_pb2.INVALID_REQUEST
    assert result.response.error_message == "offline_log_dirs[1]: a directory id is a 16-byte uuid, got 15 bytes"
    assert result.records == ()


def test_a_stale_epoch_is_refused_before_the_directories_are_looked_at() -> None:
    ctx, _, _ = kafkas_cluster()
    request = controller_pb2.BrokerHeartbeatRequest(broker_id=B1, broker_epoch=999, offline_log_dirs=[DIR1_B1])
    result = ctx.call(broker_heartbeat, request)
    assert (result.response.error_code, result.records) == (errors_pb2.STALE_BROKER_EPOCH, ())


def test_a_controlled_shutdown_with_an_offline_directory_fences_then_drops_it() -> None:
    """Kafka's ``processBrokerHeartbeat``: the state change's records (here the controlled
    shutdown's), then the offline directories'."""
    ctx, _, _ = kafkas_cluster()
    result = heartbeat(ctx, B1, [DIR2_B1], want_shutdown_now=True)
    kinds = [r.WhichOneof("record") for r in result.records]
    assert kinds[-2:] == ["fence_broker", "broker_log_dirs_change"]
    ctx.replay(result.records)
    assert ctx.image.brokers[B1].fenced and ctx.image.brokers[B1].log_dirs == (DIR1_B1,)
    assert all(ctx.partition(t, p).leader == B2 for t in "ab" for p in (0, 1))


def test_the_steps_return_the_image_their_turn_began_with_before_its_records() -> None:
    """The work contract (work.py): after a fence's records in the same turn, the returned image
    is the one before them, so the heartbeat's caller replays each record once."""
    ctx, _, _ = kafkas_cluster()
    fenced = fence_records(ctx.image, B2, False)
    steps = offline_dirs_steps(ctx.image, B1, [DIR1_B1], False, UNBOUNDED, list(fenced))
    with pytest.raises(StopIteration) as done:
        next(steps)
    image, records = done.value.value
    assert image is ctx.image and records[: len(fenced)] == fenced
    after = image.replay_all(records)
    # Broker 102 fenced, 101's first directory offline: a-0 and b-0 have no leader left in sync.
    assert (after.partition(ctx.image.topic_by_name("a").topic_id, 0).leader, after.brokers[B1].log_dirs) == (  # type: ignore[union-attr]
        -1,
        (DIR2_B1,),
    )


@pytest.mark.parametrize(("scan", "changes"), [(1, 1), (2, 1), (3, 2), (100, 1)])
@pytest.mark.parametrize("shutdown", [False, True], ids=["heartbeat", "controlled-shutdown"])
def test_in_turns_the_heartbeat_writes_the_one_step_records(scan: int, changes: int, shutdown: bool) -> None:
    """On a big image the pass runs over several turns (work.py), each sent the image after the
    last, and writes what one turn writes, in order."""
    ctx, _, _ = kafkas_cluster()
    request = controller_pb2.BrokerHeartbeatRequest(
        broker_id=B1,
        broker_epoch=ctx.image.brokers[B1].epoch,
        offline_log_dirs=[DIR1_B1],
        want_shutdown_now=shutdown,
    )
    one_step = ctx.call(broker_heartbeat, request)
    assert one_step.more is None
    small = replace(ctx.config, scan_partitions_per_turn_max=scan, partition_changes_per_batch_max=changes)
    result = broker_heartbeat(ctx.image, request, ctx.now_ms, ctx.ids, ctx.random, small)
    split, response = run_work(result, ctx.image)
    assert len(split) > 1
    assert [r for turn in split for r in turn] == list(one_step.records)
    assert response == one_step.response


def test_every_directory_offline_keeps_the_registration_as_kafka_replays_it() -> None:
    """Kafka writes the remaining directories, none here, and replays an empty LogDirs as
    "unchanged": the registration keeps its list, and every partition moved off the broker."""
    ctx, _, _ = kafkas_cluster()
    result = heartbeat(ctx, B1, [DIR1_B1, DIR2_B1])
    (change,) = of_kind(result.records, "broker_log_dirs_change")
    assert list(change.broker_log_dirs_change.log_dirs) == []
    ctx.replay(result.records)
    assert ctx.image.brokers[B1].log_dirs == (DIR1_B1, DIR2_B1)
    assert all(ctx.partition(t, p).isr == (B2,) for t in "ab" for p in (0, 1))


def test_a_new_replica_on_the_broker_goes_to_its_remaining_directory() -> None:
    """Kafka's ``defaultDir`` after the change: the broker's only directory left."""
    ctx, _, _ = kafkas_cluster()
    ctx.replay(heartbeat(ctx, B1, [DIR1_B1]).records)
    create_manual(ctx, "c", [[B1, B2]])
    # Broker 102 still has two: its new replica waits for its AssignReplicasToDirs.
    assert ctx.partition("c", 0).directories == (DIR2_B1, UNASSIGNED)


def test_the_change_survives_kafkas_format_and_a_snapshot() -> None:
    ctx, _, _ = kafkas_cluster()
    records = heartbeat(ctx, B1, [DIR1_B1]).records
    ctx.replay(records)
    (change,) = of_kind(records, "broker_log_dirs_change")
    kafka = to_kafka_record(change)
    assert isinstance(kafka, MetadataRecord)
    assert (kafka.name, kafka.version) == ("BrokerRegistrationChangeRecord", 2)
    assert from_kafka_value_bytes(*to_kafka_value(change), -1) == change.SerializeToString()
    mapped = [from_kafka_value_bytes(*to_kafka_value(r), -1) for r in ctx.log]
    assert MetadataImage.empty().replay_all(LazyRecords(mapped)) == ctx.image
    assert image_from_records(image_to_records(ctx.image)) == ctx.image


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            records_pb2.BrokerLogDirsChangeRecord(broker_id=7, broker_epoch=1, log_dirs=[DIR1_B1]),
            "BrokerLogDirsChangeRecord: no broker registration found for broker id 7",
        ),
        (
            records_pb2.BrokerLogDirsChangeRecord(broker_id=B1, broker_epoch=999, log_dirs=[DIR1_B1]),
            f"BrokerLogDirsChangeRecord: broker {B1} is registered with epoch 1, not 999",
        ),
        (
            records_pb2.BrokerLogDirsChangeRecord(broker_id=B1, broker_epoch=1, log_dirs=[b"\x05" * 3]),
            f"BrokerLogDirsChangeRecord {B1}: log_dirs[0] is 3 bytes, not a 16-byte uuid",
        ),
    ],
)
def test_replay_refuses_a_change_it_cannot_apply(change: records_pb2.BrokerLogDirsChangeRecord, message: str) -> None:
    ctx, _, _ = kafkas_cluster()
    assert ctx.image.brokers[B1].epoch == 1
    with pytest.raises(ReplayError, match=f"^{re.escape(message)}$"):
        ctx.image.replay(records_pb2.MetadataRecord(broker_log_dirs_change=change))


def test_a_replica_in_a_failed_directory_never_leads_not_even_uncleanly() -> None:
    """Kafka's ``LeaderAcceptor``: a leader's replica must be in one of its broker's online
    directories. a-0's replica on 101 is in the failed directory: with 102 fenced, an unclean
    election has no one to pick (101 is unfenced but its copy is gone); a-1's, in the directory
    still online, is picked."""
    ctx, _, _ = kafkas_cluster(ControllerConfig(unclean_leader_election_enable=True))
    ctx.replay(heartbeat(ctx, B1, [DIR1_B1]).records)
    # a-1 led by 102 first, so that fencing 102 needs an unclean election there too.
    ctx.replay(heartbeat(ctx, B1, [], want_fence=True).records)
    ctx.heartbeat(B1)
    assert (ctx.partition("a", 0).isr, ctx.partition("a", 1).isr) == ((B2,), (B2,))
    ctx.fence(B2)
    assert (ctx.partition("a", 0).leader, ctx.partition("a", 1).leader) == (-1, B1)
    assert ctx.partition("a", 1).isr == (B1,)
