"""Epochs from the future and senders outside the voter set, handled as KafkaRaftClient does:
validateVoterOnlyRequest before a Vote, BeginQuorumEpoch or EndQuorumEpoch moves anything,
validateLeaderOnlyRequest for Fetch and FetchSnapshot (a fetcher's epoch never moves the leader's),
and responses that teach an epoch but never a leader outside the voter set."""

from __future__ import annotations

from google.protobuf.message import Message

from raftmeta.raft import Envelope, QuorumStateData, RaftConfig, RaftCore, Role
from raftmeta.raft.types import NO_LEADER, NO_VOTE
from raftmeta.v1 import errors_pb2, raft_pb2

from .harness import Net, SeededSource

VOTERS = (1, 2, 3)
OBSERVER = 9


def core_at(node: int, epoch: int, leader: int = NO_LEADER, voted: int = NO_VOTE) -> RaftCore:
    core = RaftCore(
        RaftConfig(node_id=node, voters=VOTERS, cluster_id="t"),
        SeededSource(node),
        0,
        quorum_state=QuorumStateData(epoch, leader, voted),
    )
    core.take_ready()
    return core


def answer(core: RaftCore, source: int, request: Message) -> tuple[Message, QuorumStateData | None]:
    """Step ``request`` from ``source``; its direct answer and the quorum state the Ready persists."""
    core.step(1, Envelope(source, core.node_id, 77, request))  # type: ignore[arg-type]
    ready = core.take_ready()
    [reply] = [e for e in ready.messages if e.correlation_id == 77]
    return reply.message, ready.quorum_state


def vote(candidate: int, epoch: int, *, pre: bool = False) -> raft_pb2.VoteRequest:
    return raft_pb2.VoteRequest(
        cluster_id="t", candidate_id=candidate, candidate_epoch=epoch, last_offset_epoch=0, last_offset=0, pre_vote=pre
    )


def begin(leader: int, epoch: int) -> raft_pb2.BeginQuorumEpochRequest:
    return raft_pb2.BeginQuorumEpochRequest(cluster_id="t", leader_id=leader, leader_epoch=epoch)


def end(leader: int, epoch: int) -> raft_pb2.EndQuorumEpochRequest:
    return raft_pb2.EndQuorumEpochRequest(cluster_id="t", leader_id=leader, leader_epoch=epoch, preferred_successors=[])


def fetch(replica: int, epoch: int) -> raft_pb2.FetchRequest:
    return raft_pb2.FetchRequest(cluster_id="t", replica_id=replica, replica_epoch=epoch, max_bytes=1000)


def elected() -> tuple[Net, int]:
    net = Net(list(VOTERS))
    leader = net.elect()
    net.advance(100)
    return net, leader


# -- Fetch and FetchSnapshot: leader-only, a newer epoch is UNKNOWN_LEADER_EPOCH -----------------------
def test_a_fetch_from_a_newer_epoch_is_unknown_to_the_leader_and_moves_nothing() -> None:
    net, leader = elected()
    core = net.cores[leader]
    epoch, end_offset = core.epoch, core.log_end_offset
    follower = next(v for v in VOTERS if v != leader)
    response, persisted = answer(core, follower, fetch(follower, epoch + 1000))
    assert isinstance(response, raft_pb2.FetchResponse)
    assert response.error_code == errors_pb2.UNKNOWN_LEADER_EPOCH
    assert (response.leader_id, response.leader_epoch) == (leader, epoch)
    assert persisted is None
    assert (core.role, core.epoch, core.log_end_offset) == (Role.LEADER, epoch, end_offset)


def test_a_fetch_snapshot_from_a_newer_epoch_is_unknown_to_the_leader() -> None:
    net, leader = elected()
    core = net.cores[leader]
    epoch = core.epoch
    follower = next(v for v in VOTERS if v != leader)
    request = raft_pb2.FetchSnapshotRequest(cluster_id="t", replica_id=follower, replica_epoch=epoch + 1)
    response, persisted = answer(core, follower, request)
    assert isinstance(response, raft_pb2.FetchSnapshotResponse)
    assert response.error_code == errors_pb2.UNKNOWN_LEADER_EPOCH
    assert persisted is None and (core.role, core.epoch) == (Role.LEADER, epoch)


def test_a_follower_asked_for_a_fetch_from_a_newer_epoch_does_not_adopt_it() -> None:
    core = core_at(2, epoch=5, leader=1)
    response, persisted = answer(core, 3, fetch(3, 9))
    assert isinstance(response, raft_pb2.FetchResponse)
    assert response.error_code == errors_pb2.UNKNOWN_LEADER_EPOCH
    assert persisted is None and (core.role, core.epoch, core.leader_id) == (Role.FOLLOWER, 5, 1)


def test_a_stale_fetch_is_fenced_by_a_non_leader_too() -> None:
    # validateLeaderOnlyRequest's order: an older epoch is FENCED_LEADER_EPOCH on any node, with the
    # node's leader and epoch in the answer so the fetcher catches up.
    core = core_at(2, epoch=5, leader=1)
    response, _ = answer(core, 3, fetch(3, 4))
    assert isinstance(response, raft_pb2.FetchResponse)
    assert response.error_code == errors_pb2.FENCED_LEADER_EPOCH
    assert (response.leader_id, response.leader_epoch) == (1, 5)
    same, _ = answer(core, 3, fetch(3, 5))
    assert isinstance(same, raft_pb2.FetchResponse)
    assert same.error_code == errors_pb2.NOT_LEADER_OR_FOLLOWER


def test_a_fetch_that_claims_to_be_the_leader_itself_or_no_node_is_invalid() -> None:
    net, leader = elected()
    core = net.cores[leader]
    for replica in (leader, -1):
        response, _ = answer(core, replica, fetch(replica, core.epoch))
        assert isinstance(response, raft_pb2.FetchResponse)
        assert response.error_code == errors_pb2.INVALID_REQUEST
    assert core.replica_end_offsets().keys() == set(VOTERS), "no phantom observer was recorded"


# -- Vote: checked before any epoch moves (membership is not: KIP-853) ----------------------------------------
def test_a_vote_from_a_newer_epoch_of_a_voter_is_followed_per_protocol() -> None:
    core = core_at(2, epoch=5, leader=1)
    response, persisted = answer(core, 3, vote(3, 9))
    assert isinstance(response, raft_pb2.VoteResponse)
    assert response.error_code == errors_pb2.NONE and response.vote_granted
    assert persisted == QuorumStateData(9, NO_LEADER, 3)
    assert (core.role, core.epoch) == (Role.UNATTACHED, 9)


def test_a_vote_from_a_node_outside_our_voter_set_is_answered_per_protocol() -> None:
    # KIP-853: the candidate may know a newer voter set than this node (a voter added by a change
    # we have not replicated yet), so membership is not checked; it counts only its own voters.
    core = core_at(2, epoch=5)
    response, persisted = answer(core, OBSERVER, vote(OBSERVER, 9))
    assert isinstance(response, raft_pb2.VoteResponse)
    assert response.error_code == errors_pb2.NONE and response.vote_granted
    assert persisted == QuorumStateData(9, NO_LEADER, OBSERVER)


def test_a_vote_from_no_node_or_from_ourselves_is_invalid() -> None:
    core = core_at(2, epoch=5)
    for candidate in (-1, 2):
        response, persisted = answer(core, candidate, vote(candidate, 9))
        assert isinstance(response, raft_pb2.VoteResponse)
        assert response.error_code == errors_pb2.INVALID_REQUEST
        assert persisted is None and core.epoch == 5


def test_a_pre_vote_never_takes_the_proposed_epoch() -> None:
    # The prospective proposes candidate_epoch but is still in candidate_epoch - 1: a receiver
    # behind it learns that epoch, as from any message, and records no vote.
    core = core_at(2, epoch=5, leader=1)
    response, persisted = answer(core, 3, vote(3, 12, pre=True))
    assert isinstance(response, raft_pb2.VoteResponse)
    assert response.pre_vote and response.error_code == errors_pb2.NONE
    assert persisted == QuorumStateData(11, NO_LEADER, NO_VOTE)
    assert (core.role, core.epoch) == (Role.UNATTACHED, 11)


def test_a_stale_vote_and_a_stale_pre_vote_are_fenced() -> None:
    core = core_at(2, epoch=5)
    for request in (vote(3, 4), vote(3, 5, pre=True)):
        response, persisted = answer(core, 3, request)
        assert isinstance(response, raft_pb2.VoteResponse)
        assert response.error_code == errors_pb2.FENCED_LEADER_EPOCH and not response.vote_granted
        assert persisted is None and core.epoch == 5


def test_an_observer_votes_at_most_once_per_epoch_like_a_voter() -> None:
    # An observer in its own view may be a voter in the candidate's newer one: its grant is
    # durable before the answer, and a second candidate of the same epoch is refused.
    observer = RaftCore(RaftConfig(node_id=OBSERVER, voters=VOTERS, cluster_id="t"), SeededSource(0), 0)
    observer.take_ready()
    response, persisted = answer(observer, 1, vote(1, 50))
    assert isinstance(response, raft_pb2.VoteResponse)
    assert response.error_code == errors_pb2.NONE and response.vote_granted
    assert persisted == QuorumStateData(50, NO_LEADER, 1)
    response, persisted = answer(observer, 3, vote(3, 50))
    assert isinstance(response, raft_pb2.VoteResponse) and not response.vote_granted
    assert persisted is None


# -- BeginQuorumEpoch / EndQuorumEpoch: from any node that leads (KIP-853) ---------------------------------------------
def test_begin_quorum_epoch_from_a_voter_in_a_newer_epoch_is_followed() -> None:
    core = core_at(2, epoch=5, leader=1)
    response, persisted = answer(core, 3, begin(3, 8))
    assert isinstance(response, raft_pb2.BeginQuorumEpochResponse)
    assert response.error_code == errors_pb2.NONE
    assert persisted == QuorumStateData(8, 3, NO_VOTE)
    assert (core.role, core.epoch, core.leader_id) == (Role.FOLLOWER, 8, 3)


def test_begin_quorum_epoch_from_no_node_or_ourselves_moves_nothing() -> None:
    for leader in (-1, 2):
        core = core_at(2, epoch=5, leader=1)
        response, persisted = answer(core, leader, begin(leader, 8))
        assert isinstance(response, raft_pb2.BeginQuorumEpochResponse)
        assert response.error_code == errors_pb2.INVALID_REQUEST
        assert (response.leader_id, response.leader_epoch) == (1, 5)
        assert persisted is None and (core.role, core.epoch, core.leader_id) == (Role.FOLLOWER, 5, 1)


def test_begin_quorum_epoch_from_a_leader_outside_our_voter_set_is_followed() -> None:
    # KIP-853: a voter added by a change this node has not replicated yet can win an election.
    core = core_at(2, epoch=5, leader=1)
    response, persisted = answer(core, OBSERVER, begin(OBSERVER, 8))
    assert isinstance(response, raft_pb2.BeginQuorumEpochResponse)
    assert response.error_code == errors_pb2.NONE
    assert persisted == QuorumStateData(8, OBSERVER, NO_VOTE)
    assert (core.role, core.epoch, core.leader_id) == (Role.FOLLOWER, 8, OBSERVER)


def test_an_observer_follows_the_leader_that_begins_an_epoch() -> None:
    observer = RaftCore(RaftConfig(node_id=OBSERVER, voters=VOTERS, cluster_id="t"), SeededSource(0), 0)
    observer.take_ready()
    response, persisted = answer(observer, 1, begin(1, 3))
    assert isinstance(response, raft_pb2.BeginQuorumEpochResponse)
    assert response.error_code == errors_pb2.NONE
    assert persisted == QuorumStateData(3, 1, NO_VOTE)
    assert (observer.role, observer.epoch, observer.leader_id) == (Role.OBSERVER, 3, 1)


def test_end_quorum_epoch_from_a_voter_in_a_newer_epoch_is_followed() -> None:
    core = core_at(2, epoch=5, leader=1)
    response, persisted = answer(core, 3, end(3, 7))
    assert isinstance(response, raft_pb2.EndQuorumEpochResponse)
    assert response.error_code == errors_pb2.NONE
    assert persisted == QuorumStateData(7, 3, NO_VOTE)
    assert (core.role, core.epoch, core.leader_id) == (Role.FOLLOWER, 7, 3)


def test_end_quorum_epoch_from_a_stale_leader_is_fenced() -> None:
    core = core_at(2, epoch=5, leader=1)
    response, persisted = answer(core, OBSERVER, end(OBSERVER, 4))
    assert isinstance(response, raft_pb2.EndQuorumEpochResponse)
    assert response.error_code == errors_pb2.FENCED_LEADER_EPOCH
    assert persisted is None and (core.role, core.epoch, core.leader_id) == (Role.FOLLOWER, 5, 1)


# -- responses: a newer epoch is learnt, and its leader followed ----------------
def test_a_response_with_a_newer_epoch_makes_a_leader_follow_its_voter_leader() -> None:
    net, leader = elected()
    core = net.cores[leader]
    epoch = core.epoch
    other = next(v for v in VOTERS if v != leader)
    response = raft_pb2.BeginQuorumEpochResponse(leader_id=other, leader_epoch=epoch + 2, voter_id=other)
    core.step(net.now, Envelope(other, leader, 1, response))
    assert (core.role, core.epoch, core.leader_id) == (Role.FOLLOWER, epoch + 2, other)


def test_a_response_naming_a_leader_outside_our_voter_set_is_followed() -> None:
    # KIP-853: the leader may be a voter this node does not know of yet.
    core = core_at(2, epoch=5, leader=1)
    response = raft_pb2.FetchResponse(error_code=errors_pb2.NOT_LEADER_OR_FOLLOWER, leader_id=OBSERVER, leader_epoch=6)
    core.step(1, Envelope(1, 2, 1, response))
    assert (core.role, core.epoch, core.leader_id) == (Role.FOLLOWER, 6, OBSERVER)
    # A response naming ourselves as leader of an epoch we do not lead teaches the epoch only.
    core.step(1, Envelope(1, 2, 2, raft_pb2.VoteResponse(leader_id=2, leader_epoch=7)))
    assert (core.role, core.epoch, core.leader_id) == (Role.UNATTACHED, 7, NO_LEADER)


def test_a_response_from_an_older_epoch_is_ignored() -> None:
    core = core_at(2, epoch=5, leader=1)
    core.step(1, Envelope(3, 2, 1, raft_pb2.VoteResponse(leader_id=3, leader_epoch=4, vote_granted=True)))
    assert core.take_ready().quorum_state is None
    assert (core.role, core.epoch, core.leader_id) == (Role.FOLLOWER, 5, 1)
