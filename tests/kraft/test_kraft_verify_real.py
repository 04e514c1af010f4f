"""``raftmeta verify`` on a real KRaft quorum's metadata logs, unchanged: it passes on the logs
of a quorum after topic creation, a config change, a broker restart and a reassignment, and on a
doctored copy (one flipped byte on one controller, one batch dropped on another) it fails,
naming each controller and the offset."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

from raftmeta.cli.main import cli
from raftmeta.jobs.kraft_spark import verify_kraft_spark
from raftmeta.jobs.kraft_verify import verify_kraft
from raftmeta.kraft.cluster import KraftCluster
from raftmeta.records.kafka.batch import batch_size, iter_batches

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.kraft


def _verify(data_dir: Path) -> tuple[int, dict[str, str], dict[str, object]]:
    result = CliRunner().invoke(cli, ["verify", "--data-dir", str(data_dir), "--output", "json"])
    document = json.loads(result.stdout)
    return result.exit_code, {c["name"]: c["detail"] for c in document["checks"] if not c["passed"]}, document


def test_verify_passes_on_a_real_quorums_logs_and_names_the_controller_and_offset_of_doctoring(
    worked_kraft_cluster: KraftCluster, tmp_path: Path
) -> None:
    code, failed, document = _verify(worked_kraft_cluster.data_dir)
    assert (code, failed) == (0, {}), document
    figures = document["figures"]
    assert isinstance(figures, dict)
    assert figures["controllers"] == [n.node_id for n in worked_kraft_cluster.controllers]
    assert figures["nodes"] == 6

    copy = tmp_path / "doctored"
    shutil.copytree(worked_kraft_cluster.data_dir, copy)
    flipped_at: list[int] = []
    dropped_at: list[int] = []
    for node_id, victims in ((3002, flipped_at), (3003, dropped_at)):
        segment = copy / f"controller-{node_id}" / "data" / "__cluster_metadata-0" / "00000000000000000000.log"
        data = segment.read_bytes()
        position, batch = list(iter_batches(data))[5]  # the sixth batch
        victims.append(batch.base_offset)
        if node_id == 3002:
            doctored = bytearray(data)
            doctored[position + 40] ^= 0x01  # its max timestamp: covered by the CRC
            segment.write_bytes(bytes(doctored))
        else:
            segment.write_bytes(data[:position] + data[position + batch_size(data, position) :])
    code, failed, _ = _verify(copy)
    assert code == 1
    assert "controller 3002: 00000000000000000000.log at byte" in failed["batch-integrity"]
    assert f"(offset {flipped_at[0]}): CRC32C mismatch" in failed["batch-integrity"]
    assert "controller 3003: 00000000000000000000.log at byte" in failed["offsets-contiguous"]
    assert f"expected {dropped_at[0]}" in failed["offsets-contiguous"]
    assert f"offset {flipped_at[0]}: controller 3002 hold another batch than" in failed["logs-agree"]
    assert f"offset {dropped_at[0]}: controller 3003 hold no batch there" in failed["logs-agree"]


def test_the_jvm_path_gives_the_python_paths_checks_and_balance_on_a_real_quorums_logs(
    worked_kraft_cluster: KraftCluster, spark: SparkSession
) -> None:
    expected = verify_kraft(worked_kraft_cluster.data_dir)
    assert expected.passed, expected.checks
    result = verify_kraft_spark(spark, worked_kraft_cluster.data_dir, "jvm")
    assert [(c.name, c.passed, c.detail) for c in result.checks] == [
        (c.name, c.passed, c.detail) for c in expected.checks
    ]
    assert {k: v for k, v in result.figures.items() if k != "reader"} == expected.figures
    # Three brokers in three racks hold golden-a's 3 x 3 replicas (golden-b is deleted).
    assert result.figures["replicas_per_broker"] == {"0": 3, "1": 3, "2": 3}
    assert result.figures["rack_spread_violations"] == 0
