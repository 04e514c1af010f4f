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

    def under(self, prefix: str) -> MalformedMessageError:
        """The same error, its field named from ``prefix`` (the path is built only on an error:
        formatting it for every field read cost a third of the decoding)."""
        return MalformedMessageError(prefix + self.field, self.position, self.reason)


@dataclass(frozen=True, slots=True)
class _Plan:
    """A struct's fields at one version, with what each needs decided once: (name, field,
    tagged, nullable) in schema order, and the tagged ones by tag."""

    fields: tuple[tuple[str, Field, bool, bool], ...]
    tagged: dict[int, tuple[Field, bool]]
    source: tuple[Field, ...]  # keeps the table alive, so the id it is cached under stays its own


_PLANS: dict[tuple[int, int], _Plan] = {}


def _plan(fields: tuple[Field, ...], version: int) -> _Plan:
    key = (id(fields), version)
    plan = _PLANS.get(key)
    if plan is None:
        present = [
            (spec.name, spec, version in spec.tagged, version in spec.nullable)
            for spec in fields
            if version in spec.versions
        ]
        tagged = {
            spec.tag: (spec, nullable) for _, spec, is_tagged, nullable in present if is_tagged and spec.tag is not None
        }
        plan = _PLANS[key] = _Plan(tuple(present), tagged, fields)
    return plan


# -- decode ------------------------------------------------------------------------------------


class _Reader:
    __slots__ = ("data", "end", "pos")

    def __init__(self, data: bytes, start: int, end: int) -> None:
        self.data = data
        self.pos = start
        self.end = end

    def take(self, size: int, where: str = "") -> bytes:
        if size < 0 or self.pos + size > self.end:
            raise MalformedMessageError(where, self.pos, f"needs {size} bytes, {self.end - self.pos} left")
        chunk = self.data[self.pos : self.pos + size]
        self.pos += size
        return chunk

    def uvarint(self, where: str = "") -> int:
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

    def length(self, where: str = "") -> int:
        """A compact length: -1 for null."""
        return self.uvarint(where) - 1


def decode(schema: MessageSchema, version: int, data: bytes, start: int = 0, end: int | None = None) -> Struct:
    """The message ``schema`` at ``version`` encoded in ``data[start:end]``; every byte must be
    part of it."""
    if version not in schema.valid:
        raise MalformedMessageError(schema.name, start, f"version {version} is not one of {schema.valid}")
    reader = _Reader(data, start, len(data) if end is None else end)
    try:
        value = _read_struct(reader, _plan(schema.fields, version), version)
    except MalformedMessageError as exc:
        raise exc.under(schema.name) from None
    if reader.pos != reader.end:
        raise MalformedMessageError(schema.name, reader.pos, f"{reader.end - reader.pos} bytes left after the message")
    return value


def _read_struct(reader: _Reader, plan: _Plan, version: int) -> Struct:
    """A struct; an error names its field relative to the struct (``.Name``, ``.Voters[2]``)."""
    values: dict[str, object] = {}
    for name, spec, tagged, nullable in plan.fields:
        if tagged:
            values[name] = spec.default
            continue
        try:
            values[name] = _read_value(reader, spec, version, nullable)
        except MalformedMessageError as exc:
            raise exc.under("." + name) from None
    unknown: list[tuple[int, bytes]] = []
    count = reader.uvarint(" (tagged field count)")
    previous = -1
    for _ in range(count):
        tag = reader.uvarint(" (tag)")
        if tag <= previous:
            raise MalformedMessageError("", reader.pos, f"tag {tag} after tag {previous}: tags must ascend")
        previous = tag
        size = reader.uvarint(f" (size of tag {tag})")
        known = plan.tagged.get(tag)
        if known is None:
            unknown.append((tag, reader.take(size, f" (tag {tag})")))
            continue
        spec, nullable = known
        inner = _Reader(reader.data, reader.pos, reader.pos + size)
        where = "." + spec.name
        if inner.end > reader.end:
            raise MalformedMessageError(where, reader.pos, f"tagged field of {size} bytes runs past the message")
        try:
            values[spec.name] = _read_value(inner, spec, version, nullable)
        except MalformedMessageError as exc:
            raise exc.under(where) from None
        if inner.pos != inner.end:
            raise MalformedMessageError(where, inner.pos, f"{inner.end - inner.pos} bytes left in the tagged field")
        reader.pos = inner.end
    return Struct(values, tuple(unknown))


def _read_value(reader: _Reader, spec: Field, version: int, nullable: bool) -> object:
    shape = _SHAPES.get(spec.type)
    if shape is None:
        shape = _SHAPES[spec.type] = _shape(spec)
    kind, element = shape
    if kind == _SCALAR:
        return _read_scalar(reader, element, nullable=nullable)
    if kind == _STRUCT:  # a nested struct, inline (none of these tables makes one nullable)
        return _read_struct(reader, _plan(spec.fields, version), version)
    count = reader.length()
    if count < 0:
        if not nullable:
            raise MalformedMessageError("", reader.pos, "null, but the field is not nullable")
        return None
    fixed = _FIXED_ARRAYS.get(element) if kind == _SCALARS_ARRAY else None
    if fixed is not None:  # integers: the whole array in one unpack
        return struct.unpack(f">{count}{fixed}", reader.take(count * struct.calcsize(fixed)))
    items: list[object] = []
    try:
        if kind == _STRUCTS_ARRAY:
            plan = _plan(spec.fields, version)
            for _ in range(count):
                items.append(_read_struct(reader, plan, version))
        else:
            for _ in range(count):
                items.append(_read_scalar(reader, element, nullable=False))
    except MalformedMessageError as exc:
        raise exc.under(f"[{len(items)}]") from None  # the element being read
    return tuple(items)


# A field's shape by its type (decided once per type: ``Field``'s properties are computed on each
# call): a scalar, a nested struct, an array of scalars or of structs, with the scalar type.
_SCALAR, _STRUCT, _SCALARS_ARRAY, _STRUCTS_ARRAY = range(4)
_SHAPES: dict[str, tuple[int, str]] = {}
_FIXED_ARRAYS = {"int8": "b", "int16": "h", "uint16": "H", "int32": "i", "int64": "q"}


def _shape(spec: Field) -> tuple[int, str]:
    if spec.is_array:
        return (_STRUCTS_ARRAY if spec.is_struct else _SCALARS_ARRAY), spec.element
    return (_STRUCT if spec.is_struct else _SCALAR), spec.type


def _read_scalar(reader: _Reader, type_: str, *, nullable: bool) -> object:
    fixed = _FIXED.get(type_)
    if fixed is not None:
        return fixed.unpack(reader.take(fixed.size))[0]
    if type_ == "uuid":
        return Uuid(reader.take(UUID_SIZE))
    if type_ == "bool":
        byte = reader.take(1)[0]
        if byte > 1:
            raise MalformedMessageError("", reader.pos - 1, f"bool byte {byte}, not 0 or 1")
        return byte == 1
    # string or bytes: compact
    size = reader.length()
    if size < 0:
        if not nullable:
            raise MalformedMessageError("", reader.pos, "null, but the field is not nullable")
        return None
    raw = reader.take(size)
    if type_ == "bytes":
        return raw
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedMessageError("", reader.pos - size, f"not UTF-8 ({exc.reason})") from exc


# -- encode ------------------------------------------------------------------------------------


def encode(schema: MessageSchema, version: int, value: Struct) -> bytes:
    """``value`` as the message ``schema`` at ``version``."""
    if version not in schema.valid:
        raise ValueError(f"{schema.name}: version {version} is not one of {schema.valid}")
    out = bytearray()
    _write_struct(out, _plan(schema.fields, version), version, value, schema.name)
    return bytes(out)


def _write_struct(out: bytearray, plan: _Plan, version: int, value: Struct, path: str) -> None:
    tagged: list[tuple[int, bytes]] = list(value.unknown_tagged)
    values = value.values
    for name, spec, is_tagged, nullable in plan.fields:
        if name not in values:
            raise ValueError(f"{path}.{name}: missing (it exists in version {version})")
        item = values[name]
        if is_tagged:
            if item != spec.default:
                body = bytearray()
                _write_value(body, spec, version, item, nullable, path, name)
                assert spec.tag is not None
                tagged.append((spec.tag, bytes(body)))
            continue
        _write_value(out, spec, version, item, nullable, path, name)
    if tagged:
        tagged.sort(key=lambda pair: pair[0])
    out += unsigned_varint(len(tagged))
    for tag, tagged_body in tagged:
        out += unsigned_varint(tag)
        out += unsigned_varint(len(tagged_body))
        out += tagged_body


def _write_value(
    out: bytearray, spec: Field, version: int, item: object, nullable: bool, parent: str, name: str
) -> None:
    """One field's value; ``parent`` and ``name`` make its path for an error (built only then)."""
    if spec.is_array:
        if item is None:
            if not nullable:
                raise ValueError(f"{parent}.{name}: null, but the field is not nullable in version {version}")
            out += b"\x00"
            return
        if not isinstance(item, tuple | list):
            raise ValueError(f"{parent}.{name}: an array, not {type(item).__name__}")
        out += unsigned_varint(len(item) + 1)
        if spec.is_struct:
            plan = _plan(spec.fields, version)
            for index, element in enumerate(item):
                if not isinstance(element, Struct):
                    raise ValueError(f"{parent}.{name}[{index}]: a struct, not {type(element).__name__}")
                _write_struct(out, plan, version, element, f"{parent}.{name}[{index}]")
        else:
            element_type = spec.element
            for element in item:
                _write_scalar(out, element_type, element, nullable=False, parent=parent, name=name)
        return
    if spec.is_struct:
        if not isinstance(item, Struct):
            raise ValueError(f"{parent}.{name}: a struct, not {type(item).__name__}")
        _write_struct(out, _plan(spec.fields, version), version, item, f"{parent}.{name}")
        return
    _write_scalar(out, spec.type, item, nullable=nullable, parent=parent, name=name)


def _write_scalar(out: bytearray, type_: str, item: object, *, nullable: bool, parent: str, name: str) -> None:
    fixed = _FIXED.get(type_)
    if fixed is not None:
        if type_ == "float64" and not isinstance(item, float):
            raise ValueError(f"{parent}.{name}: a float, not {type(item).__name__}")
        if type_ != "float64" and (not isinstance(item, int) or isinstance(item, bool)):
            raise ValueError(f"{parent}.{name}: an int, not {type(item).__name__}")
        try:
            out += fixed.pack(item)
        except struct.error as exc:
            raise ValueError(f"{parent}.{name}: {item} does not fit {type_}") from exc
        return
    if type_ == "bool":
        if not isinstance(item, bool):
            raise ValueError(f"{parent}.{name}: a bool, not {type(item).__name__}")
        out.append(1 if item else 0)
        return
    if type_ == "uuid":
        if not isinstance(item, Uuid):
            raise ValueError(f"{parent}.{name}: a Uuid, not {type(item).__name__}")
        out += item.raw
        return
    if item is None:
        if not nullable:
            raise ValueError(f"{parent}.{name}: null, but the field is not nullable")
        out += b"\x00"
        return
    if type_ == "string":
        if not isinstance(item, str):
            raise ValueError(f"{parent}.{name}: a str, not {type(item).__name__}")
        raw = item.encode("utf-8")
    else:
        if not isinstance(item, bytes):
            raise ValueError(f"{parent}.{name}: bytes, not {type(item).__name__}")
        raw = item
    out += unsigned_varint(len(raw) + 1)
    out += raw
