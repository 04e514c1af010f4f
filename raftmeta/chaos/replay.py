"""Replay the tape record by record through the controller's own replay code.

The tape (:mod:`raftmeta.chaos.tape`) holds the committed batches by offset. This walks them in
order through :meth:`MetadataImage.replay` -- the :class:`~raftmeta.controller.delta.ImageBuilder`
every node, ``log dump`` and the simulator use, which refuses any partition state that breaks
DESIGN.md §9 invariant 7 (distinct replicas, leader ∈ ISR ⊆ replicas, adding and removing replicas
a consistent part of the replicas, epochs that follow) -- and hands an observer every step with
the image before and after it, so checks of *transitions* (how a reassignment may end, for one)
need no second replay of their own.

Where the tape has a gap (batches every node committed and compacted between two reads), or a
record the replay refuses, the walk resumes from a snapshot the tape copied whose end offset is
the start of a batch it holds after that point: the image is then the snapshot's, and the offsets
in between are reported as not replayed. Without such a snapshot the walk stops there.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from raftmeta.controller.errors import ReplayError
from raftmeta.controller.image import MetadataImage
from raftmeta.controller.snapshot import image_from_records
from raftmeta.records import codec
from raftmeta.records.decode import NotARecordError, decode_records, parse_record
from raftmeta.storage.errors import SnapshotError
from raftmeta.storage.snapshot import SnapshotId, decode_snapshot
from raftmeta.v1 import records_pb2

# Records that change no metadata: skipped without building an image.
_CONTROL = frozenset({"leader_change", "no_op", "voters"})


@dataclass(frozen=True, slots=True)
class Step:
    """One metadata record replayed at ``offset`` (in the batch at ``batch``)."""

    offset: int
    batch: int
    record: records_pb2.MetadataRecord
    before: MetadataImage
    after: MetadataImage
    # The RequestRecord of the request that wrote it (None: the controller's own writes -- broker
    # heartbeats, registrations, fencing).
    request: records_pb2.RequestRecord | None


class Observer(Protocol):
    def on_step(self, step: Step) -> None: ...

    def on_resume(self, offset: int, image: MetadataImage) -> None:
        """The walk continues at ``offset`` from a snapshot's image (the steps before it are unknown)."""


@dataclass
class ReplayReport:
    image: MetadataImage  # after the last step
    records: int = 0
    replayed: list[tuple[int, int]] = field(default_factory=list)  # [start, end) walked record by record
    resumed_from: list[int] = field(default_factory=list)  # snapshot end offsets the walk restarted at
    errors: list[str] = field(default_factory=list)  # records the replay refused, with their offsets
    stopped_at: int | None = None  # the walk could not go on from here (no usable snapshot)

    def to_json(self) -> dict[str, object]:
        return {
            "records": self.records,
            "replayed": [list(r) for r in self.replayed],
            "resumed_from_snapshots": self.resumed_from,
            "stopped_at": self.stopped_at,
        }


def replay_tape(
    batches: Mapping[int, bytes], snapshots: Mapping[SnapshotId, bytes], observer: Observer
) -> ReplayReport:
    """Walk ``batches`` (base offset -> batch bytes) from offset 0; see the module docstring."""
    bases = sorted(batches)
    end = codec.decode_header(batches[bases[-1]]).next_offset if bases else 0
    report = ReplayReport(MetadataImage.empty())
    expected = 0  # the offset the next batch must start at
    start = 0  # where the current replayed range began
    i = 0
    while i < len(bases):
        base = bases[i]
        if base == expected:
            next_offset = _walk_batch(base, batches[base], report, observer)
            if next_offset is not None:
                expected = next_offset
                i += 1
                continue
            # The image cannot follow this batch: go on from a snapshot after it, if there is one.
            report.replayed.append((start, base))
            stop, resume_at = base, codec.decode_header(batches[base]).next_offset
        else:  # a gap in the tape
            if expected > start:
                report.replayed.append((start, expected))
            stop = resume_at = expected
        resumed = _resume(resume_at, bases, end, snapshots)
        if resumed is None:
            report.stopped_at = stop
            return report
        expected, report.image = resumed
        start = expected
        report.resumed_from.append(expected)
        observer.on_resume(expected, report.image)
        i = bisect.bisect_left(bases, expected)
    if expected > start:
        report.replayed.append((start, expected))
    return report


def _walk_batch(base: int, data: bytes, report: ReplayReport, observer: Observer) -> int | None:
    """Replay one batch's records onto ``report.image``; the next batch's offset, or None (and the
    error noted) when the replay refused a record."""
    records = decode_records(data)
    # A batch may hold several requests (the leader combines queued ones); each request's records
    # end with its RequestRecord, so a record belongs to the first RequestRecord at or after it.
    owners: list[records_pb2.RequestRecord | None] = []
    owner: records_pb2.RequestRecord | None = None
    for record in reversed(records):
        if record.WhichOneof("record") == "request":
            owner = record.request
        owners.append(owner)
    owners.reverse()
    image = report.image
    for index, record in enumerate(records):
        if record.WhichOneof("record") in _CONTROL:
            continue
        try:
            after = image.replay(record)
        except ReplayError as exc:
            report.errors.append(f"offset {base + index}: {exc}")
            return None
        report.records += 1
        observer.on_step(Step(base + index, base, record, image, after, owners[index]))
        image = after
    report.image = image
    return base + len(records)


def _resume(
    offset: int, bases: list[int], end: int, snapshots: Mapping[SnapshotId, bytes]
) -> tuple[int, MetadataImage] | None:
    """The first snapshot ending at or after ``offset`` where the tape has the batch that follows it
    (or the tape's end), decoded: (its end offset, its image)."""
    present = set(bases)
    for snapshot_id in sorted(snapshots):
        if snapshot_id.offset < offset or (snapshot_id.offset not in present and snapshot_id.offset != end):
            continue
        try:
            snapshot = decode_snapshot(Path(snapshot_id.file_name), snapshots[snapshot_id], snapshot_id)
            image = image_from_records(parse_record(r) for r in snapshot.records)
        except (SnapshotError, ReplayError, NotARecordError):
            continue  # damaged (the consistency checks report it): try the next one
        return snapshot_id.offset, image
    return None
