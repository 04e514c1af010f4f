"""Storage faults in the simulator (raftmeta/sim/disk_faults.py): what each one does to a disk,
and seeded runs where the quorum repairs every damaged replica without loss (docs/storage.md,
"Repair from the quorum"). The planted switches are caught in tests/sim/test_simulation.py."""

from __future__ import annotations

import dataclasses

import pytest

from raftmeta.raft import VOTE_FENCED, Entry, Faults, QuorumStateData, RaftConfig
from raftmeta.raft.repair import damage_of
from raftmeta.records.codec import encode_batch
from raftmeta.sim import FAULT_KINDS, run_one, run_seeds
from raftmeta.sim.cluster import FAULT, RESTART, SimNode, Simulation
from raftmeta.sim.disk import SimDisk
from raftmeta.sim.disk_faults import (
    LOG_FAULTS,
    STORAGE_FAULTS,
    damaged_slots,
    inject,
    lose_snapshot,
    zero_across_epochs,
    zero_around,
)
from raftmeta.sim.params import SimParams, draw_params
from raftmeta.sim.rng import SeededRandom

SEEDS = 100
STEPS = 3000


def batch(offset: int, epoch: int) -> Entry:
    data = encode_batch(offset, epoch, [b"c" + offset.to_bytes(8, "big") + b"x" * 700], 0)
    return Entry(offset, epoch, offset + 1, data)


def flushed_disk(length: int = 6) -> SimDisk:
    disk = SimDisk()
    for offset in range(length):
        disk.append(batch(offset, 1 + offset // 3))
    disk.flush_end(disk.flush_begin()[0])
    disk.quorum_state = QuorumStateData(2, 1, 1)
    disk.hw_checkpoint = 4
    return disk


@pytest.mark.parametrize("kind", LOG_FAULTS)
def test_each_log_fault_leaves_a_detectable_damaged_batch_never_the_last(kind: str) -> None:
    hit: set[int] = set()
    for seed in range(40):
        disk = flushed_disk()
        assert inject(disk, SeededRandom(seed), kind, [], minority=1)
        damaged = damaged_slots(disk.durable)
        assert damaged, "the recovery scan finds it"
        assert damaged_slots(disk.entries) == damaged, "what the node reads back after the crash"
        assert 5 not in damaged, "the last batch would be truncated as a torn write, not damaged"
        for entry in disk.durable:
            assert (entry.base_offset, entry.next_offset) == (entry.base_offset, entry.base_offset + 1)
        hit.update(damaged)
        # The slot stays where it was: only its bytes changed.
        assert [e.base_offset for e in disk.durable] == list(range(6))
    assert len(hit) > 2, "the damage lands on different batches"


def test_no_batch_is_damaged_on_more_than_a_minority_of_disks() -> None:
    others = [flushed_disk()]
    for entry in list(others[0].durable[:-1]):
        inject(others[0], SeededRandom(entry.base_offset), "lost_write", [], minority=1)
    # Every batch but the last is damaged on the other disk: with a minority of one, none is left.
    assert damaged_slots(others[0].durable) == [0, 1, 2, 3, 4]
    disk = flushed_disk()
    assert not inject(disk, SeededRandom(1), "bit_flip", others, minority=1)
    assert inject(disk, SeededRandom(1), "bit_flip", others, minority=2)


def test_a_damaged_quorum_state_is_set_aside_and_a_damaged_checkpoint_read_as_none() -> None:
    disk = flushed_disk()
    assert inject(disk, SeededRandom(0), "quorum_state", [], minority=1)
    assert disk.quorum_state is None and disk.quorum_state_lost
    assert inject(disk, SeededRandom(0), "hw_checkpoint", [], minority=1)
    assert disk.hw_checkpoint == 0


def test_a_repair_is_durable_at_once_and_a_damaged_copy_holds_nothing() -> None:
    disk = flushed_disk()
    intact = disk.durable[2]
    inject(disk, SeededRandom(3), "lost_write", [], minority=1)
    [slot] = damaged_slots(disk.durable)
    original = batch(slot, disk.durable[slot].epoch)
    assert not disk.durably_holds(original)
    assert disk.durably_holds(original, intact=False)
    disk.repair(original)
    assert damaged_slots(disk.durable) == [] and disk.durably_holds(original)
    assert damage_of(intact) is None


@pytest.mark.sim
@pytest.mark.parametrize("voters", [3, 5])
def test_storage_faults_alone_every_damaged_replica_is_repaired_and_nothing_acknowledged_is_lost(voters: int) -> None:
    """Every fault of the seed is a crash with a damaged disk, on a minority of the disks for each
    batch and on every replica over a run. No invariant breaks, every acknowledged create is
    committed, and every running voter ends repaired (the run's liveness check)."""
    summary = run_seeds(range(SEEDS), steps=STEPS, voters=voters, kinds=frozenset({"storage"}))
    assert summary.violations == [], summary.violations[:3]
    assert summary.acknowledged > 20 * SEEDS
    for kind in STORAGE_FAULTS:
        assert summary.faults.get(f"storage_{kind}", 0) > 0, kind
    assert summary.faults["storage_repaired"] > SEEDS


@pytest.mark.sim
@pytest.mark.parametrize("seed", [100308, 104161])
def test_a_node_behind_the_vote_fence_acknowledges_only_what_it_flushed(seed: int) -> None:
    """Seeds of the soak that broke 3-majority-persisted before a fenced node acknowledged
    nothing: a node lost its quorum-state (and had a damaged batch repaired), followed the new
    leader behind the vote fence, and probed that leader for its epoch while a fetched batch was
    not flushed yet; the leader counted the probe's offset (its log end) and committed a batch on
    a minority of disks. tests/raft/test_durable_state.py builds that story on purpose."""
    result = run_one(seed, steps=3000, voters=None, kinds=frozenset(FAULT_KINDS))
    assert result.violation is None, result.violation
    assert result.faults.get("storage_repaired", 0) > 0


@pytest.mark.sim
def test_election_state_is_lost_on_one_voter_at_a_time_also_when_a_log_is_wholly_in_its_snapshot() -> None:
    """Seed 104184 lost the quorum-state of a second voter while the first was down with its whole
    log in its snapshot (no batch left on disk): the check for another fenced voter missed it, two
    of four voters restarted behind the fence and waited for each other (docs/consensus.md: that
    needs an operator), and no leader was elected after healing (liveness)."""
    result = run_one(104184, steps=3000, voters=None, kinds=frozenset(FAULT_KINDS))
    assert result.violation is None, result.violation
    assert result.faults.get("lose_state", 0) > 0


class DamageAcrossEpochs(Simulation):
    """A storage fault zeroes a pair of batches around an epoch change where the crashed node's disk
    has one (disk_faults.zero_across_epochs: one slot spanning both epochs), else is drawn as usual.
    One node at a time holds such a slot: it stands in no election until it is repaired, and two of
    three voters in that state with the third behind them could elect no one (docs/storage.md,
    "Limits")."""

    def _damage_disk(self, node: SimNode, kind: str | None = None) -> str:
        others = [n.disk for n in self.nodes.values() if n is not node]
        spanned = any(d.spans for d in others) or any(
            n.core is not None and n.core.damaged_epochs for n in self.nodes.values() if n is not node
        )
        placed = kind is None and len(self.current_voters()) >= 2 and not spanned
        if placed and zero_across_epochs(node.disk, others):
            self._storage_faulted = True
            self._damage = True
            self._trace(f"n{node.node_id} disk damaged: zeroed across an epoch change")
            return "storage_across_epochs"
        return super()._damage_disk(node, kind)


@pytest.mark.sim
def test_damage_across_an_epoch_change_is_repaired_from_the_leader_without_loss() -> None:
    """Seeded runs where a storage fault zeroes batches around an epoch change whenever a disk has
    one: the node keeps the pair as one slot spanning both epochs, stands in no election until it is
    repaired from its leader's batches, and every run ends with no invariant broken, every voter
    repaired and every acknowledged create committed."""
    across = repaired = 0
    for seed in range(40):
        params = draw_params(seed, voters=3, allowed_faults=frozenset({"storage"}))
        result = DamageAcrossEpochs(params).run(STEPS)
        assert result.violation is None, (seed, result.violation)
        across += result.faults.get("storage_across_epochs", 0)
        repaired += result.faults.get("storage_repaired", 0)
    assert across >= 20 and repaired >= across


def test_a_running_voter_whose_fence_closed_only_in_memory_counts_as_fenced() -> None:
    """A voter that closed its vote fence in memory (every other voter told it its epoch) but
    whose quorum-state on disk still says fenced -- the closing write not durable yet, its disk
    slow -- fences again if it crashes now: no other voter may lose its election state meanwhile."""
    sim = Simulation(draw_params(1, voters=2, allowed_faults=frozenset({"lose_state", "storage"})))
    for node in sim.nodes.values():
        sim._start(node)
    first, second = sim.nodes.values()
    assert second.core is not None and not second.core.vote_fenced
    second.disk.quorum_state = QuorumStateData(2, first.node_id, VOTE_FENCED)
    assert sim._state_lost_elsewhere(first)
    second.disk.quorum_state = QuorumStateData(2, first.node_id, first.node_id)  # the write landed
    assert not sim._state_lost_elsewhere(first)


@pytest.mark.sim
def test_election_state_is_lost_on_one_voter_at_a_time_also_while_a_fence_closes() -> None:
    """Seed 130840 of the plane soak: of two voters, one restarted behind the vote fence, closed
    it on the leader's answer and crashed before that write was durable; the leader lost its
    quorum-state meanwhile. Both restarted fenced, each answering the other UNKNOWN_LEADER_EPOCH
    (no witness), and no leader was elected after healing (liveness)."""
    result = run_one(130840, steps=STEPS, voters=None, kinds=frozenset(FAULT_KINDS), plane=True)
    assert result.violation is None, result.violation


class EverySnapshotLost(Simulation):
    """Once every voter's disk holds a snapshot, every node crashes at once and each voter's
    snapshot is damaged with no fallback (disk_faults.lose_snapshot): the state below the logs is
    on no voter, none can be elected to send it, and the nodes must stop loudly -- the run ends as
    ``RunResult.stopped``, not as a liveness failure, and never passes as if nothing happened."""

    def _fault(self) -> None:
        disks = [self.nodes[v].disk for v in self.voters]
        if self.unrecoverable_injected or any(d.snapshot is None for d in disks):
            super()._fault()
            return
        for node in self.nodes.values():
            if node.core is not None:
                self._crash(node)
            self._push(self.now + 1 + self.rng.next_int(self.params.downtime_max_ms), RESTART, node.node_id)
        assert all(lose_snapshot(d) for d in disks)
        self.unrecoverable_injected = True
        self._trace("every voter's snapshot damaged with no fallback")
        self._push(self.now + 1 + self.rng.next_int(2 * self.params.fault_interval_ms), FAULT, None)


def snapshot_loss_params(seed: int) -> SimParams:
    params = draw_params(seed, voters=3, allowed_faults=frozenset({"kill", "partition"}))
    return dataclasses.replace(params, snapshot_every_batches=20, observers=0, left_down=0)


@pytest.mark.sim
def test_every_voters_snapshot_lost_at_once_stops_loudly() -> None:
    stopped = 0
    for seed in range(20):
        sim = EverySnapshotLost(snapshot_loss_params(seed))
        result = sim.run(STEPS)
        assert result.violation is None, (seed, result.violation)
        if sim.unrecoverable_injected:
            assert result.stopped is not None and "no leader can be elected" in result.stopped, seed
            stopped += 1
    assert stopped >= 15, "most seeds snapshot on every voter before the faults end"


@pytest.mark.sim
def test_waiting_silently_without_the_state_is_caught_as_a_liveness_failure() -> None:
    """The planted switch wait_without_state: the same runs wait for ever, and the liveness check
    after healing catches every one that lost the snapshots."""
    for seed in range(5):
        sim = EverySnapshotLost(snapshot_loss_params(seed), core_faults=Faults(wait_without_state=True))
        result = sim.run(STEPS)
        if sim.unrecoverable_injected:
            assert result.stopped is None
            assert result.violation is not None and result.violation.invariant == "liveness", (seed, result.violation)


class DamageAroundLeaderStart(Simulation):
    """Each node keeps one snapshot (its log starts at it). A storage fault zeroes the two batches of
    the crashed node's disk around the offset where another running node's log starts into one
    range when it can (disk_faults.zero_around: the crashed node's own snapshot is older), else is
    drawn as usual: once that node leads, its snapshot ends inside the range."""

    def _config(self, node_id: int) -> RaftConfig:
        return dataclasses.replace(super()._config(node_id), snapshots_retained=1)

    def _damage_disk(self, node: SimNode, kind: str | None = None) -> str:
        running = [n for n in self.nodes.values() if n is not node and n.core is not None]
        others = [n.disk for n in self.nodes.values() if n is not node]
        starts = sorted({n.core.log.start_offset for n in running if n.core is not None}, reverse=True)
        for start in starts if kind is None else []:
            if start > 0 and zero_around(node.disk, start, others):
                self._storage_faulted = True
                self._damage = True
                self._trace(f"n{node.node_id} disk damaged: zeroed around offset {start}")
                return "storage_around_a_log_start"
        return super()._damage_disk(node, kind)


@pytest.mark.sim
def test_a_leaders_snapshot_ending_inside_a_damaged_range_is_bridged_without_loss() -> None:
    """Seeded runs of 3 voters with kills and storage faults, snapshots every 20 batches, where a
    storage fault zeroes a range around the leader's log start when it can: the follower bridges
    the range's back from the leader and installs the snapshot keeping its log; no invariant broken,
    every voter repaired, every acknowledged create committed."""
    placed = bridged = 0
    for seed in range(40):
        params = draw_params(seed, voters=3, allowed_faults=frozenset({"storage"}))
        result = DamageAroundLeaderStart(dataclasses.replace(params, snapshot_every_batches=20)).run(STEPS)
        assert result.violation is None, (seed, result.violation)
        placed += result.faults.get("storage_around_a_log_start", 0)
        bridged += result.faults.get("storage_bridged", 0)
    assert placed >= 10 and bridged >= 5, (placed, bridged)
