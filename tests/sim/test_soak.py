"""``raftmeta sim --soak``: seeds over worker processes, progress on stderr, a file per failing
seed with its replay command, and the JSON summary (raftmeta.sim.soak)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from raftmeta.cli.main import cli
from raftmeta.sim import soak
from raftmeta.sim.cluster import RunResult
from raftmeta.sim.runner import run_one as real_run_one
from raftmeta.sim.soak import SIMULATOR_ERROR, SUMMARY_NAME, failure_name


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


@pytest.mark.sim
def test_a_seed_whose_simulator_raises_fails_with_its_traceback_and_the_soak_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An exception inside the simulator is no invariant, but it is a failed seed: its file holds
    the replay command and the traceback, and the seeds after it still run."""

    def run_one_raising_on_seed_7(seed: int, **kwargs: Any) -> RunResult:
        if seed == 7:
            raise KeyError("timer of a node that is not there")
        return real_run_one(seed, **kwargs)

    monkeypatch.setattr(soak, "run_one", run_one_raising_on_seed_7)
    args = ["sim", "--soak", "--seed", "7", "--seeds", "2", "--voters", "3", "--jobs", "1"]
    outcome = CliRunner().invoke(cli, [*args, "--report-dir", str(tmp_path)])
    assert outcome.exit_code == 1, outcome.output
    assert "soak: 2/2 seeds, 1 failing" in outcome.stderr
    assert f"soak: seed 7 violates {SIMULATOR_ERROR}: KeyError" in outcome.stderr
    document = json.loads((tmp_path / SUMMARY_NAME).read_text())
    assert document["runs"] == 2 and document["complete"] is True
    assert [(v["seed"], v["invariant"]) for v in document["violations"]] == [(7, SIMULATOR_ERROR)]
    assert document["events"] > 0, "seed 8 ran after seed 7 raised"
    text = (tmp_path / failure_name(7)).read_text()
    assert f"seed 7 violates {SIMULATOR_ERROR}" in text
    assert "replay: raftmeta sim --seed 7 --steps 3000 --plane --voters 3 --faults all --trace" in text
    assert "Traceback (most recent call last)" in text and "in run_one_raising_on_seed_7" in text
    assert "KeyError: 'timer of a node that is not there'" in text
    assert not (tmp_path / failure_name(8)).exists()


def test_jobs_need_a_soak() -> None:
    outcome = CliRunner().invoke(cli, ["sim", "--seeds", "2", "--jobs", "2"])
    assert outcome.exit_code == 2 and "--soak" in outcome.output
