"""The voter-set history check of verify (KIP-853), on rows as the data source yields them."""

from __future__ import annotations

from typing import Any

from raftmeta.jobs.voters import check_voter_history


def election(offset: int, leader: int, epoch: int, voters: list[int]) -> dict[str, Any]:
    return {"offset": offset, "record_type": "leader_change", "leader": leader, "leader_epoch": epoch, "voters": voters}


def change(offset: int, voters: list[int]) -> dict[str, Any]:
    return {"offset": offset, "record_type": "voters", "leader": None, "leader_epoch": None, "voters": voters}


def test_one_change_at_a_time_and_electable_leaders_pass() -> None:
    rows = [
        election(0, 1, 1, [1, 2, 3]),
        change(5, [1, 2, 3, 4]),
        change(9, [2, 3, 4]),  # node 1 removed itself ...
        election(12, 1, 2, [2, 3, 4]),  # ... and won again before the change committed (thesis 4.2.2)
        election(20, 3, 3, [2, 3, 4]),
    ]
    check = check_voter_history(rows)
    assert check.passed, check.detail
    assert "2 voter changes" in check.detail and "final voters [2, 3, 4]" in check.detail


def test_two_voters_changed_at_once_fails_naming_the_offset() -> None:
    check = check_voter_history([election(0, 1, 1, [1, 2, 3]), change(5, [1, 4, 5])])
    assert not check.passed
    assert "offset 5: voters [1, 2, 3] -> [1, 4, 5], not one change" in check.detail


def test_a_leader_outside_the_voters_fails() -> None:
    check = check_voter_history(
        [election(0, 1, 1, [1, 2, 3]), change(4, [1, 2, 3, 4]), election(9, 7, 2, [1, 2, 3, 4])]
    )
    assert not check.passed and "leader 7 of epoch 2 is not a voter" in check.detail


def test_an_election_naming_another_set_than_the_log_fails() -> None:
    check = check_voter_history([election(0, 1, 1, [1, 2, 3]), change(4, [1, 2]), election(9, 2, 2, [1, 2, 3])])
    assert not check.passed and "lists voters [1, 2, 3], in force [1, 2]" in check.detail
