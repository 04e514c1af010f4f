"""``raftmeta sim --soak``: seeds over worker processes, progress on stderr, a file per failing
seed with its replay command, and the JSON summary (raftmeta.sim.soak)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from raftmeta.cli.main import cli
from raftmeta.sim.soak import SUMMARY_NAME, failure_name


@pytest.mark.sim
def test_a_soak_writes_a_file_per_failing_seed_with_its_replay_command(tmp_path: Path) -> None:
    args = ["sim", "--plane", "--soak", "--seed", "0", "--seeds", "3", "--voters", "3", "--jobs", "2"]
    outcome = CliRunner().invoke(cli, [*args, "--bug", "stale_reads", "--report-dir", str(tmp_path)])
    assert outcome.exit_code == 1, outcome.output
    assert "soak: 3/3 seeds, 3 failing" in outcome.stderr
    document = json.loads((tmp_path / SUMMARY_NAME).read_text())
    assert document["complete"] is True and document["seeds"] == 3 and document["runs"] == 3
    assert document["first_seed"] == 0 and document["jobs"] == 2
    assert [v["seed"] for v in document["violations"]] == [0, 1, 2]
    assert document["events_per_s"] > 0 and document["faults"] and document["checks"]["read-index-proof"] > 0
    for seed in range(3):
        text = (tmp_path / failure_name(seed)).read_text()
        assert f"seed {seed} violates read-index-proof" in text
        replay = f"replay: raftmeta sim --seed {seed} --steps 3000 --plane --voters 3 --faults all --bug stale_reads"
        assert replay in text


@pytest.mark.sim
def test_a_clean_soak_in_one_process_prints_its_figures_as_json(tmp_path: Path) -> None:
    args = ["sim", "--soak", "--seed", "7", "--seeds", "2", "--voters", "3", "--jobs", "1", "--output", "json"]
    outcome = CliRunner().invoke(cli, [*args, "--report-dir", str(tmp_path)])
    assert outcome.exit_code == 0, outcome.output
    document = json.loads(outcome.stdout)
    assert document["runs"] == 2 and document["violations"] == [] and document["complete"] is True
    written = json.loads((tmp_path / SUMMARY_NAME).read_text())
    for key in ("runs", "events", "faults", "checks", "violations", "complete", "first_seed"):
        assert written[key] == document[key], key
    assert not list(tmp_path.glob("sim-seed-*"))


def test_jobs_need_a_soak() -> None:
    outcome = CliRunner().invoke(cli, ["sim", "--seeds", "2", "--jobs", "2"])
    assert outcome.exit_code == 2 and "--soak" in outcome.output
