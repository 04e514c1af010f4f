"""One simulated run: N raft cores in one process, a virtual clock, a seeded network and disks,
an event queue ordered by (time, id) -- Kafka's RaftEventSimulationTest, TigerBeetle's VOPR.

Phase 1 runs ``steps`` events with the seed's faults (crashes that lose unflushed data and
quorum-state writes in flight, lost quorum-state files, restarts from the durable state only,
partitions of five shapes, paused nodes, slow disks, message loss, duplication and reordering,
leadership transfers) under a stream of client proposals. Phase 2 heals (all but
a minority of crashed voters come back, the network is whole) and requires, within a virtual
time budget, a leader and the commit of a fresh proposal on every running voter (liveness).
Invariants are checked after every event (checker.py); committed data at the end.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from raftmeta.raft import (
    VOTE_FENCED,
    CommittedTruncationError,
    Entry,
    Envelope,
    Faults,
    NotLeaderError,
    ProposalLimitError,
    RaftConfig,
    RaftCore,
    Ready,
    Role,
    SnapshotImage,
    SoftState,
    UnrecoverableStateError,
    UnrepairableEntryError,
)
from raftmeta.raft.core import VoterChangeError
from raftmeta.raft.perform import Step, plan
from raftmeta.raft.voters import VoterNode, voters_in_batch
from raftmeta.sim import disk_faults, figure8, flush_race
from raftmeta.sim.checker import Checker, InvariantViolation
from raftmeta.sim.client_history import HistoryFailure
from raftmeta.sim.disk import SimDisk
from raftmeta.sim.params import PARTITION_KINDS, SimParams
from raftmeta.sim.rng import SeededRandom
from raftmeta.v1 import raft_pb2

# The fault kinds that damage a disk (only then does a start scan its log for damage).
DAMAGING = frozenset({"storage", "flush_race"})
# Event kinds (small ints: compared often).
DELIVER, TIMER, FLUSH, PROPOSE, FAULT, HEAL, RESTART, PERSISTED, CRASH, CUSTOM, CLOCK, FIGURE8, FLUSH_RACE = range(13)
KIND_NAMES = (
    "deliver", "timer", "flush", "propose", "fault", "heal", "restart", "persisted", "crash", "custom", "clock",
    "figure8", "flush_race",
)  # fmt: skip
# clock_skew: the slowest a skewed clock runs, in thousandths of the simulation's rate. Only slow:
# a fast clock would fence brokers early by the simulation's measure, which the broker-sessions
# check would take for a controller bug; what the fault is for is relative -- a slow leader's
# check quorum runs out after its peers have elected another.
CLOCK_PERMILLE_MIN = 250
# epoch_delay: the share of Fetch requests and answers held (a retransmission queue that empties
# only after a failover) until the node they are for leads a later epoch than when they were
# sent -- or until the heal.
EPOCH_DELAY_RATE = 0.02
FETCH_MESSAGES = (raft_pb2.FetchRequest, raft_pb2.FetchResponse)
# Test-only bugs of the simulated driver (the core's are raftmeta.raft.Faults): send the messages
# of a Ready before its quorum state is durable.
DRIVER_BUGS = frozenset({"vote_before_durable"})
NEVER = 1 << 62
DUPLICATE_DELAY_MAX_MS = 200
REQUEST_TYPES = (
    raft_pb2.VoteRequest,
    raft_pb2.BeginQuorumEpochRequest,
    raft_pb2.EndQuorumEpochRequest,
    raft_pb2.FetchRequest,
    raft_pb2.FetchSnapshotRequest,
)


@dataclass(slots=True)
class SimNode:
    node_id: int
    disk: SimDisk
    core: RaftCore | None = None
    incarnation: int = 0
    # The core's next deadline, and the earliest queued timer event that is still current.
    deadline: int = NEVER
    timer_at: int = NEVER
    timer_generation: int = 0
    flush_pending: bool = False
    # A Ready asked for an fsync while one was running: start another when it completes.
    flush_again: bool = False
    last_ready_seq: int = 0
    last_hw: int = 0
    hw_checkpoint_ms: int = -NEVER
    paused_until: int = 0
    # The node's own clock (time.monotonic) is the simulation's minus this lag: a suspended
    # machine's monotonic clock stops (CLOCK_MONOTONIC does not count suspend), so after a
    # suspension the node's timers run late by its length. ``suspension``: (start, end) of the
    # one in progress, whose length is added to the lag when it ends.
    clock_lag_ms: int = 0
    suspension: tuple[int, int] | None = None
    # The rate the clock runs at, in thousandths of the simulation's (a clock_skew fault: a VM
    # starved of CPU, a clock slewed): from the anchor (its reading and the unskewed reading then)
    # it advances this much slower. A slow leader's check quorum runs out late in simulated time.
    clock_permille: int = 1000
    skew_anchor_ms: int = 0
    skew_anchor_unskewed_ms: int = 0
    skew_generation: int = 0
    # When the clock last ran at another rate than 1 (NEVER while it does): a controller timed
    # by it measured broker sessions on a skewed clock.
    skewed_until: int = -NEVER
    # The core's next deadline on the node's own clock (``deadline`` is its simulated time).
    node_deadline: int = NEVER
    # The read-index proof: the voter sets the core had in force since its last Ready was taken
    # (a read may begin and be released between two looks at the core: while a Ready is
    # performed, say, as committed batches are applied).
    voter_sets: tuple[tuple[int, ...], ...] = ()
    # The node task waits for a quorum-state write and handles nothing else meanwhile: the
    # events that reach it wait here, in order.
    persisting: bool = False
    deferred: list[tuple[int, Any]] = field(default_factory=list)
    slow_until: int = 0
    # The state machine: committed batches applied, for snapshots.
    applied: list[bytes] = field(default_factory=list)
    applied_offset: int = 0
    snapshot_batches: int = 0
    # base offset of an in-flight proposal on this node -> (epoch, proposal ids)
    pending: dict[int, tuple[int, list[int]]] = field(default_factory=dict)

    def blocked(self, now: int) -> bool:
        """The node task handles no input now (paused, or waiting for a quorum-state write)."""
        return self.persisting or self.paused_until > now

    def clock(self, now: int) -> int:
        """The node's monotonic clock at simulation time ``now``: stopped during a suspension,
        running at ``clock_permille`` of the simulation's rate since its skew anchor."""
        unskewed = self._unskewed(now)
        if self.clock_permille == 1000:
            return self.skew_anchor_ms + unskewed - self.skew_anchor_unskewed_ms
        return self.skew_anchor_ms + (unskewed - self.skew_anchor_unskewed_ms) * self.clock_permille // 1000

    def _unskewed(self, now: int) -> int:
        suspension = self.suspension
        if suspension is not None:
            start, end = suspension
            if now < end:
                return start - self.clock_lag_ms
            self.clock_lag_ms += end - start
            self.suspension = None
        return now - self.clock_lag_ms

    def set_clock_rate(self, now: int, permille: int) -> None:
        """From ``now`` the clock runs at ``permille`` thousandths of the simulation's rate (it
        never jumps: a monotonic clock)."""
        assert permille > 0
        if permille != 1000 or self.clock_permille != 1000:
            self.skewed_until = NEVER if permille != 1000 else now
        self.skew_anchor_ms = self.clock(now)
        self.skew_anchor_unskewed_ms = self._unskewed(now)
        self.clock_permille = permille

    def simulated_time_of(self, now: int, node_ms: int) -> int:
        """The simulated time at which the node's clock reads ``node_ms`` (at its current rate,
        and as if no suspension began meanwhile: a suspended node is also paused)."""
        ahead = node_ms - self.clock(now)
        if ahead <= 0:
            return now  # already due: now, never in the past (the simulation's time would run back)
        if self.clock_permille == 1000 or node_ms >= NEVER:
            return now + ahead
        return now + -(-ahead * 1000 // self.clock_permille)

    def suspend(self, now: int, until: int) -> None:
        """The clock stops from ``now`` to ``until`` (extending a suspension in progress)."""
        self.clock(now)  # settle an ended suspension first
        start, end = self.suspension if self.suspension is not None else (now, now)
        self.suspension = (start, max(end, until))

    def end_suspension(self, now: int) -> None:
        """The suspension ends now, if it had not already (a heal; a crash: the process restarts
        on a running machine)."""
        if self.suspension is not None:
            start, end = self.suspension
            self.suspension = (start, max(start, min(end, now)))
            self.clock(now)


@dataclass(slots=True)
class RunResult:
    seed: int
    params: SimParams
    events: int = 0
    elections: int = 0
    commits: int = 0
    acknowledged: int = 0
    faults: dict[str, int] = field(default_factory=dict)
    violation: InvariantViolation | None = None
    virtual_ms: int = 0
    liveness_ms: int = -1
    snapshots_taken: int = 0
    snapshots_installed: int = 0
    checks: dict[str, int] = field(default_factory=dict)
    # The whole plane: the client history the linearizability checker refused, if it did.
    history_failure: HistoryFailure | None = None
    # A node stopped loudly on damage the quorum cannot repair, which the run injected on purpose
    # (``Simulation.unrecoverable_injected``): the stop is the expected end, not a violation.
    stopped: str | None = None


class Simulation:
    # The fault kinds this simulation injects itself (the others act through params).
    INJECTED = frozenset(
        {
            "kill",
            "partition",
            "pause",
            "suspend",
            "slow_disk",
            "transfer",
            "membership",
            "storage",
            "clock_skew",
            "figure8",
            "flush_race",
        }
    )

    def __init__(
        self,
        params: SimParams,
        *,
        core_faults: Faults | None = None,
        driver_bugs: frozenset[str] = frozenset(),
        trace: Callable[[str], None] | None = None,
    ) -> None:
        assert driver_bugs <= DRIVER_BUGS, f"unknown driver bugs {sorted(driver_bugs - DRIVER_BUGS)}"
        self.params = params
        self.driver_bugs = driver_bugs
        self.rng = SeededRandom(params.seed)
        self.trace = trace
        self.now = 0
        self._queue: list[tuple[int, int, int, Any]] = []
        self._next_id = 0
        self.voters = tuple(range(1, params.voters + 1))
        self.observers = tuple(range(params.voters + 1, params.voters + 1 + params.observers))
        self.node_ids = self.voters + self.observers
        # Set by a fault the quorum cannot repair (a test's: no drawn fault is one): a node's
        # UnrecoverableStateError then ends the run as ``RunResult.stopped``.
        self.unrecoverable_injected = False
        self.core_faults = core_faults or Faults()
        self.nodes = {n: SimNode(n, SimDisk()) for n in self.node_ids}
        self.checker = Checker()
        self.result = RunResult(params.seed, params)
        self.partitions: dict[int, set[tuple[int, int]]] = {}
        self.blocked: set[tuple[int, int]] = set()
        # Partitions that hold messages rather than drop them (packets lost, TCP retransmitting
        # until the link heals): their links' messages arrive, in order, when it heals -- sent in
        # an older epoch, delivered in a newer one.
        self.holding: set[int] = set()
        self.held_links: set[tuple[int, int]] = set()
        self.held: dict[tuple[int, int], list[Envelope]] = {}
        self._next_partition = 0
        self.next_proposal_id = 1
        self.acknowledged: set[int] = set()
        self.rejected: set[int] = set()
        self.healed = False
        self.probe: tuple[int, int] | None = None  # (proposal id, next offset) of the liveness probe
        self.probe_offset = -1
        self.membership_changed = False
        # A storage fault damaged a batch on some disk; any storage fault or lost quorum-state file
        # (the heal then brings every node back).
        self._damage = False
        self._storage_faulted = False
        # The read-index proof, checked from the network's side: (leader, epoch, voter) -> the
        # highest read barrier a Fetch of that epoch delivered to the leader echoed; (node,
        # incarnation, read id) -> the epoch and barrier of a read seen waiting, and the voter sets
        # in force while it waited (the core may have confirmed it under any of them).
        self.echoed: dict[tuple[int, int, int], int] = {}
        self.reads_begun: dict[tuple[int, int, int], tuple[int, int, tuple[tuple[int, ...], ...]]] = {}
        # The first read released without the proof: the run goes on (so that the clients'
        # history shows what it answered, with its timeline) and fails at the end.
        self.unproven_read: InvariantViolation | None = None
        # epoch_delay: destination -> (its epoch when the message was sent, the message).
        self.delayed: dict[int, list[tuple[int, Envelope]]] = {}
        # The Figure 8 under way (raftmeta.sim.figure8), if any, and the number of the last one.
        self.figure8: figure8.Figure8 | None = None
        self._figure8_count = 0
        # The truncation-racing-a-flush scenario under way (raftmeta.sim.flush_race), if any.
        self.flush_race: flush_race.FlushRace | None = None
        self._flush_race_count = 0

    # -- event queue -------------------------------------------------------------------------------
    def _push(self, at: int, kind: int, payload: Any) -> None:
        self._next_id += 1
        heapq.heappush(self._queue, (at, self._next_id, kind, payload))

    def _trace(self, text: str) -> None:
        if self.trace is not None:
            self.trace(f"{self.now:>8} {text}")

    # -- nodes -------------------------------------------------------------------------------------
    def _config(self, node_id: int) -> RaftConfig:
        return RaftConfig(
            node_id=node_id,
            voters=self.voters,
            cluster_id="sim",
            fetch_max_bytes=self.params.fetch_max_bytes,
            election_timeout_ms=self.params.election_timeout_ms,
            fetch_timeout_ms=self.params.fetch_timeout_ms,
            election_backoff_max_ms=self.params.election_timeout_ms,
            fetch_max_wait_ms=min(500, self.params.fetch_timeout_ms // 4),
            request_timeout_ms=min(1000, self.params.fetch_timeout_ms // 2),
            max_uncommitted_batches=self.params.max_uncommitted_batches,
            fetch_hw_linger_ms=self.params.fetch_hw_linger_ms,
            snapshot_chunk_bytes=32 * 1024,
            faults=self.core_faults,
        )

    def _start(self, node: SimNode) -> None:
        node.incarnation += 1
        disk = node.disk
        disk.recover()
        node.core = RaftCore(
            self._config(node.node_id),
            self.rng,
            node.clock(self.now),
            quorum_state=disk.quorum_state,
            entries=list(disk.entries),
            snapshot=disk.snapshot,
            missing_snapshot=disk.missing_snapshot,
            # The durable state only, as the real node restarts: log, snapshot, quorum-state file
            # and the (lagging) high-watermark checkpoint.
            high_watermark=disk.hw_checkpoint,
            first_correlation_id=node.incarnation << 32,
            # What recovery finds damaged (only the DAMAGING kinds damage a disk: skip the scan without).
            damaged=disk_faults.damaged_slots(disk.entries) if self.params.faults & DAMAGING or disk.spans else (),
            damaged_epochs=disk.spans,
            election_state_lost=disk.quorum_state_lost,
        )
        if node.core.start_note is not None:
            self._trace(f"n{node.node_id} {node.core.start_note}")
        node.timer_at = NEVER
        node.deadline = NEVER
        node.flush_pending = False
        node.flush_again = False
        node.persisting = False
        node.deferred.clear()
        node.last_ready_seq = 0
        node.voter_sets = (node.core.voters,)
        node.last_hw = node.core.high_watermark
        node.hw_checkpoint_ms = -NEVER
        node.pending.clear()
        # The state machine restarts from the snapshot.
        if disk.snapshot is not None:
            node.applied = self._snapshot_committed(node, disk.snapshot)
            node.applied_offset = disk.snapshot.end_offset
        else:
            node.applied = []
            node.applied_offset = 0
        node.snapshot_batches = 0
        self._on_start(node)
        self._drive(node)

    # -- hooks: what a simulation of the whole plane (raftmeta.sim.plane) drives instead -------------
    def _on_start(self, node: SimNode) -> None:
        """A node's core was just built from its disk."""

    def _poll(self, node: SimNode, core: RaftCore) -> int:
        return core.poll(node.clock(self.now))

    def _deadline_after(self, node: SimNode, deadline: int) -> int:
        """The node's deadline once its Ready is performed (on its clock): the driver's, here the
        core's from ``_poll``."""
        return deadline

    def _take_ready(self, node: SimNode, core: RaftCore) -> Ready:
        return core.take_ready()

    def _step(self, node: SimNode, core: RaftCore, envelope: Envelope) -> None:
        core.step(node.clock(self.now), envelope)

    def _on_install(self, node: SimNode, image: SnapshotImage) -> None:
        """A snapshot fetched from the leader replaced the node's log."""

    def _custom(self, payload: Any) -> None:
        """An event a subclass queued with kind CUSTOM."""

    def _refused(self, envelope: Envelope) -> None:
        """``envelope`` reached a node whose process is down: nothing listens on its port, so the
        sender's connection is refused (a partitioned link drops it silently instead)."""

    def _crash(self, node: SimNode, *, after_vote: bool = False) -> None:
        assert node.core is not None
        disk = node.disk
        lost = disk.crash(self.rng, self.params.keep_unflushed_on_crash)
        node.core = None
        node.end_suspension(self.now)
        # Its connections reset: what its links held is lost.
        for link in [link for link in self.held if node.node_id in link]:
            del self.held[link]
        self.delayed.pop(node.node_id, None)
        node.pending.clear()
        node.timer_generation += 1
        node.timer_at = NEVER
        node.persisting = False
        node.deferred.clear()
        self._trace(f"crash n{node.node_id} lost={lost}")
        state = disk.quorum_state
        # The operator's hands or a disk lose the quorum-state file -- only where the recovery
        # rule claims safety (docs/consensus.md, "Lost election state"): the last epoch the node
        # persisted is its log's last epoch, so every vote it may have granted is in that epoch.
        if (
            "lose_state" in self.params.faults
            and state is not None
            and self.rng.random() < 0.3
            and state.epoch == disk.durable_last_epoch()
            and not self._state_lost_elsewhere(node)
        ):
            disk.quorum_state = None
            self._storage_faulted = True
            self._trace(f"n{node.node_id} loses its quorum-state file")
            self._count("lose_state")
        if "storage" in self.params.faults and not self.healed and self.rng.random() < 0.25:
            # The disk of any crashed node may rot meanwhile; right after a vote, its quorum-state
            # (the vote it must not forget: the vote fence's case).
            self._count(self._damage_disk(node, "quorum_state" if after_vote else None))

    def _drive(self, node: SimNode) -> None:
        """Poll the core, perform its Ready (the driver contract), check invariants, re-arm the timer."""
        core = node.core
        assert core is not None
        # The core's deadline is on the node's clock; the timer event is on the simulation's.
        node_deadline = self._poll(node, core)
        ready = self._take_ready(node, core)
        # Judged when the core releases them, not when the Ready is performed (after a
        # quorum-state write, perhaps, by which time the voter set may have changed).
        for read_id, _index in ready.reads:
            self._check_read_index_proof(node, core, read_id)
        node.voter_sets = (core.voters,)
        self._perform(node, core, ready)
        node.node_deadline = self._deadline_after(node, node_deadline)
        self._arm_timer(node)
        node.voter_sets = _with_set(node.voter_sets, core.voters)
        reads = core.pending_read_barriers()
        if reads:
            for read_id, barrier in reads.items():
                key = (node.node_id, node.incarnation, read_id)
                begun = self.reads_begun.get(key)
                sets = node.voter_sets if begun is None else _with_sets(begun[2], node.voter_sets)
                self.reads_begun[key] = (core.epoch, barrier, sets)
        hw = core.high_watermark
        if hw != node.last_hw:
            self.checker.checks["5-hw-monotonic"] += 1
            if hw < node.last_hw:
                raise InvariantViolation("5-hw-monotonic", f"node {node.node_id} HW {node.last_hw} -> {hw}")
            if core.role is Role.LEADER:
                self._check_majority_persisted(node, core, node.last_hw, hw)
            node.last_hw = hw
            if self.now - node.hw_checkpoint_ms >= self.params.hw_checkpoint_interval_ms:
                node.hw_checkpoint_ms = self.now
                node.disk.checkpoint_high_watermark(hw)

    def _arm_timer(self, node: SimNode) -> None:
        deadline = node.simulated_time_of(self.now, node.node_deadline)
        node.deadline = deadline
        if deadline < node.timer_at:
            # An earlier wake-up: queue it; the later one left in the queue becomes stale.
            node.timer_generation += 1
            node.timer_at = deadline
            self._push(deadline, TIMER, (node.node_id, node.timer_generation))

    def _check_majority_persisted(self, node: SimNode, core: RaftCore, previous: int, hw: int) -> None:
        if hw <= core.log.start_offset:
            return
        entry = core.log.entry_before(hw)
        assert entry is not None
        # KIP-853: a majority of the voter set in force at the leader when its HW moved (its latest,
        # committed or not; a change appended since, in the same step, does not count).
        voters = core.voters_at_high_watermark
        # Storage faults: every batch the HW passed, not only the last. The leader's own copy counts
        # only intact (it knows its damage since its start); another voter's counts as it was when
        # that voter acknowledged it -- a disk may rot after the acknowledgement the leader counts
        # (that the voter reports no offset past its damage is checked in _send).
        passed = core.log.slice(max(previous, core.log.start_offset), hw) if self._damage else [entry]
        for batch in passed:
            holders = sum(1 for v in voters if self.nodes[v].disk.durably_holds(batch, intact=v == node.node_id))
            self.checker.check_majority_persisted(node.node_id, batch, holders, len(voters))
        self.checker.on_leader_commit(core.epoch, hw, entry)

    def _perform(self, node: SimNode, core: RaftCore, ready: Ready) -> None:
        """The driver contract, in the order of the node's perform policy (raftmeta/raft/perform.py):
        the quorum state is durable before anything else of the Ready happens. Its write takes
        the disk's latency; the node task waits for it (handles no other input), and a crash
        meanwhile loses the write and everything after it in the Ready."""
        steps = self._plan(node, core, ready)
        if steps and steps[0] is Step.PERSIST_QUORUM_STATE:
            steps = steps[1:]
            latency = self._disk_latency(node)
            if latency > 0:
                done_at = self.now + latency
                if "vote_before_durable" in self.driver_bugs:
                    # Planted bug: go on with the Ready (its vote goes out) while the write is in flight.
                    self._push(done_at, PERSISTED, (node.node_id, node.incarnation, ready.quorum_state, None))
                    self._perform_steps(node, core, ready, steps)
                else:
                    node.persisting = True
                    self._push(done_at, PERSISTED, (node.node_id, node.incarnation, ready.quorum_state, (ready, steps)))
                return
            node.disk.quorum_state = ready.quorum_state
        self._perform_steps(node, core, ready, steps)

    def _plan(self, node: SimNode, core: RaftCore, ready: Ready) -> tuple[Step, ...]:
        """The node's policy; the simulated disk never fsyncs inline (every fsync takes its latency)."""
        return plan(ready, leader=core.role is Role.LEADER, waiting=self._waiting(node), inline_flush_allowed=False)

    def _waiting(self, node: SimNode) -> int:
        """Requests waiting for a commit answer (the policy's "answer first" rule): the proposals."""
        return len(node.pending)

    def _disk_latency(self, node: SimNode) -> int:
        return self.params.slow_disk_latency_ms if node.slow_until > self.now else self.params.disk_latency_ms

    def _persisted(self, node: SimNode, payload: tuple[int, int, Any, tuple[Ready, tuple[Step, ...]] | None]) -> None:
        """A quorum-state write completed: the rest of its Ready follows."""
        _node_id, _incarnation, state, rest = payload
        node.disk.quorum_state = state
        if rest is None:
            return
        node.persisting = False
        assert node.core is not None
        ready, steps = rest
        self._perform_steps(node, node.core, ready, steps)
        self._drive(node)
        for kind, deferred in node.deferred:
            self._push(self.now, kind, deferred)
        node.deferred.clear()

    def _perform_steps(self, node: SimNode, core: RaftCore, ready: Ready, steps: tuple[Step, ...]) -> None:
        node.last_ready_seq = ready.seq
        for step in steps:
            if step is Step.ANNOUNCE_ROLE:
                assert ready.soft_state is not None
                self._announce_role(node, core, ready.soft_state)
            elif step is Step.INSTALL_SNAPSHOT:
                assert ready.install_snapshot is not None
                self._install(node, core, ready.install_snapshot, keeps_log=ready.install_keeps_log)
            elif step is Step.REPAIR_LOG:
                self._repair_log(node, ready)
            elif step is Step.WRITE_LOG:
                self._write_log(node, core, ready)
            elif step is Step.APPLY_COMMITTED:
                self._apply(node, core, ready.committed)
            elif step is Step.SEND:
                for envelope in ready.messages:
                    self._send(envelope)
            elif step is Step.REQUEST_FLUSH:
                if node.flush_pending:
                    node.flush_again = True
                else:
                    self._start_flush(node)
            else:
                # PERSIST_QUORUM_STATE is _perform's; the inline-flush steps need
                # inline_flush_allowed, which _plan never gives.
                raise AssertionError(f"the simulator does not perform {step}")

    def _announce_role(self, node: SimNode, core: RaftCore, soft: SoftState) -> None:
        node_id = node.node_id
        self._trace(f"n{node_id} {soft.role.value} epoch={soft.epoch} leader={soft.leader_id}")
        if soft.role is Role.LEADER:
            self.result.elections += 1
            self.checker.on_leader(node_id, soft.epoch)
            self.checker.check_leader_has_committed(node_id, core)
            self._release_delayed(node_id, soft.epoch)
            if self.figure8 is not None:
                self._figure8_step(figure8.on_leader(self, self.figure8, node_id, soft.epoch))
            if self.flush_race is not None:
                self._flush_race_step(flush_race.on_leader(self, self.flush_race, node_id, soft.epoch))
        if node.pending and soft.role is not Role.LEADER:
            node.pending.clear()  # indeterminate: neither acknowledged nor rejected

    def _install(self, node: SimNode, core: RaftCore, image: SnapshotImage, *, keeps_log: bool) -> None:
        node_id = node.node_id
        if keeps_log:
            node.disk.trim(image, image.end_offset)
        else:
            node.disk.install(image)
        node.applied = self._snapshot_committed(node, image)
        node.applied_offset = image.end_offset
        self._on_install(node, image)
        core.on_snapshot_installed(node.clock(self.now), image)
        self.result.snapshots_installed += 1
        self._trace(f"n{node_id} install snapshot end={image.end_offset}")

    def _truncate(self, node: SimNode, ready: Ready) -> None:
        if ready.truncate_to is not None:
            self.checker.on_truncate(node.node_id, ready.truncate_to, node.last_hw)
            raced = None if self.flush_race is None else flush_race.on_truncate(self.flush_race, node)
            node.disk.truncate_to(ready.truncate_to)
            self._trace(f"n{node.node_id} truncate to {ready.truncate_to}")
            if raced is not None:
                self._end_flush_race(raced)

    def _repair_log(self, node: SimNode, ready: Ready) -> None:
        """Each damaged batch overwritten with a peer's intact copy, then the Ready's truncation
        (the copies lie below it; it may cut a damaged range right after the front repaired)."""
        for entry in ready.repair:
            self.checker.on_repair(node.node_id, entry)
            if not any(e.base_offset == entry.base_offset for e in node.disk.entries):
                self._count("storage_bridged")  # at the back of a range a leader's snapshot ends inside
            node.disk.repair(entry)
            self._count("storage_repaired")
            self._trace(f"n{node.node_id} repair ({entry.base_offset}, {entry.epoch})")
        self._truncate(node, ready)

    def _write_log(self, node: SimNode, core: RaftCore, ready: Ready) -> None:
        checker = self.checker
        disk = node.disk
        node_id = node.node_id
        if not ready.repair:
            self._truncate(node, ready)  # else REPAIR_LOG did
        for entry in ready.append:
            checker.on_append(node_id, disk.last_entry(), entry)
            disk.append(entry)
            if checker.leaders.get(entry.epoch) == node_id and voters_in_batch(entry.data) is not None:
                # Appended by this node as the leader of the batch's epoch (it may have resigned
                # since, in the same step: a leader that removed itself).
                checker.check_voter_change(node_id, core, entry)
                self.membership_changed = True

    def _check_read_index_proof(self, node: SimNode, core: RaftCore, read_id: int) -> None:
        """A linearizable read is released only once a majority of voters (the leader counted if one)
        echoed its read barrier in a Fetch of the leader's epoch: the proof that no other leader
        had been elected when the read began (RaftCore.read_index). Checked from the Fetches the
        network delivered, not from the core's bookkeeping of them."""
        begun = self.reads_begun.pop((node.node_id, node.incarnation, read_id), None)
        if begun is None:
            # Begun and released in one step: only a leader counting itself alone can do that.
            if core.role is not Role.LEADER:
                return
            begun = (core.epoch, core.read_barrier, (core.voters,))
        epoch, barrier, sets = begun
        # The voter set may change while the read waits, and the core may have confirmed it under
        # any set it had meanwhile -- before a change it appended later, even in the same drive
        # (seed 140280: confirmed by 3 of 5, then the leader's own removal). Any one of them will
        # do: one change at a time, so a majority of one set meets every majority of the next.
        sets = _with_sets(_with_sets(sets, node.voter_sets), (core.voters,))
        echoing = {
            v
            for v in set().union(*sets)
            if v != node.node_id and self.echoed.get((node.node_id, epoch, v), 0) >= barrier
        }
        self.checker.checks["read-index-proof"] = self.checker.checks.get("read-index-proof", 0) + 1
        if not read_proven(node.node_id, sets, echoing) and self.unproven_read is None:
            self.unproven_read = InvariantViolation(
                "read-index-proof",
                f"node {node.node_id} released read {read_id} of epoch {epoch} (barrier {barrier}) at {self.now}, "
                f"echoed in Fetches of that epoch by {len(echoing)} of the other voters "
                f"{sorted(set().union(*sets) - {node.node_id})}: a majority of none of the voter sets "
                f"{[sorted(voters) for voters in sets]} it waited under",
            )
            self._trace(f"VIOLATION (at the end of the run) {self.unproven_read}")

    def _release_delayed(self, node_id: int, epoch: int) -> None:
        """epoch_delay: the messages held for a node that now leads a later epoch arrive, during
        that leadership (or after it, if it is short)."""
        held = self.delayed.get(node_id)
        if not held:
            return
        later = [envelope for sent_epoch, envelope in held if sent_epoch < epoch]
        if not later:
            return
        self.delayed[node_id] = [(e, m) for e, m in held if e >= epoch]
        for envelope in later:
            # At some point of the new leadership (a retransmission timer's), not only at its start.
            self._push(
                self.now + self.params.latency_min_ms + self.rng.next_int(self.params.fetch_timeout_ms),
                DELIVER,
                envelope,
            )

    def _start_flush(self, node: SimNode) -> None:
        """Group commit: the fsync covers the writes of every Ready performed so far (its barrier)
        and is reported with the last of their seqs -- not with the seq of whatever Ready was
        performed by the time it completes (a later truncation may have undone part of it)."""
        node.flush_pending = True
        node.flush_again = False
        barrier, offset = node.disk.flush_begin()
        self._push(
            self.now + self._disk_latency(node),
            FLUSH,
            (node.node_id, node.incarnation, (barrier, offset), node.last_ready_seq),
        )

    def _flushed(self, node: SimNode, barrier: tuple[int, int], seq: int) -> None:
        """The fsync completed: report the log end it synced, with the seq it covers -- a later
        truncation may already have removed part of that (the core caps it)."""
        assert node.core is not None
        node.flush_pending = False
        node.disk.flush_end(barrier[0])
        offset = barrier[1]
        if self.trace is not None:
            self._trace(f"n{node.node_id} fsync durable={offset} seq={seq}")
        node.core.on_log_flushed(node.clock(self.now), offset, seq)
        if node.flush_again:
            self._start_flush(node)
        self._drive(node)
        if self.flush_race is not None:
            self._flush_race_step(flush_race.on_flushed(self, self.flush_race, node))

    def _apply(self, node: SimNode, core: RaftCore, entries: list[Entry]) -> None:
        checker = self.checker
        for entry in entries:
            if entry.base_offset != node.applied_offset:
                raise InvariantViolation(
                    "4-committed-prefixes-identical",
                    f"node {node.node_id} applies {entry.base_offset} after {node.applied_offset}",
                )
            checker.on_commit(node.node_id, entry)
            node.applied.append(entry.data)
            node.applied_offset = entry.next_offset
            pending = node.pending.pop(entry.base_offset, None)
            if pending is not None and pending[0] == entry.epoch:
                self.acknowledged.update(pending[1])
                self.result.acknowledged += len(pending[1])
                if self.healed and self.probe is None:
                    self.probe = (pending[1][0], entry.next_offset)
        self.result.commits = len(checker.committed)
        every = self.params.snapshot_every_batches
        if every:
            node.snapshot_batches += len(entries)
            if node.snapshot_batches >= every:
                node.snapshot_batches = 0
                self._take_snapshot(node, core)

    def _snapshot_committed(self, node: SimNode, image: SnapshotImage) -> list[bytes]:
        """A node's state machine starts from ``image``: the batches it holds (this simulator's
        snapshots are the committed batches below their end), checked as committed ones."""
        return [e.data for e in self.checker.on_commit_snapshot(node.node_id, image.data)]

    def _take_snapshot(self, node: SimNode, core: RaftCore) -> None:
        end = node.applied_offset
        entry = core.log.entry_before(end) if end > core.log.start_offset else None
        if entry is None:
            return
        image = SnapshotImage(end, entry.epoch, b"".join(node.applied))
        core.on_snapshot_created(node.clock(self.now), image)
        node.disk.trim(image, core.log.start_offset)
        self.result.snapshots_taken += 1
        self._trace(f"n{node.node_id} snapshot end={end}")

    # -- network -----------------------------------------------------------------------------------
    def _send(self, envelope: Envelope) -> None:
        params = self.params
        rng = self.rng
        message = envelope.message
        if (
            type(message) is raft_pb2.VoteResponse
            and message.vote_granted
            and not message.pre_vote
            and "crash_after_vote" in params.faults
            and not self.healed
            and rng.random() < 0.8
        ):
            # Crash the voter within a few ms of granting (maybe before its vote is durable, if
            # the driver let the answer out early), and bring it back soon, while the election
            # it voted in may still be running: a forgotten vote is then granted again.
            voter = self.nodes[envelope.source]
            self._push(self.now + rng.next_int(3), CRASH, (voter.node_id, voter.incarnation, "crash_after_vote"))
        if type(message) is raft_pb2.FetchRequest:
            self._check_fetch_offset_durable(envelope.source, message)
            if self._damage:
                self._check_vouched(envelope.source, message)
        if self._blocked_link(envelope) or (params.drop_rate and rng.random() < params.drop_rate):
            return
        if "epoch_delay" in params.faults and not self.healed and isinstance(message, FETCH_MESSAGES):
            destination = self.nodes[envelope.destination].core
            if destination is not None and rng.random() < EPOCH_DELAY_RATE:
                self.delayed.setdefault(envelope.destination, []).append((destination.epoch, envelope))
                self._count("epoch_delay")
                return
        copies = 2 if params.duplicate_rate and rng.random() < params.duplicate_rate else 1
        for copy in range(copies):
            delay = params.latency_min_ms + (
                rng.next_int(params.latency_jitter_ms + 1) if params.latency_jitter_ms else 0
            )
            if copy:
                # A duplicate is a late replay (a retransmission, a proxy's retry): it may arrive
                # after the receiver restarted, or in a later epoch.
                delay += rng.next_int(DUPLICATE_DELAY_MAX_MS)
            self._push(self.now + delay, DELIVER, envelope)

    def _deliver(self, node: SimNode, envelope: Envelope) -> None:
        assert node.core is not None
        message = envelope.message
        if type(message) is raft_pb2.FetchRequest and message.read_barrier:
            key = (node.node_id, message.replica_epoch, envelope.source)
            if message.read_barrier > self.echoed.get(key, 0):
                self.echoed[key] = message.read_barrier
        if self.trace is not None:
            self._trace(f"n{envelope.source}->n{envelope.destination} {describe_message(envelope)}")
        self._step(node, node.core, envelope)
        self._drive(node)
        if self.figure8 is not None and type(message) is raft_pb2.FetchRequest:
            scenario = self.figure8
            figure8.on_fetch(self, scenario, node.node_id, envelope.source, message.replica_epoch, message.fetch_offset)
            self._figure8_step(False)

    def _check_fetch_offset_durable(self, node_id: int, request: raft_pb2.FetchRequest) -> None:
        """A follower's fetch offset acknowledges every batch below it as on its disk: it never
        reaches past what a crash would keep (the flush reports it took said so; one that
        completes after a truncation covers nothing past the truncation point, RaftCore.on_log_flushed)."""
        node = self.nodes[node_id]
        if node.core is None or node.core.role is Role.LEADER:
            return
        self.checker.checks["3-majority-persisted"] += 1
        durable = node.disk.durable_end_offset
        if request.fetch_offset > durable:
            raise InvariantViolation(
                "3-majority-persisted",
                f"node {node_id} acknowledges offset {request.fetch_offset}; its disk keeps the log up to {durable} "
                "across a crash",
            )

    def _check_vouched(self, node_id: int, request: raft_pb2.FetchRequest) -> None:
        """A follower's fetch offset is what the leader counts toward the high watermark for it: it
        never reaches past a batch of its log it knows is damaged (a leader's repair request asks
        for that very batch, and counts nothing)."""
        core = self.nodes[node_id].core
        if core is None or core.role is Role.LEADER:
            return
        self.checker.checks["3-majority-persisted"] += 1
        if request.fetch_offset == core.bridge_fetch_offset:
            # A bridge fetch (a leader's snapshot ends inside our damaged range: repair.Bridge) asks
            # for batches the leader committed: its offsets must be committed already, so that
            # counting them makes nothing commit.
            if request.fetch_offset > self.checker.committed_end:
                raise InvariantViolation(
                    "3-majority-persisted",
                    f"node {node_id} reports offset {request.fetch_offset} past its damaged batch at "
                    f"{core.vouched_end_offset} in a bridge fetch, above the committed end "
                    f"{self.checker.committed_end}",
                )
            return
        if request.fetch_offset > core.vouched_end_offset:
            raise InvariantViolation(
                "3-majority-persisted",
                f"node {node_id} reports offset {request.fetch_offset} "
                f"past its damaged batch at {core.vouched_end_offset}",
            )

    # -- client ------------------------------------------------------------------------------------
    def _propose(self) -> None:
        params = self.params
        rng = self.rng
        up = [n for n in self.nodes.values() if n.core is not None and not n.blocked(self.now)]
        if up:
            leaders = [n for n in up if n.core is not None and n.core.role is Role.LEADER]
            if leaders and rng.random() < 0.9:
                node = max(leaders, key=lambda n: n.core.epoch if n.core else -1)
            else:
                node = up[rng.next_int(len(up))]
            core = node.core
            assert core is not None
            count = 1 + rng.next_int(params.records_per_proposal_max)
            ids = list(range(self.next_proposal_id, self.next_proposal_id + count))
            self.next_proposal_id += count
            records = [b"c" + pid.to_bytes(8, "big") + b"x" * rng.next_int(40) for pid in ids]
            try:
                entry = core.propose(node.clock(self.now), records)
            except (NotLeaderError, ProposalLimitError) as error:
                self.rejected.update(ids)
                self._trace(f"n{node.node_id} propose {ids[0]}..{ids[-1]} rejected: {error}")
            else:
                node.pending[entry.base_offset] = (entry.epoch, ids)
                self._trace(f"n{node.node_id} propose {ids[0]}..{ids[-1]} at {entry.base_offset}")
            self._drive(node)
        # Phase 2 checks progress, not throughput: a slow trickle lets laggards catch up.
        interval = params.proposal_interval_ms if not self.healed else max(params.proposal_interval_ms, 250)
        self._push(self.now + 1 + rng.next_int(2 * interval), PROPOSE, None)

    # -- faults ------------------------------------------------------------------------------------
    def _fault(self) -> None:
        params = self.params
        rng = self.rng
        kinds = sorted(params.faults & self.INJECTED - {"figure8"})
        # While a Figure 8 or a flush race is under way the other faults wait: they would spoil it.
        if self.figure8 is None and self.flush_race is None:
            if "figure8" in params.faults and (not kinds or rng.random() < figure8.FIGURE8_WEIGHT):
                self._inject("figure8")
            elif kinds:
                kind = kinds[rng.next_int(len(kinds))]
                self._inject(kind)
        self._push(self.now + 1 + rng.next_int(2 * params.fault_interval_ms), FAULT, None)

    def _count(self, kind: str) -> None:
        self.result.faults[kind] = self.result.faults.get(kind, 0) + 1

    def _inject(self, kind: str) -> None:
        rng = self.rng
        params = self.params
        duration = 1 + rng.next_int(params.fault_duration_max_ms)
        ids = self.node_ids
        if kind == "kill":
            up = [n for n in self.nodes.values() if n.core is not None]
            if not up:
                return
            node = up[rng.next_int(len(up))]
            self._crash(node)
            self._push(self.now + 1 + rng.next_int(params.downtime_max_ms), RESTART, node.node_id)
        elif kind == "partition":
            shape = PARTITION_KINDS[rng.next_int(len(PARTITION_KINDS))]
            links = self._partition_links(shape)
            if not links:
                return
            self._next_partition += 1
            self.partitions[self._next_partition] = links
            hold = rng.random() < 0.5
            if hold:
                self.holding.add(self._next_partition)
            self._recompute_blocked()
            self._push(self.now + duration, HEAL, self._next_partition)
            self._trace(f"partition {shape} {sorted(links)}{' holding' if hold else ''}")
            kind = f"partition_{shape}"
        elif kind in ("pause", "suspend"):
            # A suspended machine (a laptop lid, a VM frozen for migration) handles nothing, like
            # a paused process, and its monotonic clock stops too: when it wakes its timers (the
            # leader's check quorum among them) are late by the whole suspension.
            node = self.nodes[ids[rng.next_int(len(ids))]]
            node.paused_until = max(node.paused_until, self.now + duration)
            if kind == "suspend":
                node.suspend(self.now, self.now + duration)
            self._trace(f"{kind} n{node.node_id} until {node.paused_until}")
        elif kind == "clock_skew":
            kind = self._skew_clock(duration)
        elif kind == "slow_disk":
            node = self.nodes[ids[rng.next_int(len(ids))]]
            node.slow_until = self.now + duration
            self._trace(f"slow disk n{node.node_id} until {node.slow_until}")
        elif kind == "transfer":
            leaders = [
                n
                for n in self.nodes.values()
                if n.core is not None and n.core.role is Role.LEADER and not n.blocked(self.now)
            ]
            if not leaders or len(leaders[0].core.voters) == 1:  # type: ignore[union-attr]
                return
            node = leaders[0]
            assert node.core is not None
            if rng.random() < 0.5:
                target = rng.choice([v for v in node.core.voters if v != node.node_id])
                node.core.transfer_leadership(node.clock(self.now), target)
                self._trace(f"n{node.node_id} transfer to n{target}")
            else:
                node.core.resign(node.clock(self.now))
                self._trace(f"n{node.node_id} resign")
            self._drive(node)
        elif kind == "membership":
            kind = self._change_voters()
        elif kind == "storage":
            kind = self._storage_fault()
        elif kind == "figure8":
            self._figure8_count += 1
            self.figure8 = figure8.start(self, self._figure8_count)
            if self.figure8 is None:
                kind = "figure8_no_leader"
            else:
                self._figure8_step(False)
        elif kind == "flush_race":
            self._flush_race_count += 1
            self.flush_race = flush_race.start(self, self._flush_race_count)
            if self.flush_race is None:
                kind = "flush_race_no_leader"
            else:
                self._flush_race_step(False)
        self._count(kind)

    # -- figure8 (raftmeta.sim.figure8 directs; these are its hands) -----------------------------------
    def cut_off(self, group: set[int]) -> int:
        """A dropping partition between ``group`` and every other node; returns its id."""
        others = [i for i in self.node_ids if i not in group]
        self._next_partition += 1
        self.partitions[self._next_partition] = {(a, b) for a in group for b in others} | {
            (b, a) for a in group for b in others
        }
        self._recompute_blocked()
        return self._next_partition

    def reconnect(self, partition: int) -> None:
        if self.partitions.pop(partition, None) is not None:
            self._recompute_blocked()

    def trace_line(self, text: str) -> None:
        self._trace(text)

    def _figure8_step(self, over: bool) -> None:
        """After the director acted: end the scenario, or give its (maybe new) phase its budget."""
        scenario = self.figure8
        assert scenario is not None
        if over:
            self._count(figure8.finish(self, scenario))
            self.figure8 = None
            return
        if scenario.phase != scenario.timed_phase:
            scenario.timed_phase = scenario.phase
            self._push(self.now + figure8.phase_budget_ms(self), FIGURE8, (scenario.generation, scenario.phase))

    def separate(self, group: set[int]) -> int:
        """A dropping partition between every two nodes of ``group``; returns its id."""
        self._next_partition += 1
        self.partitions[self._next_partition] = {(a, b) for a in group for b in group if a != b}
        self._recompute_blocked()
        return self._next_partition

    def crash_with_lost_write(self, node: SimNode, base_offset: int) -> bool:
        """Crash ``node``, lose the write of its durable batch at ``base_offset`` and restart it
        at once with a slow disk (raftmeta.sim.flush_race's step 2). False if the crash left no
        such batch to lose (another storage fault had made it part of a damaged range)."""
        self._crash(node)
        lost = disk_faults.lose_write(node.disk, base_offset)
        self._storage_faulted = True
        self._damage = True
        node.slow_until = self.now + 2 * flush_race.phase_budget_ms(self)
        self._push(self.now + 1, RESTART, node.node_id)
        return lost

    def _flush_race_step(self, over: bool) -> None:
        """After the director acted: end the scenario, or give its (maybe new) phase its budget."""
        scenario = self.flush_race
        assert scenario is not None
        if over:
            self._end_flush_race(f"flush_race_stopped_{scenario.phase}")
        elif scenario.phase != scenario.timed_phase:
            scenario.timed_phase = scenario.phase
            budget = flush_race.phase_budget_ms(self)
            self._push(self.now + budget, FLUSH_RACE, (scenario.generation, scenario.phase))

    def _end_flush_race(self, outcome: str) -> None:
        scenario = self.flush_race
        assert scenario is not None
        flush_race.finish(self, scenario)
        self.flush_race = None
        self._count(outcome)

    def _flush_race_timeout(self, payload: tuple[int, str]) -> bool:
        """A phase's budget ran out: the scenario ends, if it is still in that phase."""
        scenario = self.flush_race
        if scenario is None or (scenario.generation, scenario.phase) != payload:
            return False
        self._trace(f"flush_race: {scenario.phase} waited past its budget")
        self._flush_race_step(True)
        return True

    def _figure8_timeout(self, payload: tuple[int, str]) -> bool:
        """A phase's budget ran out: the scenario ends, if it is still in that phase."""
        scenario = self.figure8
        if scenario is None or (scenario.generation, scenario.phase) != payload:
            return False
        self._trace(f"figure8: {scenario.phase} waited past its budget")
        self._figure8_step(True)
        return True

    def _storage_fault(self) -> str:
        """Crash a node, damage its disk while it is down (disk_faults) and restart it later."""
        rng = self.rng
        up = [n for n in self.nodes.values() if n.core is not None]
        if not up:
            return "storage_skipped"
        node = up[rng.next_int(len(up))]
        self._crash(node)
        self._push(self.now + 1 + rng.next_int(self.params.downtime_max_ms), RESTART, node.node_id)
        return self._damage_disk(node)

    def _damage_disk(self, node: SimNode, kind: str | None = None) -> str:
        """Damage the disk of a crashed node with a storage fault (disk_faults; of a random kind
        unless ``kind``)."""
        rng = self.rng
        voters = len(self.current_voters())
        if voters < 2:
            return "storage_skipped"  # one voter has no other copy to repair from
        if kind is None:
            kind = disk_faults.STORAGE_FAULTS[rng.next_int(len(disk_faults.STORAGE_FAULTS))]
        if kind == "quorum_state" and self._state_lost_elsewhere(node):
            return "storage_skipped"  # a minority at once: another fenced voter is no witness
        others = [n.disk for n in self.nodes.values() if n is not node]
        done = disk_faults.inject(node.disk, rng, kind, others, minority=max(1, (voters - 1) // 2))
        if done:
            self._storage_faulted = True
            self._damage |= kind in disk_faults.LOG_FAULTS
        self._trace(f"n{node.node_id} disk damaged: {kind}" if done else f"n{node.node_id} no place for {kind}")
        return f"storage_{kind}" if done else "storage_skipped"

    def _skew_clock(self, duration: int) -> str:
        """A node's clock runs slow for ``duration`` ms: most often the leader's, and then, most
        often, the leader is also cut off from every peer while whoever else talks to it
        (the plane's clients and brokers) still reaches it. Its check quorum runs out late, so it
        leads in its own mind while the others elect a new leader and commit: the window in
        which a read or write answered without a round of the majority is stale."""
        rng = self.rng
        leaders = [n for n in self.nodes.values() if n.core is not None and n.core.role is Role.LEADER]
        if leaders and rng.random() < 0.7:
            node = max(leaders, key=lambda n: n.core.epoch if n.core else -1)
        else:
            node = self.nodes[self.node_ids[rng.next_int(len(self.node_ids))]]
        permille = CLOCK_PERMILLE_MIN + rng.next_int(1000 - CLOCK_PERMILLE_MIN)
        node.set_clock_rate(self.now, permille)
        isolated = node.core is not None and node.core.role is Role.LEADER and rng.random() < 0.7
        if isolated:
            # Long enough to outlast the others' election at Kafka's default timeouts (a fetch
            # timeout and up to two election timeouts: up to 4 s).
            duration += self.params.fault_duration_max_ms
            others = [i for i in self.node_ids if i != node.node_id]
            self._next_partition += 1
            self.partitions[self._next_partition] = {(node.node_id, i) for i in others} | {
                (i, node.node_id) for i in others
            }
            self._recompute_blocked()
            self._push(self.now + duration, HEAL, self._next_partition)
        node.skew_generation += 1
        self._push(self.now + duration, CLOCK, (node.node_id, node.skew_generation))
        self._trace(
            f"clock of n{node.node_id} at {permille / 1000} until {self.now + duration}"
            + (" isolated" if isolated else "")
        )
        if node.core is not None:
            self._arm_timer(node)
        return "clock_skew_isolated" if isolated else "clock_skew"

    def _clock_rate_restored(self, payload: tuple[int, int]) -> None:
        node_id, generation = payload
        node = self.nodes[node_id]
        if generation != node.skew_generation or node.clock_permille == 1000:
            return
        node.set_clock_rate(self.now, 1000)
        self._trace(f"clock of n{node_id} at 1.0")
        if node.core is not None:
            self._arm_timer(node)

    def _change_voters(self) -> str:
        """The leader adds a node that is not a voter or removes a voter (maybe itself, maybe a
        crashed one: "replace a dead voter" is a removal then an add). Refusals are expected: the
        last change not committed yet, an observer not caught up."""
        rng = self.rng
        leaders = [
            n
            for n in self.nodes.values()
            if n.core is not None and n.core.role is Role.LEADER and not n.blocked(self.now)
        ]
        if not leaders:
            return "membership_no_leader"
        node = max(leaders, key=lambda n: n.core.epoch if n.core else -1)
        core = node.core
        assert core is not None
        outside = [i for i in self.node_ids if i not in core.voters]
        removable = self._may_remove_voter()
        if not removable and not outside:
            return "membership_kept_two"
        try:
            if outside and (rng.random() < 0.5 or len(core.voters) == 1 or not removable):
                added = rng.choice(outside)
                core.add_voter(node.clock(self.now), VoterNode(added))
                self.membership_changed = True
                kind = "membership_add"
                self._trace(f"n{node.node_id} adds voter n{added}")
            else:
                removed = rng.choice(list(core.voters))
                core.remove_voter(node.clock(self.now), removed)
                self.membership_changed = True
                kind = "membership_remove"
                self._trace(f"n{node.node_id} removes voter n{removed}")
        except VoterChangeError as refused:
            self._trace(f"n{node.node_id} voter change refused: {refused}")
            kind = "membership_refused"
        self._drive(node)
        return kind

    def _state_lost_elsewhere(self, node: SimNode) -> bool:
        """Whether another node is behind the vote fence, or will be when it restarts. A fenced
        node is no witness for another (its epoch may be below one it persisted), so election
        state is lost on one node at a time, as the fence needs every other voter. A running node
        counts by its disk too: one that closed its fence in memory fences again if it crashes
        before that write is durable (seed 130840 of the plane soak: both voters of two fenced,
        each waiting for the other's epoch)."""
        for other in self.nodes.values():
            if other is node:
                continue
            if other.core is not None and other.core.vote_fenced:
                return True
            if other.disk.quorum_state is None and (
                other.disk.quorum_state_lost or other.disk.durable or other.disk.snapshot is not None
            ):
                return True  # a log wholly in its snapshot fences too
            if other.disk.quorum_state is not None and other.disk.quorum_state.voted_id == VOTE_FENCED:
                return True  # fences again at its restart
        return False

    def _may_remove_voter(self) -> bool:
        """With faults that damage a disk (``DAMAGING``: storage, and flush_race's lost write), never
        down to one voter: a damaged copy needs another to repair from, and a lone voter's lost
        write would be the only copy of a committed batch (plane seeds 143518 and 143766: a removal
        answered while flush_race had the leader cut off, then its write lost). (The smallest voter
        set any running node holds, a leader among them: its log has every committed change.)"""
        if not self.params.faults & DAMAGING:
            return True
        running = [n.core for n in self.nodes.values() if n.core is not None]
        if not any(core.role is Role.LEADER for core in running):
            return False  # without a leader every view may miss a committed removal
        return min(len(core.voters) for core in running) > 2 and len(self.current_voters()) > 2

    def current_voters(self) -> tuple[int, ...]:
        """The voter set of the newest leader's log (the bootstrap set before any change)."""
        leaders = [n.core for n in self.nodes.values() if n.core is not None and n.core.role is Role.LEADER]
        if not leaders:
            return self.voters
        return max(leaders, key=lambda core: core.epoch).voters

    def _partition_links(self, shape: str) -> set[tuple[int, int]]:
        rng = self.rng
        ids = list(self.node_ids)
        if len(ids) < 2:
            return set()

        def cut(a: list[int], b: list[int]) -> set[tuple[int, int]]:
            return {(x, y) for x in a for y in b} | {(y, x) for x in a for y in b}

        if shape == "one_way":
            a, b = rng.sample(ids, 2)
            return {(a, b)}
        if shape == "isolate_leader":
            leaders = [n.node_id for n in self.nodes.values() if n.core is not None and n.core.role is Role.LEADER]
            target = leaders[0] if leaders else rng.choice(ids)
            return cut([target], [i for i in ids if i != target])
        if shape == "minority":
            size = 1 + rng.next_int(max(1, (len(self.voters) - 1) // 2))
            minority = rng.sample(list(self.voters), min(size, len(self.voters)))
            minority += [o for o in self.observers if rng.random() < 0.5]
            return cut(minority, [i for i in ids if i not in minority])
        if shape == "bridge" and len(ids) >= 3:
            bridge = rng.choice(ids)
            rest = [i for i in ids if i != bridge]
            rng.shuffle(rest)
            half = len(rest) // 2
            return cut(rest[:half], rest[half:])
        # symmetric: a random split
        shuffled = ids[:]
        rng.shuffle(shuffled)
        k = 1 + rng.next_int(len(ids) - 1)
        return cut(shuffled[:k], shuffled[k:])

    def _recompute_blocked(self) -> None:
        partitions = self.partitions
        self.holding &= partitions.keys()
        self.blocked = set().union(*partitions.values()) if partitions else set()
        dropping = set().union(*(links for p, links in partitions.items() if p not in self.holding))
        self.held_links = self.blocked - dropping
        # What a healed link held arrives now, in the order it was sent.
        for link in [link for link in self.held if link not in self.blocked]:
            for envelope in self.held.pop(link):
                self._push(self.now + self.params.latency_min_ms, DELIVER, envelope)

    def _blocked_link(self, envelope: Envelope) -> bool:
        """Whether a partition stops this message now (it is held for the heal, or dropped)."""
        link = (envelope.source, envelope.destination)
        if link not in self.blocked:
            return False
        if link in self.held_links:
            self.held.setdefault(link, []).append(envelope)
        return True

    def _heal_all(self) -> None:
        """Phase 2: the network is whole, pauses and slow disks end, crashed voters come back
        except a minority the seed leaves down."""
        self.healed = True
        if self.figure8 is not None:
            self._figure8_step(True)
        if self.flush_race is not None:
            self._flush_race_step(True)
        self.partitions.clear()
        self._recompute_blocked()
        self.params = _healed(self.params)
        for held in self.delayed.values():
            for _epoch, envelope in held:
                self._push(self.now + self.params.latency_min_ms, DELIVER, envelope)
        self.delayed.clear()
        down = [n for n in self.nodes.values() if n.core is None]
        keep_down = {n.node_id for n in down if n.node_id in self.voters}
        # After voter changes a minority of the first set may be a majority of the set in force.
        keep_down = set(sorted(keep_down)[: self.params.left_down]) if not self.membership_changed else set()
        if self._storage_faulted:
            # A damaged copy is a fault too: repair may need every other copy, and a node that lost its
            # election state votes again only once every voter has told it its epoch (the vote fence).
            keep_down = set()
        for node in self.nodes.values():
            node.paused_until = 0
            node.end_suspension(self.now)
            if node.clock_permille != 1000:
                node.set_clock_rate(self.now, 1000)
                if node.core is not None:
                    self._arm_timer(node)
            node.slow_until = 0
            if node.core is None and node.node_id not in keep_down:
                self._start(node)
        self._trace(f"heal: all links up; left down {sorted(keep_down)}")

    # -- main loop ---------------------------------------------------------------------------------
    def run(self, steps: int) -> RunResult:
        result = self.result
        try:
            for node in self.nodes.values():
                self._start(node)
            self._push(1, PROPOSE, None)
            if self.params.faults:
                self._push(self.params.fault_interval_ms, FAULT, None)
            self._loop(steps)
            self._heal_all()
            heal_at = self.now
            deadline = heal_at + self.params.liveness_budget_ms
            self._loop(steps * 4 + 200_000, until_ms=deadline, stop=self._converged)
            if not self._converged():
                raise InvariantViolation(
                    "liveness",
                    f"no leader committing on every running voter {self.params.liveness_budget_ms} ms after healing "
                    f"(leaders: {self._leader_summary()})",
                )
            result.liveness_ms = self.now - heal_at
            cores = {n.node_id: n.core for n in self.nodes.values() if n.core is not None}
            for node_id, core in cores.items():
                if core.damaged and node_id in self.current_voters():
                    raise InvariantViolation(
                        "liveness", f"voter {node_id} still holds damaged batches at {sorted(core.damaged)}"
                    )
            self.checker.check_final(cores, self.acknowledged, self.rejected)
        except InvariantViolation as violation:
            result.violation = violation
            self._trace(f"VIOLATION {violation}")
        except CommittedTruncationError as error:
            result.violation = InvariantViolation("3-committed-never-truncated", str(error))
            self._trace(f"VIOLATION {result.violation}")
        except UnrepairableEntryError as error:
            # Only repairable damage is injected (disk_faults): stopping is a failure to repair.
            result.violation = InvariantViolation("liveness", str(error))
            self._trace(f"VIOLATION {result.violation}")
        except UnrecoverableStateError as error:
            # The stop the quorum owes when no leader can be elected to send the state below the
            # log: expected only where the run injected that (a majority of snapshots lost at once).
            if self.unrecoverable_injected:
                result.stopped = str(error)
                self._trace(f"STOPPED {error}")
            else:
                result.violation = InvariantViolation("liveness", str(error))
                self._trace(f"VIOLATION {result.violation}")
        except AssertionError as error:
            result.violation = InvariantViolation("assertion", str(error) or repr(error))
            self._trace(f"VIOLATION assertion {error}")
        if self.unproven_read is not None:
            result.violation = self.unproven_read  # before any other violation, which it may have caused
        result.virtual_ms = self.now
        result.checks = self.checker.checks
        return result

    def _leader_summary(self) -> str:
        return ", ".join(
            f"n{n.node_id}:{n.core.role.value}@{n.core.epoch} hw={n.core.high_watermark}"
            for n in self.nodes.values()
            if n.core is not None
        )

    def _converged(self) -> bool:
        if self.probe is None:
            return False
        end = self.probe[1]
        voters = self.current_voters()
        return all(n.applied_offset >= end for n in self.nodes.values() if n.core is not None and n.node_id in voters)

    def _loop(self, max_events: int, until_ms: int | None = None, stop: Callable[[], bool] | None = None) -> None:
        """Process up to ``max_events`` events. Only events that do something count: stale
        timers, deferred deliveries and messages to crashed nodes are skipped uncounted."""
        queue = self._queue
        nodes = self.nodes
        result = self.result
        pop = heapq.heappop
        processed = 0
        while processed < max_events and queue:
            at, _id, kind, payload = queue[0]
            if until_ms is not None and at > until_ms:
                return
            pop(queue)
            self.now = at
            if kind == DELIVER:
                node = nodes[payload.destination]
                if node.persisting:
                    node.deferred.append((kind, payload))
                    continue
                if node.paused_until > at:
                    self._push(node.paused_until, DELIVER, payload)
                    continue
                if node.core is None:
                    if (payload.source, payload.destination) not in self.blocked:
                        self._refused(payload)
                    continue
                if self._blocked_link(payload):
                    continue
                self._deliver(node, payload)
            elif kind == TIMER:
                node_id, generation = payload
                node = nodes[node_id]
                if node.core is None or generation != node.timer_generation:
                    continue  # superseded by an earlier timer, or the node crashed
                if node.persisting:
                    node.deferred.append((kind, payload))
                    continue
                wake = max(node.deadline, node.paused_until)
                if wake > at:  # the deadline moved later, or the node is paused: sleep on
                    node.timer_at = wake
                    self._push(wake, TIMER, payload)
                    continue
                node.timer_at = NEVER
                self._drive(node)
            elif kind == FLUSH:
                node_id, incarnation, barrier, seq = payload
                node = nodes[node_id]
                if node.core is None or node.incarnation != incarnation:
                    continue
                if node.persisting:
                    node.deferred.append((kind, payload))
                    continue
                if node.paused_until > at:
                    self._push(node.paused_until, FLUSH, payload)
                    continue
                self._flushed(node, barrier, seq)
            elif kind == PERSISTED:
                node = nodes[payload[0]]
                if node.core is None or node.incarnation != payload[1]:
                    continue  # the node crashed before the write completed: it is lost
                if node.paused_until > at:
                    self._push(node.paused_until, PERSISTED, payload)
                    continue
                self._persisted(node, payload)
            elif kind == PROPOSE:
                self._propose()
            elif kind == FAULT:
                if self.healed:
                    continue
                self._fault()
            elif kind == HEAL:
                if self.partitions.pop(payload, None) is None:
                    continue
                self._recompute_blocked()
                self._trace("partition healed")
            elif kind == CUSTOM:
                self._custom(payload)
            elif kind == CLOCK:
                self._clock_rate_restored(payload)
            elif kind == FIGURE8:
                if not self._figure8_timeout(payload):
                    continue  # the scenario moved on, or ended
            elif kind == FLUSH_RACE:
                if not self._flush_race_timeout(payload):
                    continue
            elif kind == CRASH:
                node = nodes[payload[0]]
                if node.core is None or node.incarnation != payload[1] or self.healed:
                    continue
                self._crash(node, after_vote=True)
                self._push(at + 1 + self.rng.next_int(4), RESTART, node.node_id)
                self._count(payload[2])
            elif kind == RESTART:
                node = nodes[payload]
                if node.core is not None or self.healed:
                    continue
                self._start(node)
                self._trace(f"restart n{payload}")
                self._count("restart")
            processed += 1
            result.events += 1
            if stop is not None and stop():
                return


def _healed(params: SimParams) -> SimParams:
    from dataclasses import replace

    return replace(params, drop_rate=0.0)


def describe_message(envelope: Envelope) -> str:
    m = envelope.message
    name = type(m).__name__
    if isinstance(m, raft_pb2.VoteRequest):
        return (
            f"{name}{'(pre)' if m.pre_vote else ''} e={m.candidate_epoch} last=({m.last_offset_epoch},{m.last_offset})"
        )
    if isinstance(m, raft_pb2.VoteResponse):
        return f"{name}{'(pre)' if m.pre_vote else ''} granted={m.vote_granted} e={m.leader_epoch}"
    if isinstance(m, raft_pb2.FetchRequest):
        return f"{name} off={m.fetch_offset} last_e={m.last_fetched_epoch} e={m.replica_epoch}"
    if isinstance(m, raft_pb2.FetchResponse):
        extra = ""
        if m.HasField("diverging_epoch"):
            extra = f" diverging=({m.diverging_epoch.epoch},{m.diverging_epoch.end_offset})"
        elif m.HasField("snapshot_id"):
            extra = f" snapshot={m.snapshot_id.end_offset}"
        return f"{name} err={m.error_code} e={m.leader_epoch} hw={m.high_watermark} bytes={len(m.records)}{extra}"
    return f"{name} e={getattr(m, 'leader_epoch', getattr(m, 'replica_epoch', '?'))}"


def _with_set(sets: tuple[tuple[int, ...], ...], voters: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    """``sets`` with ``voters`` added unless it is there already (in the order seen)."""
    return sets if voters in sets else (*sets, voters)


def _with_sets(sets: tuple[tuple[int, ...], ...], more: tuple[tuple[int, ...], ...]) -> tuple[tuple[int, ...], ...]:
    for voters in more:
        sets = _with_set(sets, voters)
    return sets


def read_proven(leader: int, voter_sets: tuple[tuple[int, ...], ...], echoing: set[int]) -> bool:
    """Whether a majority of one of ``voter_sets`` (those in force at ``leader`` while its read
    waited) vouches for the read: the set's members in ``echoing`` (their Fetches of the leader's
    epoch echoed the read's barrier), and the leader itself only as a member (one that removed
    itself is no voter, and the voters left may have elected another leader: seed 100942). Each
    set is judged on its own: an echo counts only toward a set its sender is in."""
    return any(
        (1 if leader in voters else 0) + sum(1 for v in voters if v != leader and v in echoing) >= len(voters) // 2 + 1
        for voters in voter_sets
    )
