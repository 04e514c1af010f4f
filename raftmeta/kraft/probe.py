"""Ask a running Kafka node, over the Kafka protocol, what the launcher waits on.

Three questions, each one request on a fresh connection (readiness polls run rarely; a connection
pool would outlive the JVM it talks to): DescribeQuorum to a KRaft controller (who leads, in which
epoch, with which voters and how far each has fetched: what ``kafka-metadata-quorum describe
--status/--replication`` prints; only the leader answers it, the others say
NOT_LEADER_OR_FOLLOWER) and
DescribeCluster to a broker (the brokers it knows as registered and unfenced: Kafka leaves fenced
brokers out of the answer unless asked to include them, KIP-1073) and Metadata to a broker (every
topic's partitions as that broker's own metadata image has them: leader, leader epoch, replicas,
ISR). Requests and responses are
kio's entities, generated from Kafka's own message schemas, the same ones the project's Kafka
listener speaks. A JVM is not started for this: a tool run costs seconds of class loading.
"""

from __future__ import annotations

import io
import socket
from dataclasses import dataclass
from typing import Any, Final

from kio.schema.describe_cluster.v0.request import DescribeClusterRequest
from kio.schema.describe_cluster.v0.response import DescribeClusterResponse
from kio.schema.describe_quorum.v1.request import DescribeQuorumRequest, PartitionData, TopicData
from kio.schema.describe_quorum.v1.response import DescribeQuorumResponse, ReplicaState
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.metadata.v12.response import MetadataResponse
from kio.schema.types import TopicName
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32

from raftmeta.api.addresses import parse_host_port

# KRaft's metadata log: the one topic-partition DescribeQuorum can be asked about.
METADATA_TOPIC: Final = "__cluster_metadata"
CLIENT_ID: Final = "raftmeta-kraft-launcher"
SIZE_BYTES: Final = 4


class ProbeError(Exception):
    """The node did not answer (not listening yet, gone, or answered with an error)."""


@dataclass(frozen=True, slots=True)
class Replica:
    """One voter or observer as the leader sees it; -1 for what it has not seen yet."""

    replica_id: int
    log_end_offset: int
    last_fetch_timestamp: int  # ms since the Unix epoch
    last_caught_up_timestamp: int


@dataclass(frozen=True, slots=True)
class QuorumView:
    """The quorum as its leader describes it."""

    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[Replica, ...]
    observers: tuple[Replica, ...]

    def voter(self, replica_id: int) -> Replica | None:
        return next((v for v in self.voters if v.replica_id == replica_id), None)


def describe_quorum(address: str, timeout_s: float) -> QuorumView:
    """DescribeQuorum v1 to the controller at ``address`` (host:port of its controller listener);
    ProbeError unless it is the leader."""
    request = DescribeQuorumRequest(
        topics=(TopicData(topic_name=TopicName(METADATA_TOPIC), partitions=(PartitionData(partition_index=i32(0)),)),)
    )
    response = _round_trip(address, request, DescribeQuorumResponse, timeout_s)
    if response.error_code.value != 0:
        raise ProbeError(f"{address}: DescribeQuorum answered {response.error_code.name}")
    partition = response.topics[0].partitions[0]
    if partition.error_code.value != 0:
        raise ProbeError(f"{address}: DescribeQuorum answered {partition.error_code.name} for {METADATA_TOPIC}-0")
    return QuorumView(
        leader_id=int(partition.leader_id),
        leader_epoch=int(partition.leader_epoch),
        high_watermark=int(partition.high_watermark),
        voters=tuple(_replica(v) for v in partition.current_voters),
        observers=tuple(_replica(o) for o in partition.observers),
    )


def _replica(state: ReplicaState) -> Replica:
    return Replica(
        int(state.replica_id),
        int(state.log_end_offset),
        int(state.last_fetch_timestamp),
        int(state.last_caught_up_timestamp),
    )


def unfenced_brokers(address: str, timeout_s: float) -> frozenset[int]:
    """DescribeCluster v0 to the broker at ``address``: the ids of the brokers it sees registered
    and unfenced (a broker answers from its own metadata image, so it lists itself once the
    controller has unfenced it and it has caught up with that record)."""
    request = DescribeClusterRequest(include_cluster_authorized_operations=False)
    response = _round_trip(address, request, DescribeClusterResponse, timeout_s)
    if response.error_code.value != 0:
        raise ProbeError(f"{address}: DescribeCluster answered {response.error_code.name}")
    return frozenset(int(b.broker_id) for b in response.brokers)


@dataclass(frozen=True, slots=True)
class PartitionView:
    """One partition as a broker's Metadata answer has it (-1: no leader)."""

    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]  # sorted: the ISR's order carries no meaning


def topic_partitions(address: str, timeout_s: float) -> dict[str, tuple[PartitionView, ...]]:
    """Metadata v12 for every topic (internal ones included), no auto-creation, to the broker at
    ``address``: topic name -> its partitions in partition order, from that broker's own metadata
    image (a broker answers Metadata locally, never asking the controller). A topic the broker
    answers with an error is left out; ProbeError when it does not answer."""
    request = MetadataRequest(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    response = _round_trip(address, request, MetadataResponse, timeout_s)
    topics: dict[str, tuple[PartitionView, ...]] = {}
    for topic in response.topics:
        if topic.error_code.value != 0 or topic.name is None:
            continue
        partitions = sorted(topic.partitions, key=lambda p: int(p.partition_index))
        topics[str(topic.name)] = tuple(
            PartitionView(
                int(p.leader_id),
                int(p.leader_epoch),
                tuple(int(r) for r in p.replica_nodes),
                tuple(sorted(int(r) for r in p.isr_nodes)),
            )
            for p in partitions
        )
    return topics


def _round_trip(address: str, request: Any, response_type: type[Any], timeout_s: float) -> Any:
    host, port = parse_host_port(address, "KRaft node address")
    header_type = request.__header_schema__
    header = header_type(
        request_api_key=request.__api_key__,
        request_api_version=request.__version__,
        correlation_id=i32(1),
        client_id=CLIENT_ID,
    )
    buffer = io.BytesIO()
    entity_writer(header_type)(buffer, header)
    entity_writer(type(request))(buffer, request)
    payload = buffer.getvalue()
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            sock.sendall(len(payload).to_bytes(SIZE_BYTES, "big") + payload)
            size = int.from_bytes(_read_exactly(sock, SIZE_BYTES), "big")
            frame = _read_exactly(sock, size)
    except OSError as exc:
        raise ProbeError(f"{address}: {type(exc).__name__}: {exc}") from exc
    try:
        response_header, offset = entity_reader(response_type.__header_schema__)(frame, 0)
        body, _ = entity_reader(response_type)(frame, offset)
    except Exception as exc:  # kio raises a variety (ValueError, UnicodeDecodeError, its own)
        raise ProbeError(f"{address}: undecodable answer ({type(exc).__name__}: {exc})") from exc
    if int(response_header.correlation_id) != 1:
        raise ProbeError(f"{address}: answer to correlation id {response_header.correlation_id}, not 1")
    return body


def _read_exactly(sock: socket.socket, count: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < count:
        chunk = sock.recv(count - len(chunks))
        if not chunk:
            raise ConnectionResetError(f"connection closed after {len(chunks)} of {count} bytes")
        chunks += chunk
    return bytes(chunks)
