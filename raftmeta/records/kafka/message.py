"""Kafka's flexible-version message encoding, read and written from a field table
(:mod:`raftmeta.records.kafka.schema`): the body of every metadata and control record.

- integers big-endian at their width (``uint16`` unsigned), ``bool`` one byte (0 or 1),
  ``float64`` an IEEE double, ``uuid`` its 16 bytes;
- ``string`` / ``bytes`` / arrays compact: an unsigned varint of length + 1 (0: null), then
  the UTF-8 bytes, the bytes, or the elements;
- every message and struct ends with its tagged fields: an unsigned varint count, then per field
  its tag, its size and its value (each an unsigned varint but the value), in ascending tag
  order. A tagged field is written only when it differs from its default (Kafka's writer does the
  same). Tags the table does not know are carried byte for byte (:attr:`Struct.unknown_tagged`)
  and written back in tag order, so a record from a newer Kafka loses nothing.

:func:`decode` is :func:`encode`'s inverse. Bytes that do not follow the rules raise
:class:`MalformedMessageError` naming the field (``PartitionRecord.Replicas``) and the byte.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from kio.serial.readers import read_unsigned_varint

from raftmeta.records.kafka.schema import UUID_SIZE, Field, MessageSchema, Uuid
from raftmeta.records.wire import varint as unsigned_varint

_FIXED: Final[dict[str, struct.Struct]] = {
    "int8": struct.Struct(">b"),
    "int16": struct.Struct(">h"),
    "uint16": struct.Struct(">H"),
    "int32": struct.Struct(">i"),
    "int64": struct.Struct(">q"),
    "float64": struct.Struct(">d"),
}


@dataclass(frozen=True, slots=True)
class Struct:
    """A decoded message or struct: its fields (those that exist in its version, in schema
    order) and the tagged fields the table does not know, as (tag, value bytes)."""

    values: Mapping[str, object]
    unknown_tagged: tuple[tuple[int, bytes], ...] = field(default=())

    def __getitem__(self, name: str) -> object:
        return self.values[name]


class MalformedMessageError(ValueError):
    """Bytes that are not a valid encoding: ``field`` names where (``Message.Field[3].Sub``),
    ``position`` the byte within the message."""

    def __init__(self, field_path: str, position: int, reason: str) -> None:
        super().__init__(f"field {field_path} at byte {position}: {reason}")
        self.field = field_path
        self.position = position
        self.reason = reason


# -- decode ------------------------------------------------------------------------------------


class _Reader:
    __slots__ = ("data", "end", "pos")

    def __init__(self, data: bytes, start: int, end: int) -> None:
        self.data = data
        self.pos = start
        self.end = end

    def take(self, size: int, where: str) -> bytes:
        if size < 0 or self.pos + size > self.end:
            raise MalformedMessageError(where, self.pos, f"needs {size} bytes, {self.end - self.pos} left")
        chunk = self.data[self.pos : self.pos + size]
        self.pos += size
        return chunk

    def uvarint(self, where: str) -> int:
        if self.pos >= self.end:
            raise MalformedMessageError(where, self.pos, "the bytes end inside a varint")
        try:
            value, size = read_unsigned_varint(self.data, self.pos)
        except Exception as exc:  # kio's native reader: underflow, overlong
            raise MalformedMessageError(where, self.pos, f"not an unsigned varint ({exc})") from exc
        if self.pos + size > self.end:
            raise MalformedMessageError(where, self.pos, "the varint runs past the message")
        self.pos += size
        return int(value)

    def length(self, where: str) -> int:
        """A compact length: -1 for null."""
        return self.uvarint(where) - 1


def decode(schema: MessageSchema, version: int, data: bytes, start: int = 0, end: int | None = None) -> Struct:
    """The message ``schema`` at ``version`` encoded in ``data[start:end]``; every byte must be
    part of it."""
    if version not in schema.valid:
        raise MalformedMessageError(schema.name, start, f"version {version} is not one of {schema.valid}")
    reader = _Reader(data, start, len(data) if end is None else end)
    value = _read_struct(reader, schema.fields, version, schema.name)
    if reader.pos != reader.end:
        raise MalformedMessageError(schema.name, reader.pos, f"{reader.end - reader.pos} bytes left after the message")
    return value


def _read_struct(reader: _Reader, fields: tuple[Field, ...], version: int, path: str) -> Struct:
    values: dict[str, object] = {}
    tagged: dict[int, Field] = {}
    for spec in fields:
        if version not in spec.versions:
            continue
        if version in spec.tagged:
            assert spec.tag is not None
            tagged[spec.tag] = spec
            values[spec.name] = spec.default
            continue
        values[spec.name] = _read_value(reader, spec, version, f"{path}.{spec.name}")
    unknown: list[tuple[int, bytes]] = []
    count = reader.uvarint(f"{path} (tagged field count)")
    previous = -1
    for _ in range(count):
        tag = reader.uvarint(f"{path} (tag)")
        if tag <= previous:
            raise MalformedMessageError(path, reader.pos, f"tag {tag} after tag {previous}: tags must ascend")
        previous = tag
        size = reader.uvarint(f"{path} (size of tag {tag})")
        known = tagged.get(tag)
        if known is None:
            unknown.append((tag, reader.take(size, f"{path} (tag {tag})")))
            continue
        where = f"{path}.{known.name}"
        inner = _Reader(reader.data, reader.pos, reader.pos + size)
        if inner.end > reader.end:
            raise MalformedMessageError(where, reader.pos, f"tagged field of {size} bytes runs past the message")
        values[known.name] = _read_value(inner, known, version, where)
        if inner.pos != inner.end:
            raise MalformedMessageError(where, inner.pos, f"{inner.end - inner.pos} bytes left in the tagged field")
        reader.pos = inner.end
    return Struct(values, tuple(unknown))


def _read_value(reader: _Reader, spec: Field, version: int, path: str) -> object:
    nullable = version in spec.nullable
    if spec.is_array:
        count = reader.length(path)
        if count < 0:
            if not nullable:
                raise MalformedMessageError(path, reader.pos, "null, but the field is not nullable")
            return None
        if spec.is_struct:
            return tuple(_read_struct(reader, spec.fields, version, f"{path}[{i}]") for i in range(count))
        return tuple(_read_scalar(reader, spec.element, nullable=False, path=f"{path}[{i}]") for i in range(count))
    if spec.is_struct:  # a nested struct, inline (none of these tables makes one nullable)
        return _read_struct(reader, spec.fields, version, path)
    return _read_scalar(reader, spec.type, nullable=nullable, path=path)


def _read_scalar(reader: _Reader, type_: str, *, nullable: bool, path: str) -> object:
    fixed = _FIXED.get(type_)
    if fixed is not None:
        return fixed.unpack(reader.take(fixed.size, path))[0]
    if type_ == "bool":
        byte = reader.take(1, path)[0]
        if byte > 1:
            raise MalformedMessageError(path, reader.pos - 1, f"bool byte {byte}, not 0 or 1")
        return byte == 1
    if type_ == "uuid":
        return Uuid(reader.take(UUID_SIZE, path))
    # string or bytes: compact
    size = reader.length(path)
    if size < 0:
        if not nullable:
            raise MalformedMessageError(path, reader.pos, "null, but the field is not nullable")
        return None
    raw = reader.take(size, path)
    if type_ == "bytes":
        return raw
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedMessageError(path, reader.pos - size, f"not UTF-8 ({exc.reason})") from exc


# -- encode ------------------------------------------------------------------------------------


def encode(schema: MessageSchema, version: int, value: Struct) -> bytes:
    """``value`` as the message ``schema`` at ``version``."""
    if version not in schema.valid:
        raise ValueError(f"{schema.name}: version {version} is not one of {schema.valid}")
    out = bytearray()
    _write_struct(out, schema.fields, version, value, schema.name)
    return bytes(out)


def _write_struct(out: bytearray, fields: tuple[Field, ...], version: int, value: Struct, path: str) -> None:
    tagged: list[tuple[int, bytes]] = list(value.unknown_tagged)
    for spec in fields:
        if version not in spec.versions:
            continue
        where = f"{path}.{spec.name}"
        if spec.name not in value.values:
            raise ValueError(f"{where}: missing (it exists in version {version})")
        item = value.values[spec.name]
        if version in spec.tagged:
            assert spec.tag is not None
            if item != spec.default:
                body = bytearray()
                _write_value(body, spec, version, item, where)
                tagged.append((spec.tag, bytes(body)))
            continue
        _write_value(out, spec, version, item, where)
    tagged.sort(key=lambda pair: pair[0])
    out += unsigned_varint(len(tagged))
    for tag, tagged_body in tagged:
        out += unsigned_varint(tag)
        out += unsigned_varint(len(tagged_body))
        out += tagged_body


def _write_value(out: bytearray, spec: Field, version: int, item: object, path: str) -> None:
    nullable = version in spec.nullable
    if spec.is_array:
        if item is None:
            if not nullable:
                raise ValueError(f"{path}: null, but the field is not nullable in version {version}")
            out += b"\x00"
            return
        if not isinstance(item, tuple | list):
            raise ValueError(f"{path}: an array, not {type(item).__name__}")
        out += unsigned_varint(len(item) + 1)
        for index, element in enumerate(item):
            if spec.is_struct:
                if not isinstance(element, Struct):
                    raise ValueError(f"{path}[{index}]: a struct, not {type(element).__name__}")
                _write_struct(out, spec.fields, version, element, f"{path}[{index}]")
            else:
                _write_scalar(out, spec.element, element, nullable=False, path=f"{path}[{index}]")
        return
    if spec.is_struct:
        if not isinstance(item, Struct):
            raise ValueError(f"{path}: a struct, not {type(item).__name__}")
        _write_struct(out, spec.fields, version, item, path)
        return
    _write_scalar(out, spec.type, item, nullable=nullable, path=path)


def _write_scalar(out: bytearray, type_: str, item: object, *, nullable: bool, path: str) -> None:
    fixed = _FIXED.get(type_)
    if fixed is not None:
        if type_ == "float64" and not isinstance(item, float):
            raise ValueError(f"{path}: a float, not {type(item).__name__}")
        if type_ != "float64" and (not isinstance(item, int) or isinstance(item, bool)):
            raise ValueError(f"{path}: an int, not {type(item).__name__}")
        try:
            out += fixed.pack(item)
        except struct.error as exc:
            raise ValueError(f"{path}: {item} does not fit {type_}") from exc
        return
    if type_ == "bool":
        if not isinstance(item, bool):
            raise ValueError(f"{path}: a bool, not {type(item).__name__}")
        out.append(1 if item else 0)
        return
    if type_ == "uuid":
        if not isinstance(item, Uuid):
            raise ValueError(f"{path}: a Uuid, not {type(item).__name__}")
        out += item.raw
        return
    if item is None:
        if not nullable:
            raise ValueError(f"{path}: null, but the field is not nullable")
        out += b"\x00"
        return
    if type_ == "string":
        if not isinstance(item, str):
            raise ValueError(f"{path}: a str, not {type(item).__name__}")
        raw = item.encode("utf-8")
    else:
        if not isinstance(item, bytes):
            raise ValueError(f"{path}: bytes, not {type(item).__name__}")
        raw = item
    out += unsigned_varint(len(raw) + 1)
    out += raw
