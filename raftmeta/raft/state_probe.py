"""A voter without the state below its log asks the other voters whether one can still lead.

A node whose newest snapshot was damaged with no fallback (docs/storage.md, "A damaged snapshot
with no fallback") waits for a leader's snapshot: until it has one it grants no vote and stands
in no election. When a majority of the voters are in that state and none follows a leader, no
leader can ever be elected -- each of them leaves the state only by installing a leader's
snapshot, and an election needs a majority of votes -- and waiting is waiting for ever. Such a
node asks every other voter, a round at a time, with the Fetch it would send its leader; each
answers that it lacks the state too (an error with its log's start as ``snapshot_id``), that it
holds its state (an error), naming the leader it follows if that one answers it, or leads (the
asker follows it). Pure: the core sends and records, this decides.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from raftmeta.raft.types import NO_LEADER
from raftmeta.v1 import errors_pb2, raft_pb2


@dataclass(frozen=True, slots=True)
class NoLeaderPossible:
    """What the answers prove: the voters without their state (this node among them) are a
    majority and none names a leader that could lead. ``silent``: voters with no answer this round
    (a stopped voter's last answer, that it lacked the state, still counts: it can leave that state
    only through a leader)."""

    missing: list[int]
    holding: list[int]
    silent: list[int]


@dataclass(frozen=True, slots=True)
class Answer:
    round: int
    missing: bool
    leader_id: int
    epoch: int


@dataclass(slots=True)
class StateProbe:
    """The rounds of one spell without the state; forgotten when a leader is heard of."""

    round: int = 0
    asked: dict[int, int] = field(default_factory=dict)  # correlation id -> voter, this round
    answers: dict[int, Answer] = field(default_factory=dict)  # voter -> its latest answer

    def new_round(self) -> None:
        self.round += 1
        self.asked.clear()

    def record(self, voter: int, response: raft_pb2.FetchResponse) -> None:
        """File ``voter``'s answer. A leader's own answer is not filed: the asker follows it."""
        if response.error_code == errors_pb2.NONE:
            return
        missing = response.HasField("snapshot_id")
        self.answers[voter] = Answer(self.round, missing, response.leader_id, response.leader_epoch)

    def verdict(self, node_id: int, voters: Sequence[int]) -> NoLeaderPossible | None:
        """What the answers prove, or None: wait, and ask again. Only this round's answers count,
        but for a silent voter's last one that it lacked the state, unless a later epoch has been
        seen since (an election it may have been repaired through). A finding with no silent
        voter is final (a leader would have answered as one); with silent voters a leader out of
        reach may still be in office until its check-quorum timeout -- the caller waits that out."""
        others = [v for v in voters if v != node_id]
        fresh = {v: a for v, a in self.answers.items() if v in others and a.round == self.round}
        newest = max((a.epoch for a in fresh.values()), default=0)
        remembered = {
            v for v, a in self.answers.items() if v in others and v not in fresh and a.missing and a.epoch >= newest
        }
        missing = sorted({node_id, *remembered, *(v for v, a in fresh.items() if a.missing)})
        if any(a.leader_id != NO_LEADER and a.leader_id not in missing for a in fresh.values()):
            return None  # one follows a live leader: the asker hears of it too
        if len(missing) <= len(voters) // 2:
            return None
        holding = [v for v in others if v in fresh and not fresh[v].missing]
        return NoLeaderPossible(missing, holding, [v for v in others if v not in fresh])
