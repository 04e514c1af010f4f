"""The request lifecycle's rules (raftmeta/controller/lifecycle.py): the transitions table, the
offset-keyed table of pending work, and the QuorumController keeping to both -- every request
answered exactly once, and one NOT_CONTROLLER per request on renounce."""

from __future__ import annotations

import pytest

from raftmeta.controller.errors import NotControllerError
from raftmeta.controller.lifecycle import (
    NEW,
    TRANSITIONS,
    Event,
    IllegalTransitionError,
    Pending,
    PendingTable,
    State,
)
from raftmeta.controller.quorum import QuorumController
from raftmeta.raft import RaftConfig, RaftCore, Role
from raftmeta.v1 import controller_pb2

from ..raft.harness import SeededSource
from .test_quorum_controller import ELECTED_MS, active, create, drive, make_controller, register


def pending(key: int = 1) -> Pending:
    return Pending(key, "CreateTopics", controller_pb2.CreateTopicsRequest())


def test_every_state_is_reachable_and_only_answered_and_failed_are_final() -> None:
    reachable: set[State | None] = {NEW}
    while True:
        more = {after for (before, _), after in TRANSITIONS.items() if before in reachable} - reachable
        if not more:
            break
        reachable |= more
    assert reachable == {NEW, *State}
    sources = {before for before, _ in TRANSITIONS}
    assert {state for state in State if state not in sources} == {State.ANSWERED, State.FAILED}


def test_a_move_the_table_does_not_allow_is_a_loud_error() -> None:
    request = pending()
    request.move(Event.STAGE)
    request.move(Event.APPEND)
    with pytest.raises(IllegalTransitionError, match=r"CreateTopics \(key 1\): no transition from appended on stage"):
        request.move(Event.STAGE)
    request.move(Event.ANSWER)
    for event in Event:  # an answered request never moves again: no second answer, no late failure
        with pytest.raises(IllegalTransitionError):
            request.move(event)
    assert request.state is State.ANSWERED
    with pytest.raises(IllegalTransitionError, match="from new on confirm"):
        pending().move(Event.CONFIRM)


def test_the_table_completes_offsets_in_order_and_knows_its_own_batches() -> None:
    table = PendingTable()
    a, b, read = pending(1), pending(2), pending(3)
    table.add_batches(10, 2)
    table.add(10, a)
    table.add_batches(14, 1)
    table.add(14, b)
    table.add(7, read)  # a confirmed read below the batches
    assert table.has_own and table.request_count == 3
    with pytest.raises(ValueError, match="already holds"):
        table.add_batches(10, 1)
    assert [slot.offset for slot in table.complete_up_to(9)] == [7]
    assert table.take_own(12) == 0, "no batch of ours ends there"
    assert table.take_own(10) == 2
    assert table.take_own(10) == 0, "taken once"
    assert table.has_own, "the batch at 14 is still ours"
    done = table.complete_up_to(14)
    assert [(slot.offset, slot.requests) for slot in done] == [(10, [a]), (14, [b])]
    assert (table.has_own, table.request_count, len(table)) == (False, 0, 0)


def test_renounce_fails_each_waiting_request_once_with_one_not_controller() -> None:
    """Appended, waiting behind an appended batch, staged in the open batch, reading: a deposed
    leader answers each request once, with one NotControllerError, and nothing is left waiting."""
    qc = active()
    qc.submit(ELECTED_MS, 1, "CreateTopics", create("a", "r-a"))
    drive(qc, ELECTED_MS, flush=False)  # appended, not durable: waits for its offset
    no_records = controller_pb2.CreateTopicsRequest(topics=[controller_pb2.CreatableTopic(name="a")])
    qc.submit(ELECTED_MS, 2, "CreateTopics", no_records)  # refused per topic: waits behind batch 1
    qc.submit(ELECTED_MS, 3, "CreateTopics", create("b", "r-b"))  # in the open batch
    qc.submit(ELECTED_MS, 4, "DescribeTopics", controller_pb2.DescribeTopicsRequest())  # a read-index round
    assert qc.take_answers() == [] and qc.waiting_count == 4
    qc.core.resign(ELECTED_MS)
    ready = qc.take_ready()
    assert ready.soft_state is not None and ready.soft_state.role is Role.RESIGNED
    answers = qc.take_answers()
    assert sorted(a.key for a in answers) == [1, 2, 3, 4]
    assert all(isinstance(a.error, NotControllerError) and a.response is None for a in answers)
    assert qc.waiting_count == 0
    drive(qc, ELECTED_MS)
    assert qc.take_answers() == [], "no second answer"


def test_a_request_whose_open_batch_the_log_refused_fails_with_it() -> None:
    """A full open batch is proposed before the next request joins; if the log refuses it (too
    many uncommitted batches), the QuorumController renounces its pending state -- including the
    pending batch the joining request's records just made -- so that request fails too, rather
    than being proposed later without a batch in the Controller behind it."""
    core = RaftCore(RaftConfig(node_id=1, voters=(1,), cluster_id="t", max_uncommitted_batches=1), SeededSource(1), 0)
    qc = QuorumController(core, make_controller([], -1), make_controller)
    drive(qc, ELECTED_MS)
    qc.submit(ELECTED_MS, 100, "RegisterBroker", register(1))
    drive(qc, ELECTED_MS)
    epoch = qc.controller.image.brokers[1].epoch
    beat = controller_pb2.BrokerHeartbeatRequest(broker_id=1, broker_epoch=epoch)
    qc.submit(ELECTED_MS, 101, "BrokerHeartbeat", beat)
    drive(qc, ELECTED_MS)
    assert [a.error for a in qc.take_answers()] == [None, None]
    big = 10_000  # partitions (the most one request may create): two such creates pass 512 KiB
    for key, name in ((1, "a"), (2, "b")):
        topic = controller_pb2.CreatableTopic(name=name, num_partitions=big, replication_factor=1)
        qc.submit(ELECTED_MS, key, "CreateTopics", controller_pb2.CreateTopicsRequest(topics=[topic], request_id=name))
        if key == 1:
            drive(qc, ELECTED_MS, flush=False)  # appended, not committed: the log is at its limit
    qc.submit(ELECTED_MS, 3, "CreateTopics", create("c", "r-c"))  # in the open batch with b
    topic = controller_pb2.CreatableTopic(name="d", num_partitions=big, replication_factor=1)
    qc.submit(ELECTED_MS, 4, "CreateTopics", controller_pb2.CreateTopicsRequest(topics=[topic], request_id="d"))
    answers = {a.key: a for a in qc.take_answers()}
    assert sorted(answers) == [1, 2, 3, 4], "every request waiting or refused with the open batch is answered"
    assert all(isinstance(a.error, NotControllerError) for a in answers.values())
    assert qc.waiting_count == 0 and qc.controller.pending_count == 0
    qc.on_log_flushed(ELECTED_MS, qc.core.log_end_offset, 1 << 40)
    drive(qc, ELECTED_MS)  # a's batch commits: replayed as a foreign batch, and nothing breaks
    assert qc.controller.committed_image.topic_by_name("a") is not None
    assert qc.take_answers() == []
