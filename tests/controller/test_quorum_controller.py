"""The QuorumController, driven in-process the way the node drives it (no IO): held requests until
the leader's first commit, NOT_CONTROLLER off the leader, one log batch for the open batch,
renouncing on leadership loss, a handler bug answered instead of raised, the snapshot policy."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from placement import JavaRandom
from raftmeta.controller import Controller
from raftmeta.controller.errors import ControllerFailedError, NotControllerError, RequestError
from raftmeta.controller.quorum import Answer, QuorumController, QuorumControllerConfig
from raftmeta.raft import Envelope, QuorumStateData, RaftConfig, RaftCore, Role
from raftmeta.records import codec
from raftmeta.records.kafka.mapping import METADATA_VERSION, METADATA_VERSION_FEATURE
from raftmeta.v1 import controller_pb2, errors_pb2, raft_pb2, records_pb2

from ..raft.harness import SeededSource

ELECTED_MS = 10_000  # past any election timeout of a single voter


def make_controller(records: Sequence[records_pb2.MetadataRecord], offset: int) -> Controller:
    controller = Controller.from_snapshot(records, offset) if records else Controller()
    controller.ids = iter(bytes([i]) * 16 for i in range(1, 1000)).__next__
    controller.random = JavaRandom(1)
    return controller


def quorum(
    voters: tuple[int, ...] = (1,),
    state: QuorumStateData | None = None,
    config: QuorumControllerConfig | None = None,
) -> QuorumController:
    core = RaftCore(RaftConfig(node_id=1, voters=voters, cluster_id="t"), SeededSource(1), 0, quorum_state=state)
    return QuorumController(core, make_controller([], -1), make_controller, config=config)


def drive(qc: QuorumController, now: int, *, flush: bool = True) -> int:
    """Perform Readies until none is left (an fsync completes at once when ``flush``); the
    number of log batches appended."""
    appended = 0
    qc.poll(now)
    for _ in range(100):
        ready = qc.take_ready()
        if ready.is_empty():
            return appended
        appended += len(ready.append)
        if ready.flush and flush:
            qc.on_log_flushed(now, qc.core.log_end_offset, ready.seq)
        if ready.committed:
            qc.apply_committed(now, ready.committed)
        qc.poll(now)
    raise AssertionError("the quorum controller never went quiet")


def register(broker_id: int) -> controller_pb2.RegisterBrokerRequest:
    return controller_pb2.RegisterBrokerRequest(broker_id=broker_id, incarnation_id=bytes([broker_id]) * 16)


def create(name: str, request_id: str) -> controller_pb2.CreateTopicsRequest:
    topic = controller_pb2.CreatableTopic(name=name, num_partitions=2, replication_factor=1)
    return controller_pb2.CreateTopicsRequest(topics=[topic], request_id=request_id)


def active() -> QuorumController:
    qc = quorum()
    drive(qc, ELECTED_MS)
    assert qc.is_leader and qc.active
    qc.submit(ELECTED_MS, 100, "RegisterBroker", register(1))
    drive(qc, ELECTED_MS)
    epoch = qc.controller.image.brokers[1].epoch
    qc.submit(
        ELECTED_MS, 101, "BrokerHeartbeat", controller_pb2.BrokerHeartbeatRequest(broker_id=1, broker_epoch=epoch)
    )
    drive(qc, ELECTED_MS)
    assert [a.error for a in qc.take_answers()] == [None, None]
    assert not qc.controller.image.brokers[1].fenced
    return qc


def test_off_the_leader_every_request_is_answered_not_controller_naming_the_leader() -> None:
    qc = quorum(voters=(1, 2, 3), state=QuorumStateData(4, leader_id=2, voted_id=2))
    qc.submit(5, 7, "RegisterBroker", register(1))
    [answer] = qc.take_answers()
    assert answer.key == 7 and isinstance(answer.error, NotControllerError) and answer.error.leader_id == 2


def test_requests_before_the_leaders_first_commit_are_held_then_answered() -> None:
    qc = quorum()
    qc.poll(ELECTED_MS)  # elected: the LeaderChangeRecord is appended, not yet committed
    assert qc.is_leader and not qc.active
    qc.submit(ELECTED_MS, 1, "RegisterBroker", register(1))
    assert qc.take_answers() == [] and qc.waiting_count == 1
    drive(qc, ELECTED_MS)
    [answer] = qc.take_answers()
    assert answer.key == 1 and answer.error is None
    assert isinstance(answer.response, controller_pb2.RegisterBrokerResponse)
    assert ("controller active", {"epoch": 1, "committed_offset": 0}) in qc.take_events()
    assert 1 in qc.controller.committed_image.brokers


def test_requests_with_request_ids_share_one_log_batch() -> None:
    qc = active()
    qc.submit(ELECTED_MS, 1, "CreateTopics", create("a", "r-a"))
    qc.submit(ELECTED_MS, 2, "CreateTopics", create("b", "r-b"))
    assert drive(qc, ELECTED_MS) == 1, "the open batch is one log batch"
    answers = {a.key: a for a in qc.take_answers()}
    assert sorted(answers) == [1, 2]
    for key, name in ((1, "a"), (2, "b")):
        response = answers[key].response
        assert isinstance(response, controller_pb2.CreateTopicsResponse)
        assert response.topics[0].name == name and response.topics[0].error_code == 0
    assert set(qc.controller.committed_image.topic_ids) == {"a", "b"}


def test_an_answer_waits_for_the_commit() -> None:
    qc = active()
    qc.submit(ELECTED_MS, 1, "CreateTopics", create("a", "r-a"))
    drive(qc, ELECTED_MS, flush=False)
    assert qc.take_answers() == [], "appended, not durable, not committed: no answer yet"
    qc.on_log_flushed(ELECTED_MS, qc.core.log_end_offset, 1 << 40)
    drive(qc, ELECTED_MS)
    assert [a.key for a in qc.take_answers()] == [1]


def test_the_planted_ack_before_commit_bug_answers_early() -> None:
    qc = active()
    qc.config = QuorumControllerConfig(unsafe_ack_before_commit=True)
    qc.submit(ELECTED_MS, 1, "CreateTopics", create("a", "r-a"))
    drive(qc, ELECTED_MS, flush=False)
    assert [a.key for a in qc.take_answers()] == [1]


def test_losing_leadership_fails_every_waiting_request_and_rolls_back() -> None:
    qc = active()
    qc.submit(ELECTED_MS, 1, "CreateTopics", create("a", "r-a"))
    drive(qc, ELECTED_MS, flush=False)
    assert "a" in qc.controller.image.topic_ids
    qc.core.resign(ELECTED_MS)
    ready = qc.take_ready()
    assert ready.soft_state is not None and ready.soft_state.role is Role.RESIGNED
    [answer] = qc.take_answers()
    assert answer.key == 1 and isinstance(answer.error, NotControllerError)
    assert not qc.active and qc.waiting_count == 0
    assert "a" not in qc.controller.image.topic_ids, "the working image rolled back"


def test_a_bad_request_and_a_handler_bug_are_answers_not_crashes(monkeypatch: pytest.MonkeyPatch) -> None:
    qc = active()
    qc.submit(ELECTED_MS, 1, "NoSuchMethod", register(1))
    [bad] = qc.take_answers()
    assert isinstance(bad.error, RequestError)

    def broken(*_args: object, **_kwargs: object) -> None:
        raise KeyError("a handler bug")

    monkeypatch.setattr(qc.controller, "handle", broken)
    qc.submit(ELECTED_MS, 2, "CreateTopics", create("a", "r-a"))
    [failed] = qc.take_answers()
    assert failed == Answer(2, None, failed.error)
    assert isinstance(failed.error, ControllerFailedError) and isinstance(failed.error.__cause__, KeyError)
    assert qc.is_leader and qc.active, "the node keeps serving"


def test_a_snapshot_is_due_every_interval_of_committed_records() -> None:
    qc = quorum(config=QuorumControllerConfig(snapshot_interval_records=3))
    drive(qc, ELECTED_MS)
    for broker in range(1, 4):
        qc.submit(ELECTED_MS, broker, "RegisterBroker", register(broker))
        drive(qc, ELECTED_MS)
    due = qc.take_snapshot_due()  # 3 records: the LeaderChangeRecord, metadata.version, a registration
    assert due is not None and (due.end_offset, due.epoch) == (3, 1)
    assert set(due.image.brokers) == {1}
    qc.submit(ELECTED_MS, 9, "RegisterBroker", register(4))
    drive(qc, ELECTED_MS)
    assert qc.take_snapshot_due() is None, "one snapshot at a time"


def describe(
    consistency: controller_pb2.ReadConsistency.ValueType = controller_pb2.LINEARIZABLE,
) -> controller_pb2.DescribeTopicsRequest:
    return controller_pb2.DescribeTopicsRequest(consistency=consistency)


def test_a_linearizable_read_waits_for_its_read_index_round_then_sees_every_commit() -> None:
    qc = active()
    qc.submit(ELECTED_MS, 1, "CreateTopics", create("a", "r-a"))
    drive(qc, ELECTED_MS)
    assert [a.key for a in qc.take_answers()] == [1]  # acknowledged
    qc.submit(ELECTED_MS, 2, "DescribeTopics", describe())
    qc.submit(ELECTED_MS, 3, "CreateTopics", create("b", "r-b"))  # concurrent with the read
    assert qc.take_answers() == [], "a read is answered after its round, not at once"
    drive(qc, ELECTED_MS)
    answers = {a.key: a for a in qc.take_answers()}
    response = answers[2].response
    assert isinstance(response, controller_pb2.DescribeTopicsResponse)
    assert "a" in [t.name for t in response.topics], "a write acknowledged before the read is visible"


def refused_create_of_an_existing_topic(qc: QuorumController) -> None:
    qc.submit(ELECTED_MS, 1, "CreateTopics", create("a", "r-a"))
    drive(qc, ELECTED_MS)
    assert [a.key for a in qc.take_answers()] == [1]
    qc.submit(ELECTED_MS, 2, "CreateTopics", create("a", "r-a-again"))  # refused: no records


def test_a_write_refused_from_the_image_waits_for_a_read_index_round() -> None:
    """A refusal is a read of the leader's image: answered at once, a leader deposed without
    knowing it refuses from a stale image (the plane's linearizability check, seed 5542)."""
    qc = active()
    refused_create_of_an_existing_topic(qc)
    assert qc.take_answers() == [], "a refusal is answered after its round, not at once"
    drive(qc, ELECTED_MS)
    [answer] = qc.take_answers()
    assert answer.key == 2 and isinstance(answer.response, controller_pb2.CreateTopicsResponse)
    assert [t.error_code for t in answer.response.topics] == [errors_pb2.TOPIC_ALREADY_EXISTS]


def test_a_leader_deposed_before_its_round_answers_a_refusal_not_controller() -> None:
    qc = active()
    refused_create_of_an_existing_topic(qc)
    qc.core.resign(ELECTED_MS)
    drive(qc, ELECTED_MS)
    [answer] = qc.take_answers()
    assert answer.key == 2 and isinstance(answer.error, NotControllerError)


def test_off_the_leader_a_linearizable_read_is_not_controller_and_a_stale_one_is_answered() -> None:
    qc = quorum(voters=(1, 2, 3), state=QuorumStateData(4, leader_id=2, voted_id=2))
    qc.submit(5, 1, "DescribeTopics", describe())
    qc.submit(5, 2, "DescribeTopics", describe(controller_pb2.STALE))
    first, second = qc.take_answers()
    assert isinstance(first.error, NotControllerError)
    assert isinstance(second.response, controller_pb2.DescribeTopicsResponse) and second.error is None


def test_losing_leadership_fails_the_reads_in_their_round() -> None:
    qc = quorum(voters=(1, 2, 3))
    qc.core.poll(ELECTED_MS)  # a candidate of a three-voter quorum, not a leader: no round can start
    qc.submit(ELECTED_MS, 1, "DescribeTopics", describe())
    [answer] = qc.take_answers()
    assert isinstance(answer.error, NotControllerError)


def test_a_stale_read_of_a_write_is_refused() -> None:
    qc = active()
    with pytest.raises(RequestError, match="not a read"):
        qc.read_stale(ELECTED_MS, "CreateTopics", create("a", "r-a"))


def resign_and_lead_again(qc: QuorumController) -> int:
    """The single voter resigns and is elected again a minute later; the time it leads again."""
    qc.core.resign(ELECTED_MS)
    drive(qc, ELECTED_MS)
    later = ELECTED_MS + 60_000
    for now in range(later, later + 20_000, 500):
        drive(qc, now)
        if qc.is_leader and qc.active:
            return now
    raise AssertionError("the single voter is not elected again")


def test_a_node_elected_again_gives_every_broker_a_fresh_session() -> None:
    """Heartbeat times from an earlier leadership are stale: the brokers heartbeated to other
    controllers meanwhile. Kept, they fenced every broker at the first tick of the node's next
    leadership (found by tests/integration/test_brokers_heal.py)."""
    qc = active()
    qc.controller.last_contact_ms[1] = 0  # as the node left it when it stopped leading long ago
    now = resign_and_lead_again(qc)
    qc.tick(now)
    drive(qc, now)
    assert not qc.controller.image.brokers[1].fenced, "a fresh session, not the stale one"
    qc.tick(now + 9_001)
    drive(qc, now + 9_001)
    assert qc.controller.image.brokers[1].fenced, "a broker silent for a whole session is fenced"


def fetch_from(qc: QuorumController, now: int, replica: int, correlation_id: int) -> None:
    """Replica ``replica`` fetches at the leader's log end (it has everything: caught up)."""
    log = qc.core.log
    request = raft_pb2.FetchRequest(
        cluster_id="t",
        replica_id=replica,
        replica_epoch=qc.core.epoch,
        fetch_offset=log.end_offset,
        last_fetched_epoch=log.last_epoch,
        max_wait_ms=0,
        max_bytes=1 << 20,
    )
    qc.step(now, Envelope(replica, 1, correlation_id, request))
    drive(qc, now)


def test_a_voter_change_is_answered_once_committed_on_a_majority_of_the_new_set() -> None:
    qc = quorum()
    drive(qc, ELECTED_MS)
    now = ELECTED_MS
    add = controller_pb2.AddRaftVoterRequest(voter_id=2, voter_directory_id=bytes(range(16)))
    qc.submit(now, 1, "AddRaftVoter", add)
    [refused] = qc.take_answers()  # node 2 never fetched: not a caught-up observer
    assert isinstance(refused.response, controller_pb2.AddRaftVoterResponse)
    assert refused.response.error_code == errors_pb2.REQUEST_TIMED_OUT
    fetch_from(qc, now, 2, 1)
    qc.submit(now, 2, "AddRaftVoter", add)
    drive(qc, now)
    assert qc.take_answers() == [] and qc.core.voters == (1, 2)  # in force, not committed: 1 of 2
    fetch_from(qc, now + 1, 2, 2)
    [added] = qc.take_answers()
    assert added.key == 2 and added.response == controller_pb2.AddRaftVoterResponse()
    # The leader removes itself: it is answered, then hands over (it resigns in the same step).
    qc.submit(now + 2, 3, "RemoveRaftVoter", controller_pb2.RemoveRaftVoterRequest(voter_id=1))
    drive(qc, now + 2)
    assert qc.is_leader and list(qc.core.voters) == [2]
    fetch_from(qc, now + 3, 2, 3)
    [removed] = qc.take_answers()
    assert removed.key == 3 and removed.response == controller_pb2.RemoveRaftVoterResponse()
    assert qc.core.role is Role.RESIGNED


def test_a_leader_that_removed_itself_answers_the_removal_even_when_a_proposal_is_refused_after_it() -> None:
    """The Fetch that commits the removal makes the leader resign in the same step; a request
    waiting in the open batch is then proposed and refused. Its refusal fails what is pending --
    not the removal, which committed (found by `raftmeta chaos --faults membership,partition`: the
    removal was answered NOT_CONTROLLER, and the client's retry VOTER_NOT_FOUND)."""
    qc = active()  # broker 1 registered and unfenced
    now = ELECTED_MS
    for key, voter in ((1, 2), (2, 3)):
        fetch_from(qc, now, voter, key)
        qc.submit(now, key, "AddRaftVoter", controller_pb2.AddRaftVoterRequest(voter_id=voter))
        drive(qc, now)
        fetch_from(qc, now, 2, 10 + key)
        fetch_from(qc, now, 3, 20 + key)
    assert [a.key for a in qc.take_answers()] == [1, 2] and qc.core.voters == (1, 2, 3)
    qc.submit(now + 2, 3, "RemoveRaftVoter", controller_pb2.RemoveRaftVoterRequest(voter_id=1))
    drive(qc, now + 2)
    end = qc.core.log.end_offset
    qc.submit(now + 2, 4, "CreateTopics", create("t", "r-1"))  # waits in the open batch: the removal is in flight
    drive(qc, now + 2)
    fetch_from(qc, now + 3, 2, 30)  # one of the new set (2, 3): not committed yet
    assert qc.take_answers() == [] and qc.core.log.end_offset == end
    fetch_from(qc, now + 3, 3, 31)  # commits the removal: the leader resigns in this step
    answers = {a.key: a for a in qc.take_answers()}
    assert answers[3].response == controller_pb2.RemoveRaftVoterResponse() and answers[3].error is None
    assert isinstance(answers[4].error, NotControllerError)
    assert qc.core.role is Role.RESIGNED


def test_a_voter_change_pending_when_leadership_is_lost_is_answered_not_controller() -> None:
    qc = quorum()
    drive(qc, ELECTED_MS)
    now = ELECTED_MS
    fetch_from(qc, now, 2, 1)
    qc.submit(now, 5, "AddRaftVoter", controller_pb2.AddRaftVoterRequest(voter_id=2))
    drive(qc, now)
    assert qc.take_answers() == []
    vote = raft_pb2.VoteRequest(
        cluster_id="t", candidate_id=2, candidate_epoch=qc.core.epoch + 1, last_offset_epoch=0, last_offset=0
    )
    qc.step(now + 1, Envelope(2, 1, 9, vote))  # a higher epoch: this leader is deposed
    drive(qc, now + 1)
    [lost] = qc.take_answers()
    assert lost.key == 5 and isinstance(lost.error, NotControllerError)


def logged_kinds(qc: QuorumController) -> list[list[str]]:
    """The record kinds of each batch of the leader's log, in order."""
    out = []
    for entry in qc.core.log.entries():
        raw = codec.split_records(entry.data, codec.check_batch(entry.data))
        out.append([str(records_pb2.MetadataRecord.FromString(r).WhichOneof("record")) for r in raw])
    return out


def test_the_first_leader_writes_metadata_version_before_the_requests_it_held() -> None:
    """Kafka's controller writes its bootstrap records into an empty log when it activates; a
    Kafka broker's metadata loader publishes nothing until metadata.version is set."""
    qc = quorum()
    qc.poll(ELECTED_MS)
    qc.submit(ELECTED_MS, 1, "RegisterBroker", register(1))
    drive(qc, ELECTED_MS)
    assert [a.error for a in qc.take_answers()] == [None]
    assert logged_kinds(qc) == [["leader_change"], ["feature_level"], ["register_broker"]]
    image = qc.controller.committed_image
    assert image.feature_level(METADATA_VERSION_FEATURE) == METADATA_VERSION
    events = dict(qc.take_events())
    assert events["bootstrap records appended"] == {"epoch": 1, "offset": 1, "records": 1}


def test_a_leader_whose_image_has_metadata_version_writes_no_second_one() -> None:
    qc = active()
    resign_and_lead_again(qc)
    assert sum(kinds.count("feature_level") for kinds in logged_kinds(qc)) == 1


def test_a_leader_of_a_log_written_without_metadata_version_writes_it() -> None:
    """A quorum whose log predates the bootstrap records (topics, no feature level) gets them
    from its next leader: Kafka's brokers can join it too."""
    topic = records_pb2.MetadataRecord(topic=records_pb2.TopicRecord(name="old", topic_id=b"\x07" * 16))
    core = RaftCore(RaftConfig(node_id=1, voters=(1,), cluster_id="t"), SeededSource(1), 0)
    qc = QuorumController(core, make_controller([topic], 0), make_controller)
    assert qc.controller.image.feature_level(METADATA_VERSION_FEATURE) is None
    drive(qc, ELECTED_MS)
    assert qc.controller.committed_image.feature_level(METADATA_VERSION_FEATURE) == METADATA_VERSION
    assert "old" in qc.controller.committed_image.topic_ids


# Every Controller method that changes it (its properties are reads of the image).
CONTROLLER_MUTATORS = ("handle", "commit", "apply_committed", "resume", "tick", "activate", "renounce")


def test_a_create_crosses_into_the_controller_once_and_its_batch_commits_by_offset() -> None:
    """The request crosses the QuorumController/Controller seam once (``handle``); what follows is
    the batch's, not the request's: one ``commit`` of a count of pending batches at the offset the
    log gave it -- no request key, no second path of the new topic into the image."""
    qc = active()
    controller = qc.controller
    crossings: list[tuple[str, tuple[object, ...]]] = []

    def recording(name: str) -> Callable[..., Any]:
        method = getattr(controller, name)

        def recorded(*args: object) -> Any:
            crossings.append((name, args))
            return method(*args)

        return recorded

    for name in CONTROLLER_MUTATORS:
        setattr(controller, name, recording(name))
    qc.submit(ELECTED_MS, 1, "CreateTopics", create("a", "r-a"))
    drive(qc, ELECTED_MS)
    [answer] = qc.take_answers()
    assert answer.key == 1 and answer.error is None
    assert [(name, args[0]) for name, args in crossings] == [("handle", "CreateTopics"), ("commit", 1)]
    assert crossings[1][1] == (1, qc.core.high_watermark - 1)
    assert "a" in qc.controller.committed_image.topic_ids
