"""Small value types shared by the consensus core: roles, the persisted quorum state, message
envelopes, the injected random source and the core's errors."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TypeAlias

from raftmeta.v1 import raft_pb2

NO_LEADER = -1
NO_VOTE = -1
# The election state was lost (a missing or unreadable quorum-state file next to a non-empty
# log): this node may have voted in its epoch, for a candidate it no longer knows, so it grants
# no vote in that epoch (docs/consensus.md, "Lost election state").
VOTE_UNKNOWN = -2
# Written while the vote fence is open (docs/consensus.md, "Lost election state"): a restart before
# it closes fences again. Grants no vote, like VOTE_UNKNOWN.
VOTE_FENCED = -3

RaftMessage: TypeAlias = (
    raft_pb2.VoteRequest
    | raft_pb2.VoteResponse
    | raft_pb2.BeginQuorumEpochRequest
    | raft_pb2.BeginQuorumEpochResponse
    | raft_pb2.EndQuorumEpochRequest
    | raft_pb2.EndQuorumEpochResponse
    | raft_pb2.FetchRequest
    | raft_pb2.FetchResponse
    | raft_pb2.FetchSnapshotRequest
    | raft_pb2.FetchSnapshotResponse
)


class Role(enum.Enum):
    """The seven roles of a node (KIP-595 + KIP-996). OBSERVER is a non-voter following a leader;
    a non-voter that knows no leader is UNATTACHED."""

    UNATTACHED = "unattached"
    PROSPECTIVE = "prospective"
    CANDIDATE = "candidate"
    LEADER = "leader"
    FOLLOWER = "follower"
    RESIGNED = "resigned"
    OBSERVER = "observer"


@dataclass(frozen=True, slots=True)
class QuorumStateData:
    """What must survive a crash (DESIGN.md §4): written atomically and fsynced before any
    message of the same Ready is sent, as the driver's ``quorum-state`` file
    (raftmeta/storage/quorum_state.py). ``voters`` is the voter list a file written before voter
    changes names (checked against the configured voters when read); the core writes none: the
    voter set in force is the log's (KIP-853). An impossible state is refused (ValueError naming
    the field)."""

    epoch: int
    leader_id: int = NO_LEADER
    voted_id: int = NO_VOTE
    voters: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        problem = self.problem()
        if problem is not None:
            raise ValueError(problem)

    def problem(self) -> str | None:
        """What makes this state impossible, naming the field; None if it is valid."""
        if self.epoch < 0:
            return f"epoch {self.epoch} is negative"
        if len(set(self.voters)) != len(self.voters) or any(v < 0 for v in self.voters):
            return f"voters {list(self.voters)} must be distinct node ids >= 0"
        # An empty voter list: the voter set is the log's, and any node id may be voted for or lead.
        listed = bool(self.voters)
        if self.voted_id not in (NO_VOTE, VOTE_UNKNOWN, VOTE_FENCED) and (
            self.voted_id < 0 or (listed and self.voted_id not in self.voters)
        ):
            return (
                f"voted_id {self.voted_id} is not one of the voters {list(self.voters)}, "
                "-1 (none), -2 (unknown) or -3 (fenced)"
            )
        if self.leader_id != NO_LEADER and (self.leader_id < 0 or (listed and self.leader_id not in self.voters)):
            return f"leader_id {self.leader_id} is not one of the voters {list(self.voters)} or -1 (none)"
        return None


@dataclass(frozen=True, slots=True)
class Envelope:
    """One message between nodes. Requests get a correlation id from their sender; the
    response to a request carries the same correlation id (the driver maps it to the pending
    gRPC call). ``source``/``destination`` are node ids."""

    source: int
    destination: int
    correlation_id: int
    message: RaftMessage


@dataclass(frozen=True, slots=True)
class SnapshotImage:
    """A snapshot: every record below ``end_offset``; ``epoch`` is the epoch of the last of
    them. ``data`` is the snapshot file's bytes (opaque to the core, which only chunks it)."""

    end_offset: int
    epoch: int
    data: bytes


@dataclass(frozen=True, slots=True)
class SoftState:
    """Volatile facts a driver reacts to (fail pending proposals when the leader changes)."""

    role: Role
    epoch: int
    leader_id: int


class CommittedTruncationError(Exception):
    """The log was asked to drop committed offsets (below the high watermark). Never legal
    (DESIGN.md §9.11): the node must stop rather than lose acknowledged data."""

    def __init__(self, node_id: int, offset: int, high_watermark: int, reason: str) -> None:
        super().__init__(
            f"node {node_id} refuses to truncate its log to offset {offset}: offsets [{offset}, {high_watermark}) "
            f"are below the high watermark {high_watermark} and committed ({reason})"
        )
        self.node_id = node_id
        self.offset = offset
        self.high_watermark = high_watermark


class UnrepairableEntryError(Exception):
    """A batch of this node's log is damaged and no other voter holds an intact copy of it
    (docs/storage.md, "Repair from the quorum"): the node stops rather than drop or serve it."""

    def __init__(
        self, node_id: int, base_offset: int, epoch: int, high_watermark: int, answers: dict[int, str]
    ) -> None:
        told = ", ".join(f"node {peer}: {answer}" for peer, answer in sorted(answers.items()))
        super().__init__(
            f"node {node_id} holds a damaged batch at offset {base_offset} (epoch {epoch}, high watermark "
            f"{high_watermark}) and no other voter holds an intact copy ({told}): stopping, the log is left as it is"
        )
        self.node_id = node_id
        self.base_offset = base_offset
        self.epoch = epoch


class UnrecoverableStateError(Exception):
    """This node holds no state below its log (its newest snapshot damaged with no fallback) and
    neither do enough other voters -- a majority with it -- that no leader can ever be elected to
    send it one: a node without that state grants no vote and stands in no election (docs/storage.md,
    "A damaged snapshot with no fallback"), and none of them follows a leader. The node stops
    rather than wait for ever; its files are left as they are."""

    def __init__(
        self,
        node_id: int,
        epoch: int,
        end_offset: int,
        snapshot_epoch: int,
        missing: list[int],
        holding: list[int],
        silent: list[int],
    ) -> None:
        others = [v for v in missing if v != node_id]
        lacking = ", ".join(f"node {v}" for v in others) or "no other voter"
        where = f"the state below offset {end_offset} is on no voter that answered"
        if holding:
            where = f"voters {', '.join(map(str, holding))} hold it but cannot be elected without the others' votes"
        if silent:
            where += f" (voters {', '.join(map(str, silent))} not heard from)"
        super().__init__(
            f"node {node_id} (epoch {epoch}) holds no state below offset {end_offset} (snapshot epoch "
            f"{snapshot_epoch}: its snapshot damaged with no fallback), nor does {lacking}; {where}, so no "
            f"leader can be elected to send it: stopping, the files are left as they are (restore a voter's "
            f"snapshot file; docs/storage.md, Damaged disk)"
        )
        self.node_id = node_id
        self.epoch = epoch
        self.end_offset = end_offset
        self.snapshot_epoch = snapshot_epoch
        self.missing = missing
        self.holding = holding
        self.silent = silent


class NotLeaderError(Exception):
    """A proposal reached a node that is not the leader (or a leader that is resigning)."""

    def __init__(self, leader_id: int, epoch: int) -> None:
        super().__init__(f"not the leader (leader {leader_id}, epoch {epoch})")
        self.leader_id = leader_id
        self.epoch = epoch


class ProposalLimitError(Exception):
    """Too many uncommitted batches: back off (a defined limit, not an unbounded queue)."""
