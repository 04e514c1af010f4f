"""`raftmeta fuzz`: the JSON document scripts read, and the exit code."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from raftmeta.cli.main import cli
from raftmeta.fuzz.runner import DECODER_ROUND_EXAMPLES


def test_decoder_run_prints_the_json_summary() -> None:
    result = CliRunner().invoke(
        cli, ["fuzz", "--target", "decoder", "--duration", "0", "--seed", "3", "--output", "json"]
    )
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["passed"] is True
    assert isinstance(document["duration_s"], float)
    (target,) = document["targets"]
    assert target["name"] == "decoder"
    assert target["examples"] == DECODER_ROUND_EXAMPLES  # a zero budget still runs one whole round
    assert target["failures"] == []
    assert sum(target["outcomes"].values()) == target["examples"]
    assert any(name.startswith("sealed: ") for name in target["outcomes"])


def test_a_data_dir_in_use_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "something").write_text("x")
    result = CliRunner().invoke(cli, ["fuzz", "--target", "controller", "--data-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert "is not empty" in result.output
