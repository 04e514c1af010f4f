"""The chaos history held to the linearizability checker (raftmeta.chaos.linearizable), on
made-up histories: the anomalies rule 9 cannot see, and the timeline a failure writes."""

from __future__ import annotations

from raftmeta.chaos.history import Op, Outcome
from raftmeta.chaos.linearizable import check_linearizable, model_operations


def op(
    op_id: int,
    kind: str,
    topic: str,
    t: tuple[int, int],
    outcome: Outcome = "ok",
    *,
    topic_id: str = "",
    error: str = "",
    count: int = 0,
    worker: int = 0,
) -> Op:
    return Op(op_id, f"req-{op_id}", kind, topic, topic_id, t[0], t[1], outcome, error, worker, count=count)


def test_a_clean_history_is_linearizable() -> None:
    ops = [
        op(1, "create_topic", "e1", (0, 10), topic_id="A", count=2),
        op(2, "create_topic", "e1", (5, 15), "fail", error="TOPIC_ALREADY_EXISTS: exists", count=1, worker=1),
        op(3, "create_partitions", "e1", (20, 30), count=4),
        op(
            4,
            "create_partitions",
            "e1",
            (31, 40),
            "fail",
            error="INVALID_PARTITIONS: The topic e1 currently has 4 partition(s); 3 would not be an increase.",
            count=3,
        ),
        op(5, "read_topic", "e1", (41, 42), topic_id="A"),
        op(6, "delete_topic", "e1", (50, 60), topic_id="A"),
        op(7, "read_topic", "e1", (61, 62)),
        op(8, "reassign_partition", "e1", (1, 2)),  # no effect on existence or counts: left out
        op(9, "create_topic", "bad/x", (0, 1), "fail", error="INVALID_TOPIC_EXCEPTION: name", count=1),
    ]
    assert [o.op_id for o in model_operations(ops)] == [1, 2, 3, 4, 5, 6, 7]
    result = check_linearizable(ops)
    assert result.check.passed, result.check.detail
    assert result.timeline("raftmeta chaos --seed 1") is None


def test_a_delete_seen_then_unseen_fails_with_a_timeline() -> None:
    """What rule 9 (reads of kept topics only) cannot see: a deleted topic read back."""
    ops = [
        op(1, "create_topic", "e1", (0, 10), topic_id="A", count=1),
        op(2, "delete_topic", "e1", (20, 30), topic_id="A", worker=1),
        op(3, "read_topic", "e1", (31, 40), topic_id="A", worker=2),
    ]
    result = check_linearizable(ops)
    assert not result.check.passed
    assert result.check.name == "history-linearizable"
    assert "not linearizable: topic 'e1'" in result.check.detail
    page = result.timeline("raftmeta chaos --seed 7 --report-dir out")
    assert page is not None
    assert "raftmeta chaos --seed 7 --report-dir out" in page
    assert 'class="unplaceable blocked"' in page


def test_reads_disagreeing_about_an_unknown_create_fail() -> None:
    ops = [
        op(1, "create_topic", "k1", (0, 100), "unknown", count=1),
        op(2, "read_topic", "k1", (10, 20), topic_id="A", worker=1),
        op(3, "read_topic", "k1", (30, 40), worker=2),
    ]
    assert not check_linearizable(ops).check.passed


def test_an_unknown_create_of_no_partitions_is_left_out() -> None:
    ops = [op(1, "create_topic", "k1", (0, 100), "unknown", count=0)]
    assert model_operations(ops) == []
    assert check_linearizable(ops).check.passed


def test_invalid_partitions_is_modelled_only_when_the_count_is_not_an_increase() -> None:
    created = op(1, "create_topic", "e1", (0, 10), topic_id="A", count=2)
    over_limit = op(2, "create_partitions", "e1", (20, 30), "fail", count=99999, error="INVALID_PARTITIONS: exceeds")
    not_more = op(3, "create_partitions", "e1", (40, 50), "fail", count=2, error="INVALID_PARTITIONS: already has 2")
    assert [o.op_id for o in model_operations([created, over_limit, not_more])] == [1, 3]
    assert check_linearizable([created, over_limit, not_more]).check.passed
