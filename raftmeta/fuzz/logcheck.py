"""After a fuzz run: does the log hold only records that replay cleanly?

Two sources are replayed, batch by batch, through the controller's own :class:`ImageBuilder` --
the code every node, ``raftmeta log dump`` and the simulator use, which refuses a record that
cannot follow the image (unknown topic, epochs that do not follow, a leader outside the ISR...):

- a tape of the committed log copied while the run went on (:func:`check_batches`), which still
  holds the offsets that nodes later compacted into snapshots;
- each node's files as the node left them (:func:`check_node_log`, read-only): its newest
  snapshot, then its retained log -- including any tail beyond the checkpointed high watermark,
  since whatever a leader appended must replay too. A log that still starts at offset 0 must
  also reproduce the snapshot.

On top of replay, invariant 7 of DESIGN.md §9 as the Spark verify job states it, on every
partition state a batch writes: replicas distinct and registered when placed, the replication factor the
partition was created with, a non-empty ISR within the replicas, the leader in the ISR or -1,
and (invariant 8) replicas inside the topic's broker pool.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from raftmeta.controller import ImageBuilder, MetadataImage, ReplayError
from raftmeta.controller.image import NO_LEADER
from raftmeta.controller.snapshot import image_from_records
from raftmeta.records import codec
from raftmeta.records.decode import NotARecordError, parse_record
from raftmeta.storage.datadir import LOG_DIR_NAME
from raftmeta.storage.errors import SnapshotError
from raftmeta.storage.high_watermark import read_high_watermark
from raftmeta.storage.inspect import BatchEntry, walk_log_dir
from raftmeta.storage.snapshot import Snapshot, SnapshotStore, read_snapshot
from raftmeta.v1 import records_pb2

# Problems listed per node before the rest are only counted.
PROBLEMS_MAX = 20


@dataclass
class LogReport:
    """What one replayed log holds, and what is wrong with it."""

    label: str
    batches: int = 0
    records: int = 0
    log_start_offset: int = 0
    log_end_offset: int = 0
    high_watermark: int = 0
    snapshot_offset: int | None = None
    record_types: Counter[str] = field(default_factory=Counter)
    request_ids: set[str] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)
    problems_total: int = 0
    notes: list[str] = field(default_factory=list)
    image: MetadataImage | None = None

    def problem(self, text: str) -> None:
        self.problems_total += 1
        if len(self.problems) < PROBLEMS_MAX:
            self.problems.append(f"{self.label}: {text}")


def _newest_snapshot(log_dir: Path, report: LogReport) -> Snapshot | None:
    ids = SnapshotStore(log_dir).ids() if log_dir.is_dir() else []
    if not ids:
        return None
    path = log_dir / ids[-1].file_name
    try:
        return read_snapshot(path)
    except SnapshotError as exc:
        report.problem(f"newest snapshot unreadable: {exc}")
        return None


def _snapshot_image(snapshot: Snapshot, report: LogReport) -> MetadataImage | None:
    try:
        return image_from_records([parse_record(r) for r in snapshot.records])
    except (NotARecordError, ReplayError) as exc:
        report.problem(f"snapshot {snapshot.path.name} does not replay: {exc}")
        return None


@dataclass
class _Partitions:
    """The replication factor each partition was created with (invariant 7: it never changes)."""

    rf: dict[tuple[bytes, int], int] = field(default_factory=dict)

    def learn(self, image: MetadataImage) -> None:
        for topic in image.topics.values():
            for pid, part in enumerate(topic.partitions):
                self.rf.setdefault((topic.topic_id, pid), len(part.replicas) - len(part.adding_replicas))


def partition_problems(
    image: MetadataImage, topic_id: bytes, pid: int, rf: int | None, placed: Collection[int] = ()
) -> list[str]:
    """Invariant 7 on one partition of ``image``, and the pool rule of invariant 8 on the replicas
    the last record ``placed`` there (a broker that later re-registers in another pool does not
    make an earlier placement wrong)."""
    topic = image.topics.get(topic_id)
    if topic is None or not 0 <= pid < len(topic.partitions):
        return []  # removed later in the same batch
    part = topic.partitions[pid]
    where = f"{topic.name}-{pid}"
    problems: list[str] = []
    replicas = list(part.replicas)
    if not replicas or len(set(replicas)) != len(replicas):
        problems.append(f"{where}: replicas {replicas} empty or with a broker twice")
    # A replica must be a registered broker when it is placed. It may stay in the replica list
    # after its broker is unregistered (Kafka's UnregisterBroker only takes it out of the ISR).
    unregistered = sorted(b for b in placed if b not in image.brokers)
    if unregistered:
        problems.append(f"{where}: replicas {unregistered} are not registered brokers")
    if not part.isr:
        problems.append(f"{where}: empty ISR (the partition lost its last in-sync replica)")
    if not set(part.isr) <= set(replicas):
        problems.append(f"{where}: ISR {list(part.isr)} not within replicas {replicas}")
    if part.leader != NO_LEADER and part.leader not in part.isr:
        problems.append(f"{where}: leader {part.leader} outside the ISR {list(part.isr)}")
    factor = len(replicas) - len(part.adding_replicas)
    if rf is not None and factor != rf:
        problems.append(f"{where}: replication factor {factor}, created with {rf}")
    if topic.pool is not None:
        outside = [b for b in placed if b in image.brokers and image.brokers[b].pool != topic.pool]
        if outside:
            problems.append(f"{where}: replicas {outside} outside the topic's broker pool {topic.pool!r}")
    return problems


def _touched(image: MetadataImage, records: list[records_pb2.MetadataRecord]) -> dict[tuple[bytes, int], set[int]]:
    """Partitions the records write, each with the brokers they newly make replicas of it."""
    out: dict[tuple[bytes, int], set[int]] = {}
    for record in records:
        kind = record.WhichOneof("record")
        if kind == "partition":
            rec = record.partition
            out.setdefault((rec.topic_id, rec.partition_id), set()).update(rec.replicas)
        elif kind == "partition_change":
            change = record.partition_change
            placed = out.setdefault((change.topic_id, change.partition_id), set())
            if change.HasField("replicas"):
                before = image.partition(change.topic_id, change.partition_id)
                placed.update(set(change.replicas.ids) - set(before.replicas if before is not None else ()))
    return out


class Replayer:
    """Replays whole batches in order onto an image, checking each as the module docstring says."""

    def __init__(self, image: MetadataImage, report: LogReport) -> None:
        self.image = image
        self.report = report
        self.partitions = _Partitions()
        self.partitions.learn(image)

    def batch(self, data: bytes) -> bool:
        """Replay one batch; False once a batch does not replay (what follows would only cascade)."""
        report = self.report
        try:
            header = codec.check_batch(data)
            raws = codec.split_records(data, header)
        except codec.CorruptBatchError as exc:
            report.problem(f"unreadable batch: {exc}")
            return False
        report.batches += 1
        records: list[records_pb2.MetadataRecord] = []
        for i, raw in enumerate(raws):
            try:
                records.append(parse_record(raw))
            except NotARecordError as exc:
                report.problem(f"offset {header.base_offset + i}: {exc}")
                return False
        report.records += len(records)
        for record in records:
            kind = record.WhichOneof("record")
            report.record_types[kind or "(none)"] += 1
            if kind == "request":
                report.request_ids.add(record.request.request_id)
        builder = ImageBuilder(self.image)
        try:
            builder.replay_all(records)
        except ReplayError as exc:
            report.problem(f"batch at offset {header.base_offset} does not replay: {exc}")
            return False
        after = builder.build()
        for record in records:
            if record.WhichOneof("record") == "partition":
                rec = record.partition
                self.partitions.rf[(rec.topic_id, rec.partition_id)] = len(rec.replicas) - len(rec.adding_replicas)
        for (topic_id, pid), placed in _touched(self.image, records).items():
            rf = self.partitions.rf.get((topic_id, pid))
            for problem in partition_problems(after, topic_id, pid, rf, placed):
                report.problem(f"after the batch at offset {header.base_offset}: {problem}")
        self.image = after
        return True


def check_node_log(data_dir: Path) -> LogReport:
    """Replay one node's snapshot and retained log (read-only; the node should be stopped)."""
    report = LogReport(data_dir.name)
    log_dir = data_dir / LOG_DIR_NAME
    try:
        report.high_watermark = read_high_watermark(data_dir)
    except Exception as exc:
        report.problem(f"high-watermark checkpoint unreadable: {exc}")
    snapshot = _newest_snapshot(log_dir, report)
    snapshot_image = _snapshot_image(snapshot, report) if snapshot is not None else None
    snapshot_offset = snapshot.snapshot_id.offset if snapshot is not None else None
    report.snapshot_offset = snapshot_offset
    entries: list[BatchEntry] = []
    if log_dir.is_dir():
        for item in walk_log_dir(log_dir):
            if isinstance(item, BatchEntry):
                if item.crc_ok:
                    entries.append(item)
            elif not item.torn_tail:
                report.problem(f"damage in {item.path.name} at byte {item.position}: {item.reason}")
    start = entries[0].header.base_offset if entries else 0
    report.log_start_offset = start
    report.log_end_offset = entries[-1].header.next_offset if entries else start
    if start == 0:
        replayer = Replayer(MetadataImage.empty(), report)
        replay_from = 0
    elif snapshot_image is not None and snapshot_offset is not None and snapshot_offset >= start:
        replayer = Replayer(snapshot_image, report)
        replay_from = snapshot_offset
    else:
        report.problem(f"the log starts at offset {start} and no readable snapshot covers the offsets below it")
        return report
    for entry in entries:
        header = entry.header
        if header.next_offset <= replay_from:
            continue
        if start == 0 and header.base_offset == snapshot_offset and replayer.image != snapshot_image:
            report.problem(f"the log replayed to offset {header.base_offset} differs from the snapshot there")
        if not replayer.batch(entry.data):
            return report
    if start == 0 and report.log_end_offset == snapshot_offset and replayer.image != snapshot_image:
        report.problem("the replayed log differs from the snapshot at its end")
    report.image = replayer.image
    return report


def check_batches(
    batches: Mapping[int, bytes], snapshots: Mapping[int, Snapshot] | None = None, label: str = "tape"
) -> LogReport:
    """Replay committed batches by base offset (a tape of the committed log) from offset 0.

    Where the tape has a gap (offsets compacted into a snapshot before they were copied), the
    replay resumes from a snapshot ending exactly where the tape goes on (``snapshots`` by end
    offset), and notes the offsets it could not replay; with no such snapshot it stops there.
    """
    report = LogReport(label)
    replayer = Replayer(MetadataImage.empty(), report)
    expected = 0
    for base in sorted(batches):
        if base < expected:
            continue
        if base > expected:
            snapshot = (snapshots or {}).get(base)
            image = _snapshot_image(snapshot, report) if snapshot is not None else None
            if image is None:
                report.notes.append(f"offsets {expected}..{base - 1} were not copied: replayed up to offset {expected}")
                break
            report.notes.append(f"offsets {expected}..{base - 1} were not copied: resumed from the snapshot at {base}")
            replayer = Replayer(image, report)
        if not replayer.batch(batches[base]):
            break
        expected = codec.decode_header(batches[base]).next_offset
    report.log_end_offset = expected
    report.image = replayer.image
    return report


__all__ = ["LogReport", "Replayer", "check_batches", "check_node_log", "partition_problems"]
