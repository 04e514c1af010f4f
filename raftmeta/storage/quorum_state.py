"""``quorum-state``: the election state a voter must not forget (DESIGN.md §4).

JSON, as Kafka's ``quorum-state`` file, with a version and a checksum::

    {"data_version": 1, "epoch": 5, "voted_id": 2, "leader_id": 2, "voters": [1, 2, 3],
     "crc32c": 1234567890}

``crc32c`` is the CRC32C of the document without it, serialized with sorted keys and no
spaces (:mod:`raftmeta.storage.checksummed_json`, shared with the high-watermark checkpoint),
so a flipped bit or a hand edit is detected rather than believed.
``voted_id`` and ``leader_id`` are -1 for "none"; ``voted_id`` -2 means "unknown": the state
was lost once and this node grants no vote in this epoch (docs/storage.md, "Damaged disk"); -3
means the vote fence is open (docs/consensus.md, "Lost election state").
Version 0 files (no checksum, written by older releases) are still read.

The file is replaced atomically (temp file, fsync, rename, fsync directory) and the driver must
wait for :meth:`QuorumStateFile.write` to return before acting on the new epoch or vote: a vote
granted and then forgotten in a crash could elect two leaders in one epoch.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from raftmeta.raft.types import QuorumStateData
from raftmeta.storage.checksummed_json import CHECKSUM_FIELD, check_checksum, with_checksum
from raftmeta.storage.errors import InvalidFileError, StorageError
from raftmeta.storage.fileio import atomic_write, set_aside

QUORUM_STATE = "quorum-state"
DATA_VERSION = 1
LEGACY_DATA_VERSION = 0
FIELDS = ("data_version", "epoch", "voted_id", "leader_id", "voters")


def quorum_state_json(state: QuorumStateData) -> str:
    """The file's text for ``state`` (data_version 1, with its checksum)."""
    doc: dict[str, Any] = {
        "data_version": DATA_VERSION,
        "epoch": state.epoch,
        "voted_id": state.voted_id,
        "leader_id": state.leader_id,
        "voters": list(state.voters),
    }
    return json.dumps(with_checksum(doc))


def _integer(path: Path, doc: dict[str, Any], name: str) -> int:
    if name not in doc:
        raise InvalidFileError(path, f"field {name!r} is missing")
    value = doc[name]
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidFileError(path, f"field {name!r} must be an integer, got {value!r}")
    return value


def parse_quorum_state(path: Path, text: str) -> QuorumStateData:
    """The state in a quorum-state file's text; InvalidFileError naming the field otherwise."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidFileError(path, f"not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise InvalidFileError(path, "not a JSON object")
    version = doc.get("data_version")
    if version not in (DATA_VERSION, LEGACY_DATA_VERSION) or isinstance(version, bool):
        raise InvalidFileError(path, f"data_version {version!r} is not supported (expected {DATA_VERSION})")
    if version == DATA_VERSION:
        check_checksum(path, doc)
    unknown = sorted(set(doc) - {*FIELDS, CHECKSUM_FIELD})
    if unknown:
        raise InvalidFileError(path, f"unknown fields {unknown}")
    voters = doc.get("voters")
    if not isinstance(voters, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in voters):
        raise InvalidFileError(path, f"field 'voters' must be a list of node ids, got {voters!r}")
    values = {name: _integer(path, doc, name) for name in ("epoch", "voted_id", "leader_id")}
    try:
        return QuorumStateData(
            values["epoch"], leader_id=values["leader_id"], voted_id=values["voted_id"], voters=tuple(voters)
        )
    except ValueError as exc:  # the message names the field
        raise InvalidFileError(path, str(exc)) from None


class VoterSetMismatchError(StorageError):
    """The configured voters are not the ones the quorum-state file was written for."""


def check_voters(path: Path, state: QuorumStateData, configured: tuple[int, ...]) -> None:
    """Kafka's check: a node must not take part in elections of a voter set other than the one
    its election state belongs to (its vote may count in a majority it no longer knows)."""
    if state.voters and sorted(state.voters) != sorted(configured):
        raise VoterSetMismatchError(
            f"{path}: field 'voters' is {sorted(state.voters)}, but this node is configured with voters "
            f"{sorted(configured)}: check that --voters is up to date; if it is and the old set is gone for "
            "good, stop the node and delete the file (docs/storage.md, 'Damaged disk')"
        )


class QuorumStateFile:
    """Reads and durably replaces ``DATA_DIR/quorum-state``. Not thread-safe: one owner."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / QUORUM_STATE

    def read(self) -> QuorumStateData | None:
        """The persisted state, or None before the first write. A damaged file is refused
        (InvalidFileError naming the field or the checksum)."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except UnicodeDecodeError as exc:
            raise InvalidFileError(self.path, f"not UTF-8 text: {exc}") from None
        return parse_quorum_state(self.path, text)

    def set_aside(self, suffix: str = ".unreadable") -> Path:
        """Rename a damaged file out of the way (kept for inspection, an earlier one too); returns its new path."""
        return set_aside(self.path, suffix)

    def write(self, state: QuorumStateData) -> None:
        """Durably replace the file; returns only once the new state survives a crash."""
        atomic_write(self.path, (quorum_state_json(state) + "\n").encode())
