"""Storage faults in a stopped node's state files: ``quorum-state`` and the high-watermark
checkpoint (issue 45).

While a node is down, one of the two files gets a flipped bit, is truncated, or has every byte
zeroed. Each damage is one the file's reader detects (checked here before it is kept: the
checksum or the format refuses it), so the node must notice it on start and recover without an
operator: a damaged quorum-state is set aside (``quorum-state.unreadable``) and the node opens
its vote fence, granting no vote until every other voter has answered with its epoch
(docs/consensus.md, "Lost election state"); a damaged checkpoint is set aside
(``high-watermark-checkpoint.corrupt``) and recovery reads it as a missing one
(docs/storage.md, "Damaged disk").

The run's checks then read the nodes' logs: each damaged file was noticed and set aside, and no
node recorded two different votes in one epoch (the vote the damage erased included).
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from raftmeta.raft.types import VOTE_FENCED
from raftmeta.server.log_events import VOTE_RECORDED_EVENT
from raftmeta.storage.errors import InvalidFileError
from raftmeta.storage.high_watermark import HIGH_WATERMARK_CHECKPOINT, parse_high_watermark
from raftmeta.storage.quorum_state import QUORUM_STATE, parse_quorum_state

STATE_FILES: tuple[str, ...] = (QUORUM_STATE, HIGH_WATERMARK_CHECKPOINT)
DAMAGE_KINDS: tuple[str, ...] = ("bit-flip", "truncated", "zeroed")
# The node's log events (raftmeta/storage/datadir.py) that say it noticed and set the file aside.
NOTICED_EVENTS: dict[str, str] = {
    QUORUM_STATE: "quorum-state is unreadable",
    HIGH_WATERMARK_CHECKPOINT: "high-watermark checkpoint is unreadable: recovering as if it were missing",
}
_TRIES = 64  # bit flips drawn before giving up on finding one the reader detects


@dataclass(frozen=True, slots=True)
class StateFileDamage:
    node_id: int
    file: str  # quorum-state or high-watermark-checkpoint
    kind: str  # bit-flip, truncated, zeroed
    size: int  # the file's size before the damage
    position: int  # the flipped byte (bit-flip), the new length (truncated); 0 when zeroed

    def describe(self) -> str:
        what = {
            "bit-flip": f"a flipped bit at byte {self.position} of",
            "truncated": f"truncated to {self.position} of {self.size} bytes:",
            "zeroed": f"every one of the {self.size} bytes zeroed in",
        }[self.kind]
        return f"{what} node {self.node_id}'s {self.file}"

    def to_json(self) -> dict[str, object]:
        return {
            "node_id": self.node_id,
            "file": self.file,
            "kind": self.kind,
            "size": self.size,
            "position": self.position,
        }


def _detected(file: str, data: bytes) -> bool:
    """Whether the file's reader refuses ``data`` (what the node will see on start)."""
    parse: Callable[[Path, str], object] = parse_quorum_state if file == QUORUM_STATE else parse_high_watermark
    try:
        parse(Path(file), data.decode("utf-8"))
    except (InvalidFileError, UnicodeDecodeError):
        return True
    return False


def damage_state_file(node_id: int, node_dir: Path, file: str, kind: str, rng: random.Random) -> StateFileDamage | None:
    """Damage ``file`` of the stopped node in ``node_dir`` with ``kind``; None if the node has not
    written that file yet (or, for a bit flip, none of the draws was detectable).

    Call only while the node is stopped: the files belong to its writer thread otherwise."""
    path = node_dir / file
    try:
        original = path.read_bytes()
    except FileNotFoundError:
        return None
    if not original:
        return None
    if kind == "zeroed":
        damaged, position = bytes(len(original)), 0
    elif kind == "truncated":
        position = rng.randrange(len(original))
        damaged = original[:position]
    else:
        for _ in range(_TRIES):
            position = rng.randrange(len(original))
            flipped = bytearray(original)
            flipped[position] ^= 1 << rng.randrange(8)
            if _detected(file, bytes(flipped)):
                damaged = bytes(flipped)
                break
        else:
            return None
    if not _detected(file, damaged):  # a damage the node cannot see proves nothing about recovery
        return None
    path.write_bytes(damaged)
    return StateFileDamage(node_id, file, kind, len(original), position)


def behind_vote_fence(node_dir: Path) -> bool:
    """Whether the node in ``node_dir`` is (or will start) behind its vote fence, as its
    ``quorum-state`` says: the file missing or damaged (a node that reads it so on start opens its
    fence), or recording the open fence (``voted_id`` -3, written until every other voter has
    answered it with its epoch). Reads only; the file is replaced atomically, so a running node's
    is read whole."""
    try:
        state = parse_quorum_state(node_dir / QUORUM_STATE, (node_dir / QUORUM_STATE).read_text(encoding="utf-8"))
    except (FileNotFoundError, InvalidFileError, UnicodeDecodeError):
        return True
    return state.voted_id == VOTE_FENCED


def _events(log_text: str, names: set[str]) -> list[dict[str, object]]:
    out = []
    for line in log_text.splitlines():
        if not line.startswith("{") or not any(name in line for name in names):
            continue
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("event") in names:
            out.append(event)
    return out


def double_votes(logs: Mapping[int, str]) -> list[str]:
    """Every (node, epoch) whose log records votes for two different candidates."""
    found: list[str] = []
    for node_id, text in sorted(logs.items()):
        votes: dict[int, set[int]] = defaultdict(set)
        for event in _events(text, {VOTE_RECORDED_EVENT}):
            votes[int(str(event["epoch"]))].add(int(str(event["voted_id"])))
        found.extend(
            f"node {node_id} voted for {sorted(candidates)} in epoch {epoch}"
            for epoch, candidates in sorted(votes.items())
            if len(candidates) > 1
        )
    return found


def votes_recorded(logs: Mapping[int, str]) -> int:
    return sum(len(_events(text, {VOTE_RECORDED_EVENT})) for text in logs.values())


def unnoticed(damages: list[StateFileDamage], logs: Mapping[int, str]) -> list[str]:
    """The damages no start of their node noticed: a node's log must say it set the file aside
    at least as often as the run damaged that file of it."""
    wanted: dict[tuple[int, str], list[StateFileDamage]] = defaultdict(list)
    for damage in damages:
        wanted[(damage.node_id, damage.file)].append(damage)
    missing: list[str] = []
    for (node_id, file), items in sorted(wanted.items()):
        seen = len(_events(logs.get(node_id, ""), {NOTICED_EVENTS[file]}))
        missing.extend(d.describe() for d in items[seen:])
    return missing
