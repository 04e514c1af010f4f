"""Every Python process raftmeta starts goes through raftmeta.local.python_command (issue 46, item 6):
``python -m``/``-c`` without ``-P`` lets the working directory shadow the package."""

from __future__ import annotations

import re
from pathlib import Path

from raftmeta.local.python_command import python_command, raftmeta_command

PACKAGE = Path(__file__).resolve().parent.parent / "raftmeta"
# sys.executable followed (on the same or the next lines) by -m or -c: a spawn of our interpreter.
DIRECT_SPAWN = re.compile(r"sys\.executable\s*,\s*[\"']-[mc][\"']")


def test_the_commands_leave_the_working_directory_off_the_path() -> None:
    assert python_command("-c", "pass")[1:] == ["-P", "-c", "pass"]
    assert raftmeta_command("node")[1:] == ["-P", "-m", "raftmeta", "node"]


def test_no_module_spawns_python_but_through_python_command() -> None:
    offenders = [
        str(path.relative_to(PACKAGE.parent))
        for path in sorted(PACKAGE.rglob("*.py"))
        if DIRECT_SPAWN.search(path.read_text())
    ]
    assert offenders == []
