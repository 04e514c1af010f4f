"""A tape of the committed log, copied from the nodes' segment files while the run goes on.

Nodes delete their segments below every snapshot they take, so after a run the files hold only
the newest snapshot and the log after it: the offsets of most writes are gone, and topics that
were created and deleted before the snapshot left no record at all. The tape keeps them. Every
few hundred milliseconds it reads each node's segment files from where it last stopped and
copies the batches wholly below that node's checkpointed high watermark -- the prefix the node
itself vouches for as committed, the same rule the Spark job uses.

Because committed batches never change (DESIGN.md §9, invariant 3), the tape is also a check:
a batch copied at an offset must be byte-identical to every later copy of that offset, from any
node, at any time; a difference is recorded as a conflict.

For the leader, the bound is also the high watermark it last reported through DescribeQuorum
(fresher than its checkpoint, which is written at most once a second). The tape can still miss
batches that every node committed *and* compacted into a snapshot between two reads;
:meth:`gaps` lists them, and the checks treat those offsets as unknown, never as lost.

The tape also keeps a copy of every snapshot file it sees (by end offset; a node keeps only its
two newest): a replay of the tape that reaches a gap resumes from a snapshot taken at or after
the gap's end (:mod:`raftmeta.chaos.replay`), instead of stopping there.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from raftmeta.records import codec
from raftmeta.records.walk import Damage, walk_batches
from raftmeta.storage.errors import StorageError
from raftmeta.storage.high_watermark import read_high_watermark
from raftmeta.storage.snapshot import SNAPSHOT_SUFFIX, SnapshotId, parse_snapshot_name

LOG_DIR_NAME = "__cluster_metadata-0"


@dataclass
class _Cursor:
    position: int
    next_offset: int


@dataclass
class CommittedTape:
    node_dirs: dict[int, Path]
    batches: dict[int, bytes] = field(default_factory=dict)  # base offset -> batch bytes
    digests: dict[int, str] = field(default_factory=dict)
    conflicts: list[str] = field(default_factory=list)
    # Snapshot files as found (a ``.checkpoint`` name is always a whole file: written, then renamed).
    snapshots: dict[SnapshotId, bytes] = field(default_factory=dict)
    reads: int = 0
    # (leader id, high watermark) as the leader last reported it (DescribeQuorum): the leader's
    # log below its own high watermark is committed too, and that bound is fresher than the
    # leader's lazily written checkpoint. Set from the event loop, read by the polling thread.
    leader_hint: tuple[int, int] = (-1, 0)
    _cursors: dict[tuple[int, str], _Cursor] = field(default_factory=dict)

    def poll(self) -> None:
        """Copy whatever became committed since the last poll (call from one thread at a time)."""
        self.reads += 1
        for node_id, node_dir in self.node_dirs.items():
            self._copy_snapshots(node_dir / LOG_DIR_NAME)  # a snapshot only ever holds committed records
            leader, leader_hw = self.leader_hint
            try:
                hw = read_high_watermark(node_dir)
            except (StorageError, OSError):
                continue  # being replaced, or not written yet: next time
            if node_id == leader:
                hw = max(hw, leader_hw)
            for segment in sorted((node_dir / LOG_DIR_NAME).glob("*.log")):
                self._read_segment(node_id, segment, hw)

    def _copy_snapshots(self, log_dir: Path) -> None:
        for path in log_dir.glob(f"*{SNAPSHOT_SUFFIX}"):
            snapshot_id = parse_snapshot_name(path.name)
            if snapshot_id is None or snapshot_id in self.snapshots:
                continue
            try:
                self.snapshots[snapshot_id] = path.read_bytes()
            except OSError:
                continue  # pruned under us: a newer one exists

    def _read_segment(self, node_id: int, segment: Path, hw: int) -> None:
        key = (node_id, segment.name)
        cursor = self._cursors.get(key) or _Cursor(0, int(segment.name.removesuffix(".log")))
        try:
            with segment.open("rb") as f:
                f.seek(cursor.position)
                data = f.read()
        except OSError:
            return  # deleted under us (a snapshot was taken): its committed part was read before
        position = 0
        for found in walk_batches(data, first_offset=cursor.next_offset):
            if isinstance(found, Damage):
                if found.kind == "offset":
                    # The file was replaced under the same name (a snapshot install): start it over.
                    self._cursors.pop(key, None)
                    return
                break  # a batch still being written (or a torn tail): not committed
            header = found.header
            if header.next_offset > hw:
                break
            self._keep(node_id, header.base_offset, found.data)
            position = found.position + header.size_bytes
            cursor.next_offset = header.next_offset
        cursor.position += position
        self._cursors[key] = cursor

    def _keep(self, node_id: int, base_offset: int, batch: bytes) -> None:
        digest = hashlib.sha256(batch).hexdigest()
        known = self.digests.get(base_offset)
        if known is None:
            self.batches[base_offset] = batch
            self.digests[base_offset] = digest
        elif known != digest and len(self.conflicts) < 100:
            self.conflicts.append(
                f"committed batch at offset {base_offset} changed: node {node_id} has {digest[:12]}, "
                f"the tape copied {known[:12]} earlier"
            )

    def gaps(self) -> list[tuple[int, int]]:
        """[start, end) offset ranges between copied batches that the tape never saw."""
        missing = []
        expected = 0
        for base in sorted(self.batches):
            if base > expected:
                missing.append((expected, base))
            header = codec.decode_header(self.batches[base])
            expected = max(expected, header.next_offset)
        return missing

    def end_offset(self) -> int:
        if not self.batches:
            return 0
        last = max(self.batches)
        return codec.decode_header(self.batches[last]).next_offset
