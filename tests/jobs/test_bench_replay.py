"""``raftmeta bench replay`` runs end to end on tiny logs and reports every figure (no speed
assertions: speed is measured by running the benchmark, not by tests)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from raftmeta.bench.replay import write_synthetic_quorum
from raftmeta.jobs.consistency import facts_to_checks, local_facts


def test_synthetic_logs_are_identical_valid_quorum_logs(tmp_path: Path) -> None:
    per_node = write_synthetic_quorum(tmp_path, 5000, 3)
    assert per_node >= 5000
    checks = facts_to_checks(local_facts(str(tmp_path)))
    assert all(c.passed for c in checks), checks
    files = sorted(p.read_bytes() for p in tmp_path.glob("node-*/__cluster_metadata-0/*.log"))
    assert files[0] == files[1] == files[2], "followers store the leader's bytes"


@pytest.mark.spark
def test_bench_replay_reports_every_figure(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "raftmeta", "bench", "replay", "--records", "20000", "--scaling", "5000",
         "--warm-up-records", "1000", "--work-dir", str(tmp_path), "--output", "json"],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    document = json.loads(result.stdout)
    for key in ("records", "spark_records_per_s", "spark_records_per_s_with_startup", "baseline_records_per_s",
                "ratio", "scaling", "driver_peak_rss_mb", "jvm_peak_rss_mb", "baseline_peak_rss_mb",
                "speedup_local1_to_local2", "one_core_spark_seconds", "full_seconds",
                "incremental_seconds"):  # fmt: skip
        assert key in document, key
    assert document["one_core_master"] == "local[1]" and document["master"] == "local[2]"
    assert document["speedup_local1_to_local2"] > 0
    assert document["incremental_state_replay"].startswith("from the stored state"), document
    assert document["state_stored_at"] == document["records"]
    # The baseline runs in its own process: the driver's figure is the Spark driver's alone.
    assert document["driver_peak_rss_mb"] > 0 and document["baseline_peak_rss_mb"] > 0
    assert set(document["load_average"]) == {"start", "end"}
    assert document["spark_startup_seconds"] >= document["spark_warm_up_seconds"] > 0
    assert document["records"] >= 20000
    assert [row["records"] >= 5000 for row in document["scaling"]] == [True, True]
    assert document["spark_records_per_s"] > 0
    assert document["baseline_records_per_s"] > 0
    assert list(tmp_path.iterdir()) == [], "the benchmark cleans up its logs"
