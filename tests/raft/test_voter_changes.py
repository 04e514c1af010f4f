"""Voter changes in the consensus core (KIP-853): the set in force is the latest VotersRecord in
the log, committed or not; one change at a time; Kafka's refusals; a removed leader resigns."""

from __future__ import annotations

import pytest

from raftmeta.raft import Entry, Envelope, NotLeaderError, RaftConfig, RaftCore, Role, SnapshotImage
from raftmeta.raft.core import VoterChangeError
from raftmeta.raft.voters import Endpoint, VoterHistory, VoterNode, VoterSet, voters_in_batch, voters_in_data
from raftmeta.records.codec import encode_batch
from raftmeta.v1 import errors_pb2, raft_pb2, records_pb2

from .harness import Net, SeededSource

DIR = bytes(range(16))


def settle(net: Net, ms: int = 1_000) -> None:
    net.advance(ms)


def caught_up_net() -> tuple[Net, int]:
    """Voters 1-3 with observer 4 fetching; a leader that has committed its epoch."""
    net = Net([1, 2, 3], observers=[4])
    leader = net.elect()
    settle(net, 3_000)
    assert net.cores[4].role is Role.OBSERVER
    return net, leader


def test_the_voter_set_round_trips_through_a_voters_record() -> None:
    voters = VoterSet((VoterNode(1, DIR, (Endpoint("CONTROLLER", "h1", 9093),)), VoterNode(3)))
    assert VoterSet.from_record(voters.to_record()) == voters
    record = records_pb2.MetadataRecord(voters=voters.to_record()).SerializeToString()
    control = encode_batch(7, 2, [record], 0, control=True)
    assert voters_in_batch(control) == voters
    # A data batch holding the same bytes is not a voter change: only control batches are.
    assert voters_in_batch(encode_batch(7, 2, [record], 0)) is None
    assert voters_in_data(encode_batch(0, 1, [b"x"], 0) + control) == voters


def test_removing_needs_the_directory_id_when_both_sides_know_it() -> None:
    voters = VoterSet((VoterNode(1, DIR), VoterNode(2)))
    assert voters.without_voter(1, bytes(16)) is None  # a wiped disk is another replica
    assert voters.without_voter(1, DIR) == VoterSet((VoterNode(2),))
    assert voters.without_voter(1, b"") == VoterSet((VoterNode(2),))
    assert VoterSet((VoterNode(2),)).without_voter(2, b"") is None  # never zero voters


def test_history_truncation_restores_the_set_before_the_change() -> None:
    base = VoterSet.of_ids([1, 2, 3])
    history = VoterHistory(base)
    four = VoterSet.of_ids([1, 2, 3, 4])
    history.add(10, four)
    assert history.latest() == four and history.at(10) == base and history.at(11) == four
    assert history.truncate_to(11) is False
    assert history.truncate_to(10) is True and history.latest() == base
    history.add(12, four)
    history.trim_prefix(20)
    assert history.base == four and history.latest_offset() == -1


def test_adding_a_caught_up_observer_makes_it_a_voter_before_the_change_commits() -> None:
    net, leader = caught_up_net()
    core = net.cores[leader]
    entry = core.add_voter(net.now, VoterNode(4, DIR))
    # In force at once on the leader: the change commits on a majority of the new set (3 of 4).
    assert core.voters == (1, 2, 3, 4)
    assert core.high_watermark <= entry.base_offset
    settle(net)
    assert core.high_watermark > entry.base_offset
    assert net.cores[4].role is Role.FOLLOWER and net.cores[4].is_voter
    # The new voter now counts: with it and one old voter cut off, 2 of 4 is no majority (it
    # was one of 3 before the change).
    other = next(n for n in (1, 2, 3) if n != leader)
    net.isolate(4)
    net.isolate(other)
    net.blocked -= {(4, other), (other, 4)}
    hw = core.high_watermark
    core.propose(net.now, [b"needs 3 of 4"])
    settle(net, 500)
    assert core.high_watermark == hw
    net.heal()
    settle(net)
    assert core.high_watermark > hw
    assert all(c.voters == (1, 2, 3, 4) for c in net.cores.values())


def test_add_refusals_follow_kafkas_order_and_codes() -> None:
    net, leader = caught_up_net()
    core = net.cores[leader]
    with pytest.raises(VoterChangeError) as duplicate:
        core.add_voter(net.now, VoterNode(2))
    assert duplicate.value.code == errors_pb2.DUPLICATE_VOTER
    with pytest.raises(VoterChangeError) as unknown:
        core.add_voter(net.now, VoterNode(9))  # never fetched: not a caught-up observer
    assert unknown.value.code == errors_pb2.REQUEST_TIMED_OUT and "caught-up observer" in unknown.value.message
    core.add_voter(net.now, VoterNode(4))
    with pytest.raises(VoterChangeError) as pending:
        core.remove_voter(net.now, 4)  # one change at a time: the last one is not committed yet
    assert pending.value.code == errors_pb2.REQUEST_TIMED_OUT and "not committed yet" in pending.value.message
    follower = next(n for n in (1, 2, 3) if n != leader)
    with pytest.raises(NotLeaderError):
        net.cores[follower].add_voter(net.now, VoterNode(4))


def test_a_lagging_observer_is_refused_with_request_timed_out() -> None:
    net, leader = caught_up_net()
    net.isolate(4)
    settle(net, 5_000)
    net.heal()
    with pytest.raises(VoterChangeError) as lagging:
        net.cores[leader].add_voter(net.now, VoterNode(4))
    assert lagging.value.code == errors_pb2.REQUEST_TIMED_OUT


def test_remove_refuses_an_unknown_voter() -> None:
    net, leader = caught_up_net()
    with pytest.raises(VoterChangeError) as missing:
        net.cores[leader].remove_voter(net.now, 7)
    assert missing.value.code == errors_pb2.VOTER_NOT_FOUND


@pytest.mark.parametrize("change", ["add", "update", "remove"])
def test_a_directory_id_that_is_no_uuid_is_refused_by_name(change: str) -> None:
    """gRPC's bytes field can carry any length; a Kafka Uuid is 16 bytes. The controller fuzz
    found the node dying on a one-byte id while it named it in VOTER_NOT_FOUND's message."""
    net, leader = caught_up_net()
    core = net.cores[leader]
    end = core.log_end_offset
    changes = {
        "add": lambda: core.add_voter(net.now, VoterNode(4, b"\x01")),
        "update": lambda: core.update_voter(net.now, VoterNode(2, b"\x01" * 17)),
        "remove": lambda: core.remove_voter(net.now, 9, b"\x01"),
    }
    with pytest.raises(VoterChangeError) as refused:
        changes[change]()
    assert refused.value.code == errors_pb2.INVALID_REQUEST
    assert "voter_directory_id must be empty or 16 bytes" in refused.value.message
    assert core.log_end_offset == end, "nothing appended"


def test_a_removed_follower_becomes_an_observer_and_stops_counting() -> None:
    net, leader = caught_up_net()
    removed = next(n for n in (1, 2, 3) if n != leader)
    core = net.cores[leader]
    entry = core.remove_voter(net.now, removed)
    settle(net)
    assert core.high_watermark > entry.base_offset
    assert net.cores[removed].role is Role.OBSERVER and not net.cores[removed].is_voter
    # It keeps replicating as an observer, and no longer starts elections.
    core.propose(net.now, [b"after the removal"])
    settle(net)
    assert net.cores[removed].log_end_offset == core.log_end_offset
    assert net.cores[removed].role is Role.OBSERVER


def test_a_leader_that_removes_itself_resigns_once_the_change_commits() -> None:
    net, leader = caught_up_net()
    core = net.cores[leader]
    entry = core.remove_voter(net.now, leader)
    assert core.role is Role.LEADER and not core.is_voter  # leads until the change commits
    settle(net, 5_000)
    assert core.state.role in (Role.RESIGNED, Role.UNATTACHED, Role.OBSERVER)
    new_leader = net.leader()
    assert new_leader != leader
    assert net.cores[new_leader].high_watermark > entry.base_offset
    assert net.cores[new_leader].voters == tuple(v for v in (1, 2, 3) if v != leader)
    settle(net, 5_000)
    assert (core.state.role, core.leader_id) == (Role.OBSERVER, new_leader)


def test_truncating_an_uncommitted_change_restores_the_old_set() -> None:
    config = RaftConfig(node_id=2, voters=(1, 2, 3), cluster_id="t")
    four = VoterSet.of_ids([1, 2, 3, 4])
    record = records_pb2.MetadataRecord(voters=four.to_record()).SerializeToString()
    entries = [
        Entry(0, 1, 1, encode_batch(0, 1, [b"a"], 0)),
        Entry(1, 1, 2, encode_batch(1, 1, [record], 0, control=True)),
    ]
    core = RaftCore(config, SeededSource(), 0, entries=entries)
    assert list(core.voters) == [1, 2, 3, 4]
    core._truncate(0, 1, "test: the leader of a later epoch never had it")
    assert list(core.voters) == [1, 2, 3]


def test_a_snapshot_carries_the_voter_set_below_it() -> None:
    three_four = VoterSet.of_ids([1, 3, 4])
    record = records_pb2.MetadataRecord(voters=three_four.to_record()).SerializeToString()
    data = encode_batch(0, 1, [b"a"], 0) + encode_batch(1, 1, [record], 0, control=True)
    core = RaftCore(
        RaftConfig(node_id=4, voters=(1, 2, 3), cluster_id="t"), SeededSource(), 0, snapshot=SnapshotImage(2, 1, data)
    )
    assert core.voters == (1, 3, 4) and core.is_voter


# -- directory ids: a wiped disk is another replica (KIP-853) ---------------------------------------
def test_a_vote_addressed_to_another_directory_is_refused_with_invalid_voter_key() -> None:
    core = RaftCore(RaftConfig(node_id=2, voters=(1, 2, 3), cluster_id="t", directory_id=DIR), SeededSource(), 0)
    core.take_ready()
    request = raft_pb2.VoteRequest(
        cluster_id="t",
        candidate_id=1,
        candidate_epoch=3,
        last_offset_epoch=0,
        last_offset=0,
        voter_directory_id=b"x" * 16,
    )
    core.step(1, Envelope(1, 2, 1, request))
    [answer] = core.take_ready().messages
    assert isinstance(answer.message, raft_pb2.VoteResponse)
    assert answer.message.error_code == errors_pb2.INVALID_VOTER_KEY and not answer.message.vote_granted
    assert core.epoch == 0  # nothing moved
    request.voter_directory_id = DIR
    core.step(2, Envelope(1, 2, 2, request))
    [answer] = core.take_ready().messages
    assert answer.message.vote_granted  # type: ignore[union-attr]


def test_an_added_voter_with_a_wiped_disk_is_not_counted_until_added_again() -> None:
    net = Net([1, 2, 3], observers=[4], directory_id=DIR)
    leader = net.elect()
    settle(net, 3_000)
    core = net.cores[leader]
    core.add_voter(net.now, VoterNode(4))
    settle(net)
    assert core.voter_set.node(4) == VoterNode(4, DIR)  # the directory id of the replica that caught up
    # Node 4 loses its disk and comes back with a new directory id and an empty log.
    wiped = bytes(16)
    net.cores[4] = RaftCore(
        RaftConfig(node_id=4, voters=(1, 2, 3), cluster_id="t", directory_id=wiped), SeededSource(9), net.now
    )
    settle(net)
    # Its Fetches are an observer's: with another voter cut off, leader + 1 of {1,2,3,4} is no majority.
    other = next(n for n in (1, 2, 3) if n != leader)
    net.isolate(other)
    net.blocked -= {(leader, 4), (4, leader)}
    hw = core.high_watermark
    core.propose(net.now, [b"needs a real third voter"])
    settle(net, 500)
    assert core.high_watermark == hw
    assert 4 in core.state.observers  # type: ignore[attr-defined]


def test_a_voter_that_moved_gets_its_new_listener_recorded() -> None:
    net, leader = caught_up_net()
    core = net.cores[leader]
    other = next(n for n in (1, 2, 3) if n != leader)
    moved = VoterNode(other, b"", (Endpoint("CONTROLLER", "10.9.9.9", 9999),))
    entry = core.update_voter(net.now, moved)
    settle(net)
    assert core.high_watermark > entry.base_offset
    assert core.voters == (1, 2, 3)  # the same voters ...
    assert all(c.voter_set.node(other) == moved for c in net.cores.values())  # ... one at its new address
    with pytest.raises(VoterChangeError) as unknown:
        core.update_voter(net.now, VoterNode(9))
    assert unknown.value.code == errors_pb2.VOTER_NOT_FOUND


def test_an_observers_first_fetch_of_an_epoch_counts_as_caught_up_only_at_the_log_end() -> None:
    """Kafka's lastCaughtUpTimestamp (LeaderState.ReplicaState.updateFollowerState): a Fetch is
    caught up if it reaches the leader's log end now, or the end the leader had when it answered
    the previous Fetch -- and a first Fetch has no previous one. Counting a far-behind observer's
    first Fetch of the epoch as caught up let the plane simulator add a voter thousands of offsets
    behind to a one-voter quorum, which then committed nothing until it caught up (plane seed
    148767, liveness)."""
    net, leader = caught_up_net()
    core = net.cores[leader]
    for value in (b"a", b"b", b"c"):
        core.propose(net.now, [value])
    settle(net)
    end = core.log.end_offset
    assert end > 3

    def fetch(offset: int, last_epoch: int, correlation_id: int) -> None:
        request = raft_pb2.FetchRequest(
            cluster_id="t",
            replica_id=9,
            replica_epoch=core.epoch,
            fetch_offset=offset,
            last_fetched_epoch=last_epoch,
            max_bytes=1,
            max_wait_ms=0,
        )
        core.step(net.now, Envelope(9, leader, correlation_id, request))
        core.take_ready()

    fetch(0, 0, 1)  # node 9's first Fetch: from the start of a log of `end` offsets
    with pytest.raises(VoterChangeError) as far_behind:
        core.add_voter(net.now, VoterNode(9))
    assert far_behind.value.code == errors_pb2.REQUEST_TIMED_OUT and "caught-up observer" in far_behind.value.message
    last = core.log.entries()[-1]
    fetch(end, last.epoch, 2)  # now at the leader's log end
    core.add_voter(net.now, VoterNode(9))
    assert 9 in core.voters
