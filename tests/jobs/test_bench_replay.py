"""``raftmeta bench replay`` runs end to end on tiny logs and reports every figure (no speed
assertions: speed is measured by running the benchmark, not by tests)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from raftmeta.bench.replay import BROKERS, append_synthetic, write_synthetic_quorum
from raftmeta.controller import ImageBuilder, MetadataImage
from raftmeta.jobs.consistency import facts_to_checks, local_facts
from raftmeta.records import codec
from raftmeta.records.decode import decode_records


def test_synthetic_logs_are_identical_valid_quorum_logs(tmp_path: Path) -> None:
    per_node = write_synthetic_quorum(tmp_path, 5000, 3)
    assert per_node >= 5000
    checks = facts_to_checks(local_facts(str(tmp_path)))
    assert all(c.passed for c in checks), checks
    files = sorted(p.read_bytes() for p in tmp_path.glob("node-*/__cluster_metadata-0/*.log"))
    assert files[0] == files[1] == files[2], "followers store the leader's bytes"


def test_appended_broker_restarts_replay_to_unfenced_brokers_with_new_epochs(tmp_path: Path) -> None:
    write_synthetic_quorum(tmp_path, 5000, 3)
    append_synthetic(tmp_path, 1000, restarts=4)
    assert all(c.passed for c in facts_to_checks(local_facts(str(tmp_path)))), "nodes still agree"
    builder = ImageBuilder(MetadataImage.empty())
    for path in sorted((tmp_path / "node-1" / "__cluster_metadata-0").glob("*.log")):
        for batch in codec.iter_batches(path.read_bytes()):
            builder.replay_all(decode_records(batch.data))
    brokers = builder.build().brokers
    assert len(brokers) == BROKERS and not any(b.fenced for b in brokers.values())
    assert sorted(b for b, registration in brokers.items() if registration.epoch >= 1_000_000) == [0, 1, 2, 3]


@pytest.mark.spark
def test_bench_replay_reports_every_figure(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "raftmeta", "bench", "replay", "--records", "20000", "--scaling", "5000",
         "--warm-up-records", "1000", "--incremental-broker-restarts", "6", "--work-dir", str(tmp_path),
         "--output", "json"],
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
    assert [set(run) for run in document["one_core_spark_cpu_seconds_runs"]] == [{"jvm", "python"}]
    # Six brokers restarted before the appended records: folded in, not a full replay.
    assert document["incremental_broker_restarts"] == 6
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
