"""The Kafka requests the benchmarks send, over :class:`raftmeta.kafka.connection.KafkaConnection`.

The same calls go to raftmeta's Kafka listener and to a real KRaft cluster, so a comparison holds
the client code and the protocol equal: CreateTopics (to a raftmeta node, or to a Kafka broker,
which forwards it to the active controller), Metadata of one topic (to a raftmeta node, or to a
broker, which answers from its metadata image) and DescribeQuorum (to a raftmeta node, or to a
KRaft controller's listener, KIP-919). Versions are the highest both sides serve.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Final

from raftmeta.kafka.connection import KafkaConnection

CREATE_TOPICS: Final = (19, 7)
DESCRIBE_QUORUM: Final = (55, 2)
METADATA: Final = (3, 12)
METADATA_TOPIC: Final = "__cluster_metadata"
# CreateTopics' own timeout: how long the broker (or node) may take to commit it; Kafka's
# AdminClient sends its request timeout here (30 s by default).
CREATE_TIMEOUT_MS: Final = 30_000


class KafkaError(Exception):
    """An answer with an error code; ``code`` is Kafka's."""

    def __init__(self, code: int, name: str, message: str | None) -> None:
        super().__init__(f"{name} ({code}){': ' + message if message else ''}")
        self.code = code
        self.name = name


@dataclass(frozen=True, slots=True)
class ReplicaState:
    """One voter or observer as the leader sees it (DescribeQuorum v2)."""

    replica_id: int
    directory_id: uuid.UUID | None
    log_end_offset: int
    last_caught_up_timestamp: int  # ms since the Unix epoch; -1 before the first catch-up


@dataclass(frozen=True, slots=True)
class QuorumState:
    leader_id: int
    leader_epoch: int
    high_watermark: int
    log_end_offsets: dict[int, int]  # voter id -> its log end offset, as the leader knows it
    voters: tuple[ReplicaState, ...] = ()
    observers: tuple[ReplicaState, ...] = ()

    def caught_up(self, node_id: int) -> bool:
        """The voter has every committed record (Kafka's DescribeQuorum lag 0)."""
        offset = self.log_end_offsets.get(node_id, -1)
        return offset > 0 and offset >= self.high_watermark


async def create_topic(
    connection: KafkaConnection, name: str, partitions: int, replication_factor: int, timeout_s: float
) -> None:
    """Create one topic; :class:`KafkaError` when it is refused."""
    api_key, version = CREATE_TOPICS
    topic = {"name": name, "num_partitions": partitions, "replication_factor": replication_factor,
             "assignments": [], "configs": []}  # fmt: skip
    values = {"topics": [topic], "timeout": CREATE_TIMEOUT_MS, "validate_only": False}
    response = await connection.call(api_key, version, values, timeout_s)
    result = response.topics[0]
    if result.error_code.value != 0:
        raise KafkaError(result.error_code.value, result.error_code.name, result.error_message)


async def describe_quorum(connection: KafkaConnection, timeout_s: float) -> QuorumState:
    """The metadata log's leader, epoch, high watermark and voters' offsets."""
    api_key, version = DESCRIBE_QUORUM
    values = {"topics": [{"topic_name": METADATA_TOPIC, "partitions": [{"partition_index": 0}]}]}
    response = await connection.call(api_key, version, values, timeout_s)
    if response.error_code.value != 0:
        raise KafkaError(response.error_code.value, response.error_code.name, response.error_message)
    partition = response.topics[0].partitions[0]
    if partition.error_code.value != 0:
        raise KafkaError(partition.error_code.value, partition.error_code.name, partition.error_message)
    return QuorumState(
        int(partition.leader_id),
        int(partition.leader_epoch),
        int(partition.high_watermark),
        {int(v.replica_id): int(v.log_end_offset) for v in partition.current_voters},
        tuple(_replica(v) for v in partition.current_voters),
        tuple(_replica(o) for o in partition.observers),
    )


def _replica(state: Any) -> ReplicaState:
    return ReplicaState(
        int(state.replica_id),
        state.replica_directory_id,
        int(state.log_end_offset),
        int(state.last_caught_up_timestamp),
    )


async def describe_topic(connection: KafkaConnection, name: str, timeout_s: float) -> int:
    """Metadata of the one topic ``name`` (what a client's describeTopics asks first); its
    partition count, :class:`KafkaError` when the answer carries an error for it."""
    api_key, version = METADATA
    values = {"topics": [{"topic_id": None, "name": name}], "allow_auto_topic_creation": False,
              "include_topic_authorized_operations": False}  # fmt: skip
    response = await connection.call(api_key, version, values, timeout_s)
    topic = response.topics[0]
    if topic.error_code.value != 0:
        raise KafkaError(topic.error_code.value, topic.error_code.name, name)
    return len(topic.partitions)
