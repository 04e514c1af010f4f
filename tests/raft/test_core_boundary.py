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


def _names_a_core(node: ast.expr) -> bool:
    """``core``, ``x.core``, ``self.core``...: an expression that, by its name, is a RaftCore."""
    if isinstance(node, ast.Name):
        return node.id == "core"
    return isinstance(node, ast.Attribute) and node.attr == "core"


def _reads_core_state(node: ast.AST) -> bool:
    if isinstance(node, ast.Attribute):
        return node.attr == "state" and _names_a_core(node.value)
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "getattr"
        and len(node.args) >= 2
        and _names_a_core(node.args[0])
        and isinstance(node.args[1], ast.Constant)
        and node.args[1].value == "state"
    )


def core_state_readers() -> list[str]:
    """Places outside raft/ that reach the core's state object: ``core.state`` (or
    ``getattr(core, "state", ...)``), without importing its module."""
    found = []
    for path in sorted((ROOT / "raftmeta").rglob("*.py")):
        if (ROOT / "raftmeta" / "raft") in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.expr) and _reads_core_state(node):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_nothing_outside_raft_reads_the_cores_state_object() -> None:
    """The import check alone misses an attribute read: the simulator once took a leader's
    ``epoch_start_offset`` through ``core.state`` (now the view ``read_commit_point``)."""
    assert core_state_readers() == []
