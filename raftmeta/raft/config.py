"""Configuration of one consensus core: identity, the static voter set, timeouts and limits.

Defaults follow Kafka's controller.quorum.* settings (election timeout 1 s, fetch timeout 2 s,
election backoff max 1 s). ``Faults`` are test-only switches that plant known bugs so tests
can prove the simulator catches them; production code never sets them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from raftmeta.raft.voters import VoterSet


@dataclass(frozen=True, slots=True)
class Faults:
    """Deliberate bugs, for tests of the simulator only (each one breaks a DESIGN.md §9 invariant)."""

    # Count log entries that are not yet fsynced toward the majority: the leader counts its LEO
    # instead of its durable end, and followers fetch (acknowledge) before their fsync.
    ack_unpersisted: bool = False
    # Grant a vote to a second candidate in an epoch where this node already voted.
    double_vote: bool = False
    # Advance the high watermark over entries of an older epoch without proof that they are the
    # leader's: a leader counts replicas of an older epoch's entries (Raft paper figure 8: it
    # does not wait for its own LeaderChangeRecord to reach a majority), and a follower takes
    # the leader's HW while its log still holds an older epoch's diverging tail.
    hw_from_old_epoch: bool = False
    # The leader half of hw_from_old_epoch alone (Raft paper figure 8): a leader commits an older
    # epoch's entry once its Fetches show it on a majority, without waiting for a batch of its own
    # epoch (its LeaderChangeRecord) to get there.
    commit_old_epoch_by_count: bool = False
    # Do not persist a granted vote: the quorum state is written only when the epoch or the
    # leader changes, so a crash after the grant forgets it.
    vote_not_persisted: bool = False
    # Ignore the persisted vote on restart (start as if this node had not voted in its epoch).
    forget_vote_on_restart: bool = False
    # After losing the quorum-state file, start in the log's epoch with no vote (Kafka's rule)
    # instead of VOTE_UNKNOWN, so a vote granted before the loss can be granted again.
    lost_vote_granted_again: bool = False
    # After losing the quorum-state file, vote again from the log's epoch + 1 at once, without first
    # learning from every voter an epoch at or above any vote this node may have granted.
    vote_without_fence: bool = False
    # Behind the vote fence, fetch from the leader as usual: a voter whose lost vote went to a
    # later epoch's candidate then helps the older epoch's leader commit what that candidate lacks.
    ack_behind_fence: bool = False
    # Serve linearizable reads without the read-index round (a deposed leader answers stale).
    stale_reads: bool = False
    # Accept a Fetch from an older epoch (Kafka fences it: FENCED_LEADER_EPOCH). Its read-barrier
    # echo -- of this node's earlier leadership -- then confirms a read of this one.
    accept_stale_fetch: bool = False
    # Accept a voter change while the previous one is uncommitted (two changes in flight: the
    # majorities of the first and the third set need not overlap).
    voter_change_while_pending: bool = False
    # Count the high watermark with the committed voter set instead of the latest one in the log
    # (an added voter is not waited for: a change commits on a majority of the old set only).
    hw_from_committed_voters: bool = False
    # Trust a peer's copy of a batch: serve a batch this node found damaged, and store a fetched or
    # repair copy without checking its CRC and its header against the slot it fills.
    repair_unchecked: bool = False
    # Count a damaged batch toward the high watermark: the leader counts its own log past its first
    # damaged batch, and a follower fetches from its log end instead of its first damaged batch.
    count_damaged_toward_hw: bool = False
    # Take a flush report at its word: the log is durable up to the offset the fsync reports even
    # when a truncation after the fsync started removed part of what it covered and later appends,
    # not yet flushed, filled those offsets again (on_log_flushed's cap).
    flush_covers_later_truncation: bool = False
    # Without the state below the log, wait for a leader for ever even when every other voter says
    # none can be elected (a majority of the voters without it): the stop the quorum owes is lost.
    wait_without_state: bool = False

    @property
    def any(self) -> bool:
        return any(getattr(self, name) for name in self.__dataclass_fields__)


@dataclass(frozen=True, slots=True)
class RaftConfig:
    node_id: int
    voters: tuple[int, ...]
    cluster_id: str = ""
    # This node's directory id (meta.properties, 16 bytes; empty: none). KIP-853's replica key is
    # (node id, directory id): a wiped disk is another replica, not the voter it replaces.
    directory_id: bytes = b""
    # The bootstrap voters with their directory ids and listeners (--initial-controllers), in force
    # until the log or a snapshot has a VotersRecord; None: ``voters`` without directory ids.
    bootstrap_voters: VoterSet | None = None
    # A follower that has no successful Fetch for this long starts a pre-vote; a leader that
    # has not heard Fetches from a majority for 1.5 x this long resigns (check quorum).
    fetch_timeout_ms: int = 2000
    # Base election timeout; the effective one is base + uniform[0, base) (injected randomness).
    election_timeout_ms: int = 1000
    # Upper bound of the randomized backoff after a lost pre-vote or election.
    election_backoff_max_ms: int = 1000
    # Long poll: how long the leader may park a Fetch that has nothing new.
    fetch_max_wait_ms: int = 500
    # How long the leader may hold a Fetch whose only news is a higher high watermark, hoping
    # for records to send with it. 0 is KRaft's rule (answer at once). Any wait makes every
    # commit cost one Fetch round trip per follower instead of two -- the second round carries
    # only the watermark, and competes for the CPU with the client's answer -- at the price of
    # followers learning of commits up to this much later (never the leader's clients: the
    # leader owns the high watermark).
    fetch_hw_linger_ms: int = 0
    fetch_max_bytes: int = 1 << 20
    # An unanswered request is considered lost after this long and retried.
    request_timeout_ms: int = 1000
    # Retry interval of BeginQuorumEpoch / EndQuorumEpoch to voters that have not acknowledged.
    retry_backoff_ms: int = 100
    snapshot_chunk_bytes: int = 1 << 20
    # Snapshots kept for FetchSnapshot; the in-memory log starts at the oldest one, so a follower
    # that finishes downloading an older snapshot can still fetch the batches after it.
    snapshots_retained: int = 2
    # Bound on batches appended by this leader and not yet committed.
    max_uncommitted_batches: int = 1024
    # Wall clock minus the ``now_ms`` clock the driver passes, in ms: a batch's append timestamp
    # (docs/log-format.md: ms since the Unix epoch) is ``now_ms + wall_clock_offset_ms``. The driver
    # measures it when it starts (timers keep using its monotonic ``now_ms``); the simulator
    # leaves it 0 (virtual time).
    wall_clock_offset_ms: int = 0
    faults: Faults = field(default_factory=Faults)

    def __post_init__(self) -> None:
        assert self.voters, "a quorum needs at least one voter"
        assert len(set(self.voters)) == len(self.voters), f"duplicate voter ids {self.voters}"
        assert all(v >= 0 for v in self.voters), "node ids are >= 0"
        assert self.node_id >= 0
        assert self.fetch_timeout_ms > 0 and self.election_timeout_ms > 0 and self.election_backoff_max_ms > 0
        assert self.fetch_hw_linger_ms >= 0
        assert self.fetch_max_bytes > 0 and self.snapshot_chunk_bytes > 0 and self.snapshots_retained >= 1

    @property
    def is_voter(self) -> bool:
        return self.node_id in self.voters

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1
