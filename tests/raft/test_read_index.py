"""Linearizable reads (RaftCore.read_index): a read is released only after a majority of voters
fetched in this epoch after it started, and once the high watermark reached its commit point; a
deposed leader that does not know it yet never releases one."""

from __future__ import annotations

import pytest

from raftmeta.raft import Faults, NotLeaderError, RaftConfig, RaftCore, Role

from .harness import Net, SeededSource


def reads_of(net: Net, node: int) -> list[tuple[int, int]]:
    return [read for ready in net.readies[node] for read in ready.reads]


def test_a_read_is_released_after_one_round_with_a_majority() -> None:
    net = Net([1, 2, 3])
    leader = net.elect()
    net.advance(200)
    core = net.cores[leader]
    hw = core.high_watermark
    read_id = core.read_index(net.now)
    net.drive(leader)
    assert reads_of(net, leader) == [], "not before the followers echoed the barrier"
    net.deliver_all()  # the parked Fetches are answered now, and the followers fetch again at once
    assert reads_of(net, leader) == [(read_id, hw)]


def test_an_isolated_leader_never_releases_a_read() -> None:
    """The deposed leader of a partition still believes it leads (check quorum has not run out):
    a read there would miss writes the new leader acknowledges. It waits, and fails with the epoch."""
    net = Net([1, 2, 3])
    old = net.elect()
    net.advance(200)
    net.isolate(old)
    read_id = net.cores[old].read_index(net.now)
    net.advance(400)  # well inside the check-quorum timeout: it still leads
    assert net.cores[old].role is Role.LEADER
    assert reads_of(net, old) == []
    net.advance(10_000)
    assert net.cores[old].role is not Role.LEADER
    assert read_id not in [r for r, _ in reads_of(net, old)]


def test_a_single_voter_releases_at_once_once_its_first_batch_commits() -> None:
    core = RaftCore(RaftConfig(node_id=1, voters=(1,), cluster_id="t"), SeededSource(1), 0)
    core.poll(10_000)
    assert core.role is Role.LEADER
    read_id = core.read_index(10_000)
    assert core.take_ready().reads == [], "the LeaderChangeRecord is not committed yet"
    core.on_log_flushed(10_000, core.log_end_offset, 1 << 40)
    assert core.take_ready().reads == [(read_id, 1)]


def test_reads_are_released_in_order() -> None:
    net = Net([1, 2, 3])
    leader = net.elect()
    net.advance(200)
    core = net.cores[leader]
    first = core.read_index(net.now)
    second = core.read_index(net.now)
    net.drive(leader)
    net.deliver_all()
    assert [r for r, _ in reads_of(net, leader)] == [first, second]


def test_only_a_leader_takes_reads() -> None:
    net = Net([1, 2, 3])
    leader = net.elect()
    follower = next(n for n in net.cores if n != leader)
    with pytest.raises(NotLeaderError):
        net.cores[follower].read_index(net.now)


def test_the_planted_stale_read_bug_releases_on_an_isolated_leader() -> None:
    net = Net([1, 2, 3], faults=Faults(stale_reads=True))
    old = net.elect()
    net.advance(200)
    net.isolate(old)
    read_id = net.cores[old].read_index(net.now)
    net.drive(old)
    assert [r for r, _ in reads_of(net, old)] == [read_id]
