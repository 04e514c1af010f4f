"""One QuorumStateData (raftmeta/raft/types.py): the state the core persists is the state the
quorum-state file reads back, field for field, and an impossible one is refused naming its field."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from raftmeta.raft import NO_LEADER, VOTE_UNKNOWN, QuorumStateData
from raftmeta.storage.quorum_state import QuorumStateFile

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "state",
    [QuorumStateData(3, 2, 1), QuorumStateData(7, NO_LEADER, VOTE_UNKNOWN), QuorumStateData(4, voters=(1, 2, 3))],
)
def test_what_the_core_persists_is_what_the_file_reads_back(tmp_path: Path, state: QuorumStateData) -> None:
    file = QuorumStateFile(tmp_path)
    file.write(state)
    assert file.read() == state


def test_one_field_order_everywhere() -> None:
    # The two definitions had leader and vote in opposite orders: a positional call meant one
    # thing to the core and another to the file.
    state = QuorumStateData(3, 2, 1)
    assert (state.epoch, state.leader_id, state.voted_id, state.voters) == (3, 2, 1, ())


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"epoch": -1}, "epoch"),
        ({"epoch": 1, "voted_id": -3}, "voted_id"),
        ({"epoch": 1, "leader_id": -2}, "leader_id"),
        ({"epoch": 1, "voted_id": 4, "voters": (1, 2, 3)}, "voted_id"),
        ({"epoch": 1, "voters": (1, 1)}, "voters"),
    ],
)
def test_an_impossible_state_is_refused_naming_the_field(values: dict[str, object], field: str) -> None:
    with pytest.raises(ValueError, match=rf"^{field} "):
        QuorumStateData(**values)  # type: ignore[arg-type]


def test_it_is_defined_once() -> None:
    defined = [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "raftmeta").rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef) and node.name == "QuorumStateData"
    ]
    assert defined == ["raftmeta/raft/types.py"]
