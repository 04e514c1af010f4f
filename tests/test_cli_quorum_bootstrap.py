"""Getting a local quorum's bootstrap server without a ``python`` binary (issue 22, item 11):
``quorum up --print-bootstrap-server`` and ``quorum bootstrap --data-dir DIR``; and the install
that ``make demo`` runs first, which printed setuptools' deprecation banners."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from raftmeta.cli.main import cli
from raftmeta.local import quorum as local_quorum

ROOT = Path(__file__).resolve().parent.parent


def started(data_dir: Path) -> local_quorum.LocalQuorum:
    nodes = [
        local_quorum.NodeProcess(i, 1000 + i, f"127.0.0.1:{9090 + i}", str(data_dir / f"node-{i}"), "node.log", [])
        for i in (1, 2, 3)
    ]
    return local_quorum.LocalQuorum(str(data_dir), "cluster-1", "127.0.0.1:9091,127.0.0.1:9092,127.0.0.1:9093", nodes)


@pytest.fixture
def fake_up(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """`quorum up` without processes: local_quorum.up answers at once (and writes quorum.json)."""

    def up(data_dir: Path, **_: Any) -> local_quorum.LocalQuorum:
        quorum = started(data_dir)
        data_dir.mkdir(parents=True, exist_ok=True)
        quorum.save()
        return quorum

    monkeypatch.setattr(local_quorum, "up", up)
    return tmp_path / "q"


def test_up_print_bootstrap_server_puts_only_it_on_stdout(fake_up: Path) -> None:
    result = CliRunner().invoke(
        cli, ["quorum", "up", "--data-dir", str(fake_up), "--detach", "--print-bootstrap-server"]
    )
    assert result.exit_code == 0, result.output
    assert result.stdout == "127.0.0.1:9091,127.0.0.1:9092,127.0.0.1:9093\n"
    assert "quorum of 3 nodes up" in result.stderr, "the summary still shows, on stderr"


def test_up_without_the_flag_prints_the_summary_on_stdout(fake_up: Path) -> None:
    result = CliRunner().invoke(cli, ["quorum", "up", "--data-dir", str(fake_up), "--detach"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("quorum of 3 nodes up; bootstrap server 127.0.0.1:9091,")


def test_print_bootstrap_server_and_json_output_are_refused_together(fake_up: Path) -> None:
    result = CliRunner().invoke(
        cli, ["quorum", "up", "--data-dir", str(fake_up), "--detach", "--print-bootstrap-server", "-o", "json"]
    )
    assert result.exit_code == 2
    assert json.loads(result.stdout)["error"]["params"] == ["--print-bootstrap-server", "--output json"]
    assert not fake_up.exists(), "refused before anything started"


def test_bootstrap_prints_the_bootstrap_server_of_a_started_quorum(tmp_path: Path) -> None:
    quorum = started(tmp_path)
    quorum.save()
    result = CliRunner().invoke(cli, ["quorum", "bootstrap", "--data-dir", str(tmp_path)])
    assert result.exit_code == 0
    assert result.stdout == "127.0.0.1:9091,127.0.0.1:9092,127.0.0.1:9093\n"
    result = CliRunner().invoke(cli, ["quorum", "bootstrap", "--data-dir", str(tmp_path), "-o", "json"])
    assert json.loads(result.stdout) == {
        "bootstrap_server": "127.0.0.1:9091,127.0.0.1:9092,127.0.0.1:9093",
        "cluster_id": "cluster-1",
    }


def test_bootstrap_without_a_quorum_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["quorum", "bootstrap", "--data-dir", str(tmp_path / "none")])
    assert result.exit_code == 2
    assert "--data-dir" in result.stderr and "no quorum was started" in result.stderr


def test_the_readme_gets_the_bootstrap_server_from_raftmeta_not_python() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "python -c" not in readme
    assert re.search(r"B=\$\(raftmeta quorum up .*--detach --print-bootstrap-server\)", readme)


def test_pyproject_uses_the_spdx_license_and_a_setuptools_that_knows_it() -> None:
    """setuptools deprecates `project.license` as a table (three banners per install); the SPDX
    string form needs setuptools 77 or newer in the build requirements."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["license"] == "Apache-2.0"
    (setuptools,) = [r for r in pyproject["build-system"]["requires"] if r.startswith("setuptools")]
    match = re.fullmatch(r"setuptools>=(\d+)(\.\d+)*", setuptools.replace(" ", ""))
    assert match and int(match.group(1)) >= 77, setuptools
