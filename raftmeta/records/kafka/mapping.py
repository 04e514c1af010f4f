"""raftmeta's records as Kafka's own, and back: the one mapping, pure.

Every record type raftmeta writes is exactly one Kafka record (docs/log-format.md, "raftmeta's
records in Kafka's format"), so a raftmeta batch and its Kafka form hold the same offsets:

================================  =================================================================
raftmeta (records.proto)          Kafka 4.4 (metadata.version :data:`METADATA_VERSION`)
================================  =================================================================
TopicRecord                       TopicRecord v0 (+ broker pool, tagged)
PartitionRecord                   PartitionRecord v2 (directories: none when all are "migrating")
PartitionChangeRecord             PartitionChangeRecord v2 (+ both epochs, unclean election, tagged)
RemoveTopicRecord                 RemoveTopicRecord v0
RegisterBrokerRecord              RegisterBrokerRecord v4 (+ broker pool, tagged)
UnregisterBrokerRecord            UnregisterBrokerRecord v0
FenceBrokerRecord                 BrokerRegistrationChangeRecord v0, Fenced 1 (as 4.4 fences)
UnfenceBrokerRecord               BrokerRegistrationChangeRecord v0, Fenced -1
BrokerLogDirsChangeRecord         BrokerRegistrationChangeRecord v2, LogDirs (as 4.4 writes it)
ConfigRecord                      ConfigRecord v0
NoOpRecord                        NoOpRecord v0
RequestRecord                     NoOpRecord v0 carrying the request's id, method, answer, digest
LeaderChangeRecord                LeaderChangeMessage control record (+ leader epoch, tagged)
VotersRecord                      VotersRecord control record
FeatureLevelRecord                FeatureLevelRecord v0
ProducerIdsRecord                 ProducerIdsRecord v0
SnapshotHeader/FooterRecord       SnapshotHeaderRecord / SnapshotFooterRecord control records
================================  =================================================================

Entry points, bytes in and bytes out: :func:`to_kafka_batches` (one raftmeta batch -> its Kafka
batches: a run of control records and a run of data records are separate batches, as Kafka's
control flag is per batch), :func:`from_kafka_batches` (Kafka batches -> raftmeta batches, one
each), :func:`to_kafka_snapshot` / :func:`from_kafka_snapshot` (a snapshot file's bytes, with
the bootstrap records Kafka's readers need first: :func:`bootstrap_records`). Per record:
:func:`to_kafka_value` and :func:`from_kafka_record`.

Raftmeta record -> Kafka record -> raftmeta record gives the same record back, field for field
(tests/records/kafka/test_mapping.py). Values Kafka's fields cannot hold (a topic id that is
not 16 bytes, a port above 65535, a version above int16) are refused with
:class:`UnmappableRecordError` naming the field, never truncated.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final

import google_crc32c

from raftmeta.records import codec
from raftmeta.records.kafka import batch as kafka_batch
from raftmeta.records.kafka import extensions, fast
from raftmeta.records.kafka.frames import (
    ControlRecord,
    LogRecord,
    MalformedRecordError,
    MetadataRecord,
    batch_records,
    decode_metadata,
    encode_control,
    encode_metadata,
    struct_of,
)
from raftmeta.records.kafka.message import MalformedMessageError, Struct
from raftmeta.records.kafka.schema import ZERO_UUID, Uuid
from raftmeta.records.kafka.schemas import (
    KRAFT_VERSION,
    KRAFT_VOTERS,
    LEADER_CHANGE,
    METADATA_RECORD_NAMES,
    SNAPSHOT_FOOTER,
    SNAPSHOT_HEADER,
)
from raftmeta.records.wire import PartitionEncoder, partition_record
from raftmeta.v1 import records_pb2

# The metadata.version feature level the mapping writes at: 30, 4.3-IV0. The pinned 4.4.0
# supports it (7..33) and writes every record above at the same version there as at its default
# 33 (4.4-IV2); kafka-metadata-shell, which Maven Central has only as 4.3.1 (it knows levels up
# to 31), reads it too.
METADATA_VERSION: Final = 30
METADATA_VERSION_FEATURE: Final = "metadata.version"
# kraft.version 1 (KIP-853, dynamic voters) when the voter set is known, else 0 (static voters).
KRAFT_VERSION_DYNAMIC: Final = 1
KRAFT_VERSION_STATIC: Final = 0
REGISTER_BROKER_VERSION: Final = 4
BROKER_FENCED: Final = 1  # BrokerRegistrationFencingChange.FENCE
BROKER_UNFENCED: Final = -1  # BrokerRegistrationFencingChange.UNFENCE
BROKER_FENCING_UNCHANGED: Final = 0  # BrokerRegistrationFencingChange.NONE
# The version Kafka 4.4's handleDirectoriesOffline writes (the first with LogDirs).
BROKER_LOG_DIRS_CHANGE_VERSION: Final = 2
# A listener name that is a security protocol's name gets that protocol's id (Kafka's
# SecurityProtocol); any other name PLAINTEXT's, as a broker's default listener map gives it.
SECURITY_PROTOCOLS: Final = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}

_TOPIC = METADATA_RECORD_NAMES["TopicRecord"]
_PARTITION = METADATA_RECORD_NAMES["PartitionRecord"]
_PARTITION_CHANGE = METADATA_RECORD_NAMES["PartitionChangeRecord"]
_REMOVE_TOPIC = METADATA_RECORD_NAMES["RemoveTopicRecord"]
_REGISTER_BROKER = METADATA_RECORD_NAMES["RegisterBrokerRecord"]
_UNREGISTER_BROKER = METADATA_RECORD_NAMES["UnregisterBrokerRecord"]
_FENCE_BROKER = METADATA_RECORD_NAMES["FenceBrokerRecord"]
_UNFENCE_BROKER = METADATA_RECORD_NAMES["UnfenceBrokerRecord"]
_BROKER_CHANGE = METADATA_RECORD_NAMES["BrokerRegistrationChangeRecord"]
_CONFIG = METADATA_RECORD_NAMES["ConfigRecord"]
_NO_OP = METADATA_RECORD_NAMES["NoOpRecord"]
_FEATURE_LEVEL = METADATA_RECORD_NAMES["FeatureLevelRecord"]
_PRODUCER_IDS = METADATA_RECORD_NAMES["ProducerIdsRecord"]
_INT16 = (-(1 << 15), (1 << 15) - 1)
_UINT16 = (0, (1 << 16) - 1)
_INT8 = (-(1 << 7), (1 << 7) - 1)


class UnmappableRecordError(ValueError):
    """A record one side cannot express: names the record, the field and the rule."""


class NotRaftmetaRecordError(UnmappableRecordError):
    """A Kafka record of a type raftmeta has no record for (an ACL, a ZK migration state ...)."""


# -- raftmeta -> Kafka -------------------------------------------------------------------------


def _uuid(raw: bytes, where: str) -> bytes:
    if len(raw) != 16:
        raise UnmappableRecordError(f"{where}: a Kafka Uuid is 16 bytes, this one {len(raw)}")
    return raw


def _ranged(value: int, bounds: tuple[int, int], where: str) -> int:
    if not bounds[0] <= value <= bounds[1]:
        raise UnmappableRecordError(f"{where}: {value} is outside Kafka's range {bounds[0]}..{bounds[1]}")
    return value


def _metadata(name: str, version: int, **values: object) -> MetadataRecord:
    api_key = METADATA_RECORD_NAMES[name]
    schema = extensions.METADATA[api_key]
    return MetadataRecord(api_key, version, struct_of(schema.fields, version, values))


def _control(type_: int, **values: object) -> ControlRecord:
    schema = extensions.CONTROL[type_]
    return ControlRecord(type_, struct_of(schema.fields, 0, values))


def _endpoints(endpoints: Sequence[records_pb2.BrokerEndpoint], where: str) -> tuple[Struct, ...]:
    return tuple(
        Struct(
            {
                "Name": e.name,
                "Host": e.host,
                "Port": _ranged(e.port, _UINT16, f"{where}.endpoints[{i}].port"),
                "SecurityProtocol": SECURITY_PROTOCOLS.get(e.name, 0),
            }
        )
        for i, e in enumerate(endpoints)
    )


def kafka_partition(p: records_pb2.PartitionRecord) -> fast.KafkaPartition:
    """A PartitionRecord's Kafka fields (the fast path's input)."""
    directories = p.directories
    return fast.KafkaPartition(
        _uuid(p.topic_id, "PartitionRecord.topic_id"),
        p.partition_id,
        tuple(p.replicas),
        tuple(p.isr),
        tuple(p.removing_replicas),
        tuple(p.adding_replicas),
        p.leader,
        p.leader_epoch,
        p.partition_epoch,
        # Most partitions have none (every replica MIGRATING): no call for them, this is per record.
        _directories(directories, "PartitionRecord.directories") if directories else (),
    )


def _directories(ids: Sequence[bytes], where: str) -> tuple[bytes, ...]:
    """Log directory ids (KIP-858), each a Kafka Uuid. Most partitions have none (every replica
    MIGRATING): the per-record caller skips the call for them."""
    return tuple(_uuid(raw, f"{where}[{i}]") for i, raw in enumerate(ids))


def kafka_partition_change(c: records_pb2.PartitionChangeRecord) -> fast.KafkaPartitionChange:
    """A PartitionChangeRecord's Kafka fields, raftmeta's epochs and election kind as tags."""
    leader = c.leader if c.HasField("leader") else fast.NO_LEADER_CHANGE
    if leader == fast.NO_LEADER_CHANGE and c.HasField("leader"):
        raise UnmappableRecordError("PartitionChangeRecord.leader: -2 is Kafka's 'unchanged', not a leader")
    return fast.KafkaPartitionChange(
        _uuid(c.topic_id, "PartitionChangeRecord.topic_id"),
        c.partition_id,
        isr=tuple(c.isr.ids) if c.HasField("isr") else None,
        leader=leader,
        replicas=tuple(c.replicas.ids) if c.HasField("replicas") else None,
        removing_replicas=tuple(c.removing_replicas.ids) if c.HasField("removing_replicas") else None,
        adding_replicas=tuple(c.adding_replicas.ids) if c.HasField("adding_replicas") else None,
        directories=(
            _directories(c.directories.ids, "PartitionChangeRecord.directories") if c.HasField("directories") else None
        ),
        raftmeta_leader_epoch=c.leader_epoch,
        raftmeta_partition_epoch=c.partition_epoch,
        raftmeta_unclean_election=c.unclean_election,
    )


def to_kafka_record(record: records_pb2.MetadataRecord) -> LogRecord:
    """One raftmeta record as the one Kafka record it maps to (the generic, field-table form)."""
    kind = record.WhichOneof("record")
    if kind == "partition":
        p = kafka_partition(record.partition)
        return _metadata(
            "PartitionRecord",
            fast.PARTITION_RECORD_VERSION,
            PartitionId=p.partition_id,
            TopicId=Uuid(p.topic_id),
            Replicas=p.replicas,
            Isr=p.isr,
            RemovingReplicas=p.removing_replicas,
            AddingReplicas=p.adding_replicas,
            Leader=p.leader,
            LeaderEpoch=p.leader_epoch,
            PartitionEpoch=p.partition_epoch,
            Directories=tuple(Uuid(d) for d in p.directories),
        )
    if kind == "partition_change":
        c = kafka_partition_change(record.partition_change)
        return _metadata(
            "PartitionChangeRecord",
            fast.PARTITION_CHANGE_RECORD_VERSION,
            PartitionId=c.partition_id,
            TopicId=Uuid(c.topic_id),
            Isr=c.isr,
            Leader=c.leader,
            Replicas=c.replicas,
            RemovingReplicas=c.removing_replicas,
            AddingReplicas=c.adding_replicas,
            Directories=None if c.directories is None else tuple(Uuid(d) for d in c.directories),
            RaftmetaLeaderEpoch=c.raftmeta_leader_epoch,
            RaftmetaPartitionEpoch=c.raftmeta_partition_epoch,
            RaftmetaUncleanElection=c.raftmeta_unclean_election,
        )
    if kind == "topic":
        t = record.topic
        pool = t.broker_pool if t.HasField("broker_pool") else None
        return _metadata(
            "TopicRecord",
            0,
            Name=t.name,
            TopicId=Uuid(_uuid(t.topic_id, "TopicRecord.topic_id")),
            RaftmetaBrokerPool=pool,
        )
    if kind == "remove_topic":
        return _metadata(
            "RemoveTopicRecord", 0, TopicId=Uuid(_uuid(record.remove_topic.topic_id, "RemoveTopicRecord.topic_id"))
        )
    if kind == "register_broker":
        b = record.register_broker
        return _metadata(
            "RegisterBrokerRecord",
            REGISTER_BROKER_VERSION,
            BrokerId=b.broker_id,
            IncarnationId=Uuid(_uuid(b.incarnation_id, "RegisterBrokerRecord.incarnation_id")),
            BrokerEpoch=b.broker_epoch,
            EndPoints=_endpoints(b.endpoints, "RegisterBrokerRecord"),
            Rack=b.rack if b.HasField("rack") else None,
            Fenced=b.fenced,
            LogDirs=tuple(Uuid(d) for d in _directories(b.log_dirs, "RegisterBrokerRecord.log_dirs")),
            RaftmetaBrokerPool=b.pool if b.HasField("pool") else None,
        )
    if kind == "unregister_broker":
        u = record.unregister_broker
        return _metadata("UnregisterBrokerRecord", 0, BrokerId=u.broker_id, BrokerEpoch=u.broker_epoch)
    if kind in ("fence_broker", "unfence_broker"):
        change = record.fence_broker if kind == "fence_broker" else record.unfence_broker
        fenced = BROKER_FENCED if kind == "fence_broker" else BROKER_UNFENCED
        return _metadata(
            "BrokerRegistrationChangeRecord",
            0,
            BrokerId=change.broker_id,
            BrokerEpoch=change.broker_epoch,
            Fenced=fenced,
        )
    if kind == "broker_log_dirs_change":
        dirs = record.broker_log_dirs_change
        return _metadata(
            "BrokerRegistrationChangeRecord",
            BROKER_LOG_DIRS_CHANGE_VERSION,
            BrokerId=dirs.broker_id,
            BrokerEpoch=dirs.broker_epoch,
            LogDirs=tuple(Uuid(d) for d in _directories(dirs.log_dirs, "BrokerLogDirsChangeRecord.log_dirs")),
        )
    if kind == "config":
        config = record.config
        return _metadata(
            "ConfigRecord",
            0,
            ResourceType=_ranged(config.resource_type, _INT8, "ConfigRecord.resource_type"),
            ResourceName=config.resource_name,
            Name=config.name,
            Value=config.value if config.HasField("value") else None,
        )
    if kind == "no_op":
        return _metadata("NoOpRecord", 0)
    if kind == "request":
        r = record.request
        return _metadata(
            "NoOpRecord",
            0,
            RaftmetaRequestId=r.request_id,
            RaftmetaRequestMethod=r.method,
            RaftmetaRequestResponse=r.response,
            RaftmetaRequestSha256=r.request_sha256,
        )
    if kind == "feature_level":
        feature = record.feature_level
        return _metadata(
            "FeatureLevelRecord",
            0,
            Name=feature.name,
            FeatureLevel=_ranged(feature.feature_level, _INT16, "FeatureLevelRecord.feature_level"),
        )
    if kind == "producer_ids":
        ids = record.producer_ids
        return _metadata(
            "ProducerIdsRecord",
            0,
            BrokerId=ids.broker_id,
            BrokerEpoch=ids.broker_epoch,
            NextProducerId=ids.next_producer_id,
        )
    if kind == "leader_change":
        lc = record.leader_change
        return _control(
            LEADER_CHANGE,
            LeaderId=lc.leader_id,
            Voters=tuple(Struct({"VoterId": v.voter_id}) for v in lc.voters),
            GrantingVoters=tuple(Struct({"VoterId": v.voter_id}) for v in lc.granting_voters),
            RaftmetaLeaderEpoch=lc.leader_epoch,
        )
    if kind == "voters":
        return _control(KRAFT_VOTERS, **_voters_fields(record.voters))
    if kind == "snapshot_header":
        h = record.snapshot_header
        return _control(
            SNAPSHOT_HEADER,
            Version=_ranged(h.version, _INT16, "SnapshotHeaderRecord.version"),
            LastContainedLogTimestamp=h.last_contained_log_timestamp_ms,
        )
    if kind == "snapshot_footer":
        return _control(
            SNAPSHOT_FOOTER, Version=_ranged(record.snapshot_footer.version, _INT16, "SnapshotFooterRecord.version")
        )
    raise UnmappableRecordError(f"a MetadataRecord with no record set ({kind!r}) has no Kafka record")


def _voters_fields(v: records_pb2.VotersRecord) -> dict[str, object]:
    voters = []
    for i, voter in enumerate(v.voters):
        where = f"VotersRecord.voters[{i}]"
        directory = voter.directory_id
        if directory and directory == ZERO_UUID.raw:
            raise UnmappableRecordError(f"{where}.directory_id: all zero bytes, Kafka's 'unknown'; write it empty")
        voters.append(
            Struct(
                {
                    "VoterId": voter.voter_id,
                    "VoterDirectoryId": Uuid(_uuid(directory, f"{where}.directory_id")) if directory else ZERO_UUID,
                    "Endpoints": tuple(
                        Struct(
                            {
                                "Name": e.name,
                                "Host": e.host,
                                "Port": _ranged(e.port, _UINT16, f"{where}.endpoints[{j}].port"),
                            }
                        )
                        for j, e in enumerate(voter.endpoints)
                    ),
                    "KRaftVersionFeature": Struct(
                        {
                            "MinSupportedVersion": _ranged(
                                voter.min_supported_version, _INT16, f"{where}.min_supported_version"
                            ),
                            "MaxSupportedVersion": _ranged(
                                voter.max_supported_version, _INT16, f"{where}.max_supported_version"
                            ),
                        }
                    ),
                }
            )
        )
    return {"Version": _ranged(v.version, _INT16, "VotersRecord.version"), "Voters": tuple(voters)}


def to_kafka_value(record: records_pb2.MetadataRecord) -> tuple[bool, bytes | None, bytes]:
    """One raftmeta record as a Kafka record's (is control, key, value); partitions and their
    changes by the fixed-layout path (:mod:`raftmeta.records.kafka.fast`)."""
    kind = record.WhichOneof("record")
    if kind == "partition":
        return False, None, fast.partition_value(kafka_partition(record.partition))
    if kind == "partition_change":
        return False, None, fast.partition_change_value(kafka_partition_change(record.partition_change))
    mapped = to_kafka_record(record)
    if isinstance(mapped, ControlRecord):
        key, value = encode_control(mapped, extensions.CONTROL)
        return True, key, value
    return False, None, encode_metadata(mapped, extensions.METADATA)


# -- Kafka -> raftmeta -------------------------------------------------------------------------


class _Fields:
    """A decoded struct's values read with their types (the field tables decided them)."""

    __slots__ = ("values",)

    def __init__(self, data: Struct) -> None:
        self.values = data.values

    def integer(self, name: str) -> int:
        value = self.values[name]
        assert isinstance(value, int)
        return value

    def text(self, name: str) -> str:
        value = self.values[name]
        assert isinstance(value, str)
        return value

    def optional_text(self, name: str) -> str | None:
        value = self.values[name]
        assert value is None or isinstance(value, str)
        return value

    def raw(self, name: str) -> bytes:
        value = self.values[name]
        assert isinstance(value, bytes)
        return value

    def uuid_raw(self, name: str) -> bytes:
        value = self.values[name]
        assert isinstance(value, Uuid)
        return value.raw

    def ids(self, name: str) -> tuple[int, ...]:
        value = self.optional_ids(name)
        assert value is not None
        return value

    def optional_ids(self, name: str) -> tuple[int, ...] | None:
        value = self.values[name]
        assert value is None or isinstance(value, tuple)
        return value

    def uuids(self, name: str) -> tuple[bytes, ...]:
        value = self.optional_uuids(name)
        return () if value is None else value

    def optional_uuids(self, name: str) -> tuple[bytes, ...] | None:
        value = self.values[name]
        if value is None:
            return None
        assert isinstance(value, tuple)
        return tuple(item.raw for item in value)

    def structs(self, name: str) -> tuple[_Fields, ...]:
        value = self.values[name]
        assert isinstance(value, tuple)
        return tuple(_Fields(item) for item in value)

    def nested(self, name: str) -> _Fields:
        value = self.values[name]
        assert isinstance(value, Struct)
        return _Fields(value)


def from_kafka_record(record: LogRecord) -> records_pb2.MetadataRecord:
    """The raftmeta record a Kafka record (read with raftmeta's extended tables) maps back to;
    :class:`NotRaftmetaRecordError` for a Kafka record raftmeta has no record for."""
    if isinstance(record, ControlRecord):
        return _from_control(record)
    if not isinstance(record.data, Struct):
        raise NotRaftmetaRecordError(f"{record.name} v{record.version}: not a record raftmeta's tables read")
    d = _Fields(record.data)
    key = record.api_key
    out = records_pb2.MetadataRecord()
    if key == _PARTITION:
        out.partition.CopyFrom(
            records_pb2.PartitionRecord(
                topic_id=d.uuid_raw("TopicId"),
                partition_id=d.integer("PartitionId"),
                replicas=d.ids("Replicas"),
                isr=d.ids("Isr"),
                removing_replicas=d.ids("RemovingReplicas"),
                adding_replicas=d.ids("AddingReplicas"),
                leader=d.integer("Leader"),
                leader_epoch=d.integer("LeaderEpoch"),
                partition_epoch=d.integer("PartitionEpoch"),
                directories=d.uuids("Directories"),
            )
        )
    elif key == _PARTITION_CHANGE:
        change = fast.KafkaPartitionChange(
            d.uuid_raw("TopicId"),
            d.integer("PartitionId"),
            isr=d.optional_ids("Isr"),
            leader=d.integer("Leader"),
            replicas=d.optional_ids("Replicas"),
            removing_replicas=d.optional_ids("RemovingReplicas"),
            adding_replicas=d.optional_ids("AddingReplicas"),
            directories=d.optional_uuids("Directories"),
            raftmeta_leader_epoch=d.integer("RaftmetaLeaderEpoch"),
            raftmeta_partition_epoch=d.integer("RaftmetaPartitionEpoch"),
            raftmeta_unclean_election=bool(d.values["RaftmetaUncleanElection"]),
        )
        _fill_change(out.partition_change, change)
    elif key == _TOPIC:
        out.topic.name = d.text("Name")
        out.topic.topic_id = d.uuid_raw("TopicId")
        pool = d.optional_text("RaftmetaBrokerPool")
        if pool is not None:
            out.topic.broker_pool = pool
    elif key == _REMOVE_TOPIC:
        out.remove_topic.topic_id = d.uuid_raw("TopicId")
    elif key == _REGISTER_BROKER:
        b = out.register_broker
        b.broker_id = d.integer("BrokerId")
        b.incarnation_id = d.uuid_raw("IncarnationId")
        b.broker_epoch = d.integer("BrokerEpoch")
        rack = d.optional_text("Rack")
        if rack is not None:
            b.rack = rack
        pool = d.optional_text("RaftmetaBrokerPool")
        if pool is not None:
            b.pool = pool
        for e in d.structs("EndPoints"):
            b.endpoints.add(name=e.text("Name"), host=e.text("Host"), port=e.integer("Port"))
        b.fenced = bool(d.values["Fenced"])
        b.log_dirs.extend(d.uuids("LogDirs"))
    elif key == _UNREGISTER_BROKER:
        out.unregister_broker.broker_id = d.integer("BrokerId")
        out.unregister_broker.broker_epoch = d.integer("BrokerEpoch")
    elif key in (_FENCE_BROKER, _UNFENCE_BROKER):
        target = out.fence_broker if key == _FENCE_BROKER else out.unfence_broker
        target.broker_id = d.integer("Id")
        target.broker_epoch = d.integer("Epoch")
    elif key == _BROKER_CHANGE:
        _fill_broker_change(out, record.version, d)
    elif key == _CONFIG:
        config = out.config
        config.resource_type = d.integer("ResourceType")  # type: ignore[assignment]  # the enum's int
        config.resource_name = d.text("ResourceName")
        config.name = d.text("Name")
        value = d.optional_text("Value")
        if value is not None:
            config.value = value
    elif key == _FEATURE_LEVEL:
        out.feature_level.name = d.text("Name")
        out.feature_level.feature_level = d.integer("FeatureLevel")
    elif key == _PRODUCER_IDS:
        out.producer_ids.broker_id = d.integer("BrokerId")
        out.producer_ids.broker_epoch = d.integer("BrokerEpoch")
        out.producer_ids.next_producer_id = d.integer("NextProducerId")
    elif key == _NO_OP:
        request_id = d.optional_text("RaftmetaRequestId")
        if request_id is None:
            out.no_op.SetInParent()
        else:
            r = out.request
            r.request_id = request_id
            r.method = d.text("RaftmetaRequestMethod")
            r.response = d.raw("RaftmetaRequestResponse")
            r.request_sha256 = d.raw("RaftmetaRequestSha256")
    else:
        raise NotRaftmetaRecordError(f"{record.name} (api key {key}) has no raftmeta record")
    return out


def _fill_broker_change(out: records_pb2.MetadataRecord, version: int, d: _Fields) -> None:
    """A BrokerRegistrationChangeRecord that only fences or unfences a broker, or (v2+) only sets
    its log directories (what raftmeta writes)."""
    others = sorted(
        name
        for name, value in d.values.items()
        if name not in ("BrokerId", "BrokerEpoch", "Fenced", "LogDirs") and value not in (0, (), None)
    )
    fenced = d.integer("Fenced")
    log_dirs = d.uuids("LogDirs") if version >= BROKER_LOG_DIRS_CHANGE_VERSION else ()
    if fenced == BROKER_FENCING_UNCHANGED and version >= BROKER_LOG_DIRS_CHANGE_VERSION and not others:
        # Only its directories (an empty LogDirs is Kafka's "unchanged", kept as it came).
        change = out.broker_log_dirs_change
        change.broker_id = d.integer("BrokerId")
        change.broker_epoch = d.integer("BrokerEpoch")
        change.log_dirs.extend(log_dirs)
        return
    if fenced not in (BROKER_FENCED, BROKER_UNFENCED) or others or log_dirs:
        raise NotRaftmetaRecordError(
            f"BrokerRegistrationChangeRecord v{version} with Fenced {fenced} and "
            f"{others or (['LogDirs'] if log_dirs else 'nothing else')} set: raftmeta's records only fence (1) "
            "or unfence (-1) a broker, or (v2+) only set its log directories"
        )
    target = out.fence_broker if fenced == BROKER_FENCED else out.unfence_broker
    target.broker_id = d.integer("BrokerId")
    target.broker_epoch = d.integer("BrokerEpoch")


def _fill_change(out: records_pb2.PartitionChangeRecord, c: fast.KafkaPartitionChange) -> None:
    out.topic_id = c.topic_id
    out.partition_id = c.partition_id
    if c.leader != fast.NO_LEADER_CHANGE:
        out.leader = c.leader
    if c.isr is not None:
        out.isr.ids.extend(c.isr)
    if c.replicas is not None:
        out.replicas.ids.extend(c.replicas)
    if c.removing_replicas is not None:
        out.removing_replicas.ids.extend(c.removing_replicas)
    if c.adding_replicas is not None:
        out.adding_replicas.ids.extend(c.adding_replicas)
    if c.directories is not None:
        out.directories.SetInParent()
        out.directories.ids.extend(c.directories)
    out.leader_epoch = c.raftmeta_leader_epoch
    out.partition_epoch = c.raftmeta_partition_epoch
    out.unclean_election = c.raftmeta_unclean_election


def _from_control(record: ControlRecord) -> records_pb2.MetadataRecord:
    if not isinstance(record.data, Struct):
        raise NotRaftmetaRecordError(f"{record.name}: not a control record raftmeta's tables read")
    d = _Fields(record.data)
    out = records_pb2.MetadataRecord()
    if record.type == LEADER_CHANGE:
        lc = out.leader_change
        lc.leader_id = d.integer("LeaderId")
        lc.leader_epoch = d.integer("RaftmetaLeaderEpoch")
        for v in d.structs("Voters"):
            lc.voters.add(voter_id=v.integer("VoterId"))
        for v in d.structs("GrantingVoters"):
            lc.granting_voters.add(voter_id=v.integer("VoterId"))
    elif record.type == KRAFT_VOTERS:
        out.voters.version = d.integer("Version")
        for v in d.structs("Voters"):
            directory = v.uuid_raw("VoterDirectoryId")
            feature = v.nested("KRaftVersionFeature")
            entry = out.voters.voters.add(
                voter_id=v.integer("VoterId"),
                directory_id=b"" if directory == ZERO_UUID.raw else directory,
                min_supported_version=feature.integer("MinSupportedVersion"),
                max_supported_version=feature.integer("MaxSupportedVersion"),
            )
            for e in v.structs("Endpoints"):
                entry.endpoints.add(name=e.text("Name"), host=e.text("Host"), port=e.integer("Port"))
    elif record.type == SNAPSHOT_HEADER:
        out.snapshot_header.version = d.integer("Version")
        out.snapshot_header.last_contained_log_timestamp_ms = d.integer("LastContainedLogTimestamp")
    elif record.type == SNAPSHOT_FOOTER:
        out.snapshot_footer.version = d.integer("Version")
    else:
        raise NotRaftmetaRecordError(f"control record {record.name} has no raftmeta record")
    return out


def from_kafka_value(control: bool, key: bytes | None, value: bytes | None, offset: int) -> records_pb2.MetadataRecord:
    """One Kafka record (as stored in a batch) as the raftmeta record it maps to; partitions and
    their changes by the fixed-layout path."""
    if not control and key is None and value is not None:
        partition = fast.read_partition(value)
        if partition is not None:
            return _partition_record(partition)
        change = fast.read_partition_change(value)
        if change is not None:
            out = records_pb2.MetadataRecord()
            _fill_change(out.partition_change, change)
            return out
    record = kafka_batch.RecordBatch(
        offset,
        0,
        kafka_batch.ATTR_CONTROL if control else 0,
        0,
        0,
        0,
        -1,
        -1,
        -1,
        (kafka_batch.Record(0, 0, key, value),),
    )
    try:
        ((_, decoded),) = tuple(
            batch_records(record, metadata_schemas=extensions.METADATA, control_schemas=extensions.CONTROL)
        )
    except MalformedRecordError as exc:
        raise UnmappableRecordError(str(exc)) from exc
    return from_kafka_record(decoded)


def from_kafka_value_bytes(control: bool, key: bytes | None, value: bytes | None, offset: int) -> bytes:
    """:func:`from_kafka_value`, serialized: a partition straight from its Kafka bytes to raftmeta's
    (raftmeta/records/wire.py, byte for byte what protobuf serializes) without a message object,
    the raftmeta encoding of each distinct Kafka state kept."""
    if not control and key is None and value is not None and value[:3] == fast.PARTITION_FRAME:
        tail = _WIRE_BY_KAFKA_TAIL.get(value[fast.PARTITION_HEAD_END :])
        if tail is None:
            partition = fast.read_partition(value)
            if partition is not None:
                state = (
                    partition.replicas,
                    partition.isr,
                    partition.leader,
                    partition.leader_epoch,
                    partition.partition_epoch,
                    partition.removing_replicas,
                    partition.adding_replicas,
                    partition.directories,
                )
                if len(_WIRE_BY_KAFKA_TAIL) >= fast.TAIL_CACHE_MAX:
                    _WIRE_BY_KAFKA_TAIL.clear()
                tail = _WIRE_BY_KAFKA_TAIL[value[fast.PARTITION_HEAD_END :]] = _WIRE.tail(state)
        if tail is not None:
            partition_id, topic_id = fast.read_partition_head(value)
            prefix = _WIRE_TOPICS.get(topic_id)
            if prefix is None:
                if len(_WIRE_TOPICS) >= fast.TAIL_CACHE_MAX:
                    _WIRE_TOPICS.clear()
                prefix = _WIRE_TOPICS[topic_id] = _WIRE.topic_prefix(topic_id)
            return partition_record(prefix, partition_id, tail)
    return from_kafka_value(control, key, value, offset).SerializeToString()


_WIRE = PartitionEncoder()
# A PartitionRecord v2's bytes after PartitionId and TopicId -> raftmeta's encoding of that state.
_WIRE_BY_KAFKA_TAIL: dict[bytes, bytes] = {}
_WIRE_TOPICS: dict[bytes, bytes] = {}


def _partition_record(p: fast.KafkaPartition) -> records_pb2.MetadataRecord:
    return records_pb2.MetadataRecord(
        partition=records_pb2.PartitionRecord(
            topic_id=p.topic_id,
            partition_id=p.partition_id,
            replicas=p.replicas,
            isr=p.isr,
            removing_replicas=p.removing_replicas,
            adding_replicas=p.adding_replicas,
            leader=p.leader,
            leader_epoch=p.leader_epoch,
            partition_epoch=p.partition_epoch,
            directories=p.directories,
        )
    )


# -- batches -----------------------------------------------------------------------------------

_BATCH_TAIL = struct.Struct(">hiqqqhii")  # attributes .. recordsCount: what the CRC covers first


def kafka_batch_bytes(
    base_offset: int, epoch: int, timestamp_ms: int, values: Sequence[tuple[bytes | None, bytes]], *, control: bool
) -> bytes:
    """A record batch v2 as KRaft writes one (no producer, every record at ``timestamp_ms``);
    metadata records framed by the fast path, equal to :func:`raftmeta.records.kafka.batch.encode_batch`."""
    if all(key is None for key, _ in values):
        body = fast.frame_metadata_values([value for _, value in values])
    else:
        body = b"".join(
            kafka_batch.encode_record(kafka_batch.Record(i, 0, key, value)) for i, (key, value) in enumerate(values)
        )
    attributes = kafka_batch.ATTR_CONTROL if control else 0
    tail = _BATCH_TAIL.pack(attributes, len(values) - 1, timestamp_ms, timestamp_ms, -1, -1, -1, len(values)) + body
    return kafka_batch.frame_tail(base_offset, epoch, tail)


def to_kafka_batches(data: bytes) -> bytes:
    """One raftmeta batch (its whole bytes, CRC checked) as Kafka record batches v2, the same
    offsets, epoch and timestamp: consecutive records of one kind (control or not) form a batch."""
    header = codec.check_batch(data)
    return _mapped(header.base_offset, header.epoch, header.append_timestamp_ms, codec.split_records(data, header))


def _mapped(base_offset: int, epoch: int, timestamp_ms: int, records: Sequence[bytes]) -> bytes:
    """Records of a raftmeta batch, the first at ``base_offset``, as Kafka batches."""
    out = []
    run: list[tuple[bytes | None, bytes]] = []
    run_control = False
    run_base = base_offset
    for index, raw in enumerate(records):
        offset = base_offset + index
        try:
            control, key, value = to_kafka_value(records_pb2.MetadataRecord.FromString(raw))
        except UnmappableRecordError as exc:
            raise UnmappableRecordError(f"record at offset {offset}: {exc}") from exc
        except Exception as exc:  # protobuf's DecodeError: a CRC-valid batch holding no record
            raise UnmappableRecordError(f"record at offset {offset}: not a MetadataRecord ({exc})") from exc
        if run and control != run_control:
            out.append(kafka_batch_bytes(run_base, epoch, timestamp_ms, run, control=run_control))
            run = []
        if not run:
            run_base, run_control = offset, control
        run.append((key, value))
    out.append(kafka_batch_bytes(run_base, epoch, timestamp_ms, run, control=run_control))
    return b"".join(out)


def to_kafka_log(data: bytes) -> bytes:
    """A run of raftmeta batches (a segment's bytes) as Kafka batches."""
    return b"".join(to_kafka_batches(batch.data) for batch in codec.iter_batches(data))


@dataclass(frozen=True, slots=True)
class KafkaBatchRecords:
    """One Kafka batch's header fields raftmeta keeps and its records' keys and values."""

    base_offset: int
    epoch: int
    control: bool
    timestamp_ms: int
    records: list[tuple[bytes | None, bytes | None]]


def read_kafka_batches(data: bytes) -> Iterator[KafkaBatchRecords]:
    """Every batch of ``data`` (CRC checked), its records split by the fast path where they are
    framed as KRaft frames metadata records, the generic reader otherwise; offsets must run
    0..count-1 within a batch (raftmeta's batches hold consecutive offsets)."""
    position = 0
    while position < len(data):
        size = kafka_batch.batch_size(data, position)
        header = (
            kafka_batch.HEADER.unpack_from(data, position) if len(data) - position >= kafka_batch.HEADER_SIZE else None
        )
        values = None
        if header is not None and position + size <= len(data):
            base, _, epoch, magic, crc, attributes, last_delta, _, max_ts, _, _, _, count = header
            control = bool(attributes & kafka_batch.ATTR_CONTROL)
            end = position + size
            if (
                magic == kafka_batch.MAGIC
                and not control
                and attributes == 0
                and last_delta == count - 1
                and google_crc32c.value(data[position + kafka_batch.CRC_START : end]) == crc
            ):
                values = fast.metadata_values(data, position + kafka_batch.HEADER_SIZE, end, count)
        if values is not None:
            yield KafkaBatchRecords(base, epoch, False, max_ts, [(None, value) for value in values])
        else:
            batch = kafka_batch.decode_batch(data, position)
            _check_contiguous(batch)
            yield KafkaBatchRecords(
                batch.base_offset,
                batch.partition_leader_epoch,
                batch.is_control,
                batch.max_timestamp,
                [(r.key, r.value) for r in batch.records],
            )
        position += size


def from_kafka_batches(data: bytes) -> bytes:
    """Kafka record batches v2 (a segment's bytes, every CRC checked) as raftmeta batches, one
    each, the same offsets, epochs and timestamps."""
    out = []
    for batch in read_kafka_batches(data):
        records = [
            from_kafka_value_bytes(batch.control, key, value, batch.base_offset + index)
            for index, (key, value) in enumerate(batch.records)
        ]
        out.append(
            codec.encode_batch(batch.base_offset, batch.epoch, records, batch.timestamp_ms, control=batch.control)
        )
    return b"".join(out)


def _check_contiguous(batch: kafka_batch.RecordBatch) -> None:
    deltas = [r.offset_delta for r in batch.records]
    if deltas != list(range(len(deltas))) or batch.last_offset_delta != len(deltas) - 1:
        raise UnmappableRecordError(
            f"batch at offset {batch.base_offset}: offset deltas {deltas[:8]}... are not 0..{len(deltas) - 1}: "
            "raftmeta's batches hold consecutive offsets (a compacted batch has no raftmeta form)"
        )


# -- bootstrap and snapshots -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BootstrapRecords:
    """What Kafka's readers need before the first metadata record: the kraft.version (and voter
    set) control records and the FeatureLevelRecord of metadata.version."""

    control: tuple[tuple[bytes, bytes], ...]  # (key, value) of each control record
    metadata: tuple[bytes, ...]  # the value of each metadata record


def bootstrap_records(voters: records_pb2.VotersRecord | None, *, injected: bool = False) -> BootstrapRecords:
    """The bootstrap records, as `kafka-storage format` writes them into the bootstrap snapshot:
    kraft.version 1 with the voter set when it is known (KIP-853), else kraft.version 0 (static
    voters); metadata.version at :data:`METADATA_VERSION`. ``injected``: the FeatureLevelRecord
    is one a raftmeta snapshot did not hold, tagged so that reading it back drops it."""
    level = KRAFT_VERSION_STATIC if voters is None else KRAFT_VERSION_DYNAMIC
    control = [encode_control(_control(KRAFT_VERSION, Version=0, KRaftVersion=level), extensions.CONTROL)]
    if voters is not None:
        control.append(encode_control(_control(KRAFT_VOTERS, **_voters_fields(voters)), extensions.CONTROL))
    feature = _metadata(
        "FeatureLevelRecord",
        0,
        Name=METADATA_VERSION_FEATURE,
        FeatureLevel=METADATA_VERSION,
        RaftmetaBootstrap=injected,
    )
    return BootstrapRecords(tuple(control), (encode_metadata(feature, extensions.METADATA),))


def bootstrap_snapshot(voters: records_pb2.VotersRecord | None, timestamp_ms: int) -> bytes:
    """Kafka's bootstrap snapshot (``00000000000000000000-0000000000.checkpoint``): a control
    batch of the SnapshotHeader and the kraft.version records, a batch of the feature levels, a
    control batch of the SnapshotFooter, all at epoch 0."""
    boot = bootstrap_records(voters)
    header = encode_control(
        _control(SNAPSHOT_HEADER, Version=0, LastContainedLogTimestamp=timestamp_ms), extensions.CONTROL
    )
    footer = encode_control(_control(SNAPSHOT_FOOTER, Version=0), extensions.CONTROL)
    control = [header, *boot.control]
    parts = [kafka_batch_bytes(0, 0, timestamp_ms, control, control=True)]
    offset = len(control)
    parts.append(kafka_batch_bytes(offset, 0, timestamp_ms, [(None, v) for v in boot.metadata], control=False))
    offset += len(boot.metadata)
    parts.append(kafka_batch_bytes(offset, 0, timestamp_ms, [footer], control=True))
    return b"".join(parts)


def to_kafka_snapshot(data: bytes) -> bytes:
    """A raftmeta snapshot file's bytes as a Kafka snapshot: its batches mapped as the log's, and
    after the leading control batches (the header, the voter set) the bootstrap records Kafka's
    snapshots carry there -- the kraft.version control record, and the metadata.version feature
    level before the image when the image has none of its own (a snapshot taken before the
    controller wrote it) -- with the offsets inside the file renumbered from 0 around them."""
    batches = list(codec.iter_batches(data))
    expected = 0
    for index, batch in enumerate(batches):
        if batch.base_offset != expected:
            raise UnmappableRecordError(
                f"snapshot batch {index} starts at offset {batch.base_offset}, expected {expected}: "
                "a snapshot's offsets run from 0 without a gap"
            )
        expected = batch.next_offset
    leading = 0
    voters = None
    while leading < len(batches) - 1 and batches[leading].header.is_control:
        for raw in batches[leading].records():
            record = records_pb2.MetadataRecord.FromString(raw)
            if record.WhichOneof("record") == "voters":
                voters = record.voters
        leading += 1
    boot = bootstrap_records(voters, injected=True)
    own_metadata_version = any(_is_metadata_version(raw) for batch in batches for raw in batch.records())
    out = []
    offset = 0
    for index, batch in enumerate(batches):
        h = batch.header
        if index == leading:
            kraft_version = boot.control[:1]  # the voter set is the snapshot's own batch
            out.append(kafka_batch_bytes(offset, h.epoch, h.append_timestamp_ms, kraft_version, control=True))
            offset += len(kraft_version)
            if not own_metadata_version:
                features = [(None, value) for value in boot.metadata]
                out.append(kafka_batch_bytes(offset, h.epoch, h.append_timestamp_ms, features, control=False))
                offset += len(features)
        out.append(_mapped(offset, h.epoch, h.append_timestamp_ms, batch.records()))
        offset += h.record_count
    return b"".join(out)


def _is_metadata_version(raw: bytes) -> bool:
    """Whether a serialized raftmeta record is a FeatureLevelRecord of metadata.version (read
    only when its first byte, the oneof's tag, says it is a FeatureLevelRecord)."""
    if raw[:1] != _FEATURE_LEVEL_TAG:
        return False
    return records_pb2.MetadataRecord.FromString(raw).feature_level.name == METADATA_VERSION_FEATURE


_FEATURE_LEVEL_TAG = bytes([records_pb2.MetadataRecord.FEATURE_LEVEL_FIELD_NUMBER << 3 | 2])


def from_kafka_snapshot(data: bytes) -> bytes:
    """A Kafka snapshot written by :func:`to_kafka_snapshot` back as raftmeta's: the bootstrap
    batches it added (a KRaftVersion control record alone, the feature level it tagged as
    injected) left out, offsets renumbered from 0."""
    out = []
    offset = 0
    for batch in read_kafka_batches(data):
        if _is_bootstrap(batch):
            continue
        records = [
            from_kafka_value_bytes(batch.control, key, value, batch.base_offset + index)
            for index, (key, value) in enumerate(batch.records)
        ]
        out.append(codec.encode_batch(offset, batch.epoch, records, batch.timestamp_ms, control=batch.control))
        offset += len(records)
    return b"".join(out)


def _is_bootstrap(batch: KafkaBatchRecords) -> bool:
    """A batch of bootstrap records only (KRaftVersion control records, or FeatureLevelRecords
    :func:`to_kafka_snapshot` injected)."""
    for key, value in batch.records:
        if batch.control:
            if key is None or len(key) != 4 or struct.unpack(">hh", key)[1] != KRAFT_VERSION:
                return False
            continue
        try:
            decoded = decode_metadata(value, extensions.METADATA) if value is not None else None
        except MalformedMessageError:
            return False
        if decoded is None or decoded.api_key != _FEATURE_LEVEL:
            return False
        if not isinstance(decoded.data, Struct) or not decoded.data["RaftmetaBootstrap"]:
            return False  # a feature level of the snapshot's own
    return True
