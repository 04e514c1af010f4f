"""The pure cores must stay free of IO, clocks and hidden randomness (DESIGN.md §2).

Parses every module of the pure packages and fails on imports of IO, clock or randomness
modules (allowed only under ``if TYPE_CHECKING:``, i.e. as types), on imports of the driver
packages, and on calls of the IO builtins ``open``, ``print`` and ``input``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PURE_PATHS = [
    ROOT / "raftmeta" / "raft",
    ROOT / "raftmeta" / "controller",
    ROOT / "placement",
    ROOT / "raftmeta" / "records",
    ROOT / "raftmeta" / "lincheck",
    ROOT / "raftmeta" / "api",
]
# The method catalogue names gRPC status codes (data: it opens no channel and serves nothing).
ALLOWED_MODULES = {ROOT / "raftmeta" / "api": {"grpc"}}
FORBIDDEN_MODULES = {
    "asyncio",
    "grpc",
    "socket",
    "os",
    "time",
    "threading",
    "random",
    "uuid",
    "subprocess",
    "multiprocessing",
    "concurrent",
    "selectors",
    "select",
    "signal",
    "shutil",
    "tempfile",
    "pathlib",
    "io",
    "datetime",
    "logging",
    "structlog",
    "secrets",
    "urllib",
    "http",
    "uvloop",
    "pyspark",
    "click",
    "rich",
    "matplotlib",
    "prometheus_client",  # metrics are fed by the drivers (raftmeta/metrics)
}
# Driver packages of raftmeta the pure cores must not reach into.
FORBIDDEN_PREFIXES = (
    "raftmeta.server",
    "raftmeta.client",
    "raftmeta.jobs",
    "raftmeta.chaos",
    "raftmeta.bench",
    "raftmeta.cli",
    "raftmeta.logs",
    "raftmeta.metrics",
)
ALLOWED_STORAGE = {"raftmeta.records.codec", "raftmeta.storage"}
FORBIDDEN_CALLS = {"open", "print", "input"}


def pure_files() -> list[Path]:
    files: list[Path] = []
    for path in PURE_PATHS:
        if path.is_file():
            files.append(path)
        elif path.is_dir():
            files.extend(sorted(path.rglob("*.py")))
    return files


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """ids of nodes inside `if TYPE_CHECKING:` blocks."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = node.test
            name = test.id if isinstance(test, ast.Name) else getattr(test, "attr", None)
            if name == "TYPE_CHECKING":
                for child in node.body:
                    inside.update(id(n) for n in ast.walk(child))
    return inside


def violations(path: Path, root: Path = ROOT) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    typing_only = _type_checking_nodes(tree)
    found: list[str] = []
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        modules: list[str] = []
        line = 0
        if isinstance(node, ast.Import):
            modules, line = [alias.name for alias in node.names], node.lineno
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules, line = [node.module], node.lineno
        for module in modules:
            top = module.split(".")[0]
            allowed = next((names for where, names in ALLOWED_MODULES.items() if path.is_relative_to(where)), set())
            if top in FORBIDDEN_MODULES and top not in allowed:
                found.append(f"{path.relative_to(root)}:{line} imports {module}")
            if module.startswith(FORBIDDEN_PREFIXES):
                found.append(f"{path.relative_to(root)}:{line} imports driver module {module}")
            if module.startswith("raftmeta.storage"):
                found.append(f"{path.relative_to(root)}:{line} imports storage IO module {module}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FORBIDDEN_CALLS:
            found.append(f"{path.relative_to(root)}:{node.lineno} calls {node.func.id}()")
    return found


def test_pure_packages_exist() -> None:
    assert (ROOT / "raftmeta" / "records" / "codec.py").is_file()
    assert pure_files(), "no pure modules found"


def test_the_simulator_reads_no_storage() -> None:
    """The simulator drives the pure cores with a disk of its own: it reads batches through the
    records codec, never through the storage drivers (which do real IO)."""
    found = [
        f"{path.relative_to(ROOT)} imports {module}"
        for path in sorted((ROOT / "raftmeta" / "sim").rglob("*.py"))
        for module in imported_modules(path)
        if module.startswith("raftmeta.storage")
    ]
    assert found == []


def imported_modules(path: Path) -> list[str]:
    modules: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            modules.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules.append(node.module)
    return modules


@pytest.mark.parametrize("path", pure_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_pure_module_has_no_io_imports(path: Path) -> None:
    assert violations(path) == []


def test_checker_catches_forbidden_imports(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from typing import TYPE_CHECKING\n"
        "import time\n"
        "from asyncio import sleep\n"
        "from raftmeta.server import node\n"
        "if TYPE_CHECKING:\n"
        "    import random\n"
        "def f() -> None:\n"
        "    open('x')\n"
    )
    found = violations(bad, root=tmp_path)
    assert any("imports time" in v for v in found)
    assert any("imports asyncio" in v for v in found)
    assert any("driver module raftmeta.server" in v for v in found)
    assert any("calls open()" in v for v in found)
    assert not any("random" in v for v in found), "imports under TYPE_CHECKING are types only"
