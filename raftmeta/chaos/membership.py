"""The ``membership`` fault: voter changes (KIP-853) made on a running quorum, as an operator would.

Variants:

- ``add``: an observer that is up becomes a voter (AddRaftVoter);
- ``remove``: a voter leaves (RemoveRaftVoter) -- a voter that is down if there is one (the
  operator removing a dead controller), otherwise the leader half of the time;
- ``replace``: an observer is added, then a voter removed (the operator's replacement: the quorum
  keeps its strength throughout);
- ``replace-crashed``: a voter is killed (SIGKILL; the leader half of the time), then replaced
  while it is down -- an observer added, the dead voter removed -- and restarted afterwards, when
  it finds itself an observer. Faults otherwise run one at a time, so this is the variant that
  changes the voters with a node down.

The target choice (:func:`choose_changes`) is pure, so it is tested on its own. It keeps the voter
count between 1 and the number of nodes, falls back to the other kind of change when the variant's
is impossible (no observer to add, one voter left), and prefers targets after which the voters
that are up are still a majority of the new set -- the change must commit on a majority of the
*new* set. When no target allows that (other faults have nodes down), it still makes the change
and says so: the change is then expected to wait, and its outcome shows what happened.

:class:`VoterRequest` is one AddRaftVoter / RemoveRaftVoter attempt and its answer, as the
nemesis records it; the checks (:mod:`raftmeta.chaos.voter_log`) judge the acknowledged ones.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

ChangeKind = Literal["add", "remove"]
Outcome = Literal["ok", "fail", "unknown"]
VARIANTS: tuple[str, ...] = ("add", "remove", "replace", "replace-crashed")
# Fewer voters than this and killing one leaves no majority: replace-crashed replaces a live one.
CRASH_VOTERS_MIN = 3


@dataclass(frozen=True, slots=True)
class VoterChange:
    kind: ChangeKind
    node: int

    def apply(self, voters: Collection[int]) -> list[int]:
        """The voter set after this change."""
        if self.kind == "add":
            return sorted({*voters, self.node})
        return sorted(set(voters) - {self.node})

    def __str__(self) -> str:
        return f"{self.kind} node {self.node}"


@dataclass(frozen=True, slots=True)
class MembershipPlan:
    changes: tuple[VoterChange, ...]
    # False: no choice left a majority of the new set up; the change is made anyway (and recorded).
    can_commit: bool
    note: str = ""  # why the changes differ from the variant's, or why they may not commit

    def describe(self) -> str:
        what = ", then ".join(map(str, self.changes)) or "nothing to change"
        return f"{what}{f' ({self.note})' if self.note else ''}"


def majority(count: int) -> int:
    return count // 2 + 1


def committable(voters: Collection[int], down: Collection[int]) -> bool:
    """Whether the voters that are up are a majority of ``voters`` (the set a change commits on)."""
    return sum(1 for v in voters if v not in down) >= majority(len(voters))


def choose_changes(
    variant: str,
    voters: Sequence[int],
    nodes: Sequence[int],
    down: Collection[int],
    leader: int,
    rng: random.Random,
) -> MembershipPlan:
    """The voter changes a ``membership`` fault of ``variant`` makes, given the voter set in force,
    every node of the cluster, the nodes that are down (killed or paused) and the leader."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown membership variant {variant!r}: choose from {','.join(VARIANTS)}")
    observers = [n for n in nodes if n not in voters and n not in down]  # only a live observer catches up
    can_add = bool(observers)
    can_remove = len(voters) > 1  # the last voter cannot go (VOTER_NOT_FOUND)
    note = ""
    if variant == "replace-crashed":
        variant = "replace"  # the caller killed the voter already: it is in ``down``
    if variant in ("add", "replace") and not can_add:
        if not can_remove:
            return MembershipPlan((), True, "no observer is up and one voter is left")
        variant, note = "remove", "no observer is up to add: remove instead"
    elif variant == "remove" and not can_remove:
        variant, note = "add", "one voter is left: add instead"
    if variant == "add":
        added, safe = _pick_add(observers, voters, down, rng)
        return MembershipPlan((VoterChange("add", added),), safe, _join(note, safe))
    if variant == "remove":
        removed, safe = _pick_remove(voters, down, leader, rng)
        return MembershipPlan((VoterChange("remove", removed),), safe, _join(note, safe))
    added, safe_add = _pick_add(observers, voters, down, rng)
    grown = [*voters, added]
    removed, safe_remove = _pick_remove([v for v in grown if v != added], down, leader, rng, within=grown)
    safe = safe_add and safe_remove
    return MembershipPlan((VoterChange("add", added), VoterChange("remove", removed)), safe, _join(note, safe))


def choose_victim(voters: Sequence[int], leader: int, rng: random.Random) -> int | None:
    """The voter ``replace-crashed`` kills before replacing it: the leader half of the time. None
    when too few voters are left for the others to stay a majority."""
    if len(voters) < CRASH_VOTERS_MIN:
        return None
    if leader in voters and rng.random() < 0.5:
        return leader
    return rng.choice([v for v in voters if v != leader] or list(voters))


def _join(note: str, safe: bool) -> str:
    if safe:
        return note
    return "; ".join(filter(None, [note, "too few voters up for a majority of the new set: it may not commit"]))


def _pick_add(
    observers: Sequence[int], voters: Sequence[int], down: Collection[int], rng: random.Random
) -> tuple[int, bool]:
    # Adding a live node never lowers the share of live voters below a majority unless it was
    # already below one; the choice among observers is then free.
    added = rng.choice(list(observers))
    return added, committable([*voters, added], down)


def _pick_remove(
    candidates: Sequence[int],
    down: Collection[int],
    leader: int,
    rng: random.Random,
    *,
    within: Sequence[int] | None = None,
) -> tuple[int, bool]:
    """A voter to remove from ``within`` (default: ``candidates``, the voters that may go)."""
    voters = list(within if within is not None else candidates)
    safe = [c for c in candidates if committable([v for v in voters if v != c], down)]
    pool = safe or list(candidates)
    dead = [c for c in pool if c in down]
    if dead:
        return rng.choice(dead), bool(safe)  # replace a crashed voter: what an operator does first
    if leader in pool and rng.random() < 0.5:
        return leader, bool(safe)  # the leader removes itself, then hands over
    others = [c for c in pool if c != leader] or pool
    return rng.choice(others), bool(safe)


@dataclass(frozen=True, slots=True)
class VoterRequest:
    """One AddRaftVoter / RemoveRaftVoter attempt. ``outcome``: ``ok`` (committed: the leader
    answers once the change commits), ``fail`` (a definite refusal, ``error`` names Kafka's code;
    REQUEST_TIMED_OUT is retried), ``unknown`` (no answer: the change may or may not apply)."""

    fault_id: int
    attempt: int
    kind: ChangeKind
    node: int
    invoke_ms: int
    complete_ms: int
    outcome: Outcome
    error: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)
