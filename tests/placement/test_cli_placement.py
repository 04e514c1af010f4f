"""``raftmeta placement`` and ``raftmeta bench placement`` through click."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from raftmeta.cli.main import cli

NINE = "0:rack0,1:rack0,2:rack0,3:rack1,4:rack1,5:rack1,6:rack2,7:rack2,8:rack2"


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["placement", *args])
    return result.exit_code, result.output


def test_place_json_reproduces_kafkas_skew() -> None:
    code, out = run(
        "place", "--brokers", NINE, "--partitions", "54", "--replication-factor", "3", "--seed", "0", "-o", "json"
    )
    assert code == 0, out
    document = json.loads(out)
    assert document["placer"] == "striped"
    assert len(document["partitions"]) == 54
    leaders = document["balance"]["leaders"]["per_broker"]
    assert [leaders[str(b)] for b in range(9)] == [3, 3, 12, 12, 6, 0, 6, 9, 3]
    assert document["balance"]["leader_skew"] == 2.0


def test_place_count_and_racks_shorthand_matches_the_explicit_list() -> None:
    explicit = run(
        "place", "--brokers", NINE, "--partitions", "10", "--replication-factor", "3", "--seed", "4", "-o", "json"
    )
    short = run(
        "place",
        "--brokers",
        "9",
        "--racks",
        "3",
        "--partitions",
        "10",
        "--replication-factor",
        "3",
        "--seed",
        "4",
        "-o",
        "json",
    )
    assert json.loads(explicit[1])["partitions"] == json.loads(short[1])["partitions"]


@pytest.mark.parametrize("placer", ["striped", "legacy", "balanced"])
def test_place_text_table_has_brokers_as_columns(placer: str) -> None:
    code, out = run(
        "place", "--brokers", "0:rack-a,1:rack-a,2:rack-b,3:rack-b:fenced", "--partitions", "6",
        "--replication-factor", "2", "--placer", placer, "--seed", "1",
    )  # fmt: skip
    assert code == 0, out
    assert "fenced" in out and "rack-b" in out
    assert "balance per broker" in out
    assert "leaders" in out and "replicas" in out
    assert "rack spread: 0 of 6 partitions" in out


def test_balanced_placer_from_the_cli_is_within_one() -> None:
    code, out = run(
        "place",
        "--brokers",
        NINE,
        "--partitions",
        "54",
        "--replication-factor",
        "3",
        "--placer",
        "balanced",
        "--seed",
        "0",
        "-o",
        "json",
    )
    assert code == 0, out
    balance = json.loads(out)["balance"]
    assert balance["leaders"]["min"] == balance["leaders"]["max"] == 6


def test_pool_restricts_the_placement() -> None:
    brokers = "1:r1:pool=p1,2:r2:pool=p1,3:r1:pool=p2,4:r2:pool=p2"
    code, out = run(
        "place",
        "--brokers",
        brokers,
        "--partitions",
        "4",
        "--replication-factor",
        "2",
        "--broker-pool",
        "p2",
        "-o",
        "json",
    )
    assert code == 0, out
    assert all(set(p["replicas"]) == {3, 4} for p in json.loads(out)["partitions"])


def test_manual_assignment_is_checked_and_measured() -> None:
    code, out = run("place", "--brokers", "0:a,1:a,2:b", "--replica-assignment", "0:2,1:2,2:0", "-o", "json")
    assert code == 0, out
    document = json.loads(out)
    assert document["placer"] == "manual"
    assert [p["replicas"] for p in document["partitions"]] == [[0, 2], [1, 2], [2, 0]]


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["--brokers", "0:a,x:b", "--partitions", "1", "--replication-factor", "1"], "--brokers"),
        (["--brokers", "0,0", "--partitions", "1", "--replication-factor", "1"], "--brokers"),
        (["--brokers", "0:a:b", "--partitions", "1", "--replication-factor", "1"], "--brokers"),
        (["--brokers", "0,1", "--partitions", "1", "--replication-factor", "3"], "--replication-factor"),
        (["--brokers", "0,1", "--partitions", "0", "--replication-factor", "1", "--placer", "legacy"], "--partitions"),
        (["--brokers", "0,1", "--replication-factor", "1"], "--partitions"),
        (["--brokers", "0,1", "--partitions", "1"], "--replication-factor"),
        (["--brokers", "0:a,1", "--partitions", "1", "--replication-factor", "1", "--placer", "legacy"], "--brokers"),
        (["--brokers", "0,1", "--partitions", "1", "--replication-factor", "1", "--broker-pool", "x"], "--broker-pool"),
        (["--brokers", "0,1", "--replica-assignment", "0:1,0:7"], "--replica-assignment"),
        (["--brokers", "0,1", "--replica-assignment", "0:0"], "--replica-assignment"),
        (["--brokers", "3", "--racks", "4", "--partitions", "1", "--replication-factor", "1"], "--racks"),
        (["--brokers", "0", "--racks", "1", "--partitions", "1", "--replication-factor", "1"], "--brokers"),
        (["--brokers", "0:a", "--racks", "1", "--partitions", "1", "--replication-factor", "1"], "--racks"),
        (["--brokers", "0", "--partitions", "1", "--replication-factor", "1", "--placer", "nope"], "--placer"),
    ],
)
def test_bad_input_exits_2_naming_the_argument(args: list[str], names: str) -> None:
    code, out = run("place", *args)
    assert code == 2, out
    assert names in out


def test_assign_consumers_json() -> None:
    code, out = run(
        "assign-consumers", "--strategy", "range", "--topic", "T=4",
        "--member", "C0=T", "--member", "C1=T", "--member", "C2=T", "-o", "json",
    )  # fmt: skip
    assert code == 0, out
    document = json.loads(out)
    assert document["counts"] == {"C0": 2, "C1": 1, "C2": 1}
    assert document["assignment"]["C0"] == [{"topic": "T", "partition": 0}, {"topic": "T", "partition": 1}]


def test_assign_consumers_sticky_with_previous_text() -> None:
    code, out = run(
        "assign-consumers", "--strategy", "sticky", "--topic", "orders=4", "--member", "a=orders",
        "--member", "b=orders", "--previous", "a=orders-0,orders-1,orders-2,orders-3",
    )  # fmt: skip
    assert code == 0, out
    assert "sticky assignment" in out and "total" in out


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["--topic", "T", "--member", "a=T"], "--topic"),
        (["--topic", "T=x", "--member", "a=T"], "--topic"),
        (["--topic", "T=1", "--member", "a"], "--member"),
        (["--topic", "T=1", "--member", "a=T", "--member", "a=T"], "--member"),
        (["--topic", "T=1", "--member", "a=T", "--previous", "a=T"], "--previous"),
        (["--topic", "T=1", "--member", "a=T", "--previous", "b=T-0"], "--previous"),
        (["--topic", "T=-1", "--member", "a=T"], "--topic"),
        (["--topic", "T=1", "--member", "a=T", "--strategy", "cooperative"], "--strategy"),
    ],
)
def test_assign_consumers_bad_input_exits_2(args: list[str], names: str) -> None:
    code, out = run("assign-consumers", *args)
    assert code == 2, out
    assert names in out


def test_bench_placement_json_shape(tmp_path: Path) -> None:
    result_file = tmp_path / "placement.json"
    result = CliRunner().invoke(
        cli,
        ["bench", "placement", "--partitions", "540", "--brokers", "9", "--racks", "3", "--runs", "3",
         "--result-file", str(result_file), "--output", "json"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert set(document["placers"]) == {"striped", "legacy", "balanced"}
    for figures in document["placers"].values():
        assert figures["partitions"] == 540
        assert figures["seconds"] > 0 and figures["partitions_per_s"] > 0
        assert figures["leader_skew"] >= 1.0 and figures["replica_skew"] >= 1.0
        assert len(figures["runs_seconds"]) == 3
        assert figures["cpu_seconds"] >= 0
    assert document["placers"]["balanced"]["leader_skew"] == 1.0
    assert json.loads(result_file.read_text()) == document


def test_bench_placement_text_and_bad_input() -> None:
    ok = CliRunner().invoke(
        cli,
        [
            "bench",
            "placement",
            "--partitions",
            "50",
            "--brokers",
            "4",
            "--racks",
            "2",
            "--runs",
            "1",
            "--placer",
            "striped",
        ],
    )
    assert ok.exit_code == 0, ok.output
    assert "striped" in ok.output and "balanced" not in ok.output
    bad = CliRunner().invoke(cli, ["bench", "placement", "--brokers", "2", "--racks", "3"])
    assert bad.exit_code == 2 and "--racks" in bad.output
    bad = CliRunner().invoke(cli, ["bench", "placement", "--brokers", "2", "--racks", "1", "--replication-factor", "3"])
    assert bad.exit_code == 2 and "--replication-factor" in bad.output


def test_bench_placement_shows_kafkas_leader_skew_at_54_partitions() -> None:
    args = ["bench", "placement", "--partitions", "54", "--brokers", "9", "--racks", "3", "--runs", "1", "--seed", "0"]
    result = CliRunner().invoke(cli, [*args, "--output", "json"])
    assert result.exit_code == 0, result.output
    placers = json.loads(result.output)["placers"]
    assert placers["striped"]["leader_skew"] == 2.0  # leaders [3, 3, 12, 12, 6, 0, 6, 9, 3]
    assert placers["balanced"]["leader_skew"] == 1.0
