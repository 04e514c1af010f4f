"""Field tables of Kafka's message schemas, as data: what a field is (its type, the versions it
exists in, when it may be null, when it is a tagged field and under which tag, its default).

Written from the JSON schemas Kafka publishes (``metadata/src/main/resources/common/metadata/``
and ``clients/src/main/resources/common/message/``) with the same version-range notation
("0+", "1-3"), so a table can be read side by side with its schema. Every metadata and control
record schema is flexible from version 0 (compact strings and arrays, tagged fields), which is
the only encoding :mod:`raftmeta.records.kafka.message` implements; :func:`message` refuses a
schema that is not.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, TypeAlias

from raftmeta.api.ids import uuid_from_str, uuid_to_str

UUID_SIZE: Final = 16


@dataclass(frozen=True, slots=True, order=True)
class Uuid:
    """A Kafka ``Uuid``: 16 bytes; shown as Kafka shows it (URL-safe base64, no padding)."""

    raw: bytes

    def __post_init__(self) -> None:
        if len(self.raw) != UUID_SIZE:
            raise ValueError(f"a Uuid is {UUID_SIZE} bytes, not {len(self.raw)}")

    def __str__(self) -> str:
        return uuid_to_str(self.raw)

    @classmethod
    def parse(cls, text: str) -> Uuid:
        return cls(uuid_from_str(text))


ZERO_UUID: Final = Uuid(bytes(UUID_SIZE))


# The scalar types of Kafka's schema language that the metadata and control records use.
SCALARS = frozenset({"bool", "int8", "int16", "uint16", "int32", "int64", "float64", "string", "bytes", "uuid"})


@dataclass(frozen=True, slots=True)
class Versions:
    """A version range: ``low`` to ``high`` inclusive (``high`` None: "and every later one")."""

    low: int
    high: int | None = None

    @classmethod
    def parse(cls, text: str) -> Versions:
        if text.endswith("+"):
            return cls(int(text[:-1]))
        low, _, high = text.partition("-")
        return cls(int(low), int(high) if high else int(low))

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.low <= version and (self.high is None or version <= self.high)

    def __str__(self) -> str:
        if self.high is None:
            return f"{self.low}+"
        return str(self.low) if self.low == self.high else f"{self.low}-{self.high}"


NONE = Versions(1 << 30, -1)  # "never": an empty range (no field is nullable or tagged in it)


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a message or struct. ``type`` is a scalar (:data:`SCALARS`), ``[]scalar``,
    ``[]Struct`` (``fields`` given) or ``Struct`` (a single nested struct, ``fields`` given)."""

    name: str
    type: str
    versions: Versions
    nullable: Versions = NONE
    tag: int | None = None
    tagged: Versions = NONE
    default: object = None  # resolved by Kafka's rule in :func:`f` when the schema names none
    fields: tuple[Field, ...] = ()

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element(self) -> str:
        """The element type of an array (its struct name for an array of structs)."""
        return self.type[2:]

    @property
    def is_struct(self) -> bool:
        return bool(self.fields)


def _default(type_: str, default: str | None, fields: tuple[Field, ...]) -> object:
    """A field's default, by Kafka's rule: the schema's ``default`` when given ("null" for null),
    else zero, false, the empty string, the empty array, the all-zero uuid."""
    if default == "null":
        return None
    if type_.startswith("[]"):
        if default is not None:
            raise ValueError(f"an array's default can only be null, not {default!r}")
        return ()
    if fields:  # a nested struct: every field at its default
        return None
    if type_ in ("int8", "int16", "uint16", "int32", "int64"):
        return int(default, 0) if default is not None else 0
    if type_ == "bool":
        return default == "true"
    if type_ == "float64":
        return float(default) if default is not None else 0.0
    if type_ == "string":
        return default if default is not None else ""
    if type_ == "bytes":
        return b""
    if type_ == "uuid":
        return ZERO_UUID
    raise ValueError(f"unknown field type {type_!r}")


def f(
    name: str,
    type_: str,
    versions: str,
    *,
    nullable: str | None = None,
    tag: int | None = None,
    tagged: str | None = None,
    default: str | None = None,
    fields: tuple[Field, ...] = (),
) -> Field:
    """A field as its JSON schema writes it (``f("Isr", "[]int32", "0+", nullable="0+", tag=0,
    tagged="0+", default="null")``)."""
    if (tag is None) != (tagged is None):
        raise ValueError(f"field {name}: a tagged field has both a tag and taggedVersions")
    element = type_[2:] if type_.startswith("[]") else type_
    if not fields and element not in SCALARS:
        raise ValueError(f"field {name}: type {type_!r} is neither a scalar nor a struct with fields")
    return Field(
        name,
        type_,
        Versions.parse(versions),
        Versions.parse(nullable) if nullable else NONE,
        tag,
        Versions.parse(tagged) if tagged else NONE,
        _default(type_, default, fields),
        fields,
    )


@dataclass(frozen=True, slots=True)
class MessageSchema:
    """A message: its name, api key (metadata records; None for control records), the versions
    it has, and its fields."""

    name: str
    api_key: int | None
    valid: Versions
    fields: tuple[Field, ...] = field(default=())


Schemas: TypeAlias = dict[int, MessageSchema]


def message(
    name: str, api_key: int | None, valid: str, fields: tuple[Field, ...], *, flexible: str = "0+"
) -> MessageSchema:
    """A message schema; every schema these tables hold is flexible from version 0."""
    if flexible != "0+":
        raise ValueError(f"{name}: only schemas flexible from version 0 are supported, not {flexible!r}")
    return MessageSchema(name, api_key, Versions.parse(valid), fields)
