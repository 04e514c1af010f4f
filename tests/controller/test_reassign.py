"""Partition reassignment (KIP-455) in Kafka's test style: build a context, call a handler, assert the
response, replay its records, continue. Then the same through the Controller object (heartbeats
drive the move), across a leader failover, and a hypothesis run over random operation sequences."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raftmeta.api import limits
from raftmeta.api.catalogue import check_controller_request
from raftmeta.controller import (
    Controller,
    ControllerConfig,
    ReplayError,
    RequestError,
    image_from_records,
    image_to_records,
    reassign,
)
from raftmeta.controller import brokers as broker_handlers
from raftmeta.controller import topics as topic_handlers
from raftmeta.v1 import controller_pb2, errors_pb2, records_pb2
from tests.controller.helpers import Context, CounterIds, incarnation

ALTER = reassign.alter_partition_reassignments
LIST = reassign.list_partition_reassignments


def alter_request(
    name: str, moves: dict[int, list[int] | None], request_id: str = ""
) -> controller_pb2.AlterPartitionReassignmentsRequest:
    """``moves``: partition -> target replicas, or None to cancel (Kafka's null target)."""
    partitions = [
        controller_pb2.ReassignablePartition(partition_index=pid, replicas=target or [], cancel=target is None)
        for pid, target in moves.items()
    ]
    return controller_pb2.AlterPartitionReassignmentsRequest(
        topics=[controller_pb2.ReassignableTopic(name=name, partitions=partitions)], request_id=request_id
    )


def errors(result: Any) -> list[tuple[str, str]]:
    return [
        (errors_pb2.ErrorCode.Name(p.error_code), p.error_message)
        for t in result.response.results
        for p in t.partitions
    ]


def only_error(result: Any) -> tuple[str, str]:
    (error,) = errors(result)
    return error


def cluster(brokers: int = 6, racks: int = 3, pool: dict[int, str] | None = None) -> Context:
    ctx = Context()
    for broker_id in range(brokers):
        ctx.register(broker_id, rack=f"r{broker_id % racks}", pool=(pool or {}).get(broker_id))
        ctx.heartbeat(broker_id)
    return ctx


def manual_topic(ctx: Context, name: str, *replicas: list[int], **kwargs: Any) -> bytes:
    result = ctx.create(
        controller_pb2.CreatableTopic(
            name=name,
            assignments=[
                controller_pb2.ReplicaAssignment(partition_index=i, broker_ids=r) for i, r in enumerate(replicas)
            ],
            **kwargs,
        )
    )
    (topic,) = result.response.topics
    assert topic.error_code == errors_pb2.NONE, topic.error_message
    return bytes(topic.topic_id)


def heartbeat(ctx: Context, broker_id: int, *caught_up: tuple[bytes, int]) -> Any:
    request = controller_pb2.BrokerHeartbeatRequest(
        broker_id=broker_id,
        broker_epoch=ctx.image.brokers[broker_id].epoch,
        caught_up_replicas=[controller_pb2.TopicIdPartition(topic_id=t, partition_id=p) for t, p in caught_up],
    )
    result = ctx.run(broker_handlers.broker_heartbeat, request)
    assert result.response.error_code == errors_pb2.NONE, result.response.error_message
    return result


def adding_of(response: Any) -> list[tuple[bytes, int]]:
    return [(bytes(a.topic_id), a.partition_id) for a in response.adding_replicas]


# ---- validation: one test per rule ----------------------------------------------------------------
def test_unknown_topic() -> None:
    ctx = cluster()
    result = ctx.call(ALTER, alter_request("nope", {0: [0, 1, 2]}))
    assert only_error(result) == ("UNKNOWN_TOPIC_OR_PARTITION", "Unable to find a topic named nope.")
    assert result.records == ()


def test_unknown_partition() -> None:
    ctx = cluster()
    manual_topic(ctx, "t", [0, 1, 2])
    result = ctx.call(ALTER, alter_request("t", {1: [0, 1, 2]}))
    assert only_error(result) == ("UNKNOWN_TOPIC_OR_PARTITION", "Unable to find partition t:1.")


def test_the_same_partition_twice_in_one_request() -> None:
    ctx = cluster()
    manual_topic(ctx, "t", [0, 1, 2])
    request = alter_request("t", {0: [3, 4, 5]})
    request.topics.add(name="t", partitions=[controller_pb2.ReassignablePartition(partition_index=0, replicas=[1])])
    result = ctx.call(ALTER, request)
    assert [e[0] for e in errors(result)] == ["INVALID_REQUEST", "INVALID_REQUEST"]
    assert "appears more than once" in errors(result)[0][1]
    assert result.records == ()


def test_empty_target() -> None:
    ctx = cluster()
    manual_topic(ctx, "t", [0, 1, 2])
    result = ctx.call(ALTER, alter_request("t", {0: []}))
    assert only_error(result) == (
        "INVALID_REPLICA_ASSIGNMENT",
        "Topic t: partition 0: The manual partition assignment includes an empty replica list.",
    )


def test_duplicate_broker_in_target() -> None:
    ctx = cluster()
    manual_topic(ctx, "t", [0, 1, 2])
    code, message = only_error(ctx.call(ALTER, alter_request("t", {0: [3, 3, 4]})))
    assert code == "INVALID_REPLICA_ASSIGNMENT"
    assert message.endswith("The manual partition assignment includes the broker 3 more than once.")


def test_unregistered_broker_in_target() -> None:
    ctx = cluster()
    manual_topic(ctx, "t", [0, 1, 2])
    code, message = only_error(ctx.call(ALTER, alter_request("t", {0: [0, 1, 9]})))
    assert code == "INVALID_REPLICA_ASSIGNMENT"
    assert message.endswith("includes broker 9, but no such broker is registered.")


def test_fenced_broker_cannot_receive_a_new_replica_but_may_stay() -> None:
    ctx = cluster()
    manual_topic(ctx, "t", [0, 1, 2])
    ctx.fence(4)
    code, message = only_error(ctx.call(ALTER, alter_request("t", {0: [0, 1, 4]})))
    assert code == "INVALID_REPLICA_ASSIGNMENT"
    assert "add broker 4, which is fenced" in message
    # A fenced broker that already holds a replica may stay in the target (retiring another one).
    ctx.fence(2)
    result = ctx.call(ALTER, alter_request("t", {0: [2, 1, 3]}))
    assert errors(result) == [("NONE", "")]


def test_replication_factor_cannot_change() -> None:
    ctx = cluster()
    manual_topic(ctx, "t", [0, 1, 2])
    code, message = only_error(ctx.call(ALTER, alter_request("t", {0: [0, 1, 2, 3]})))
    assert code == "INVALID_REPLICATION_FACTOR"
    assert message.startswith("The replication factor is changed from 3 to 4 for t:0")
    code, _ = only_error(ctx.call(ALTER, alter_request("t", {0: [3]})))
    assert code == "INVALID_REPLICATION_FACTOR"


def test_cancel_without_a_reassignment() -> None:
    ctx = cluster()
    manual_topic(ctx, "t", [0, 1, 2])
    result = ctx.call(ALTER, alter_request("t", {0: None}))
    assert only_error(result) == ("NO_REASSIGNMENT_IN_PROGRESS", "No partition reassignment is in progress.")


def test_cancel_must_not_name_replicas() -> None:
    ctx = cluster()
    manual_topic(ctx, "t", [0, 1, 2])
    request = alter_request("t", {0: [3, 4, 5]})
    request.topics[0].partitions[0].cancel = True
    code, message = only_error(ctx.call(ALTER, request))
    assert code == "INVALID_REQUEST"
    assert "cancel is set and replicas are given" in message


def test_pooled_topic_stays_in_its_pool() -> None:
    ctx = cluster(pool={0: "a", 1: "a", 2: "a", 3: "b", 4: "b", 5: "b"})
    ctx.create_ok("t", partitions=1, rf=2, broker_pool="a")
    code, message = only_error(ctx.call(ALTER, alter_request("t", {0: [3, 4]})))
    assert code == "INVALID_REPLICA_ASSIGNMENT"
    assert message == (
        "Broker 3 is not in broker pool 'a', where topic t was created; "
        "the replicas of a pooled topic stay in its pool."
    )


def test_topic_without_pool_may_move_into_a_pool() -> None:
    ctx = cluster(pool={3: "b", 4: "b", 5: "b"})
    manual_topic(ctx, "t", [0, 1, 2])
    assert errors(ctx.run(ALTER, alter_request("t", {0: [3, 4, 5]}))) == [("NONE", "")]


def test_one_bad_partition_does_not_stop_the_others() -> None:
    ctx = cluster()
    manual_topic(ctx, "t", [0, 1, 2], [1, 2, 0])
    result = ctx.run(ALTER, alter_request("t", {0: [9, 1, 2], 1: [1, 2, 3]}))
    assert [e[0] for e in errors(result)] == ["INVALID_REPLICA_ASSIGNMENT", "NONE"]
    assert len(result.records) == 1
    assert ctx.partition("t", 0).adding_replicas == ()
    assert ctx.partition("t", 1).adding_replicas == (3,)


# ---- the move -------------------------------------------------------------------------------------
def test_start_writes_kafkas_merged_replicas_and_lists_the_move() -> None:
    ctx = cluster()
    topic_id = manual_topic(ctx, "t", [0, 1, 2])
    result = ctx.run(ALTER, alter_request("t", {0: [3, 1, 4]}))
    (record,) = result.records
    change = record.partition_change
    assert list(change.replicas.ids) == [3, 0, 1, 4, 2]  # target and original interleaved
    assert list(change.adding_replicas.ids) == [3, 4]
    assert list(change.removing_replicas.ids) == [0, 2]
    assert not change.HasField("isr") and not change.HasField("leader")
    part = ctx.partition("t", 0)
    assert (part.isr, part.leader, part.partition_epoch, part.leader_epoch) == ((0, 1, 2), 0, 1, 0)
    listed = ctx.call(LIST, controller_pb2.ListPartitionReassignmentsRequest()).response
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in listed.topics] == [("t", [0])]
    ongoing = listed.topics[0].partitions[0]
    assert (list(ongoing.adding_replicas), list(ongoing.removing_replicas), ongoing.leader) == ([3, 4], [0, 2], 0)
    # The brokers being added learn it from their heartbeat; the others hear nothing.
    assert adding_of(heartbeat(ctx, 3).response) == [(topic_id, 0)]
    assert adding_of(heartbeat(ctx, 0).response) == []
    # The same target again is accepted and writes nothing.
    again = ctx.call(ALTER, alter_request("t", {0: [3, 1, 4]}))
    assert errors(again) == [("NONE", "")] and again.records == ()


def test_heartbeats_complete_the_move_and_the_removed_leader_is_replaced() -> None:
    ctx = cluster()
    topic_id = manual_topic(ctx, "t", [0, 1, 2])
    ctx.run(ALTER, alter_request("t", {0: [3, 1, 4]}))
    first = heartbeat(ctx, 3, (topic_id, 0))
    (record,) = first.records
    assert list(record.partition_change.isr.ids) == [0, 1, 2, 3]  # joined at the end
    assert adding_of(first.response) == []  # in sync now: not listed again
    part = ctx.partition("t", 0)
    assert part.adding_replicas == (3, 4) and part.replicas == (3, 0, 1, 4, 2)
    # A repeated report changes nothing.
    assert heartbeat(ctx, 3, (topic_id, 0)).records == ()
    last = heartbeat(ctx, 4, (topic_id, 0))
    (record,) = last.records
    change = record.partition_change
    assert list(change.replicas.ids) == [3, 1, 4]
    assert list(change.isr.ids) == [3, 1, 4]
    assert change.HasField("adding_replicas") and list(change.adding_replicas.ids) == []
    assert change.HasField("removing_replicas") and list(change.removing_replicas.ids) == []
    assert change.leader == 3  # the old leader 0 was removed: the first in-sync target replica leads
    part = ctx.partition("t", 0)
    assert (part.replicas, part.isr, part.leader, part.leader_epoch, part.partition_epoch) == (
        (3, 1, 4),
        (3, 1, 4),
        3,
        1,
        3,
    )
    assert ctx.image.reassigning == {}
    assert ctx.call(LIST, controller_pb2.ListPartitionReassignmentsRequest()).response.topics == []


def test_a_kept_leader_keeps_leading() -> None:
    ctx = cluster()
    topic_id = manual_topic(ctx, "t", [0, 1, 2])
    ctx.run(ALTER, alter_request("t", {0: [0, 1, 5]}))
    before = ctx.partition("t", 0)
    (record,) = heartbeat(ctx, 5, (topic_id, 0)).records
    # Replica 2 leaves the replica set: Kafka names the kept leader again, with a new leader epoch
    # (triggerLeaderEpochBumpForReplicaReassignmentIfNeeded), so 2's fetches are fenced.
    assert record.partition_change.leader == 0
    assert record.partition_change.leader_epoch == before.leader_epoch + 1
    assert ctx.partition("t", 0).replicas == (0, 1, 5) and ctx.partition("t", 0).leader == 0


def test_report_for_a_leaderless_partition_is_ignored() -> None:
    ctx = cluster()
    topic_id = manual_topic(ctx, "t", [0])
    ctx.run(ALTER, alter_request("t", {0: [1]}))
    ctx.fence(0)
    assert ctx.partition("t", 0).leader == -1
    assert heartbeat(ctx, 1, (topic_id, 0)).records == ()
    assert ctx.partition("t", 0).adding_replicas == (1,)


def test_report_from_a_broker_that_is_not_adding_is_ignored() -> None:
    ctx = cluster()
    topic_id = manual_topic(ctx, "t", [0, 1, 2])
    ctx.run(ALTER, alter_request("t", {0: [3, 1, 2]}))
    assert heartbeat(ctx, 5, (topic_id, 0), (b"\x09" * 16, 0), (topic_id, 7)).records == ()


def test_a_pure_reorder_completes_at_once() -> None:
    ctx = cluster()
    manual_topic(ctx, "t", [0, 1, 2])
    (record,) = ctx.run(ALTER, alter_request("t", {0: [2, 1, 0]})).records
    assert list(record.partition_change.replicas.ids) == [2, 1, 0]
    assert not record.partition_change.HasField("adding_replicas")
    part = ctx.partition("t", 0)
    assert part.replicas == (2, 1, 0) and part.leader == 0 and ctx.image.reassigning == {}


def test_cancel_restores_the_original_replicas() -> None:
    ctx = cluster()
    topic_id = manual_topic(ctx, "t", [0, 1, 2])
    ctx.run(ALTER, alter_request("t", {0: [3, 4, 5]}))
    heartbeat(ctx, 3, (topic_id, 0))
    assert ctx.partition("t", 0).isr == (0, 1, 2, 3)
    result = ctx.run(ALTER, alter_request("t", {0: None}))
    assert errors(result) == [("NONE", "")]
    part = ctx.partition("t", 0)
    assert (part.replicas, part.isr, part.leader, part.adding_replicas, part.removing_replicas) == (
        (0, 1, 2),
        (0, 1, 2),
        0,
        (),
        (),
    )
    assert ctx.image.reassigning == {}
    # Stale catch-up reports after the cancel change nothing.
    assert heartbeat(ctx, 4, (topic_id, 0)).records == ()


def test_cancel_replaces_a_leader_that_was_being_added() -> None:
    ctx = cluster()
    topic_id = manual_topic(ctx, "t", [0, 1])
    ctx.run(ALTER, alter_request("t", {0: [2, 3]}))
    heartbeat(ctx, 2, (topic_id, 0))
    ctx.fence(0)
    ctx.fence(1)
    assert ctx.partition("t", 0).leader == 2  # the caught-up adding replica leads
    ctx.heartbeat(0)  # 0 returns but is out of the ISR: 2 stays the leader
    heartbeat(ctx, 1)
    code, message = only_error(ctx.call(ALTER, alter_request("t", {0: None})))
    assert code == "INVALID_REPLICA_ASSIGNMENT"
    assert message == (
        "Unable to revert partition assignment for t:0 because it would require an unclean leader election."
    )


def test_cancel_elects_an_original_replica_when_the_leader_was_being_added() -> None:
    ctx = cluster()
    topic_id = manual_topic(ctx, "t", [0, 1, 2])
    ctx.run(ALTER, alter_request("t", {0: [3, 4, 2]}))
    heartbeat(ctx, 3, (topic_id, 0))
    # Before completion 0 is still a replica; fence it so leadership moves to the first valid: 3.
    ctx.fence(0)
    assert ctx.partition("t", 0).leader == 3
    ctx.run(ALTER, alter_request("t", {0: None}))
    part = ctx.partition("t", 0)
    assert part.replicas == (0, 1, 2) and part.isr == (1, 2) and part.leader == 1  # 0 is fenced


def test_a_new_target_replaces_the_running_move() -> None:
    ctx = cluster()
    topic_id = manual_topic(ctx, "t", [0, 1, 2])
    ctx.run(ALTER, alter_request("t", {0: [3, 4, 2]}))
    heartbeat(ctx, 3, (topic_id, 0))
    # 4 is dropped, 3 (in sync already) stays, 5 is new; computed against the original [0, 1, 2].
    ctx.run(ALTER, alter_request("t", {0: [3, 5, 2]}))
    part = ctx.partition("t", 0)
    assert part.replicas == (3, 5, 0, 1, 2)
    assert part.adding_replicas == (3, 5) and part.removing_replicas == (0, 1)
    assert part.isr == (0, 1, 2, 3)
    assert len(part.replicas) - len(part.adding_replicas) == 3
    heartbeat(ctx, 5, (topic_id, 0))
    part = ctx.partition("t", 0)
    assert part.replicas == (3, 5, 2) and part.isr == (3, 5, 2) and part.leader == 3


def test_a_new_target_whose_adding_replicas_are_in_sync_completes_at_once() -> None:
    ctx = cluster()
    topic_id = manual_topic(ctx, "t", [0, 1, 2])
    ctx.run(ALTER, alter_request("t", {0: [3, 4, 5]}))
    heartbeat(ctx, 3, (topic_id, 0))
    heartbeat(ctx, 4, (topic_id, 0))
    ctx.run(ALTER, alter_request("t", {0: [3, 4, 0]}))
    part = ctx.partition("t", 0)
    assert part.replicas == (3, 4, 0) and part.adding_replicas == () and part.leader == 0


def test_fencing_an_adding_replica_stalls_the_move_until_it_catches_up_again() -> None:
    ctx = cluster()
    topic_id = manual_topic(ctx, "t", [0, 1, 2])
    ctx.run(ALTER, alter_request("t", {0: [3, 4, 2]}))
    heartbeat(ctx, 3, (topic_id, 0))
    ctx.fence(3)
    part = ctx.partition("t", 0)
    assert part.isr == (0, 1, 2) and part.adding_replicas == (3, 4)
    heartbeat(ctx, 4, (topic_id, 0))
    assert ctx.partition("t", 0).adding_replicas == (3, 4)  # 3 fell out of sync: not complete
    result = heartbeat(ctx, 3)  # returns: unfenced, and told to catch up again
    assert adding_of(result.response) == [(topic_id, 0)]
    heartbeat(ctx, 3, (topic_id, 0))
    assert ctx.partition("t", 0).replicas == (3, 4, 2)


def test_create_partitions_during_a_move_keeps_the_replication_factor() -> None:
    ctx = cluster()
    manual_topic(ctx, "t", [0, 1, 2])
    ctx.run(ALTER, alter_request("t", {0: [3, 4, 5]}))
    result = ctx.run(
        topic_handlers.create_partitions,
        controller_pb2.CreatePartitionsRequest(topics=[controller_pb2.CreatePartitionsTopic(name="t", count=2)]),
    )
    assert result.response.results[0].error_code == errors_pb2.NONE, result.response.results[0].error_message
    assert len(ctx.partition("t", 1).replicas) == 3


def test_deleting_a_moving_topic_clears_the_reassignment() -> None:
    ctx = cluster()
    manual_topic(ctx, "t", [0, 1, 2])
    ctx.run(ALTER, alter_request("t", {0: [3, 4, 5]}))
    ctx.run(topic_handlers.delete_topics, controller_pb2.DeleteTopicsRequest(topic_names=["t"]))
    assert ctx.image.reassigning == {}
    assert adding_of(heartbeat(ctx, 3).response) == []


def test_list_named_partitions_and_unknown_names() -> None:
    ctx = cluster()
    manual_topic(ctx, "t", [0, 1, 2], [1, 2, 0])
    ctx.run(ALTER, alter_request("t", {1: [3, 2, 0]}))
    named = controller_pb2.ListPartitionReassignmentsRequest(
        topics=[controller_pb2.TopicPartitions(topic="t", partitions=[0, 1])]
    )
    listed = ctx.call(LIST, named).response
    assert listed.error_code == errors_pb2.NONE
    assert [p.partition_index for p in listed.topics[0].partitions] == [1]
    unknown = ctx.call(
        LIST, controller_pb2.ListPartitionReassignmentsRequest(topics=[controller_pb2.TopicPartitions(topic="x")])
    ).response
    assert (unknown.error_code, unknown.error_message) == (
        errors_pb2.UNKNOWN_TOPIC_OR_PARTITION,
        "Unable to find a topic named x.",
    )
    bad = ctx.call(
        LIST,
        controller_pb2.ListPartitionReassignmentsRequest(
            topics=[controller_pb2.TopicPartitions(topic="t", partitions=[5])]
        ),
    ).response
    assert bad.error_message == "Unable to find partition t:5." and not bad.topics


def test_snapshot_keeps_a_move_in_progress() -> None:
    ctx = cluster()
    topic_id = manual_topic(ctx, "t", [0, 1, 2])
    ctx.run(ALTER, alter_request("t", {0: [3, 4, 2]}))
    heartbeat(ctx, 3, (topic_id, 0))
    restored = image_from_records(image_to_records(ctx.image))
    assert restored == ctx.image
    assert set(restored.reassigning) == {(topic_id, 0)}


def test_replay_refuses_a_malformed_reassignment() -> None:
    ctx = cluster()
    topic_id = manual_topic(ctx, "t", [0, 1, 2])
    part = ctx.partition("t", 0)
    change = records_pb2.PartitionChangeRecord(
        topic_id=topic_id, partition_id=0, leader_epoch=part.leader_epoch, partition_epoch=part.partition_epoch + 1
    )
    change.adding_replicas.ids.extend([5])  # not a replica
    with pytest.raises(ReplayError, match="adding \\[5\\] and removing \\[\\] replicas must be distinct replicas"):
        ctx.image.replay(records_pb2.MetadataRecord(partition_change=change))
    change.adding_replicas.ids[:] = [0]
    change.removing_replicas.ids.extend([0])  # both adding and removing
    with pytest.raises(ReplayError):
        ctx.image.replay(records_pb2.MetadataRecord(partition_change=change))


@pytest.mark.parametrize(
    ("original", "target", "merged"),
    [
        ([0, 1, 2], [3, 4, 5], (3, 4, 5, 0, 1, 2)),
        ([0, 1, 2], [3, 1, 4], (3, 0, 1, 4, 2)),
        ([0, 1, 2], [0, 1, 5], (0, 1, 5, 2)),
        ([1, 2, 0], [5, 2, 3], (5, 1, 2, 3, 0)),
        # Shared replicas reordered: Kafka's target + removing (a cancel restores the set only).
        ([0, 1, 2], [2, 1, 3], (2, 1, 3, 0)),
    ],
)
def test_merged_replicas(original: list[int], target: list[int], merged: tuple[int, ...]) -> None:
    assert reassign.merged_replicas(original, target) == merged


@settings(deadline=None)
@given(st.permutations(range(8)), st.integers(1, 4), st.randoms(use_true_random=False))
def test_merged_replicas_recover_both_lists_when_the_shared_order_agrees(brokers: list[int], rf: int, rng: Any) -> None:
    original = brokers[:rf]
    target = rng.sample(brokers, rf)
    merged = reassign.merged_replicas(original, target)
    assert sorted(merged) == sorted(set(original) | set(target))
    assert [b for b in merged if b not in set(original) - set(target)] == target
    shared_agrees = [b for b in target if b in original] == [b for b in original if b in target]
    if shared_agrees:
        assert [b for b in merged if b not in set(target) - set(original)] == original


# ---- through the Controller object ------------------------------------------------------------------
class Driver:
    """Appends every batch at the next offsets and commits on demand (a node driver in miniature)."""

    def __init__(self, controller: Controller) -> None:
        self.controller = controller
        self.ids = CounterIds()
        self.offset = controller.committed_offset
        self.now_ms = 0

    def send(self, method: str, request: Any) -> Any:
        handled = self.controller.handle(method, request, self.now_ms, self.ids)
        if handled.records:
            self.offset += len(handled.records)
        return handled

    def call(self, method: str, request: Any) -> Any:
        """Send and commit; the response the client would get."""
        handled = self.send(method, request)
        if not handled.done:
            self.controller.commit(self.controller.pending_count, self.offset)
        return handled.response

    def heartbeat(self, broker_id: int, *caught_up: tuple[bytes, int]) -> Any:
        request = controller_pb2.BrokerHeartbeatRequest(
            broker_id=broker_id,
            broker_epoch=self.controller.image.brokers[broker_id].epoch,
            caught_up_replicas=[controller_pb2.TopicIdPartition(topic_id=t, partition_id=p) for t, p in caught_up],
        )
        return self.call("BrokerHeartbeat", request)


def started_cluster() -> tuple[Driver, bytes]:
    driver = Driver(Controller(config=ControllerConfig(cluster_id="c")))
    for broker_id in range(6):
        driver.call(
            "RegisterBroker",
            controller_pb2.RegisterBrokerRequest(broker_id=broker_id, incarnation_id=incarnation(broker_id)),
        )
        driver.heartbeat(broker_id)
    created = driver.call(
        "CreateTopics",
        controller_pb2.CreateTopicsRequest(
            topics=[
                controller_pb2.CreatableTopic(
                    name="t",
                    assignments=[
                        controller_pb2.ReplicaAssignment(partition_index=0, broker_ids=[0, 1, 2]),
                        controller_pb2.ReplicaAssignment(partition_index=1, broker_ids=[1, 2, 0]),
                    ],
                )
            ]
        ),
    )
    return driver, bytes(created.topics[0].topic_id)


def move_everything_off_0_1(driver: Driver) -> Any:
    return driver.call("AlterPartitionReassignments", move_off_0_1_request())


def move_off_0_1_request() -> controller_pb2.AlterPartitionReassignmentsRequest:
    return controller_pb2.AlterPartitionReassignmentsRequest(
        topics=[
            controller_pb2.ReassignableTopic(
                name="t",
                partitions=[
                    controller_pb2.ReassignablePartition(partition_index=0, replicas=[3, 4, 2]),
                    controller_pb2.ReassignablePartition(partition_index=1, replicas=[5, 2, 3]),
                ],
            )
        ],
        request_id="move-1",
    )


def drive_heartbeats(driver: Driver, rounds: int = 5) -> None:
    """Each broker reports, in its next heartbeat, whatever the previous answer told it to add."""
    told: dict[int, list[tuple[bytes, int]]] = {b: [] for b in driver.controller.image.brokers}
    for _ in range(rounds):
        for broker_id in sorted(told):
            response = driver.heartbeat(broker_id, *told[broker_id])
            told[broker_id] = [(bytes(a.topic_id), a.partition_id) for a in response.adding_replicas]


def test_a_full_move_driven_by_heartbeats_through_the_controller() -> None:
    driver, _ = started_cluster()
    response = move_everything_off_0_1(driver)
    assert [p.error_code for p in response.results[0].partitions] == [errors_pb2.NONE, errors_pb2.NONE]
    listed = driver.call("ListPartitionReassignments", controller_pb2.ListPartitionReassignmentsRequest())
    assert [p.partition_index for p in listed.topics[0].partitions] == [0, 1]
    drive_heartbeats(driver)
    image = driver.controller.committed_image
    topic = image.topic_by_name("t")
    assert topic is not None
    assert [(p.replicas, p.isr, p.leader) for p in topic.partitions] == [
        ((3, 4, 2), (3, 4, 2), 3),
        ((5, 2, 3), (5, 2, 3), 5),
    ]
    assert image.reassigning == {}
    assert image.replica_counts.get(0, 0) == 0 and image.replica_counts.get(1, 0) == 0
    listed = driver.call("ListPartitionReassignments", controller_pb2.ListPartitionReassignmentsRequest())
    assert list(listed.topics) == []
    # A retry of the request with the same id gets the original answer and writes nothing.
    handled = driver.send("AlterPartitionReassignments", move_off_0_1_request())
    assert handled.records == () and handled.response == response
    # The id on different work (here: cancel the finished move) is refused, not answered as done.
    with pytest.raises(RequestError, match="already used for a different AlterPartitionReassignments"):
        driver.send(
            "AlterPartitionReassignments",
            controller_pb2.AlterPartitionReassignmentsRequest(
                topics=[controller_pb2.ReassignableTopic(name="t")], request_id="move-1"
            ),
        )


@pytest.mark.parametrize("finish", ["complete", "cancel"])
def test_a_move_interrupted_by_a_failover_finishes_on_the_new_controller(finish: str) -> None:
    driver, topic_id = started_cluster()
    move_everything_off_0_1(driver)
    driver.heartbeat(3, (topic_id, 0))  # committed: 3 joined the ISR of t-0
    # The next heartbeat's batch is appended but never committed: leadership is lost.
    handled = driver.send(
        "BrokerHeartbeat",
        controller_pb2.BrokerHeartbeatRequest(
            broker_id=4,
            broker_epoch=driver.controller.image.brokers[4].epoch,
            caught_up_replicas=[controller_pb2.TopicIdPartition(topic_id=topic_id, partition_id=0)],
        ),
    )
    assert handled.records
    driver.controller.renounce()
    assert driver.controller.pending_count == 0
    committed_offset, snapshot = driver.controller.snapshot()
    # The new leader starts from the committed state (here: through a snapshot of it).
    successor = Driver(Controller.from_snapshot(snapshot, committed_offset, config=ControllerConfig(cluster_id="c")))
    part = successor.controller.image.partition(topic_id, 0)
    assert part is not None and part.isr == (0, 1, 2, 3) and part.adding_replicas == (3, 4)
    if finish == "complete":
        drive_heartbeats(successor)
        topic = successor.controller.committed_image.topic_by_name("t")
        assert topic is not None
        assert [p.replicas for p in topic.partitions] == [(3, 4, 2), (5, 2, 3)]
        assert [p.isr for p in topic.partitions] == [(3, 4, 2), (5, 2, 3)]
    else:
        cancel = controller_pb2.AlterPartitionReassignmentsRequest(
            topics=[
                controller_pb2.ReassignableTopic(
                    name="t",
                    partitions=[
                        controller_pb2.ReassignablePartition(partition_index=0, cancel=True),
                        controller_pb2.ReassignablePartition(partition_index=1, cancel=True),
                    ],
                )
            ]
        )
        response = successor.call("AlterPartitionReassignments", cancel)
        assert [p.error_code for p in response.results[0].partitions] == [errors_pb2.NONE, errors_pb2.NONE]
        drive_heartbeats(successor)  # stale reports after the cancel change nothing
        topic = successor.controller.committed_image.topic_by_name("t")
        assert topic is not None
        assert [(p.replicas, p.isr, p.leader) for p in topic.partitions] == [
            ((0, 1, 2), (0, 1, 2), 0),
            ((1, 2, 0), (1, 2, 0), 1),
        ]
    assert successor.controller.committed_image.reassigning == {}
    # The finished state survives the next snapshot (the reassignment index included).
    _, records = successor.controller.snapshot()
    assert image_from_records(records) == successor.controller.committed_image


# ---- random operation sequences ---------------------------------------------------------------------
OPERATION = st.one_of(
    st.tuples(st.just("move"), st.integers(0, 2), st.permutations(range(6)).map(lambda p: p[:3])),
    st.tuples(st.just("cancel"), st.integers(0, 2), st.just(())),
    st.tuples(st.just("catch_up"), st.integers(0, 5), st.just(())),
    st.tuples(st.just("fence"), st.integers(0, 5), st.just(())),
    st.tuples(st.just("unfence"), st.integers(0, 5), st.just(())),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(OPERATION, max_size=25))
def test_random_moves_keep_every_invariant(operations: list[tuple[str, int, tuple[int, ...]]]) -> None:
    ctx = cluster()
    topic_id = manual_topic(ctx, "t", [0, 1, 2], [1, 2, 3], [2, 3, 4])
    for kind, number, target in operations:
        if kind == "move":
            ctx.run(ALTER, alter_request("t", {number: list(target)}))
        elif kind == "cancel":
            ctx.run(ALTER, alter_request("t", {number: None}))
        elif kind == "catch_up" and not ctx.image.brokers[number].fenced:
            heartbeat(ctx, number, *[(topic_id, pid) for pid in range(3)])
        elif kind == "fence" and not ctx.image.brokers[number].fenced:
            ctx.fence(number)
        elif kind == "unfence" and ctx.image.brokers[number].fenced:
            heartbeat(ctx, number)
        topic = ctx.image.topic_by_name("t")
        assert topic is not None
        for pid, part in enumerate(topic.partitions):
            assert len(part.replicas) - len(part.adding_replicas) == 3  # the factor never changes
            assert part.isr, "an ISR is never emptied"
            assert ((topic_id, pid) in ctx.image.reassigning) == reassign.is_reassigning(part)
        assert image_from_records(image_to_records(ctx.image)) == ctx.image
    # Replaying the whole log from scratch gives the same image (the index included).
    assert image_from_records(ctx.log) == ctx.image


def test_a_target_over_the_replica_limit_fails_only_its_partition() -> None:
    """Issue 46, item 9: per-item limits are per-item errors. The request check lets a target of
    REPLICAS_PER_PARTITION_MAX + 1 replicas through; the controller answers that partition alone
    (a reassignment keeps the topic's factor, which the limit bounds) and moves the other."""
    too_many = limits.REPLICAS_PER_PARTITION_MAX + 1
    ctx = cluster(brokers=too_many + 1)
    manual_topic(ctx, "t", [0, 1, 2], [1, 2, 3])
    request = alter_request("t", {0: list(range(too_many)), 1: [2, 3, 4]})
    assert check_controller_request("AlterPartitionReassignments", request) is None
    result = ctx.call(ALTER, request)
    assert [code for code, _ in errors(result)] == ["INVALID_REPLICATION_FACTOR", "NONE"]
    assert result.records != ()
