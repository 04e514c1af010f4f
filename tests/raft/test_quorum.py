"""Table tests for the quorum math (etcd-io/raft quorum/ style)."""

from __future__ import annotations

import pytest

from raftmeta.raft.quorum import VoteResult, VoteTally, majority_offset, majority_size, majority_time


@pytest.mark.parametrize(("voters", "majority"), [(1, 1), (2, 2), (3, 2), (4, 3), (5, 3), (7, 4)])
def test_majority_size(voters: int, majority: int) -> None:
    assert majority_size(voters) == majority


@pytest.mark.parametrize(
    ("offsets", "voters", "expected"),
    [
        ([5], 1, 5),
        ([5, 3, 1], 3, 3),  # the 2nd largest of 3
        ([5, 3], 3, 3),  # a silent voter counts as 0
        ([5], 3, 0),  # the leader alone is no majority
        ([9, 9, 1, 1, 1], 5, 1),
        ([9, 9, 9, 1, 1], 5, 9),
        ([10, 8, 8, 2], 4, 8),  # 4 voters need 3
        ([7, 7], 2, 7),
        ([7, 3], 2, 3),
    ],
)
def test_majority_offset(offsets: list[int], voters: int, expected: int) -> None:
    assert majority_offset(offsets, voters) == expected


def test_majority_offset_refuses_more_offsets_than_voters() -> None:
    # An observer's offset must never be counted (KIP-595: observers do not count for the HW).
    with pytest.raises(AssertionError):
        majority_offset([1, 2, 3, 4], 3)


def test_majority_time_is_the_majority_th_most_recent_fetch() -> None:
    assert majority_time([1000, 900, 100], 3) == 900
    assert majority_time([1000, 100, 50, 40, 30], 5) == 50


@pytest.mark.parametrize(
    ("voters", "granted", "rejected", "result"),
    [
        ((1,), [1], [], VoteResult.WON),
        ((1, 2, 3), [1], [], VoteResult.PENDING),
        ((1, 2, 3), [1, 2], [], VoteResult.WON),
        ((1, 2, 3), [1], [2, 3], VoteResult.LOST),
        ((1, 2, 3, 4), [1, 2], [3, 4], VoteResult.LOST),  # split vote: 2 of 4 is not a majority
        ((1, 2, 3, 4), [1, 2], [3], VoteResult.PENDING),
        ((1, 2, 3, 4, 5), [1], [2, 3], VoteResult.PENDING),
        ((1, 2, 3, 4, 5), [1], [2, 3, 4], VoteResult.LOST),
    ],
)
def test_vote_tally(voters: tuple[int, ...], granted: list[int], rejected: list[int], result: VoteResult) -> None:
    tally = VoteTally(voters)
    for v in granted:
        tally.record(v, True)
    for v in rejected:
        tally.record(v, False)
    assert tally.result() is result


def test_vote_tally_counts_each_voter_once_and_ignores_non_voters() -> None:
    tally = VoteTally((1, 2, 3))
    tally.record(1, True)
    tally.record(9, True)  # an observer or a stranger
    assert tally.result() is VoteResult.PENDING
    tally.record(2, False)
    tally.record(2, True)  # a duplicated, contradicting answer: the first one stands
    assert tally.granted == {1}
    assert tally.rejected == {2}
