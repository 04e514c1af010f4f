"""RaftCore: one node's consensus state machine (KIP-595 / KIP-996 / KIP-630), pure.

Inputs: :meth:`step` (an inbound message), :meth:`propose` (a client batch), :meth:`poll`
(timers), :meth:`on_log_flushed` (the driver's fsync finished), :meth:`on_snapshot_created`
(the state machine wrote a snapshot), :meth:`on_snapshot_installed` (the driver loaded a fetched
one), :meth:`transfer_leadership` / :meth:`resign`.
Output: :meth:`take_ready` (a :class:`~raftmeta.raft.ready.Ready`), and ``poll`` returns the
absolute time (ms) at which the core next needs attention.

Layout follows etcd-io/raft: one shared epoch check (``_observe_epoch``), then one handler
per message type; ``become_*`` for transitions, ``maybe_*`` for conditional actions.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from placement.rng import RandomSource
from raftmeta.raft.config import RaftConfig
from raftmeta.raft.log import Entry, LogView, Validation
from raftmeta.raft.quorum import VoteResult, VoteTally, majority_offset, majority_time
from raftmeta.raft.ready import Ready
from raftmeta.raft.repair import (
    ANSWER_ABSENT,
    ANSWER_DAMAGED,
    ANSWER_IN_SNAPSHOT,
    Bridge,
    RepairRound,
    copy_fills,
    copy_fills_back,
    damage_of,
    damaged_on_a_majority,
)
from raftmeta.raft.state import (
    ElectionState,
    EpochState,
    FollowerState,
    LeaderState,
    ParkedFetch,
    PendingRead,
    ReplicaProgress,
    ReplicaState,
    ResignedState,
    SnapshotDownload,
    UnattachedState,
    check_transition,
)
from raftmeta.raft.state_probe import StateProbe
from raftmeta.raft.types import (
    NO_LEADER,
    NO_VOTE,
    VOTE_FENCED,
    VOTE_UNKNOWN,
    CommittedTruncationError,
    Envelope,
    NotLeaderError,
    ProposalLimitError,
    QuorumStateData,
    RaftMessage,
    Role,
    SnapshotImage,
    SoftState,
    UnrecoverableStateError,
    UnrepairableEntryError,
)
from raftmeta.raft.voters import (
    DIRECTORY_ID_BYTES,
    VoterHistory,
    VoterNode,
    VoterSet,
    format_directory_id,
    voters_in_batch,
    voters_in_data,
)
from raftmeta.records.codec import CorruptBatchError, encode_batch, iter_batches
from raftmeta.v1 import errors_pb2, raft_pb2, records_pb2

NONE = errors_pb2.NONE
NOT_LEADER = errors_pb2.NOT_LEADER_OR_FOLLOWER
FENCED = errors_pb2.FENCED_LEADER_EPOCH
UNKNOWN_EPOCH = errors_pb2.UNKNOWN_LEADER_EPOCH
BAD_CLUSTER = errors_pb2.INCONSISTENT_CLUSTER_ID
BAD_VOTER_SET = errors_pb2.INCONSISTENT_VOTER_SET
INVALID_REQUEST = errors_pb2.INVALID_REQUEST
REQUEST_TIMED_OUT = errors_pb2.REQUEST_TIMED_OUT
# A repair request's answers: the asked node holds the slot damaged too, or does not hold it.
CORRUPT = errors_pb2.CORRUPT_MESSAGE
ABSENT = errors_pb2.OFFSET_OUT_OF_RANGE
NEVER = 1 << 62


class VoterChangeError(Exception):
    """AddRaftVoter / RemoveRaftVoter refused, with Kafka's error code (KIP-853): nothing was
    appended. REQUEST_TIMED_OUT means "not now" (the last change is not committed yet, this
    leader has not committed its epoch, or the new voter is not caught up): the caller may retry."""

    def __init__(self, code: errors_pb2.ErrorCode.ValueType, message: str) -> None:
        super().__init__(f"{errors_pb2.ErrorCode.Name(code)}: {message}")
        self.code = code
        self.message = message


class RaftCore:
    """One node. Not thread-safe: one driver task owns it (see the package docstring)."""

    def __init__(
        self,
        config: RaftConfig,
        random: RandomSource,
        now_ms: int,
        *,
        quorum_state: QuorumStateData | None = None,
        entries: Iterable[Entry] = (),
        snapshot: SnapshotImage | None = None,
        high_watermark: int = 0,
        first_correlation_id: int = 1,
        damaged: Iterable[int] = (),
        damaged_epochs: Mapping[int, int] | None = None,
        election_state_lost: bool = False,
        missing_snapshot: tuple[int, int] | None = None,
    ) -> None:
        """Start from what the driver recovered from disk: the quorum state file, the log's
        batches, the latest snapshot and the high-watermark checkpoint. Batches below the
        snapshot are ignored; a log that ends below the snapshot (a lost tail) must be reset by
        the driver to start at the snapshot's end (Kafka's truncateToLatestSnapshot).
        ``damaged``: base offsets of batches whose bytes failed their check on start (their slot
        -- offset, epoch, end -- is known, their bytes are not): the core repairs them from its
        peers and vouches for nothing from the first of them on (docs/storage.md, "Repair from
        the quorum"). ``damaged_epochs``: for a damaged slot across an epoch change (the batches
        around it of different epochs, no byte inside saying where the epoch rises), base offset ->
        the highest epoch its offsets may be of; its entry carries the lowest. Such a slot is
        repaired only from its leader's Fetch answers, and until it is the node stands in no
        election (it could not answer a fetcher's diverging-epoch question about those offsets).
        ``election_state_lost``: the quorum-state file exists but is damaged (set
        aside): unlike a missing file next to an empty log, this is not a new node.
        ``missing_snapshot``: (end offset, epoch) of a damaged newest snapshot the driver set
        aside with no fallback (docs/storage.md, "A damaged snapshot with no fallback"): the log
        starts there, the state below it is nowhere on this node. Until the leader's snapshot
        is installed the core applies nothing, grants no vote, stands in no election and
        fetches from offset 0, so that the leader answers with its snapshot."""
        self.config = config
        self.node_id = config.node_id
        self._random = random
        self._faults = config.faults
        start = (snapshot.end_offset, snapshot.epoch) if snapshot else missing_snapshot or (0, 0)
        # No state below the log (a damaged snapshot with no fallback): see the docstring.
        self.state_missing = snapshot is None and missing_snapshot is not None
        # Without that state: the round asking the other voters whether one can still lead.
        self._state_probe = StateProbe()
        # Since when the rounds have found a majority of the voters without it, some not heard from.
        self._no_leader_since: int | None = None
        # Batches below the snapshot may still be on disk (retention): the snapshot covers them.
        kept = [e for e in entries if e.base_offset >= start[0]]
        self.log = LogView(start[0], start[1], kept)
        self.damaged: set[int] = {b for b in damaged if b >= start[0] and self.log.entry_at(b) is not None}
        # Damaged slots across an epoch change: base offset -> the highest epoch they may hold.
        self.damaged_epochs: dict[int, int] = {
            b: e for b, e in (damaged_epochs or {}).items() if b in self.damaged and e > self._slot(b).epoch
        }
        # Damaged batches repaired from a peer's copy since start (the repairs counter).
        self.repairs = 0
        # The voter set in force is the latest VotersRecord in the log, committed or not, else the
        # snapshot's, else the bootstrap voters of the configuration (KIP-853).
        self.voter_history = VoterHistory(self._snapshot_voters(snapshot))
        for entry in kept:
            if entry.base_offset in self.damaged:
                continue  # its bytes are unknown: its voter change, if any, comes back with the repair
            found = voters_in_batch(entry.data)
            if found is not None:
                self.voter_history.add(entry.base_offset, found)
        self.voters: tuple[int, ...] = self.voter_history.latest().ids
        # The set in force by id: every Fetch asks whether its sender is the voter its id names.
        self._voter_nodes = {n.voter_id: n for n in self.voter_history.latest().nodes}
        self.voters_at_high_watermark = self.voters
        # Retained snapshots, oldest first: FetchSnapshot serves any of them, so a follower can
        # finish downloading one while a newer one is taken; the log starts at the oldest.
        self.snapshots: list[SnapshotImage] = [snapshot] if snapshot else []
        # Everything the driver recovered is on disk.
        self.durable_end_offset = self.log.end_offset
        self.high_watermark = max(start[0], min(high_watermark, self.log.end_offset))
        # The highest commit point learned, also inside a damaged range of several batches, where
        # the high watermark stops at the range's base (a boundary of this log) until the repair
        # gets there: a repair never judges a batch below it uncommitted.
        self._committed_floor = self.high_watermark
        covering = self.log.entry_covering(self.high_watermark) if self.damaged else None
        if covering is not None and covering.base_offset in self.damaged:
            self.high_watermark = max(start[0], covering.base_offset)
        # Committed batches below this offset were handed to the driver (or are in the snapshot).
        self.applied_offset = start[0]
        # A restarted driver passes a fresh base (e.g. incarnation << 32) so that answers to
        # requests of an earlier incarnation can never match a new request.
        self._next_correlation_id = first_correlation_id
        self._next_read_id = 1
        self._ready = Ready()
        self._next_seq = 1
        # (ready seq, offset) of truncations not yet covered by a flush report.
        self._unflushed_truncations: list[tuple[int, int]] = []
        # What is on disk now; the first Ready rewrites it if recovery had to lift it.
        self._persisted = quorum_state or QuorumStateData(0)
        recovered, self.start_note = self._recover_election_state(quorum_state, election_state_lost)
        # The vote fence (docs/consensus.md, "Lost election state"): with its election state lost,
        # this node may have granted a vote in any epoch from its log's on. It grants none and
        # stands in no election until every other voter has told it its epoch: each candidate it
        # could have voted for persisted that epoch first, so their maximum bounds every vote it
        # may have cast. voter -> epoch it answered; None: no fence.
        # A stored VOTE_FENCED is a fence that never closed (a crash meanwhile): fence again.
        self._fence: dict[int, int] | None = None
        lost = self.start_note is not None or recovered.voted_id == VOTE_FENCED
        if lost and not (self._faults.vote_without_fence or self._faults.lost_vote_granted_again):
            self._fence = {}
        self._fence_probes: dict[int, int] = {}  # correlation id -> voter asked
        self._fence_retry_ms = 0
        self.state: EpochState = self._initial_state(recovered, now_ms)
        self._persist()
        self._soft = SoftState(self.state.role, self.state.epoch, self.state.leader_id)
        self._ready.soft_state = self._soft
        self._emit_committed()
        self._handlers: dict[type, Callable[[int, Envelope, Any], None]] = {
            raft_pb2.VoteRequest: self._handle_vote_request,
            raft_pb2.VoteResponse: self._handle_vote_response,
            raft_pb2.BeginQuorumEpochRequest: self._handle_begin_quorum_epoch_request,
            raft_pb2.BeginQuorumEpochResponse: self._handle_begin_quorum_epoch_response,
            raft_pb2.EndQuorumEpochRequest: self._handle_end_quorum_epoch_request,
            raft_pb2.EndQuorumEpochResponse: self._handle_end_quorum_epoch_response,
            raft_pb2.FetchRequest: self._handle_fetch_request,
            raft_pb2.FetchResponse: self._handle_fetch_response,
            raft_pb2.FetchSnapshotRequest: self._handle_fetch_snapshot_request,
            raft_pb2.FetchSnapshotResponse: self._handle_fetch_snapshot_response,
        }

    def _recover_election_state(
        self, stored: QuorumStateData | None, lost: bool = False
    ) -> tuple[QuorumStateData, str | None]:
        """The election state to start from, and a note for the driver's log when it is not the
        stored one. The epoch is never below the log's last epoch (or the snapshot's): a batch of
        epoch E means this node took part in epoch E. When the stored state is missing, or older
        than the log, the vote this node may have granted in that epoch is unknown: it starts
        unattached there with VOTE_UNKNOWN and grants no vote in it (Kafka starts unattached
        with no vote, and could vote a second time in that epoch). docs/consensus.md explains
        what remains open: a vote granted in a later epoch before the state was lost."""
        log_epoch = self.log.last_epoch  # the snapshot's epoch when the log above it is empty
        has_history = self.log.end_offset > 0
        if stored is None:
            if not has_history and not lost:
                return QuorumStateData(0), None
            if has_history:
                note = f"no election state, but the log reaches offset {self.log.end_offset} in epoch {log_epoch}"
            else:
                note = "the election state is damaged and the log is empty"
        elif stored.epoch < log_epoch:
            note = f"the election state's epoch {stored.epoch} is older than the log's last epoch {log_epoch}"
        else:
            return stored, None
        voted = NO_VOTE if self._faults.lost_vote_granted_again else VOTE_UNKNOWN
        return QuorumStateData(log_epoch, NO_LEADER, voted), (
            f"{note}: starting unattached in epoch {log_epoch} and granting no vote in it, nor in any later "
            "epoch until every other voter has told it its epoch (the vote fence)"
        )

    def _initial_state(self, persisted: QuorumStateData, now_ms: int) -> EpochState:
        epoch, leader, voted = persisted.epoch, persisted.leader_id, persisted.voted_id
        if self._faults.forget_vote_on_restart and voted != self.node_id:
            voted = NO_VOTE  # planted bug
        if leader == self.node_id:
            # Kafka restarts a former leader as resigned: it may not lead that epoch again
            # (its unflushed tail may be gone) and must not vote in it a second time.
            return ResignedState(
                Role.RESIGNED, epoch, leader, voted, election_deadline_ms=now_ms + self._election_timeout()
            )
        if leader != NO_LEADER:
            return self._follower_state(now_ms, epoch, leader, voted)
        deadline = now_ms + self._election_timeout() if self.electable else now_ms
        return UnattachedState(Role.UNATTACHED, epoch, NO_LEADER, voted, deadline_ms=deadline)

    # -- read-only views ---------------------------------------------------------------------------
    @property
    def is_voter(self) -> bool:
        return self.node_id in self.voters

    @property
    def electable(self) -> bool:
        """Whether this node takes part in elections: a voter of the latest set, or of the set
        before it while the change that removed it is uncommitted. The Raft thesis (4.2.2): such
        a node may still be needed to elect a leader until the change commits -- it may hold the
        change alone, and a voter without it cannot win its vote -- so it still starts elections,
        counting only the latest set's votes (its own not among them)."""
        if self.node_id in self.voters:
            return True
        history = self.voter_history
        latest = history.latest_offset()
        return latest >= self.high_watermark and self.node_id in history.at(latest).ids

    @property
    def voter_set(self) -> VoterSet:
        """The voter set in force: the latest in the log, committed or not."""
        return self.voter_history.latest()

    def _snapshot_voters(self, snapshot: SnapshotImage | None) -> VoterSet:
        found = voters_in_data(snapshot.data) if snapshot is not None else None
        if found is not None:
            return found
        return self.config.bootstrap_voters or VoterSet.of_ids(self.config.voters)

    @property
    def role(self) -> Role:
        return self.state.role

    @property
    def epoch(self) -> int:
        return self.state.epoch

    @property
    def leader_id(self) -> int:
        return self.state.leader_id

    @property
    def log_end_offset(self) -> int:
        return self.log.end_offset

    @property
    def voted_id(self) -> int:
        """The vote cast in this epoch (NO_VOTE: none; VOTE_UNKNOWN: lost with the quorum-state file)."""
        return self.state.voted_id

    def voter_progress(self) -> dict[int, ReplicaProgress] | None:
        """Leader only (None elsewhere): each voter's fetch progress as the leader saw it this
        epoch; a voter that has not fetched yet is absent."""
        state = self.state
        if not isinstance(state, LeaderState):
            return None
        return {rid: ReplicaProgress.of(r) for rid, r in state.replicas.items()}

    def observer_progress(self) -> dict[int, ReplicaProgress] | None:
        """Leader only (None elsewhere): each observer's fetch progress."""
        state = self.state
        if not isinstance(state, LeaderState):
            return None
        return {rid: ReplicaProgress.of(r) for rid, r in state.observers.items()}

    def pending_read_barriers(self) -> dict[int, int] | None:
        """Leader only (None elsewhere): each linearizable read waiting for its read-index round,
        read id -> the barrier a majority must echo; with ``read_barrier``, the barrier the
        leader's Fetch answers carry now (a simulator checks the proof from the network's side)."""
        state = self.state
        if not isinstance(state, LeaderState):
            return None
        return {read.read_id: read.barrier for read in state.reads}

    @property
    def read_barrier(self) -> int:
        """Leader only: the read barrier its Fetch answers carry in this epoch (0 elsewhere)."""
        state = self.state
        return state.read_barrier if isinstance(state, LeaderState) else 0

    @property
    def read_commit_point(self) -> int:
        """The index a linearizable read started now waits for (``read_index``): the high
        watermark, and on a leader at least its first batch of this epoch, so that it includes
        everything any earlier leader committed. Elsewhere the high watermark."""
        state = self.state
        if not isinstance(state, LeaderState):
            return self.high_watermark
        return max(self.high_watermark, state.epoch_start_offset + 1)

    @property
    def has_parked_fetch(self) -> bool:
        """Leader only: a follower's Fetch waits here for new data (a new batch would go at once)."""
        state = self.state
        return isinstance(state, LeaderState) and bool(state.parked)

    @property
    def resignation_unacknowledged(self) -> frozenset[int]:
        """While resigning: the voters that have not yet answered our EndQuorumEpoch (empty
        otherwise)."""
        state = self.state
        return frozenset(state.unacknowledged) if isinstance(state, ResignedState) else frozenset()

    @property
    def bridge_fetch_offset(self) -> int | None:
        """The offset a bridge fetch under way asks from (repair.Bridge: the leader's snapshot ends
        inside a damaged range of ours), None if there is none."""
        state = self.state
        return state.bridge.next_offset if isinstance(state, FollowerState) and state.bridge is not None else None

    @property
    def vote_fenced(self) -> bool:
        """Behind the vote fence (a lost election state): no vote, no candidacy yet."""
        return self._fence is not None

    def _slot(self, base_offset: int) -> Entry:
        entry = self.log.entry_at(base_offset)
        assert entry is not None, f"no batch at {base_offset}"
        return entry

    def _epoch_bound(self, slot: Entry) -> int:
        """The highest epoch the offsets of ``slot`` may be of: its own, unless it is a damaged
        slot across an epoch change."""
        return self.damaged_epochs.get(slot.base_offset, slot.epoch)

    @property
    def vouched_end_offset(self) -> int:
        """The end of the prefix of the log this node can vouch for: its first damaged batch, or
        the log end. It reports no more toward the high watermark and applies no further."""
        return min(self.damaged) if self.damaged else self.log.end_offset

    def replica_end_offsets(self) -> dict[int, int]:
        """Leader only: each fetcher's persisted end offset (``quorum status``)."""
        state = self.state
        if not isinstance(state, LeaderState):
            return {}
        out = {rid: r.end_offset for rid, r in state.replicas.items()}
        out.update({rid: r.end_offset for rid, r in state.observers.items()})
        out[self.node_id] = self.durable_end_offset
        return out

    # -- inputs ------------------------------------------------------------------------------------
    def step(self, now_ms: int, envelope: Envelope) -> None:
        """Handle one inbound message addressed to this node."""
        assert envelope.destination == self.node_id, f"message for {envelope.destination} stepped into {self.node_id}"
        self._handlers[type(envelope.message)](now_ms, envelope, envelope.message)

    def propose(self, now_ms: int, records: Sequence[bytes]) -> Entry:
        """Frame ``records`` as one batch in the leader's epoch and append it. The batch is
        committed when a Ready's ``committed`` holds an entry with the same base offset and
        epoch. Raises NotLeaderError (also while resigned) or ProposalLimitError."""
        state = self.state
        if not isinstance(state, LeaderState):
            raise NotLeaderError(state.leader_id if state.role is not Role.RESIGNED else NO_LEADER, state.epoch)
        log = self.log
        uncommitted = len(log) - log.index_of(max(self.high_watermark, log.start_offset))
        if uncommitted >= self.config.max_uncommitted_batches:
            raise ProposalLimitError(f"{uncommitted} uncommitted batches (limit {self.config.max_uncommitted_batches})")
        base = log.end_offset
        data = encode_batch(base, state.epoch, records, now_ms + self.config.wall_clock_offset_ms)
        entry = Entry(base, state.epoch, base + len(records), data)
        self._append(now_ms, entry)
        self._release_parked(now_ms)
        return entry

    def read_index(self, now_ms: int) -> int:
        """Start a linearizable read (etcd's ReadIndex, over KRaft's pull replication); returns its
        id. A later Ready's ``reads`` lists ``(id, index)`` once (1) a majority of voters (this leader
        counted while it is one: not once it removed itself) sent a Fetch in this epoch *after* the
        read started -- proof that no other leader had been elected by then -- and (2) the high
        watermark reached ``index``, the commit point when the read started (at least this
        leader's first batch, so it includes everything any earlier leader committed). Raises
        NotLeaderError (also while resigned).

        How (1) is proved without a clock: the leader raises its read barrier, answers every parked
        Fetch at once (each answer carries the barrier), and counts a voter once one of its Fetches
        echoes that barrier -- sent after it received such an answer. A fetcher in another epoch is
        refused before it is counted (FENCED/UNKNOWN_LEADER_EPOCH)."""
        state = self.state
        if not isinstance(state, LeaderState):
            raise NotLeaderError(state.leader_id if state.role is not Role.RESIGNED else NO_LEADER, state.epoch)
        read_id = self._next_read_id
        self._next_read_id += 1
        state.read_barrier += 1
        index = self.read_commit_point
        state.reads.append(PendingRead(read_id, index, state.read_barrier))
        self._release_parked(now_ms)
        self._maybe_release_reads(state)
        return read_id

    def _maybe_release_reads(self, state: LeaderState) -> None:
        """Confirm the reads a majority has echoed the barrier of; release, in order, the confirmed
        reads whose index the high watermark has reached."""
        reads = state.reads
        if not reads:
            return
        majority = len(self.voters) // 2 + 1
        # A leader that removed itself (the change not committed yet) is no voter of the set in
        # force: as for the high watermark and check quorum (Kafka's LeaderState), only the set's
        # members count -- the remaining voters alone may have elected another leader already.
        own = 1 if self.is_voter else 0
        for read in reads:
            if not read.confirmed:
                echoed = own + sum(1 for r in state.replicas.values() if r.read_barrier >= read.barrier)
                read.confirmed = echoed >= majority or self._faults.stale_reads
        released = 0
        while released < len(reads) and reads[released].confirmed and reads[released].index <= self.high_watermark:
            read = reads[released]
            self._ready.reads.append((read.read_id, read.index))
            released += 1
        if released:
            del reads[:released]

    def poll(self, now_ms: int) -> int:
        """Fire the timers that are due; return the absolute time the core next needs a poll."""
        if self._fence is not None:
            return min(self._probe_fence(now_ms), self._poll_role(now_ms))
        return self._poll_role(now_ms)

    def _poll_role(self, now_ms: int) -> int:
        state = self.state
        role = state.role
        if role is Role.LEADER:
            assert isinstance(state, LeaderState)
            return self._poll_leader(now_ms, state)
        if role is Role.FOLLOWER or role is Role.OBSERVER:
            assert isinstance(state, FollowerState)
            return self._poll_follower(now_ms, state)
        if role is Role.PROSPECTIVE or role is Role.CANDIDATE:
            assert isinstance(state, ElectionState)
            if now_ms >= state.deadline_ms:
                self._become_prospective(now_ms)
                return self.poll(now_ms)
            return state.deadline_ms
        if role is Role.RESIGNED:
            assert isinstance(state, ResignedState)
            if now_ms >= state.election_deadline_ms:
                if self.electable:
                    self._become_prospective(now_ms)
                else:
                    self._become_unattached(now_ms, state.epoch)  # removed from the voters: observe
                return self.poll(now_ms)
            if state.unacknowledged and now_ms >= state.retry_ms:
                self._send_end_quorum_epoch(now_ms, state, sorted(state.unacknowledged))
            return min(state.election_deadline_ms, state.retry_ms if state.unacknowledged else NEVER)
        assert isinstance(state, UnattachedState)
        if now_ms >= state.deadline_ms:
            if self.electable:
                self._become_prospective(now_ms)
                return self.poll(now_ms)
            state.deadline_ms = now_ms + self.config.request_timeout_ms
            if self.durable_end_offset < self.log.end_offset and not self._faults.ack_unpersisted:
                # Its fetch offset claims durability, as a follower's does: a leader whose latest
                # voter set has this node (an addition not in our log yet) counts it. Ask after the fsync.
                return state.deadline_ms
            # An observer asks a random voter who leads (the answer carries the leader).
            voter = self.voters[self._random.next_int(len(self.voters))]
            self._send(voter, self._fetch_request(0))
        return state.deadline_ms

    def on_log_flushed(self, now_ms: int, offset: int, ready_seq: int) -> None:
        """The driver fsynced the log: every batch appended by Readies up to ``ready_seq``
        (inclusive) and below ``offset`` is durable."""
        cap = offset
        kept: list[tuple[int, int]] = []
        for seq, truncated in self._unflushed_truncations:
            if seq > ready_seq:
                if not self._faults.flush_covers_later_truncation:
                    cap = min(cap, truncated)  # a later truncation: the flush did not cover its successors
                kept.append((seq, truncated))
        self._unflushed_truncations = kept
        cap = min(cap, self.log.end_offset)
        if cap <= self.durable_end_offset:
            return
        self.durable_end_offset = cap
        state = self.state
        if isinstance(state, LeaderState):
            self._maybe_advance_high_watermark(now_ms, state)
        elif isinstance(state, FollowerState):
            self._maybe_send_fetch(now_ms, state)

    @property
    def snapshot(self) -> SnapshotImage | None:
        """The latest snapshot (None before the first)."""
        return self.snapshots[-1] if self.snapshots else None

    def on_snapshot_created(self, now_ms: int, image: SnapshotImage) -> None:
        """The state machine wrote a snapshot of the committed prefix below ``image.end_offset``.
        The core keeps the last ``snapshots_retained`` ones and drops the batches below the
        oldest of them from memory; ``log.start_offset`` says where the driver may delete."""
        del now_ms
        assert image.end_offset <= self.high_watermark, "a snapshot may only cover committed batches"
        latest = self.snapshot
        if latest is not None and image.end_offset <= latest.end_offset:
            return
        before = self.log.entry_before(image.end_offset)
        assert before is not None and before.epoch == image.epoch, "snapshot epoch differs from the log's"
        self.snapshots.append(image)
        del self.snapshots[: -self.config.snapshots_retained]
        oldest = self.snapshots[0]
        if oldest.end_offset > self.log.start_offset:
            self.log.trim_prefix(oldest.end_offset, oldest.epoch)
            self.voter_history.trim_prefix(oldest.end_offset)

    def on_snapshot_installed(self, now_ms: int, image: SnapshotImage) -> None:
        """The driver performed the Ready's ``install_snapshot``: wrote it and rebuilt its state
        machine from it. The fetch timer restarts now. The last chunk's answer restarted it when
        it arrived, but loading a big image takes the driver seconds (ten million partitions:
        ~23 s) -- longer than the fetch timeout, and the wait was this node's own work, not the
        leader's silence. Without the restart the follower would give up on a live leader as
        soon as it polls, and, prospective, ignore the leader's Fetch answers until the next
        BeginQuorumEpoch. (Kafka loads a fetched snapshot off its Raft thread, so its timer
        never sees the load.) Only delays a real failure's detection by the load's length."""
        state, latest = self.state, self.snapshot
        if isinstance(state, FollowerState) and latest is not None and latest.end_offset == image.end_offset:
            restarted = now_ms + self.config.fetch_timeout_ms + state.fetch_jitter_ms
            state.fetch_deadline_ms = max(state.fetch_deadline_ms, restarted)

    # -- voter changes (KIP-853) -------------------------------------------------------------------
    @staticmethod
    def _check_directory_id(directory_id: bytes) -> None:
        """A directory id is a Kafka Uuid (16 bytes) or absent; gRPC's bytes field can carry any
        length, which Kafka's wire format cannot: refuse it by name before anything is appended."""
        if directory_id and len(directory_id) != DIRECTORY_ID_BYTES:
            raise VoterChangeError(
                INVALID_REQUEST,
                f"voter_directory_id must be empty or {DIRECTORY_ID_BYTES} bytes (a Kafka Uuid), "
                f"got {len(directory_id)} bytes",
            )

    def add_voter(self, now_ms: int, voter: VoterNode) -> Entry:
        """AddRaftVoter on the leader: append a VotersRecord with ``voter`` added, in force at
        once; the change is done when that batch commits (on a majority of the new set). Raises
        NotLeaderError, or VoterChangeError with Kafka's AddVoterHandler checks in its order."""
        self._check_directory_id(voter.directory_id)
        state = self._change_allowed()
        voters = self.voter_set
        if voters.node(voter.voter_id) is not None:
            raise VoterChangeError(
                errors_pb2.DUPLICATE_VOTER, f"voter {voter.voter_id} is already in the voter set {list(voters.ids)}"
            )
        observer = state.observers.get(voter.voter_id)
        fetch_timeout = self.config.fetch_timeout_ms
        if observer is not None and voter.directory_id and observer.directory_id not in (b"", voter.directory_id):
            raise VoterChangeError(
                REQUEST_TIMED_OUT,
                f"node {voter.voter_id} fetches with directory id {format_directory_id(observer.directory_id)}, "
                f"not {format_directory_id(voter.directory_id)}: another replica",
            )
        if observer is not None and not voter.directory_id and observer.directory_id:
            voter = dataclasses.replace(voter, directory_id=observer.directory_id)  # the replica that caught up
        if (
            observer is None
            or now_ms - observer.last_fetch_ms >= fetch_timeout
            or observer.last_caught_up_ms < 0
            or now_ms - observer.last_caught_up_ms >= fetch_timeout
        ):
            # Kafka waits for neither: a voter that cannot keep up would hold the high watermark back.
            raise VoterChangeError(
                REQUEST_TIMED_OUT,
                f"node {voter.voter_id} is not a caught-up observer: it must have fetched up to this "
                f"leader's log end within the last {fetch_timeout} ms",
            )
        return self._append_voters(now_ms, state, voters.with_voter(voter))

    def remove_voter(self, now_ms: int, voter_id: int, directory_id: bytes = b"") -> Entry:
        """RemoveRaftVoter on the leader: append a VotersRecord without that voter. A leader that
        removes itself leads until the change commits, counting only the new set, then resigns."""
        self._check_directory_id(directory_id)
        state = self._change_allowed()
        voters = self.voter_set
        smaller = voters.without_voter(voter_id, directory_id)
        if smaller is None:
            known = [(n.voter_id, format_directory_id(n.directory_id) or "-") for n in voters.nodes]
            rule = "the last voter cannot be removed" if voters.node(voter_id) and len(voters.ids) == 1 else ""
            raise VoterChangeError(
                errors_pb2.VOTER_NOT_FOUND,
                rule
                or f"no voter with id {voter_id} and directory id {format_directory_id(directory_id) or '(any)'} "
                f"in {known}",
            )
        return self._append_voters(now_ms, state, smaller)

    def update_voter(self, now_ms: int, voter: VoterNode) -> Entry:
        """UpdateRaftVoter on the leader: a voter's new listeners (it moved to another address),
        as a VotersRecord with the same voters. The same one-change-at-a-time checks apply."""
        self._check_directory_id(voter.directory_id)
        state = self._change_allowed()
        voters = self.voter_set
        current = voters.node(voter.voter_id)
        if current is None or not current.matches(voter.voter_id, voter.directory_id):
            raise VoterChangeError(
                errors_pb2.VOTER_NOT_FOUND,
                f"no voter with id {voter.voter_id} and directory id "
                f"{format_directory_id(voter.directory_id) or '(any)'} in {list(voters.ids)}",
            )
        moved = dataclasses.replace(current, endpoints=voter.endpoints)
        updated = VoterSet(tuple(moved if n.voter_id == voter.voter_id else n for n in voters.nodes))
        return self._append_voters(now_ms, state, updated)

    def _change_allowed(self) -> LeaderState:
        state = self.state
        if not isinstance(state, LeaderState):
            raise NotLeaderError(state.leader_id if state.role is not Role.RESIGNED else NO_LEADER, state.epoch)
        if self.high_watermark <= state.epoch_start_offset:
            # Its LeaderChangeRecord is not committed: a change of an earlier leader may still be
            # pending on the other voters (Ongaro's fix to single-server changes).
            raise VoterChangeError(REQUEST_TIMED_OUT, "the leader has not committed its epoch yet")
        pending = self.voter_history.latest_offset()
        if pending >= self.high_watermark and not self._faults.voter_change_while_pending:
            raise VoterChangeError(
                REQUEST_TIMED_OUT,
                f"the last voter change (offset {pending}) is not committed yet (high watermark {self.high_watermark})",
            )
        return state

    def _append_voters(self, now_ms: int, state: LeaderState, voters: VoterSet) -> Entry:
        base = self.log.end_offset
        record = records_pb2.MetadataRecord(voters=voters.to_record()).SerializeToString()
        data = encode_batch(base, state.epoch, [record], now_ms + self.config.wall_clock_offset_ms, control=True)
        entry = Entry(base, state.epoch, base + 1, data)
        self._append(now_ms, entry)
        self._release_parked(now_ms)
        return entry

    def _voters_changed(self, now_ms: int) -> None:
        """The voter set in force changed (a VotersRecord appended, truncated away, or a snapshot
        installed): a leader moves fetchers between its voter and observer tables and recounts
        the high watermark; a follower becomes an observer or the reverse."""
        latest = self.voter_history.latest()
        self.voters = latest.ids
        self._voter_nodes = {n.voter_id: n for n in latest.nodes}
        state = self.state
        if isinstance(state, LeaderState):
            for voter in self.voters:
                if voter != self.node_id and voter not in state.replicas:
                    state.replicas[voter] = state.observers.pop(voter, ReplicaState(last_fetch_ms=now_ms))
            for replica_id in [r for r in state.replicas if r not in self.voters]:
                state.observers[replica_id] = state.replicas.pop(replica_id)
            self._maybe_advance_high_watermark(now_ms, state)
        else:
            self._refresh_role()

    def _refresh_role(self) -> None:
        """A follower becomes an observer when it stops being electable, and the reverse."""
        state = self.state
        if isinstance(state, FollowerState):
            role = Role.FOLLOWER if self.electable else Role.OBSERVER
            if state.role is not role:
                state.role = role
                self._soft = SoftState(role, state.epoch, state.leader_id)
                self._ready.soft_state = self._soft

    def transfer_leadership(self, now_ms: int, to: int) -> None:
        """Resign in favour of ``to`` (KIP-595's EndQuorumEpoch with preferred successors)."""
        assert to in self.voters and to != self.node_id, f"cannot transfer leadership to {to}"
        state = self.state
        if not isinstance(state, LeaderState):
            raise NotLeaderError(state.leader_id, state.epoch)
        others = [v for v in self._ranked_successors(state) if v != to]
        self._become_resigned(now_ms, (to, *others))

    def resign(self, now_ms: int) -> None:
        """Graceful shutdown of a leader: hand over to the voters with the longest logs."""
        state = self.state
        if isinstance(state, LeaderState):
            self._become_resigned(now_ms, self._ranked_successors(state))

    def take_ready(self) -> Ready:
        """Everything to do since the last call; the driver performs it in field order."""
        ready = self._ready
        ready.seq = self._next_seq
        self._next_seq += 1
        self._ready = Ready()
        return ready

    # -- outputs -----------------------------------------------------------------------------------
    def _send(self, destination: int, message: RaftMessage) -> int:
        correlation_id = self._next_correlation_id
        self._next_correlation_id += 1
        self._ready.messages.append(Envelope(self.node_id, destination, correlation_id, message))
        return correlation_id

    def _reply(self, request: Envelope, message: RaftMessage) -> None:
        self._ready.messages.append(Envelope(self.node_id, request.source, request.correlation_id, message))

    def _persist(self) -> None:
        state = self.state
        # While the fence is open every write says so: a restart before it closes fences again.
        voted = VOTE_FENCED if self._fence is not None else state.voted_id
        current = QuorumStateData(state.epoch, state.leader_id, voted)
        if self._faults.vote_not_persisted and (current.epoch, current.leader_id) == (
            self._persisted.epoch,
            self._persisted.leader_id,
        ):
            return  # planted bug: a new vote alone is not written
        if current != self._persisted:
            self._persisted = current
            self._ready.quorum_state = current

    def _append(self, now_ms: int, entry: Entry) -> None:
        self.log.append(entry)
        self._ready.append.append(entry)
        self._ready.flush = True
        found = voters_in_batch(entry.data)
        if found is not None:
            self.voter_history.add(entry.base_offset, found)
            self._voters_changed(now_ms)

    def _truncate(self, now_ms: int, offset: int, reason: str) -> None:
        if offset < self.high_watermark:
            # Committed data is never truncated (DESIGN.md §9.11; Kafka throws here too): a
            # divergence answer below our high watermark is a bug or a forged answer, and
            # obeying it could lose acknowledged records. Stop instead.
            raise CommittedTruncationError(self.node_id, offset, self.high_watermark, reason)
        end = self.log.truncate_to(offset)
        if self.damaged:
            self.damaged = {b for b in self.damaged if b < end}  # uncommitted: replaced by the leader's
            self.damaged_epochs = {b: e for b, e in self.damaged_epochs.items() if b < end}
        if self.voter_history.truncate_to(end):
            self._voters_changed(now_ms)  # the change was in the removed tail: the set before it is back
        ready = self._ready
        ready.repair = [e for e in ready.repair if e.next_offset <= end]  # the driver repairs, then truncates
        kept = [e for e in ready.append if e.next_offset <= end]
        if len(kept) == len(ready.append) and ready.append:
            return  # nothing this Ready appends is removed: the disk has not seen the cut part
        ready.append = kept
        if not kept:
            ready.truncate_to = end if ready.truncate_to is None else min(ready.truncate_to, end)
        self.durable_end_offset = min(self.durable_end_offset, end)
        self._unflushed_truncations.append((self._next_seq, end))

    def _emit_committed(self) -> None:
        if self.state_missing:
            return  # nothing to apply onto until the leader's snapshot is installed
        # A damaged batch is not applied (its bytes are unknown) until it is repaired.
        end = min(self.high_watermark, self.vouched_end_offset)
        if end > self.applied_offset:
            self._ready.committed.extend(self.log.slice(max(self.applied_offset, self.log.start_offset), end))
            self.applied_offset = end

    def _set_high_watermark(self, value: int) -> None:
        self._committed_floor = max(self._committed_floor, value)
        if self.damaged and value < self.log.end_offset:
            covering = self.log.entry_covering(value)
            if covering is not None and covering.base_offset in self.damaged:
                # Inside a damaged range of ours (a boundary only the other replicas know yet):
                # the watermark stays at its base until the range is repaired that far.
                value = covering.base_offset
        if value > self.high_watermark:
            pending = self.voter_history.latest_offset() >= self.high_watermark
            self.high_watermark = value
            # The voter set in force when the HW moved (a checker compares the holders with it: a
            # voter change appended later in the same step must not be mistaken for it).
            self.voters_at_high_watermark = self.voters
            self._emit_committed()
            if pending and self.voter_history.latest_offset() < value:
                self._refresh_role()  # a node removed by the change stops being electable now

    # -- timers ------------------------------------------------------------------------------------
    def _election_timeout(self) -> int:
        base = self.config.election_timeout_ms
        return base + self._random.next_int(base)

    def _fetch_jitter(self) -> int:
        """A follower's addition to the fetch timeout: up to a tenth of it (200 ms of Kafka's
        default 2 s). Kafka has none, and its followers, reset by the same leader answers, time
        out within milliseconds of each other when the leader hangs: both win the pre-vote (each
        is past the timeout when the other asks), both stand, and the split vote costs an
        election backoff (bench failover --fault pause measured 3.5-3.9 s against 2.3 s)."""
        return self._random.next_int(max(1, self.config.fetch_timeout_ms // 10))

    def _backoff(self) -> int:
        return 1 + self._random.next_int(self.config.election_backoff_max_ms)

    def _poll_leader(self, now_ms: int, state: LeaderState) -> int:
        deadline = NEVER
        if state.parked:
            for replica_id, parked in list(state.parked.items()):
                if now_ms >= parked.deadline_ms:
                    del state.parked[replica_id]
                    self._answer_fetch(now_ms, state, parked.envelope)
                else:
                    deadline = min(deadline, parked.deadline_ms)
        fetch_timeout = self.config.fetch_timeout_ms
        replicas = state.replicas
        # Check quorum: resign if a majority of voters has not fetched within 1.5 x fetch timeout.
        heard = [now_ms] if self.is_voter else []
        silent: list[int] = []
        quiet_at = NEVER  # when the next voter would become silent
        for voter, replica in replicas.items():
            last = replica.last_fetch_ms
            heard.append(last)
            if not replica.acknowledged or now_ms - last >= fetch_timeout:
                silent.append(voter)
            elif last + fetch_timeout < quiet_at:
                quiet_at = last + fetch_timeout
        check_deadline = majority_time(heard, len(self.voters)) + (3 * fetch_timeout) // 2
        if now_ms >= check_deadline:
            self._become_resigned(now_ms, self._ranked_successors(state))
            return self.poll(now_ms)
        deadline = min(deadline, check_deadline)
        # BeginQuorumEpoch again to voters that never acknowledged or stopped fetching: a voter
        # that gave up on us (prospective) learns that we are alive from us, not from hearsay.
        if silent:
            if now_ms >= state.begin_retry_ms:
                self._send_begin_quorum_epoch(now_ms, state, silent)
            deadline = min(deadline, state.begin_retry_ms)
        if self.damaged:
            deadline = min(deadline, self._drive_repair(now_ms, state))
            if self.state is not state:
                return self.poll(now_ms)
        return min(deadline, quiet_at)

    def _poll_follower(self, now_ms: int, state: FollowerState) -> int:
        if state.in_flight >= 0 and now_ms >= state.in_flight_deadline_ms:
            state.in_flight = -1  # lost: ask again
        if now_ms >= state.fetch_deadline_ms:
            if self.electable:
                self._become_prospective(now_ms)
            else:
                self._become_unattached(now_ms, state.epoch)
            return self.poll(now_ms)
        self._maybe_send_fetch(now_ms, state)
        deadline = state.fetch_deadline_ms
        if state.in_flight >= 0:
            deadline = min(deadline, state.in_flight_deadline_ms)
        elif state.retry_ms > now_ms:
            deadline = min(deadline, state.retry_ms)
        return deadline

    # -- transitions -------------------------------------------------------------------------------
    def _transition(self, now_ms: int, new: EpochState) -> None:
        old = self.state
        check_transition(old, new, self.electable)
        if isinstance(old, LeaderState) and old.parked:
            parked = list(old.parked.values())
            old.parked.clear()
            self.state = new
            for p in parked:
                self._reply(p.envelope, self._fetch_error(NOT_LEADER))
        self.state = new
        self._persist()
        soft = SoftState(new.role, new.epoch, new.leader_id)
        if soft != self._soft:
            self._soft = soft
            self._ready.soft_state = soft

    def _become_unattached(self, now_ms: int, epoch: int) -> None:
        deadline = now_ms + self._election_timeout() if self.electable else now_ms
        # In the same epoch (an observer looking for its leader, a removed leader stepping down)
        # the vote this node cast in it stays: a second one in one epoch could elect two leaders.
        voted = self.state.voted_id if epoch == self.state.epoch else NO_VOTE
        self._transition(now_ms, UnattachedState(Role.UNATTACHED, epoch, NO_LEADER, voted, deadline_ms=deadline))

    def _become_follower(self, now_ms: int, epoch: int, leader_id: int, *, heard_from_leader: bool = True) -> None:
        old = self.state
        self._state_probe = StateProbe()  # a leader: what the voters said without one is stale
        self._no_leader_since = None
        voted = old.voted_id if epoch == old.epoch else NO_VOTE
        new = self._follower_state(now_ms, epoch, leader_id, voted)
        new.last_fetch_ok_ms = now_ms if heard_from_leader else -NEVER
        self._transition(now_ms, new)
        self._maybe_send_fetch(now_ms, new)

    def _follower_state(self, now_ms: int, epoch: int, leader_id: int, voted: int) -> FollowerState:
        """Following ``leader_id`` (observing, for a non-voter), its fetch timer started now."""
        jitter = self._fetch_jitter()
        return FollowerState(
            Role.FOLLOWER if self.electable else Role.OBSERVER,
            epoch,
            leader_id,
            voted,
            fetch_deadline_ms=now_ms + self.config.fetch_timeout_ms + jitter,
            fetch_jitter_ms=jitter,
        )

    def _become_prospective(self, now_ms: int) -> None:
        """Start a pre-vote round (KIP-996): no epoch bump, nothing persisted."""
        old = self.state
        if self._fence is not None or self.state_missing or self.damaged_epochs:
            # Behind the vote fence: a candidacy is a vote for itself, in an epoch it may have
            # voted in already. Without a state below its log it could not lead (nothing to
            # serve a lagging follower, no image). With a damaged slot across an epoch change it
            # could not tell a fetcher where an epoch ends inside it (Validation.DIVERGING), nor
            # which peer's copy is its own. Stay, and look again after another timeout.
            later = now_ms + self._election_timeout()
            if self.state_missing and self.node_id in self.voters:
                self._probe_state(now_ms)
            if isinstance(old, FollowerState):
                old.fetch_deadline_ms = later
                old.leader_alive = False  # its pre-vote goes to whoever stands instead
            elif isinstance(old, ResignedState):
                old.election_deadline_ms = later
            elif isinstance(old, (UnattachedState, ElectionState)):
                old.deadline_ms = later
            return
        tally = VoteTally(self.voters)
        tally.record(self.node_id, True)
        new = ElectionState(
            Role.PROSPECTIVE,
            old.epoch,
            old.leader_id,
            old.voted_id,
            tally=tally,
            deadline_ms=now_ms + self._election_timeout(),
        )
        self._transition(now_ms, new)
        if tally.result() is VoteResult.WON:
            self._become_candidate(now_ms)
            return
        request = self._vote_request(old.epoch + 1, pre_vote=True)
        for voter in self.voters:
            if voter != self.node_id:
                new.requests.add(self._send(voter, self._addressed(request, voter)))

    def _become_candidate(self, now_ms: int) -> None:
        epoch = self.state.epoch + 1
        tally = VoteTally(self.voters)
        tally.record(self.node_id, True)
        new = ElectionState(
            Role.CANDIDATE, epoch, NO_LEADER, self.node_id, tally=tally, deadline_ms=now_ms + self._election_timeout()
        )
        self._transition(now_ms, new)  # persists the vote for itself before any request leaves
        if tally.result() is VoteResult.WON:
            self._become_leader(now_ms)
            return
        request = self._vote_request(epoch, pre_vote=False)
        for voter in self.voters:
            if voter != self.node_id:
                new.requests.add(self._send(voter, self._addressed(request, voter)))

    def _become_leader(self, now_ms: int) -> None:
        old = self.state
        assert isinstance(old, ElectionState)
        epoch = old.epoch
        granting = tuple(sorted(old.tally.granted))
        replicas = {v: ReplicaState(last_fetch_ms=now_ms) for v in self.voters if v != self.node_id}
        start = self.log.end_offset
        new = LeaderState(
            Role.LEADER,
            epoch,
            self.node_id,
            old.voted_id,
            epoch_start_offset=start,
            granting_voters=granting,
            replicas=replicas,
        )
        self._transition(now_ms, new)
        # KIP-595: the first batch of every epoch is the leader's LeaderChangeRecord; the high
        # watermark only moves once it is committed (so never onto an older epoch's entry alone).
        change = records_pb2.LeaderChangeRecord(
            leader_id=self.node_id,
            leader_epoch=epoch,
            voters=[records_pb2.Voter(voter_id=v) for v in self.voters],
            granting_voters=[records_pb2.Voter(voter_id=v) for v in granting],
        )
        record = records_pb2.MetadataRecord(leader_change=change).SerializeToString()
        data = encode_batch(start, epoch, [record], now_ms + self.config.wall_clock_offset_ms, control=True)
        self._append(now_ms, Entry(start, epoch, start + 1, data))
        self._send_begin_quorum_epoch(now_ms, new, list(replicas))
        self._maybe_advance_high_watermark(now_ms, new)

    def _become_resigned(self, now_ms: int, preferred: tuple[int, ...]) -> None:
        old = self.state
        new = ResignedState(
            Role.RESIGNED,
            old.epoch,
            old.leader_id,
            old.voted_id,
            preferred_successors=preferred,
            election_deadline_ms=now_ms + self._election_timeout(),
        )
        self._transition(now_ms, new)
        self._send_end_quorum_epoch(now_ms, new, {v for v in self.voters if v != self.node_id})

    def _ranked_successors(self, state: LeaderState) -> tuple[int, ...]:
        ranked = sorted(state.replicas.items(), key=lambda item: (-item[1].end_offset, item[0]))
        return tuple(v for v, _ in ranked)

    def _observe_epoch(self, now_ms: int, epoch: int, leader_id: int) -> bool:
        """The shared epoch check: learn a higher epoch (and its leader) from any message, or
        the leader of our own epoch when we do not know it. True if the role changed."""
        state = self.state
        # Any node but us can lead: the leader may be a voter added by a change this node has not
        # replicated yet (KIP-853). Our own id named as leader of an epoch we do not lead teaches
        # the epoch only.
        known_leader = leader_id >= 0 and leader_id != self.node_id
        if epoch > state.epoch:
            if known_leader:
                self._become_follower(now_ms, epoch, leader_id, heard_from_leader=False)
            else:
                self._become_unattached(now_ms, epoch)
            return True
        if (
            epoch == state.epoch
            and known_leader
            and state.leader_id == NO_LEADER
            and state.role in (Role.UNATTACHED, Role.CANDIDATE)
        ):
            # Second-hand news: follow, but do not defend this leader against pre-votes until it
            # answers a fetch. A prospective ignores such news (it has just given up on that
            # leader; following it again on hearsay would livelock): the leader's periodic
            # BeginQuorumEpoch brings it back if the leader is alive.
            self._become_follower(now_ms, epoch, leader_id, heard_from_leader=False)
            return True
        return False

    def _voter_only_error(self, remote_id: int, epoch: int) -> errors_pb2.ErrorCode.ValueType:
        """Kafka's validateVoterOnlyRequest, for Vote, BeginQuorumEpoch and EndQuorumEpoch, checked
        before the request's epoch is acted on: a stale sender is fenced, and a sender that is no
        node moves no epoch and elects no one. Membership is not checked (KIP-853): the voter set
        changes, and the sender may know a newer one than this node -- a candidate counts only
        its own voters' grants, and every node votes at most once per epoch whatever its role."""
        if epoch < self.state.epoch:
            return FENCED
        if remote_id < 0 or remote_id == self.node_id:
            return INVALID_REQUEST
        return NONE

    def _leader_only_error(self, epoch: int) -> errors_pb2.ErrorCode.ValueType:
        """Kafka's validateLeaderOnlyRequest, for Fetch and FetchSnapshot. A fetcher's epoch newer
        than ours is UNKNOWN_LEADER_EPOCH and nothing more: only a voter's Vote or a leader's
        BeginQuorumEpoch/EndQuorumEpoch moves this node's epoch, never a fetcher's word."""
        state = self.state
        if epoch < state.epoch:
            return FENCED
        if epoch > state.epoch:
            return UNKNOWN_EPOCH
        if not isinstance(state, LeaderState):
            return NOT_LEADER
        return NONE

    # -- Vote ------------------------------------------------------------------------------------------
    def _vote_request(self, candidate_epoch: int, *, pre_vote: bool) -> raft_pb2.VoteRequest:
        return raft_pb2.VoteRequest(
            cluster_id=self.config.cluster_id,
            candidate_id=self.node_id,
            candidate_epoch=candidate_epoch,
            last_offset_epoch=self.log.last_epoch,
            last_offset=self.log.end_offset,
            pre_vote=pre_vote,
        )

    def _addressed(self, request: raft_pb2.VoteRequest, voter: int) -> raft_pb2.VoteRequest:
        """The request for ``voter``, naming the directory id our voter set has for it (KIP-853)."""
        node = self.voter_set.node(voter)
        if node is None or not node.directory_id:
            return request
        addressed = raft_pb2.VoteRequest()
        addressed.CopyFrom(request)
        addressed.voter_directory_id = node.directory_id
        return addressed

    def _log_is_up_to_date(self, request: raft_pb2.VoteRequest) -> bool:
        """Raft §5.4.1: grant only to a log at least as up to date (last epoch, then length)."""
        log = self.log
        return (request.last_offset_epoch, request.last_offset) >= (log.last_epoch, log.end_offset)

    def _handle_vote_request(self, now_ms: int, envelope: Envelope, request: raft_pb2.VoteRequest) -> None:
        if request.cluster_id != self.config.cluster_id:
            self._reply(envelope, self._vote_response(request, False, BAD_CLUSTER))
            return
        # A pre-vote proposes candidate_epoch without taking it (KIP-996): the prospective is still
        # in candidate_epoch - 1, which is real (persisted) -- that is what is fenced and learnt,
        # never the proposed epoch. Observers answer INCONSISTENT_VOTER_SET: they take no part in
        # elections and learn epochs from the leader's answers.
        sender_epoch = request.candidate_epoch - 1 if request.pre_vote else request.candidate_epoch
        error = self._voter_only_error(request.candidate_id, sender_epoch)
        own = self.config.directory_id
        if error == NONE and request.voter_directory_id and own and request.voter_directory_id != own:
            # Kafka's isValidVoterKey: the candidate's voter is a replica whose disk this node no
            # longer has (a wiped disk may have forgotten its vote): not this node's to grant.
            error = errors_pb2.INVALID_VOTER_KEY
        if error != NONE:
            self._reply(envelope, self._vote_response(request, False, error))
            return
        if sender_epoch > self.state.epoch:
            self._become_unattached(now_ms, sender_epoch)
        if request.pre_vote:
            granted = self._can_grant_pre_vote(now_ms, request)
        else:
            granted = self._maybe_grant_vote(now_ms, request)
        self._reply(envelope, self._vote_response(request, granted, NONE))

    def _vote_response(self, request: raft_pb2.VoteRequest, granted: bool, error: int) -> raft_pb2.VoteResponse:
        state = self.state
        return raft_pb2.VoteResponse(
            error_code=error,  # type: ignore[arg-type]
            leader_id=state.leader_id if state.role is not Role.RESIGNED else NO_LEADER,
            leader_epoch=state.epoch,
            vote_granted=granted,
            pre_vote=request.pre_vote,
            voter_id=self.node_id,
        )

    def _can_grant_pre_vote(self, now_ms: int, request: raft_pb2.VoteRequest) -> bool:
        state = self.state
        if self.state_missing:
            return False  # the voter set in force may be in the missing snapshot
        if request.candidate_epoch <= state.epoch:
            return False  # the prospective is behind: its candidacy would be fenced anyway
        if state.role is Role.LEADER:
            return False
        if (
            isinstance(state, FollowerState)
            and state.leader_alive
            and now_ms - state.last_fetch_ok_ms < self.config.fetch_timeout_ms
        ):
            return False  # KIP-996: a follower that hears its leader rejects pre-votes
        return self._log_is_up_to_date(request)

    def _maybe_grant_vote(self, now_ms: int, request: raft_pb2.VoteRequest) -> bool:
        state = self.state
        candidate = request.candidate_id
        if self._fence is not None:
            return False  # it cannot prove it did not vote in this epoch already
        if self.state_missing:
            return False  # the voter set in force may be in the missing snapshot: no vouching
        if request.candidate_epoch != state.epoch:
            return False
        if state.role is Role.FOLLOWER:
            return state.voted_id == candidate  # a duplicate of the request we granted
        if state.role not in (Role.UNATTACHED, Role.PROSPECTIVE) or state.leader_id != NO_LEADER:
            return False
        if state.voted_id not in (NO_VOTE, candidate) and not self._faults.double_vote:
            return False  # one vote per epoch
        if not self._log_is_up_to_date(request):
            return False
        if state.voted_id != candidate:
            state.voted_id = candidate
            self._persist()  # the vote is durable before the response leaves (Ready order)
            if isinstance(state, UnattachedState):
                state.deadline_ms = now_ms + self._election_timeout()
        return True

    def _handle_vote_response(self, now_ms: int, envelope: Envelope, response: raft_pb2.VoteResponse) -> None:
        if self._observe_epoch(now_ms, response.leader_epoch, response.leader_id):
            return
        state = self.state
        if not isinstance(state, ElectionState) or envelope.correlation_id not in state.requests:
            return  # an answer to an older round
        if response.error_code != NONE:
            return
        expect = Role.PROSPECTIVE if response.pre_vote else Role.CANDIDATE
        if state.role is not expect:
            return
        result = state.tally.record(envelope.source, response.vote_granted)
        if result is VoteResult.WON:
            if state.role is Role.PROSPECTIVE:
                self._become_candidate(now_ms)
            else:
                self._become_leader(now_ms)
        elif result is VoteResult.LOST and not state.lost:
            state.lost = True
            state.deadline_ms = now_ms + self._backoff()

    # -- BeginQuorumEpoch / EndQuorumEpoch --------------------------------------------------------------
    def _send_begin_quorum_epoch(self, now_ms: int, state: LeaderState, voters: Iterable[int]) -> None:
        request = raft_pb2.BeginQuorumEpochRequest(
            cluster_id=self.config.cluster_id, leader_id=self.node_id, leader_epoch=state.epoch
        )
        for voter in voters:
            self._send(voter, request)
        state.begin_retry_ms = now_ms + self.config.request_timeout_ms

    def _handle_begin_quorum_epoch_request(
        self, now_ms: int, envelope: Envelope, request: raft_pb2.BeginQuorumEpochRequest
    ) -> None:
        state = self.state
        if request.cluster_id != self.config.cluster_id:
            error = BAD_CLUSTER
        else:
            error = self._voter_only_error(request.leader_id, request.leader_epoch)
        if error != NONE:
            pass  # refused: nothing moves
        elif request.leader_epoch > state.epoch or state.role in (
            Role.UNATTACHED,
            Role.PROSPECTIVE,
            Role.CANDIDATE,
        ):
            self._become_follower(now_ms, request.leader_epoch, request.leader_id)
        elif isinstance(state, FollowerState) and state.leader_id == request.leader_id:
            state.leader_alive = True
        else:
            error = FENCED  # a second leader in our epoch: refuse it (invariant 1 makes this unreachable)
        state = self.state
        self._reply(
            envelope,
            raft_pb2.BeginQuorumEpochResponse(
                error_code=error,
                leader_id=state.leader_id,
                leader_epoch=state.epoch,
                voter_id=self.node_id,
            ),
        )

    def _handle_begin_quorum_epoch_response(
        self, now_ms: int, envelope: Envelope, response: raft_pb2.BeginQuorumEpochResponse
    ) -> None:
        if self._observe_epoch(now_ms, response.leader_epoch, response.leader_id):
            return
        state = self.state
        if isinstance(state, LeaderState) and response.error_code == NONE and response.leader_epoch == state.epoch:
            replica = state.replicas.get(envelope.source)
            if replica is not None:
                replica.acknowledged = True

    def _send_end_quorum_epoch(self, now_ms: int, state: ResignedState, voters: Iterable[int]) -> None:
        request = raft_pb2.EndQuorumEpochRequest(
            cluster_id=self.config.cluster_id,
            leader_id=self.node_id,
            leader_epoch=state.epoch,
            preferred_successors=list(state.preferred_successors),
        )
        for voter in voters:
            self._send(voter, request)
            state.unacknowledged.add(voter)
        state.retry_ms = now_ms + self.config.request_timeout_ms

    def _successor_delay_ms(self, position: int) -> int:
        """Kafka's strict exponential backoff by rank: the best successor starts at once."""
        if position == 0:
            return 0
        return min(self.config.election_backoff_max_ms, self.config.retry_backoff_ms << (position - 1))

    def _handle_end_quorum_epoch_request(
        self, now_ms: int, envelope: Envelope, request: raft_pb2.EndQuorumEpochRequest
    ) -> None:
        if request.cluster_id != self.config.cluster_id:
            error = BAD_CLUSTER
        else:
            error = self._voter_only_error(request.leader_id, request.leader_epoch)
        if error == NONE:
            if request.leader_epoch > self.state.epoch:
                self._become_follower(now_ms, request.leader_epoch, request.leader_id)
            state = self.state
            if isinstance(state, FollowerState) and state.leader_id == request.leader_id:
                state.leader_alive = False
                successors = list(request.preferred_successors)
                if self.node_id in successors:
                    delay = self._successor_delay_ms(successors.index(self.node_id))
                else:
                    delay = self._election_timeout()
                state.fetch_deadline_ms = min(state.fetch_deadline_ms, now_ms + delay)
        state = self.state
        self._reply(
            envelope,
            raft_pb2.EndQuorumEpochResponse(
                error_code=error,
                leader_id=state.leader_id,
                leader_epoch=state.epoch,
                voter_id=self.node_id,
            ),
        )

    def _handle_end_quorum_epoch_response(
        self, now_ms: int, envelope: Envelope, response: raft_pb2.EndQuorumEpochResponse
    ) -> None:
        if self._observe_epoch(now_ms, response.leader_epoch, response.leader_id):
            return
        state = self.state
        if isinstance(state, ResignedState):
            state.unacknowledged.discard(envelope.source)

    # -- Fetch (leader side) ----------------------------------------------------------------------------
    def _fetch_error(self, error: int) -> raft_pb2.FetchResponse:
        state = self.state
        return raft_pb2.FetchResponse(
            error_code=error,  # type: ignore[arg-type]
            leader_id=state.leader_id if state.role is not Role.RESIGNED else NO_LEADER,
            leader_epoch=state.epoch,
            high_watermark=self.high_watermark,
            log_start_offset=self.log.start_offset,
            read_barrier=state.read_barrier if isinstance(state, LeaderState) else 0,
        )

    def _handle_fetch_request(self, now_ms: int, envelope: Envelope, request: raft_pb2.FetchRequest) -> None:
        if request.cluster_id != self.config.cluster_id:
            self._reply(envelope, self._fetch_error(BAD_CLUSTER))
            return
        if request.replica_id < 0 or request.replica_id == self.node_id:
            self._reply(envelope, self._fetch_error(INVALID_REQUEST))
            return
        current = self.state
        # Without the state below our log, a leader is ours only once it answered us: a restarted
        # former leader (resigned, or without its state too) asks from the same epoch.
        heard = isinstance(current, FollowerState) and current.leader_alive and current.last_fetch_ok_ms > -NEVER
        from_our_leader = (
            isinstance(current, FollowerState)
            and request.replica_id == current.leader_id
            and request.replica_epoch == current.epoch
            and (heard or not self.state_missing)
        )
        if self.state_missing and not from_our_leader:
            # Without the state below our log: tell the asker so (the error and our log's start as
            # snapshot_id, the leader we follow if it answers us), so that a voter in the same state
            # can tell when no leader can ever be elected (state_probe.py). Behind the vote fence
            # with its error: our epoch is no witness for a fenced asker.
            response = self._fetch_error(UNKNOWN_EPOCH if self._fence is not None else CORRUPT)
            response.leader_id = current.leader_id if heard else NO_LEADER
            response.snapshot_id.end_offset = self.log.start_offset
            response.snapshot_id.epoch = self.log.start_epoch
            self._reply(envelope, response)
            return
        if self._fence is not None:
            # Behind the vote fence this node's epoch may be below one it persisted before: it is
            # no witness for another fenced node, and no leader (it cannot stand).
            self._reply(envelope, self._fetch_error(UNKNOWN_EPOCH))
            return
        if from_our_leader:
            # Our own leader never fetches: it asks for a copy of a batch of its log it found damaged.
            self._answer_repair_request(envelope, request)
            return
        error = self._leader_only_error(request.replica_epoch)
        if error == FENCED and self._faults.accept_stale_fetch and isinstance(self.state, LeaderState):
            error = NONE  # planted bug
        if error != NONE:
            self._reply(envelope, self._fetch_error(error))
            return
        state = self.state
        assert isinstance(state, LeaderState)
        replica_id = request.replica_id
        is_voter = replica_id in state.replicas and self._is_voter_key(replica_id, request.replica_directory_id)
        replica = state.replicas[replica_id] if is_voter else state.observers.setdefault(replica_id, ReplicaState())
        replica.directory_id = bytes(request.replica_directory_id)
        previous_fetch_ms = replica.last_fetch_ms
        replica.last_fetch_ms = now_ms
        replica.acknowledged = True
        if is_voter and request.read_barrier > replica.read_barrier:
            replica.read_barrier = min(request.read_barrier, state.read_barrier)  # never more than we gave out
            self._maybe_release_reads(state)
        previous = state.parked.pop(replica_id, None)
        if previous is not None:
            self._answer_fetch(now_ms, state, previous.envelope)  # superseded by this fetch
        validation = self.log.validate_offset_and_epoch(request.fetch_offset, request.last_fetched_epoch)
        if validation.kind is Validation.DIVERGING:
            response = self._fetch_error(NONE)
            response.diverging_epoch.epoch = validation.epoch
            response.diverging_epoch.end_offset = validation.offset
            self._reply(envelope, response)
            return
        if validation.kind is Validation.SNAPSHOT:
            assert self.snapshot is not None, "the log starts above 0 only after a snapshot"
            response = self._fetch_error(NONE)
            response.snapshot_id.end_offset = self.snapshot.end_offset
            response.snapshot_id.epoch = self.snapshot.epoch
            self._reply(envelope, response)
            return
        replica.end_offset = request.fetch_offset
        if request.fetch_offset >= self.log.end_offset:
            replica.last_caught_up_ms = now_ms
        elif 0 < replica.end_at_last_answer <= request.fetch_offset:
            replica.last_caught_up_ms = max(replica.last_caught_up_ms, previous_fetch_ms)
        replica.end_at_last_answer = self.log.end_offset
        if is_voter:
            self._maybe_advance_high_watermark(now_ms, state)
        linger = self.config.fetch_hw_linger_ms
        servable = not self._in_damaged(request.fetch_offset) or self._faults.repair_unchecked
        if (
            (request.fetch_offset < self.log.end_offset and servable)
            or request.max_wait_ms <= 0
            or self.state is not state  # it resigned (its removal committed): park nothing
            or (is_voter and state.reads and replica.read_barrier < state.read_barrier)
        ):
            # (A read waits for this voter to echo the newest barrier: do not park its Fetch.)
            self._answer_fetch(now_ms, state, envelope)
        elif replica.hw_sent < self.high_watermark:
            if linger <= 0:
                self._answer_fetch(now_ms, state, envelope)
            else:
                # Only the watermark is new: wait a little for records to carry it.
                wait = min(linger, request.max_wait_ms)
                state.parked[replica_id] = ParkedFetch(envelope, now_ms + wait)
        else:
            # Long poll: nothing new; answer when data arrives, the HW moves or max wait passes.
            state.parked[replica_id] = ParkedFetch(envelope, now_ms + request.max_wait_ms)

    def _is_voter_key(self, replica_id: int, directory_id: bytes) -> bool:
        """Whether a fetcher is the voter its id names: the same directory id, when both are known
        (KIP-853). Another directory is a wiped or replaced disk: an observer until it is added."""
        node = self._voter_nodes.get(replica_id)
        return node is not None and node.matches(replica_id, directory_id)

    def _answer_fetch(self, now_ms: int, state: LeaderState, envelope: Envelope) -> None:
        request = envelope.message
        assert isinstance(request, raft_pb2.FetchRequest)
        covering = self.log.entry_covering(request.fetch_offset) if self.damaged else None
        if covering is not None and covering.base_offset != request.fetch_offset:
            # Inside a damaged range (the fetcher's log ends at a boundary our log does not know
            # until the range is repaired): nothing to serve there yet.
            entries: list[Entry] = []
        else:
            entries = self.log.read(request.fetch_offset, min(request.max_bytes, self.config.fetch_max_bytes))
        if self.damaged and not self._faults.repair_unchecked:
            # Never serve a damaged batch: answer up to it (empty if the fetcher needs it next).
            for i, entry in enumerate(entries):
                if entry.base_offset in self.damaged:
                    del entries[i:]
                    break
        response = self._fetch_error(NONE)
        if entries:
            response.records = entries[0].data if len(entries) == 1 else b"".join(e.data for e in entries)
        replica_id = request.replica_id
        voter = replica_id in state.replicas and self._is_voter_key(replica_id, request.replica_directory_id)
        replica = state.replicas.get(replica_id) if voter else state.observers.get(replica_id)
        if replica is not None:
            replica.hw_sent = self.high_watermark
        self._reply(envelope, response)

    def _release_parked(self, now_ms: int) -> None:
        state = self.state
        if isinstance(state, LeaderState) and state.parked:
            parked = list(state.parked.values())
            state.parked.clear()
            for p in parked:
                self._answer_fetch(now_ms, state, p.envelope)

    def _maybe_advance_high_watermark(self, now_ms: int, state: LeaderState) -> None:
        own = self.log.end_offset if self._faults.ack_unpersisted else self.durable_end_offset
        if not self._faults.count_damaged_toward_hw:
            own = min(own, self.vouched_end_offset)  # nothing past a batch it cannot serve
        offsets = [r.end_offset for r in state.replicas.values()]
        if self.is_voter:
            offsets.append(own)  # a leader removing itself counts only the new set (KIP-853)
        candidate = majority_offset(offsets, len(self.voters))
        if self._faults.hw_from_committed_voters:
            committed = self.voter_history.at(self.high_watermark).ids  # planted bug
            fetchers = state.replicas | state.observers
            known = [
                own if v == self.node_id else fetchers[v].end_offset
                for v in committed
                if v == self.node_id or v in fetchers
            ]
            candidate = majority_offset(known, len(committed))
        if candidate <= self.high_watermark:
            return
        faults = self._faults
        if candidate <= state.epoch_start_offset and not (faults.hw_from_old_epoch or faults.commit_old_epoch_by_count):
            return  # Raft §5.4.2 / figure 8: never commit an older epoch's entry by counting replicas
        self._set_high_watermark(candidate)
        self._maybe_release_reads(state)
        if not self.is_voter and self.voter_history.latest_offset() < self.high_watermark:
            # The change that removed this leader committed: hand over (Kafka's RemoveVoterHandler).
            self._become_resigned(now_ms, self._ranked_successors(state))
            return
        linger = self.config.fetch_hw_linger_ms
        if linger <= 0:
            self._release_parked(now_ms)
        elif state.parked:
            # Parked Fetches learn the new watermark with the next records, or after the linger.
            for replica_id, parked in state.parked.items():
                if parked.deadline_ms > now_ms + linger:
                    state.parked[replica_id] = ParkedFetch(parked.envelope, now_ms + linger)

    # -- Fetch (follower side) --------------------------------------------------------------------------
    def _fetch_request(self, max_wait_ms: int, *, acknowledge: bool = True) -> raft_pb2.FetchRequest:
        log = self.log
        state = self.state
        # A follower with a damaged batch fetches from it: the leader counts that offset as its
        # end (nothing past it toward the HW) and answers with the batches from there, whose
        # copy of the damaged one repairs it (_append_fetched).
        offset = log.end_offset if self._faults.count_damaged_toward_hw else self.vouched_end_offset
        if not acknowledge:
            # A fence probe: from the high watermark, an offset no leader can count toward a commit.
            offset = max(log.start_offset, min(offset, self.high_watermark))
        before = log.entry_before(offset) if offset < log.end_offset else None
        if self.state_missing:
            # Below the leader's log start: it answers with its snapshot (Validation.SNAPSHOT).
            return raft_pb2.FetchRequest(
                cluster_id=self.config.cluster_id,
                replica_id=self.node_id,
                replica_epoch=self.state.epoch,
                fetch_offset=0,
                last_fetched_epoch=0,
                max_wait_ms=0,
                max_bytes=self.config.fetch_max_bytes,
                log_start_offset=log.start_offset,
                replica_directory_id=self.config.directory_id,
            )
        return raft_pb2.FetchRequest(
            cluster_id=self.config.cluster_id,
            replica_id=self.node_id,
            replica_epoch=self.state.epoch,
            fetch_offset=offset,
            last_fetched_epoch=log.last_epoch
            if offset == log.end_offset
            else (before.epoch if before else log.start_epoch),
            max_wait_ms=max_wait_ms,
            max_bytes=self.config.fetch_max_bytes,
            log_start_offset=log.start_offset,
            read_barrier=state.read_barrier if isinstance(state, FollowerState) else 0,
            replica_directory_id=self.config.directory_id,
        )

    def _maybe_send_fetch(self, now_ms: int, state: FollowerState) -> None:
        if state.in_flight >= 0 or now_ms < state.retry_ms or self.state is not state:
            return
        if self._fence is not None and not self._faults.ack_behind_fence:
            # Behind the vote fence this node may have voted in a later epoch than its leader's: a
            # Fetch would count toward that leader's commits, which the vote promised not to do
            # (Raft's candidate of the later epoch may lack them). It follows, and acknowledges nothing.
            return
        config = self.config
        if state.bridge is not None:
            # The leader's batches from its snapshot's end (its log start) on, up to the end of our
            # damaged range: committed (below its high watermark), so this fetch offset counts for nothing.
            bridge = state.bridge
            bridge_request = raft_pb2.FetchRequest(
                cluster_id=config.cluster_id,
                replica_id=self.node_id,
                replica_epoch=state.epoch,
                fetch_offset=bridge.next_offset,
                last_fetched_epoch=bridge.batches[-1].epoch if bridge.batches else bridge.snapshot_epoch,
                max_wait_ms=0,
                max_bytes=config.fetch_max_bytes,
                log_start_offset=self.log.start_offset,
                replica_directory_id=config.directory_id,
            )
            state.in_flight = self._send(state.leader_id, bridge_request)
            state.in_flight_deadline_ms = now_ms + config.request_timeout_ms
            return
        if state.snapshot is not None:
            download = state.snapshot
            request: RaftMessage = raft_pb2.FetchSnapshotRequest(
                cluster_id=config.cluster_id,
                replica_id=self.node_id,
                replica_epoch=state.epoch,
                snapshot_id=raft_pb2.SnapshotId(end_offset=download.end_offset, epoch=download.epoch),
                position=len(download.buffer),
                max_bytes=config.snapshot_chunk_bytes,
            )
            state.in_flight = self._send(state.leader_id, request)
            state.in_flight_deadline_ms = now_ms + config.request_timeout_ms
            return
        if self.durable_end_offset < self.log.end_offset and not self._faults.ack_unpersisted:
            return  # the fetch offset claims durability: wait for on_log_flushed
        request = self._fetch_request(config.fetch_max_wait_ms)
        state.in_flight = self._send(state.leader_id, request)
        state.in_flight_offset = request.fetch_offset
        state.in_flight_deadline_ms = now_ms + config.fetch_max_wait_ms + config.request_timeout_ms

    def _handle_fetch_response(self, now_ms: int, envelope: Envelope, response: raft_pb2.FetchResponse) -> None:
        probed = self._state_probe.asked.pop(envelope.correlation_id, None)
        if probed is not None:
            self._state_probe.record(probed, response)
            self._judge_state_round(now_ms)
        voter = self._fence_probes.pop(envelope.correlation_id, None)
        if voter is not None and self._fence is not None and response.error_code != UNKNOWN_EPOCH:
            # Its epoch now, asked after our restart. A voter behind its own fence answers
            # UNKNOWN_LEADER_EPOCH: its epoch is no witness (it lost what it persisted too).
            self._fence[voter] = response.leader_epoch
        if self._observe_epoch(now_ms, response.leader_epoch, response.leader_id):
            return
        state = self.state
        if isinstance(state, LeaderState):
            self._on_repair_answer(now_ms, envelope, response)
            return
        if not isinstance(state, FollowerState) or envelope.correlation_id != state.in_flight:
            return  # stale, duplicated or not ours any more
        state.in_flight = -1
        if response.error_code != NONE or envelope.source != state.leader_id:
            if response.error_code == NOT_LEADER and envelope.source == state.leader_id:
                state.leader_alive = False  # it resigned: do not defend it against pre-votes
            state.retry_ms = now_ms + self.config.retry_backoff_ms
            return
        state.last_fetch_ok_ms = now_ms
        state.fetch_deadline_ms = now_ms + self.config.fetch_timeout_ms + state.fetch_jitter_ms
        state.leader_alive = True
        state.read_barrier = max(state.read_barrier, response.read_barrier)
        if state.bridge is not None:
            bridge, state.bridge = state.bridge, None
            if not response.HasField("diverging_epoch") and not response.HasField("snapshot_id"):
                state.bridge = self._extend_bridge(now_ms, state, bridge, response.records)
            # Otherwise the leader's log moved on: the next fetch, from our damaged range, decides again.
            self._maybe_send_fetch(now_ms, state)
            return
        if response.HasField("diverging_epoch"):
            if self._faults.hw_from_old_epoch:
                # Planted bug: take the leader's HW over our unvalidated older-epoch tail.
                self._set_high_watermark(min(response.high_watermark, self.log.end_offset))
            diverging = response.diverging_epoch
            self._truncate(
                now_ms,
                self._divergence_point(diverging),
                f"leader {envelope.source} of epoch {response.leader_epoch} answered diverging epoch "
                f"{diverging.epoch} ending at offset {diverging.end_offset}",
            )
        elif response.HasField("snapshot_id"):
            end, epoch = response.snapshot_id.end_offset, response.snapshot_id.epoch
            state.bridge = self._bridge_for(end, epoch, response.high_watermark)
            if state.bridge is None:
                state.snapshot = SnapshotDownload(end, epoch)
        elif self.state_missing:
            # The leader's log still reaches offset 0: it has no snapshot to send yet. Its
            # batches from 0 do not fit before our log; ask again after a back-off.
            state.retry_ms = now_ms + self.config.retry_backoff_ms
        else:
            # Our log is the leader's up to the fetch offset and through the batches of the answer;
            # past them (we fetched from a damaged batch) it is unchecked and takes no HW.
            matched = self._append_fetched(now_ms, response.records, state.in_flight_offset)
            self._set_high_watermark(min(response.high_watermark, matched))
        self._maybe_send_fetch(now_ms, state)

    def _divergence_point(self, diverging: raft_pb2.DivergingEpoch) -> int:
        """Where to truncate after a DIVERGING answer (Kafka's truncateToEndOffset): the end of
        the leader's epoch as our own log has it -- our last batches may be of a later epoch the
        leader never saw, so its end offset alone can lie inside or beyond them."""
        local = self.log.end_offset_for_epoch(diverging.epoch)
        if local is None:
            return self.log.start_offset
        if local.epoch == diverging.epoch:
            return min(local.offset, diverging.end_offset)
        return local.offset

    def _append_fetched(self, now_ms: int, records: bytes, fetch_offset: int) -> int:
        """Store the leader's batches; return the end of the prefix of our log now known to be
        the leader's (``fetch_offset``, the leader validated it, or the end of the last batch of
        the answer we hold)."""
        log = self.log
        matched = min(fetch_offset, log.end_offset)
        if not records:
            return matched
        try:
            for batch in iter_batches(records, verify_crc=not self._faults.repair_unchecked):
                entry = Entry.from_batch(batch)
                if entry.base_offset != matched:
                    break  # not where we fetched from: a stale answer; the next fetch sorts it out
                if entry.base_offset < log.end_offset:
                    # We fetched from a damaged batch of ours: the answer overlaps our log.
                    if not self._overlap(now_ms, entry):
                        break
                elif entry.epoch < log.last_epoch:
                    break
                else:
                    self._append(now_ms, entry)
                matched = entry.next_offset
        except CorruptBatchError:
            return matched  # a damaged copy is refused, never stored: the next fetch asks again
        return matched

    def _overlap(self, now_ms: int, entry: Entry) -> bool:
        """A leader's batch at an offset our log already holds (we fetched from our first damaged
        batch): repair ours if it is that damaged batch, skip an identical one, truncate from a
        diverging one (never below the high watermark: ``_truncate`` refuses). False: stop."""
        mine = self.log.entry_at(entry.base_offset)
        if mine is None:
            return False  # not a batch boundary of ours: a stale answer
        if mine.base_offset in self.damaged_epochs:
            return self._overlap_across_epochs(now_ms, mine, entry)
        if (mine.epoch, mine.next_offset) == (entry.epoch, entry.next_offset):
            if entry.base_offset in self.damaged:
                return self._try_repair(now_ms, mine, entry)
            return True  # the same batch (Log Matching)
        if entry.base_offset in self.damaged and entry.epoch == mine.epoch and entry.next_offset < mine.next_offset:
            return self._try_repair(now_ms, mine, entry)  # the front of a damaged range of several batches
        self._truncate(
            now_ms,
            entry.base_offset,
            f"the leader's batch at {entry.base_offset} is of epoch {entry.epoch}, ours of epoch {mine.epoch}",
        )
        if entry.base_offset != self.log.end_offset or entry.epoch < self.log.last_epoch:
            return False
        self._append(now_ms, entry)
        return True

    def _overlap_across_epochs(self, now_ms: int, mine: Entry, entry: Entry) -> bool:
        """The leader's batch at the base of our damaged slot across an epoch change. Our log is the
        leader's up to here (it validated the fetch offset); which of the leader's batches were ours
        inside the slot no byte says, but a follower's log is the leader's: a batch that fits the
        slot (an epoch of its span, within its offsets and bytes) goes in place, and the batch after
        the slot is then held to the leader's log as any fetched batch is (the next answer, or a
        diverging epoch, says whether it is the leader's: Log Matching). One that does not fit
        means our slot's batches were not the leader's: truncate from there (never below what is
        committed)."""
        if self._try_repair(now_ms, mine, entry):
            return True
        if damage_of(entry) is not None:
            return False  # a damaged copy proves nothing: the next fetch asks again
        if entry.base_offset < self._committed_floor:
            raise CommittedTruncationError(
                self.node_id,
                entry.base_offset,
                self._committed_floor,
                f"the leader's batch ({entry.base_offset}, epoch {entry.epoch}, end {entry.next_offset}) does not fit "
                f"our damaged slot up to {mine.next_offset} of epochs {mine.epoch}..{self._epoch_bound(mine)}",
            )
        self._truncate(
            now_ms,
            entry.base_offset,
            f"the leader's batch at {entry.base_offset} (epoch {entry.epoch}, end {entry.next_offset}) does not fit "
            f"our damaged slot up to {mine.next_offset} of epochs {mine.epoch}..{self._epoch_bound(mine)}",
        )
        if entry.base_offset != self.log.end_offset or entry.epoch < self.log.last_epoch:
            return False
        self._append(now_ms, entry)
        return True

    # -- no state below the log (a damaged snapshot with no fallback) ------------------------------
    def _probe_state(self, now_ms: int) -> None:
        """Ask every other voter, in a new round, whether it lacks the state below its log too;
        stop once none can lead (state_probe.py)."""
        probe = self._state_probe
        if probe.verdict(self.node_id, self.voters) is None:
            self._no_leader_since = None  # the last round found a leader possible
        probe.new_round()
        for voter in self.voters:
            if voter != self.node_id:
                probe.asked[self._send(voter, self._fetch_request(0))] = voter
        self._judge_state_round(now_ms)

    def _judge_state_round(self, now_ms: int) -> None:
        """Stop when no leader can be elected: at once when every other voter answered; with some
        silent (stopped, or cut off), once that has held for two fetch timeouts -- longer than a
        leader among them stays in office without a majority's fetches (check quorum, 1.5 of them)."""
        found = self._state_probe.verdict(self.node_id, self.voters)
        if found is None or self._faults.wait_without_state:
            return
        if found.silent:
            if self._no_leader_since is None:
                self._no_leader_since = now_ms
            if now_ms - self._no_leader_since < 2 * self.config.fetch_timeout_ms:
                return
        raise UnrecoverableStateError(
            self.node_id,
            self.state.epoch,
            self.log.start_offset,
            self.log.start_epoch,
            found.missing,
            found.holding,
            found.silent,
        )

    # -- the vote fence (a lost election state) ----------------------------------------------------
    def _probe_fence(self, now_ms: int) -> int:
        """Ask every voter that has not answered for its epoch (a Fetch: every node answers one with
        its epoch); close the fence once all have. Returns when to ask again."""
        fence = self._fence
        assert fence is not None
        missing = [v for v in self.voters if v != self.node_id and v not in fence]
        if not missing:
            self._close_fence(now_ms, max(fence.values(), default=0))
            return NEVER
        if now_ms >= self._fence_retry_ms:
            self._fence_probes.clear()
            for voter in missing:
                self._fence_probes[self._send(voter, self._fetch_request(0, acknowledge=False))] = voter
            self._fence_retry_ms = now_ms + self.config.request_timeout_ms
        return self._fence_retry_ms

    def _close_fence(self, now_ms: int, bound: int) -> None:
        """Every vote this node may have granted is in an epoch <= ``bound``: it withholds its vote
        up to there (VOTE_UNKNOWN in ``bound``; epochs only grow) and votes again above."""
        self._fence = None
        self._fence_probes.clear()
        state = self.state
        if bound > state.epoch:
            self._become_unattached(now_ms, bound)
            state = self.state
        if state.epoch == bound and state.voted_id in (NO_VOTE, VOTE_FENCED):
            state.voted_id = VOTE_UNKNOWN
        self._persist()  # the fence is closed on disk too
        self.start_note = None

    # -- repair from the quorum (raft/repair.py) ------------------------------------------------------
    def _try_repair(self, now_ms: int, slot: Entry, copy: Entry) -> bool:
        """Put ``copy`` in place of the damaged ``slot`` if it is an intact copy of it."""
        max_epoch = self.damaged_epochs.pop(slot.base_offset, None)
        if not self._faults.repair_unchecked and copy_fills(slot, copy, max_epoch) is not None:
            if max_epoch is not None:
                self.damaged_epochs[slot.base_offset] = max_epoch
            return False
        rest = self.log.replace(copy)
        self.damaged.discard(copy.base_offset)
        if rest is not None:
            self.damaged.add(rest.base_offset)  # a damaged range: its front is repaired, the rest next
            if max_epoch is not None and max_epoch > rest.epoch:
                self.damaged_epochs[rest.base_offset] = max_epoch  # still across an epoch change
        self._ready.repair.append(copy)
        self.repairs += 1
        if voters_in_batch(copy.data) is not None:
            # A voter change comes back: re-read the changes from it on, in offset order.
            self.voter_history.truncate_to(copy.base_offset)
            for entry in self.log.slice(copy.base_offset, self.log.end_offset):
                found = voters_in_batch(entry.data) if entry.base_offset not in self.damaged else None
                if found is not None:
                    self.voter_history.add(entry.base_offset, found)
            self._voters_changed(now_ms)
        self._emit_committed()
        state = self.state
        if isinstance(state, LeaderState):
            state.repair = None
            self._maybe_advance_high_watermark(now_ms, state)
            self._release_parked(now_ms)
        return True

    def _bridge_for(self, end: int, epoch: int, leader_high_watermark: int) -> Bridge | None:
        """A Bridge when the leader's snapshot (``end``, ``epoch``) ends strictly inside a damaged
        range of ours of that one epoch, the range's end committed by the leader's high watermark
        (so the bridge fetch's offsets claim nothing uncommitted). Else None: the snapshot is
        installed as before (in step with our log it keeps the log above it; else it resets it)."""
        if self.state_missing:
            return None
        slot = self.log.entry_covering(end)
        if (
            slot is None
            or slot.base_offset == end
            or slot.base_offset not in self.damaged
            or slot.base_offset in self.damaged_epochs
            or slot.epoch != epoch
            or slot.next_offset > leader_high_watermark
        ):
            return None
        return Bridge(end, epoch, slot.base_offset, slot.next_offset)

    def _extend_bridge(self, now_ms: int, state: FollowerState, bridge: Bridge, records: bytes) -> Bridge | None:
        """Take the leader's answer to a bridge fetch; once the bridge reaches the range's end, put
        it at the back of the range, last batch first. A batch that does not continue the range
        in its epoch, or a bridge that would not fit its bytes, means the range was not these
        batches: fetch the snapshot and install it as before. Returns the bridge still under way."""
        slot = self.log.entry_at(bridge.range_base)
        if slot is None or slot.next_offset != bridge.range_end or bridge.range_base not in self.damaged:
            return None  # repaired or truncated meanwhile: the next fetch decides again
        misfit = False
        try:
            for batch in iter_batches(records, verify_crc=True):
                entry = Entry.from_batch(batch)
                if entry.base_offset != bridge.next_offset:
                    return bridge  # a stale answer: ask again
                if entry.epoch != slot.epoch or entry.next_offset > bridge.range_end:
                    misfit = True
                    break
                bridge.batches.append(entry)
                if entry.next_offset == bridge.range_end:
                    break
        except CorruptBatchError:
            return bridge  # a damaged copy is refused, never stored: ask again
        if not misfit and bridge.next_offset < bridge.range_end:
            return bridge  # more to fetch
        fits = not misfit and sum(len(b.data) for b in bridge.batches) < len(slot.data)
        if not fits:
            state.snapshot = SnapshotDownload(bridge.snapshot_end, bridge.snapshot_epoch)
            return None
        for copy in reversed(bridge.batches):
            back = self.log.entry_at(bridge.range_base)
            assert back is not None and copy_fills_back(back, copy) is None, "checked above"
            self.log.replace_back(copy)
            self._ready.repair.append(copy)
            self.repairs += 1
        if any(voters_in_batch(copy.data) is not None for copy in bridge.batches):
            self.voter_history.truncate_to(bridge.snapshot_end)
            for entry in self.log.slice(bridge.snapshot_end, self.log.end_offset):
                found = voters_in_batch(entry.data) if entry.base_offset not in self.damaged else None
                if found is not None:
                    self.voter_history.add(entry.base_offset, found)
            self._voters_changed(now_ms)
        return None

    def _in_damaged(self, offset: int) -> bool:
        """Whether ``offset`` lies in a damaged batch (at its base, or inside a damaged range)."""
        if not self.damaged:
            return False
        covering = self.log.entry_covering(offset)
        return covering is not None and covering.base_offset in self.damaged

    def _answer_repair_request(self, envelope: Envelope, request: raft_pb2.FetchRequest) -> None:
        """Our leader asks for our copy of the batch at ``fetch_offset`` of epoch
        ``last_fetched_epoch``: send it if we hold it intact, else say why not."""
        mine = self.log.entry_at(request.fetch_offset)
        covering = self.log.entry_covering(request.fetch_offset)
        # We hold that offset damaged in a slot whose epochs include the one asked for (a range of
        # several batches, or a slot across an epoch change): we may have held it, damaged.
        held_damaged = (
            covering is not None
            and covering.base_offset in self.damaged
            and covering.epoch <= request.last_fetched_epoch <= self._epoch_bound(covering)
        )
        snapshot = self.snapshot
        if request.fetch_offset < self.log.start_offset and snapshot is not None:
            # Our snapshot covers it: the batch is gone here, but the leader can have the snapshot
            # once it follows a leader whose log starts above the damage.
            response = self._fetch_error(NONE)
            response.snapshot_id.end_offset = snapshot.end_offset
            response.snapshot_id.epoch = snapshot.epoch
            self._reply(envelope, response)
        elif held_damaged and not self._faults.repair_unchecked:
            self._reply(envelope, self._fetch_error(CORRUPT))
        elif mine is None or mine.epoch != request.last_fetched_epoch:
            self._reply(envelope, self._fetch_error(ABSENT))
        else:
            response = self._fetch_error(NONE)
            response.records = mine.data
            self._reply(envelope, response)

    def _drive_repair(self, now_ms: int, state: LeaderState) -> int:
        """The leader asks the other voters and its observers, one at a time, for its first damaged
        batch. Returns when it next needs a poll."""
        base = min(self.damaged)
        slot = self.log.entry_at(base)
        assert slot is not None
        round_ = state.repair
        if round_ is None or round_.base_offset != base:
            round_ = state.repair = RepairRound(base, slot.epoch)
        if round_.in_flight != -1 and now_ms < round_.deadline_ms:
            return round_.deadline_ms
        # Every member of a voter set that can have committed the slot, then the observers (after
        # voter changes they may be the only other copies).
        members = sorted({v for voters in self._sets_since(base) for v in voters} - {self.node_id})
        peers = members + sorted(set(state.observers) - set(members))
        peer = round_.next_peer(peers)
        if peer is None:
            self._repair_impossible(now_ms, state, round_)
            return round_.deadline_ms if self.state is state else now_ms
        request = raft_pb2.FetchRequest(
            cluster_id=self.config.cluster_id,
            replica_id=self.node_id,
            replica_epoch=state.epoch,
            fetch_offset=base,
            last_fetched_epoch=slot.epoch,
            max_wait_ms=0,
            max_bytes=self.config.fetch_max_bytes,
            replica_directory_id=self.config.directory_id,
        )
        round_.in_flight = self._send(peer, request)
        round_.deadline_ms = now_ms + self.config.request_timeout_ms
        return round_.deadline_ms

    def _on_repair_answer(self, now_ms: int, envelope: Envelope, response: raft_pb2.FetchResponse) -> None:
        state = self.state
        assert isinstance(state, LeaderState)
        round_ = state.repair
        if round_ is None or envelope.correlation_id != round_.in_flight:
            return  # stale or duplicated
        round_.in_flight = -1
        if response.error_code == NONE and response.records:
            slot = self.log.entry_at(round_.base_offset)
            try:
                batch = next(iter_batches(response.records, verify_crc=not self._faults.repair_unchecked))
            except (CorruptBatchError, StopIteration):
                batch = None
            if slot is not None and batch is not None and self._try_repair(now_ms, slot, Entry.from_batch(batch)):
                return
            round_.answers[envelope.source] = ANSWER_DAMAGED  # it sent a copy that is not intact
        elif response.error_code == NONE and response.HasField("snapshot_id"):
            round_.answers[envelope.source] = ANSWER_IN_SNAPSHOT
        elif response.HasField("snapshot_id"):
            pass  # it lacks the state below its log (and follows no leader of ours): no answer yet
        elif response.error_code == CORRUPT:
            round_.answers[envelope.source] = ANSWER_DAMAGED
        elif response.error_code == ABSENT:
            round_.answers[envelope.source] = ANSWER_ABSENT
        # Any other answer (it no longer follows us) is no answer: it is asked again.
        round_.deadline_ms = now_ms  # ask the next one now

    def _repair_impossible(self, now_ms: int, state: LeaderState, round_: RepairRound) -> None:
        """Every peer answered and none holds the slot intact.

        Every member of each voter set that can have committed the slot has answered: the set in
        force when it was written and each later change in the log, committed or not
        (``VoterHistory.since``; the latest alone may have removed its holders, plane seeds 148266
        and 148820).

        * One holds it in a snapshot: resign; as a follower of a leader whose log starts above the
          damage, this node gets that snapshot (it replaces the damaged log below its end).
        * This node and the voters that hold it damaged are a majority of one of those sets: it
          may be committed on those copies alone, and none is intact: stop, loudly, changing
          nothing.
        * Fewer hold it, below the high watermark: it is committed, so a majority of some voter
          set held it -- its other copies are on nodes that left the voters or are not heard from
          yet. Ask again later; never drop a committed batch.
        * Fewer hold it, above the high watermark: with the voters of a commit, a majority of one
          of those sets would hold it; it is not committed. Drop it and everything after it (no
          other voter holds those either: Log Matching) and resign, so that a leader serves only
          what it holds intact."""
        answers = round_.answers
        if not answers:
            # Nobody to ask yet (a single voter whose observers have not fetched since it started):
            # wait for them rather than decide on no evidence.
            round_.deadline_ms = now_ms + self.config.request_timeout_ms
            round_.in_flight = -2
            return
        if ANSWER_IN_SNAPSHOT in answers.values():
            self._hand_over_to_a_snapshot_holder(now_ms, state, round_)
            return
        voter_sets = self._sets_since(round_.base_offset)
        if damaged_on_a_majority(self.node_id, voter_sets, answers):
            raise UnrepairableEntryError(
                self.node_id, round_.base_offset, round_.epoch, self.high_watermark, dict(answers)
            )
        if round_.base_offset < max(self.high_watermark, self._committed_floor):
            round_.answers = {}
            round_.deadline_ms = now_ms + self.config.request_timeout_ms
            round_.in_flight = -2  # a pause before the next round, not a request
            return
        self._become_resigned(now_ms, self._ranked_successors(state))
        self._truncate(
            now_ms,
            round_.base_offset,
            f"damaged batch at {round_.base_offset} (epoch {round_.epoch}) that no other voter holds",
        )

    def _sets_since(self, offset: int) -> list[frozenset[int]]:
        """The voter sets (ids) that can have committed the batch at ``offset`` (``VoterHistory.since``)."""
        return [frozenset(voters.ids) for voters in self.voter_history.since(offset)]

    def _hand_over_to_a_snapshot_holder(self, now_ms: int, state: LeaderState, round_: RepairRound) -> None:
        """A peer holds our damaged slot in its snapshot: resign so that this node, following a
        leader whose log starts above the damage, gets that snapshot -- once a voter holding the
        snapshot can win the election. Resigning while every such voter needs our vote and is
        behind our log end (Raft's up-to-date check refuses it), this node wins again, appends
        another leader batch and resigns again, for ever (seed 130294 of the plane soak: two
        voters). Then we lead on, replicating to it (our hw stays below the damage), and look
        again after a pause. Resign at once when none could get our whole log (a damaged batch
        of ours at or past its end: we cannot serve it) or only observers hold the snapshot."""
        holders = [
            peer for peer, answer in round_.answers.items() if answer == ANSWER_IN_SNAPSHOT and peer in state.replicas
        ]
        winners = [peer for peer in holders if self._could_win(state, peer)]
        catching_up = [peer for peer in holders if all(b < state.replicas[peer].end_offset for b in self.damaged)]
        if not winners and catching_up:
            round_.deadline_ms = now_ms + self.config.request_timeout_ms
            round_.in_flight = -2  # a pause before looking again, not a request
            return
        ranked = self._ranked_successors(state)
        self._become_resigned(now_ms, (*winners, *(v for v in ranked if v not in winners)))

    def _could_win(self, state: LeaderState, peer: int) -> bool:
        """Whether the votes ``peer`` would get (Raft's up-to-date check, by the fetch offsets we
        know: every fetcher's log is a prefix of ours up to there) make a majority, ours included."""
        end = state.replicas[peer].end_offset
        granting = 1 + sum(1 for v, r in state.replicas.items() if v != peer and r.end_offset <= end)
        if end >= self.log.end_offset:
            granting += 1  # ours
        return granting > len(self.voters) // 2

    # -- FetchSnapshot ----------------------------------------------------------------------------------
    def _handle_fetch_snapshot_request(
        self, now_ms: int, envelope: Envelope, request: raft_pb2.FetchSnapshotRequest
    ) -> None:
        state = self.state
        wanted = (request.snapshot_id.end_offset, request.snapshot_id.epoch)
        snapshot = next((i for i in self.snapshots if (i.end_offset, i.epoch) == wanted), None)
        if request.cluster_id != self.config.cluster_id:
            error = BAD_CLUSTER
        elif request.replica_id < 0 or request.replica_id == self.node_id:
            error = INVALID_REQUEST
        else:
            error = self._leader_only_error(request.replica_epoch)
        if error != NONE:
            pass  # refused
        elif snapshot is None:
            error = errors_pb2.SNAPSHOT_NOT_FOUND
        elif not 0 <= request.position <= len(snapshot.data):
            error = errors_pb2.POSITION_OUT_OF_RANGE
        response = raft_pb2.FetchSnapshotResponse(
            error_code=error,
            leader_id=state.leader_id if state.role is not Role.RESIGNED else NO_LEADER,
            leader_epoch=state.epoch,
        )
        if error == NONE:
            assert isinstance(state, LeaderState) and snapshot is not None
            replica = state.replicas.get(request.replica_id)
            if replica is not None:
                replica.last_fetch_ms = now_ms  # a voter downloading a snapshot is alive
            size = min(request.max_bytes, self.config.snapshot_chunk_bytes)
            response.snapshot_id.end_offset = snapshot.end_offset
            response.snapshot_id.epoch = snapshot.epoch
            response.size = len(snapshot.data)
            response.position = request.position
            response.unaligned_records = snapshot.data[request.position : request.position + max(size, 1)]
        self._reply(envelope, response)

    def _handle_fetch_snapshot_response(
        self, now_ms: int, envelope: Envelope, response: raft_pb2.FetchSnapshotResponse
    ) -> None:
        if self._observe_epoch(now_ms, response.leader_epoch, response.leader_id):
            return
        state = self.state
        if not isinstance(state, FollowerState) or envelope.correlation_id != state.in_flight:
            return
        state.in_flight = -1
        download = state.snapshot
        if download is None:
            return
        if (
            response.error_code != NONE
            or response.snapshot_id.end_offset != download.end_offset
            or response.snapshot_id.epoch != download.epoch
            or response.position != len(download.buffer)
        ):
            state.snapshot = None  # start over with a Fetch: the leader may have a newer snapshot
            state.retry_ms = now_ms + self.config.retry_backoff_ms
            return
        state.last_fetch_ok_ms = now_ms
        state.fetch_deadline_ms = now_ms + self.config.fetch_timeout_ms + state.fetch_jitter_ms
        download.buffer += response.unaligned_records
        if len(download.buffer) >= response.size:
            state.snapshot = None
            self._install_snapshot(now_ms, SnapshotImage(download.end_offset, download.epoch, bytes(download.buffer)))
        self._maybe_send_fetch(now_ms, state)

    def _install_snapshot(self, now_ms: int, image: SnapshotImage) -> None:
        # A follower asks for a snapshot only when its fetch offset is below the leader's log
        # start, so the snapshot covers everything it had (and had committed).
        # (Without a state below the log nothing was applied: any snapshot of the leader's will do.)
        assert self.state_missing or image.end_offset >= self.applied_offset, "a snapshot would roll back"
        end = image.end_offset
        before = self.log.entry_before(end) if self.log.entry_at(end) is not None else None
        ready = self._ready
        # The snapshot ends where our log starts, in the same epoch: it is the state we lost.
        at_our_start = self.state_missing and end == self.log.start_offset and image.epoch == self.log.start_epoch
        in_step = before is not None and before.epoch == image.epoch
        if (self.damaged or self.state_missing) and (in_step or at_our_start) and not ready.append:
            # We fetched from a damaged batch the leader holds only in its snapshot: our log goes
            # on past the snapshot's end, in step with it (same epoch there: Log Matching), and
            # those batches may be copies the quorum counts on. Keep them; only the rest goes.
            self.log.trim_prefix(end, image.epoch)
            self.damaged = {b for b in self.damaged if b >= end}
            self.damaged_epochs = {b: e for b, e in self.damaged_epochs.items() if b >= end}
            ready.install_keeps_log = True
        else:
            self.log.reset(end, image.epoch)
            self.damaged.clear()  # the snapshot covers every batch this node had
            self.damaged_epochs.clear()
            ready.append = []
            ready.truncate_to = None
            self._unflushed_truncations.append((self._next_seq, end))
        self.voter_history.reset(self._snapshot_voters(image))
        for entry in self.log.entries():
            found = voters_in_batch(entry.data) if entry.base_offset not in self.damaged else None
            if found is not None:
                self.voter_history.add(entry.base_offset, found)
        self._voters_changed(now_ms)
        self.snapshots = [image]
        ready.install_snapshot = image
        ready.committed = []  # the snapshot covers everything this node had committed
        self.durable_end_offset = max(end, min(self.durable_end_offset, self.log.end_offset))
        self.high_watermark = max(self.high_watermark, image.end_offset)
        self.applied_offset = image.end_offset
        if self.state_missing:
            self.state_missing = False
            self._state_probe = StateProbe()
            self._emit_committed()  # our kept batches up to the high watermark apply on top of it
