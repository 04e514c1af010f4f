"""The fixed-layout partition encoder writes exactly what kio's generic writer writes, at every
version of Metadata and DescribeTopicPartitions the listener serves."""

from __future__ import annotations

import io
import random
import uuid
from typing import Any

import pytest
from kio.index import load_response_schema
from kio.serial import entity_writer

from raftmeta.kafka.build import build
from raftmeta.kafka.framing import SIZE_BYTES, encode_response
from raftmeta.kafka.partition_encoding import (
    _CACHE,
    _encode,
    _layout,
    encode_brokers,
    encode_partitions,
    holds_encoded,
)
from raftmeta.kafka.versions import SUPPORTED
from raftmeta.v1 import controller_pb2, errors_pb2

SERVED = [(3, v) for v in range(SUPPORTED[3][0], SUPPORTED[3][1] + 1)] + [
    (75, v) for v in range(SUPPORTED[75][0], SUPPORTED[75][1] + 1)
]


def random_topic(rng: random.Random, name: str, partitions: int) -> controller_pb2.TopicDescription:
    topic = controller_pb2.TopicDescription(name=name, topic_id=uuid.UUID(int=rng.getrandbits(128)).bytes)
    for index in range(partitions):
        replicas = rng.sample(range(2**31 - 1), rng.randint(0, 8))
        isr = replicas[: rng.randint(0, len(replicas))]
        leader = rng.choice([-1, *replicas]) if replicas else -1
        topic.partitions.add(
            partition=index, leader=leader, leader_epoch=rng.randint(-1, 2**31 - 1), replicas=replicas, isr=isr
        )
    return topic


def kio_partition_values(partition: controller_pb2.PartitionDescription) -> dict[str, Any]:
    """A partition entry as kio's generic path is given it (the reference)."""
    return {
        "error_code": errors_pb2.LEADER_NOT_AVAILABLE if partition.leader < 0 else 0,
        "partition_index": partition.partition,
        "leader_id": partition.leader,
        "leader_epoch": partition.leader_epoch,
        "replica_nodes": list(partition.replicas),
        "isr_nodes": list(partition.isr),
        "offline_replicas": [],
        "eligible_leader_replicas": [],
        "last_known_elr": [],
    }


def response_values(
    api_key: int, version: int, topics: list[controller_pb2.TopicDescription], fast: bool
) -> dict[str, Any]:
    described = [
        {
            "error_code": int(t.error_code),
            "name": t.name,
            "topic_id": uuid.UUID(bytes=t.topic_id) if t.topic_id else uuid.UUID(int=0),
            "is_internal": False,
            "partitions": (
                encode_partitions(api_key, version, t) if fast else [kio_partition_values(p) for p in t.partitions]
            )
            if t.error_code == 0
            else [],
            "topic_authorized_operations": -(2**31),
        }
        for t in topics
    ]
    brokers = [
        {"node_id": 1, "host": "127.0.0.1", "port": 9092, "rack": None},
        {"node_id": 7, "host": "::1", "port": 65535, "rack": "r\u00e9"},
    ]
    key = tuple(tuple(sorted(b.items(), key=str)) for b in brokers)
    return {
        "throttle_time": 0,
        "brokers": encode_brokers(api_key, version, key, lambda: brokers) if fast and api_key == 3 else brokers,
        "cluster_id": "cluster",
        "controller_id": 1,
        "cluster_authorized_operations": -(2**31),
        "topics": described,
        "next_cursor": {"topic_name": "z", "partition_index": 3},
    }


def kio_frame(correlation_id: int, response: Any) -> bytes:
    header_type = response.__header_schema__
    body = io.BytesIO()
    entity_writer(header_type)(body, header_type(correlation_id=correlation_id))
    entity_writer(type(response))(body, response)
    return len(body.getvalue()).to_bytes(SIZE_BYTES, "big") + body.getvalue()


@pytest.mark.parametrize(("api_key", "version"), SERVED)
def test_fast_partitions_are_byte_equal_to_kio_at_every_version_served(api_key: int, version: int) -> None:
    rng = random.Random(f"{api_key}-{version}")
    failed = controller_pb2.TopicDescription(name="gone", error_code=errors_pb2.UNKNOWN_TOPIC_OR_PARTITION)
    topics = [random_topic(rng, "a", 300), random_topic(rng, "empty", 0), failed, random_topic(rng, "b", 7)]
    cls = load_response_schema(api_key, version)
    fast = build(cls, response_values(api_key, version, topics, fast=True))
    generic = build(cls, response_values(api_key, version, topics, fast=False))
    assert holds_encoded(fast) and not holds_encoded(generic)
    assert encode_response(41, fast) == kio_frame(41, generic)
    # The generic path of the listener itself (no encoded partitions) is kio's too.
    assert encode_response(41, generic) == kio_frame(41, generic)


def test_a_changed_topic_is_encoded_anew_not_answered_from_the_cache() -> None:
    rng = random.Random(7)
    topic = random_topic(rng, "moves", 50)
    before = encode_partitions(3, 12, topic).data
    assert encode_partitions(3, 12, topic).data == before  # the cached bytes
    topic.partitions[10].leader = -1
    topic.partitions[11].isr[:] = []
    after = encode_partitions(3, 12, topic).data
    assert after != before and after == _encode(_layout(3, 12), topic.partitions)


def test_the_cache_stays_within_its_bytes() -> None:
    rng = random.Random(9)
    for index in range(40):
        encode_partitions(75, 0, random_topic(rng, f"t{index}", 2000))
    assert 0 < _CACHE._bytes <= _CACHE._max_bytes


@pytest.mark.parametrize(("api_key", "version"), [(3, 8), (3, 12), (75, 0)])
def test_a_replica_list_longer_than_a_one_byte_length_is_written_as_kio_writes_it(api_key: int, version: int) -> None:
    topic = controller_pb2.TopicDescription(name="wide", topic_id=uuid.UUID(int=5).bytes)
    topic.partitions.add(partition=0, leader=0, leader_epoch=3, replicas=list(range(300)), isr=list(range(130)))
    topic.partitions.add(partition=1, leader=-1, replicas=[1, 2], isr=[])
    cls = load_response_schema(api_key, version)
    fast = build(cls, response_values(api_key, version, [topic], fast=True))
    generic = build(cls, response_values(api_key, version, [topic], fast=False))
    assert encode_response(1, fast) == kio_frame(1, generic)
