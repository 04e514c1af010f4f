"""``quorum-state``: the election state a voter must not forget (DESIGN.md §4).

JSON, as Kafka's ``quorum-state`` file::

    {"data_version": 0, "epoch": 5, "voted_id": 2, "leader_id": 2, "voters": [1, 2, 3]}

``voted_id`` and ``leader_id`` are -1 for "none". The file is replaced atomically (temp file,
fsync, rename, fsync directory) and the driver must wait for :meth:`QuorumStateFile.write` to
return before acting on the new epoch or vote: a vote granted and then forgotten in a crash
could elect two leaders in one epoch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from raftmeta.storage.errors import InvalidFileError
from raftmeta.storage.fileio import atomic_write

QUORUM_STATE = "quorum-state"
DATA_VERSION = 0
NONE_ID = -1


@dataclass(frozen=True, slots=True)
class QuorumStateData:
    epoch: int
    voted_id: int = NONE_ID
    leader_id: int = NONE_ID
    voters: tuple[int, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if self.epoch < 0:
            raise ValueError(f"epoch must be >= 0, got {self.epoch}")
        if self.voted_id < NONE_ID or self.leader_id < NONE_ID:
            raise ValueError("voted_id and leader_id are node ids or -1")

    def to_json(self) -> str:
        return json.dumps(
            {
                "data_version": DATA_VERSION,
                "epoch": self.epoch,
                "voted_id": self.voted_id,
                "leader_id": self.leader_id,
                "voters": list(self.voters),
            }
        )


class QuorumStateFile:
    """Reads and durably replaces ``DATA_DIR/quorum-state``. Not thread-safe: one owner."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / QUORUM_STATE

    def read(self) -> QuorumStateData | None:
        """The persisted state, or None before the first write. A damaged file is refused."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        try:
            doc = json.loads(text)
            if doc.get("data_version") != DATA_VERSION:
                raise InvalidFileError(self.path, f"unsupported data_version {doc.get('data_version')!r}")
            voters = doc["voters"]
            if not isinstance(voters, list) or not all(isinstance(v, int) for v in voters):
                raise InvalidFileError(self.path, "voters must be a list of node ids")
            values = (doc["epoch"], doc["voted_id"], doc["leader_id"])
            if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
                raise InvalidFileError(self.path, "epoch, voted_id and leader_id must be integers")
            return QuorumStateData(epoch=values[0], voted_id=values[1], leader_id=values[2], voters=tuple(voters))
        except (json.JSONDecodeError, KeyError, AttributeError, ValueError) as exc:
            raise InvalidFileError(self.path, f"not a valid quorum-state document: {exc}") from None

    def write(self, state: QuorumStateData) -> None:
        """Durably replace the file; returns only once the new state survives a crash."""
        atomic_write(self.path, (state.to_json() + "\n").encode())
