"""One test per protocol rule, citing the Raft paper (Ongaro & Ousterhout 2014), KIP-595
(Raft for Kafka), KIP-996 (pre-vote) and KIP-630 (snapshots)."""

from __future__ import annotations

from typing import cast

import pytest

from raftmeta.raft import (
    Envelope,
    Faults,
    NotLeaderError,
    QuorumStateData,
    RaftConfig,
    RaftCore,
    Role,
    SnapshotImage,
)
from raftmeta.v1 import errors_pb2, raft_pb2, records_pb2

from .harness import Net, SeededSource, make_log


def vote_request(
    candidate: int, epoch: int, last_epoch: int, last_offset: int, *, pre: bool = False
) -> raft_pb2.VoteRequest:
    return raft_pb2.VoteRequest(
        cluster_id="t",
        candidate_id=candidate,
        candidate_epoch=epoch,
        last_offset_epoch=last_epoch,
        last_offset=last_offset,
        pre_vote=pre,
    )


def ask(net: Net, source: int, destination: int, message: raft_pb2.VoteRequest) -> raft_pb2.VoteResponse:
    """Step a request into ``destination`` and return its direct answer."""
    net.cores[destination].step(net.now, Envelope(source, destination, 777, message))
    net.drive(destination)
    answers = [e for e in net.network if e.correlation_id == 777 and e.destination == source]
    for answer in answers:
        net.network.remove(answer)
    assert len(answers) == 1
    response = answers[0].message
    assert isinstance(response, raft_pb2.VoteResponse)
    return response


# -- elections (Raft §5.2, KIP-595) -------------------------------------------------------------------
def test_a_leader_is_elected_and_writes_a_leader_change_record_first() -> None:
    net = Net([1, 2, 3])
    leader = net.elect()
    core = net.cores[leader]
    assert core.epoch == 1
    first = core.log.entries()[0]
    assert first.epoch == 1
    from raftmeta.records.codec import iter_batches

    batch = next(iter_batches(first.data))
    assert batch.header.is_control
    record = records_pb2.MetadataRecord.FromString(batch.records()[0])
    assert record.leader_change.leader_id == leader
    assert record.leader_change.leader_epoch == 1
    assert [v.voter_id for v in record.leader_change.voters] == [1, 2, 3]
    net.advance(100)
    assert all(c.high_watermark == 1 for c in net.cores.values()), "the LeaderChangeRecord commits"
    assert all(c.leader_id == leader for c in net.cores.values())


def test_split_vote_elects_nobody_then_randomized_timeouts_break_the_tie() -> None:
    # Raft §5.2: with 4 voters, candidates 1 and 2 each get 2 votes; neither wins epoch 1.
    net = Net([1, 2, 3, 4], election_timeout_ms=1000)
    for candidate, voter in ((1, 3), (2, 4)):
        response = ask(net, candidate, voter, vote_request(candidate, 1, 0, 0))
        assert response.vote_granted
    # 3 and 4 voted in epoch 1: the other candidate is refused (one vote per epoch).
    assert not ask(net, 2, 3, vote_request(2, 1, 0, 0)).vote_granted
    assert not ask(net, 1, 4, vote_request(1, 1, 0, 0)).vote_granted
    assert net.persisted[3] == QuorumStateData(1, -1, 1)
    assert net.persisted[4] == QuorumStateData(1, -1, 2)
    leader = net.elect()
    assert net.cores[leader].epoch >= 2, "epoch 1 had a split vote: no leader"


def test_vote_is_persisted_in_the_same_ready_as_the_granting_response() -> None:
    # Raft figure 2 / KIP-595: votedFor is on stable storage before responding.
    net = Net([1, 2, 3])
    core = net.cores[2]
    core.step(0, Envelope(1, 2, 5, vote_request(1, 1, 0, 0)))
    ready = core.take_ready()
    assert ready.quorum_state == QuorumStateData(1, -1, 1)
    [reply] = ready.messages
    assert isinstance(reply.message, raft_pb2.VoteResponse)
    assert reply.message.vote_granted
    assert reply.correlation_id == 5


def test_a_stale_epoch_is_rejected_everywhere() -> None:
    net = Net([1, 2, 3])
    leader = net.elect()
    net.advance(100)
    follower = next(n for n in net.cores if n != leader)
    epoch = net.cores[leader].epoch
    # A Vote for an older epoch.
    response = ask(net, leader, follower, vote_request(leader, epoch - 1, 9, 99))
    assert not response.vote_granted
    assert response.leader_epoch == epoch
    # A Fetch from an older epoch: FENCED_LEADER_EPOCH, with the current leader in the answer.
    fetch = raft_pb2.FetchRequest(cluster_id="t", replica_id=follower, replica_epoch=epoch - 1, max_bytes=100)
    net.cores[leader].step(net.now, Envelope(follower, leader, 1, fetch))
    [answer] = net.cores[leader].take_ready().messages
    assert isinstance(answer.message, raft_pb2.FetchResponse)
    assert answer.message.error_code == errors_pb2.FENCED_LEADER_EPOCH
    assert (answer.message.leader_id, answer.message.leader_epoch) == (leader, epoch)
    # A BeginQuorumEpoch from an older epoch.
    begin = raft_pb2.BeginQuorumEpochRequest(cluster_id="t", leader_id=follower, leader_epoch=epoch - 1)
    net.cores[leader].step(net.now, Envelope(follower, leader, 2, begin))
    [answer] = net.cores[leader].take_ready().messages
    assert isinstance(answer.message, raft_pb2.BeginQuorumEpochResponse)
    assert answer.message.error_code == errors_pb2.FENCED_LEADER_EPOCH
    assert net.cores[leader].role is Role.LEADER


@pytest.mark.parametrize(
    ("voter_log", "candidate_last", "granted"),
    [
        ([1, 1, 2], (2, 3), True),  # equal logs
        ([1, 1, 2], (2, 4), True),  # longer, same last epoch
        ([1, 1, 2], (2, 2), False),  # shorter with the same last epoch
        ([1, 1, 2], (1, 9), False),  # longer but an older last epoch
        ([1, 1, 2], (3, 1), True),  # a newer last epoch wins over length
    ],
)
def test_vote_needs_an_up_to_date_log(voter_log: list[int], candidate_last: tuple[int, int], granted: bool) -> None:
    # Raft §5.4.1: compare the last entries' epochs, then the lengths.
    net = Net([1, 2, 3], logs={2: make_log(voter_log)}, quorum_states={2: QuorumStateData(3)})
    epoch, offset = candidate_last
    assert ask(net, 1, 2, vote_request(1, 4, epoch, offset)).vote_granted is granted
    assert ask(net, 1, 2, vote_request(1, 5, epoch, offset, pre=True)).vote_granted is granted


# -- pre-vote (KIP-996) -------------------------------------------------------------------------------
def test_pre_vote_bumps_no_epoch_and_persists_nothing() -> None:
    net = Net([1, 2, 3])
    core = net.cores[2]
    core.step(0, Envelope(1, 2, 5, vote_request(1, 1, 0, 0, pre=True)))
    ready = core.take_ready()
    assert ready.quorum_state is None
    assert core.epoch == 0
    [reply] = ready.messages
    assert isinstance(reply.message, raft_pb2.VoteResponse)
    assert reply.message.vote_granted and reply.message.pre_vote


def test_pre_vote_stops_a_partitioned_node_from_inflating_epochs() -> None:
    net = Net([1, 2, 3])
    leader = net.elect()
    net.advance(200)
    epoch = net.cores[leader].epoch
    loner = next(n for n in net.cores if n != leader)
    net.isolate(loner)
    net.advance(30_000)  # many election timeouts
    assert net.cores[loner].role is Role.PROSPECTIVE
    assert net.cores[loner].epoch == epoch, "a prospective never bumps its epoch"
    net.heal()
    net.advance(5_000)
    assert net.leader() == leader, "the healed node did not disrupt the leader"
    assert all(c.epoch == epoch for c in net.cores.values())
    assert net.cores[loner].role is Role.FOLLOWER


def test_a_follower_that_hears_its_leader_rejects_pre_votes() -> None:
    net = Net([1, 2, 3])
    leader = net.elect()
    net.advance(200)
    follower, other = (n for n in net.cores if n != leader)
    core = net.cores[follower]
    last = core.log.last_epoch, core.log_end_offset
    assert not ask(net, other, follower, vote_request(other, core.epoch + 1, *last, pre=True)).vote_granted
    assert not ask(net, other, leader, vote_request(other, core.epoch + 1, *last, pre=True)).vote_granted


# -- replication: Fetch with divergence (KIP-595, Raft figure 7) ------------------------------------
FIGURE_7_LEADER = [1, 1, 1, 4, 4, 5, 5, 6, 6, 6]
FIGURE_7_FOLLOWERS = {
    2: [1, 1, 1, 4, 4, 5, 5, 6, 6],  # (a) missing one entry
    3: [1, 1, 1, 4],  # (b) missing many
    4: [1, 1, 1, 4, 4, 5, 5, 6, 6, 6, 6],  # (c) an extra uncommitted epoch-6 entry
    5: [1, 1, 1, 4, 4, 5, 5, 6, 6, 6, 7, 7],  # (d) extra epoch-7 entries
    6: [1, 1, 1, 4, 4, 4, 4],  # (e) extra epoch-4 entries
    7: [1, 1, 1, 2, 2, 2, 3, 3, 3, 3, 3],  # (f) epochs 2 and 3 the leader never had
}


def test_figure_7_every_follower_converges_to_the_leader_log() -> None:
    logs = {1: make_log(FIGURE_7_LEADER)} | {n: make_log(e) for n, e in FIGURE_7_FOLLOWERS.items()}
    states = {n: QuorumStateData(7) for n in range(1, 8)}
    net = Net(range(1, 8), logs=logs, quorum_states=states, fetch_max_bytes=1)
    # Only (a), (b), (e), (f) find node 1's log up to date; (c) and (d) have newer ones.
    for voter in (2, 3, 6, 7):
        assert ask(net, 1, voter, vote_request(1, 8, 6, 10, pre=True)).vote_granted
    for voter in (4, 5):
        assert not ask(net, 1, voter, vote_request(1, 8, 6, 10, pre=True)).vote_granted
    # Keep (c) and (d) out of the election: of the rest, only node 1 can win.
    net.isolate(4)
    net.isolate(5)
    leader = net.elect()
    net.heal()
    assert leader == 1
    net.advance(2_000)
    expected = [*FIGURE_7_LEADER, net.cores[1].epoch]
    for node in range(1, 8):
        assert net.epochs_of(node) == expected, f"follower {node}"
        assert [e.data for e in net.cores[node].log.entries()] == [e.data for e in net.cores[1].log.entries()]
    assert net.cores[1].high_watermark == 11


def test_diverging_follower_truncates_only_uncommitted_entries() -> None:
    net = Net([1, 2, 3])
    leader = net.elect()
    net.advance(200)
    net.cores[leader].propose(net.now, [b"committed"])
    net.advance(200)
    committed_hw = net.cores[leader].high_watermark
    # The leader is cut off and appends entries nobody else will see.
    net.isolate(leader)
    for i in range(3):
        net.cores[leader].propose(net.now, [b"lost %d" % i])
    net.advance(10_000)
    new_leader = next(n for n in net.leaders() if n != leader)
    net.cores[new_leader].propose(net.now, [b"new"])
    net.heal()
    net.advance(5_000)
    old = net.cores[leader]
    assert old.role is Role.FOLLOWER
    assert [e.data for e in old.log.entries()] == [e.data for e in net.cores[new_leader].log.entries()]
    assert old.high_watermark >= committed_hw
    truncations = [r.truncate_to for r in net.readies[leader] if r.truncate_to is not None]
    assert truncations and min(truncations) >= committed_hw


# -- commitment (Raft §5.4.2, figure 8) ----------------------------------------------------------------
def figure_8_net(faults: Faults | None = None) -> Net:
    # S1 led epoch 2 and replicated (1, epoch 2) to S2 only; S5 led epoch 3 alone. S1 now wins epoch 4.
    logs = {1: make_log([1, 2]), 2: make_log([1, 2]), 3: make_log([1]), 4: make_log([1]), 5: make_log([1, 3])}
    states = {n: QuorumStateData(3) for n in range(1, 6)}
    net = Net(range(1, 6), logs=logs, quorum_states=states, fetch_max_bytes=1, faults=faults)
    net.down.add(5)
    net.isolate(2)  # so that S1 wins with the votes of S3 and S4 (S2's log equals S1's)
    net.drop = lambda e: isinstance(e.message, raft_pb2.FetchRequest)  # the test plays the fetches
    return net


def run_figure_8(net: Net) -> int:
    """Let S1 win epoch 4 and S3 fetch exactly the epoch-2 entry; return S1's HW then."""
    leader = net.elect()
    assert leader == 1 and net.cores[1].epoch == 4
    net.heal()
    # S3 fetches exactly one batch (max_bytes=1): the epoch-2 entry at offset 1.
    first = raft_pb2.FetchRequest(
        cluster_id="t", replica_id=3, replica_epoch=4, fetch_offset=1, last_fetched_epoch=1, max_bytes=1
    )
    net.cores[1].step(net.now, Envelope(3, 1, 97, first))
    [answer] = net.cores[1].take_ready().messages
    assert isinstance(answer.message, raft_pb2.FetchResponse)
    assert answer.message.records == net.cores[1].log.entries()[1].data, "the epoch-2 entry, alone"
    # S1, S2, S3 now hold the epoch-2 entry at offset 1: a majority of 5, by counting replicas.
    fetch = raft_pb2.FetchRequest(
        cluster_id="t", replica_id=3, replica_epoch=4, fetch_offset=2, last_fetched_epoch=2, max_bytes=1
    )
    net.cores[1].step(net.now, Envelope(3, 1, 99, fetch))
    net.cores[1].take_ready()
    # S2 reports offset 2 as well (it has had the entry since epoch 2).
    fetch2 = raft_pb2.FetchRequest(
        cluster_id="t", replica_id=2, replica_epoch=4, fetch_offset=2, last_fetched_epoch=2, max_bytes=1
    )
    net.cores[1].step(net.now, Envelope(2, 1, 98, fetch2))
    net.cores[1].take_ready()
    return net.cores[1].high_watermark


def test_figure_8_an_older_epoch_entry_is_not_committed_by_counting_replicas() -> None:
    net = figure_8_net()
    assert run_figure_8(net) == 0, "the epoch-2 entry must wait for epoch 4's own record"
    net.drop = None
    net.advance(3_000)  # the dropped fetches are retried after the request timeout
    assert net.cores[1].high_watermark == 3, "committed together with the LeaderChangeRecord"


def test_figure_8_bug_switch_commits_the_older_entry() -> None:
    net = figure_8_net(Faults(hw_from_old_epoch=True))
    assert run_figure_8(net) == 2


def test_high_watermark_never_decreases_across_leader_changes() -> None:
    net = Net([1, 2, 3])
    history: dict[int, list[int]] = {n: [] for n in net.cores}
    for round_ in range(4):
        leader = net.elect()
        net.cores[leader].propose(net.now, [b"x%d" % round_])
        for _ in range(20):
            net.advance(50)
            for n, c in net.cores.items():
                history[n].append(c.high_watermark)
        net.isolate(leader)
        net.advance(8_000)
        net.heal()
        net.advance(2_000)
    for values in history.values():
        assert values == sorted(values)


# -- long poll and bounded answers (KIP-595 Fetch) -----------------------------------------------------
def test_leader_parks_a_fetch_until_new_data_or_max_wait() -> None:
    net = Net([1, 2], fetch_max_wait_ms=500)
    leader = net.elect()
    follower = 3 - leader
    net.advance(100)
    parked_at = net.now
    assert not net.network
    net.cores[leader].propose(net.now, [b"wake"])
    net.drive(leader)
    wake = [e for e in net.network if isinstance(e.message, raft_pb2.FetchResponse)]
    assert wake and wake[0].destination == follower and cast(raft_pb2.FetchResponse, wake[0].message).records
    net.deliver_all()
    net.advance(100)  # committed; the HW is sent, and then the fetch is parked again
    assert not net.network
    net.now = parked_at + 5_000
    deadline = net.cores[leader].poll(net.now)
    answers = [
        e.message for e in net.cores[leader].take_ready().messages if isinstance(e.message, raft_pb2.FetchResponse)
    ]
    assert len(answers) == 1 and not answers[0].records, "max wait passed: an empty answer"
    assert deadline > net.now


def test_a_watermark_only_answer_waits_up_to_the_linger_for_records() -> None:
    """fetch_hw_linger_ms: a Fetch whose only news is a higher HW waits for records to carry it
    (one Fetch round per commit instead of two), at most the linger."""
    net = Net([1, 2], fetch_max_wait_ms=500, fetch_hw_linger_ms=20)
    leader = net.elect()
    core = net.cores[leader]
    net.advance(100)

    def fetch_answers() -> list[raft_pb2.FetchResponse]:
        return [e.message for e in net.network if isinstance(e.message, raft_pb2.FetchResponse)]

    core.propose(net.now, [b"a"])
    net.drive(leader)
    net.deliver_all()  # records out, the follower's acknowledging Fetch back: committed
    committed = core.high_watermark
    assert committed == core.log.end_offset
    assert not net.network, "the answer that would carry only the new HW is held"
    net.now += 5
    core.propose(net.now, [b"b"])
    net.drive(leader)
    answers = fetch_answers()
    assert len(answers) == 1 and answers[0].records and answers[0].high_watermark == committed
    net.deliver_all()
    assert core.high_watermark == core.log.end_offset > committed
    acknowledged_at = net.now
    net.now = acknowledged_at + 19
    core.poll(net.now)
    assert not [e for e in core.take_ready().messages if isinstance(e.message, raft_pb2.FetchResponse)]
    net.now = acknowledged_at + 20
    core.poll(net.now)
    alone = [e.message for e in core.take_ready().messages if isinstance(e.message, raft_pb2.FetchResponse)]
    assert len(alone) == 1 and not alone[0].records and alone[0].high_watermark == core.high_watermark


def test_fetch_answers_are_bounded_by_max_bytes() -> None:
    net = Net([1, 2, 3])
    leader = net.elect()
    net.advance(100)
    for i in range(10):
        net.cores[leader].propose(net.now, [b"y" * 100 + b"%d" % i])
    net.cores[leader].take_ready()
    follower = next(n for n in net.cores if n != leader)
    fetch = raft_pb2.FetchRequest(
        cluster_id="t",
        replica_id=follower,
        replica_epoch=net.cores[leader].epoch,
        fetch_offset=1,
        last_fetched_epoch=net.cores[leader].epoch,
        max_bytes=300,
    )
    net.cores[leader].step(net.now, Envelope(follower, leader, 1, fetch))
    [answer] = net.cores[leader].take_ready().messages
    assert isinstance(answer.message, raft_pb2.FetchResponse)
    assert 0 < len(answer.message.records) <= 300
    fetch.max_bytes = 1
    net.cores[leader].step(net.now, Envelope(follower, leader, 2, fetch))
    [answer] = net.cores[leader].take_ready().messages
    assert isinstance(answer.message, raft_pb2.FetchResponse)
    assert len(answer.message.records) > 1, "at least one whole batch, whatever max_bytes says"


def test_a_follower_acknowledges_only_what_it_has_flushed() -> None:
    net = Net([1, 2, 3])
    leader = net.elect()
    net.advance(100)
    follower = next(n for n in net.cores if n != leader)
    net.stalled_disks.add(follower)
    net.cores[leader].propose(net.now, [b"z"])
    net.advance(100)
    fetches = [
        e.message for e in net.delivered if e.source == follower and isinstance(e.message, raft_pb2.FetchRequest)
    ]
    assert max(f.fetch_offset for f in fetches) == 1, "no fetch claims the unflushed batch"
    net.flush(follower)
    net.advance(100)
    fetches = [
        e.message for e in net.delivered if e.source == follower and isinstance(e.message, raft_pb2.FetchRequest)
    ]
    assert max(f.fetch_offset for f in fetches) == 2


def test_the_leader_counts_itself_only_once_flushed() -> None:
    net = Net([1])
    leader = net.elect()
    assert leader == 1
    net.stalled_disks.add(1)
    hw = net.cores[1].high_watermark
    net.cores[1].propose(net.now, [b"a"])
    net.drive(1)
    assert net.cores[1].high_watermark == hw
    net.flush(1)
    assert net.cores[1].high_watermark == hw + 1


# -- check quorum (KIP-595) -----------------------------------------------------------------------------
def test_leader_resigns_without_fetches_from_a_majority_within_one_and_a_half_fetch_timeouts() -> None:
    net = Net([1, 2, 3], fetch_timeout_ms=2000)
    leader = net.elect()
    net.advance(100)
    net.isolate(leader)
    # The last fetches arrived at most fetch_max_wait_ms (500) before the cut (long poll).
    net.advance(2400)
    assert net.cores[leader].role is Role.LEADER
    net.advance(700)
    assert net.cores[leader].role is Role.RESIGNED
    with pytest.raises(NotLeaderError):
        net.cores[leader].propose(net.now, [b"late"])


# -- graceful resignation and transfer (KIP-595 EndQuorumEpoch) ----------------------------------------
def test_leadership_transfer_hands_over_to_the_named_voter() -> None:
    net = Net([1, 2, 3, 4, 5])
    leader = net.elect()
    net.advance(200)
    epoch = net.cores[leader].epoch
    target = max(n for n in net.cores if n != leader)
    net.cores[leader].transfer_leadership(net.now, target)
    net.drive(leader)
    net.advance(300)
    assert net.leader() == target
    assert net.cores[target].epoch == epoch + 1


def test_graceful_resign_sends_end_quorum_epoch_ranked_by_log_end() -> None:
    net = Net([1, 2, 3])
    leader = net.elect()
    net.advance(200)
    net.cores[leader].resign(net.now)
    ready = net.cores[leader].take_ready()
    requests = [e.message for e in ready.messages if isinstance(e.message, raft_pb2.EndQuorumEpochRequest)]
    assert len(requests) == 2
    assert sorted(requests[0].preferred_successors) == sorted(n for n in net.cores if n != leader)
    assert net.cores[leader].role is Role.RESIGNED


def test_a_restarted_leader_comes_back_resigned() -> None:
    config = RaftConfig(node_id=1, voters=(1, 2, 3), cluster_id="t")
    core = RaftCore(config, SeededSource(), 0, quorum_state=QuorumStateData(4, leader_id=1, voted_id=1))
    assert core.role is Role.RESIGNED and core.epoch == 4


# -- snapshots (KIP-630) -----------------------------------------------------------------------------------
def snapshot_past_a_cut_off_follower() -> tuple[Net, int, int, SnapshotImage]:
    """A leader that snapshots 20 batches while one follower is cut off: (net, leader, the cut off
    follower, the snapshot); the follower can only catch up from the snapshot."""
    net = Net([1, 2, 3], snapshot_chunk_bytes=64)
    leader = net.elect()
    net.advance(100)
    lagging = next(n for n in net.cores if n != leader)
    net.isolate(lagging)
    for i in range(20):
        net.cores[leader].propose(net.now, [b"s%d" % i])
        net.advance(20)
    core = net.cores[leader]
    entries = core.log.entries()
    image = SnapshotImage(core.high_watermark, entries[-1].epoch, b"".join(e.data for e in entries))
    core.on_snapshot_created(net.now, image)
    return net, leader, lagging, image


def test_a_follower_behind_the_log_start_catches_up_from_a_snapshot() -> None:
    net, leader, lagging, image = snapshot_past_a_cut_off_follower()
    core = net.cores[leader]
    end = image.end_offset
    assert end == 21
    assert core.log.start_offset == end and len(core.log) == 0
    core.propose(net.now, [b"after"])
    net.heal()
    net.advance(3_000)
    follower = net.cores[lagging]
    installs = [r.install_snapshot for r in net.readies[lagging] if r.install_snapshot is not None]
    assert installs == [image]
    snapshot_fetches = [e for e in net.delivered if isinstance(e.message, raft_pb2.FetchSnapshotRequest)]
    assert len(snapshot_fetches) >= len(image.data) // 64
    assert follower.log.start_offset == end
    assert follower.log.entries() == core.log.entries()
    assert follower.high_watermark == core.high_watermark == end + 1


@pytest.mark.parametrize("reported", [True, False])
def test_a_long_snapshot_load_does_not_cost_the_follower_its_leader(reported: bool) -> None:
    """Loading a fetched snapshot (the driver's image build) may outlast the fetch timeout: ten
    million partitions take ~23 s. The load is the follower's own work, not the leader's silence,
    so the fetch timer restarts when the driver reports it done (``on_snapshot_installed``); the
    follower that polls afterwards still follows its leader. Unreported, it gives up on it."""
    net, leader, lagging, _ = snapshot_past_a_cut_off_follower()
    net.heal()
    follower = net.cores[lagging]
    while not (installed := [r.install_snapshot for r in net.readies[lagging] if r.install_snapshot is not None]):
        net.advance(1)
        assert net.now < 10_000, "the follower never installed the snapshot"
    assert (follower.role, follower.leader_id) == (Role.FOLLOWER, leader)
    loaded = net.now + 5 * follower.config.fetch_timeout_ms  # the driver's image build
    if reported:
        follower.on_snapshot_installed(loaded, installed[0])
    follower.poll(loaded)
    if reported:
        assert follower.role is Role.FOLLOWER and follower.leader_id == leader
    else:
        assert follower.role is Role.PROSPECTIVE


# -- observers (KIP-595) ---------------------------------------------------------------------------------
def test_observers_replicate_but_never_vote_or_count() -> None:
    net = Net([1, 2, 3], observers=[4])
    leader = net.elect()
    net.advance(3_000)  # the observer asks a random voter every request timeout
    assert net.cores[4].role is Role.OBSERVER and net.cores[4].leader_id == leader
    # While it follows a leader it grants no vote (and no candidate would count one: KIP-853).
    assert not ask(net, leader, 4, vote_request(leader, net.cores[4].epoch, 9, 99)).vote_granted
    # Cut both other voters off: the observer keeps fetching, but the HW must not move.
    hw = net.cores[leader].high_watermark
    for voter in (1, 2, 3):
        if voter != leader:
            net.isolate(voter)
    net.blocked -= {(4, leader), (leader, 4)}
    net.cores[leader].propose(net.now, [b"only the observer sees this"])
    net.advance(1_000)
    assert net.cores[4].log_end_offset == net.cores[leader].log_end_offset
    assert net.cores[leader].high_watermark == hw, "an observer's fetch never counts toward the HW"
    net.advance(30_000)
    assert net.cores[4].role in (Role.OBSERVER, Role.UNATTACHED)
    assert all(r.soft_state is None or r.soft_state.role in (Role.OBSERVER, Role.UNATTACHED) for r in net.readies[4])


def test_a_flush_that_predates_a_truncation_does_not_cover_the_new_batches() -> None:
    # Driver contract step 5: on_log_flushed names the last Ready it covers, so a group commit
    # that started before a truncation cannot vouch for batches appended after it.
    config = RaftConfig(node_id=2, voters=(1, 2, 3), cluster_id="t")
    core = RaftCore(config, SeededSource(), 0, quorum_state=QuorumStateData(3, 1), entries=make_log([1, 1, 2, 2]))
    core.poll(0)
    [fetch] = core.take_ready().messages  # seq 1
    assert isinstance(fetch.message, raft_pb2.FetchRequest) and fetch.message.fetch_offset == 4
    diverging = raft_pb2.FetchResponse(leader_id=1, leader_epoch=3)
    diverging.diverging_epoch.epoch = 1
    diverging.diverging_epoch.end_offset = 2
    core.step(10, Envelope(1, 2, fetch.correlation_id, diverging))
    ready = core.take_ready()  # seq 2
    assert ready.truncate_to == 2
    [refetch] = ready.messages
    assert isinstance(refetch.message, raft_pb2.FetchRequest) and refetch.message.fetch_offset == 2
    records = b"".join(e.data for e in make_log([1, 1, 3, 3])[2:])
    core.step(
        20, Envelope(1, 2, refetch.correlation_id, raft_pb2.FetchResponse(leader_id=1, leader_epoch=3, records=records))
    )
    ready = core.take_ready()  # seq 3
    assert [e.base_offset for e in ready.append] == [2, 3] and ready.flush
    assert not ready.messages, "the next fetch waits for the flush"
    core.on_log_flushed(30, 4, 1)  # a flush covering only Ready 1 (the old epoch-2 batches)
    assert core.durable_end_offset == 2
    assert not core.take_ready().messages
    core.on_log_flushed(40, 4, 3)
    assert core.durable_end_offset == 4
    [next_fetch] = core.take_ready().messages
    assert isinstance(next_fetch.message, raft_pb2.FetchRequest) and next_fetch.message.fetch_offset == 4


def test_a_download_survives_a_newer_snapshot_on_the_leader() -> None:
    # KIP-630 with retention: the snapshot being downloaded stays available (snapshots_retained).
    net = Net([1, 2, 3], snapshot_chunk_bytes=16)
    leader = net.elect()
    net.advance(100)
    lagging = next(n for n in net.cores if n != leader)
    net.isolate(lagging)
    core = net.cores[leader]
    for i in range(10):
        core.propose(net.now, [b"v%d" % i])
        net.advance(20)
    assert core.high_watermark == 11

    def image(end: int) -> SnapshotImage:
        entries = core.log.slice(0, end)
        return SnapshotImage(end, entries[-1].epoch, b"".join(e.data for e in entries))

    first, second = image(6), image(11)
    core.on_snapshot_created(net.now, first)
    net.heal()
    # Step message by message until the lagging follower has asked for its first chunk.
    for _ in range(10_000):
        if any(isinstance(e.message, raft_pb2.FetchSnapshotRequest) for e in net.delivered):
            break
        if net.network:
            net.deliver_one()
        else:
            net.now += 5
            for node in net.cores:
                net.drive(node)
    core.on_snapshot_created(net.now, second)  # a newer snapshot in the middle of the download
    assert [s.end_offset for s in core.snapshots] == [6, 11]
    assert core.log.start_offset == 6
    net.advance(3_000)
    follower = net.cores[lagging]
    installs = [r.install_snapshot for r in net.readies[lagging] if r.install_snapshot is not None]
    assert installs == [first]
    assert follower.log.entries() == core.log.entries()
    assert follower.high_watermark == core.high_watermark


def test_an_observer_asking_who_leads_claims_only_what_it_flushed() -> None:
    # Its Fetch offset is an acknowledgement: a leader whose latest voter set has the observer (an
    # addition not in the observer's log yet) counts it. Asking who leads waits for the fsync.
    net = Net([1, 2, 3], observers=[4])
    leader = net.elect()
    net.advance(3_000)
    observer = net.cores[4]
    assert observer.role is Role.OBSERVER
    net.stalled_disks.add(4)
    net.cores[leader].propose(net.now, [b"appended, not flushed"])
    net.advance(200)
    durable = observer.durable_end_offset
    assert observer.log_end_offset > durable
    net.isolate(4)
    seen = len(net.readies[4])
    net.advance(20_000)
    role: Role = observer.role  # its leader went quiet: it asks voters who leads
    assert role is Role.UNATTACHED
    offsets = [
        e.message.fetch_offset
        for ready in net.readies[4][seen:]
        for e in ready.messages
        if isinstance(e.message, raft_pb2.FetchRequest)
    ]
    assert all(offset <= durable for offset in offsets), offsets
    net.flush(4)
    net.advance(5_000)
    asked = [
        e.message.fetch_offset
        for ready in net.readies[4][seen:]
        for e in ready.messages
        if isinstance(e.message, raft_pb2.FetchRequest)
    ]
    assert observer.log_end_offset in asked, "once flushed it asks again, from its log end"
