"""``raftmeta log dump`` of Kafka-format files: the metadata log directory of a real KRaft node
(``__cluster_metadata-0``: segments and ``.checkpoint`` snapshots), read unchanged.

The batches and records are shown as ``kafka-dump-log --cluster-metadata-decoder`` shows them
(raftmeta/records/kafka/json_view.py): the same batch line, and each record's JSON with Kafka's
field names, so the two tools' outputs can be read side by side. Damage is found by the Kafka
walk (raftmeta/records/kafka/walk.py) and reported as every other dump reports it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from raftmeta.records.kafka.json_view import batch_view
from raftmeta.records.log_format import LogFormat
from raftmeta.storage import kafka_inspect
from raftmeta.storage.inspect import Corruption
from raftmeta.storage.kafka_inspect import KafkaBatchEntry, KafkaDamage, files_format

__all__ = [
    "KAFKA_FORMAT",
    "KafkaBatchEntry",
    "files_format",
    "kafka_batch_document",
    "kafka_quorum_state",
    "print_kafka_batch",
    "walk_kafka_file",
]

KAFKA_FORMAT = LogFormat.KAFKA.value  # a batch document's "format"
QUORUM_STATE_FILE = "quorum-state"  # Kafka keeps it in the metadata log directory


def walk_kafka_file(
    path: Path, *, first_offset: int = -1, from_offset: int = 0, last_segment: bool = False
) -> list[KafkaBatchEntry | Corruption]:
    """Every batch of a Kafka-format file from ``from_offset`` and every piece of damage found
    (a file ending inside a batch is a torn tail when it is the last segment)."""
    out: list[KafkaBatchEntry | Corruption] = []
    for entry in kafka_inspect.walk_kafka_file(path, first_offset=first_offset):
        if isinstance(entry, KafkaDamage):
            out.append(entry.corruption(last_segment=last_segment))
        elif entry.next_offset > from_offset:
            out.append(entry)
    return out


def kafka_quorum_state(log_dir: Path) -> dict[str, Any] | None:
    """Kafka's ``quorum-state`` file of the log directory (its JSON as stored), or its error."""
    path = log_dir / QUORUM_STATE_FILE
    if not path.is_file():
        return None
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        return {"error": f"{path}: {exc}"}
    return state if isinstance(state, dict) else {"error": f"{path}: not a JSON object"}


def kafka_batch_document(entry: KafkaBatchEntry, with_records: bool) -> dict[str, Any]:
    found = entry.found
    batch = found.batch
    doc: dict[str, Any] = {
        "format": KAFKA_FORMAT,
        "file": str(entry.path),
        "position": found.position,
        "base_offset": batch.base_offset,
        "last_offset": batch.last_offset,
        "epoch": batch.partition_leader_epoch,
        "count": len(batch.records),
        "control": batch.is_control,
        "append_timestamp_ms": batch.max_timestamp,
        "crc": f"{found.crc:#010x}",
        "crc_ok": found.crc_ok,
        "size_bytes": found.size,
    }
    if with_records:
        if found.records is None:
            doc["records_error"] = "a record does not decode (see the damage reported for this batch)"
        else:
            view = batch_view(found.position, batch, found.size, found.crc)
            doc["kafka_fields"] = view.fields
            doc["records"] = [
                {"offset": r.offset, "fields": r.fields, "label": r.label, "payload": r.payload} for r in view.records
            ]
    return doc


def print_kafka_batch(doc: dict[str, Any]) -> None:
    """The batch as kafka-dump-log prints it (its batch line; each record's line and JSON)."""
    fields = doc.get("kafka_fields")
    if fields is None:  # --no-records, or a record that does not decode: the fields raftmeta read
        click.echo(
            f"baseOffset: {doc['base_offset']} lastOffset: {doc['last_offset']} count: {doc['count']} "
            f"partitionLeaderEpoch: {doc['epoch']} isControl: {str(doc['control']).lower()} "
            f"position: {doc['position']} CreateTime: {doc['append_timestamp_ms']} size: {doc['size_bytes']} "
            f"crc: {int(doc['crc'], 16)} isvalid: {str(doc['crc_ok']).lower()}"
        )
    else:
        line = " ".join(f"{name}: {value}" for name, value in fields.items() if name != "isvalid")
        click.echo(f"{line} isvalid: {str(doc['crc_ok']).lower()}")
    if "records_error" in doc:
        click.echo(f"| records unreadable: {doc['records_error']}")
    for record in doc.get("records", []):
        f = record["fields"]
        separator = ":" if record["label"] in ("payload", "LeaderChange") else ""
        click.echo(
            f"| offset: {f['offset']} CreateTime: {f['CreateTime']} keySize: {f['keySize']} "
            f"valueSize: {f['valueSize']} sequence: {f['sequence']} headerKeys: [{f['headerKeys']}] "
            f"{record['label']}{separator} {json.dumps(record['payload'], separators=(',', ':'), ensure_ascii=False)}"
        )
