"""Issue 46, item 10: a command imports what it needs when it needs it. ``raftmeta --help`` lists
the commands from the table in raftmeta.cli.main without importing them (they pull in numpy,
grpc, structlog, placement, ...), and its short help texts are the commands' own. Checked by what
a fresh interpreter has imported, not by timing (docs/performance.md has the timings)."""

from __future__ import annotations

import json
import subprocess

import click
import pytest
from click.testing import CliRunner

from raftmeta.cli.main import COMMAND_HELP, COMMANDS, cli
from raftmeta.local.python_command import python_command

# Imports that cost tens of milliseconds each and that listing commands does not need.
HEAVY = ("numpy", "grpc", "structlog", "google.protobuf", "placement", "raftmeta.cli.topics", "importlib.metadata")


def modules_after(*args: str) -> list[str]:
    """The modules a fresh interpreter holds after ``raftmeta ARGS`` (its output dropped)."""
    probe = (
        "import contextlib, io, json, sys\n"
        "from raftmeta.cli.main import cli\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n"
        f"        cli({list(args)!r}, prog_name='raftmeta')\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    result = subprocess.run(python_command("-c", probe), capture_output=True, text=True, check=True)
    modules: list[str] = json.loads(result.stdout)
    return modules


def heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if m.startswith(HEAVY) and (m in HEAVY or m.startswith(tuple(h + "." for h in HEAVY)))]


@pytest.mark.timeout(120)
def test_raftmeta_help_imports_no_command() -> None:
    assert heavy(modules_after("--help")) == []


@pytest.mark.parametrize("limit", [45, 80, 400])
def test_the_listed_short_help_is_each_commands_own(limit: int) -> None:
    assert set(COMMAND_HELP) == set(COMMANDS)
    ctx = click.Context(cli)
    for name, text in COMMAND_HELP.items():
        command = cli.get_command(ctx, name)
        assert command is not None
        assert click.Command(name, help=text).get_short_help_str(limit) == command.get_short_help_str(limit), name


def test_version_is_read_when_asked() -> None:
    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0
    assert result.stdout.startswith("raftmeta, version ")


@pytest.mark.timeout(120)
def test_a_topics_command_imports_neither_placement_nor_the_log_renderer() -> None:
    # grpc and protobuf it needs; numpy (through placement) only --replica-assignment needs, and
    # structlog (with rich) only a command that logs.
    modules = modules_after("topics", "describe", "--help")
    assert "raftmeta.cli.topics" in modules
    assert [m for m in modules if m.split(".")[0] in ("numpy", "placement", "structlog", "rich")] == []
