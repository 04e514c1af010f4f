"""The election state and the committed log on restart (DESIGN.md §9.11): the epoch is never below
the log's, a lost vote is never granted again in the epoch it may have been granted in, and a
divergence answer below the high watermark stops the node instead of truncating committed data."""

from __future__ import annotations

import pytest

from raftmeta.raft import (
    VOTE_FENCED,
    VOTE_UNKNOWN,
    CommittedTruncationError,
    Envelope,
    Faults,
    QuorumStateData,
    RaftConfig,
    RaftCore,
    Role,
    SnapshotImage,
)
from raftmeta.raft.types import NO_LEADER
from raftmeta.v1 import errors_pb2, raft_pb2

from .harness import Net, SeededSource, make_log

VOTERS = (1, 2, 3)


def start(
    node: int = 1,
    *,
    quorum_state: QuorumStateData | None,
    epochs: list[int],
    voters: tuple[int, ...] = VOTERS,
    high_watermark: int = 0,
    snapshot: SnapshotImage | None = None,
) -> RaftCore:
    return RaftCore(
        RaftConfig(node_id=node, voters=voters, cluster_id="t"),
        SeededSource(node),
        0,
        quorum_state=quorum_state,
        entries=make_log(epochs, start=snapshot.end_offset if snapshot else 0),
        snapshot=snapshot,
        high_watermark=high_watermark,
    )


def vote_from(core: RaftCore, candidate: int, epoch: int, last_epoch: int, last_offset: int) -> bool:
    request = raft_pb2.VoteRequest(
        cluster_id="t",
        candidate_id=candidate,
        candidate_epoch=epoch,
        last_offset_epoch=last_epoch,
        last_offset=last_offset,
    )
    core.step(5, Envelope(candidate, core.node_id, 41, request))
    [reply] = [e.message for e in core.take_ready().messages if e.correlation_id == 41]
    assert isinstance(reply, raft_pb2.VoteResponse)
    return reply.vote_granted


def test_a_new_node_without_state_starts_in_epoch_0_and_writes_nothing() -> None:
    core = start(quorum_state=None, epochs=[])
    assert (core.epoch, core.start_note) == (0, None)
    assert core.take_ready().quorum_state is None


def test_a_lost_state_file_lifts_the_epoch_to_the_log_and_withholds_the_vote_there() -> None:
    """The file is gone, the log has batches of epochs 1..4: this node took part in epoch 4 and
    may have voted for 2 there. A candidate 3 of epoch 4 with a longer log is refused (Kafka's
    unattached state with no vote would grant it: two leaders of epoch 4)."""
    core = start(quorum_state=None, epochs=[1, 2, 4, 4])
    assert (core.role, core.epoch) == (Role.UNATTACHED, 4)
    assert core.start_note is not None and "epoch 4" in core.start_note and "no vote" in core.start_note
    persisted = core.take_ready().quorum_state
    assert persisted == QuorumStateData(4, NO_LEADER, VOTE_FENCED), "the fence survives a second crash"
    assert not vote_from(core, 3, epoch=4, last_epoch=4, last_offset=10)
    # It may have voted in epoch 5 too (a candidate of 5 asked it just before the file was lost):
    # behind the vote fence it grants nothing until every voter has told it its epoch.
    assert not vote_from(core, 3, epoch=5, last_epoch=4, last_offset=10)
    answer_fence(core, {2: 5, 3: 5})
    assert (core.epoch, core.state.voted_id) == (5, VOTE_UNKNOWN)
    assert not vote_from(core, 3, epoch=5, last_epoch=4, last_offset=10)
    # Every vote it may have granted is in an epoch <= 5: the next one is a new election.
    assert vote_from(core, 3, epoch=6, last_epoch=4, last_offset=10)


def answer_fence(core: RaftCore, epochs: dict[int, int], now: int = 10) -> None:
    """The node asks every other voter that has not answered for its epoch (a Fetch); those in
    ``epochs`` answer with theirs, the others stay silent."""
    core.poll(now)
    probes = [e for e in core.take_ready().messages if isinstance(e.message, raft_pb2.FetchRequest)]
    assert set(epochs) <= {e.destination for e in probes}
    for probe in probes:
        if probe.destination in epochs:
            answer = raft_pb2.FetchResponse(
                error_code=errors_pb2.NOT_LEADER_OR_FOLLOWER, leader_id=-1, leader_epoch=epochs[probe.destination]
            )
            core.step(now, Envelope(probe.destination, core.node_id, probe.correlation_id, answer))
    core.poll(now)
    core.take_ready()


def test_the_vote_fence_holds_until_every_voter_answered_and_rises_to_their_highest_epoch() -> None:
    core = start(quorum_state=None, epochs=[1, 2, 4, 4])
    core.take_ready()
    answer_fence(core, {2: 4})  # node 3 does not answer (down): the fence stays
    assert not vote_from(core, 2, epoch=5, last_epoch=4, last_offset=10)
    core.poll(5_000)
    assert core.role is Role.UNATTACHED, "and it stands in no election meanwhile"
    answer_fence(core, {3: 7}, now=6_000)  # asked again; a candidate of epoch 7 may have had its vote
    assert (core.epoch, core.state.voted_id) == (7, VOTE_UNKNOWN)
    assert not vote_from(core, 2, epoch=7, last_epoch=4, last_offset=10)
    assert vote_from(core, 2, epoch=8, last_epoch=4, last_offset=10)


def test_without_the_fence_the_lost_vote_of_a_later_epoch_is_granted_again() -> None:
    """The planted switch the simulator must catch: vote from the log's epoch + 1 at once."""
    core = RaftCore(
        RaftConfig(node_id=1, voters=VOTERS, cluster_id="t", faults=Faults(vote_without_fence=True)),
        SeededSource(1),
        0,
        quorum_state=None,
        entries=make_log([1, 2, 4, 4]),
    )
    core.take_ready()
    assert vote_from(core, 3, epoch=5, last_epoch=4, last_offset=10)


def test_kafkas_rule_would_grant_the_lost_vote_again() -> None:
    """The same node under Kafka's rule (unattached in the log's epoch, no vote; planted as a
    test-only switch): it grants candidate 3 in epoch 4, where it may have elected another leader."""
    core = RaftCore(
        RaftConfig(node_id=1, voters=VOTERS, cluster_id="t", faults=Faults(lost_vote_granted_again=True)),
        SeededSource(1),
        0,
        quorum_state=None,
        entries=make_log([1, 2, 4, 4]),
    )
    core.take_ready()
    assert vote_from(core, 3, epoch=4, last_epoch=4, last_offset=10)


def test_the_fence_is_read_back_from_the_file_after_a_second_restart() -> None:
    core = start(quorum_state=QuorumStateData(4, NO_LEADER, VOTE_UNKNOWN), epochs=[1, 4])
    assert core.start_note is None
    assert core.take_ready().quorum_state is None, "already on disk"
    assert not vote_from(core, 2, epoch=4, last_epoch=4, last_offset=9)


def test_a_state_older_than_the_log_is_lifted_the_same_way() -> None:
    core = start(quorum_state=QuorumStateData(2, NO_LEADER, 3), epochs=[1, 3, 3])
    assert core.epoch == 3 and core.state.voted_id == VOTE_UNKNOWN
    assert core.start_note is not None and "older than the log's last epoch 3" in core.start_note


def test_the_snapshot_epoch_counts_when_the_log_above_it_is_empty() -> None:
    snapshot = SnapshotImage(end_offset=7, epoch=6, data=b"")
    core = start(quorum_state=None, epochs=[], snapshot=snapshot)
    assert core.epoch == 6 and core.state.voted_id == VOTE_UNKNOWN


def test_a_single_voter_that_lost_its_state_elects_itself_in_the_next_epoch() -> None:
    """Before: 'AssertionError: epoch 1 after 2' at every start (it led epoch 1 over a log of epoch 2)."""
    core = start(quorum_state=None, epochs=[1, 2, 2], voters=(1,))
    core.take_ready()
    core.poll(10_000)
    ready = core.take_ready()
    assert (core.role, core.epoch) == (Role.LEADER, 3)
    assert ready.append and ready.append[0].epoch == 3


def test_the_stored_state_is_kept_when_it_is_at_least_the_log_epoch() -> None:
    core = start(quorum_state=QuorumStateData(5, NO_LEADER, 2), epochs=[1, 4])
    assert (core.epoch, core.state.voted_id, core.start_note) == (5, 2, None)
    assert not vote_from(core, 3, epoch=5, last_epoch=4, last_offset=9)
    assert vote_from(core, 2, epoch=5, last_epoch=4, last_offset=9), "the same candidate again (a retry)"


def diverging_answer(leader: int, epoch: int, diverging_epoch: int, end_offset: int) -> raft_pb2.FetchResponse:
    response = raft_pb2.FetchResponse(leader_id=leader, leader_epoch=epoch, high_watermark=0)
    response.diverging_epoch.epoch = diverging_epoch
    response.diverging_epoch.end_offset = end_offset
    return response


def test_a_diverging_answer_below_the_high_watermark_is_refused() -> None:
    """A forged (or buggy) leader answer telling a follower to drop committed batches: the
    follower stops with an error naming the offsets and truncates nothing."""
    core = start(quorum_state=QuorumStateData(3, 2, 2), epochs=[1, 2, 3, 3], high_watermark=3)
    core.take_ready()
    core.poll(1)
    [fetch] = [e for e in core.take_ready().messages if isinstance(e.message, raft_pb2.FetchRequest)]
    answer = Envelope(2, 1, fetch.correlation_id, diverging_answer(2, 3, diverging_epoch=1, end_offset=1))
    with pytest.raises(CommittedTruncationError, match=r"offset 1: offsets \[1, 3\) are below the high watermark 3"):
        core.step(2, answer)
    assert core.log.end_offset == 4, "nothing truncated"


def test_a_diverging_answer_at_the_high_watermark_truncates() -> None:
    core = start(quorum_state=QuorumStateData(3, 2, 2), epochs=[1, 2, 2, 2], high_watermark=2)
    core.take_ready()
    core.poll(1)
    [fetch] = [e for e in core.take_ready().messages if isinstance(e.message, raft_pb2.FetchRequest)]
    core.step(2, Envelope(2, 1, fetch.correlation_id, diverging_answer(2, 3, diverging_epoch=2, end_offset=2)))
    assert core.take_ready().truncate_to == 2
    assert core.log.end_offset == 2


def test_a_fenced_voter_is_no_witness_and_answers_that_it_does_not_know_its_epoch() -> None:
    """Two nodes lost their election state: one's epoch (its log's) may be below the one it voted
    in, so it cannot bound the other's lost vote. Before: the other closed its fence on it and led
    an epoch that had had a leader already (raftmeta sim --seed 100199 --faults storage)."""
    fenced = start(node=3, quorum_state=None, epochs=[1, 2])
    fenced.take_ready()
    probe = raft_pb2.FetchRequest(cluster_id="t", replica_id=1, replica_epoch=4, fetch_offset=4, last_fetched_epoch=4)
    fenced.step(5, Envelope(1, 3, 77, probe))
    [reply] = [e.message for e in fenced.take_ready().messages if e.correlation_id == 77]
    assert isinstance(reply, raft_pb2.FetchResponse) and reply.error_code == errors_pb2.UNKNOWN_LEADER_EPOCH
    core = start(quorum_state=None, epochs=[1, 2, 4, 4])
    core.take_ready()
    core.poll(10)
    probes = [e for e in core.take_ready().messages if isinstance(e.message, raft_pb2.FetchRequest)]
    for p in probes:
        answer = (
            reply
            if p.destination == 3
            else raft_pb2.FetchResponse(error_code=errors_pb2.NOT_LEADER_OR_FOLLOWER, leader_epoch=4)
        )
        core.step(20, Envelope(p.destination, 1, p.correlation_id, answer))
    core.poll(30)
    assert core.vote_fenced, "node 3's answer does not count"
    assert not vote_from(core, 2, epoch=5, last_epoch=4, last_offset=10)


def fetches_after_a_leader_of(
    core: RaftCore, epoch: int, *, leader: int = 2, since: int = 0
) -> list[raft_pb2.FetchRequest]:
    """The node hears of ``leader`` of ``epoch`` at ``since`` and runs a while: the Fetches it sends."""
    begin = raft_pb2.BeginQuorumEpochRequest(cluster_id="t", leader_id=leader, leader_epoch=epoch)
    core.step(since + 5, Envelope(leader, core.node_id, 90, begin))
    sent: list[raft_pb2.FetchRequest] = []
    for now in range(since + 10, since + 3_000, 50):
        core.poll(now)
        sent += [e.message for e in core.take_ready().messages if isinstance(e.message, raft_pb2.FetchRequest)]
    return sent


def test_a_fenced_voter_follows_but_acknowledges_nothing() -> None:
    """Behind the fence the node may have voted for a candidate of a later epoch than its leader's:
    a Fetch from its log end would let that leader count it toward committing batches the later
    epoch's leader lacks (Raft's figure 8 through a lost vote: ``raftmeta sim --seed 32 --voters 3
    --faults all`` broke leader completeness so). It fetches from its high watermark only, which
    no leader can count toward a commit, until the fence closes."""
    core = start(quorum_state=None, epochs=[1, 2, 4, 4], high_watermark=2)
    core.take_ready()
    sent = fetches_after_a_leader_of(core, 5)
    assert (core.role, core.epoch, core.vote_fenced) == (Role.FOLLOWER, 5, True)
    assert sent, "it still asks every voter for its epoch"
    assert {f.fetch_offset for f in sent} == {2}, [f.fetch_offset for f in sent]
    # Once every voter has told it its epoch, it acknowledges as usual.
    answer_fence(core, {2: 5, 3: 5}, now=10_000)
    assert not core.vote_fenced
    sent = fetches_after_a_leader_of(core, 5, since=10_000)
    assert 4 in {f.fetch_offset for f in sent}


def test_acknowledging_behind_the_fence_is_the_planted_switch() -> None:
    core = RaftCore(
        RaftConfig(node_id=1, voters=VOTERS, cluster_id="t", faults=Faults(ack_behind_fence=True)),
        SeededSource(1),
        0,
        quorum_state=None,
        entries=make_log([1, 2, 4, 4]),
        high_watermark=2,
    )
    core.take_ready()
    assert 4 in {f.fetch_offset for f in fetches_after_a_leader_of(core, 5)}


def test_a_leader_whose_other_follower_is_down_never_counts_a_fenced_follower() -> None:
    """The soak's story (``raftmeta sim --cores --faults all``, seeds 100308 and 104161, before the
    fenced node acknowledged nothing): a node behind the vote fence followed the leader, and its
    fence probe to that leader -- a Fetch, sent without waiting for the flush of what it had just
    fetched -- named its log end. The leader counted it as the node's persisted end and, its other
    follower down, committed a batch its own disk alone held (3-majority-persisted)."""
    quorum_state = QuorumStateData(1, NO_LEADER, VOTE_UNKNOWN)
    # Node 2's log is the longest: only it can win (node 1 is fenced, node 3 has too short a log).
    net = Net(
        VOTERS,
        logs={1: make_log([1, 1]), 2: make_log([1, 1, 1]), 3: make_log([1, 1])},
        quorum_states={2: quorum_state, 3: quorum_state},
    )
    fenced = net.cores[1]
    probes: set[int] = set()

    def lose_the_answers_to_probes(envelope: Envelope) -> bool:
        # The leader gets every probe (and may count its offset); the answers are lost, so node 1
        # asks again every request timeout and its fence stays open.
        message = envelope.message
        if envelope.source == 1 and isinstance(message, raft_pb2.FetchRequest) and message.max_wait_ms == 0:
            probes.add(envelope.correlation_id)
        return envelope.destination == 1 and envelope.correlation_id in probes

    net.drop = lose_the_answers_to_probes
    assert net.elect() == 2
    leader = net.cores[2]
    net.advance(500)
    assert fenced.role is Role.FOLLOWER and fenced.vote_fenced
    net.down.add(3)  # only node 1 can make a majority with the leader now
    net.stalled_disks.add(1)
    hw = leader.high_watermark
    entry = leader.propose(net.now, [b"z"])
    net.advance(3 * fenced.config.request_timeout_ms)
    assert fenced.vote_fenced
    assert any(e.source == 1 and e.destination == 2 for e in net.delivered if e.correlation_id in probes)
    assert leader.high_watermark == hw, "only the leader's own disk holds the batch"
    net.flush(1)
    net.down.discard(3)  # node 3 fetches again (node 1 acknowledges nothing until its fence closes)
    net.advance(2 * leader.config.fetch_timeout_ms)
    assert leader.high_watermark >= entry.next_offset
