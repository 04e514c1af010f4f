"""Quorum math, pure and tiny so it can be table-tested (etcd-io/raft's ``quorum/`` package).

- :func:`majority_size`: how many of n voters make a majority.
- :func:`majority_offset`: the largest offset that a majority of voters has persisted (the
  candidate high watermark; observers are never passed in).
- :func:`majority_time`: the latest time by which a majority had been heard from (check quorum).
- :class:`VoteTally`: a pre-vote or vote round, WON / LOST / PENDING.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable


def majority_size(voter_count: int) -> int:
    assert voter_count >= 1
    return voter_count // 2 + 1


def majority_offset(persisted_offsets: Iterable[int], voter_count: int) -> int:
    """The ``majority_size``-th largest persisted end offset: every offset below it is on a
    majority of voters' disks. Voters not listed count as 0."""
    ordered = sorted(persisted_offsets, reverse=True)
    assert len(ordered) <= voter_count, "more offsets than voters: an observer was counted"
    need = majority_size(voter_count)
    if len(ordered) < need:
        return 0
    return ordered[need - 1]


def majority_time(last_heard_ms: Iterable[int], voter_count: int) -> int:
    """The time by which a majority of voters had last been heard from (the leader counts
    itself as heard now). Check quorum fails once ``now - majority_time > 1.5 x fetch timeout``."""
    return majority_offset(last_heard_ms, voter_count)


class VoteResult(enum.Enum):
    PENDING = "pending"
    WON = "won"
    LOST = "lost"


class VoteTally:
    """One round of (pre-)votes among ``voters``; the candidate's own vote is recorded first."""

    __slots__ = ("granted", "rejected", "voters")

    def __init__(self, voters: tuple[int, ...]) -> None:
        self.voters = voters
        self.granted: set[int] = set()
        self.rejected: set[int] = set()

    def record(self, voter_id: int, granted: bool) -> VoteResult:
        if voter_id in self.voters and voter_id not in self.granted and voter_id not in self.rejected:
            (self.granted if granted else self.rejected).add(voter_id)
        return self.result()

    def result(self) -> VoteResult:
        need = majority_size(len(self.voters))
        if len(self.granted) >= need:
            return VoteResult.WON
        if len(self.voters) - len(self.rejected) < need:
            return VoteResult.LOST
        return VoteResult.PENDING
