"""``quorum up --kafka-brokers``: the flags it cannot be given with, refused before anything
starts, and the JSON keys it adds (the real brokers themselves: tests/kraft/test_kafka_brokers_on_raftmeta.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from raftmeta.cli.main import cli
from raftmeta.local import quorum as local_quorum
from tests.test_cli_quorum_bootstrap import started


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--kafka-brokers", "3", "--brokers", "3"], "--brokers can't be used with --kafka-brokers"),
        (["--kafka-brokers", "3", "--tls"], "--tls can't be used with --kafka-brokers"),
        (["--kafka-brokers", "2", "--racks", "3"], "--racks (3) must be between 1 and --kafka-brokers (2)"),
        (["--kafka-broker-log-dirs", "2"], "--kafka-broker-log-dirs needs --kafka-brokers"),
    ],
)
def test_conflicting_flags_are_refused_before_anything_starts(tmp_path: Path, flags: list[str], named: str) -> None:
    data_dir = tmp_path / "q"
    result = CliRunner().invoke(cli, ["quorum", "up", "--data-dir", str(data_dir), "--detach", "-o", "json", *flags])
    assert result.exit_code == 2, result.output
    assert named in json.loads(result.stdout)["error"]["message"]
    assert not data_dir.exists()


def test_json_lists_no_kafka_brokers_when_none_were_asked_for(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    asked: dict[str, Any] = {}

    def up(data_dir: Path, **kwargs: Any) -> local_quorum.LocalQuorum:
        asked.update(kwargs)
        return started(data_dir)

    monkeypatch.setattr(local_quorum, "up", up)
    result = CliRunner().invoke(cli, ["quorum", "up", "--data-dir", str(tmp_path), "--detach", "-o", "json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert (document["kafka_brokers"], document["kafka_brokers_bootstrap"]) == ([], None)
    assert asked["kafka_brokers"] == 0


def test_brokers_started_before_in_the_data_dir_are_never_formatted_again(tmp_path: Path) -> None:
    (tmp_path / local_quorum.KAFKA_BROKERS_DIR / "broker-100").mkdir(parents=True)
    with pytest.raises(RuntimeError, match="Kafka brokers were started in this quorum before"):
        local_quorum.up(tmp_path, kafka_brokers=1, racks=1)
    assert not (tmp_path / local_quorum.QUORUM_FILE).exists(), "refused before any node started"
