"""Storage faults in a stopped node's newest snapshot (issue 45).

While a node is down, its newest ``.checkpoint`` file gets a flipped bit the snapshot's reader
detects (checked here before it is kept). The node must notice it on start and recover without an
operator: it sets the file aside (``<name>.corrupt``, kept) and either rebuilds the same state from
an older snapshot and its log, or, with no fallback, starts without the state below its log and
installs its leader's snapshot (docs/storage.md, "A damaged snapshot" and "A damaged snapshot with
no fallback"). The run's checks read the nodes' logs: each damaged snapshot was set aside by its
node's next start; the other checks hold the node to rejoining and losing nothing.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from raftmeta.storage.datadir import log_dir
from raftmeta.storage.errors import StorageError
from raftmeta.storage.snapshot import decode_snapshot, parse_snapshot_name

SNAPSHOT_VARIANT = "snapshot"
# The node's log events (raftmeta/storage/snapshot.py) that say it noticed and set the file aside.
SET_ASIDE_EVENTS: tuple[str, ...] = (
    "damaged snapshot set aside: falling back to an older snapshot and the log",
    "damaged snapshot set aside: no fallback, fetching the leader's snapshot",
)
_TRIES = 64  # bit flips drawn before giving up on finding one the reader detects


@dataclass(frozen=True, slots=True)
class SnapshotDamage:
    node_id: int
    file: str  # the snapshot's file name (<end offset>-<epoch>.checkpoint)
    size: int
    position: int  # the byte whose bit was flipped

    def describe(self) -> str:
        return f"a flipped bit at byte {self.position} of node {self.node_id}'s snapshot {self.file}"

    def to_json(self) -> dict[str, object]:
        return {"node_id": self.node_id, "file": self.file, "size": self.size, "position": self.position}


def damage_newest_snapshot(node_id: int, node_dir: Path, rng: random.Random) -> SnapshotDamage | None:
    """Flip a bit of the newest snapshot of the stopped node in ``node_dir``, one its reader
    detects; None if the node has no snapshot yet (or none of the draws was detectable).

    Call only while the node is stopped: the files belong to its writer thread otherwise."""
    named = [(parse_snapshot_name(p.name), p) for p in log_dir(node_dir).glob("*.checkpoint")]
    found = [(snapshot_id, path) for snapshot_id, path in named if snapshot_id is not None]
    if not found:
        return None
    snapshot_id, path = max(found)
    original = path.read_bytes()
    for _ in range(_TRIES):
        position = rng.randrange(len(original))
        flipped = bytearray(original)
        flipped[position] ^= 1 << rng.randrange(8)
        try:
            decode_snapshot(path, bytes(flipped), snapshot_id, keep_records=False)
        except StorageError:
            path.write_bytes(bytes(flipped))
            return SnapshotDamage(node_id, path.name, len(original), position)
    return None


def unnoticed_snapshots(damages: list[SnapshotDamage], texts: Mapping[int, str]) -> list[str]:
    """The damaged snapshots whose node's log has no event setting that file aside."""
    missing = []
    for damage in damages:
        noticed = False
        for line in texts.get(damage.node_id, "").splitlines():
            if not line.startswith("{") or damage.file not in line:
                continue
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            if event.get("event") in SET_ASIDE_EVENTS and str(event.get("file", "")).endswith(damage.file):
                noticed = True
                break
        if not noticed:
            missing.append(f"node {damage.node_id}: {damage.file} never set aside")
    return missing
