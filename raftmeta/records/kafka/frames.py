"""The records of a metadata log batch: ``ApiMessageAndVersion`` frames (metadata records) and
KRaft's control records, decoded from and encoded to a record's key and value.

A metadata record is a record with a null key whose value is the frame: an unsigned varint frame
version (1; Kafka refuses 0, KRaft's 2.8 preview), the api key and the record version (unsigned
varints), then the message (:mod:`raftmeta.records.kafka.message`). A control record -- a
record of a batch whose control attribute is set -- has a key of int16 version (0) and int16
type, and a value that is the type's message, which Kafka reads at version 0 whatever the
message's own ``Version`` field says (so does :func:`decode_control`).

A record type or version the tables do not know is carried: its message bytes are kept as they
are (``data`` is bytes) and written back unchanged, so a log from a newer Kafka passes through
whole. A record that breaks the rules raises :class:`MalformedRecordError` naming its offset and
the field.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final, TypeAlias

from kio.serial.readers import read_unsigned_varint

from raftmeta.records.kafka import message
from raftmeta.records.kafka.batch import ATTR_CONTROL, Record, RecordBatch
from raftmeta.records.kafka.message import MalformedMessageError, Struct
from raftmeta.records.kafka.schema import Field, Schemas
from raftmeta.records.kafka.schemas import (
    CONTROL_RECORD_NAMES,
    CONTROL_RECORDS,
    METADATA_RECORD_NAMES,
    METADATA_RECORDS,
)
from raftmeta.records.wire import varint as unsigned_varint

FRAME_VERSION: Final = 1
CONTROL_KEY: Final = struct.Struct(">hh")
CONTROL_KEY_VERSION: Final = 0
CONTROL_VALUE_VERSION: Final = 0  # the version Kafka reads every control record's message at


@dataclass(frozen=True, slots=True)
class MetadataRecord:
    """An ``ApiMessageAndVersion``: the record type (api key), its version and its message
    (a :class:`Struct`; the undecoded message bytes for a type or version not in the tables)."""

    api_key: int
    version: int
    data: Struct | bytes

    @property
    def name(self) -> str:
        schema = METADATA_RECORDS.get(self.api_key)
        return schema.name if schema is not None else f"UnknownRecord(apiKey={self.api_key})"

    @property
    def known(self) -> bool:
        return isinstance(self.data, Struct)


@dataclass(frozen=True, slots=True)
class ControlRecord:
    """A control record: its type (``LEADER_CHANGE`` ...) and its message (bytes if unknown)."""

    type: int
    data: Struct | bytes
    key_version: int = CONTROL_KEY_VERSION

    @property
    def name(self) -> str:
        return CONTROL_RECORD_NAMES.get(self.type, f"UnknownControlRecord(type={self.type})")

    @property
    def known(self) -> bool:
        return isinstance(self.data, Struct)


LogRecord: TypeAlias = MetadataRecord | ControlRecord


class MalformedRecordError(ValueError):
    """A record whose bytes break the format: names its offset and the field."""

    def __init__(self, offset: int, field: str, reason: str) -> None:
        super().__init__(f"record at offset {offset}: {field}: {reason}")
        self.offset = offset
        self.field = field
        self.reason = reason


# -- metadata records --------------------------------------------------------------------------


def _uvarint(data: bytes, pos: int, what: str) -> tuple[int, int]:
    if pos >= len(data):
        raise MalformedMessageError(what, pos, "the value ends before the frame does")
    try:
        value, size = read_unsigned_varint(data, pos)
    except Exception as exc:  # kio's native reader: underflow, overlong
        raise MalformedMessageError(what, pos, f"not an unsigned varint ({exc})") from exc
    return int(value), pos + size


def decode_metadata(value: bytes, schemas: Schemas = METADATA_RECORDS) -> MetadataRecord:
    """A metadata record's value (an ApiMessageAndVersion frame) -> the record. ``schemas``: the
    field tables to read with (Kafka's; raftmeta's mapping reads with its extended ones)."""
    frame_version, pos = _uvarint(value, 0, "frame version")
    if frame_version != FRAME_VERSION:
        hint = " (KRaft's 2.8 preview format, which Kafka does not read either)" if frame_version == 0 else ""
        raise MalformedMessageError("frame version", 0, f"{frame_version}, expected {FRAME_VERSION}{hint}")
    api_key, pos = _uvarint(value, pos, "api key")
    version, pos = _uvarint(value, pos, "version")
    schema = schemas.get(api_key)
    if schema is None or version not in schema.valid:
        return MetadataRecord(api_key, version, value[pos:])
    return MetadataRecord(api_key, version, message.decode(schema, version, value, pos))


def encode_metadata(record: MetadataRecord, schemas: Schemas = METADATA_RECORDS) -> bytes:
    """The record's value bytes: the frame, then the message."""
    head = unsigned_varint(FRAME_VERSION) + unsigned_varint(record.api_key) + unsigned_varint(record.version)
    if isinstance(record.data, bytes):
        return head + record.data
    schema = schemas.get(record.api_key)
    if schema is None:
        raise ValueError(f"api key {record.api_key} has no schema: give its message as bytes")
    return head + message.encode(schema, record.version, record.data)


def metadata_record(name: str, version: int = 0, **values: object) -> MetadataRecord:
    """A metadata record by its name and field values (``metadata_record("TopicRecord",
    Name="t", TopicId=uuid)``); a field left out takes its default."""
    api_key = METADATA_RECORD_NAMES[name]
    schema = METADATA_RECORDS[api_key]
    return MetadataRecord(api_key, version, struct_of(schema.fields, version, values))


def struct_of(fields: tuple[Field, ...], version: int, values: dict[str, object]) -> Struct:
    """A :class:`Struct` of ``fields`` at ``version``: ``values`` where given, defaults elsewhere."""
    known = {spec.name for spec in fields if version in spec.versions}
    unknown = set(values) - known
    if unknown:
        raise ValueError(f"no fields {sorted(unknown)} in version {version}")
    return Struct({spec.name: values.get(spec.name, spec.default) for spec in fields if spec.name in known})


# -- control records ---------------------------------------------------------------------------


def decode_control(key: bytes | None, value: bytes | None, schemas: Schemas = CONTROL_RECORDS) -> ControlRecord:
    if key is None or len(key) < CONTROL_KEY.size:
        raise MalformedMessageError("control record key", 0, f"{0 if key is None else len(key)} bytes, needs 4")
    key_version, type_ = CONTROL_KEY.unpack_from(key)
    if len(key) != CONTROL_KEY.size:
        raise MalformedMessageError("control record key", CONTROL_KEY.size, f"{len(key) - 4} bytes after the type")
    if value is None:
        raise MalformedMessageError(CONTROL_RECORD_NAMES.get(type_, "control record"), 0, "null value")
    schema = schemas.get(type_)
    if schema is None:
        return ControlRecord(type_, value, key_version)
    return ControlRecord(type_, message.decode(schema, CONTROL_VALUE_VERSION, value), key_version)


def encode_control(record: ControlRecord, schemas: Schemas = CONTROL_RECORDS) -> tuple[bytes, bytes]:
    """The control record's key and value."""
    key = CONTROL_KEY.pack(record.key_version, record.type)
    if isinstance(record.data, bytes):
        return key, record.data
    return key, message.encode(schemas[record.type], CONTROL_VALUE_VERSION, record.data)


# -- a batch's records -------------------------------------------------------------------------


def batch_records(
    batch: RecordBatch,
    *,
    metadata_schemas: Schemas = METADATA_RECORDS,
    control_schemas: Schemas = CONTROL_RECORDS,
) -> Iterator[tuple[int, LogRecord]]:
    """Each record of ``batch`` with its offset, decoded as the batch's control flag says (with
    Kafka's field tables unless others are given)."""
    control = batch.is_control
    for record in batch.records:
        offset = batch.base_offset + record.offset_delta
        try:
            if control:
                yield offset, decode_control(record.key, record.value, control_schemas)
                continue
            if record.value is None:
                raise MalformedMessageError("value", 0, "null: a metadata record's value is its frame")
            if record.key is not None:
                raise MalformedMessageError("key", 0, f"{len(record.key)} bytes: a metadata record's key is null")
            yield offset, decode_metadata(record.value, metadata_schemas)
        except MalformedMessageError as exc:
            raise MalformedRecordError(offset, exc.field, f"{exc.reason} (byte {exc.position} of its value)") from exc


def record_of(log_record: LogRecord, *, offset_delta: int, timestamp_delta: int = 0) -> Record:
    """``log_record`` as a record of a batch (its key and value)."""
    if isinstance(log_record, ControlRecord):
        key, value = encode_control(log_record)
        return Record(offset_delta, timestamp_delta, key, value)
    return Record(offset_delta, timestamp_delta, None, encode_metadata(log_record))


def new_batch(
    base_offset: int,
    leader_epoch: int,
    records: Sequence[LogRecord],
    timestamp_ms: int,
    *,
    control: bool = False,
) -> RecordBatch:
    """A batch as KRaft writes one: consecutive offsets, every record at ``timestamp_ms``, no
    producer (id -1, epoch -1, sequence -1)."""
    if not records:
        raise ValueError("a record batch holds at least one record")
    if any(isinstance(r, ControlRecord) != control for r in records):
        raise ValueError("a control batch holds control records only, and only it does")
    return RecordBatch(
        base_offset,
        leader_epoch,
        ATTR_CONTROL if control else 0,
        len(records) - 1,
        timestamp_ms,
        timestamp_ms,
        -1,
        -1,
        -1,
        tuple(record_of(r, offset_delta=i) for i, r in enumerate(records)),
    )
