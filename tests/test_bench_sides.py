"""The KRaft side of a comparison (raftmeta/bench/sides.py) starts again in a fresh folder only
when a JVM's port was taken before it bound it; any other start-up failure is raised at once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from raftmeta.bench.sides import START_ATTEMPTS, KraftSide
from raftmeta.kraft import cluster as kraft_cluster
from raftmeta.kraft.cluster import KraftCluster, KraftNodeError


def failing_start(messages: list[str], folders: list[Path]) -> Any:
    def start(data_dir: Path, **_: Any) -> KraftCluster:
        folders.append(data_dir)
        if len(folders) <= len(messages):
            raise KraftNodeError(messages[len(folders) - 1])
        return KraftCluster("id", data_dir, [])

    return start


def test_a_taken_port_starts_the_cluster_again_in_a_fresh_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folders: list[Path] = []
    taken = "broker 1 exited before it was ready; ... java.net.BindException: Address already in use"
    monkeypatch.setattr(kraft_cluster.KraftCluster, "start", failing_start([taken], folders))
    side = KraftSide(tmp_path)
    side.start()
    assert folders == [tmp_path / "attempt-1", tmp_path / "attempt-2"]
    assert side.cluster is not None and side.cluster.data_dir == tmp_path / "attempt-2"


def test_any_other_failure_is_raised_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folders: list[Path] = []
    monkeypatch.setattr(kraft_cluster.KraftCluster, "start", failing_start(["controller 3001 exited: OOM"], folders))
    with pytest.raises(KraftNodeError, match="OOM"):
        KraftSide(tmp_path).start()
    assert len(folders) == 1


def test_the_attempts_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folders: list[Path] = []
    taken = ["Address already in use"] * (START_ATTEMPTS + 1)
    monkeypatch.setattr(kraft_cluster.KraftCluster, "start", failing_start(taken, folders))
    with pytest.raises(KraftNodeError, match="Address already in use"):
        KraftSide(tmp_path).start()
    assert len(folders) == START_ATTEMPTS
