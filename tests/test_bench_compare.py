"""raftmeta beside KRaft (raftmeta/bench/compare.py): each ratio is raftmeta's figure over KRaft's,
good at >= 1.0 for throughputs and <= 1.0 for latencies, times and costs; a comparison's document
holds both sides' medians over the rounds and the median of the rounds' own ratios."""

from __future__ import annotations

from typing import Any

from raftmeta.bench.compare import (
    COMMIT_BETTER,
    failover_better,
    lookup,
    meets_target,
    ratios,
    side_by_side,
)


def side(ops: float, p50: float, errors: dict[str, int] | None = None) -> dict[str, Any]:
    return {
        "ops_per_s": ops,
        "records_per_s": 3 * ops,
        "latency_ms": {"mean": p50, "p50": p50, "p99": 2 * p50},
        "node_cpu_ms_per_op": 1.0,
        "leader_cpu_ms_per_op": 0.5,
        "errors": errors or {},
    }


def test_ratios_are_raftmeta_over_kraft_per_figure() -> None:
    ratio = ratios(side(900.0, 2.0), side(300.0, 8.0), COMMIT_BETTER)
    assert ratio["ops_per_s"] == 3.0
    assert ratio["records_per_s"] == 3.0
    assert ratio["latency_ms.p50"] == 0.25
    assert ratio["latency_ms.p99"] == 0.25
    assert ratio["node_cpu_ms_per_op"] == 1.0
    assert set(ratio) == set(COMMIT_BETTER)


def test_a_missing_or_zero_figure_has_no_ratio() -> None:
    ours = side(900.0, 2.0)
    theirs = side(0.0, 8.0)
    theirs["latency_ms"]["p99"] = None
    del theirs["node_cpu_ms_per_op"]
    ratio = ratios(ours, theirs, COMMIT_BETTER)
    assert ratio["ops_per_s"] is None  # KRaft acknowledged nothing: no ratio, not infinity
    assert ratio["latency_ms.p99"] is None
    assert ratio["node_cpu_ms_per_op"] is None
    assert ratio["latency_ms.p50"] == 0.25


def test_meeting_the_target_depends_on_the_figures_direction() -> None:
    better = {"ops_per_s": "higher", "latency_ms.p50": "lower", "records_per_s": "higher"}
    verdicts = meets_target({"ops_per_s": 1.0, "latency_ms.p50": 1.2, "records_per_s": None}, better)  # type: ignore[arg-type]
    assert verdicts == {"ops_per_s": True, "latency_ms.p50": False, "records_per_s": None}
    assert meets_target({"ops_per_s": 0.99, "latency_ms.p50": 0.5}, better) == {  # type: ignore[arg-type]
        "ops_per_s": False,
        "latency_ms.p50": True,
    }


def test_the_document_has_both_sides_medians_and_the_median_of_same_round_ratios() -> None:
    rounds = []
    for ours, theirs in (
        (side(900.0, 2.0, {"TimeoutError": 1}), side(300.0, 8.0)),
        (side(1000.0, 3.0), side(250.0, 6.0)),
        (side(800.0, 4.0), side(400.0, 4.0)),
    ):
        rounds.append(
            {
                "order": ["raftmeta", "kraft"],
                "raftmeta": ours,
                "kraft": theirs,
                "ratio": ratios(ours, theirs, COMMIT_BETTER),
            }
        )
    document = side_by_side(rounds, COMMIT_BETTER)
    assert set(document) == {"raftmeta", "kraft", "ratio", "ratio_better", "meets_target"}
    assert document["raftmeta"]["ops_per_s"] == 900.0
    assert document["kraft"]["ops_per_s"] == 300.0
    assert document["raftmeta"]["errors"] == {"TimeoutError": 1}  # counts are summed, not medians
    # The rounds' ratios were 3.0, 4.0 and 2.0: their median, not the ratio of the medians.
    assert document["ratio"]["ops_per_s"] == 3.0
    assert document["ratio"]["latency_ms.p50"] == 0.5
    assert document["ratio_better"] == COMMIT_BETTER
    assert document["meets_target"]["ops_per_s"] is True
    assert document["meets_target"]["latency_ms.p50"] is True


def test_one_side_alone_has_no_ratio() -> None:
    document = side_by_side([{"order": ["kraft"], "kraft": side(300.0, 8.0)}], COMMIT_BETTER)
    assert set(document) == {"kraft"}


def test_failover_ratios_cover_every_fault_and_statistic() -> None:
    better = failover_better(["kill", "pause"])
    assert set(better.values()) == {"lower"}
    assert "faults.kill.failover_ms.median" in better and "faults.pause.all_clients_ms.p99" in better
    ours = {"faults": {"kill": {"failover_ms": {"median": 150.0, "p99": 170.0}}}}
    theirs = {"faults": {"kill": {"failover_ms": {"median": 3000.0, "p99": 3400.0}}}}
    ratio = ratios(ours, theirs, better)
    assert ratio["faults.kill.failover_ms.median"] == 0.05
    assert ratio["faults.pause.failover_ms.median"] is None


def test_lookup_follows_dotted_paths() -> None:
    assert lookup({"a": {"b": 1}}, "a.b") == 1
    assert lookup({"a": {"b": 1}}, "a.c") is None
    assert lookup({"a": 1}, "a.b") is None
