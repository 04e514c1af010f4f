"""Work over several turns (raftmeta.controller.work): a broker leaving or returning, split into
turns of bounded scans and bounded batches, writes exactly the records the one-step pass writes,
in order; the controller holds writes while it runs, the QuorumController resumes it once a turn's
batch has committed, and a new controller elects the partitions an interrupted unfence left."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import pytest

from placement import JavaRandom
from raftmeta.controller import Controller, ControllerConfig, ControllerResult, MetadataImage
from raftmeta.controller import topics as topic_handlers
from raftmeta.controller.elections import (
    fence_records,
    fence_steps,
    unfence_records,
    unfence_steps,
    unregister_records,
    unregister_steps,
)
from raftmeta.controller.errors import ControllerFailedError
from raftmeta.controller.quorum import QuorumController
from raftmeta.controller.result import Work
from raftmeta.controller.work import TurnBudget, complete
from raftmeta.raft import RaftConfig, RaftCore
from raftmeta.v1 import controller_pb2, records_pb2

from ..raft.harness import SeededSource
from .helpers import Context, CounterIds, is_working
from .test_quorum_controller import ELECTED_MS, drive, register

Records = list[records_pb2.MetadataRecord]
StepsFactory = Callable[[MetadataImage, int, bool, TurnBudget], object]


def cluster() -> Context:
    """Five brokers; topics of several sizes (one with unclean election on, one whose partitions
    broker 1 is the last in-sync member of, so fencing it makes them leaderless)."""
    ctx = Context(ControllerConfig(auto_leader_rebalance_enable=False))
    ctx.add_brokers([1, 2, 3, 4, 5])
    ctx.create_ok("a", partitions=7, rf=3)
    ctx.create_ok("b", partitions=1, rf=2)
    ctx.create_ok("c", partitions=11, rf=2, configs={"unclean.leader.election.enable": "true"})
    solo = [controller_pb2.ReplicaAssignment(partition_index=i, broker_ids=[b]) for i, b in enumerate((1, 1, 2, 1))]
    ctx.create(controller_pb2.CreatableTopic(name="solo", assignments=solo))
    assert ctx.image.topic_by_name("solo") is not None
    return ctx


def turns(steps: object, image: MetadataImage) -> list[Records]:
    """Every turn's records, each turn sent the image after the ones before it (as the controller
    does)."""
    assert hasattr(steps, "send")
    out: list[Records] = []
    try:
        records = next(steps)  # type: ignore[call-overload]
        while True:
            out.append(list(records))
            image = image.replay_all(records)
            records = steps.send(image)
    except StopIteration as done:
        out.append(list(done.value[1]))
    return out


BUDGETS = [TurnBudget(scan, changes) for scan, changes in itertools.product((1, 2, 5, 100), (1, 3, 100))]


@pytest.mark.parametrize("budget", BUDGETS, ids=lambda b: f"scan{b.partitions_scanned}-changes{b.partition_changes}")
@pytest.mark.parametrize(
    ("steps", "one_step", "broker_kind"),
    [
        (fence_steps, fence_records, "fence_broker"),
        (unregister_steps, unregister_records, "unregister_broker"),
    ],
    ids=["fence", "unregister"],
)
def test_a_broker_leaving_in_turns_writes_the_one_step_records(
    budget: TurnBudget, steps: StepsFactory, one_step: Callable[..., Records], broker_kind: str
) -> None:
    ctx = cluster()
    for unclean in (False, True):
        expected = one_step(ctx.image, 1, unclean)
        split = turns(steps(ctx.image, 1, unclean, budget), ctx.image)
        assert [r for turn in split for r in turn] == expected
        partitions = sum(len(t.partitions) for _, t in ctx.image.topics.iter_items())
        assert len(split) >= -(-partitions // budget.partitions_scanned), "a turn looked at too many partitions"
        for turn in split:
            changes = [r for r in turn if r.HasField("partition_change")]
            assert len(changes) <= budget.partition_changes
        # The broker's own record comes last, alone in the last turn's tail: every committed
        # prefix is a state the cluster can be in (it leads nothing once fenced or gone).
        kinds = [r.WhichOneof("record") for turn in split for r in turn]
        assert kinds[-1] == broker_kind and kinds.count(broker_kind) == 1


@pytest.mark.parametrize("budget", BUDGETS, ids=lambda b: f"scan{b.partitions_scanned}-changes{b.partition_changes}")
def test_a_broker_returning_in_turns_writes_the_one_step_records(budget: TurnBudget) -> None:
    ctx = cluster()
    ctx.fence(1)
    ctx.fence(2)
    leaderless = [
        (t.name, pid) for _, t in ctx.image.topics.iter_items() for pid, p in enumerate(t.partitions) if p.leader == -1
    ]
    assert len(leaderless) >= 3, "the image has partitions only the returning broker can lead"
    expected = unfence_records(ctx.image, 1, False)
    split = turns(unfence_steps(ctx.image, 1, False, budget), ctx.image)
    assert [r for turn in split for r in turn] == expected
    assert split[0][0].HasField("unfence_broker"), "unfenced first: the elections need the broker acceptable"


def run_work(result: ControllerResult[Any], image: MetadataImage) -> tuple[list[Records], Any]:
    """A handler's result driven to its end as the controller does: every turn's records, and
    the response (the last turn's)."""
    split = [list(result.records)]
    work = result.more
    while work is not None:
        image = image.replay_all(split[-1])
        try:
            split.append(list(work.send(image)))
        except StopIteration as done:
            last: ControllerResult[Any] = done.value
            split.append(list(last.records))
            return split, last.response
    return split, result.response


@pytest.mark.parametrize("budget", BUDGETS, ids=lambda b: f"scan{b.partitions_scanned}-changes{b.partition_changes}")
@pytest.mark.parametrize("election", [controller_pb2.ELECTION_TYPE_PREFERRED, controller_pb2.ELECTION_TYPE_UNCLEAN])
def test_an_election_over_every_partition_in_turns_writes_and_answers_as_in_one_step(
    budget: TurnBudget, election: controller_pb2.ElectionType.ValueType
) -> None:
    ctx = cluster()
    # Every other partition led by its second in-sync replica (preferred elections to make),
    # then broker 5 fenced (leaderless partitions and unavailable preferred leaders).
    for _, topic in list(ctx.image.topics.iter_items()):
        for pid, part in enumerate(topic.partitions):
            if pid % 2 == 0 and len(part.isr) > 1:
                change = records_pb2.PartitionChangeRecord(
                    topic_id=topic.topic_id,
                    partition_id=pid,
                    leader=part.isr[1],
                    leader_epoch=part.leader_epoch + 1,
                    partition_epoch=part.partition_epoch + 1,
                )
                ctx.replay([records_pb2.MetadataRecord(partition_change=change)])
    ctx.fence(5)
    request = controller_pb2.ElectLeadersRequest(election_type=election)
    one_step = topic_handlers.elect_leaders(ctx.image, request, 0, ctx.ids, ctx.random, ctx.config)
    assert one_step.more is None, "the default budget takes this image in one turn"
    if election == controller_pb2.ELECTION_TYPE_PREFERRED:
        assert len(one_step.records) >= 5
    small = replace(ctx.config, scan_partitions_per_turn_max=budget.partitions_scanned)
    small = replace(small, partition_changes_per_batch_max=budget.partition_changes)
    split, response = run_work(
        topic_handlers.elect_leaders(ctx.image, request, 0, ctx.ids, ctx.random, small), ctx.image
    )
    assert [r for turn in split for r in turn] == list(one_step.records)
    assert response == one_step.response
    assert all(len(turn) <= budget.partition_changes for turn in split)


def test_complete_refuses_steps_that_yield() -> None:
    ctx = cluster()
    with pytest.raises(AssertionError, match="unbounded budget yielded"):
        complete(fence_steps(ctx.image, 1, False, TurnBudget(1, 1)))


# ---- the controller -------------------------------------------------------------------------------
SMALL_TURNS = ControllerConfig(
    auto_leader_rebalance_enable=False,
    scan_partitions_per_turn_max=4,
    tick_scan_partitions_max=4,
    partition_changes_per_batch_max=2,
)


def controller_over(ctx: Context, config: ControllerConfig = SMALL_TURNS) -> Controller:
    return Controller(ctx.image, config=config, ids=CounterIds(100), committed_offset=len(ctx.log) - 1)


def commit(controller: Controller, offset: int) -> None:
    controller.commit(1, offset)


def test_unregister_runs_over_turns_holding_writes_and_answers_with_its_last_batch() -> None:
    ctx = cluster()
    controller = controller_over(ctx)
    request = controller_pb2.UnregisterBrokerRequest(broker_id=1, request_id="leave-1")
    first = controller.handle("UnregisterBroker", request, 1)
    assert is_working(controller) and not first.done and first.records
    with pytest.raises(RuntimeError, match="work is under way"):
        controller.handle("CreateTopics", controller_pb2.CreateTopicsRequest(), 1)
    assert controller.tick(1) is None, "no timer runs while work is under way"
    offset = 1000
    assert first.response is None, "the first batch answers nobody"
    commit(controller, offset)
    records = list(first.records)
    while is_working(controller):
        handled = controller.resume()
        records.extend(handled.records)
        offset += 1
        if handled.records:
            commit(controller, offset)
        if is_working(controller):
            assert handled.response is None, "a turn before the last answers nobody"
    assert handled.records and handled.method == "UnregisterBroker", "the answer comes with the last batch"
    assert handled.response == controller_pb2.UnregisterBrokerResponse()
    kinds = [r.WhichOneof("record") for r in records]
    assert kinds[-2:] == ["unregister_broker", "request"]
    assert records[:-1] == unregister_records(ctx.image, 1, False)
    assert 1 not in controller.committed_image.brokers
    # A retry of the same request id is answered from the table, writing nothing.
    again = controller.handle("UnregisterBroker", request, 2)
    assert again.done and again.records == ()
    assert again.response == controller_pb2.UnregisterBrokerResponse()


def test_renounce_drops_the_work_under_way() -> None:
    ctx = cluster()
    controller = controller_over(ctx)
    controller.handle(
        "BrokerHeartbeat",
        controller_pb2.BrokerHeartbeatRequest(
            broker_id=1, broker_epoch=ctx.image.brokers[1].epoch, want_shutdown_now=True
        ),
        1,
    )
    assert is_working(controller)
    controller.renounce()
    assert not is_working(controller) and controller.image is controller.committed_image


def test_a_new_controller_elects_the_partitions_an_interrupted_unfence_left_leaderless() -> None:
    """An unfence of many partitions is several batches; a leader lost after the first leaves the
    broker unfenced and partitions it could lead without a leader. Nothing else would elect them:
    the next controller's leaderless check does, in bounded ticks."""
    ctx = cluster()
    ctx.fence(1)
    fenced = ctx.image
    steps = unfence_steps(ctx.image, 1, False, TurnBudget(100, 1))
    first = next(steps)
    assert first[0].HasField("unfence_broker") and len(first) == 1
    ctx.replay(first)  # committed; the leader was lost before the elections
    stuck = [
        (t.name, pid) for _, t in ctx.image.topics.iter_items() for pid, p in enumerate(t.partitions) if p.leader == -1
    ]
    assert stuck and not ctx.image.brokers[1].fenced
    controller = controller_over(ctx)
    controller.activate()
    elected: list[records_pb2.MetadataRecord] = []
    for now in range(1, 50):
        handled = controller.tick(now)
        if handled is not None:
            assert handled.cause == "leaderless partitions elected"
            assert len(handled.records) <= SMALL_TURNS.partition_changes_per_batch_max
            elected.extend(handled.records)
            commit(controller, 1000 + now)
        if controller.leaderless_pass is None:
            break
    assert controller.leaderless_pass is None
    # The elections the unfence would have made, in the same order.
    assert elected == unfence_records(fenced, 1, False)[1:]
    image = controller.committed_image
    assert all(p.leader != -1 for _, t in image.topics.iter_items() for p in t.partitions if 1 in p.isr)


def quorum_with_a_topic() -> QuorumController:
    """A single-voter QuorumController with small turns, three unfenced brokers and topic t
    (12 partitions, RF 2), every answer taken."""

    def make(records: Sequence[records_pb2.MetadataRecord], offset: int) -> Controller:
        controller = Controller.from_snapshot(records, offset, config=SMALL_TURNS) if records else None
        controller = controller or Controller(config=SMALL_TURNS, committed_offset=offset)
        controller.ids = CounterIds()
        controller.random = JavaRandom(1)
        return controller

    core = RaftCore(RaftConfig(node_id=1, voters=(1,), cluster_id="t"), SeededSource(1), 0)
    qc = QuorumController(core, make([], -1), make)
    drive(qc, ELECTED_MS)
    now = ELECTED_MS
    for broker in (1, 2, 3):
        qc.submit(now, broker, "RegisterBroker", register(broker))
        drive(qc, now)
        epoch = qc.controller.image.brokers[broker].epoch
        beat = controller_pb2.BrokerHeartbeatRequest(broker_id=broker, broker_epoch=epoch)
        qc.submit(now, 10 + broker, "BrokerHeartbeat", beat)
        drive(qc, now)
    topic = controller_pb2.CreatableTopic(name="t", num_partitions=12, replication_factor=2)
    qc.submit(now, 20, "CreateTopics", controller_pb2.CreateTopicsRequest(topics=[topic], request_id="t"))
    drive(qc, now)
    assert all(a.error is None for a in qc.take_answers())
    return qc


def test_the_quorum_controller_holds_writes_behind_work_and_answers_reads_meanwhile() -> None:
    qc = quorum_with_a_topic()
    now = ELECTED_MS
    t = qc.controller.image.topic_by_name("t")
    assert t is not None
    touched = sum(1 for p in t.partitions if 1 in p.isr)
    qc.take_events()
    qc.submit(now, 30, "UnregisterBroker", controller_pb2.UnregisterBrokerRequest(broker_id=1))
    assert is_working(qc.controller)
    later = controller_pb2.CreatableTopic(name="later", num_partitions=1, replication_factor=1)
    qc.submit(now, 31, "CreateTopics", controller_pb2.CreateTopicsRequest(topics=[later], request_id="later"))
    qc.submit(now, 32, "DescribeCluster", controller_pb2.DescribeClusterRequest())
    assert qc.waiting_count == 3
    assert qc.deadline(1 << 40) == 1 << 40, "the next turn waits for this turn's batch to commit"
    batches = drive(qc, now)
    answers = [a.key for a in qc.take_answers()]
    assert answers.index(32) < answers.index(30) < answers.index(31), answers
    # The first turn's batch was appended at submit; then one per turn, then the held create.
    turns_needed = -(-touched // SMALL_TURNS.partition_changes_per_batch_max)
    assert batches >= turns_needed >= 3, "a batch per turn"
    image = qc.controller.committed_image
    assert 1 not in image.brokers and image.topic_by_name("later") is not None
    # Log lines: the first turn's partitions, the broker's own line, then one line for the work.
    events = qc.take_events()
    partition_lines = [e for e, _ in events if e.startswith("partition")]
    assert 0 < len(partition_lines) <= SMALL_TURNS.partition_changes_per_batch_max
    assert [e for e, _ in events if e.startswith("broker")] == ["broker unregistered"]
    [finished] = [fields for e, fields in events if e == "controller work finished"]
    assert finished["cause"] == "UnregisterBroker" and finished["batches"] == turns_needed
    assert finished["records"] == touched + 1  # a change per partition, then the unregistration
    assert all(1 not in p.isr and p.leader != 1 for p in image.topic_by_name("t").partitions)  # type: ignore[union-attr]


def test_a_turn_that_fails_answers_internal_and_the_held_writes_go_on() -> None:
    """A bug in a later turn must not end the node task (nor stop the controller for good): the
    request is answered INTERNAL, the work is dropped, and the writes held behind it are handled."""
    qc = quorum_with_a_topic()
    now = ELECTED_MS
    qc.submit(now, 30, "UnregisterBroker", controller_pb2.UnregisterBrokerRequest(broker_id=1))
    assert is_working(qc.controller)
    work = qc.controller._work
    assert work is not None

    def broken() -> Work[Any]:
        yield []
        raise ValueError("a bug in the second turn")

    steps = broken()
    next(steps)  # as if its first turn ran: the next turn raises
    qc.controller._work = replace(work, steps=steps)
    later = controller_pb2.CreatableTopic(name="later", num_partitions=1, replication_factor=1)
    qc.submit(now, 31, "CreateTopics", controller_pb2.CreateTopicsRequest(topics=[later], request_id="later"))
    drive(qc, now)
    answers = {a.key: a for a in qc.take_answers()}
    assert isinstance(answers[30].error, ControllerFailedError) and "a bug in the second turn" in str(answers[30].error)
    assert answers[31].error is None and not is_working(qc.controller)
    assert qc.controller.committed_image.topic_by_name("later") is not None
    assert any(event == "controller work failed" for event, _ in qc.take_events())
