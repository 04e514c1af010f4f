"""``raftmeta log dump``: every batch and record of a node's log or of a snapshot, decoded
field by field (like ``kafka-dump-log --cluster-metadata-decoder``).

Read-only: it never repairs anything. Damage is printed where it is found (file, byte
position, offset, reason) and the dump goes on; the exit code is then 1 (a torn tail of the
last segment alone does not fail: it is what a live node's write in progress looks like).
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from pathlib import Path
from typing import Any

import click
from google.protobuf.message import Message

from raftmeta.cli.common import EXIT_FAILED, emit_json, output_option, usage_error
from raftmeta.storage.datadir import LOG_DIR_NAME
from raftmeta.storage.errors import SnapshotError, StorageError
from raftmeta.storage.high_watermark import read_high_watermark
from raftmeta.storage.inspect import BatchEntry, Corruption, walk_file, walk_log_dir
from raftmeta.storage.meta_properties import read_meta_properties
from raftmeta.storage.quorum_state import QuorumStateFile
from raftmeta.storage.snapshot import parse_snapshot_name, read_snapshot
from raftmeta.v1 import records_pb2

UUID_FIELDS = {"topic_id", "incarnation_id"}


@click.group()
def log() -> None:
    """Inspect a node's replicated log and snapshots (read-only)."""


def decode_record(raw: bytes) -> dict[str, Any]:
    """One MetadataRecord as ``{type, fields}``; undecodable bytes give ``{type: null, error}``."""
    record = records_pb2.MetadataRecord()
    try:
        record.ParseFromString(raw)
    except Exception as exc:  # protobuf's DecodeError
        return {"type": None, "error": f"not a MetadataRecord: {exc}", "hex": raw.hex()}
    kind = record.WhichOneof("record")
    if kind is None:
        return {"type": None, "error": "no record type set", "hex": raw.hex()}
    return {"type": kind, "fields": message_fields(getattr(record, kind))}


def message_fields(message: Message) -> dict[str, Any]:
    """Every field of ``message`` (defaults included, unset optional fields omitted), with
    16-byte ids as uuids, other bytes as hex and enums by name."""
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
        return str(uuid.UUID(bytes=value)) if field.name in UUID_FIELDS and len(value) == 16 else value.hex()
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
    type=click.Path(path_type=Path, file_okay=False),
    help="A node's data dir (or its __cluster_metadata-0 directory).",
)
@click.option(
    "--snapshot", "snapshot_file", type=click.Path(path_type=Path, dir_okay=False), help="Dump this snapshot file."
)
@click.option(
    "--from-offset", type=click.IntRange(min=0), default=0, show_default=True, help="Skip batches below this offset."
)
@click.option("--records/--no-records", default=True, show_default=True, help="Decode every record of every batch.")
@output_option
def dump_command(
    data_dir: Path | None, snapshot_file: Path | None, from_offset: int, records: bool, output: str
) -> None:
    """Print every batch (offsets, epoch, count, CRC check, size) and every record decoded.

    Exit code 1 if any damage was found (it is printed where found; the dump goes on). An
    incomplete batch at the end of the last segment is reported as a torn tail and does not
    fail: on a live node it is a write in progress, after a crash recovery truncates it.
    """
    if (data_dir is None) == (snapshot_file is None):
        raise usage_error("give exactly one of --data-dir or --snapshot")
    document: dict[str, Any] = {}
    if snapshot_file is not None:
        if not snapshot_file.is_file():
            raise usage_error(f"{snapshot_file} is not a file", "--snapshot")
        entries = list(walk_file(snapshot_file, first_offset=0, from_offset=from_offset))
        document["snapshot"] = str(snapshot_file)
        sid = parse_snapshot_name(snapshot_file.name)
        document["snapshot_id"] = None if sid is None else {"offset": sid.offset, "epoch": sid.epoch}
        try:
            snap = read_snapshot(snapshot_file)
            document["valid"] = True
            document["image_records"] = len(snap.records)
        except SnapshotError as exc:
            document["valid"] = False
            document["error"] = exc.reason
    else:
        assert data_dir is not None
        if not data_dir.is_dir():
            raise usage_error(f"{data_dir} is not a directory", "--data-dir")
        log_dir = _resolve_log_dir(data_dir)
        if log_dir != data_dir:
            document.update(_node_state(data_dir))
        document["log_dir"] = str(log_dir)
        document["snapshots"] = sorted(p.name for p in log_dir.glob("*.checkpoint"))
        entries = list(walk_log_dir(log_dir, from_offset=from_offset))
    # One document per entry, in file order, so text output interleaves damage where it was found.
    items = [
        ("batch", batch_document(e, records)) if isinstance(e, BatchEntry) else ("corruption", corruption_document(e))
        for e in entries
    ]
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
    if any(not c["torn_tail"] for c in corruptions):
        raise SystemExit(EXIT_FAILED)


def _print_text(document: dict[str, Any], items: list[tuple[str, dict[str, Any]]]) -> None:
    for key in ("meta", "quorum_state", "high_watermark"):
        if key in document:
            click.echo(f"{key}: {json.dumps(document[key])}")
    if "snapshots" in document:
        click.echo(f"snapshots: {', '.join(document['snapshots']) or '(none)'}")
    if "snapshot" in document:
        click.echo(f"Dumping snapshot {document['snapshot']}")
    current: str | None = None
    for kind, doc in items:
        if doc["file"] != current:
            current = doc["file"]
            if "snapshot" not in document:
                click.echo(f"Dumping {current}")
        if kind == "batch":
            print_batch(doc)
        else:
            print_corruption(doc)
    if "snapshot" in document and not document["valid"]:
        click.echo(f"INVALID snapshot: {document['error']}")
    s = document["summary"]
    click.echo(f"{s['batches']} batches, {s['records']} records, {s['bytes']} bytes, {s['corruptions']} corruptions")
