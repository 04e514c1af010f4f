"""Table tests for the log view: epoch index, validate_offset_and_epoch (Kafka's
ReplicatedLog.validateOffsetAndEpoch), truncation and bounded reads."""

from __future__ import annotations

import pytest

from raftmeta.raft.log import LogView, OffsetAndEpoch, Validation, ValidationResult

from .harness import make_log

# Leader log: epochs per offset 0..9 (the Raft paper figure 7 leader, 0-based).
LEADER = [1, 1, 1, 4, 4, 5, 5, 6, 6, 6]


def leader_view() -> LogView:
    return LogView(entries=make_log(LEADER))


@pytest.mark.parametrize(
    ("epoch", "expected"),
    [
        (0, OffsetAndEpoch(0, 0)),
        (1, OffsetAndEpoch(3, 1)),
        (2, OffsetAndEpoch(3, 1)),  # not in the log: the largest epoch below it
        (3, OffsetAndEpoch(3, 1)),
        (4, OffsetAndEpoch(5, 4)),
        (5, OffsetAndEpoch(7, 5)),
        (6, OffsetAndEpoch(10, 6)),
        (9, OffsetAndEpoch(10, 6)),
    ],
)
def test_end_offset_for_epoch(epoch: int, expected: OffsetAndEpoch) -> None:
    assert leader_view().end_offset_for_epoch(epoch) == expected


@pytest.mark.parametrize(
    ("fetch_offset", "last_epoch", "expected"),
    [
        (0, 0, ValidationResult(Validation.VALID, 0, 0)),
        (10, 6, ValidationResult(Validation.VALID, 10, 6)),
        (9, 6, ValidationResult(Validation.VALID, 9, 6)),  # figure 7 (a): behind, consistent
        (4, 4, ValidationResult(Validation.VALID, 4, 4)),  # figure 7 (b)
        (11, 6, ValidationResult(Validation.DIVERGING, 10, 6)),  # figure 7 (c): one extra epoch-6 entry
        (12, 7, ValidationResult(Validation.DIVERGING, 10, 6)),  # figure 7 (d): epoch 7 unknown to the leader
        (7, 4, ValidationResult(Validation.DIVERGING, 5, 4)),  # figure 7 (e): too many epoch-4 entries
        (11, 3, ValidationResult(Validation.DIVERGING, 3, 1)),  # figure 7 (f): epochs 2 and 3 unknown
    ],
)
def test_validate_offset_and_epoch(fetch_offset: int, last_epoch: int, expected: ValidationResult) -> None:
    assert leader_view().validate_offset_and_epoch(fetch_offset, last_epoch) == expected


def test_validate_below_the_log_start_asks_for_the_snapshot() -> None:
    view = leader_view()
    view.trim_prefix(5, 4)
    assert view.start_offset == 5
    assert view.validate_offset_and_epoch(3, 4).kind is Validation.SNAPSHOT
    assert view.validate_offset_and_epoch(5, 1).kind is Validation.SNAPSHOT  # at the start, other epoch
    assert view.validate_offset_and_epoch(5, 4) == ValidationResult(Validation.VALID, 5, 4)
    assert view.validate_offset_and_epoch(11, 3).kind is Validation.SNAPSHOT  # diverges below the start
    assert view.validate_offset_and_epoch(8, 6) == ValidationResult(Validation.VALID, 8, 6)


def test_truncate_removes_whole_batches_and_the_epoch_index() -> None:
    view = leader_view()
    assert view.truncate_to(7) == 7
    assert view.last_epoch == 5
    assert view.end_offset_for_epoch(6) == OffsetAndEpoch(7, 5)
    assert view.truncate_to(0) == 0
    assert view.last_epoch == 0


def test_truncate_inside_a_batch_drops_that_batch() -> None:
    view = LogView()
    from raftmeta.raft.log import Entry
    from raftmeta.records.codec import encode_batch

    view.append(Entry(0, 1, 3, encode_batch(0, 1, [b"a", b"b", b"c"], 0)))
    view.append(Entry(3, 2, 5, encode_batch(3, 2, [b"d", b"e"], 0)))
    assert view.truncate_to(4) == 3
    assert view.truncate_to(1) == 0


def test_read_is_bounded_by_max_bytes_but_returns_at_least_one_batch() -> None:
    view = leader_view()
    size = len(view.entries()[0].data)
    assert len(view.read(0, 1)) == 1
    assert len(view.read(0, 3 * size)) == 3
    assert len(view.read(0, 1 << 20)) == 10
    assert view.read(10, 1 << 20) == []


def test_append_refuses_gaps_and_epoch_regressions() -> None:
    view = leader_view()
    with pytest.raises(AssertionError):
        view.append(make_log([7], start=11)[0])
    with pytest.raises(AssertionError):
        view.append(make_log([5], start=10)[0])
