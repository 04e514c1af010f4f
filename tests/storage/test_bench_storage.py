"""``raftmeta bench storage`` runs end to end at a tiny size and reports every figure."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from raftmeta.cli.main import cli


def test_bench_storage_small(tmp_path: Path) -> None:
    result_file = tmp_path / "result.json"
    args = ["bench", "storage", "--records", "5000", "--runs", "1", "--fsync-samples", "20", "--append-batches", "8"]
    args += ["--rescan-segment-bytes", "65536"]
    args += ["--work-dir", str(tmp_path / "work"), "--result-file", str(result_file), "--output", "json"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert json.loads(result_file.read_text()) == doc
    assert doc["fsync_floor"]["p50_us"] > 0
    assert [a["records_per_batch"] for a in doc["append_fsync_per_batch"]] == [1, 100, 1000]
    for figures in doc["append_fsync_per_batch"]:
        expected = figures["batches_per_s"] * figures["records_per_batch"]
        assert figures["records_per_s"] == pytest.approx(expected, rel=1e-2)
    assert doc["full_scan"]["records"] == 5000
    assert doc["full_scan"]["decode_records_per_s"] > 0
    restart = doc["restart"]
    assert restart["without_snapshot"]["after_crash"]["records_replayed"] == 5000
    with_snapshot = restart["with_snapshot"]
    # the image (11,000 records) plus the log after the snapshot offset
    assert with_snapshot["after_crash"]["records_replayed"] == 11_000 + 5000 - with_snapshot["snapshot_offset"]
    rescan = restart["active_segment_rescan"]
    assert rescan["batches"] > 100
    assert rescan["segment_bytes"] <= 65536
    assert set(doc["targets"]) == {
        "scan_decode_records_per_s_min",
        "scan_decode_met",
        "restart_with_snapshot_s_max",
        "restart_with_snapshot_met",
    }
