"""``raftmeta bench commit|failover --target both``: one short run of each against a raftmeta
quorum and a real KRaft cluster (their own, since failover kills and pauses nodes), checked for
the document's shape -- both sides with every figure, and their ratios -- never for speeds."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from raftmeta.bench.compare import COMMIT_BETTER, failover_better, lookup
from raftmeta.cli.main import cli

pytestmark = [pytest.mark.kraft, pytest.mark.timeout(900)]

COMMIT_FIGURES = (
    "ops", "ops_per_s", "records_per_s", "latency_ms", "node_cpu_ms_per_op", "leader_cpu_ms_per_op",
    "brokers_cpu_ms_per_op", "machine_busy_percent", "client_cpu_percent", "errors", "startup_s",
)  # fmt: skip
FAULT_FIGURES = (
    "failover_ms", "samples_ms", "all_clients_ms", "all_clients_samples_ms", "slowest_create_ms", "client_errors",
)  # fmt: skip


def bench(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(cli, ["bench", *args, "--output", "json"])
    assert result.exit_code == 0, result.output
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def assert_ratios(document: dict[str, Any], better: Mapping[str, str]) -> None:
    assert document["ratio_better"] == better
    for path, direction in better.items():
        ours, theirs = lookup(document["raftmeta"], path), lookup(document["kraft"], path)
        assert isinstance(ours, int | float) and isinstance(theirs, int | float) and theirs > 0, path
        assert document["ratio"][path] == pytest.approx(ours / theirs, abs=0.002), path
        assert document["meets_target"][path] == (
            document["ratio"][path] >= 1.0 if direction == "higher" else document["ratio"][path] <= 1.0
        )


def test_commit_both_sides_measured_in_one_run(tmp_path: Path) -> None:
    document = bench("commit", "--target", "both", "--clients", "2", "--duration", "1", "--rounds", "1",
                     "--warmup", "0", "--work-dir", str(tmp_path))  # fmt: skip
    assert document["target"] == "both" and document["protocol"] == "kafka"
    assert document["kafka_version"].startswith("4.")
    for side in ("raftmeta", "kraft"):
        figures = document[side]
        assert set(COMMIT_FIGURES) <= set(figures), (side, sorted(figures))
        assert figures["ops"] > 0 and figures["records_per_s"] > 0, (side, figures)
        assert set(figures["latency_ms"]) == {"mean", "p50", "p99"}
    assert_ratios(document, dict(COMMIT_BETTER))
    (only,) = document["rounds"]
    assert only["order"] == ["raftmeta", "kraft"] and set(only["ratio"]) == set(COMMIT_BETTER)


def test_failover_both_sides_both_faults_in_one_run(tmp_path: Path) -> None:
    document = bench("failover", "--target", "both", "--rounds", "1", "--clients", "2", "--fault", "kill",
                     "--fault", "pause", "--work-dir", str(tmp_path))  # fmt: skip
    assert document["target"] == "both" and document["rounds"] == 1
    for side in ("raftmeta", "kraft"):
        faults = document[side]["faults"]
        assert set(faults) == {"kill", "pause"}
        for fault, result in faults.items():
            assert set(FAULT_FIGURES) <= set(result), (side, fault, sorted(result))
            assert len(result["samples_ms"]) == 1 and result["samples_ms"][0] > 0
        assert document[side]["failover_ms"] == faults["kill"]["failover_ms"]
    assert_ratios(document, failover_better(["kill", "pause"]))
    assert document["order"] == {"kill": [["raftmeta", "kraft"]], "pause": [["raftmeta", "kraft"]]}


def test_a_partition_fault_is_refused_beside_kraft(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["bench", "failover", "--target", "both", "--fault", "partition",
                                      "--work-dir", str(tmp_path)])  # fmt: skip
    assert result.exit_code == 2 and "--fault partition runs with --target raftmeta only" in result.output
