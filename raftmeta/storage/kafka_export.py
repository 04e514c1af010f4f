"""``raftmeta log export --format kafka``: a raftmeta node's log and snapshots written as a Kafka
``__cluster_metadata-0`` directory that Kafka's own tools read (``kafka-dump-log
--cluster-metadata-decoder``, ``kafka-metadata-shell --snapshot``). The driver: it reads and
writes files; what each batch becomes is the pure mapping's (raftmeta/records/kafka/mapping.py).

The output, under ``OUT_DIR``::

    meta.properties                                  the node's, as it is (Kafka's format already)
    __cluster_metadata-0/
      <20-digit base offset>.log                     each segment, the same base offsets
      <20-digit end offset>-<10-digit epoch>.checkpoint   each snapshot, the same name
      00000000000000000000-0000000000.checkpoint     the bootstrap snapshot (a log from offset 0)
      quorum-state                                   the node's epoch, leader and vote, in Kafka's JSON
      partition.metadata                             the metadata topic's fixed id, as Kafka's

Nothing is written over: ``OUT_DIR`` must not exist or be empty. Damage in the input (a CRC, a
record that does not parse, a gap) is refused naming the file, the byte and the offset -- an
export never drops a batch -- and the partly written output is removed, so a failed export
leaves nothing that looks whole.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from raftmeta.records import codec
from raftmeta.records.kafka.mapping import UnmappableRecordError, bootstrap_snapshot, to_kafka_log, to_kafka_snapshot
from raftmeta.records.log_format import LogFormat, UnknownLogFormatError, sniff
from raftmeta.storage.datadir import LOG_DIR_NAME
from raftmeta.storage.errors import SnapshotError, StorageError
from raftmeta.storage.fileio import atomic_write
from raftmeta.storage.inspect import Corruption, segment_files, walk_log_dir
from raftmeta.storage.meta_properties import META_PROPERTIES
from raftmeta.storage.quorum_state import QuorumStateFile
from raftmeta.storage.segment import parse_log_file_name
from raftmeta.storage.snapshot import SnapshotId, parse_snapshot_name, read_snapshot
from raftmeta.v1 import records_pb2

BOOTSTRAP_SNAPSHOT = SnapshotId(0, 0)
KAFKA_QUORUM_STATE = "quorum-state"  # in the metadata log directory, where Kafka keeps it
PARTITION_METADATA = "partition.metadata"
# Kafka's Uuid.METADATA_TOPIC_ID (0...01), which every KRaft node writes for __cluster_metadata.
PARTITION_METADATA_TEXT = "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ\n"
NO_DIRECTORY_ID = "AAAAAAAAAAAAAAAAAAAAAA"  # Kafka's Uuid.ZERO_UUID: the vote's directory is not known


class ExportError(RuntimeError):
    """The export was refused: what and where, and nothing was left written."""


@dataclass
class ExportResult:
    """What was written: the log directory and its files, with their batch and record counts."""

    log_dir: Path
    segments: list[str] = field(default_factory=list)
    snapshots: list[str] = field(default_factory=list)
    batches: int = 0
    records: int = 0


def source_log_dir(data_dir: Path) -> Path:
    """The ``__cluster_metadata-0`` directory of ``data_dir`` (or ``data_dir`` itself, given it)."""
    if (data_dir / LOG_DIR_NAME).is_dir():
        return data_dir / LOG_DIR_NAME
    if data_dir.is_dir() and any(parse_log_file_name(p.name) is not None for p in data_dir.iterdir()):
        return data_dir
    raise ExportError(f"{data_dir} holds neither {LOG_DIR_NAME}/ nor segment files")


def export_kafka(data_dir: Path, out_dir: Path) -> ExportResult:
    """Write ``data_dir``'s log and snapshots under ``out_dir`` in Kafka's format."""
    source = source_log_dir(data_dir)
    segments = segment_files(source)
    snapshots = sorted(p for p in source.glob("*.checkpoint") if parse_snapshot_name(p.name) is not None)
    if not segments and not snapshots:
        raise ExportError(f"{source} holds no segment and no snapshot: nothing to export")
    _check_format(segments + snapshots)
    _check_intact(source)
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise ExportError(f"{out_dir} exists and is not an empty directory: an export writes over nothing")
    target = out_dir / LOG_DIR_NAME
    created_out = not out_dir.exists()
    target.mkdir(parents=True)
    try:
        return _write(data_dir, source, segments, snapshots, target)
    except BaseException:
        shutil.rmtree(out_dir if created_out else target, ignore_errors=True)
        if not created_out:
            (out_dir / META_PROPERTIES).unlink(missing_ok=True)
        raise


def _check_format(paths: list[Path]) -> None:
    for path in paths:
        with path.open("rb") as file:
            head = file.read(32)
        try:
            found = sniff(head, what=str(path))
        except UnknownLogFormatError as exc:
            raise ExportError(f"{exc}: refusing to export it") from exc
        if found is LogFormat.KAFKA:
            raise ExportError(f"{path} is in Kafka's format already: Kafka's tools read it as it is")


def _check_intact(source: Path) -> None:
    damage = [entry for entry in walk_log_dir(source) if isinstance(entry, Corruption)]
    if damage:
        first = damage[0]
        offset = f" (offset {first.offset})" if first.offset >= 0 else ""
        raise ExportError(
            f"{first.path} at byte {first.position}{offset}: {first.reason}; {len(damage)} piece(s) of damage in "
            "the log -- an export never drops a batch: see `raftmeta log dump` (a torn tail is truncated by "
            "the node's recovery when it next starts)"
        )


def _write(data_dir: Path, source: Path, segments: list[Path], snapshots: list[Path], target: Path) -> ExportResult:
    result = ExportResult(target)
    meta = data_dir / META_PROPERTIES
    if source != data_dir and meta.is_file():
        atomic_write(target.parent / META_PROPERTIES, meta.read_bytes())
    atomic_write(target / PARTITION_METADATA, PARTITION_METADATA_TEXT.encode())
    if source != data_dir:
        state = _kafka_quorum_state(data_dir)
        if state is not None:
            atomic_write(target / KAFKA_QUORUM_STATE, state.encode())
    first_voters: records_pb2.VotersRecord | None = None
    first_timestamp = 0
    for path in segments:
        data = path.read_bytes()
        try:
            mapped = to_kafka_log(data)
        except UnmappableRecordError as exc:
            raise ExportError(f"{path}: {exc}") from exc
        for batch in codec.iter_batches(data):
            result.batches += 1
            result.records += batch.header.record_count
            if first_voters is None and batch.header.is_control:
                first_voters = _voters_of(batch)
            first_timestamp = first_timestamp or batch.header.append_timestamp_ms
        atomic_write(target / path.name, mapped)
        result.segments.append(path.name)
    for path in snapshots:
        try:
            read_snapshot(path)  # whole and intact, or refused by name
            mapped = to_kafka_snapshot(path.read_bytes())
        except SnapshotError as exc:
            raise ExportError(f"{path}: {exc}") from exc
        except UnmappableRecordError as exc:
            raise ExportError(f"{path}: {exc}") from exc
        atomic_write(target / path.name, mapped)
        result.snapshots.append(path.name)
    if segments and parse_log_file_name(segments[0].name) == 0 and BOOTSTRAP_SNAPSHOT.file_name not in result.snapshots:
        # The log from its first offset: Kafka's bootstrap snapshot before it, as `kafka-storage
        # format` writes it, holds the records Kafka's readers need first.
        name = BOOTSTRAP_SNAPSHOT.file_name
        atomic_write(target / name, bootstrap_snapshot(first_voters, first_timestamp))
        result.snapshots.insert(0, name)
    return result


def _kafka_quorum_state(data_dir: Path) -> str | None:
    """raftmeta's quorum-state as Kafka's (data_version 1); None when the node has none. A damaged
    file is refused by name (an export copies nothing it cannot read)."""
    try:
        state = QuorumStateFile(data_dir).read()
    except StorageError as exc:
        raise ExportError(f"{data_dir / 'quorum-state'}: {exc}") from exc
    if state is None:
        return None
    document = {
        "leaderId": state.leader_id,
        "leaderEpoch": state.epoch,
        # raftmeta's "unknown" (-2) and "fence open" (-3) votes: none that Kafka could honour.
        "votedId": state.voted_id if state.voted_id >= 0 else -1,
        "votedDirectoryId": NO_DIRECTORY_ID,
        "data_version": 1,
    }
    return json.dumps(document, separators=(",", ":"))


def _voters_of(batch: codec.Batch) -> records_pb2.VotersRecord | None:
    for raw in batch.records():
        record = records_pb2.MetadataRecord.FromString(raw)
        if record.WhichOneof("record") == "voters":
            return record.voters
    return None
