"""The chaos run's metrics rounds (raftmeta/chaos/metrics.py) from in-memory scrapes, and the
report's latency panel drawn from them."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import generate_latest

from raftmeta.chaos.metrics import summarize
from raftmeta.metrics.node import NodeMetrics
from raftmeta.metrics.scrape import Scrape, parse


def scrape(leader: int, epoch: int, changes: int, latencies: tuple[float, ...]) -> Scrape:
    metrics = NodeMetrics()
    for _ in range(changes):
        metrics.role_changed(-1, False, 0.0)
        metrics.role_changed(leader, False, 0.1)
    for i, latency in enumerate(latencies):
        metrics.leader_appended(i + 1, 0.0)
        metrics.committed(i + 1, 1, latency)
    text = generate_latest(metrics.registry).decode()
    # The view-less registry has no gauges: add the two the rounds read.
    text += f"raftmeta_raft_current_leader {leader}\nraftmeta_raft_current_epoch {epoch}\n"
    return parse(text)


def test_a_round_merges_the_leaders_latency_since_the_last_answer() -> None:
    first = {1: scrape(1, 3, 1, (0.002,) * 5), 2: scrape(1, 3, 1, ())}
    opening = summarize(1000, first, {})
    assert opening["nodes"]["1"] == {
        "leader": 1,
        "epoch": 3,
        "leader_changes": 0,
        "repairs": None,  # this scrape carries no repair series
        "damaged_batches": None,
    }
    assert opening["commit_latency_p50_ms"] is None  # nothing to compare with yet
    # Next round: node 1 committed 10 more (fast), node 2 saw a leader change and became leader.
    second = {1: scrape(1, 3, 1, (0.002,) * 5 + (0.0015,) * 10), 2: scrape(2, 4, 2, (0.2,))}
    round_two = summarize(2000, second, first)
    assert round_two["nodes"]["2"]["leader_changes"] == 1
    assert round_two["nodes"]["1"]["leader_changes"] == 0
    assert 1.0 <= round_two["commit_latency_p50_ms"] <= 2.0
    assert round_two["commit_latency_p99_ms"] > 100
    # A restarted node (counters back to zero) adds nothing; a missing node is just absent.
    third = summarize(3000, {1: scrape(1, 3, 0, ())}, second)
    assert third["commit_latency_p50_ms"] is None
    assert set(third["nodes"]) == {"1"}


def test_the_report_draws_the_latency_panel(tmp_path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from raftmeta.chaos.report import _latency_panel

    rounds = [
        {"t_ms": 1000, "nodes": {"1": {"leader": 1, "epoch": 1, "leader_changes": 0}},
         "commit_latency_p50_ms": None, "commit_latency_p99_ms": None},
        {"t_ms": 2000, "nodes": {"1": {"leader": 2, "epoch": 2, "leader_changes": 1}},
         "commit_latency_p50_ms": 1.5, "commit_latency_p99_ms": 9.0},
    ]  # fmt: skip
    fig, axes = plt.subplots()
    _latency_panel(axes, rounds, 0)
    fig.savefig(tmp_path / "panel.png")
    plt.close(fig)
    assert (tmp_path / "panel.png").stat().st_size > 1000
    assert axes.get_yscale() == "log"


def test_a_round_carries_each_nodes_repair_counters() -> None:
    text = "raftmeta_raft_repairs_total 3.0\nraftmeta_raft_damaged_batches 1\n"
    (node,) = summarize(1000, {2: parse(text)}, {})["nodes"].values()
    assert (node["repairs"], node["damaged_batches"]) == (3, 1)
