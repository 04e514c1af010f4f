"""Every legal role transition is listed (QuorumState); every other one is refused loudly."""

from __future__ import annotations

import itertools

import pytest

from raftmeta.raft.state import LEGAL_TRANSITIONS, EpochState, check_transition
from raftmeta.raft.types import Role

LEGAL = [
    (Role.UNATTACHED, Role.UNATTACHED, 1),
    (Role.UNATTACHED, Role.PROSPECTIVE, 0),
    (Role.UNATTACHED, Role.FOLLOWER, 0),
    (Role.PROSPECTIVE, Role.PROSPECTIVE, 0),
    (Role.PROSPECTIVE, Role.CANDIDATE, 1),
    (Role.PROSPECTIVE, Role.FOLLOWER, 0),
    (Role.PROSPECTIVE, Role.UNATTACHED, 1),
    (Role.CANDIDATE, Role.LEADER, 0),
    (Role.CANDIDATE, Role.PROSPECTIVE, 0),
    (Role.CANDIDATE, Role.FOLLOWER, 0),
    (Role.CANDIDATE, Role.UNATTACHED, 1),
    (Role.LEADER, Role.RESIGNED, 0),
    (Role.LEADER, Role.FOLLOWER, 1),
    (Role.LEADER, Role.UNATTACHED, 1),
    (Role.FOLLOWER, Role.PROSPECTIVE, 0),
    (Role.FOLLOWER, Role.FOLLOWER, 1),
    (Role.FOLLOWER, Role.UNATTACHED, 1),
    (Role.RESIGNED, Role.PROSPECTIVE, 0),
    (Role.RESIGNED, Role.FOLLOWER, 1),
    (Role.RESIGNED, Role.UNATTACHED, 1),
]
OBSERVER_LEGAL = [
    (Role.UNATTACHED, Role.OBSERVER, 0),
    (Role.OBSERVER, Role.OBSERVER, 1),
    (Role.OBSERVER, Role.UNATTACHED, 0),
    # A leader that removed itself (KIP-853): it resigns as a non-voter, then observes.
    (Role.LEADER, Role.RESIGNED, 0),
    (Role.RESIGNED, Role.UNATTACHED, 0),
    (Role.RESIGNED, Role.OBSERVER, 1),
]


@pytest.mark.parametrize(("old", "new", "bump"), LEGAL)
def test_legal_voter_transitions(old: Role, new: Role, bump: int) -> None:
    check_transition(EpochState(old, 5), EpochState(new, 5 + bump, leader_id=2 if new is Role.FOLLOWER else -1), True)


@pytest.mark.parametrize(("old", "new", "bump"), OBSERVER_LEGAL)
def test_legal_observer_transitions(old: Role, new: Role, bump: int) -> None:
    check_transition(EpochState(old, 5), EpochState(new, 5 + bump, leader_id=2), False)


def test_the_table_lists_exactly_the_tested_transitions() -> None:
    listed = {(old, new) for old, targets in LEGAL_TRANSITIONS.items() for new in targets}
    tested = {(o, n) for o, n, _ in LEGAL + OBSERVER_LEGAL}
    assert listed == tested


@pytest.mark.parametrize(
    ("old", "new"),
    [(o, n) for o, n in itertools.product(Role, Role) if n not in LEGAL_TRANSITIONS[o]],
)
def test_illegal_transitions_are_refused(old: Role, new: Role) -> None:
    with pytest.raises(AssertionError):
        check_transition(EpochState(old, 5), EpochState(new, 6), True)


@pytest.mark.parametrize(
    ("old", "new", "reason"),
    [
        (EpochState(Role.PROSPECTIVE, 5), EpochState(Role.CANDIDATE, 7), "a candidate bumps the epoch by one"),
        (EpochState(Role.CANDIDATE, 5), EpochState(Role.LEADER, 6), "a leader leads its candidate epoch"),
        (EpochState(Role.FOLLOWER, 5), EpochState(Role.UNATTACHED, 5), "unattached in the same epoch"),
        (EpochState(Role.FOLLOWER, 5), EpochState(Role.FOLLOWER, 4, leader_id=1), "epoch went back"),
        (EpochState(Role.LEADER, 5, leader_id=1), EpochState(Role.FOLLOWER, 5, leader_id=2), "two leaders"),
        (EpochState(Role.UNATTACHED, 5), EpochState(Role.PROSPECTIVE, 6), "pre-vote bumps nothing"),
    ],
)
def test_epoch_rules(old: EpochState, new: EpochState, reason: str) -> None:
    with pytest.raises(AssertionError):
        check_transition(old, new, True)


def test_observers_never_take_voter_roles() -> None:
    for role in (Role.PROSPECTIVE, Role.CANDIDATE, Role.LEADER, Role.FOLLOWER):
        with pytest.raises(AssertionError):
            check_transition(EpochState(Role.UNATTACHED, 5), EpochState(role, 6), False)
