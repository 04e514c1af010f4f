"""The benchmarks' merge of rounds (raftmeta/bench/results.py): medians of numbers, nested
documents key by key, counts summed, anything else from the first round."""

from __future__ import annotations

from typing import Any

from raftmeta.bench.results import median_of_rounds


def test_one_round_is_given_back_unchanged() -> None:
    document = {"ops": 15040, "ratio": 0.599, "name": "commit", "flag": True, "nested": {"p50": 2.5}, "none": None}
    assert median_of_rounds([document]) == document
    assert isinstance(median_of_rounds([document])["ops"], int)


def test_numbers_are_medians_and_nested_documents_are_followed() -> None:
    rounds = [
        {"ops_per_s": 700.0, "latency_ms": {"p50": 4.0, "p99": 9.0}, "event_loop": "uvloop"},
        {"ops_per_s": 800.0, "latency_ms": {"p50": 2.0, "p99": 7.0}, "event_loop": "uvloop"},
        {"ops_per_s": 760.0, "latency_ms": {"p50": 3.1234, "p99": 8.0}, "event_loop": "uvloop"},
    ]
    assert median_of_rounds(rounds) == {
        "ops_per_s": 760.0,
        "latency_ms": {"p50": 3.123, "p99": 8.0},
        "event_loop": "uvloop",
    }
    # An even number of rounds: the mean of the middle two.
    assert median_of_rounds(rounds[:2])["ops_per_s"] == 750.0


def test_missing_figures_take_the_median_of_the_rounds_that_have_them() -> None:
    rounds: list[dict[str, Any]] = [{"cpu": None}, {"cpu": 1.0}, {"cpu": 3.0}, {}]
    assert median_of_rounds(rounds) == {"cpu": 2.0}
    assert median_of_rounds([{"cpu": None}, {"cpu": None}]) == {"cpu": None}


def test_counts_named_as_summed_are_added_up() -> None:
    rounds: list[dict[str, Any]] = [
        {"errors": {"AioRpcError": 2}},
        {"errors": {}},
        {"errors": {"AioRpcError": 1, "TimeoutError": 4}},
    ]
    assert median_of_rounds(rounds, summed=frozenset({"errors"})) == {"errors": {"AioRpcError": 3, "TimeoutError": 4}}
    # Without the name the counts would be medians of the rounds that saw them.
    assert median_of_rounds(rounds)["errors"] == {"AioRpcError": 1.5, "TimeoutError": 4}
