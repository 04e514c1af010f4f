"""Kafka's request/response framing, pure (bytes in, objects out; no sockets).

A Kafka frame is a 4-byte big-endian size followed by that many bytes: a request header (v1, or v2
with tagged fields for flexible versions) and the request body. The header and body layouts are
kio's, generated from Kafka's own JSON schemas (docs/kafka-protocol.md says why kio); this module
only decides which generated type reads which bytes and refuses what it cannot read.

Refusals are typed so the connection can answer as Kafka does: an ApiVersions request at a version
we do not know gets an UNSUPPORTED_VERSION answer in ApiVersions v0 (KIP-511: the client then
retries with a version we listed); anything else we cannot read closes the connection, which is
what a Kafka broker does with an unparseable request.
"""

from __future__ import annotations

import dataclasses
import io
import types
import typing
from dataclasses import dataclass
from typing import Any, Final

from kio.index import load_request_schema
from kio.serial import entity_reader, entity_writer
from kio.serial.readers import read_int16, read_int32

from raftmeta.api.limits import KAFKA_FRAME_BYTES_MAX
from raftmeta.kafka.partition_encoding import write_body
from raftmeta.kafka.versions import API_VERSIONS_KEY, SUPPORTED

# Size prefix, api key + version, correlation id: a shorter request frame cannot be a request.
SIZE_BYTES: Final = 4
REQUEST_PREFIX_BYTES: Final = 8
# The default largest request frame accepted (raftmeta.api.limits says why).
DEFAULT_FRAME_BYTES_MAX: Final = KAFKA_FRAME_BYTES_MAX
METADATA_KEY: Final = 3
# Metadata names topics by id from v12 on; before it a topic's name may not be null.
METADATA_TOPIC_IDS_VERSION: Final = 12


class FrameError(Exception):
    """A frame this listener will not read: the connection is closed."""


@dataclass(frozen=True, slots=True)
class UnsupportedVersion(Exception):
    """A request whose api key or version we do not serve (header prefix read, body not)."""

    api_key: int
    api_version: int
    correlation_id: int

    def __str__(self) -> str:
        return f"api key {self.api_key} version {self.api_version} is not supported"


@dataclass(frozen=True, slots=True)
class Request:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any  # a kio request entity of (api_key, api_version)


def frame_size(prefix: bytes, frame_bytes_max: int) -> int:
    """The size a 4-byte prefix announces; FrameError when it cannot be a request we accept."""
    size, _ = read_int32(prefix, 0)
    if size < REQUEST_PREFIX_BYTES:
        raise FrameError(f"frame size {size} is smaller than a request header")
    if size > frame_bytes_max:
        raise FrameError(f"frame size {size} exceeds the limit of {frame_bytes_max} bytes")
    return int(size)


def decode_request(frame: bytes) -> Request:
    """A request frame (without its size prefix) → :class:`Request`.

    Raises UnsupportedVersion for an api key/version outside :data:`SUPPORTED`, FrameError for
    bytes that do not parse as the header and body they claim."""
    if len(frame) < REQUEST_PREFIX_BYTES:
        raise FrameError(f"request of {len(frame)} bytes is shorter than a request header")
    api_key, _ = read_int16(frame, 0)
    api_version, _ = read_int16(frame, 2)
    correlation_id, _ = read_int32(frame, 4)
    supported = SUPPORTED.get(int(api_key))
    if supported is None or not supported[0] <= api_version <= supported[1]:
        raise UnsupportedVersion(int(api_key), int(api_version), int(correlation_id))
    body_type = load_request_schema(api_key, api_version)
    try:
        header, header_size = entity_reader(body_type.__header_schema__)(frame, 0)
        # Bytes after the body are ignored, as a Kafka broker ignores them: librdkafka's Metadata
        # request for all topics reserves 4 bytes for a compact (1-byte) topic count, 3 left over.
        body, _ = entity_reader(body_type)(frame, header_size)
    except Exception as exc:  # kio raises a variety (ValueError, UnicodeDecodeError, its own)
        raise FrameError(
            f"api key {api_key} v{api_version}: undecodable request ({type(exc).__name__}: {exc})"
        ) from exc
    # kio reads a null (length -1) string or array even where the schema does not allow one;
    # Kafka's generated readers refuse it, and the broker closes the connection.
    null = _null_where_not_nullable(body)
    if null is not None:
        raise FrameError(f"api key {api_key} v{api_version}: non-nullable field {null} was serialized as null")
    # KafkaApis.handleTopicMetadataRequest refuses a null topic name before v12
    # (InvalidRequestException): the answer's name is not nullable there, no answer can be written.
    if api_key == METADATA_KEY and api_version < METADATA_TOPIC_IDS_VERSION and _names_a_topic_by_id(body):
        raise FrameError(f"Metadata v{api_version}: topic name can not be null before v12")
    return Request(int(api_key), int(api_version), int(correlation_id), header.client_id, body)


def _names_a_topic_by_id(metadata: Any) -> bool:
    return any(topic.name is None for topic in metadata.topics or ())


# Each kio entity class's fields: (name, may be None, holds nested entities); filled on first use.
_SHAPES: dict[type[Any], tuple[tuple[str, bool, bool], ...]] = {}


def _shape(cls: type[Any]) -> tuple[tuple[str, bool, bool], ...]:
    """Each field of a kio entity class: (name, may be None, holds nested entities)."""
    known = _SHAPES.get(cls)
    if known is not None:
        return known
    shape = []
    for field in dataclasses.fields(cls):
        parts = typing.get_args(field.type) if typing.get_origin(field.type) in (types.UnionType, typing.Union) else ()
        nullable = type(None) in parts
        inner = [t for t in parts if t is not type(None)] if parts else [field.type]
        nested = any(
            (dataclasses.is_dataclass(t) and isinstance(t, type))
            or (typing.get_origin(t) is tuple and any(dataclasses.is_dataclass(a) for a in typing.get_args(t)))
            for t in inner
        )
        shape.append((field.name, nullable, nested))
    _SHAPES[cls] = tuple(shape)
    return _SHAPES[cls]


def _null_where_not_nullable(entity: Any) -> str | None:
    """The first field of ``entity`` (nested ones included) that is None where its type does not
    allow it, as ``Class.field``; None if there is none."""
    for name, nullable, nested in _shape(type(entity)):
        value = getattr(entity, name)
        if value is None:
            if not nullable:
                return f"{type(entity).__name__}.{name}"
        elif nested:
            for item in value if isinstance(value, tuple) else (value,):
                found = _null_where_not_nullable(item)
                if found is not None:
                    return found
    return None


def encode_response(correlation_id: int, response: Any) -> bytes:
    """A kio response entity → a size-prefixed frame with the response header its version uses
    (v0, or v1 with tagged fields; ApiVersions always v0, as kio's schema says)."""
    header_type = response.__header_schema__
    buffer = io.BytesIO()
    buffer.write(b"\0\0\0\0")
    entity_writer(header_type)(buffer, header_type(correlation_id=correlation_id))
    write_body(buffer, response)
    data = buffer.getbuffer()
    data[0:SIZE_BYTES] = (len(data) - SIZE_BYTES).to_bytes(SIZE_BYTES, "big")
    return bytes(data)


def is_api_versions(error: UnsupportedVersion) -> bool:
    return error.api_key == API_VERSIONS_KEY
