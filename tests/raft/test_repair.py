"""Repair of damaged batches from the quorum (raftmeta/raft/repair.py, docs/storage.md "Repair
from the quorum"): a node vouches for nothing past its first damaged batch, takes an intact copy
from a peer -- never a damaged one -- and stops loudly when no copy the quorum may rely on is left."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from raftmeta.raft import Entry, QuorumStateData, RaftCore, Role, SnapshotImage, UnrepairableEntryError
from raftmeta.raft.config import Faults
from raftmeta.raft.repair import copy_fills, damage_of
from raftmeta.raft.voters import VoterSet
from raftmeta.records.codec import encode_batch
from raftmeta.v1 import raft_pb2, records_pb2
from tests.raft.harness import Net, make_log


def damaged(entry: Entry, position: int = 30) -> Entry:
    """``entry`` with one bit flipped (in the bytes its CRC covers)."""
    data = bytearray(entry.data)
    data[position] ^= 0x10
    return Entry(entry.base_offset, entry.epoch, entry.next_offset, bytes(data))


def with_damage(log: list[Entry], *offsets: int) -> list[Entry]:
    return [damaged(e) if e.base_offset in offsets else e for e in log]


def restart(net: Net, node: int, damage: list[int], entries: list[Entry] | None = None) -> RaftCore:
    """Restart ``node`` with the batches at ``damage`` rotten on its disk: its own log with those
    batches damaged, or ``entries`` as its disk holds them (a zeroed range, say). What it applied
    and readied before the restart is forgotten, as a new process forgets it."""
    old = net.cores[node]
    core = RaftCore(
        old.config,
        old._random,
        net.now,
        quorum_state=net.persisted.get(node),
        entries=with_damage(old.log.entries(), *damage) if entries is None else entries,
        high_watermark=old.high_watermark,
        first_correlation_id=1 << 32,
        damaged=damage,
    )
    net.cores[node] = core
    net.committed[node] = []
    net.readies[node] = []
    net.drive(node)
    return core


def repairs(net: Net, node: int) -> list[Entry]:
    return [entry for ready in net.readies[node] for entry in ready.repair]


# -- the copy check ----------------------------------------------------------------------------------
def test_a_copy_fills_a_slot_only_intact_and_with_the_slots_offset_epoch_and_end() -> None:
    log = make_log([1, 1, 2])
    slot = damaged(log[1])
    assert damage_of(slot) is not None and "CRC32C mismatch" in (damage_of(slot) or "")
    assert damage_of(log[1]) is None
    assert copy_fills(slot, log[1]) is None
    assert copy_fills(slot, damaged(log[1])) is not None  # a damaged copy
    # A misdirected write: batch 2's intact bytes in slot 1 (its CRC passes, its header does not).
    misdirected = Entry(1, 1, 2, log[2].data)
    assert "the batch there is (offset 2, epoch 2" in (damage_of(misdirected) or "")
    other_epoch = make_log([1, 3])[1]
    assert "epoch 3" in (copy_fills(slot, other_epoch) or "")
    assert damage_of(Entry(1, 1, 2, bytes(len(log[1].data)))) is not None  # a lost write: zeros


# -- a follower ---------------------------------------------------------------------------------------
def test_a_follower_fetches_from_its_damaged_batch_and_repairs_it_from_the_leaders_answer() -> None:
    net = Net([1, 2, 3])
    leader = net.elect_and_commit(4)
    follower = next(n for n in (1, 2, 3) if n != leader)
    before = net.cores[follower].log.entries()
    target = before[2]
    core = restart(net, follower, [target.base_offset])
    assert core.vouched_end_offset == target.base_offset
    assert core.damaged == {target.base_offset}
    # It applies nothing from the damaged batch on, and reports no more than it can vouch for.
    assert all(e.next_offset <= target.base_offset for e in net.committed[follower])
    net.advance(100)
    fetches = [
        e.message
        for e in net.delivered
        if e.source == follower and isinstance(e.message, raft_pb2.FetchRequest) and e.correlation_id >= 1 << 32
    ]
    assert fetches and fetches[0].fetch_offset == target.base_offset
    assert core.damaged == set()
    assert repairs(net, follower) == [target]  # the leader's copy, byte for byte
    assert core.log.entries() == before[: len(core.log.entries())]
    assert core.repairs == 1
    assert [e.base_offset for e in net.committed[follower]][-1] >= target.base_offset


# -- a leader ----------------------------------------------------------------------------------------------
def leader_with_damage(*, peers: dict[int, list[Entry]], damage: dict[int, list[int]], down: Iterable[int] = ()) -> Net:
    """Node 1 holds the only epoch-2 batch (at 3), so only it can win; its batch at 1 is damaged."""
    logs = {1: with_damage(make_log([1, 1, 1, 2]), *damage.get(1, []))}
    logs.update({n: with_damage(log, *damage.get(n, [])) for n, log in peers.items()})
    net = Net([1, 2, 3], logs=logs, damaged=damage, quorum_states=dict.fromkeys((1, 2, 3), QuorumStateData(2)))
    net.down |= set(down)
    return net


def test_a_leader_repairs_its_damaged_batch_from_a_voter_and_only_then_commits_past_it() -> None:
    net = leader_with_damage(peers={2: make_log([1, 1, 1]), 3: make_log([1, 1, 1])}, damage={1: [1]}, down={3})
    assert net.elect() == 1
    leader = net.cores[1]
    net.advance(3000)
    assert leader.damaged == set()
    assert repairs(net, 1) == [make_log([1, 1])[1]]
    assert leader.high_watermark >= 4  # committed its epoch's batch with node 2 once it could vouch
    assert [e.base_offset for e in net.committed[1]][:4] == [0, 1, 2, 3]


def test_a_leader_never_takes_a_damaged_copy_and_stops_when_every_copy_is_damaged() -> None:
    net = leader_with_damage(peers={2: make_log([1, 1, 1]), 3: make_log([1, 1, 1])}, damage={1: [1], 2: [1], 3: [1]})
    kept = net.cores[1].log.entries()
    with pytest.raises(UnrepairableEntryError, match=r"holds a damaged batch at offset 1 .*node 2: holds it damaged"):
        net.advance(5000)
    assert net.cores[1].role is Role.LEADER
    assert net.cores[1].log.entries()[:4] == kept  # nothing dropped on the way
    assert repairs(net, 1) == []


def test_the_planted_switch_repairs_from_a_damaged_copy() -> None:
    logs = {1: with_damage(make_log([1, 1, 1, 2]), 1), 2: with_damage(make_log([1, 1, 1]), 1)}
    net = Net(
        [1, 2, 3],
        logs=logs,
        damaged={1: [1], 2: [1]},
        quorum_states=dict.fromkeys((1, 2, 3), QuorumStateData(2)),
        faults=Faults(repair_unchecked=True),
    )
    net.down.add(3)
    assert net.elect() == 1
    net.advance(1000)
    assert repairs(net, 1) and damage_of(repairs(net, 1)[0]) is not None  # what the simulator catches


def test_a_damaged_uncommitted_batch_only_the_leader_holds_is_dropped_and_the_leader_resigns() -> None:
    # Node 1's epoch-2 batch at 3 is damaged; nodes 2 and 3 never had it: it is not committed.
    net = leader_with_damage(peers={2: make_log([1, 1, 1]), 3: make_log([1, 1, 1])}, damage={1: [3]}, down={3})
    assert net.elect() == 1
    net.down.clear()  # node 3 answers too: no other voter holds the batch
    net.advance(3000)
    core = net.cores[1]
    assert core.damaged == set()
    assert 3 not in [e.base_offset for e in core.log.entries() if e.epoch == 2]
    assert repairs(net, 1) == []
    leader = net.leader()
    assert net.cores[leader].epoch > 2 or leader != 1
    for node in (1, 2, 3):
        assert damage_of(net.cores[node].log.entries()[-1]) is None


def test_a_single_voter_asks_its_observer_and_stops_when_that_copy_is_damaged_too() -> None:
    logs = {1: with_damage(make_log([1, 1, 1]), 1), 2: with_damage(make_log([1, 1]), 1)}
    net = Net([1], [2], logs=logs, damaged={1: [1], 2: [1]}, quorum_states=dict.fromkeys((1, 2), QuorumStateData(1)))
    with pytest.raises(
        UnrepairableEntryError, match=r"no other voter holds an intact copy \(node 2: holds it damaged\)"
    ):
        net.advance(5000)
    assert net.cores[1].role is Role.LEADER


def test_a_damaged_batch_the_leader_holds_only_in_its_snapshot_installs_it_and_keeps_the_log_above() -> None:
    net = Net([1, 2, 3])
    leader = net.elect_and_commit(6)
    core = net.cores[leader]
    end = core.log.entries()[4].base_offset
    before = core.log.entry_before(end)
    assert before is not None and core.high_watermark > end
    core.on_snapshot_created(net.now, SnapshotImage(end, before.epoch, b""))
    assert core.log.start_offset == end
    follower = next(n for n in (1, 2, 3) if n != leader)
    above = [e for e in net.cores[follower].log.entries() if e.base_offset >= end]
    restarted = restart(net, follower, [1])
    net.advance(500)
    installs = [r for r in net.readies[follower] if r.install_snapshot is not None]
    assert installs and installs[0].install_keeps_log
    assert restarted.damaged == set()
    assert restarted.log.start_offset == end
    assert restarted.log.entries()[: len(above)] == above, "its intact copies above the snapshot stay"


# -- a damaged range of several batches (raftmeta/storage/damage.py) -----------------------------------
def zeroed_range(log: list[Entry], first: int, last: int) -> list[Entry]:
    """``log`` with its batches at offsets ``first``..``last`` (one epoch) zeroed into one range, as
    the storage reports it: one slot, its inner boundaries unknown."""
    inside = [e for e in log if first <= e.base_offset <= last]
    assert len({e.epoch for e in inside}) == 1
    size = sum(len(e.data) for e in inside)
    rng = Entry(first, inside[0].epoch, inside[-1].next_offset, bytes(size))
    return [e for e in log if e.base_offset < first] + [rng] + [e for e in log if e.base_offset > last]


def test_a_copy_fills_the_front_of_a_damaged_range_of_its_epoch_only() -> None:
    log = make_log([1, 1, 1, 1, 2])
    slot = zeroed_range(log, 1, 3)[1]
    assert copy_fills(slot, log[1]) is None, "the range's first batch"
    assert copy_fills(slot, log[2]) is not None, "not its front"
    assert copy_fills(slot, damaged(log[1])) is not None, "a damaged copy"
    assert copy_fills(slot, make_log([1, 3])[1]) is not None, "another epoch"


def test_a_follower_repairs_a_damaged_range_batch_by_batch_from_the_leaders_answers() -> None:
    net = Net([1, 2, 3], fetch_max_bytes=1)  # one batch per answer: the range takes several
    leader = net.elect_and_commit(6)
    follower = next(n for n in (1, 2, 3) if n != leader)
    old = net.cores[follower]
    before = old.log.entries()
    first, last = before[2], before[4]
    core = restart(net, follower, [first.base_offset], zeroed_range(before, first.base_offset, last.base_offset))
    assert core.vouched_end_offset == first.base_offset
    assert all(e.next_offset <= first.base_offset for e in net.committed[follower]), "nothing applied from it on"
    net.advance(300)
    assert core.damaged == set()
    assert repairs(net, follower) == before[2:5], "the leader's batches, front first, byte for byte"
    assert core.log.entries() == before[: len(core.log.entries())]
    assert core.repairs == 3


def test_a_leader_repairs_a_damaged_range_from_a_voter_and_a_follower_inside_it_waits() -> None:
    """Node 1 leads with offsets 1-2 zeroed into one range; node 2's log ends inside it (at 2):
    node 1 serves it nothing there until the range is repaired from node 3's copy."""
    full = make_log([1, 1, 1, 2])
    logs = {1: zeroed_range(full, 1, 2), 2: make_log([1, 1]), 3: make_log([1, 1, 1])}
    net = Net([1, 2, 3], logs=logs, damaged={1: [1]}, quorum_states=dict.fromkeys((1, 2, 3), QuorumStateData(2)))
    net.down.add(3)
    assert net.elect() == 1
    net.advance(500)
    leader = net.cores[1]
    assert leader.damaged == {1} and leader.high_watermark <= 1, "node 2 alone cannot repair offset 2"
    net.down.clear()
    net.advance(3000)
    assert leader.damaged == set()
    assert repairs(net, 1) == full[1:3]
    assert leader.high_watermark >= 4
    assert net.cores[2].log.entries()[:4] == full


def test_a_leader_stops_when_every_copy_of_its_damaged_range_is_damaged_also_inside_another_range() -> None:
    """Node 2 holds offsets 0-2 damaged as one range: asked for offset 1 it says it holds it damaged
    (not that it lacks it), so the leader counts it and stops, changing nothing."""
    full = make_log([1, 1, 1, 2])
    logs = {
        1: zeroed_range(full, 1, 2),
        2: zeroed_range(make_log([1, 1, 1]), 0, 2),
        3: with_damage(make_log([1, 1, 1]), 1),
    }
    net = Net(
        [1, 2, 3],
        logs=logs,
        damaged={1: [1], 2: [0], 3: [1]},
        quorum_states=dict.fromkeys((1, 2, 3), QuorumStateData(2)),
    )
    kept = net.cores[1].log.entries()
    with pytest.raises(UnrepairableEntryError, match=r"offset 1 .*node 2: holds it damaged"):
        net.advance(5000)
    assert net.cores[1].log.entries()[: len(kept)] == kept and repairs(net, 1) == []


# -- a damaged slot across an epoch change ---------------------------------------------------------------
def zeroed_across_epochs(log: list[Entry], first: int, last: int) -> tuple[list[Entry], dict[int, int]]:
    """``log`` with its batches at offsets ``first``..``last`` zeroed into one slot whose neighbours
    are of different epochs, as the storage reports it: the entry carries the epoch before it, and
    the span (base offset -> the epoch after it) says how far the epoch may rise inside."""
    before = next(e for e in log if e.next_offset == first)
    after = next(e for e in log if e.base_offset > last)
    inside = [e for e in log if first <= e.base_offset <= last]
    slot = Entry(first, before.epoch, inside[-1].next_offset, bytes(sum(len(e.data) for e in inside)))
    assert after.epoch > before.epoch
    return [e for e in log if e.base_offset < first] + [slot] + [e for e in log if e.base_offset > last], {
        first: after.epoch
    }


def test_a_copy_fills_a_slot_across_an_epoch_change_with_any_epoch_of_its_span_that_fits() -> None:
    log = make_log([1, 1, 2, 2, 3])
    entries, span = zeroed_across_epochs(log, 1, 3)
    slot = entries[1]
    assert copy_fills(slot, log[1], span[1]) is None, "its front, epoch 1"
    assert copy_fills(slot, make_log([1, 2])[1], span[1]) is None, "a front of epoch 2, within the span"
    assert copy_fills(slot, make_log([1, 4])[1], span[1]) is not None, "an epoch past the span"
    assert copy_fills(slot, make_log([1, 2])[1]) is not None, "without the span: epoch 1 alone"
    whole = Entry(1, 1, 4, log[1].data)  # fits the offsets, not the bytes
    assert copy_fills(slot, whole, span[1]) is not None


def test_a_follower_repairs_a_slot_across_an_epoch_change_batch_by_batch_from_its_leader() -> None:
    """Node 3 holds offsets 1-3 (epochs 1, 2, 2) zeroed into one slot between batches of epochs 1
    and 3. It takes the leader's batches into the slot front first, across the epoch change, with
    no truncation: its own batch at 4 stays (the leader's log has it), and its epoch index puts
    epoch 2 where the copy says. Until then it stands in no election, but it votes."""
    full = make_log([1, 1, 2, 2, 3])
    entries, span = zeroed_across_epochs(full, 1, 3)
    net = Net(
        [1, 2, 3],
        logs={1: full, 2: full, 3: entries},
        damaged={3: [1]},
        damaged_epochs={3: span},
        quorum_states=dict.fromkeys((1, 2, 3), QuorumStateData(3)),
        fetch_max_bytes=1,  # one batch per answer
    )
    follower = net.cores[3]
    assert follower.damaged_epochs == {1: 3} and follower.vouched_end_offset == 1
    net.down.update({1, 2})
    net.advance(5000)
    assert follower.role is Role.UNATTACHED, "no candidacy with a slot across an epoch change"
    net.down.clear()
    leader = net.elect()
    assert leader != 3
    net.advance(2000)
    assert follower.damaged == set() and follower.damaged_epochs == {}
    assert repairs(net, 3) == full[1:4], "the leader's batches, front first, across the epoch change"
    assert all(r.truncate_to is None for r in net.readies[3]), "nothing truncated: its own batch at 4 is the leader's"
    assert follower.log.entries() == net.cores[leader].log.entries()
    ends = [follower.log.end_offset_for_epoch(e) for e in (1, 2)]
    assert [(e.epoch, e.offset) for e in ends if e is not None] == [(1, 2), (2, 4)], "epoch 2 starts inside the slot"
    assert follower.high_watermark == net.cores[leader].high_watermark == follower.log.end_offset
    assert follower.repairs == 3


def test_a_slot_across_an_epoch_change_that_was_not_the_leaders_is_truncated_from_where_it_differs() -> None:
    """Node 3's slot over offsets 1-3 spans epochs 1..3, and its batch at 4 is of epoch 3, which
    the leader never had: the leader's batch at 3 is of epoch 4, past the span, so node 3's log
    differs from there on and is truncated there (uncommitted: nothing was acknowledged past 3)."""
    leader_log = make_log([1, 1, 2])
    mine, span = zeroed_across_epochs(make_log([1, 1, 2, 3, 3]), 1, 3)
    logs = {1: leader_log, 2: leader_log, 3: mine}
    net = Net(
        [1, 2, 3],
        logs=logs,
        damaged={3: [1]},
        damaged_epochs={3: span},
        quorum_states=dict.fromkeys((1, 2, 3), QuorumStateData(3)),
        fetch_max_bytes=1,
    )
    leader = net.elect()
    assert leader != 3
    net.advance(2000)
    follower = net.cores[3]
    assert follower.damaged == set()
    assert repairs(net, 3) == leader_log[1:3]
    assert [r.truncate_to for r in net.readies[3] if r.truncate_to is not None] == [3]
    assert follower.log.entries() == net.cores[leader].log.entries()


def test_asked_for_an_offset_inside_its_slot_across_an_epoch_change_a_peer_says_it_holds_it_damaged() -> None:
    """The leader (node 1) holds offset 2 (epoch 2) damaged; node 2 never had it; node 3 holds
    offsets 1-3 in a slot of epochs 1..3, so it may have held that batch: it answers that it holds
    it damaged, not that it lacks it. Its copy may be one a commit rests on, so with a majority of
    the copies damaged the leader stops, changing nothing -- where "lacks it" would have let the
    leader judge the batch uncommitted and drop it."""
    full = make_log([1, 1, 2, 2, 3])
    mine, span = zeroed_across_epochs(full, 1, 3)
    net = Net(
        [1, 2, 3],
        logs={1: with_damage(full, 2), 2: make_log([1, 1]), 3: mine},
        damaged={1: [2], 3: [1]},
        damaged_epochs={3: span},
        quorum_states=dict.fromkeys((1, 2, 3), QuorumStateData(3)),
    )
    kept = net.cores[1].log.entries()
    with pytest.raises(UnrepairableEntryError, match=r"offset 2 .*node 3: holds it damaged"):
        net.advance(20_000)
    assert net.cores[1].log.entries()[: len(kept)] == kept and repairs(net, 1) == []


def test_a_leader_whose_damage_only_a_peers_snapshot_covers_hands_over_once_that_peer_can_win() -> None:
    """Seed 130294 of the plane soak: two voters, the leader's batch at 1 damaged, the other voter
    holding it only in a snapshot and its log ending behind the leader's (no epoch-2 batch). The
    leader resigned as soon as the peer said "in a snapshot", before the peer had its epoch-2 batch:
    the leader then refused the peer every vote (its log is longer), won again, appended one more
    leader batch and resigned again, for ever. It now replicates its log to such a peer first and
    resigns once the peer can win (here: once it holds all of the leader's log); following it, the
    damaged node installs the snapshot and keeps its intact log above."""
    logs = {1: with_damage(make_log([1] * 7 + [2]), 1), 2: make_log([1] * 7)}
    # One batch a Fetch: the peer is still a batch behind when its answer about the damage
    # arrives, as it was in the seed.
    net = Net(
        [1, 2], logs=logs, damaged={1: [1]}, quorum_states=dict.fromkeys((1, 2), QuorumStateData(2)), fetch_max_bytes=1
    )
    old = net.cores[2]
    net.cores[2] = RaftCore(
        old.config,
        old._random,
        net.now,
        quorum_state=QuorumStateData(2),
        entries=make_log([1] * 7),
        snapshot=SnapshotImage(5, 1, b""),
        high_watermark=5,
    )
    net.drive(2)
    assert net.elect() == 1  # only node 1 holds the epoch-2 batch
    net.advance(10_000)
    leader = net.leader()
    assert leader == 2, "the peer whose snapshot covers the damage leads"
    damaged_node = net.cores[1]
    assert damaged_node.damaged == set()
    assert damaged_node.log.start_offset == 5
    installs = [r for r in net.readies[1] if r.install_snapshot is not None]
    assert installs and installs[0].install_keeps_log, "node 1 keeps its intact log above the snapshot"
    assert net.cores[2].high_watermark > 8, "the new leader commits its own epoch with node 1"
    assert net.cores[2].log.entries()[:3] == logs[1][5:8], "the old leader's epoch-2 batch reached node 2"


@pytest.mark.parametrize("fetch_max_bytes", [1, 1 << 20])
def test_a_snapshot_ending_inside_a_damaged_range_keeps_the_intact_batches_after_it(fetch_max_bytes: int) -> None:
    """The leader's log starts inside a follower's damaged range (its snapshot ends there). The
    follower fetches the leader's batches from the snapshot's end to the range's end (one answer, or
    one batch per answer), puts them at the back of the range, then installs the snapshot keeping
    its log: the intact batches after the range are never dropped nor fetched again."""
    net = Net([1, 2, 3], fetch_max_bytes=fetch_max_bytes)
    leader = net.elect_and_commit(8)
    follower = next(n for n in (1, 2, 3) if n != leader)
    old = net.cores[follower]
    before = old.log.entries()
    first, last = before[2], before[6]
    core = net.cores[leader]
    end = before[4].base_offset  # inside the range [first, last]
    assert core.high_watermark > last.next_offset and core.log.entry_at(end) is not None
    core.on_snapshot_created(net.now, SnapshotImage(end, before[3].epoch, b""))
    assert core.log.start_offset == end
    restarted = restart(net, follower, [first.base_offset], zeroed_range(before, first.base_offset, last.base_offset))
    net.advance(1000)
    readies = net.readies[follower]
    installs = [r for r in readies if r.install_snapshot is not None]
    assert len(installs) == 1 and installs[0].install_keeps_log, "the snapshot installs keeping the log"
    assert all(r.truncate_to is None for r in readies), "nothing truncated"
    after = [e for e in before if e.base_offset > last.base_offset]
    appended = [e for r in readies for e in r.append]
    assert not any(e in appended for e in after), "the intact batches after the range are not fetched again"
    assert repairs(net, follower) == [before[6], before[5], before[4]], "the bridge, last batch first"
    assert restarted.damaged == set() and restarted.log.start_offset == end
    assert restarted.log.entries()[: len(before) - 4] == before[4:], "the leader's batches, byte for byte"


def test_a_damaged_batch_is_judged_by_the_voter_set_in_force_when_it_was_written_not_only_the_latest() -> None:
    """Plane seeds 148266 and 148820 by hand. Voters {1, 2, 3}: batches 1 and 2 committed on nodes
    1 and 3, then node 1 took a change removing node 3 (uncommitted: node 2 never fetched). Node 1
    restarts with batch 1 damaged and leads the set {1, 2} its log now ends in; node 2 does not
    hold batch 1. Judged by {1, 2} alone it looked uncommitted and node 1 dropped two committed
    batches. It is judged by every set that can have committed it -- {1, 2, 3} as well -- so node 1
    waits for node 3 and repairs the batch from its copy."""
    removal = records_pb2.MetadataRecord(voters=VoterSet.of_ids([1, 2]).to_record()).SerializeToString()
    committed = make_log([1, 1, 1])
    change = Entry(3, 1, 4, encode_batch(3, 1, [removal], 0, control=True))
    logs = {1: with_damage([*committed, change], 1), 2: committed[:1], 3: committed}
    net = Net([1, 2, 3], logs=logs, damaged={1: [1]}, quorum_states=dict.fromkeys((1, 2, 3), QuorumStateData(2)))
    assert net.cores[1].voters == (1, 2)
    net.down.add(3)
    net.advance(5_000)  # node 1 wins with node 2's vote; node 2 answers that it lacks batch 1
    leader = net.cores[1]
    assert [(e.base_offset, e.epoch) for e in leader.log.entries()[:3]] == [(0, 1), (1, 1), (2, 1)], (
        "a batch committed by {1, 2, 3} was dropped"
    )
    assert net.leader() == 1 and leader.damaged == {1} and repairs(net, 1) == []
    net.down.clear()
    net.advance(5_000)
    assert net.cores[1].damaged == set() and repairs(net, 1) == [committed[1]]
    assert [e.base_offset for e in net.cores[1].log.entries()[:4]] == [0, 1, 2, 3]
