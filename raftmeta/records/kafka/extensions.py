"""What raftmeta keeps that Kafka has no record for, as tagged fields of Kafka's own records.

Kafka's readers skip a tagged field whose tag their schema does not know (they keep it as an
unknown tagged field and never show it), so a record carrying these is still exactly the Kafka
record a 4.4 controller writes, plus bytes Kafka's tools pass over. The tags start at
:data:`FIRST_TAG`, far above Kafka's own (0-8 in every metadata and control schema of 4.4), so a
later Kafka release adding fields will not meet them. docs/log-format.md lists them.

The extended tables are Kafka's (:mod:`raftmeta.records.kafka.schemas`) with these fields added:
reading a Kafka-written record with them gives every raftmeta field its default, and reading a
raftmeta-written record with Kafka's tables carries these fields as unknown tagged fields.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Final

from raftmeta.records.kafka.schema import Field, MessageSchema, Schemas, f
from raftmeta.records.kafka.schemas import CONTROL_RECORDS, LEADER_CHANGE, METADATA_RECORD_NAMES, METADATA_RECORDS

FIRST_TAG: Final = 10000

# NoOpRecord: raftmeta's RequestRecord (a request's id, method, answer and digest, for
# idempotent retries). RaftmetaRequestId present (even empty) marks the NoOpRecord as one.
REQUEST_ID_TAG: Final = 10000
REQUEST_METHOD_TAG: Final = 10001
REQUEST_RESPONSE_TAG: Final = 10002
REQUEST_SHA256_TAG: Final = 10003
# TopicRecord and RegisterBrokerRecord: the broker pool (seed 003). Absent: no pool.
BROKER_POOL_TAG: Final = 10010
# PartitionChangeRecord: the epochs raftmeta carries (Kafka derives them on replay) and whether
# the new leader was elected uncleanly.
LEADER_EPOCH_TAG: Final = 10020
PARTITION_EPOCH_TAG: Final = 10021
UNCLEAN_ELECTION_TAG: Final = 10022
# LeaderChangeMessage (control): the leader's epoch (Kafka's is the batch's partitionLeaderEpoch).
LEADER_CHANGE_EPOCH_TAG: Final = 10030
# FeatureLevelRecord: true on the metadata.version record a snapshot's Kafka form carries only
# because its raftmeta form had none (mapping.to_kafka_snapshot); reading it back drops it.
BOOTSTRAP_FEATURE_TAG: Final = 10040

_NOOP: Final = (
    f("RaftmetaRequestId", "string", "0+", nullable="0+", tag=REQUEST_ID_TAG, tagged="0+", default="null"),
    f("RaftmetaRequestMethod", "string", "0+", tag=REQUEST_METHOD_TAG, tagged="0+"),
    f("RaftmetaRequestResponse", "bytes", "0+", tag=REQUEST_RESPONSE_TAG, tagged="0+"),
    f("RaftmetaRequestSha256", "bytes", "0+", tag=REQUEST_SHA256_TAG, tagged="0+"),
)
_POOL: Final = (
    f("RaftmetaBrokerPool", "string", "0+", nullable="0+", tag=BROKER_POOL_TAG, tagged="0+", default="null"),
)
_PARTITION_CHANGE: Final = (
    f("RaftmetaLeaderEpoch", "int32", "0+", tag=LEADER_EPOCH_TAG, tagged="0+", default="-1"),
    f("RaftmetaPartitionEpoch", "int32", "0+", tag=PARTITION_EPOCH_TAG, tagged="0+", default="-1"),
    f("RaftmetaUncleanElection", "bool", "0+", tag=UNCLEAN_ELECTION_TAG, tagged="0+", default="false"),
)
_FEATURE_LEVEL: Final = (f("RaftmetaBootstrap", "bool", "0+", tag=BOOTSTRAP_FEATURE_TAG, tagged="0+", default="false"),)
_LEADER_CHANGE: Final = (
    f("RaftmetaLeaderEpoch", "int32", "0+", tag=LEADER_CHANGE_EPOCH_TAG, tagged="0+", default="-1"),
)


def _extended(schema: MessageSchema, extra: tuple[Field, ...]) -> MessageSchema:
    return replace(schema, fields=schema.fields + extra)


_BY_NAME: Final = {
    "NoOpRecord": _NOOP,
    "TopicRecord": _POOL,
    "RegisterBrokerRecord": _POOL,
    "PartitionChangeRecord": _PARTITION_CHANGE,
    "FeatureLevelRecord": _FEATURE_LEVEL,
}
# Kafka's metadata and control record tables with raftmeta's tagged fields added.
METADATA: Final[Schemas] = {
    key: _extended(schema, _BY_NAME.get(schema.name, ())) for key, schema in METADATA_RECORDS.items()
}
CONTROL: Final[Schemas] = {
    key: _extended(schema, _LEADER_CHANGE if key == LEADER_CHANGE else ()) for key, schema in CONTROL_RECORDS.items()
}
assert set(_BY_NAME) <= set(METADATA_RECORD_NAMES)
