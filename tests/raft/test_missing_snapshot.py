"""A node whose damaged newest snapshot had no fallback (docs/storage.md, "A damaged snapshot with
no fallback"): its log starts at the snapshot's slot with no state below it. Until it has
installed its leader's snapshot it applies nothing, grants no vote and stands in no election; it
fetches from offset 0, so the leader answers with its snapshot, and keeps its own log above it."""

from __future__ import annotations

import pytest

from raftmeta.raft import Faults, RaftCore, Role, SnapshotImage, UnrecoverableStateError
from raftmeta.v1 import raft_pb2
from tests.raft.harness import Net


def snapshotted_quorum() -> tuple[Net, int, int, int]:
    """Three voters, six creates committed; the leader snapshots at the fifth batch. Returns the
    net, the leader, a follower and the snapshot's end offset."""
    net = Net([1, 2, 3])
    leader = net.elect_and_commit(6)
    core = net.cores[leader]
    end = core.log.entries()[4].base_offset
    before = core.log.entry_before(end)
    assert before is not None and core.high_watermark > end
    core.on_snapshot_created(net.now, SnapshotImage(end, before.epoch, b""))
    return net, leader, next(n for n in (1, 2, 3) if n != leader), end


def restart_without_state(net: Net, node: int, end: int) -> RaftCore:
    """Restart ``node`` with its log from ``end`` on and its snapshot there missing."""
    old = net.cores[node]
    before = old.log.entry_before(end)
    epoch = before.epoch if before is not None else old.log.start_epoch  # a leader's log starts there
    assert before is not None or old.log.start_offset == end
    core = RaftCore(
        old.config,
        old._random,
        net.now,
        quorum_state=net.persisted.get(node),
        entries=[e for e in old.log.entries() if e.base_offset >= end],
        high_watermark=old.high_watermark,
        first_correlation_id=1 << 32,
        missing_snapshot=(end, epoch),
    )
    net.cores[node] = core
    net.committed[node] = []
    net.readies[node] = []
    net.drive(node)
    return core


def without_state(core: RaftCore) -> bool:
    """A call, not the attribute: the type checker would keep an asserted value narrowed."""
    return core.state_missing


def test_it_fetches_from_0_installs_the_leaders_snapshot_and_keeps_its_log_above() -> None:
    net, leader, follower, end = snapshotted_quorum()
    above = [e for e in net.cores[follower].log.entries() if e.base_offset >= end]
    restarted = restart_without_state(net, follower, end)
    assert without_state(restarted)
    fetches = [m.message for m in net.network if m.source == follower]
    offsets = [m.fetch_offset for m in fetches if isinstance(m, raft_pb2.FetchRequest)]
    assert offsets and set(offsets) == {0}, "below the leader's log start"
    net.advance(500)
    installs = [r for r in net.readies[follower] if r.install_snapshot is not None]
    image = installs[0].install_snapshot if len(installs) == 1 else None
    assert image is not None and (image.end_offset, image.epoch) == (end, net.cores[leader].log.start_epoch)
    assert installs[0].install_keeps_log, "the snapshot ends where its log starts: the log stays"
    assert not without_state(restarted)
    assert restarted.log.start_offset == end
    assert restarted.log.entries()[: len(above)] == above
    # Nothing was applied before the install; afterwards its own batches above the snapshot are.
    first_install = next(i for i, r in enumerate(net.readies[follower]) if r.install_snapshot is not None)
    assert all(not r.committed for r in net.readies[follower][:first_install])
    assert [e.base_offset for e in net.committed[follower]][:1] == [end]


def test_without_its_state_it_grants_no_vote_and_stands_in_no_election() -> None:
    net, leader, follower, end = snapshotted_quorum()
    other = next(n for n in (1, 2, 3) if n not in (leader, follower))
    restarted = restart_without_state(net, follower, end)
    delivered_before = len(net.delivered)
    net.down.add(leader)  # its snapshot out of reach: the stateless node stays without a state
    net.advance(5000)
    assert without_state(restarted)
    assert net.leaders() == [], "the other voter alone cannot win: the stateless one grants no vote"
    assert restarted.role is not Role.CANDIDATE and restarted.role is not Role.LEADER
    answers = [(m.destination, m.message) for m in net.delivered[delivered_before:] if m.source == follower]
    votes = [(to, answer.vote_granted) for to, answer in answers if isinstance(answer, raft_pb2.VoteResponse)]
    assert votes and set(votes) == {(other, False)}, "asked, and refused"


def test_every_voter_without_its_state_stops_loudly_instead_of_waiting() -> None:
    """Every voter's snapshot damaged at once with no fallback: the state below the log is on no
    voter and none can be elected to send it (each grants no vote, stands in no election). Each
    asks the others, learns that they lack it too, and stops naming them."""
    net, leader, _follower, end = snapshotted_quorum()
    epoch = net.cores[leader].log.start_epoch
    for node in (1, 2, 3):
        restart_without_state(net, node, end)
    with pytest.raises(UnrecoverableStateError) as raised:
        net.advance(10_000)
    error = raised.value
    assert (error.end_offset, error.snapshot_epoch) == (end, epoch)
    assert error.missing == [1, 2, 3] and error.holding == []
    assert f"the state below offset {end} is on no voter that answered" in str(error)


def test_a_majority_without_its_state_and_no_leader_stops_naming_the_voters_that_hold_it() -> None:
    """Two of three voters without the state below their logs, the third intact but unable to win
    their votes: no leader can ever be elected, and the stateless ones stop, naming the holder."""
    net, leader, follower, end = snapshotted_quorum()
    holder = next(n for n in (1, 2, 3) if n not in (leader, follower))
    for node in (leader, follower):
        restart_without_state(net, node, end)
    with pytest.raises(UnrecoverableStateError) as raised:
        net.advance(20_000)
    assert raised.value.missing == sorted((leader, follower)) and raised.value.holding == [holder]
    assert net.leaders() == []


def test_a_stateless_voter_whose_leader_is_alive_installs_its_snapshot_and_never_stops() -> None:
    """With the leader alive the round finds a leader (the other stateless voter's answer is not
    enough): the node installs the leader's snapshot, as before."""
    net, leader, follower, end = snapshotted_quorum()
    other = next(n for n in (1, 2, 3) if n not in (leader, follower))
    restarted = [restart_without_state(net, node, end) for node in (follower, other)]
    net.advance(10_000)
    assert [without_state(core) for core in restarted] == [False, False]
    assert net.leaders() == [leader]


def test_the_planted_switch_waits_for_ever_without_a_word() -> None:
    """wait_without_state (a planted bug for the simulator): the same quorum as above waits."""
    net, _leader, _follower, end = snapshotted_quorum()
    for node in (1, 2, 3):
        core = restart_without_state(net, node, end)
        core._faults = Faults(wait_without_state=True)
    net.advance(10_000)
    assert net.leaders() == [] and all(without_state(net.cores[n]) for n in (1, 2, 3))
