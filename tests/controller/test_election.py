"""Partition leader election (PartitionChangeBuilder) and seed 002: leader election on broker failure."""

from __future__ import annotations

from raftmeta.controller import NO_LEADER, ControllerConfig, Election, PartitionChangeBuilder, PartitionRegistration
from raftmeta.controller.elections import unfence_records
from raftmeta.v1 import controller_pb2, records_pb2
from tests.controller.helpers import Context

TID = b"\x01" * 16


def part(
    replicas: tuple[int, ...], isr: tuple[int, ...], leader: int, epochs: tuple[int, int] = (0, 0)
) -> PartitionRegistration:
    return PartitionRegistration(replicas, isr, leader, epochs[0], epochs[1])


def change(record: records_pb2.MetadataRecord | None) -> records_pb2.PartitionChangeRecord:
    assert record is not None
    return record.partition_change


def test_nothing_changes_nothing_written() -> None:
    builder = PartitionChangeBuilder(part((1, 2, 3), (1, 2, 3), 1), TID, 0, lambda b: True)
    assert builder.build() is None
    assert builder.set_target_isr([1, 2, 3]).build() is None


def test_isr_shrink_keeps_a_live_leader_and_bumps_only_the_partition_epoch() -> None:
    rec = change(
        PartitionChangeBuilder(part((1, 2, 3), (1, 2, 3), 1, (4, 7)), TID, 0, lambda b: b != 3)
        .set_target_isr([1, 2])
        .build()
    )
    assert not rec.HasField("leader")
    assert list(rec.isr.ids) == [1, 2]
    assert (rec.leader_epoch, rec.partition_epoch) == (4, 8)


def test_leader_moves_to_first_live_isr_member_in_replica_order() -> None:
    # ISR order is (3, 2, 1) but replica order decides: 2 comes before 3.
    p = part((1, 2, 3), (3, 2, 1), 1, (2, 5))
    rec = change(PartitionChangeBuilder(p, TID, 0, lambda b: b != 1).set_target_isr([3, 2]).build())
    assert rec.leader == 2
    assert (rec.leader_epoch, rec.partition_epoch) == (3, 6)
    assert not rec.unclean_election


def test_no_live_isr_member_leaves_no_leader_and_keeps_the_last_isr_member() -> None:
    rec = change(PartitionChangeBuilder(part((1, 2), (2,), 2), TID, 0, lambda b: b == 1).set_target_isr([]).build())
    assert rec.leader == NO_LEADER
    assert not rec.HasField("isr"), "an empty ISR is never written: the last member is kept"
    assert (rec.leader_epoch, rec.partition_epoch) == (1, 1)


def test_unclean_election_picks_first_live_replica_and_flags_data_loss() -> None:
    p = part((1, 2, 3), (3,), NO_LEADER, (5, 9))
    rec = change(PartitionChangeBuilder(p, TID, 0, lambda b: b in (2, 1), election=Election.UNCLEAN).build())
    assert rec.leader == 1
    assert list(rec.isr.ids) == [1]
    assert rec.unclean_election
    assert (rec.leader_epoch, rec.partition_epoch) == (6, 10)


def test_unclean_prefers_a_clean_leader_when_one_exists() -> None:
    p = part((1, 2, 3), (2, 3), NO_LEADER)
    rec = change(PartitionChangeBuilder(p, TID, 0, lambda b: b != 2, election=Election.UNCLEAN).build())
    assert rec.leader == 3
    assert not rec.unclean_election


def test_unclean_with_no_live_replica_stays_leaderless() -> None:
    p = part((1, 2), (2,), 2)
    rec = change(
        PartitionChangeBuilder(p, TID, 0, lambda b: False, election=Election.UNCLEAN).set_target_isr([]).build()
    )
    assert rec.leader == NO_LEADER
    assert not rec.unclean_election


def test_preferred_election() -> None:
    p = part((1, 2, 3), (1, 2, 3), 2, (3, 3))
    rec = change(PartitionChangeBuilder(p, TID, 0, lambda b: True, election=Election.PREFERRED).build())
    assert rec.leader == 1
    assert (rec.leader_epoch, rec.partition_epoch) == (4, 4)
    # The preferred replica is fenced: a valid current leader stays, nothing is written.
    assert PartitionChangeBuilder(p, TID, 0, lambda b: b != 1, election=Election.PREFERRED).build() is None
    # Out of the ISR: not eligible either.
    out = part((1, 2, 3), (2, 3), 2)
    assert PartitionChangeBuilder(out, TID, 0, lambda b: True, election=Election.PREFERRED).build() is None


def test_online_election_keeps_a_valid_non_preferred_leader() -> None:
    p = part((1, 2, 3), (1, 2, 3), 3)
    assert PartitionChangeBuilder(p, TID, 0, lambda b: True).build() is None


# ---- through the handlers -----------------------------------------------------------------------
def test_fencing_moves_leadership_and_shrinks_isr_everywhere() -> None:
    ctx = Context()
    ctx.add_brokers([1, 2, 3])
    ctx.create_ok("t", 6, 3)
    before = ctx.image.topic_by_name("t")
    assert before is not None
    records = ctx.fence(2)
    assert records[-1].WhichOneof("record") == "fence_broker"
    assert all(r.WhichOneof("record") == "partition_change" for r in records[:-1])
    after = ctx.image.topic_by_name("t")
    assert after is not None
    for old, new in zip(before.partitions, after.partitions, strict=True):
        assert 2 not in new.isr
        assert new.leader != 2
        if old.leader == 2:
            assert new.leader == next(b for b in old.replicas if b != 2)
            assert new.leader_epoch == old.leader_epoch + 1
        else:
            assert new.leader == old.leader
            assert new.leader_epoch == old.leader_epoch
        assert new.partition_epoch == old.partition_epoch + 1
    assert ctx.image.brokers[2].fenced


def test_seed_002_experiment() -> None:
    """Seed 002's experiment: two 1-replica partitions on brokers 1 and 2 (5 brokers).

    Broker 2 dies: partition 1 has leader -1 and keeps its ISR; partition 0 is untouched.
    Broker 1 dies: both partitions are leaderless. Both return: the leaders are back."""
    ctx = Context()
    ctx.add_brokers([1, 2, 3, 4, 5])
    ctx.create(
        controller_pb2.CreatableTopic(
            name="testSource",
            assignments=[
                controller_pb2.ReplicaAssignment(partition_index=0, broker_ids=[1]),
                controller_pb2.ReplicaAssignment(partition_index=1, broker_ids=[2]),
            ],
        )
    )
    assert ctx.partition("testSource", 0)[:3] == ((1,), (1,), 1)
    assert ctx.partition("testSource", 1)[:3] == ((2,), (2,), 2)

    ctx.fence(2)
    assert ctx.partition("testSource", 0)[:3] == ((1,), (1,), 1)
    assert ctx.partition("testSource", 1)[:3] == ((2,), (2,), NO_LEADER)

    ctx.fence(1)
    assert ctx.partition("testSource", 0)[:3] == ((1,), (1,), NO_LEADER)
    assert ctx.partition("testSource", 1)[:3] == ((2,), (2,), NO_LEADER)

    ctx.heartbeat(1)
    ctx.heartbeat(2)
    assert ctx.partition("testSource", 0)[:5] == ((1,), (1,), 1, 2, 2)
    assert ctx.partition("testSource", 1)[:5] == ((2,), (2,), 2, 2, 2)


def _three_replica_topic(ctx: Context, configs: dict[str, str] | None = None) -> None:
    ctx.add_brokers([1, 2, 3])
    ctx.create(
        controller_pb2.CreatableTopic(
            name="t",
            configs=configs or {},
            assignments=[controller_pb2.ReplicaAssignment(partition_index=0, broker_ids=[1, 2, 3])],
        )
    )


def test_clean_election_waits_for_the_last_isr_member() -> None:
    ctx = Context()
    _three_replica_topic(ctx)
    ctx.fence(1)
    assert ctx.partition("t", 0)[:3] == ((1, 2, 3), (2, 3), 2)
    ctx.fence(2)
    assert ctx.partition("t", 0)[:3] == ((1, 2, 3), (3,), 3)
    ctx.fence(3)
    assert ctx.partition("t", 0)[:3] == ((1, 2, 3), (3,), NO_LEADER)
    # Broker 1 returns, but it is not in the ISR: still no leader (unclean election is off).
    result = ctx.heartbeat(1)
    assert [r.WhichOneof("record") for r in result.records] == ["unfence_broker"]
    assert ctx.partition("t", 0)[2] == NO_LEADER
    ctx.heartbeat(3)
    assert ctx.partition("t", 0)[:3] == ((1, 2, 3), (3,), 3)


def test_unclean_election_enabled_on_the_topic() -> None:
    ctx = Context()
    _three_replica_topic(ctx, {"unclean.leader.election.enable": "true"})
    ctx.fence(1)
    ctx.fence(2)
    ctx.fence(3)
    assert ctx.partition("t", 0)[:3] == ((1, 2, 3), (3,), NO_LEADER)
    result = ctx.heartbeat(1)
    (elected,) = [r.partition_change for r in result.records if r.HasField("partition_change")]
    assert elected.unclean_election
    assert ctx.partition("t", 0)[:3] == ((1, 2, 3), (1,), 1)


def test_unclean_election_at_fencing_time_from_cluster_default() -> None:
    ctx = Context(ControllerConfig(unclean_leader_election_enable=True))
    ctx.add_brokers([1, 2, 3])
    ctx.create(
        controller_pb2.CreatableTopic(
            name="t",
            assignments=[controller_pb2.ReplicaAssignment(partition_index=0, broker_ids=[1, 2, 3])],
        )
    )
    # The ISR has shrunk to broker 3 alone while 1 and 2 are still alive (e.g. they lagged).
    ctx.replay(
        [
            records_pb2.MetadataRecord(
                partition_change=records_pb2.PartitionChangeRecord(
                    topic_id=ctx.image.topic_ids["t"],
                    partition_id=0,
                    leader=3,
                    isr=records_pb2.BrokerIdList(ids=[3]),
                    leader_epoch=1,
                    partition_epoch=1,
                )
            )
        ]
    )
    records = ctx.fence(3)
    (elected,) = [r.partition_change for r in records if r.HasField("partition_change")]
    assert (elected.leader, list(elected.isr.ids), elected.unclean_election) == (1, [1], True)


def test_cluster_default_config_record_enables_unclean_and_topic_config_overrides_it() -> None:
    ctx = Context()
    _three_replica_topic(ctx, {"unclean.leader.election.enable": "false"})
    ctx.replay(
        [
            records_pb2.MetadataRecord(
                config=records_pb2.ConfigRecord(
                    resource_type=records_pb2.CONFIG_RESOURCE_TYPE_BROKER,
                    resource_name="",
                    name="unclean.leader.election.enable",
                    value="true",
                )
            )
        ]
    )
    for broker in (1, 2, 3):
        ctx.fence(broker)
    assert unfence_records(ctx.image, 1, False)[1:] == [], "the topic's own 'false' wins over the cluster default"


def test_unfencing_only_touches_leaderless_partitions() -> None:
    ctx = Context()
    ctx.add_brokers([1, 2])
    ctx.create_ok("t", 4, 2)
    ctx.fence(1)
    records = unfence_records(ctx.image, 1, False)
    assert [r.WhichOneof("record") for r in records] == ["unfence_broker"], "broker 1 left every ISR; nothing to lead"
