"""Role states (Kafka's EpochState objects) and the table of legal transitions (QuorumState).

Every role owns its timers as absolute deadlines in ms. ``LEGAL_TRANSITIONS`` lists each legal
role change; :func:`check_transition` asserts a change against it and against the epoch rules,
so an illegal transition is a loud programmer error, never a silent state change.

Transitions (from -> to: when)
- UNATTACHED -> UNATTACHED: a higher epoch without a leader. -> PROSPECTIVE: election timeout
  (voters). -> FOLLOWER / OBSERVER: a leader is learnt (BeginQuorumEpoch, a response).
- PROSPECTIVE -> CANDIDATE: a majority granted the pre-vote. -> PROSPECTIVE: a new round after
  a lost round or its timeout. -> FOLLOWER: the leader's own BeginQuorumEpoch (this epoch), or
  any message naming the leader of a higher epoch (hearsay about the leader it gave up on is
  ignored: following it again would livelock). -> UNATTACHED: a higher epoch without a leader.
- CANDIDATE -> LEADER: a majority voted for it. -> PROSPECTIVE: lost or timed out (KIP-996:
  a candidate never starts another epoch without a new pre-vote). -> FOLLOWER / UNATTACHED:
  a higher epoch, or the leader of its epoch.
- LEADER -> RESIGNED: check quorum failed, graceful shutdown or leadership transfer.
  -> FOLLOWER / UNATTACHED: a higher epoch.
- FOLLOWER -> PROSPECTIVE: fetch timeout (voters). -> FOLLOWER: a new leader in a higher epoch.
  -> UNATTACHED: a higher epoch without a leader.
- RESIGNED -> PROSPECTIVE: election timeout. -> FOLLOWER / OBSERVER / UNATTACHED: a higher
  epoch. A leader that removed itself (KIP-853) resigns when the change commits, and at its
  election timeout becomes UNATTACHED in the same epoch, keeping its vote, to observe.
- FOLLOWER <-> OBSERVER in place, same epoch and leader: the voter set in force changed under it
  (a VotersRecord appended or truncated away, a snapshot installed).
- OBSERVER -> OBSERVER: a new leader. -> UNATTACHED: fetch timeout (same epoch) or a higher
  epoch without a leader.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from raftmeta.raft.quorum import VoteTally
from raftmeta.raft.repair import Bridge, RepairRound
from raftmeta.raft.types import NO_LEADER, NO_VOTE, Envelope, Role

LEGAL_TRANSITIONS: dict[Role, frozenset[Role]] = {
    Role.UNATTACHED: frozenset({Role.UNATTACHED, Role.PROSPECTIVE, Role.FOLLOWER, Role.OBSERVER}),
    Role.PROSPECTIVE: frozenset({Role.PROSPECTIVE, Role.CANDIDATE, Role.FOLLOWER, Role.UNATTACHED}),
    Role.CANDIDATE: frozenset({Role.LEADER, Role.PROSPECTIVE, Role.FOLLOWER, Role.UNATTACHED}),
    Role.LEADER: frozenset({Role.RESIGNED, Role.FOLLOWER, Role.UNATTACHED}),
    Role.FOLLOWER: frozenset({Role.PROSPECTIVE, Role.FOLLOWER, Role.UNATTACHED}),
    Role.RESIGNED: frozenset({Role.PROSPECTIVE, Role.FOLLOWER, Role.OBSERVER, Role.UNATTACHED}),
    Role.OBSERVER: frozenset({Role.OBSERVER, Role.UNATTACHED}),
}
VOTER_ONLY = frozenset({Role.PROSPECTIVE, Role.CANDIDATE, Role.LEADER, Role.FOLLOWER, Role.RESIGNED})


def check_transition(old: EpochState, new: EpochState, is_voter: bool) -> None:
    """Assert that ``old -> new`` is legal (programmer errors crash loudly)."""
    assert new.role in LEGAL_TRANSITIONS[old.role], f"illegal transition {old.role.value} -> {new.role.value}"
    assert new.epoch >= old.epoch, f"epoch went back from {old.epoch} to {new.epoch}"
    # A leader that removed itself resigns once the change commits (KIP-853): not a voter then.
    resigning = old.role is Role.LEADER and new.role is Role.RESIGNED
    assert is_voter or resigning or new.role not in VOTER_ONLY, f"an observer cannot become {new.role.value}"
    assert not is_voter or new.role is not Role.OBSERVER, "a voter follows as FOLLOWER, not OBSERVER"
    if new.role is Role.CANDIDATE:
        assert new.epoch == old.epoch + 1, "a candidate bumps the epoch by exactly one"
    elif new.role is Role.LEADER:
        assert new.epoch == old.epoch, "a leader leads the epoch it was a candidate in"
    elif new.role is Role.UNATTACHED:
        assert new.epoch > old.epoch or old.role is Role.OBSERVER or not is_voter, (
            "unattached in the same epoch: observers only"
        )
    elif new.role in (Role.PROSPECTIVE, Role.RESIGNED):
        assert new.epoch == old.epoch, f"{new.role.value} keeps the epoch"
    elif new.role in (Role.FOLLOWER, Role.OBSERVER) and new.epoch == old.epoch:
        assert old.role not in (Role.LEADER, Role.RESIGNED), "a leader cannot follow in its own epoch"
        assert old.leader_id in (NO_LEADER, new.leader_id) or old.role is Role.OBSERVER, "two leaders in one epoch"


@dataclass(slots=True)
class EpochState:
    role: Role
    epoch: int
    leader_id: int = NO_LEADER
    voted_id: int = NO_VOTE


@dataclass(slots=True)
class UnattachedState(EpochState):
    # Voters: when to start a pre-vote. Observers: when to look for the leader again.
    deadline_ms: int = 0


@dataclass(slots=True)
class ElectionState(EpochState):
    """PROSPECTIVE (pre-vote round) or CANDIDATE (vote round)."""

    tally: VoteTally = field(default_factory=lambda: VoteTally(()))
    # Correlation ids of this round's requests: answers to an older round are ignored.
    requests: set[int] = field(default_factory=set)
    deadline_ms: int = 0
    # After a lost round: wait until the backoff deadline instead of the election timeout.
    lost: bool = False


@dataclass(slots=True)
class ReplicaState:
    """The leader's view of one fetcher."""

    # End offset the fetcher has persisted (its last VALID fetch offset).
    end_offset: int = 0
    last_fetch_ms: int = 0
    # The high watermark last sent to it: a parked fetch is released when ours is newer.
    hw_sent: int = -1
    # Acknowledged this epoch (BeginQuorumEpoch answered, or fetched).
    acknowledged: bool = False
    # The highest read barrier its Fetches echoed: it followed us after we raised that barrier.
    read_barrier: int = 0
    # Kafka's lastCaughtUpTimestamp (LeaderState.ReplicaState.updateFollowerState): a Fetch at our
    # log end offset makes it now; one that reached our log end offset as it was when we answered
    # its previous Fetch makes it that previous Fetch's time (-1: never). ``end_at_last_answer`` is
    # that end offset (-1: no Fetch answered yet in this epoch -- the first Fetch proves only what
    # it reaches now, or a replica far behind would count as caught up).
    last_caught_up_ms: int = -1
    end_at_last_answer: int = -1
    # The directory id its last Fetch carried (KIP-853's replica key; empty: not sent).
    directory_id: bytes = b""


@dataclass(frozen=True, slots=True)
class ReplicaProgress:
    """A copy of the leader's view of one fetcher, for readers outside the core (DescribeQuorum,
    metrics): they get values, never the core's mutable :class:`ReplicaState`."""

    end_offset: int
    last_fetch_ms: int
    acknowledged: bool
    last_caught_up_ms: int
    directory_id: bytes

    @classmethod
    def of(cls, replica: ReplicaState) -> ReplicaProgress:
        return cls(
            end_offset=replica.end_offset,
            last_fetch_ms=replica.last_fetch_ms,
            acknowledged=replica.acknowledged,
            last_caught_up_ms=replica.last_caught_up_ms,
            directory_id=replica.directory_id,
        )


@dataclass(slots=True)
class ParkedFetch:
    envelope: Envelope
    deadline_ms: int


@dataclass(slots=True)
class PendingRead:
    """A linearizable read waiting for its read-index round (see RaftCore.read_index)."""

    read_id: int
    index: int  # answer from a state machine that has applied every offset below this
    barrier: int  # a majority of voters must echo this barrier (or a later one)
    confirmed: bool = False


@dataclass(slots=True)
class LeaderState(EpochState):
    epoch_start_offset: int = 0
    granting_voters: tuple[int, ...] = ()
    replicas: dict[int, ReplicaState] = field(default_factory=dict)
    observers: dict[int, ReplicaState] = field(default_factory=dict)
    parked: dict[int, ParkedFetch] = field(default_factory=dict)
    begin_retry_ms: int = 0
    # Linearizable reads: the barrier every Fetch answer carries, and the reads waiting on it.
    read_barrier: int = 0
    reads: list[PendingRead] = field(default_factory=list)
    # The damaged slot of this leader's own log it is asking the other voters for (raft/repair.py).
    repair: RepairRound | None = None


@dataclass(slots=True)
class SnapshotDownload:
    end_offset: int
    epoch: int
    buffer: bytearray = field(default_factory=bytearray)


@dataclass(slots=True)
class FollowerState(EpochState):
    """FOLLOWER (voter) or OBSERVER (non-voter) of ``leader_id``."""

    # No successful fetch by then: voters start a pre-vote, observers look for a leader again.
    fetch_deadline_ms: int = 0
    # Added to the fetch timeout by this follower (drawn once per leader): followers whose
    # leader hangs time out one after the other, so the first one's pre-vote finds the others
    # past the timeout and granting, rather than all standing at once and splitting the vote.
    fetch_jitter_ms: int = 0
    # The fetch in flight (correlation id) and when to consider it lost.
    in_flight: int = -1
    in_flight_deadline_ms: int = 0
    # The fetch offset of the Fetch in flight: the leader's answer validates our log up to it.
    in_flight_offset: int = 0
    # Do not fetch before this (backoff after an error answer).
    retry_ms: int = 0
    last_fetch_ok_ms: int = -(1 << 62)
    # False once the leader said it resigned (EndQuorumEpoch, NOT_LEADER answer): pre-votes
    # are then granted without waiting for the fetch timeout (KIP-996).
    leader_alive: bool = True
    snapshot: SnapshotDownload | None = None
    # The leader's batches from its snapshot's end to the end of our damaged range it lies in,
    # fetched before the snapshot (repair.Bridge).
    bridge: Bridge | None = None
    # The leader's read barrier from its last answer: echoed in every Fetch (FetchRequest.read_barrier).
    read_barrier: int = 0


@dataclass(slots=True)
class ResignedState(EpochState):
    preferred_successors: tuple[int, ...] = ()
    unacknowledged: set[int] = field(default_factory=set)
    retry_ms: int = 0
    election_deadline_ms: int = 0
