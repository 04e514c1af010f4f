"""The reassignment checks of a chaos run on tapes written by the pure controller itself (the same
handlers a node runs), then doctored: every check must be able to fail, naming the partition."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from placement.rng import JavaRandom
from raftmeta.chaos.history import CANCEL_REASSIGNMENT, REASSIGN, Op, Outcome, read_history, write_history
from raftmeta.chaos.moves import MoveVerdict, check_reassignments
from raftmeta.chaos.tape import LOG_DIR_NAME, CommittedTape
from raftmeta.controller import Controller, image_to_records
from raftmeta.controller.image import MetadataImage
from raftmeta.records import codec
from raftmeta.storage.snapshot import SnapshotId, encode_snapshot
from raftmeta.v1 import controller_pb2, errors_pb2, records_pb2
from tests.controller.helpers import CounterIds, incarnation

Response = controller_pb2.AlterPartitionReassignmentsResponse


class LoggedController:
    """The pure controller with a committed log: each request's records become one batch at the
    next offset, committed at once (what a node does, minus the quorum)."""

    def __init__(self, brokers: int = 6) -> None:
        self.controller = Controller(ids=CounterIds(), random=JavaRandom(7))
        self.batches: dict[int, bytes] = {}
        self.images: dict[int, MetadataImage] = {0: self.controller.committed_image}  # end offset -> image
        self.offset = 0
        self.ops: list[Op] = []
        for broker_id in range(brokers):
            self.call(
                "RegisterBroker",
                controller_pb2.RegisterBrokerRequest(broker_id=broker_id, incarnation_id=incarnation(broker_id)),
            )
            self.heartbeat(broker_id)

    def call(self, method: str, request: object) -> object:
        handled = self.controller.handle(method, request, 0)  # type: ignore[arg-type]
        if handled.done:
            return handled.response
        self.append(handled.records, commit=False)
        self.controller.commit(1, self.offset - 1)
        self.images[self.offset] = self.controller.committed_image
        return handled.response

    def append(self, records: Sequence[records_pb2.MetadataRecord], *, commit: bool = True) -> None:
        """A batch at the next offset; ``commit``: records written by hand (a doctored log), which the
        controller then takes as committed."""
        self.batches[self.offset] = codec.encode_batch(self.offset, 1, [r.SerializeToString() for r in records], 0)
        self.offset += len(records)
        if commit:
            self.controller.apply_committed(records, self.offset - 1)
            self.images[self.offset] = self.controller.committed_image

    def heartbeat(self, broker_id: int, *caught_up: tuple[bytes, int]) -> None:
        self.call(
            "BrokerHeartbeat",
            controller_pb2.BrokerHeartbeatRequest(
                broker_id=broker_id,
                broker_epoch=self.controller.image.brokers[broker_id].epoch,
                caught_up_replicas=[controller_pb2.TopicIdPartition(topic_id=t, partition_id=p) for t, p in caught_up],
            ),
        )

    def create(self, name: str, *replicas: list[int]) -> bytes:
        response = self.call(
            "CreateTopics",
            controller_pb2.CreateTopicsRequest(
                topics=[
                    controller_pb2.CreatableTopic(
                        name=name,
                        assignments=[
                            controller_pb2.ReplicaAssignment(partition_index=i, broker_ids=r)
                            for i, r in enumerate(replicas)
                        ],
                    )
                ],
                request_id=f"create-{name}",
            ),
        )
        assert isinstance(response, controller_pb2.CreateTopicsResponse)
        return bytes(response.topics[0].topic_id)

    def reassign(self, name: str, pid: int, target: list[int] | None) -> Op:
        """One op of the workload: a move (or, with None, a cancel), recorded with its outcome."""
        request_id = f"op-{len(self.ops) + 1}"
        partition = controller_pb2.ReassignablePartition(partition_index=pid, replicas=target or [], cancel=not target)
        response = self.call(
            "AlterPartitionReassignments",
            controller_pb2.AlterPartitionReassignmentsRequest(
                topics=[controller_pb2.ReassignableTopic(name=name, partitions=[partition])], request_id=request_id
            ),
        )
        assert isinstance(response, Response)
        code = response.results[0].partitions[0].error_code
        kind = REASSIGN if target else CANCEL_REASSIGNMENT
        outcome: Outcome = "ok" if code == errors_pb2.NONE else "fail"
        op = Op(len(self.ops) + 1, request_id, kind, name, "", 0, 1, outcome, "", 0, pid, tuple(target or ()))
        self.ops.append(op)
        return op

    def change(self, topic_id: bytes, pid: int, **fields: list[int] | int) -> tuple[records_pb2.MetadataRecord]:
        """A PartitionChangeRecord whose epochs follow the partition's current state."""
        part = self.controller.image.partition(topic_id, pid)
        assert part is not None
        change = records_pb2.PartitionChangeRecord(topic_id=topic_id, partition_id=pid)
        leader = fields.pop("leader", part.leader)
        assert isinstance(leader, int)
        if leader != part.leader:
            change.leader = leader
        for name, ids in fields.items():
            assert isinstance(ids, list)
            getattr(change, name).SetInParent()
            getattr(change, name).ids.extend(ids)
        change.leader_epoch = part.leader_epoch + (leader != part.leader)
        change.partition_epoch = part.partition_epoch + 1
        return (records_pb2.MetadataRecord(partition_change=change),)

    def snapshot(self, offset: int) -> tuple[SnapshotId, bytes]:
        snapshot_id = SnapshotId(offset, 1)
        records = [r.SerializeToString() for r in image_to_records(self.images[offset])]
        data = b"".join(encode_snapshot(snapshot_id, records, last_contained_log_timestamp_ms=0, append_timestamp_ms=0))
        return snapshot_id, data

    def check(self, snapshots: dict[SnapshotId, bytes] | None = None) -> MoveVerdict:
        return check_reassignments(self.ops, self.batches, snapshots or {})


def detail(verdict: MoveVerdict, name: str) -> str:
    (check,) = [c for c in verdict.checks if c.name == name]
    assert not check.passed, check
    return check.detail


def passed(verdict: MoveVerdict) -> bool:
    return all(c.passed for c in verdict.checks)


@pytest.fixture
def log() -> LoggedController:
    return LoggedController()


def moved_and_cancelled(log: LoggedController) -> bytes:
    """k1-0 moves from [0, 1, 2] to [3, 4, 2] and completes; k1-1 starts moving and is cancelled; a
    move that must be refused and one that asks for what the partition already has."""
    topic_id = log.create("k1", [0, 1, 2], [3, 4, 5])
    assert log.reassign("k1", 0, [3, 4, 2]).outcome == "ok"
    log.heartbeat(3, (topic_id, 0))
    log.heartbeat(4, (topic_id, 0))
    assert log.reassign("k1", 1, [0, 4, 5]).outcome == "ok"
    assert log.reassign("k1", 1, None).outcome == "ok"
    assert log.reassign("k1", 0, [0, 0, 0]).outcome == "fail"
    assert log.reassign("k1", 0, [3, 4, 2]).outcome == "ok"  # answered without a record
    return topic_id


def test_a_controller_written_log_passes_and_counts_its_moves(log: LoggedController) -> None:
    moved_and_cancelled(log)
    verdict = log.check()
    assert passed(verdict), verdict.checks
    assert verdict.lost_acknowledged == []
    assert {k: verdict.counts[k] for k in ("started", "completed", "cancelled", "in_flight_at_end")} == {
        "started": 2,
        "completed": 1,
        "cancelled": 1,
        "in_flight_at_end": 0,
    }
    assert verdict.figures["replay"]["replayed"] == [[0, log.offset]]


def test_a_retargeted_move_and_one_dropped_with_its_topic_are_counted(log: LoggedController) -> None:
    log.create("k1", [0, 1, 2])
    log.create("e1", [0, 1, 2])
    log.reassign("k1", 0, [3, 4, 5])
    log.reassign("k1", 0, [3, 1, 2])
    log.reassign("e1", 0, [5, 1, 2])
    log.call("DeleteTopics", controller_pb2.DeleteTopicsRequest(topic_names=["e1"], request_id="delete-e1"))
    verdict = log.check()
    assert passed(verdict), verdict.checks
    counts = verdict.counts
    assert (counts["started"], counts["retargeted"], counts["dropped_with_topic"], counts["in_flight_at_end"]) == (
        2,
        1,
        1,
        1,
    )


def test_a_new_target_whose_added_replica_caught_up_already_completes_at_once(log: LoggedController) -> None:
    topic_id = log.create("k1", [0, 1, 2])
    log.reassign("k1", 0, [3, 4, 2])
    log.heartbeat(3, (topic_id, 0))  # 3 joins the ISR, 4 not yet
    log.reassign("k1", 0, [3, 1, 2])  # adds only 3: in sync, so the move ends in the same record
    part = log.controller.image.partition(topic_id, 0)
    assert part is not None and (part.replicas, part.adding_replicas) == ((3, 1, 2), ())
    verdict = log.check()
    assert passed(verdict), verdict.checks
    assert (verdict.counts["started"], verdict.counts["retargeted"], verdict.counts["completed"]) == (1, 1, 1)


def test_a_completed_move_whose_replicas_are_not_its_target_fails(log: LoggedController) -> None:
    topic_id = log.create("k1", [0, 1, 2])
    log.reassign("k1", 0, [3, 4, 2])
    log.append(
        log.change(topic_id, 0, replicas=[3, 4, 5], isr=[3, 4, 5], leader=3, adding_replicas=[], removing_replicas=[])
    )
    text = detail(log.check(), "reassignments-consistent")
    assert "k1-0" in text
    assert "ended with replicas [3, 4, 5]: neither the target (completed) nor the original replicas" in text


def test_an_isr_emptied_during_a_move_fails(log: LoggedController) -> None:
    topic_id = log.create("k1", [0, 1, 2])
    log.reassign("k1", 0, [3, 4, 2])
    log.append(log.change(topic_id, 0, isr=[], leader=-1))
    text = detail(log.check(), "reassignments-consistent")
    assert "k1-0 at offset" in text and "the ISR is empty" in text


def test_original_replicas_restored_without_a_cancel_request_fail(log: LoggedController) -> None:
    topic_id = log.create("k1", [0, 1, 2])
    log.reassign("k1", 0, [3, 4, 2])
    log.append(log.change(topic_id, 0, replicas=[0, 1, 2], adding_replicas=[], removing_replicas=[]))
    text = detail(log.check(), "reassignments-consistent")
    assert "k1-0" in text and "without a cancel request" in text


def test_replicas_changed_outside_a_move_fail(log: LoggedController) -> None:
    topic_id = log.create("k1", [0, 1, 2])
    log.append(log.change(topic_id, 0, replicas=[0, 1, 3], isr=[0, 1]))
    assert "k1-0" in detail(log.check(), "reassignments-consistent")


def test_a_leader_outside_the_isr_is_refused_by_the_replay(log: LoggedController) -> None:
    topic_id = log.create("k1", [0, 1, 2])
    log.reassign("k1", 0, [3, 4, 2])
    bad = log.change(topic_id, 0, isr=[1, 2])  # leader 0 stays, out of the ISR
    log.batches[log.offset] = codec.encode_batch(log.offset, 1, [r.SerializeToString() for r in bad], 0)
    log.offset += 1
    text = detail(log.check(), "committed-log-replays")
    assert "k1-0" in text and "leader 0 is not in the ISR" in text


def test_an_acknowledged_move_missing_from_the_log_is_lost(log: LoggedController) -> None:
    moved_and_cancelled(log)
    log.ops.append(Op(99, "never-sent", REASSIGN, "k1", "", 0, 1, "ok", "", 0, 1, (5, 4, 3)))
    log.ops.append(Op(100, "never-sent-either", CANCEL_REASSIGNMENT, "k1", "", 0, 1, "ok", "", 0, 0))
    verdict = log.check()
    assert verdict.lost_acknowledged == [99, 100]
    text = detail(verdict, "acknowledged-reassignments-committed")
    assert "op 99: reassign_partition of k1-1 to [5, 4, 3] was acknowledged" in text
    assert "op 100: cancel_reassignment of k1-0 was acknowledged, but its request is not committed" in text


def test_an_acknowledged_move_whose_records_did_something_else_fails(log: LoggedController) -> None:
    moved_and_cancelled(log)
    first = log.ops[0]
    log.ops[0] = Op(first.op_id, first.request_id, REASSIGN, "k1", "", 0, 1, "ok", "", 0, 0, (5, 4, 2))
    text = detail(log.check(), "acknowledged-reassignments-committed")
    assert "op 1" in text and "k1-0" in text and "acknowledged target [5, 4, 2]" in text


def test_a_rejected_move_that_was_committed_fails(log: LoggedController) -> None:
    moved_and_cancelled(log)
    first = log.ops[0]
    log.ops[0] = Op(first.op_id, first.request_id, REASSIGN, "k1", "", 0, 1, "fail", "", 0, 0, first.replicas)
    text = detail(log.check(), "failed-reassignments-wrote-nothing")
    assert "op 1" in text and "k1-0" in text and "rejected, yet committed with the answer NONE" in text


def test_a_gap_in_the_tape_is_bridged_by_a_snapshot_taken_after_it(log: LoggedController) -> None:
    moved_and_cancelled(log)
    bases = sorted(log.batches)
    gap = bases[len(bases) // 2]
    resume = bases[len(bases) // 2 + 2]
    del log.batches[gap]
    snapshot_id, data = log.snapshot(resume)
    verdict = log.check({snapshot_id: data, **dict([log.snapshot(gap)])})  # one before the gap's end: unusable
    assert passed(verdict), verdict.checks
    replay = verdict.figures["replay"]
    assert replay["resumed_from_snapshots"] == [resume]
    assert replay["replayed"] == [[0, gap], [resume, log.offset]]
    # Without a snapshot the walk stops at the gap, and says so.
    stopped = log.check()
    assert stopped.figures["replay"]["stopped_at"] == gap
    assert "stopped at offset" in next(c.detail for c in stopped.checks if c.name == "committed-log-replays")


def test_the_tape_keeps_a_copy_of_every_snapshot_it_sees(tmp_path: Path, log: LoggedController) -> None:
    moved_and_cancelled(log)
    log_dir = tmp_path / "node-1" / LOG_DIR_NAME
    log_dir.mkdir(parents=True)
    snapshot_id, data = log.snapshot(sorted(log.batches)[3])
    (log_dir / snapshot_id.file_name).write_bytes(data)
    tape = CommittedTape({1: tmp_path / "node-1"})
    tape.poll()
    (log_dir / snapshot_id.file_name).unlink()  # pruned by the node: the copy stays
    tape.poll()
    assert tape.snapshots == {snapshot_id: data}


def test_reassignment_ops_round_trip_through_the_history_file(tmp_path: Path, log: LoggedController) -> None:
    moved_and_cancelled(log)
    write_history(tmp_path / "h.jsonl", log.ops)
    assert read_history(tmp_path / "h.jsonl") == log.ops
