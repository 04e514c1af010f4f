"""Records as Kafka's tools show them: the JSON of Kafka's generated message converters (field
names in camelCase from the schema's, uuids in Kafka's base64 form, bytes in base64, tagged
fields only when they differ from their default) and the record type names of
``kafka-dump-log --cluster-metadata-decoder`` (``{"type":"TOPIC_RECORD","version":0,"data":...}``
for a metadata record; ``LeaderChange``, ``KRaftVoters``... before a control record's message).
``raftmeta log dump`` prints it, and the golden tests compare it with Kafka's own output.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass

from raftmeta.records.kafka.batch import (
    ATTR_DELETE_HORIZON,
    ATTR_TRANSACTIONAL,
    COMPRESSION_MASK,
    COMPRESSION_NAMES,
    CRC_START,
    MAGIC,
    RecordBatch,
    batch_size,
    iter_batches,
)
from raftmeta.records.kafka.frames import (
    CONTROL_VALUE_VERSION,
    ControlRecord,
    LogRecord,
    MetadataRecord,
    batch_records,
)
from raftmeta.records.kafka.message import Struct
from raftmeta.records.kafka.schema import Field, Uuid
from raftmeta.records.kafka.schemas import (
    CONTROL_RECORDS,
    KRAFT_VERSION,
    KRAFT_VOTERS,
    LEADER_CHANGE,
    METADATA_RECORDS,
    SNAPSHOT_FOOTER,
    SNAPSHOT_HEADER,
)

# What kafka-dump-log prints before each control record's message.
CONTROL_LABELS = {
    LEADER_CHANGE: "LeaderChange",
    SNAPSHOT_HEADER: "SnapshotHeader",
    SNAPSHOT_FOOTER: "SnapshotFooter",
    KRAFT_VERSION: "KRaftVersion",
    KRAFT_VOTERS: "KRaftVoters",
}
_WORD_START = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def type_name(record_name: str) -> str:
    """``PartitionChangeRecord`` -> ``PARTITION_CHANGE_RECORD`` (Kafka's MetadataRecordType)."""
    return _WORD_START.sub("_", record_name).upper()


def json_name(field_name: str) -> str:
    """``KRaftVersionFeature`` -> ``kRaftVersionFeature``: the schema's name, first letter lowered."""
    return field_name[:1].lower() + field_name[1:]


def struct_json(fields: tuple[Field, ...], version: int, value: Struct) -> dict[str, object]:
    out: dict[str, object] = {}
    for spec in fields:
        if spec.name not in value.values:
            continue
        item = value.values[spec.name]
        if version in spec.tagged and item == spec.default:
            continue
        out[json_name(spec.name)] = _value_json(spec, version, item)
    if value.unknown_tagged:  # Kafka's JSON has no place for them; raftmeta shows them
        out["_unknownTaggedFields"] = [{"tag": tag, "data": data.hex()} for tag, data in value.unknown_tagged]
    return out


def _value_json(spec: Field, version: int, item: object) -> object:
    if item is None:
        return None
    if spec.is_array:
        assert isinstance(item, tuple | list)
        if spec.is_struct:
            return [struct_json(spec.fields, version, element) for element in item]
        return [_scalar_json(element) for element in item]
    if spec.is_struct:
        assert isinstance(item, Struct)
        return struct_json(spec.fields, version, item)
    return _scalar_json(item)


def _scalar_json(item: object) -> object:
    if isinstance(item, Uuid):
        return str(item)
    if isinstance(item, bytes):
        return base64.b64encode(item).decode("ascii")
    return item


def record_json(record: LogRecord) -> tuple[str, dict[str, object]]:
    """The label and the JSON kafka-dump-log shows for ``record``: ``("payload", {"type": ...,
    "version": ..., "data": ...})`` for a metadata record, ``("LeaderChange", {...})`` for a
    control record. An undecoded message shows as its hex bytes."""
    if isinstance(record, MetadataRecord):
        schema = METADATA_RECORDS.get(record.api_key)
        if schema is None or isinstance(record.data, bytes):
            data: object = {"_undecoded": record.data.hex() if isinstance(record.data, bytes) else None}
            name = record.name
        else:
            data = struct_json(schema.fields, record.version, record.data)
            name = type_name(schema.name)
        return "payload", {"type": name, "version": record.version, "data": data}
    assert isinstance(record, ControlRecord)
    label = CONTROL_LABELS.get(record.type, record.name)
    control_schema = CONTROL_RECORDS.get(record.type)
    if control_schema is None or isinstance(record.data, bytes):
        raw = record.data if isinstance(record.data, bytes) else b""
        return label, {"_undecoded": raw.hex()}
    return label, struct_json(control_schema.fields, CONTROL_VALUE_VERSION, record.data)


@dataclass(frozen=True, slots=True)
class RecordView:
    """One record as kafka-dump-log prints it: its offset, the fields of its line (as strings),
    and its label and JSON."""

    offset: int
    fields: dict[str, str]
    label: str
    payload: dict[str, object]


@dataclass(frozen=True, slots=True)
class BatchView:
    """One batch as kafka-dump-log prints it: the fields of its line (as strings) and its records."""

    fields: dict[str, str]
    records: tuple[RecordView, ...]

    @property
    def base_offset(self) -> int:
        return int(self.fields["baseOffset"])


def _bool(value: bool) -> str:
    return "true" if value else "false"


def batch_view(position: int, batch: RecordBatch, size: int, crc: int) -> BatchView:
    """``batch`` (at byte ``position``, ``size`` bytes, stored ``crc``) as kafka-dump-log's
    ``--cluster-metadata-decoder`` shows it. Kafka's line shows the batch's max timestamp as its
    CreateTime, and each record's absolute timestamp."""
    count = len(batch.records)
    last_sequence = -1 if batch.base_sequence < 0 else batch.base_sequence + batch.last_offset_delta
    fields = {
        "baseOffset": str(batch.base_offset),
        "lastOffset": str(batch.last_offset),
        "count": str(count),
        "baseSequence": str(batch.base_sequence),
        "lastSequence": str(last_sequence),
        "producerId": str(batch.producer_id),
        "producerEpoch": str(batch.producer_epoch),
        "partitionLeaderEpoch": str(batch.partition_leader_epoch),
        "isTransactional": _bool(bool(batch.attributes & ATTR_TRANSACTIONAL)),
        "isControl": _bool(batch.is_control),
        # With the delete-horizon attribute the base timestamp is the horizon (a compacted
        # partition's batch); Kafka prints its OptionalLong as Java shows one.
        "deleteHorizonMs": (
            f"OptionalLong[{batch.base_timestamp}]" if batch.attributes & ATTR_DELETE_HORIZON else "OptionalLong.empty"
        ),
        "position": str(position),
        "CreateTime": str(batch.max_timestamp),
        "size": str(size),
        "magic": str(MAGIC),
        "compresscodec": COMPRESSION_NAMES.get(batch.attributes & COMPRESSION_MASK, "unknown"),
        "crc": str(crc),
        "isvalid": "true",
    }
    records = []
    decoded = dict(batch_records(batch))
    for record in batch.records:
        offset = batch.base_offset + record.offset_delta
        label, payload = record_json(decoded[offset])
        sequence = -1 if batch.base_sequence < 0 else batch.base_sequence + record.offset_delta
        records.append(
            RecordView(
                offset,
                {
                    "offset": str(offset),
                    "CreateTime": str(batch.base_timestamp + record.timestamp_delta),
                    "keySize": str(-1 if record.key is None else len(record.key)),
                    "valueSize": str(-1 if record.value is None else len(record.value)),
                    "sequence": str(sequence),
                    "headerKeys": ",".join(h.key for h in record.headers),
                },
                label,
                payload,
            )
        )
    return BatchView(fields, tuple(records))


def file_view(data: bytes) -> list[BatchView]:
    """Every batch of a segment's or snapshot's bytes as kafka-dump-log shows it; the first bad
    batch or record raises (CorruptBatchError, MalformedRecordError), naming where."""
    views = []
    for position, batch in iter_batches(data):
        size = batch_size(data, position)
        crc = int.from_bytes(data[position + CRC_START - 4 : position + CRC_START], "big")
        views.append(batch_view(position, batch, size, crc))
    return views
