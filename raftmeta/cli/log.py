"""``raftmeta log dump``: every batch and record of a node's log or of a snapshot, decoded
field by field (like ``kafka-dump-log --cluster-metadata-decoder``); ``raftmeta log repair``:
truncate a stopped node's log where recovery refused to; ``raftmeta log export --format kafka``:
the log and snapshots as a Kafka ``__cluster_metadata-0`` directory (raftmeta/storage/kafka_export.py).

``dump`` is read-only: it never repairs anything. Damage is printed where it is found (file,
byte position, offset, reason) and the dump goes on; the exit code is then 1 (a torn tail of
the last segment alone does not fail: it is what a live node's write in progress looks like).

``repair`` is the operator's answer to a refusal to start (docs/storage.md, "Damaged disk"): it
works on the files directly, without recovery (which refuses), checks that the offset is a
batch boundary reached through intact batches, says what it will drop, and only then truncates.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path
from typing import Any

import click
from google.protobuf.message import Message

from raftmeta.api.ids import UUID_BYTES, uuid_to_str
from raftmeta.cli.common import EXIT_FAILED, CheckFailed, emit_json, output_option, usage_error
from raftmeta.cli.log_kafka import (
    KAFKA_FORMAT,
    KafkaBatchEntry,
    files_format,
    kafka_batch_document,
    kafka_quorum_state,
    print_kafka_batch,
    walk_kafka_file,
)
from raftmeta.records.decode import NotARecordError, parse_record
from raftmeta.records.kafka.mapping import UnmappableRecordError, from_kafka_value
from raftmeta.records.kafka.schemas import SNAPSHOT_FOOTER, SNAPSHOT_HEADER
from raftmeta.records.log_format import LogFormat, UnknownLogFormatError
from raftmeta.storage.datadir import LOG_DIR_NAME
from raftmeta.storage.errors import SnapshotError, StorageError
from raftmeta.storage.high_watermark import HighWatermarkCheckpoint, read_high_watermark
from raftmeta.storage.inspect import (
    BatchEntry,
    Corruption,
    repairable_in_log_dir,
    segment_files,
    walk_file,
    walk_log_dir,
)
from raftmeta.storage.kafka_export import ExportError, export_kafka
from raftmeta.storage.log import TruncationPlan, apply_truncation, log_gap, plan_truncation
from raftmeta.storage.meta_properties import read_meta_properties
from raftmeta.storage.quorum_state import QuorumStateFile
from raftmeta.storage.segment import parse_log_file_name
from raftmeta.storage.snapshot import SnapshotStore, parse_snapshot_name, read_snapshot

# Kafka Uuids among the records' fields: shown in Kafka's form (raftmeta.api.ids).
UUID_FIELDS = frozenset({"topic_id", "incarnation_id", "directory_id", "directories", "log_dirs"})
# Messages whose every bytes field is a list of uuids (a PartitionChangeRecord's directories).
UUID_LIST_MESSAGES = frozenset({"raftmeta.v1.DirectoryList"})


@click.group()
def log() -> None:
    """Inspect a node's replicated log and snapshots (dump), or truncate a damaged one (repair)."""


def decode_record(raw: bytes) -> dict[str, Any]:
    """One MetadataRecord as ``{type, fields}``; undecodable bytes give ``{type: null, error}``."""
    try:
        record = parse_record(raw)
    except NotARecordError as exc:
        return {"type": None, "error": str(exc), "hex": raw.hex()}
    kind = record.WhichOneof("record")
    if kind is None:
        return {"type": None, "error": "no record type set", "hex": raw.hex()}
    return {"type": kind, "fields": message_fields(getattr(record, kind))}


def message_fields(message: Message) -> dict[str, Any]:
    """Every field of ``message`` (defaults included, unset optional fields omitted), with
    16-byte ids in Kafka's form, other bytes as hex and enums by name."""
    out: dict[str, Any] = {}
    for field in message.DESCRIPTOR.fields:
        if field.has_presence and not field.is_repeated and not message.HasField(field.name):
            continue
        value = getattr(message, field.name)
        if field.is_repeated:
            out[field.name] = [_field_value(field, v) for v in value]
        else:
            out[field.name] = _field_value(field, value)
    return out


def _field_value(field: Any, value: Any) -> Any:
    """One scalar or message value of ``field`` (a FieldDescriptor; upb has its own class)."""
    if field.message_type is not None:
        return message_fields(value)
    if field.enum_type is not None:
        described = field.enum_type.values_by_number.get(value)
        return described.name if described is not None else value
    if isinstance(value, bytes):
        is_uuid = field.name in UUID_FIELDS or field.containing_type.full_name in UUID_LIST_MESSAGES
        return uuid_to_str(value) if is_uuid and len(value) == UUID_BYTES else value.hex()
    return value


def batch_document(entry: BatchEntry, with_records: bool) -> dict[str, Any]:
    h = entry.header
    doc: dict[str, Any] = {
        "file": str(entry.path),
        "position": entry.position,
        "base_offset": h.base_offset,
        "last_offset": h.last_offset,
        "epoch": h.epoch,
        "count": h.record_count,
        "control": h.is_control,
        "append_timestamp_ms": h.append_timestamp_ms,
        "crc": f"{h.crc:#010x}",
        "crc_ok": entry.crc_ok,
        "size_bytes": h.size_bytes,
    }
    if with_records:
        try:
            raws = entry.records()
        except ValueError as exc:
            doc["records_error"] = str(exc)
        else:
            doc["records"] = [{"offset": h.base_offset + i, **decode_record(raw)} for i, raw in enumerate(raws)]
    return doc


def corruption_document(c: Corruption) -> dict[str, Any]:
    return {
        "file": str(c.path),
        "position": c.position,
        "offset": c.offset,
        "reason": c.reason,
        "torn_tail": c.torn_tail,
    }


def _time(ms: int) -> str:
    try:
        return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).isoformat(timespec="milliseconds")
    except (OverflowError, OSError, ValueError):
        return str(ms)


def print_batch(doc: dict[str, Any]) -> None:
    click.echo(
        f"base_offset: {doc['base_offset']} last_offset: {doc['last_offset']} count: {doc['count']} "
        f"epoch: {doc['epoch']} control: {str(doc['control']).lower()} position: {doc['position']} "
        f"size: {doc['size_bytes']} crc: {doc['crc']} crc_ok: {str(doc['crc_ok']).lower()} "
        f"append_time: {_time(doc['append_timestamp_ms'])}"
    )
    if "records_error" in doc:
        click.echo(f"| records unreadable: {doc['records_error']}")
    for record in doc.get("records", []):
        if record["type"] is None:
            click.echo(f"| offset: {record['offset']} UNDECODABLE {record['error']} {record['hex']}")
        else:
            click.echo(f"| offset: {record['offset']} {record['type']}: {json.dumps(record['fields'])}")


def print_corruption(doc: dict[str, Any]) -> None:
    offset = f" (offset {doc['offset']})" if doc["offset"] >= 0 else ""
    if doc["torn_tail"]:
        click.echo(
            f"TORN TAIL {doc['file']} at byte {doc['position']}{offset}: {doc['reason']} "
            "(a write in progress, or a torn write that recovery truncates)"
        )
    else:
        click.echo(f"CORRUPT {doc['file']} at byte {doc['position']}{offset}: {doc['reason']}")


def _resolve_log_dir(data_dir: Path) -> Path:
    if (data_dir / LOG_DIR_NAME).is_dir():
        return data_dir / LOG_DIR_NAME
    if data_dir.is_dir() and any(p.suffix == ".log" for p in data_dir.iterdir()):
        return data_dir  # given the log directory itself
    raise usage_error(f"{data_dir} holds neither {LOG_DIR_NAME}/ nor segment files", "--data-dir")


def _node_state(data_dir: Path) -> dict[str, Any]:
    """meta.properties, quorum-state and the high-watermark checkpoint, each or its error."""
    state: dict[str, Any] = {}
    try:
        meta = read_meta_properties(data_dir)
        state["meta"] = None if meta is None else {"cluster_id": meta.cluster_id, "node_id": meta.node_id}
    except StorageError as exc:
        state["meta"] = {"error": str(exc)}
    try:
        qs = QuorumStateFile(data_dir).read()
        state["quorum_state"] = (
            None
            if qs is None
            else {"epoch": qs.epoch, "voted_id": qs.voted_id, "leader_id": qs.leader_id, "voters": list(qs.voters)}
        )
    except StorageError as exc:
        state["quorum_state"] = {"error": str(exc)}
    try:
        state["high_watermark"] = read_high_watermark(data_dir)
    except StorageError as exc:
        state["high_watermark"] = {"error": str(exc)}
    return state


@log.command("dump")
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path),
    help="A node's data dir (or its __cluster_metadata-0 directory).",
)
@click.option(
    "--snapshot", "snapshot_file", type=click.Path(path_type=Path, dir_okay=False), help="Dump this snapshot file."
)
@click.option(
    "--files",
    "segment_files_given",
    multiple=True,
    type=click.Path(path_type=Path, dir_okay=False),
    help="Dump these segment (.log) files alone, as kafka-dump-log --files does; repeatable.",
)
@click.option(
    "--from-offset", type=click.IntRange(min=0), default=0, show_default=True, help="Skip batches below this offset."
)
@click.option("--records/--no-records", default=True, show_default=True, help="Decode every record of every batch.")
@output_option
def dump_command(
    data_dir: Path | None,
    snapshot_file: Path | None,
    segment_files_given: tuple[Path, ...],
    from_offset: int,
    records: bool,
    output: str,
) -> None:
    """Print every batch (offsets, epoch, count, CRC check, size) and every record decoded.

    Exit code 1 if any damage was found (it is printed where found; the dump goes on). An
    incomplete batch at the end of the last segment is reported as a torn tail and does not
    fail: on a live node it is a write in progress, after a crash recovery truncates it.
    """
    if sum((data_dir is not None, snapshot_file is not None, bool(segment_files_given))) != 1:
        raise usage_error("give exactly one of --data-dir, --snapshot or --files")
    document: dict[str, Any] = {}
    entries: list[BatchEntry | KafkaBatchEntry | Corruption] = []
    if segment_files_given:
        for path in segment_files_given:
            if not path.is_file():
                raise usage_error(f"{path} is not a file", "--files")
            if parse_log_file_name(path.name) is None:
                raise usage_error(f"{path.name} is not a segment file name (20-digit base offset, .log)", "--files")
        log_format = _format_of(list(segment_files_given), "--files")
        for path in segment_files_given:
            base = parse_log_file_name(path.name)
            assert base is not None
            # Alone, a segment's end may be a write in progress: reported as a torn tail.
            if log_format is LogFormat.KAFKA:
                entries.extend(walk_kafka_file(path, first_offset=base, from_offset=from_offset, last_segment=True))
            else:
                entries.extend(walk_file(path, first_offset=base, from_offset=from_offset, last_segment=True))
        document["files"] = [str(p) for p in segment_files_given]
    elif snapshot_file is not None:
        if not snapshot_file.is_file():
            raise usage_error(f"{snapshot_file} is not a file", "--snapshot")
        log_format = _format_of([snapshot_file], "--snapshot")
        document["snapshot"] = str(snapshot_file)
        sid = parse_snapshot_name(snapshot_file.name)
        document["snapshot_id"] = None if sid is None else {"offset": sid.offset, "epoch": sid.epoch}
        if log_format is LogFormat.KAFKA:
            entries.extend(walk_kafka_file(snapshot_file, first_offset=0, from_offset=from_offset))
            document.update(_kafka_snapshot_validity(entries))
        else:
            entries.extend(walk_file(snapshot_file, first_offset=0, from_offset=from_offset))
            try:
                snap = read_snapshot(snapshot_file)
                document["valid"] = True
                document["image_records"] = len(snap.records)
            except SnapshotError as exc:
                document["valid"] = False
                document["error"] = exc.reason
    else:
        assert data_dir is not None
        if data_dir.is_file():
            raise usage_error(f"{data_dir} is a file: dump one segment file with --files {data_dir}", "--data-dir")
        if not data_dir.is_dir():
            raise usage_error(f"{data_dir} is not a directory", "--data-dir")
        log_dir = _resolve_log_dir(data_dir)
        snapshots = sorted(log_dir.glob("*.checkpoint"))
        log_format = _format_of([*segment_files(log_dir), *snapshots], "--data-dir")
        if log_format is LogFormat.KAFKA:
            if log_dir != data_dir:
                document["meta"] = _node_state(data_dir)["meta"]
            document["quorum_state"] = kafka_quorum_state(log_dir)
        elif log_dir != data_dir:
            document.update(_node_state(data_dir))
        document["log_dir"] = str(log_dir)
        document["snapshots"] = [p.name for p in snapshots]
        if log_format is LogFormat.KAFKA:
            entries.extend(_walk_kafka_log_dir(log_dir, from_offset))
        else:
            entries.extend(walk_log_dir(log_dir, from_offset=from_offset))
        document["gap"] = _gap_document(log_dir, entries)
        if log_format is not LogFormat.KAFKA:
            document["repairable"] = _repairable_document(log_dir, document.get("high_watermark"))
    document["format"] = None if log_format is None else log_format.value
    # One document per entry, in file order, so text output interleaves damage where it was found.
    items = [_entry_document(e, records) for e in entries]
    batches = [doc for kind, doc in items if kind == "batch"]
    corruptions = [doc for kind, doc in items if kind == "corruption"]
    if snapshot_file is not None and not document["valid"] and not corruptions:
        corruptions.append(
            {"file": str(snapshot_file), "position": -1, "offset": -1, "reason": document["error"], "torn_tail": False}
        )
    document["batches"] = batches
    document["corruptions"] = corruptions
    document["summary"] = {
        "batches": len(batches),
        "records": sum(b["count"] for b in batches),
        "bytes": sum(b["size_bytes"] for b in batches),
        "corruptions": len(corruptions),
        "torn_tails": sum(1 for c in corruptions if c["torn_tail"]),
    }
    if output == "json":
        emit_json(document)
    else:
        _print_text(document, items)
    if any(not c["torn_tail"] for c in corruptions) or document.get("gap"):
        raise SystemExit(EXIT_FAILED)


def _repairable_document(log_dir: Path, high_watermark: object) -> list[dict[str, Any]]:
    """The damaged batches a node started on ``log_dir`` repairs from the quorum (their slot is
    known); other damage it truncates (a torn tail) or refuses (docs/storage.md)."""
    floor = high_watermark if isinstance(high_watermark, int) else 0
    return [
        {
            "file": str(path),
            "position": slot.position,
            "offset": slot.base_offset,
            "end_offset": slot.next_offset,
            "epoch": slot.epoch,
            # A slot across an epoch change: the highest epoch its offsets may be of (else null).
            "max_epoch": slot.max_epoch,
            "size_bytes": slot.size,
            "reason": slot.reason,
        }
        for path, slot in repairable_in_log_dir(log_dir, floor)
    ]


def _format_of(paths: list[Path], param: str) -> LogFormat | None:
    """The log format of ``paths``, or a usage error naming the file and what it holds."""
    try:
        return files_format(paths)
    except UnknownLogFormatError as exc:
        raise usage_error(f"{exc}: refusing to read it", param) from exc


def _entry_document(entry: BatchEntry | KafkaBatchEntry | Corruption, with_records: bool) -> tuple[str, dict[str, Any]]:
    if isinstance(entry, BatchEntry):
        return "batch", batch_document(entry, with_records)
    if isinstance(entry, KafkaBatchEntry):
        doc = kafka_batch_document(entry, with_records)
        if "records" in doc:
            _add_raftmeta_views(doc["records"], entry)
        return "batch", doc
    return "corruption", corruption_document(entry)


def _add_raftmeta_views(documents: list[dict[str, Any]], entry: KafkaBatchEntry) -> None:
    """Each record's ``raftmeta`` view (JSON only): the raftmeta record it maps to
    (raftmeta/records/kafka/mapping.py), shown as a raftmeta log's dump shows it, so an exported
    log's dump can be read against the native one record for record. A Kafka record raftmeta
    has no record for (a feature level, an ACL ...) has none."""
    batch = entry.found.batch
    for document, stored in zip(documents, batch.records, strict=True):
        try:
            record = from_kafka_value(batch.is_control, stored.key, stored.value, document["offset"])
        except UnmappableRecordError:
            continue
        kind = record.WhichOneof("record")
        if kind is not None:
            document["raftmeta"] = {"type": kind, "fields": message_fields(getattr(record, kind))}


def _walk_kafka_log_dir(log_dir: Path, from_offset: int) -> list[KafkaBatchEntry | Corruption]:
    """Every batch of every segment of a Kafka-format log directory (as :func:`walk_log_dir`)."""
    files = segment_files(log_dir)
    out: list[KafkaBatchEntry | Corruption] = []
    for i, path in enumerate(files):
        next_base = parse_log_file_name(files[i + 1].name) if i + 1 < len(files) else None
        if next_base is not None and next_base <= from_offset:
            continue  # wholly below the requested offset
        base = parse_log_file_name(path.name)
        assert base is not None
        out += walk_kafka_file(path, first_offset=base, from_offset=from_offset, last_segment=i == len(files) - 1)
    return out


def _kafka_snapshot_validity(entries: list[BatchEntry | KafkaBatchEntry | Corruption]) -> dict[str, Any]:
    """Whether a Kafka snapshot is whole as Kafka requires: no damage, a SnapshotHeader first
    and a SnapshotFooter last; and how many image records it holds between them."""
    damage = [e for e in entries if isinstance(e, Corruption)]
    batches = [e.found for e in entries if isinstance(e, KafkaBatchEntry)]
    records = [r for found in batches for _, r in (found.records or ())]
    error = None
    if damage:
        error = f"{len(damage)} pieces of damage, the first at byte {damage[0].position}: {damage[0].reason}"
    elif not records or getattr(records[0], "type", None) != SNAPSHOT_HEADER or not batches[0].batch.is_control:
        error = "it does not start with a SnapshotHeader control record"
    elif getattr(records[-1], "type", None) != SNAPSHOT_FOOTER or not batches[-1].batch.is_control:
        error = "it does not end with a SnapshotFooter control record (an unfinished snapshot)"
    image = sum(len(f.batch.records) for f in batches if not f.batch.is_control)
    return {"valid": error is None, "image_records": image} | ({} if error is None else {"error": error})


def _gap_document(log_dir: Path, entries: list[BatchEntry | KafkaBatchEntry | Corruption]) -> dict[str, Any] | None:
    """The offsets below the log held in no snapshot (a lost newer snapshot), as recovery refuses them."""
    files = segment_files(log_dir)
    base = parse_log_file_name(files[0].name) if files else None
    snapshot = SnapshotStore(log_dir).latest_id()
    gap = None if base is None else log_gap(base, None if snapshot is None else snapshot.offset)
    if gap is None:
        return None
    ends = [
        e.header.next_offset if isinstance(e, BatchEntry) else e.next_offset
        for e in entries
        if not isinstance(e, Corruption)
    ]
    return {
        "first_missing_offset": gap[0],
        "log_start_offset": gap[1] + 1,
        "log_end_offset": max(ends, default=gap[1] + 1),
        "snapshot": None if snapshot is None else snapshot.file_name,
    }


def _print_text(document: dict[str, Any], items: list[tuple[str, dict[str, Any]]]) -> None:
    for key in ("meta", "quorum_state", "high_watermark"):
        if key in document:
            click.echo(f"{key}: {json.dumps(document[key])}")
    if "snapshots" in document:
        click.echo(f"snapshots: {', '.join(document['snapshots']) or '(none)'}")
    gap = document.get("gap")
    if gap:
        newest = "no snapshot" if gap["snapshot"] is None else f"the newest snapshot {gap['snapshot']}"
        click.echo(
            f"GAP: offsets {gap['first_missing_offset']}..{gap['log_start_offset'] - 1} are in no snapshot and no "
            f"segment: the log starts at offset {gap['log_start_offset']}, {newest} ends at offset "
            f"{gap['first_missing_offset']} (a newer snapshot is missing; docs/storage.md, Damaged disk)"
        )
    if "snapshot" in document:
        click.echo(f"Dumping snapshot {document['snapshot']}")
    current: str | None = None
    for kind, doc in items:
        if doc["file"] != current:
            current = doc["file"]
            if "snapshot" not in document:
                click.echo(f"Dumping {current}")
        if kind == "batch" and doc.get("format") == KAFKA_FORMAT:
            print_kafka_batch(doc)
        elif kind == "batch":
            print_batch(doc)
        else:
            print_corruption(doc)
    if "snapshot" in document and not document["valid"]:
        click.echo(f"INVALID snapshot: {document['error']}")
    for slot in document.get("repairable") or []:
        epochs = (
            f"epoch {slot['epoch']}" if slot["max_epoch"] is None else f"epochs {slot['epoch']}..{slot['max_epoch']}"
        )
        click.echo(
            f"REPAIRABLE: offsets {slot['offset']}..{slot['end_offset'] - 1} ({epochs}) at byte "
            f"{slot['position']} of {slot['file']}: {slot['reason']}; a node started on this data dir keeps the "
            "batch and repairs it from the quorum (docs/storage.md, Repair from the quorum)"
        )
    s = document["summary"]
    click.echo(f"{s['batches']} batches, {s['records']} records, {s['bytes']} bytes, {s['corruptions']} corruptions")


# -- raftmeta log repair ------------------------------------------------------------------------


def _resolve_node_dir(path: Path) -> tuple[Path, Path]:
    """``(data dir, log dir)`` of a node's data dir, or of its log directory given directly."""
    if (path / LOG_DIR_NAME).is_dir():
        return path, path / LOG_DIR_NAME
    if path.name == LOG_DIR_NAME and path.is_dir():
        return path.parent, path
    raise usage_error(f"{path} is not a node's data dir: it holds no {LOG_DIR_NAME}/ directory", "--data-dir")


def _interactive() -> bool:
    """Whether there is a terminal to ask the operator on."""
    return sys.stdin.isatty()


def _repair_document(
    data_dir: Path, plan: TruncationPlan, snapshot_offset: int | None, checkpointed: int
) -> dict[str, Any]:
    damage = plan.damage
    dropped = plan.dropped
    lowered = min(checkpointed, plan.offset)
    warnings: list[str] = []
    if lowered < checkpointed:
        warnings.append(
            f"lowers the high-watermark checkpoint from {checkpointed} to {lowered}: offsets "
            f"{lowered}..{checkpointed - 1} were checkpointed as committed by this node, so they must still be on "
            "a majority of the other voters (repair one node at a time, only while the rest of the quorum is healthy)"
        )
    return {
        "data_dir": str(data_dir),
        "log_dir": str(plan.directory),
        "truncate_at": plan.offset,
        "log_start_offset": plan.log_start_offset,
        "snapshot_offset": snapshot_offset,
        "damage": None
        if damage is None
        else {
            "file": str(plan.segment),
            "position": damage.position,
            "offset": damage.offset,
            "reason": damage.reason,
            "torn_tail": damage.truncated,
        },
        "segment": str(plan.segment),
        "position": plan.position,
        "restart": plan.restart,
        "drop": {
            "batches": dropped.count,
            "first_offset": dropped.first_offset,
            "last_offset": dropped.last_offset,
            "bytes": plan.bytes_dropped,
            "deleted_segments": [str(p) for p in plan.deleted_segments],
        },
        "high_watermark": {"checkpointed": checkpointed, "after": lowered},
        "warnings": warnings,
        "applied": False,
    }


def _print_repair_plan(doc: dict[str, Any]) -> None:
    snapshot = doc["snapshot_offset"]
    click.echo(
        f"log directory: {doc['log_dir']} (log start {doc['log_start_offset']}, "
        f"newest snapshot {'none' if snapshot is None else f'ends at offset {snapshot}'})"
    )
    damage = doc["damage"]
    if damage is not None:
        kind = "torn write" if damage["torn_tail"] else "damage"
        click.echo(
            f"{kind}: {damage['file']} at byte {damage['position']} (offset {damage['offset']}): {damage['reason']}"
        )
    drop = doc["drop"]
    segment = Path(doc["segment"]).name
    if doc["restart"]:
        click.echo(
            f"the log starts at offset {doc['log_start_offset']}, above the newest snapshot: delete every segment "
            f"file; the log will restart empty at offset {doc['truncate_at']}"
        )
        click.echo(
            f"drop: {drop['batches']} intact batches (offsets {drop['first_offset']}..{drop['last_offset']}), "
            f"{drop['bytes']} bytes, {1 + len(drop['deleted_segments'])} segment files"
        )
    elif drop["bytes"] == 0:
        click.echo(f"the log already ends at offset {doc['truncate_at']} ({segment}, byte {doc['position']})")
    else:
        click.echo(f"truncate {segment} at byte {doc['position']}: the log will end at offset {doc['truncate_at']}")
        batches = f"{drop['batches']} intact batches"
        if drop["batches"]:
            batches += f" (offsets {drop['first_offset']}..{drop['last_offset']})"
        deleted = drop["deleted_segments"]
        files = ", ".join(Path(p).name for p in deleted) if deleted else "none"
        click.echo(f"drop: {batches}, {drop['bytes']} bytes; later segment files deleted: {len(deleted)} ({files})")
    hw = doc["high_watermark"]
    click.echo(f"high-watermark checkpoint: {hw['checkpointed']} -> {hw['after']}")
    for warning in doc["warnings"]:
        click.echo(f"WARNING: {warning}")


@log.command("repair")
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path, file_okay=False, exists=True),
    required=True,
    help="A stopped node's data dir (or its __cluster_metadata-0 directory).",
)
@click.option(
    "--truncate-at",
    "offset",
    type=click.IntRange(min=0, max=2**63 - 1),  # an int64 log offset
    required=True,
    metavar="OFFSET",
    help="The new log end offset: every batch from OFFSET on is dropped. Must be a batch boundary.",
)
@click.option("--yes", "-y", is_flag=True, help="Truncate without asking (required when there is no terminal).")
@output_option
def repair_command(data_dir: Path, offset: int, yes: bool, output: str) -> None:
    """Truncate a stopped node's log at OFFSET: accept the truncation recovery refused.

    For a node that refuses to start on corruption in the middle of its log: the refusal names
    the command, with OFFSET where the damage starts. Checks that OFFSET is a batch boundary
    reached through intact batches (else names the nearest ones), is not below the newest
    snapshot and not beyond the log end; prints what it drops (batches, bytes, segment files,
    offsets); then, with --yes or when confirmed on a terminal, truncates the segment, deletes
    the later segment files and their indexes, fsyncs, and lowers the high-watermark
    checkpoint to OFFSET if it is above. The node refetches the rest from the leader: run it
    on one node at a time, only while the other voters are healthy (docs/storage.md).

    For a node that refuses to start because its log starts above the newest snapshot (a lost
    snapshot file), OFFSET is that snapshot's end offset: every segment file is deleted and
    the log restarts empty there.

    Exit code 0 when truncated (or nothing to do), 1 if it failed or was declined, 2 for a
    usage error, including an OFFSET it refuses and a missing --yes without a terminal.
    """
    data_dir, log_dir = _resolve_node_dir(data_dir)
    snapshot = SnapshotStore(log_dir).latest_id()
    if snapshot is not None and offset < snapshot.offset:
        raise usage_error(
            f"offset {offset} is below the end offset {snapshot.offset} of the newest snapshot "
            f"{snapshot.file_name}: offsets below it are in the snapshot and are never truncated",
            "--truncate-at",
        )
    try:
        checkpointed = read_high_watermark(data_dir)
        plan = plan_truncation(log_dir, offset, None if snapshot is None else snapshot.offset)
    except ValueError as exc:
        raise usage_error(str(exc), "--truncate-at") from None
    except (StorageError, OSError) as exc:
        raise CheckFailed(str(exc)) from exc
    doc = _repair_document(data_dir, plan, None if snapshot is None else snapshot.offset, checkpointed)
    lowers_checkpoint = doc["high_watermark"]["after"] < checkpointed
    if output != "json":
        _print_repair_plan(doc)
    if plan.changes_nothing and not lowers_checkpoint:
        _repair_done(doc, output, "nothing to do")
        return
    if not yes:
        if not _interactive():
            _repair_done(doc, output, None)
            raise usage_error("nothing changed: pass --yes to truncate (there is no terminal to confirm on)")
        if not click.confirm("Truncate the log as shown?", default=False, err=True):
            _repair_done(doc, output, None)
            raise CheckFailed("declined: nothing changed")
    try:
        if not plan.changes_nothing:
            apply_truncation(plan)
        if lowers_checkpoint:
            HighWatermarkCheckpoint(data_dir).reset(offset)
    except (StorageError, OSError) as exc:
        raise CheckFailed(f"repair failed: {exc}") from exc
    doc["applied"] = True
    done = "the log restarts empty" if plan.restart else "truncated: the log ends"
    _repair_done(doc, output, f"{done} at offset {offset}; start the node to refetch the rest")


def _repair_done(doc: dict[str, Any], output: str, message: str | None) -> None:
    if output == "json":
        emit_json(doc)
    elif message is not None:
        click.echo(message)


# -- raftmeta log export ------------------------------------------------------------------------


@log.command("export")
@click.option(
    "--format",
    "export_format",
    type=click.Choice([LogFormat.KAFKA.value]),
    required=True,
    help="The format to write: kafka (a __cluster_metadata-0 directory Kafka's own tools read).",
)
@click.argument("data_dir", type=click.Path(path_type=Path, file_okay=False, exists=True))
@click.argument("out_dir", type=click.Path(path_type=Path))
@output_option
def export_command(export_format: str, data_dir: Path, out_dir: Path, output: str) -> None:
    """Write a node's log and snapshots (DATA_DIR, or its __cluster_metadata-0) into OUT_DIR in
    Kafka's format: the same offsets, epochs and segment and snapshot names, with Kafka's
    bootstrap snapshot before a log that starts at offset 0 (docs/log-format.md).

    Read-only on DATA_DIR (export a stopped node, or a copy of a live one's dir). OUT_DIR must not
    exist or be empty. Damage in DATA_DIR is refused naming the file, byte and offset, and nothing
    is left in OUT_DIR.
    """
    assert export_format == LogFormat.KAFKA.value
    try:
        result = export_kafka(data_dir, out_dir)
    except ExportError as exc:
        raise CheckFailed(str(exc), code="EXPORT_REFUSED") from exc
    document = {
        "format": export_format,
        "log_dir": str(result.log_dir),
        "segments": result.segments,
        "snapshots": result.snapshots,
        "batches": result.batches,
        "records": result.records,
    }
    if output == "json":
        emit_json(document)
        return
    click.echo(f"wrote {result.log_dir} in Kafka's format: {result.records} records in {result.batches} batches")
    click.echo(f"segments: {', '.join(result.segments) or '(none)'}")
    click.echo(f"snapshots: {', '.join(result.snapshots) or '(none)'}")
