"""`bench commit|failover --target`: an option that cannot apply to the run asked for is refused
with a usage error naming it and the rule, never silently ignored; raftmeta's node settings reach
raftmeta's nodes in a comparison with both sides, and never a KRaft side."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from raftmeta.bench import commit, failover, kafka_commit, kafka_failover
from raftmeta.bench.sides import RaftmetaSide, make_side
from raftmeta.local import quorum as local_quorum


@pytest.fixture
def comparisons(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, tuple[Any, ...]]]:
    """The comparison runs the commands would start, recorded instead of run."""
    runs: list[tuple[str, tuple[Any, ...]]] = []

    def recorder(benchmark: str) -> Any:
        def run(*args: Any) -> dict[str, Any]:
            runs.append((benchmark, args))
            return {}

        return run

    monkeypatch.setattr(kafka_commit, "run_comparison", recorder("commit"))
    monkeypatch.setattr(kafka_failover, "run_comparison", recorder("failover"))
    return runs


def invoke(command: Any, *args: str) -> Any:
    return CliRunner().invoke(command, [*args, "--output", "json"])


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--target", "kraft", "--fetch-rpc", "unary"], "--fetch-rpc"),
        (["--target", "kraft", "--fetch-rpc", "stream"], "--fetch-rpc"),  # the default, but given
        (["--target", "kraft", "--node-arg=--fetch-hw-linger-ms=0"], "--node-arg"),
        (["--target", "both", "--no-raft-floor"], "--raft-floor/--no-raft-floor"),
        (["--target", "kraft", "--raft-floor"], "--raft-floor/--no-raft-floor"),
        (["--target", "raftmeta", "--warmup", "5"], "--warmup"),
    ],
)
def test_commit_refuses_an_option_its_target_cannot_apply(
    args: list[str], flag: str, comparisons: list[Any], tmp_path: Path
) -> None:
    result = invoke(commit.command, *args, "--work-dir", str(tmp_path))
    assert result.exit_code == 2, result.output
    assert f"Error: {flag}: " in result.output
    assert comparisons == [] and list(tmp_path.iterdir()) == []


def test_commit_both_gives_raftmeta_node_settings_to_raftmeta_nodes(comparisons: list[Any], tmp_path: Path) -> None:
    result = invoke(
        commit.command, "--target", "both", "--fetch-rpc", "unary", "--node-arg=--fetch-hw-linger-ms=0",
        "--work-dir", str(tmp_path),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    [(benchmark, args)] = comparisons
    assert benchmark == "commit" and args[-1] == ["--fetch-rpc", "unary", "--fetch-hw-linger-ms=0"]


def test_commit_without_node_settings_gives_none(comparisons: list[Any], tmp_path: Path) -> None:
    assert invoke(commit.command, "--target", "kraft", "--work-dir", str(tmp_path)).exit_code == 0
    [(_, args)] = comparisons
    assert args[-1] == []


def test_failover_refuses_the_grpc_retry_policy_against_kafka(comparisons: list[Any], tmp_path: Path) -> None:
    for target in ("kraft", "both"):
        result = invoke(failover.command, "--target", target, "--client-probe-after", "0", "--work-dir", str(tmp_path))
        assert result.exit_code == 2, result.output
        assert "Error: --client-probe-after: " in result.output and "--target raftmeta only" in result.output
    assert comparisons == []
    assert invoke(failover.command, "--target", "kraft", "--work-dir", str(tmp_path)).exit_code == 0
    assert [benchmark for benchmark, _ in comparisons] == ["failover"]


def test_raftmeta_node_settings_reach_the_nodes_and_never_kraft(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    started: list[dict[str, Any]] = []
    monkeypatch.setattr(local_quorum, "up", lambda directory, **kwargs: started.append(kwargs))
    side = make_side("raftmeta", tmp_path, raftmeta_node_args=["--fetch-rpc", "unary"])
    assert isinstance(side, RaftmetaSide)
    side.start()
    assert started[0]["node_args"] == ["--fetch-rpc", "unary"]
    with pytest.raises(ValueError, match="do not apply to KRaft"):
        make_side("kraft", tmp_path, raftmeta_node_args=["--fetch-rpc", "unary"])
