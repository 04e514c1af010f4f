"""Every integer the command line reads is range-checked: out of range is a usage error (exit 2)
that names the flag and its range, never a traceback (``ValueError: Value out of range`` from a
protobuf int32 field was issue 22's item 5)."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from raftmeta.cli.common import INT32_MAX, INT64_MAX, INT64_MIN, BoundedInt
from raftmeta.cli.main import cli
from tests.test_cli import all_command_paths

# Commands whose flags are defined outside raftmeta/cli's own modules of this change (log is
# raftmeta/cli/log.py, the benchmarks raftmeta/bench/): not yet converted to BoundedInt.
NOT_YET = {("log",), ("bench",)}


def integer_params(path: tuple[str, ...]) -> list[click.Parameter]:
    with click.Context(cli) as ctx:
        command: click.Command | None = cli
        for name in path:
            assert isinstance(command, click.Group)
            command = command.get_command(ctx, name)
        assert command is not None
        return [p for p in command.params if isinstance(p.type, click.types.IntParamType)]


@pytest.mark.parametrize(
    "path", [p for p in all_command_paths() if p[:1] not in {n[:1] for n in NOT_YET}], ids=" ".join
)
def test_every_integer_flag_has_both_bounds(path: tuple[str, ...]) -> None:
    """One shared type (raftmeta.cli.common.BoundedInt), with a lower and an upper bound that fit
    the widest field an integer goes into (int64)."""
    for param in integer_params(path):
        assert isinstance(param.type, BoundedInt), f"{' '.join(path)} {param.opts}: {param.type!r}"
        assert INT64_MIN <= param.type.low <= param.type.high <= INT64_MAX


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


SERVER = ["--bootstrap-server", "127.0.0.1:1"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        # A topic's flags advertise the quorum's own caps (raftmeta.api.limits), not Kafka's field ranges.
        (["topics", "create", *SERVER, "--topic", "t", "--partitions", "100000"],
         "Invalid value for '--partitions': 100000 is not in the range 1..10000"),
        (["topics", "create", *SERVER, "--topic", "t", "--replication-factor", "17"],
         "Invalid value for '--replication-factor': 17 is not in the range 1..16"),
        (["topics", "alter", *SERVER, "--topic", "t", "--partitions", "10001"],
         "Invalid value for '--partitions': 10001 is not in the range 1..10000"),
        (["brokers", "register", *SERVER, "--id", "2147483648"],
         "Invalid value for '--id': 2147483648 is not in the range 0..2147483647"),
        (["brokers", "fail", *SERVER, "--id", "-1"], "Invalid value for '--id': -1 is not in the range 0..2147483647"),
        (["brokers", "fleet", *SERVER, "--brokers", "10001"],
         "Invalid value for '--brokers': 10001 is not in the range 1..10000"),
        (["brokers", "fleet", *SERVER, "--heartbeat-interval-ms", "99999999999"],
         "Invalid value for '--heartbeat-interval-ms': 99999999999 is not in the range 10..2147483647"),
        (["quorum", "up", "--data-dir", "q", "--nodes", "10"],
         "Invalid value for '--nodes': 10 is not in the range 1..9"),
        (["quorum", "kill", "--data-dir", "q", "--node", "99999999999"],
         "Invalid value for '--node': 99999999999 is not in the range 0..2147483647"),
        (["node", "--node-id", "2147483648", "--listen", "h:1", "--voters", "1@h:1", "--data-dir", "d"],
         "Invalid value for '--node-id': 2147483648 is not in the range 0..2147483647"),
        (["placement", "place", "--brokers", "9", "--partitions", "1000001", "--replication-factor", "3"],
         "Invalid value for '--partitions': 1000001 is not in the range 1..1000000"),
        (["placement", "place", "--brokers", "9", "--partitions", "3", "--replication-factor", "3", "--seed",
          str(2**63)], f"Invalid value for '--seed': {2**63} is not in the range {INT64_MIN}..{INT64_MAX}"),
        (["reassign", "generate", *SERVER, "--rebalance", "--seed", str(-(2**63) - 1)],
         f"Invalid value for '--seed': {-(2**63) - 1} is not in the range {INT64_MIN}..{INT64_MAX}"),
        (["reassign", "execute", *SERVER, "--plan", "p.json", "--throttle-moves", "0"],
         "Invalid value for '--throttle-moves': 0 is not in the range 1..2147483647"),
        (["sim", "--seed", "-1"], f"Invalid value for '--seed': -1 is not in the range 0..{INT64_MAX}"),
        (["chaos", "--report-dir", "r", "--clients", "65"],
         "Invalid value for '--clients': 65 is not in the range 1..64"),
        (["fuzz", "--seed", str(2**64)],
         f"Invalid value for '--seed': {2**64} is not in the range {INT64_MIN}..{INT64_MAX}"),
        (["certs", "make", "--out", "c", "--days", "36501"],
         "Invalid value for '--days': 36501 is not in the range 1..36500"),
        (["sim", "--steps", "x"], "Invalid value for '--steps': 'x' is not an integer in the range 1..2147483647"),
    ],
)  # fmt: skip
def test_an_integer_flag_out_of_range_names_the_flag_and_the_range(args: list[str], message: str) -> None:
    code, out, err = invoke(*args)
    assert code == 2, out + err
    assert message in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["topics", "create", *SERVER, "--topic", "t", "--replica-assignment", "0:1,2:99999999999"],
         "Invalid value for --replica-assignment: partition 1: broker id 99999999999 is not in the range "
         "0..2147483647"),
        (["brokers", "fleet", *SERVER, "--pool", "fast=0-99999999999"],
         "Invalid value for --pool: 'fast=0-99999999999': range end 99999999999 is not in the range 0..2147483647"),
        (["brokers", "fleet", *SERVER, "--pool", "fast=0-20000"],
         "Invalid value for --pool: 'fast=0-20000': 0-20000 names more than 10000 brokers"),
        (["brokers", "fleet", *SERVER, "--first-id", str(INT32_MAX), "--brokers", "2"],
         "Invalid value for --first-id: broker ids 2147483647..2147483648 go past 2147483647"),
        (["quorum", "up", "--data-dir", "q", "--brokers", "3", "--pool", "x=5-3"],
         "Invalid value for --pool: 'x=5-3': range end 3 is not in the range 5..2147483647"),
        (["node", "--node-id", "1", "--listen", "h:1", "--voters", "1@h:1,99999999999@h:2", "--data-dir", "d"],
         "Invalid value for --voters: voter id 99999999999 is not in the range 0..2147483647"),
        (["placement", "place", "--brokers", "0:a,99999999999:b", "--partitions", "1", "--replication-factor", "1"],
         "Invalid value for --brokers: '99999999999:b': broker id 99999999999 is not in the range 0..2147483647"),
        (["placement", "place", "--brokers", "10001", "--partitions", "1", "--replication-factor", "1"],
         "Invalid value for --brokers: the broker count 10001 is not in the range 1..10000"),
        (["placement", "assign-consumers", "--topic", "T=99999999999", "--member", "a=T"],
         "Invalid value for --topic: T: partition count 99999999999 is not in the range 0..1000000"),
        (["placement", "assign-consumers", "--topic", "T=1", "--member", "a=T", "--previous", "a=T-99999999999"],
         "Invalid value for --previous: 'T-99999999999': partition 99999999999 is not in the range 0..2147483647"),
        (["reassign", "generate", *SERVER, "--exclude-brokers", "1,99999999999"],
         "Invalid value for --exclude-brokers: broker id 99999999999 is not in the range 0..2147483647"),
    ],
)  # fmt: skip
def test_an_integer_inside_a_flag_out_of_range_names_the_flag_and_the_range(args: list[str], message: str) -> None:
    code, out, err = invoke(*args)
    assert code == 2, out + err
    assert message in err


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"topic": "t", "partition": 2**31, "replicas": [1]}, "partitions[0].partition 2147483648 is not in the range"),
        ({"topic": "t", "partition": 0, "replicas": [1, 2**40]}, "partitions[0].replicas: broker id 1099511627776"),
        ({"topic": "t", "partition": -1, "replicas": [1]}, "partitions[0].partition -1 is not in the range"),
    ],
)
def test_a_plan_file_integer_out_of_range_names_the_flag(
    tmp_path: Path, entry: dict[str, object], message: str
) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [entry]}))
    code, _, err = invoke("reassign", "verify", *SERVER, "--plan", str(plan))
    assert code == 2
    assert "Invalid value for --plan" in err and message in err
