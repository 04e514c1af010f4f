"""One RandomSource (placement/rng.py): the raft core's election jitter, the controller's and the
placers' draws all take java.util.Random.nextInt's contract, and it is defined once."""

from __future__ import annotations

import ast
from pathlib import Path

import raftmeta.controller
import raftmeta.raft
from placement.rng import JavaRandom, RandomSource
from raftmeta.sim.rng import SeededRandom

ROOT = Path(__file__).resolve().parents[2]


def test_the_core_the_controller_and_the_placers_share_one_protocol() -> None:
    assert raftmeta.raft.RandomSource is raftmeta.controller.RandomSource is RandomSource
    for source in (JavaRandom(7), SeededRandom(7)):
        assert isinstance(source, RandomSource)
        assert all(0 <= source.next_int(5) < 5 for _ in range(100))


def test_it_is_defined_once() -> None:
    defined = [
        str(path.relative_to(ROOT))
        for package in ("raftmeta", "placement")
        for path in sorted((ROOT / package).rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef) and node.name == "RandomSource"
    ]
    assert defined == ["placement/rng.py"]
