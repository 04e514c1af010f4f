"""The consensus core's mutable state stays inside ``raftmeta/raft``.

Readers elsewhere (the QuorumController, the node, metrics, the simulator) use the core's read-only
views (``voter_progress``, ``has_parked_fetch``, ``resignation_unacknowledged``, ...), which hand
out values: a reader that held the core's ``LeaderState`` could change what the core decides on,
and would silently read a stale object after the next transition replaces it.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STATE_MODULE = "raftmeta.raft.state"


def state_importers() -> list[str]:
    """Modules of raftmeta outside raft/ that import the core's state module."""
    found = []
    for path in sorted((ROOT / "raftmeta").rglob("*.py")):
        if (ROOT / "raftmeta" / "raft") in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            if any(name == STATE_MODULE or name.startswith(STATE_MODULE + ".") for name in names):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_nothing_outside_raft_imports_the_cores_state() -> None:
    assert state_importers() == []
