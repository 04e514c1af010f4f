"""The history checks, the availability figures, the fault plan and torn writes, on made-up
inputs (every check must be able to fail)."""

from __future__ import annotations

import random
from pathlib import Path

from raftmeta.chaos.checker import availability, check_history, spark_history
from raftmeta.chaos.committed import CommittedLog
from raftmeta.chaos.history import Op, read_history, write_history
from raftmeta.chaos.nemesis import FAMILIES, plan_faults
from raftmeta.chaos.torn import append_torn_batch
from raftmeta.records import codec


def op(op_id: int, kind: str, topic: str, topic_id: str, t: tuple[int, int], outcome: str = "ok") -> Op:
    return Op(op_id, f"req-{op_id}", kind, topic, topic_id, t[0], t[1], outcome, "")  # type: ignore[arg-type]


def log_with(topics: dict[str, tuple[str, int]], base_offset: int = 0) -> CommittedLog:
    log = CommittedLog(node_id=1, high_watermark=100, base_offset=base_offset)
    for topic_id, (name, offset) in topics.items():
        log.topics[topic_id] = {offset: name}
        log.live[name] = topic_id
    return log


def failed(verdict_checks: list, name: str) -> bool:  # type: ignore[type-arg]
    return any(c.name == name and not c.passed for c in verdict_checks)


def test_a_clean_history_passes() -> None:
    ops = [op(1, "create_topic", "a", "ID-A", (0, 10)), op(2, "create_topic", "b", "ID-B", (20, 30))]
    log = log_with({"ID-A": ("a", 5), "ID-B": ("b", 9)})
    verdict = check_history(ops, log, {"a": "ID-A", "b": "ID-B"})
    assert verdict.passed, verdict.checks
    assert verdict.lost_acknowledged == []


def test_an_acknowledged_create_missing_from_the_log_is_lost() -> None:
    ops = [op(1, "create_topic", "a", "ID-A", (0, 10)), op(2, "create_topic", "b", "ID-B", (20, 30))]
    verdict = check_history(ops, log_with({"ID-B": ("b", 9)}), {"b": "ID-B"})
    assert verdict.lost_acknowledged == [1]
    assert failed(verdict.checks, "acknowledged-creates-committed")


def test_a_failed_create_that_wrote_its_topic_is_caught() -> None:
    ops = [op(1, "create_topic", "a", "", (0, 10), outcome="fail")]
    log = log_with({"ID-A": ("a", 5)})
    log.request_batch["req-1"] = 4
    log.batch_topics[4] = {"a"}
    assert failed(check_history(ops, log, {"a": "ID-A"}).checks, "failed-creates-wrote-nothing")


def test_creates_out_of_real_time_order_are_caught() -> None:
    # b was invoked after a completed, yet sits at a lower offset.
    ops = [op(1, "create_topic", "a", "ID-A", (0, 10)), op(2, "create_topic", "b", "ID-B", (20, 30))]
    log = log_with({"ID-A": ("a", 9), "ID-B": ("b", 5)})
    assert failed(check_history(ops, log, {"a": "ID-A", "b": "ID-B"}).checks, "creates-in-real-time-order")


def test_concurrent_creates_may_commit_in_either_order() -> None:
    ops = [op(1, "create_topic", "a", "ID-A", (0, 30)), op(2, "create_topic", "b", "ID-B", (10, 20))]
    log = log_with({"ID-A": ("a", 9), "ID-B": ("b", 5)})
    assert check_history(ops, log, {"a": "ID-A", "b": "ID-B"}).passed


def test_a_changed_topic_id_and_an_ineffective_delete_are_caught() -> None:
    ops = [op(1, "create_topic", "a", "ID-A", (0, 10)), op(2, "delete_topic", "b", "ID-B", (20, 30))]
    log = log_with({"ID-A": ("a", 5), "ID-B": ("b", 6)})
    verdict = check_history(ops, log, {"a": "ID-OTHER", "b": "ID-B"})
    ids = next(c for c in verdict.checks if c.name == "topic-ids-stable")
    assert not ids.passed
    assert "ID-OTHER" in ids.detail and "still live" in ids.detail
    assert failed(verdict.checks, "final-state-matches-log")


def test_compacted_deleted_topics_are_unverifiable_not_lost_and_left_out_for_spark() -> None:
    ops = [op(1, "create_topic", "e1", "ID-E", (0, 10)), op(2, "delete_topic", "e1", "ID-E", (20, 30))]
    log = log_with({}, base_offset=50)  # a snapshot at 50, the tape saw nothing below it
    verdict = check_history(ops, log, {})
    assert verdict.lost_acknowledged == []
    assert verdict.unverifiable == [1]
    kept, left_out = spark_history(ops, log)
    assert kept == [] and left_out == 2


def test_a_delete_invoked_before_a_recreate_may_remove_the_new_topic() -> None:
    """Seen in a chaos run: delete e1 (invoked at 20, retried under faults) completed at 60 and
    removed the e1 re-created at 40; with the records compacted that create is unverifiable, and
    the Spark history leaves it out instead of calling it lost."""
    ops = [
        op(1, "create_topic", "e1", "ID-1", (0, 10)),
        op(2, "delete_topic", "e1", "ID-2", (20, 60)),
        op(3, "create_topic", "e1", "ID-2", (40, 45)),
    ]
    log = log_with({}, base_offset=80)
    verdict = check_history(ops, log, {})
    assert verdict.lost_acknowledged == []
    assert sorted(verdict.unverifiable) == [1, 3]
    kept, left_out = spark_history(ops, log)
    assert kept == [] and left_out == 3


def test_a_delete_that_completed_before_a_create_cannot_excuse_it() -> None:
    ops = [op(1, "delete_topic", "e1", "ID-0", (0, 10)), op(2, "create_topic", "e1", "ID-2", (20, 30))]
    verdict = check_history(ops, log_with({}, base_offset=80), {})
    assert verdict.lost_acknowledged == [2]


def test_availability_finds_the_longest_stretch_without_an_ok_op() -> None:
    ops = [
        op(1, "create_topic", "a", "ID-A", (1000, 1100)),
        op(2, "create_topic", "b", "", (1200, 4000), outcome="unknown"),
        op(3, "create_topic", "c", "ID-C", (1300, 5100)),
    ]
    figures = availability(ops, [(1150, 5000, "kill", "SIGKILL leader")], 1000, 6000)
    assert figures["longest_unavailable_ms"] == 4000
    assert figures["longest_unavailable_from_ms"] == 100
    (window,) = figures["windows"]
    assert (window["ops"], window["ok"], window["ok_rate"]) == (2, 1, 0.5)


def test_history_lines_round_trip(tmp_path: Path) -> None:
    ops = [op(1, "create_topic", "a", "ID-A", (0, 10)), op(2, "delete_topic", "a", "", (5, 8), outcome="unknown")]
    write_history(tmp_path / "h.jsonl", ops)
    assert read_history(tmp_path / "h.jsonl") == ops


def test_the_plan_is_a_function_of_the_seed_and_covers_every_family_in_a_minute() -> None:
    kwargs = {"fetch_timeout_s": 1.0, "session_timeout_s": 4.5}
    plan = plan_faults(42, FAMILIES, 60.0, **kwargs)
    assert plan == plan_faults(42, FAMILIES, 60.0, **kwargs)
    assert plan != plan_faults(43, FAMILIES, 60.0, **kwargs)
    assert {step.family for step in plan} == set(FAMILIES)
    assert sum(step.hold_s + step.gap_s for step in plan) <= 60.0
    pauses = [s for s in plan if s.family == "pause"]
    assert all(s.hold_s > 1.0 for s in pauses), "a pause outlasts the fetch timeout"


def test_a_torn_write_is_a_strict_prefix_of_a_batch_after_the_valid_log(tmp_path: Path) -> None:
    log_dir = tmp_path / "__cluster_metadata-0"
    log_dir.mkdir()
    batches = [codec.encode_batch(0, 1, [b"x"], 0), codec.encode_batch(1, 1, [b"y", b"z"], 0)]
    (log_dir / "00000000000000000000.log").write_bytes(b"".join(batches))
    torn = append_torn_batch(tmp_path, random.Random(3))
    assert torn is not None and torn.base_offset == 3
    assert 0 < torn.bytes_written < torn.batch_bytes
    data = (log_dir / "00000000000000000000.log").read_bytes()
    headers, valid, error = codec.scan_valid_prefix(data)
    assert [h.base_offset for h in headers] == [0, 1]
    assert valid == sum(len(b) for b in batches)
    assert error is not None and len(data) == valid + torn.bytes_written


def test_reads_that_see_what_was_acknowledged_pass() -> None:
    ops = [
        op(1, "read_topic", "k1", "", (0, 5)),  # before the create: nothing to see
        op(2, "create_topic", "k1", "ID-K", (10, 20)),
        op(3, "read_topic", "k1", "", (15, 25)),  # concurrent with the create: may miss it
        op(4, "read_topic", "k1", "ID-K", (30, 40)),
        op(5, "create_topic", "k2", "", (50, 60), "unknown"),
        op(6, "read_topic", "k2", "ID-U", (55, 70)),  # the unknown create may have applied
    ]
    verdict = check_history(ops, log_with({"ID-K": ("k1", 5)}), None)
    assert not failed(verdict.checks, "reads-linearizable")


def test_a_read_that_misses_an_acknowledged_create_fails() -> None:
    ops = [op(1, "create_topic", "k1", "ID-K", (10, 20)), op(2, "read_topic", "k1", "", (21, 30))]
    verdict = check_history(ops, log_with({"ID-K": ("k1", 5)}), None)
    [check] = [c for c in verdict.checks if c.name == "reads-linearizable"]
    assert not check.passed and "found nothing" in check.detail


def test_a_read_that_sees_a_failed_create_or_another_id_fails() -> None:
    phantom = [op(1, "create_topic", "k1", "", (10, 20), "fail"), op(2, "read_topic", "k1", "ID-X", (21, 30))]
    assert failed(check_history(phantom, log_with({}), None).checks, "reads-linearizable")
    other = [op(1, "create_topic", "k1", "ID-K", (10, 20)), op(2, "read_topic", "k1", "ID-X", (21, 30))]
    assert failed(check_history(other, log_with({"ID-K": ("k1", 5)}), None).checks, "reads-linearizable")
