"""Kafka's framing from the client's side, pure (values in, bytes out; bytes in, objects out).

The listener (:mod:`raftmeta.kafka.framing`) reads requests and writes responses; the project's
own Kafka clients -- the fuzz, the benchmarks' load generator, the tests -- write requests and
read responses with the same library (kio, from Kafka's own schemas), here.
"""

from __future__ import annotations

import io
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from raftmeta.kafka.build import build


def encode_request(
    api_key: int, version: int, values: dict[str, Any], correlation_id: int, client_id: str | None
) -> bytes:
    """A request without its size prefix: the version's header and the body built from
    ``values`` (dicts with the union of every version's fields, as :func:`build` takes them)."""
    body_type = load_request_schema(api_key, version)
    header_type = body_type.__header_schema__
    buffer = io.BytesIO()
    header = {"request_api_key": api_key, "request_api_version": version, "correlation_id": correlation_id}
    entity_writer(header_type)(buffer, build(header_type, {**header, "client_id": client_id}))
    entity_writer(body_type)(buffer, build(body_type, values))
    return buffer.getvalue()


def decode_response(frame: bytes, api_key: int, version: int) -> tuple[int, Any]:
    """A response frame without its size prefix → (correlation id, kio response entity)."""
    response_type = load_response_schema(api_key, version)
    header, header_size = entity_reader(response_type.__header_schema__)(frame, 0)
    body, _ = entity_reader(response_type)(frame, header_size)
    return int(header.correlation_id), body
