"""``raftmeta bench sim-plane`` measures a plane seed's CPU and reports its figures as JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from raftmeta.cli.main import cli


@pytest.mark.sim
def test_bench_sim_plane_reports_the_cpu_of_a_seed(tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    args = ["bench", "sim-plane", "--seeds", "1", "--repeats", "1", "--out", str(out), "--output", "json"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert json.loads(out.read_text()) == document
    assert document["events_per_round"] > 1000
    assert document["cpu_s_per_seed"] > 0
    assert document["seeds_per_cpu_s"] == pytest.approx(1 / document["cpu_s_per_seed"], rel=0.01)
    assert document["events_per_cpu_s"] == pytest.approx(
        document["events_per_round"] / document["cpu_s_per_seed"], rel=0.01
    )
    assert document["params"] == {"seeds": 1, "first_seed": 100_000, "repeats": 1, "steps": 3000}
