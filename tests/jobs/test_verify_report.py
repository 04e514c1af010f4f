"""The verify pipeline end to end on one SparkSession: verdict, figures and the written report."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

from raftmeta.cli.main import cli
from raftmeta.jobs.verify import run_verify, write_outputs
from tests.jobs.quorum_logs import append_everywhere, fence_broker, min_isr_config, partition_change, write_quorum

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.mark.spark
def test_verify_passes_on_clean_logs_and_writes_the_report(spark: SparkSession, tmp_path: Path) -> None:
    data = tmp_path / "quorum"
    logs = write_quorum(data, topics=12)
    # Broker 1 is fenced: a partition it led moves to the next ISR member (an ISR short of a live
    # broker would fail isr-full-when-replicas-live).
    change = partition_change(1, 0, leader=2, isr=[2, 3], leader_epoch=1, partition_epoch=1)
    append_everywhere(data, logs, [change, fence_broker(1)])
    steps: list[str] = []
    result = run_verify(spark, str(data), progress=steps.append)
    assert result.passed, [c for c in result.checks if not c.passed]
    assert steps[0] == "checking that 3 nodes' logs agree"
    figures = result.figures
    assert (figures["nodes"], figures["topics"], figures["partitions"], figures["brokers"]) == (3, 12, 36, 6)
    assert figures["replica_skew"] == 1.0
    assert figures["leaders_per_broker"]["1"] == figures["preferred_leaders_per_broker"]["1"] - 1
    assert set(figures["committed_offset_by_node"]) == {"1", "2", "3"}

    paths = write_outputs(result, str(data), tmp_path / "report")
    document = json.loads(paths["json"].read_text())
    assert document["passed"] is True
    assert {c["name"] for c in document["checks"]} >= {"committed-prefixes-agree", "partition-states-valid"}
    html = paths["html"].read_text()
    assert '<b id="consistency" style="color:#1a7f37">PASSED</b>' in html
    assert figures["under_replicated_partitions"] == 1, "the partition whose ISR lost broker 1"
    assert sum(figures["isr_size_counts"].values()) == 36
    for key in ("per_broker_png", "isr_sizes_png"):
        assert paths[key].stat().st_size > 1000
        assert paths[key].name in html
    assert set(figures["log_end_offset_by_node"].values()) != {max(figures["log_end_offset_by_node"].values())}
    assert paths["offsets_png"].name in html, "the lagging node's offsets differ: worth a picture"
    assert f"Data: {data.resolve()}" in html, "the absolute path, not as typed"


@pytest.mark.spark
def test_verify_fails_naming_the_partition(spark: SparkSession, tmp_path: Path) -> None:
    logs = write_quorum(tmp_path, topics=4)
    offset = append_everywhere(tmp_path, logs, [partition_change(3, 1, leader=1, leader_epoch=1, partition_epoch=1)])
    result = run_verify(spark, str(tmp_path))
    assert not result.passed
    failed = {c.name: c.detail for c in result.checks if not c.passed}
    assert list(failed) == ["partition-states-valid"]
    assert f"topic-3-1 at offset {offset}: leader outside the ISR" in failed["partition-states-valid"]


def test_verify_cli_refuses_a_dir_without_node_data(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["verify", "--data-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert "no node data dirs" in result.output


def test_the_report_draws_no_picture_of_equal_offsets(tmp_path: Path) -> None:
    """Three equal bars say nothing the table does not: the offsets plot only when nodes differ."""
    from raftmeta.jobs.report import write_report

    figures = {
        "committed_offset_by_node": {"1": 40, "2": 40, "3": 40},
        "log_end_offset_by_node": {"1": 41, "2": 41, "3": 41},
        "replicas_per_broker": {"1": 3},
        "isr_size_counts": {"3/3": 1},
    }
    document = {"passed": True, "data_dir": str(tmp_path), "checks": [], "figures": figures}
    paths = write_report(tmp_path / "report", document, {1: ("a", None, False)})
    assert "offsets_png" not in paths and "isr_sizes_png" in paths


@pytest.mark.spark
def test_the_report_names_unhealthy_partitions_and_gives_health_its_own_verdict(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Logs that agree about an unhealthy cluster: consistency PASSED, health FAILED, and the
    partitions named with why. Brokers 0..5 sit in rack-(id mod 3); topic-i partition p has
    replicas [(i + p + k) % 6 for k in 0..2], the first leading."""
    data = tmp_path / "quorum"
    logs = write_quorum(data, topics=12, lagging=False)
    # Broker 4 fenced; topic-2 (min.insync.replicas 3) lost it from every partition's ISR.
    append_everywhere(
        data,
        logs,
        [
            min_isr_config("topic-2", "3"),
            partition_change(2, 0, isr=[2, 3], partition_epoch=1),
            partition_change(2, 1, isr=[3, 5], partition_epoch=1),
            partition_change(2, 2, leader=5, isr=[5, 0], leader_epoch=1, partition_epoch=1),
            fence_broker(4),
            # topic-6-0 moved from [0, 1, 2] to [0, 3, 1]: 0 and 3 share rack-0.
            partition_change(6, 0, replicas=[0, 3, 1], isr=[0, 3, 1], partition_epoch=1),
        ],
    )
    result = run_verify(spark, str(data), topic_view=True)
    assert result.passed, [c for c in result.checks if not c.passed]
    health = result.health
    assert health["verdict"] == "FAILED"
    assert health["reasons"] == [
        "5 partitions unavailable (no leader, or a fenced or unregistered one)",
        "3 partitions under min ISR (acks=all produce refused)",
        "3 partitions under-replicated",
        "1 partition with replicas on fewer racks than they could span",
        "1 broker fenced",
    ]
    under = ["under_min_isr", "under_replicated"]
    # Broker 4, fenced, still leads (i + p) % 6 == 4: a leader that is not live.
    fenced_leader = [
        {"topic": f"topic-{i}", "partition": p, "leader": 4, "replicas": [4, (i + p + 1) % 6, (i + p + 2) % 6],
         "isr": [4, (i + p + 1) % 6, (i + p + 2) % 6], "min_isr": 1, "why": ["leader_not_live"]}
        for i, p in ((10, 0), (3, 1), (4, 0), (8, 2), (9, 1))
    ]  # fmt: skip
    assert health["unhealthy_partitions"] == {
        "total": 9,
        "listed_max": 100,
        "listed": [
            *fenced_leader,
            {"topic": "topic-2", "partition": 0, "leader": 2, "replicas": [2, 3, 4], "isr": [2, 3], "min_isr": 3,
             "why": under},
            {"topic": "topic-2", "partition": 1, "leader": 3, "replicas": [3, 4, 5], "isr": [3, 5], "min_isr": 3,
             "why": under},
            {"topic": "topic-2", "partition": 2, "leader": 5, "replicas": [4, 5, 0], "isr": [5, 0], "min_isr": 3,
             "why": under},
            {"topic": "topic-6", "partition": 0, "leader": 0, "replicas": [0, 3, 1], "isr": [0, 3, 1], "min_isr": 1,
             "why": ["rack_spread_short"]},
        ],
    }  # fmt: skip
    view = result.figures["topic_broker"]
    assert view["brokers"] == [0, 1, 2, 3, 4, 5] and view["topics_total"] == 12
    topics = {t["topic"]: t for t in view["topics"]}
    assert len(topics) == 12
    # topic-2: [2,3,4], [3,4,5], [4,5,0]; leaders 2, 3 and (after broker 4's fencing) 5.
    assert topics["topic-2"] == {
        "topic": "topic-2", "partitions": 3, "replicas": {"0": 1, "2": 1, "3": 2, "4": 3, "5": 2},
        "leaders": {"0": 0, "2": 1, "3": 1, "4": 0, "5": 1}, "excess_replicas": 1, "excess_leaders": 0,
    }  # fmt: skip
    assert result.figures["brokers_per_rack"] == {"rack-0": [0, 3], "rack-1": [1, 4], "rack-2": [2, 5]}

    paths = write_outputs(result, str(data), tmp_path / "report")
    document = json.loads(paths["json"].read_text())
    assert document["passed"] is True and document["health"] == health
    html = paths["html"].read_text()
    assert '<b id="consistency" style="color:#1a7f37">PASSED</b>' in html
    assert '<b id="health" style="color:#cf222e">FAILED</b>' in html
    unhealthy = html[html.index('<table id="unhealthy">') :]
    assert "<td>topic-2</td><td class='n'>2</td>" in unhealthy and "under min ISR, under-replicated" in unhealthy
    by_rack = html[html.index('<table id="brokers-by-rack">') :]
    # Brokers grouped by rack: rack-0's two brokers, then rack-1's (4 fenced), then rack-2's.
    assert re.findall(r"class='n broker'>(\d+)<", by_rack) == ["0", "3", "1", "4", "2", "5"]
    assert 'rowspan="2"' in by_rack and ">fenced</td>" in by_rack
    heat = html[html.index('<table class="heat" id="topic-broker">') :]
    assert [heat.index(f">rack-{r}</th>") for r in range(3)] == sorted(heat.index(f">rack-{r}</th>") for r in range(3))
    assert "<th>topic-2</th>" in heat


def test_the_report_labels_figures_for_people_and_formats_numbers(tmp_path: Path) -> None:
    """No raw snake_case keys and no six decimals: labels, thousands separators, two-decimal skews;
    a WARN health verdict in its own colour beside a PASSED consistency."""
    from raftmeta.jobs.report import write_report
    from raftmeta.jobs.unhealthy import health_verdict

    figures = {"records": 1234567, "replica_skew": 1.333333, "under_replicated_partitions": 2, "fenced_brokers": 0}
    health = {**health_verdict(figures), "unhealthy_partitions": {"total": 0, "listed": [], "listed_max": 100}}
    assert health["verdict"] == "WARN" and health["reasons"] == ["2 partitions under-replicated"]
    document = {"passed": True, "data_dir": str(tmp_path), "health": health, "checks": [], "figures": figures}
    html = write_report(tmp_path / "report", document, {})["html"].read_text()
    assert "<td>Records replayed</td><td class='n'>1,234,567</td>" in html
    assert "<td>Replica skew (busiest broker / mean)</td><td class='n'>1.33</td>" in html
    assert "replica_skew" not in html and "1.333333" not in html
    assert '<b id="health" style="color:#9a6700">WARN</b>' in html
    assert health_verdict({"offline_partitions": 0})["verdict"] == "HEALTHY"
