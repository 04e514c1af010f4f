"""The linearizability checker on hand-written histories: each anomaly it must find, each freedom
an unknown outcome allows, its witnesses, its budget and its refusal of malformed operations."""

from __future__ import annotations

import pytest

from raftmeta.lincheck import HistoryError, Operation, check_history, step
from raftmeta.lincheck.checker import failing_window
from raftmeta.lincheck.codec import operation_from_json, operation_to_json
from raftmeta.lincheck.timeline import render_failure
from tests.lincheck.histories import linearizable_history


def op(
    op_id: int,
    kind: str,
    invoke: int,
    complete: int | None,
    result: str = "ok",
    *,
    arg: int = 0,
    observed: int | None = None,
    topic: str = "a",
    client: int | None = None,
) -> Operation:
    if kind in ("create", "create_partitions") and arg == 0:
        arg = 1
    return Operation(
        op_id, op_id if client is None else client, topic, kind, invoke, complete, result, arg=arg, observed=observed
    )


def verdict(*ops: Operation) -> str:
    return check_history(ops).verdict


def test_sequential_history_is_linearizable_with_its_own_order() -> None:
    result = check_history(
        [
            op(1, "create", 0, 1, arg=2),
            op(2, "describe", 2, 3, observed=2),
            op(3, "create_partitions", 4, 5, arg=4),
            op(4, "create_partitions", 6, 7, "invalid_partitions", arg=4),
            op(5, "delete", 8, 9),
            op(6, "delete", 10, 11, "unknown_topic_or_partition"),
            op(7, "create_partitions", 12, 13, "unknown_topic_or_partition", arg=2),
            op(8, "describe", 14, 15, observed=0),
        ]
    )
    assert result.verdict == "ok"
    assert result.witness == {"a": (1, 2, 3, 4, 5, 6, 7, 8)}


def test_stale_read_after_a_completed_delete_is_illegal() -> None:
    result = check_history([op(1, "create", 0, 1, arg=2), op(2, "delete", 2, 3), op(3, "describe", 4, 5, observed=2)])
    assert result.verdict == "illegal"
    [failure] = result.failures
    assert (failure.prefix, failure.state, failure.unplaceable, failure.blocked) == ((1, 2), 0, (3,), 3)
    assert "not linearizable: topic 'a'" in result.describe()


def test_concurrent_read_may_see_either_side() -> None:
    create = op(1, "create", 0, 10, arg=3)
    assert verdict(create, op(2, "describe", 5, 6, observed=0)) == "ok"
    assert verdict(create, op(2, "describe", 5, 6, observed=3)) == "ok"
    assert verdict(create, op(2, "describe", 5, 6, observed=2)) == "illegal"  # a count no history explains


def test_intervals_are_closed_touching_operations_are_concurrent() -> None:
    assert verdict(op(1, "create", 0, 10), op(2, "describe", 10, 12, observed=0)) == "ok"
    assert verdict(op(1, "create", 0, 10), op(2, "describe", 11, 12, observed=0)) == "illegal"


def test_a_read_seen_then_unseen_is_illegal_even_when_the_create_is_unknown() -> None:
    """The anomaly the read-only rule missed: two reads in real-time order disagree about a
    create whose outcome was unknown."""
    create = op(1, "create", 0, None, "unknown", arg=2)
    first_unseen = (op(2, "describe", 5, 6, observed=0), op(3, "describe", 7, 8, observed=2))
    first_seen = (op(2, "describe", 5, 6, observed=2), op(3, "describe", 7, 8, observed=0))
    assert verdict(create, *first_unseen) == "ok"  # absent, then it took effect
    assert verdict(create, *first_seen) == "illegal"


def test_unknown_outcome_may_take_effect_after_the_client_gave_up_or_never() -> None:
    late = op(1, "create", 0, 5, "unknown", arg=1)
    assert verdict(late, op(2, "describe", 20, 21, observed=0), op(3, "describe", 30, 31, observed=1)) == "ok"
    assert verdict(late, op(2, "describe", 20, 21, observed=0)) == "ok"  # never took effect
    assert verdict(op(1, "delete", 0, 1, "unknown"), op(2, "describe", 3, 4, observed=0)) == "ok"
    # Not before its invocation.
    assert verdict(op(1, "describe", 0, 1, observed=1), op(2, "create", 2, None, "unknown", arg=1)) == "illegal"


def test_double_create_and_lost_create_are_illegal() -> None:
    assert verdict(op(1, "create", 0, 1), op(2, "create", 2, 3)) == "illegal"
    assert verdict(op(1, "create", 0, 1), op(2, "delete", 0, 3), op(3, "create", 2, 5)) == "ok"
    assert verdict(op(1, "create", 0, 1, arg=2), op(2, "describe", 2, 3, observed=0)) == "illegal"


def test_a_create_refused_because_the_topic_exists_needs_no_count() -> None:
    """The chaos workload's invalid-on-purpose create of 0 partitions, on a name that exists, is
    answered TOPIC_ALREADY_EXISTS: still a fact about the state (the topic exists)."""
    refused = Operation(2, 2, "a", "create", 2, 3, "topic_already_exists", arg=0)
    assert verdict(op(1, "create", 0, 1), refused) == "ok"
    assert verdict(refused) == "illegal"  # nothing had created "a"
    with pytest.raises(HistoryError, match="must be >= 1 for create"):
        Operation(3, 3, "a", "create", 0, 1, "ok", arg=0)


def test_create_partitions_follows_kafka() -> None:
    created = op(1, "create", 0, 1, arg=3)
    assert verdict(created, op(2, "create_partitions", 2, 3, "invalid_partitions", arg=3)) == "ok"
    assert verdict(created, op(2, "create_partitions", 2, 3, "invalid_partitions", arg=2)) == "ok"
    assert verdict(created, op(2, "create_partitions", 2, 3, arg=3)) == "illegal"  # already has 3
    assert verdict(op(1, "create_partitions", 0, 1, arg=3)) == "illegal"  # no such topic
    assert verdict(op(1, "create_partitions", 0, 1, "unknown_topic_or_partition", arg=3)) == "ok"


def test_topics_are_checked_apart() -> None:
    result = check_history(
        [
            op(1, "create", 0, 1, topic="a"),
            op(2, "describe", 2, 3, observed=0, topic="b"),
            op(3, "create", 4, 5, topic="b", arg=2),
            op(4, "describe", 6, 7, observed=1, topic="b"),  # stale: b has 2 partitions
        ]
    )
    assert result.verdict == "illegal"
    assert result.witness == {"a": (1,)}
    assert [f.topic for f in result.failures] == ["b"]


def test_witness_is_a_legal_order_that_respects_real_time() -> None:
    for seed in range(100):
        ops = linearizable_history(seed)
        result = check_history(ops)
        assert result.verdict == "ok", seed
        by_id = {o.op_id: o for o in ops}
        for topic, order in result.witness.items():
            assert sorted(order) == sorted(o.op_id for o in ops if o.topic == topic)
            state = 0
            for position, op_id in enumerate(order):
                ok, state = step(state, by_id[op_id])
                assert ok, (seed, op_id)
                later = order[position + 1 :]
                # Nothing placed after this operation completed before it was invoked.
                assert not any(completed_before(by_id[o], by_id[op_id].invoke) for o in later), (seed, op_id)


def completed_before(o: Operation, time: int) -> bool:
    return not o.open_ended and o.complete is not None and o.complete < time


def test_budget_exhausted_is_unknown_not_a_hang() -> None:
    # Many concurrent creates and deletes, then a read no order explains: the search must explore.
    ops = [op(i, "create" if i % 2 else "delete", 0, 100, "unknown") for i in range(1, 16)]
    ops.append(op(99, "describe", 200, 201, observed=7))
    result = check_history(ops, budget=50)
    assert result.verdict == "unknown"
    assert result.exhausted == ("a",)
    assert result.describe() == "unknown: budget exhausted on topics a"
    assert check_history(ops).verdict == "illegal"


def test_failing_window_holds_the_state_setter_and_the_unplaceable() -> None:
    ops = [
        op(1, "create", 0, 1, arg=2),
        op(2, "describe", 2, 3, observed=2),
        op(3, "delete", 10, 11),
        op(4, "describe", 12, 13, observed=2),
        op(5, "describe", 20, 21, observed=0),
    ]
    [failure] = check_history(ops).failures
    assert [o.op_id for o in failing_window(ops, failure)] == [3, 4]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"kind": "rename"}, "kind 'rename' is not one of"),
        (
            {"result": "topic_already_exists", "kind": "delete"},
            "result 'topic_already_exists' is not an outcome of delete",
        ),
        ({"arg": 0}, "arg (a partition count) must be >= 1 for create"),
        ({"complete": None}, "complete may be missing only when the result is unknown"),
        ({"complete": 1, "invoke": 5}, "complete 1 is before invoke 5"),
        ({"observed": 1}, "observed is only for a describe that answered"),
        ({"kind": "describe", "arg": 0}, "observed must be 0 (absent), a partition count or -1 (listed)"),
    ],
)
def test_malformed_operations_are_refused_naming_the_field(fields: dict[str, object], message: str) -> None:
    data: dict[str, object] = {
        "op_id": 7,
        "client": 0,
        "topic": "a",
        "kind": "create",
        "invoke": 0,
        "complete": 2,
        "result": "ok",
        "arg": 1,
    }
    data.update(fields)
    with pytest.raises(HistoryError, match=r"^operation 7: ") as raised:
        operation_from_json(data)
    assert message in str(raised.value)


def test_codec_round_trips_and_refuses_unknown_fields() -> None:
    for o in linearizable_history(3):
        assert operation_from_json(operation_to_json(o)) == o
    with pytest.raises(HistoryError, match="missing field"):
        operation_from_json({"op_id": 1})
    with pytest.raises(HistoryError, match="unknown field"):
        operation_from_json({**operation_to_json(op(1, "create", 0, 1)), "colour": "red"})
    with pytest.raises(HistoryError, match="invoke must be an integer"):
        operation_from_json({**operation_to_json(op(1, "create", 0, 1)), "invoke": "0"})


def test_duplicate_operation_ids_are_refused() -> None:
    with pytest.raises(HistoryError, match="op_id appears twice"):
        check_history([op(1, "create", 0, 1), op(1, "describe", 2, 3, observed=1)])


def test_a_listing_sees_presence_not_the_count() -> None:
    created = op(1, "create", 0, 1, arg=3)
    assert verdict(created, op(2, "describe", 2, 3, observed=-1)) == "ok"
    assert verdict(op(2, "describe", 2, 3, observed=-1)) == "illegal"  # listed, never created
    deleted = (created, op(2, "delete", 2, 3))
    assert verdict(*deleted, op(3, "describe", 4, 5, observed=-1)) == "illegal"  # resurrected


def test_timeline_shows_the_failing_window_self_contained() -> None:
    ops = [
        op(1, "create", 0, 1, arg=2, client=0),
        op(2, "describe", 2, 3, observed=2, client=1),
        op(3, "delete", 10, 11, client=0),
        op(4, "describe", 12, 13, observed=2, client=1),
        op(5, "create", 12, None, "unknown", client=2),
        op(6, "describe", 40, 41, observed=0, client=1),
    ]
    [failure] = check_history(ops).failures
    page = render_failure(ops, failure, title="seed 7: not linearizable", replay="raftmeta sim --seed 7 --plane")
    assert page.startswith("<!DOCTYPE html>")
    assert "raftmeta sim --seed 7 --plane" in page
    assert 'class="unplaceable blocked"' in page  # the stale read: red and outlined
    assert "#4 describe -&gt; 2 partitions" in page
    assert ' open"' in page  # the unknown create: dashed, open-ended
    assert "#6" not in page  # outside the failing window
    assert "http" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")  # nothing fetched


def test_failing_window_shows_the_operation_that_set_the_state() -> None:
    ops = [
        op(1, "create", 0, 1, arg=2),
        op(2, "delete", 2, 3),
        op(3, "delete", 10, 11, "unknown_topic_or_partition"),  # a later write that changed nothing
        op(4, "describe", 20, 21, observed=2),
    ]
    [failure] = check_history(ops).failures
    assert [o.op_id for o in failing_window(ops, failure)] == [2, 3, 4]
