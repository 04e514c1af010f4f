"""A fuzz round on the Kafka framing and handlers: damaged copies of valid requests (every API at
every advertised version) and random bytes. A frame either is refused (FrameError or
UnsupportedVersion: the listener closes the connection, or answers ApiVersions v0) or decodes to a
request whose handler answers with a frame a client can decode; no other exception, and a refused
frame never reaches the admin path."""

from __future__ import annotations

import asyncio

import grpc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raftmeta.api.rpc_errors import error_metadata
from raftmeta.kafka.dispatch import handle
from raftmeta.kafka.framing import FrameError, UnsupportedVersion, decode_request
from raftmeta.server.services import AdminCallError
from tests.kafka.fakes import full_admin
from tests.kafka.helpers import FakeAdmin, context, decode_response, request_bytes
from tests.kafka.samples import REQUESTS
from tests.kafka.test_framing import EVERY_VERSION

FUZZ = settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))


@st.composite
def damaged_requests(draw: st.DrawFn) -> bytes:
    api_key, version = draw(st.sampled_from(EVERY_VERSION))
    frame = bytearray(request_bytes(api_key, version, REQUESTS[api_key]))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "set", "cut", "insert", "append"]))
        at = draw(st.integers(0, max(0, len(frame) - 1)))
        if kind == "flip" and frame:
            frame[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "set" and frame:
            frame[at] = draw(st.sampled_from([0x00, 0x7F, 0x80, 0xFF]))
        elif kind == "cut":
            del frame[at:]
        elif kind == "insert":
            frame[at:at] = draw(st.binary(min_size=1, max_size=8))
        else:
            frame += draw(st.binary(min_size=1, max_size=8))
    return bytes(frame)


def refusing_admin() -> FakeAdmin:
    """Every controller call refused as a whole: handlers must still answer. (Not UNAVAILABLE,
    which is retried until the request's timeout: the retry has its own tests.)"""
    refusal = AdminCallError(grpc.StatusCode.INVALID_ARGUMENT, "refused", error_metadata("INVALID_REQUEST"))
    admin = FakeAdmin()
    admin.answers = {method: (lambda r: refusal) for method in full_admin().answers}
    return admin


def check(frame: bytes, admin: FakeAdmin) -> None:
    try:
        request = decode_request(frame)
    except (FrameError, UnsupportedVersion):
        assert admin.calls == []
        return
    answer = asyncio.run(handle(context(admin), request))
    correlation_id, _ = decode_response(answer, request.api_key, request.api_version)
    assert correlation_id == request.correlation_id


@FUZZ
@given(damaged_requests(), st.booleans())
def test_damaged_requests_are_refused_or_answered(frame: bytes, refuse: bool) -> None:
    check(frame, refusing_admin() if refuse else full_admin())


@FUZZ
@given(st.sampled_from(EVERY_VERSION), st.binary(max_size=64))
def test_random_bodies_behind_a_valid_prefix(api: tuple[int, int], body: bytes) -> None:
    api_key, version = api
    prefix = request_bytes(api_key, version, REQUESTS[api_key])[:8]
    check(prefix + body, full_admin())


@FUZZ
@given(st.binary(max_size=64))
def test_random_bytes(frame: bytes) -> None:
    check(frame, full_admin())
