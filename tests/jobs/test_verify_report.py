"""The verify pipeline end to end on one SparkSession: verdict, figures and the written report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

from raftmeta.cli.main import cli
from raftmeta.jobs.verify import run_verify, write_outputs
from tests.jobs.quorum_logs import append_everywhere, fence_broker, partition_change, write_quorum

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
    assert "raftmeta verify: <span>PASSED</span>" in html
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
