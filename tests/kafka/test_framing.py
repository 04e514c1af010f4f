"""Kafka framing: requests decode at every advertised version, responses encode with the header
their version uses, and frames the listener must not read are refused."""

from __future__ import annotations

import uuid

import pytest
from kio.schema.errors import ErrorCode

from raftmeta.kafka.dispatch import unsupported_api_versions
from raftmeta.kafka.framing import (
    DEFAULT_FRAME_BYTES_MAX,
    FrameError,
    UnsupportedVersion,
    decode_request,
    frame_size,
    is_api_versions,
)
from raftmeta.kafka.versions import SUPPORTED
from tests.kafka.helpers import decode_response, request_bytes
from tests.kafka.samples import REQUESTS

EVERY_VERSION = [(key, version) for key, (low, high) in sorted(SUPPORTED.items()) for version in range(low, high + 1)]


def test_every_advertised_api_has_a_sample() -> None:
    assert set(REQUESTS) == set(SUPPORTED)


@pytest.mark.parametrize(("api_key", "version"), EVERY_VERSION)
def test_request_decodes_at_every_advertised_version(api_key: int, version: int) -> None:
    request = decode_request(request_bytes(api_key, version, REQUESTS[api_key], correlation_id=41))
    assert (request.api_key, request.api_version, request.correlation_id) == (api_key, version, 41)
    assert request.client_id == "raftmeta-fuzz"
    assert type(request.body).__version__ == version


def test_bytes_after_the_body_are_ignored_as_a_broker_does() -> None:
    # librdkafka's Metadata request for every topic leaves 3 bytes after the body.
    frame = request_bytes(3, 12, {"topics": None, "allow_auto_topic_creation": False,
                                  "include_topic_authorized_operations": False}) + b"\x01\x00\x00"  # fmt: skip
    assert decode_request(frame).body.topics is None


def test_a_null_where_the_schema_allows_none_is_refused_as_kafka_refuses_it() -> None:
    # CreatePartitions v0 (not flexible): the body starts with the topics array's int32 length; -1
    # is null, which kio reads but Kafka's readers refuse ("non-nullable field ... was serialized
    # as null"). Before, the handler failed on it and the node logged an error.
    frame = request_bytes(37, 0, {"topics": [], "timeout": 5000, "validate_only": False})
    body = 8 + 2 + len("raftmeta-fuzz")  # api key, version, correlation id, client id
    assert frame[body : body + 4] == b"\x00\x00\x00\x00" and decode_request(frame).body.topics == ()
    with pytest.raises(FrameError, match=r"non-nullable field CreatePartitionsRequest\.topics was serialized as null"):
        decode_request(frame[:body] + b"\xff\xff\xff\xff" + frame[body + 4 :])
    # Where the schema allows null (Metadata's topics: every topic), null is read.
    every = {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
    assert decode_request(request_bytes(3, 11, every)).body.topics is None


@pytest.mark.parametrize("version", [10, 11, 12])
def test_metadata_names_topics_by_id_only_from_v12(version: int) -> None:
    # Found by `raftmeta fuzz --target kafka`: v11 read a null name (nullable from v10), and the
    # answer, whose name is not nullable before v12, could not be written. Kafka refuses the request.
    by_id = {"topics": [{"name": None, "topic_id": uuid.UUID(int=5)}], "allow_auto_topic_creation": False,
             "include_topic_authorized_operations": False, "include_cluster_authorized_operations": False}  # fmt: skip
    frame = request_bytes(3, version, by_id)
    if version >= 12:
        assert decode_request(frame).body.topics[0].name is None
    else:
        with pytest.raises(FrameError, match=f"Metadata v{version}: topic name can not be null before v12"):
            decode_request(frame)


@pytest.mark.parametrize("size", [-1, 0, 7])
def test_a_frame_smaller_than_a_header_is_refused(size: int) -> None:
    with pytest.raises(FrameError, match="smaller than a request header"):
        frame_size(size.to_bytes(4, "big", signed=True), DEFAULT_FRAME_BYTES_MAX)


def test_an_oversized_frame_is_refused_before_it_is_read() -> None:
    assert frame_size((1024).to_bytes(4, "big"), 1024) == 1024
    with pytest.raises(FrameError, match="exceeds the limit of 1024 bytes"):
        frame_size((1025).to_bytes(4, "big"), 1024)


def test_unknown_api_key_and_version_are_unsupported() -> None:
    produce = request_bytes(19, 7, REQUESTS[19])
    produce = (0).to_bytes(2, "big") + produce[2:]  # api key 0 (Produce): not served
    with pytest.raises(UnsupportedVersion) as unknown_key:
        decode_request(produce)
    assert (unknown_key.value.api_key, unknown_key.value.correlation_id) == (0, 7)
    too_new = request_bytes(19, 7, REQUESTS[19])
    too_new = too_new[:2] + (99).to_bytes(2, "big") + too_new[4:]
    with pytest.raises(UnsupportedVersion) as unknown_version:
        decode_request(too_new)
    assert (unknown_version.value.api_key, unknown_version.value.api_version) == (19, 99)
    assert not is_api_versions(unknown_version.value)


@pytest.mark.parametrize("cut", [9, 14, 20, 30])
def test_a_truncated_body_is_a_frame_error(cut: int) -> None:
    frame = request_bytes(19, 7, REQUESTS[19])
    with pytest.raises(FrameError, match="undecodable request"):
        decode_request(frame[:cut])


def test_garbage_tagged_fields_are_a_frame_error() -> None:
    frame = request_bytes(19, 7, REQUESTS[19])
    # The last byte is the body's tagged-field count (0); claim 5 fields that are not there.
    with pytest.raises(FrameError):
        decode_request(frame[:-1] + b"\x05\xff\xff\xff\xff\x0f")


def test_a_string_longer_than_the_frame_is_a_frame_error() -> None:
    frame = bytearray(request_bytes(20, 5, REQUESTS[20]))
    # Header v1: key, version, correlation id, client id (int16 length + "tests"), then the body:
    # topic_names array (int32 count) and the first name's int16 length, here made 0x7fff.
    name_length_at = 8 + 2 + len("tests") + 4
    frame[name_length_at : name_length_at + 2] = (0x7FFF).to_bytes(2, "big")
    with pytest.raises(FrameError):
        decode_request(bytes(frame))


def test_api_versions_at_an_unknown_version_gets_v0_unsupported_version_with_our_versions() -> None:
    frame = request_bytes(18, 3, REQUESTS[18], correlation_id=5)
    frame = frame[:2] + (9).to_bytes(2, "big") + frame[4:]
    with pytest.raises(UnsupportedVersion) as refused:
        decode_request(frame)
    assert is_api_versions(refused.value)
    correlation_id, response = decode_response(unsupported_api_versions(refused.value), 18, 0)
    assert correlation_id == 5
    assert response.error_code == ErrorCode.unsupported_version
    assert {k.api_key: (k.min_version, k.max_version) for k in response.api_keys} == SUPPORTED
