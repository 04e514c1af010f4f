"""raftmeta's records as Kafka's own and back (raftmeta/records/kafka/mapping.py): every record
type maps to exactly one Kafka record and back to itself, field for field; batches keep their
offsets, epochs and timestamps; Kafka's own tables read the mapped records (raftmeta's tagged
fields carried as unknown ones); values Kafka cannot hold are refused by name."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raftmeta.records import codec
from raftmeta.records.kafka import extensions
from raftmeta.records.kafka.batch import ATTR_CONTROL, Record, RecordBatch, decode_batch, encode_batch, iter_batches
from raftmeta.records.kafka.frames import ControlRecord, batch_records, metadata_record, new_batch
from raftmeta.records.kafka.mapping import (
    METADATA_VERSION,
    NotRaftmetaRecordError,
    UnmappableRecordError,
    bootstrap_records,
    bootstrap_snapshot,
    from_kafka_batches,
    from_kafka_record,
    from_kafka_snapshot,
    from_kafka_value,
    from_kafka_value_bytes,
    kafka_batch_bytes,
    to_kafka_batches,
    to_kafka_record,
    to_kafka_snapshot,
    to_kafka_value,
)
from raftmeta.records.kafka.message import Struct
from raftmeta.records.kafka.schema import Uuid
from raftmeta.records.kafka.schemas import CONTROL_RECORDS, KRAFT_VERSION, METADATA_RECORDS
from raftmeta.storage.snapshot import SnapshotId, encode_snapshot
from raftmeta.v1 import records_pb2
from tests.records.kafka.strategies import ANY_RECORD, BY_TYPE

# The one Kafka record each raftmeta record type maps to.
KAFKA_NAMES = {
    "topic": "TopicRecord",
    "partition": "PartitionRecord",
    "partition_change": "PartitionChangeRecord",
    "remove_topic": "RemoveTopicRecord",
    "register_broker": "RegisterBrokerRecord",
    "unregister_broker": "UnregisterBrokerRecord",
    "fence_broker": "BrokerRegistrationChangeRecord",
    "unfence_broker": "BrokerRegistrationChangeRecord",
    "broker_log_dirs_change": "BrokerRegistrationChangeRecord",
    "config": "ConfigRecord",
    "no_op": "NoOpRecord",
    "request": "NoOpRecord",
    "leader_change": "LeaderChangeMessage",
    "voters": "VotersRecord",
    "snapshot_header": "SnapshotHeaderRecord",
    "snapshot_footer": "SnapshotFooterRecord",
    "feature_level": "FeatureLevelRecord",
    "producer_ids": "ProducerIdsRecord",
}


def test_every_record_type_raftmeta_writes_has_a_strategy_and_a_kafka_record() -> None:
    kinds = {field.name for field in records_pb2.MetadataRecord.DESCRIPTOR.oneofs_by_name["record"].fields}
    assert set(BY_TYPE) == kinds == set(KAFKA_NAMES)


@pytest.mark.parametrize("kind", sorted(BY_TYPE))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_each_type_maps_to_its_one_kafka_record_and_back_exactly(kind: str, data: st.DataObject) -> None:
    record = data.draw(BY_TYPE[kind])
    mapped = to_kafka_record(record)
    assert mapped.name == KAFKA_NAMES[kind]
    assert from_kafka_record(mapped) == record
    control, key, value = to_kafka_value(record)
    assert control == isinstance(mapped, ControlRecord)
    back = from_kafka_value(control, key, value, offset=7)
    assert back == record, (record, back)
    assert from_kafka_value_bytes(control, key, value, offset=7) == record.SerializeToString()


@settings(max_examples=150, deadline=None)
@given(record=ANY_RECORD)
def test_kafkas_own_tables_read_every_mapped_record_and_carry_raftmetas_tags_unread(
    record: records_pb2.MetadataRecord,
) -> None:
    """What Kafka's decoders see: the record decodes with Kafka's tables alone, raftmeta's tagged
    fields are unknown tags at or above FIRST_TAG, and the bytes encode back the same."""
    control, key, value = to_kafka_value(record)
    batch = decode_batch(kafka_batch_bytes(0, 1, 0, [(key, value)], control=control))
    ((_, plain),) = tuple(batch_records(batch))
    assert plain.known
    assert isinstance(plain.data, Struct)
    assert all(tag >= extensions.FIRST_TAG for tag, _ in plain.data.unknown_tagged)
    schema = CONTROL_RECORDS[plain.type] if isinstance(plain, ControlRecord) else METADATA_RECORDS[plain.api_key]
    assert {f.name for f in schema.fields} >= set(plain.data.values)


@settings(max_examples=80, deadline=None)
@given(
    records=st.lists(ANY_RECORD, min_size=1, max_size=12),
    base=st.integers(0, 1 << 40),
    epoch=st.integers(0, 1 << 20),
    stamp=st.integers(0, 1 << 42),
)
def test_a_batch_keeps_its_offsets_epoch_and_timestamp_across_kafka_batches(
    records: list[records_pb2.MetadataRecord], base: int, epoch: int, stamp: int
) -> None:
    """A raftmeta batch mixing control and data records becomes consecutive Kafka batches, each
    record at its own offset; back, one raftmeta batch per Kafka batch, the same records."""
    raftmeta = codec.encode_batch(base, epoch, [r.SerializeToString() for r in records], stamp)
    kafka = to_kafka_batches(raftmeta)
    batches = [batch for _, batch in iter_batches(kafka)]
    assert batches[0].base_offset == base
    for before, after in itertools.pairwise(batches):
        assert after.base_offset == before.next_offset
        assert after.is_control != before.is_control  # a run of one kind per batch
    assert batches[-1].next_offset == base + len(records)
    assert {(b.partition_leader_epoch, b.base_timestamp, b.max_timestamp) for b in batches} == {(epoch, stamp, stamp)}
    offsets = []
    for batch in batches:
        for offset, mapped in batch_records(
            batch, metadata_schemas=extensions.METADATA, control_schemas=extensions.CONTROL
        ):
            offsets.append(offset)
            assert from_kafka_record(mapped) == records[offset - base]
    assert offsets == list(range(base, base + len(records)))
    back = from_kafka_batches(kafka)
    assert [r for b in codec.iter_batches(back) for r in b.records()] == [r.SerializeToString() for r in records]
    if len(batches) == 1:  # a batch of one kind comes back byte for byte
        control = isinstance(to_kafka_record(records[0]), ControlRecord)
        assert back == codec.encode_batch(base, epoch, [r.SerializeToString() for r in records], stamp, control=control)


@settings(max_examples=60, deadline=None)
@given(records=st.lists(ANY_RECORD, min_size=1, max_size=8), base=st.integers(0, 1 << 40))
def test_the_fast_batch_framing_is_the_generic_encoders(records: list[records_pb2.MetadataRecord], base: int) -> None:
    values = [to_kafka_value(r)[1:] for r in records]
    stamp = 1_700_000_000_000
    for control in (False, True):
        ours = kafka_batch_bytes(base, 3, stamp, values, control=control)
        generic = RecordBatch(
            base,
            3,
            ATTR_CONTROL if control else 0,
            len(values) - 1,
            stamp,
            stamp,
            -1,
            -1,
            -1,
            tuple(Record(i, 0, key, value) for i, (key, value) in enumerate(values)),
        )
        assert ours == encode_batch(generic)


def _snapshot(voters: records_pb2.VotersRecord | None, image: list[records_pb2.MetadataRecord]) -> bytes:
    return b"".join(
        encode_snapshot(
            SnapshotId(500, 4),
            [r.SerializeToString() for r in image],
            last_contained_log_timestamp_ms=1_700_000_000_000,
            append_timestamp_ms=1_700_000_000_123,
            batch_records=3,
            voters=voters,
        )
    )


@pytest.mark.parametrize("with_voters", [True, False])
@settings(max_examples=25, deadline=None)
@given(image=st.lists(st.one_of(BY_TYPE["topic"], BY_TYPE["partition"], BY_TYPE["register_broker"]), max_size=10))
def test_a_snapshot_gets_the_bootstrap_records_after_its_header_and_comes_back_exactly(
    with_voters: bool, image: list[records_pb2.MetadataRecord]
) -> None:
    voters = records_pb2.VotersRecord(
        version=0,
        voters=[records_pb2.VoterEntry(voter_id=1, directory_id=b"\x01" * 16, max_supported_version=1)],
    )
    raftmeta = _snapshot(voters if with_voters else None, image)
    kafka = to_kafka_snapshot(raftmeta)
    batches = [batch for _, batch in iter_batches(kafka)]
    offsets = [b.base_offset for b in batches]
    assert offsets[0] == 0 and all(a.next_offset == b.base_offset for a, b in itertools.pairwise(batches))
    names = [r.name for b in batches for _, r in batch_records(b)]
    lead = [
        "SnapshotHeaderRecord",
        *(["VotersRecord"] if with_voters else []),
        "KRaftVersionRecord",
        "FeatureLevelRecord",
    ]
    assert names[: len(lead)] == lead
    assert names[-1] == "SnapshotFooterRecord"
    kraft_version = next(r for b in batches for _, r in batch_records(b) if r.name == "KRaftVersionRecord")
    assert isinstance(kraft_version.data, Struct)
    assert kraft_version.data["KRaftVersion"] == (1 if with_voters else 0)
    assert from_kafka_snapshot(kafka) == raftmeta


def test_a_snapshot_with_its_own_metadata_version_carries_it_once_and_comes_back_exactly() -> None:
    """The controller writes metadata.version into the log, so later snapshots hold it: the Kafka
    form adds none of its own then, and a feature level alone in a batch comes back too."""
    own = records_pb2.MetadataRecord(
        feature_level=records_pb2.FeatureLevelRecord(name="metadata.version", feature_level=METADATA_VERSION)
    )
    raftmeta = _snapshot(None, [own])
    kafka = to_kafka_snapshot(raftmeta)
    records = [r for _, b in iter_batches(kafka) for _, r in batch_records(b)]
    assert [r.name for r in records] == [
        "SnapshotHeaderRecord", "KRaftVersionRecord", "FeatureLevelRecord", "SnapshotFooterRecord",
    ]  # fmt: skip
    assert from_kafka_snapshot(kafka) == raftmeta


def test_the_bootstrap_records_are_kraft_version_voters_and_metadata_version() -> None:
    voters = records_pb2.VotersRecord(voters=[records_pb2.VoterEntry(voter_id=3, max_supported_version=1)])
    boot = bootstrap_records(voters)
    assert [int.from_bytes(key[2:4], "big") for key, _ in boot.control] == [KRAFT_VERSION, 6]
    assert len(boot.control) == 2 and len(boot.metadata) == 1
    assert len(bootstrap_records(None).control) == 1
    batches = [b for _, b in iter_batches(bootstrap_snapshot(voters, 1_700_000_000_000))]
    records = [r for b in batches for _, r in batch_records(b)]
    assert [r.name for r in records] == [
        "SnapshotHeaderRecord", "KRaftVersionRecord", "VotersRecord", "FeatureLevelRecord", "SnapshotFooterRecord",
    ]  # fmt: skip
    feature = records[3]
    assert isinstance(feature.data, Struct)
    assert (feature.data["Name"], feature.data["FeatureLevel"]) == ("metadata.version", METADATA_VERSION)
    assert {b.partition_leader_epoch for b in batches} == {0}


@pytest.mark.parametrize(
    ("record", "field"),
    [
        (
            records_pb2.MetadataRecord(topic=records_pb2.TopicRecord(name="t", topic_id=b"short")),
            "TopicRecord.topic_id",
        ),
        (
            records_pb2.MetadataRecord(
                register_broker=records_pb2.RegisterBrokerRecord(
                    incarnation_id=b"\x01" * 16, endpoints=[records_pb2.BrokerEndpoint(name="P", port=70000)]
                )
            ),
            "RegisterBrokerRecord.endpoints[0].port",
        ),
        (
            records_pb2.MetadataRecord(snapshot_footer=records_pb2.SnapshotFooterRecord(version=1 << 20)),
            "SnapshotFooterRecord.version",
        ),
        (
            records_pb2.MetadataRecord(
                partition_change=records_pb2.PartitionChangeRecord(topic_id=b"\x01" * 16, leader=-2)
            ),
            "PartitionChangeRecord.leader",
        ),
        (records_pb2.MetadataRecord(), "no record set"),
    ],
)
def test_a_value_kafka_cannot_hold_is_refused_naming_the_field(record: records_pb2.MetadataRecord, field: str) -> None:
    with pytest.raises(UnmappableRecordError, match=field.replace("[", r"\[").replace("]", r"\]")):
        to_kafka_value(record)


def test_a_refused_record_in_a_batch_names_its_offset() -> None:
    bad = records_pb2.MetadataRecord(remove_topic=records_pb2.RemoveTopicRecord(topic_id=b"x"))
    good = records_pb2.MetadataRecord(no_op=records_pb2.NoOpRecord())
    data = codec.encode_batch(40, 2, [good.SerializeToString(), bad.SerializeToString()], 0)
    with pytest.raises(UnmappableRecordError, match=r"record at offset 41: RemoveTopicRecord\.topic_id"):
        to_kafka_batches(data)


def test_kafka_records_raftmeta_has_no_record_for_are_refused_by_name() -> None:
    feature = decode_batch(bootstrap_snapshot(None, 0), 0)
    with pytest.raises(NotRaftmetaRecordError, match="KRaftVersionRecord"):
        from_kafka_value(True, feature.records[1].key, feature.records[1].value, 1)
    broker_change = new_batch(
        0,
        1,
        [metadata_record("BrokerRegistrationChangeRecord", 1, BrokerId=1, BrokerEpoch=5, InControlledShutdown=1)],
        0,
    )
    record = decode_batch(encode_batch(broker_change)).records[0]
    with pytest.raises(NotRaftmetaRecordError, match="only fence"):
        from_kafka_value(False, record.key, record.value, 0)


@pytest.mark.parametrize(
    ("version", "fields"),
    [
        # Fencing and directories in one record: raftmeta writes them apart.
        (2, {"Fenced": 1, "LogDirs": (Uuid(b"\x07" * 16),)}),
        # Before v2 there is no LogDirs: a record that changes nothing is no raftmeta record.
        (1, {}),
        # KIP-1066's cordoned directories: raftmeta keeps none.
        (3, {"LogDirs": (Uuid(b"\x07" * 16),), "CordonedLogDirs": (Uuid(b"\x08" * 16),)}),
    ],
)
def test_a_registration_change_beyond_fencing_or_log_dirs_alone_is_refused(
    version: int, fields: dict[str, Any]
) -> None:
    batch = new_batch(
        0, 1, [metadata_record("BrokerRegistrationChangeRecord", version, BrokerId=1, BrokerEpoch=5, **fields)], 0
    )
    record = decode_batch(encode_batch(batch)).records[0]
    with pytest.raises(NotRaftmetaRecordError, match="only fence"):
        from_kafka_value(False, record.key, record.value, 0)


def test_kafkas_log_dirs_change_reads_as_raftmetas() -> None:
    """What Kafka 4.4's handleDirectoriesOffline writes: v2, the broker's id and epoch, LogDirs."""
    remaining = b"\x07" * 16
    batch = new_batch(
        0,
        1,
        [metadata_record("BrokerRegistrationChangeRecord", 2, BrokerId=1, BrokerEpoch=5, LogDirs=(Uuid(remaining),))],
        0,
    )
    record = decode_batch(encode_batch(batch)).records[0]
    assert from_kafka_value(False, record.key, record.value, 0) == records_pb2.MetadataRecord(
        broker_log_dirs_change=records_pb2.BrokerLogDirsChangeRecord(broker_id=1, broker_epoch=5, log_dirs=[remaining])
    )
