"""Issue 46, item 6: a directory holding a ``raftmeta/`` folder (the clone's parent, or a data dir
named raftmeta) must not shadow the installed package in the processes raftmeta spawns. They
used to be started with ``python -m raftmeta``, which puts the working directory first on
sys.path: every node died on ImportError."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from raftmeta.cli.main import cli
from raftmeta.local import quorum as local_quorum

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture
def shadowed_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    bogus = tmp_path / "raftmeta"
    bogus.mkdir()
    (bogus / "__init__.py").write_text('raise ImportError("a stray raftmeta/ in the working directory was imported")\n')
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    if (tmp_path / "q" / local_quorum.QUORUM_FILE).exists():
        local_quorum.down(local_quorum.LocalQuorum.load(tmp_path / "q"))


def test_quorum_up_from_a_directory_holding_a_raftmeta_folder(shadowed_cwd: Path) -> None:
    result = CliRunner().invoke(
        cli, ["quorum", "up", "--data-dir", "q", "--nodes", "1", "--brokers", "1", "--racks", "1", "--detach",
              "-o", "json"],
    )  # fmt: skip
    logs = "".join(p.read_text() for p in sorted((shadowed_cwd / "q" / "logs").glob("*.log")))
    assert result.exit_code == 0, result.output + logs
    assert "stray raftmeta" not in logs
    assert json.loads(result.stdout)["nodes"][0]["id"] == 1
