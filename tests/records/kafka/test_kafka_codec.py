"""Kafka's metadata record format, pure: decode is encode's inverse for every record type and
version the tables hold, records the tables do not know pass through whole, and bad bytes are
refused naming the offset and the field."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raftmeta.records.codec import CorruptBatchError
from raftmeta.records.kafka import message
from raftmeta.records.kafka.batch import Header, Record, RecordBatch, decode_batch, encode_batch
from raftmeta.records.kafka.frames import (
    ControlRecord,
    MalformedRecordError,
    MetadataRecord,
    batch_records,
    decode_control,
    decode_metadata,
    encode_control,
    encode_metadata,
    metadata_record,
    new_batch,
)
from raftmeta.records.kafka.message import MalformedMessageError, Struct
from raftmeta.records.kafka.schema import Field, MessageSchema, Uuid, Versions
from raftmeta.records.kafka.schemas import CONTROL_RECORDS, KRAFT_VOTERS, METADATA_RECORDS, SNAPSHOT_HEADER

_INTS = {
    "int8": st.integers(-(2**7), 2**7 - 1),
    "int16": st.integers(-(2**15), 2**15 - 1),
    "uint16": st.integers(0, 2**16 - 1),
    "int32": st.integers(-(2**31), 2**31 - 1),
    "int64": st.integers(-(2**63), 2**63 - 1),
}


def _scalar(type_: str) -> st.SearchStrategy[Any]:
    if type_ in _INTS:
        return _INTS[type_]
    return {
        "bool": st.booleans(),
        "float64": st.floats(allow_nan=False),
        "string": st.text(max_size=12),
        "bytes": st.binary(max_size=12),
        "uuid": st.binary(min_size=16, max_size=16).map(Uuid),
    }[type_]


def _value(spec: Field, version: int) -> st.SearchStrategy[Any]:
    if spec.is_array:
        element = _struct(spec.fields, version) if spec.is_struct else _scalar(spec.element)
        values: st.SearchStrategy[Any] = st.lists(element, max_size=3).map(tuple)
    elif spec.is_struct:
        values = _struct(spec.fields, version)
    else:
        values = _scalar(spec.type)
    if version in spec.nullable:
        values = st.none() | values
    return values


def _struct(fields: tuple[Field, ...], version: int) -> st.SearchStrategy[Struct]:
    present = [spec for spec in fields if version in spec.versions]
    known_tags = {spec.tag for spec in present if version in spec.tagged}
    unknown = st.lists(
        st.tuples(st.integers(0, 40).filter(lambda tag: tag not in known_tags), st.binary(max_size=5)),
        max_size=2,
        unique_by=lambda pair: pair[0],
    ).map(lambda pairs: tuple(sorted(pairs)))
    return st.builds(
        lambda values, tagged: Struct(dict(zip([s.name for s in present], values, strict=True)), tagged),
        st.tuples(*[_value(spec, version) for spec in present]),
        unknown,
    )


def _schema_versions(schemas: dict[int, MessageSchema]) -> list[tuple[MessageSchema, int]]:
    return [(s, v) for s in schemas.values() for v in range(s.valid.low, (s.valid.high or s.valid.low) + 1)]


@pytest.mark.parametrize(
    ("schema", "version"),
    _schema_versions(METADATA_RECORDS) + _schema_versions(CONTROL_RECORDS),
    ids=lambda p: p.name if isinstance(p, MessageSchema) else f"v{p}",
)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_decode_is_encodes_inverse_for_every_record_type_and_version(
    schema: MessageSchema, version: int, data: st.DataObject
) -> None:
    value = data.draw(_struct(schema.fields, version))
    encoded = message.encode(schema, version, value)
    assert message.decode(schema, version, encoded) == value
    if schema.api_key is not None:
        record = MetadataRecord(schema.api_key, version, value)
        assert decode_metadata(encode_metadata(record)) == record


_RECORDS = st.lists(
    st.builds(
        Record,
        offset_delta=st.integers(0, 2**31 - 1),
        timestamp_delta=st.integers(-(2**63), 2**63 - 1),
        key=st.none() | st.binary(max_size=8),
        value=st.none() | st.binary(max_size=40),
        headers=st.lists(st.builds(Header, st.text(max_size=5), st.none() | st.binary(max_size=5))).map(tuple),
        attributes=st.integers(-128, 127),
    ),
    min_size=1,
    max_size=4,
).map(tuple)
_BATCHES = st.builds(
    RecordBatch,
    base_offset=st.integers(0, 2**63 - 1),
    partition_leader_epoch=st.integers(-(2**31), 2**31 - 1),
    attributes=st.sampled_from([0, 0x08, 0x10, 0x20, 0x30, 0x40]),  # uncompressed, any other flags
    last_offset_delta=st.integers(-(2**31), 2**31 - 1),
    base_timestamp=st.integers(-(2**63), 2**63 - 1),
    max_timestamp=st.integers(-(2**63), 2**63 - 1),
    producer_id=st.integers(-(2**63), 2**63 - 1),
    producer_epoch=st.integers(-(2**15), 2**15 - 1),
    base_sequence=st.integers(-(2**31), 2**31 - 1),
    records=_RECORDS,
)


@settings(max_examples=60, deadline=None)
@given(batch=_BATCHES)
def test_a_record_batch_decodes_to_what_was_encoded(batch: RecordBatch) -> None:
    encoded = encode_batch(batch)
    assert decode_batch(encoded) == batch
    assert encode_batch(decode_batch(encoded)) == encoded


def _topic_id() -> Uuid:
    return Uuid(bytes(range(16)))


def _one_record_batch(value: bytes | None, key: bytes | None = None, *, control: bool = False) -> bytes:
    return encode_batch(RecordBatch(40, 3, 0x20 if control else 0, 0, 1, 1, -1, -1, -1, (Record(0, 0, key, value),)))


def test_unknown_tagged_fields_are_carried_through_and_written_back_in_tag_order() -> None:
    record = metadata_record("PartitionRecord", 2, PartitionId=3, TopicId=_topic_id(), Replicas=(1, 2), Isr=(1,))
    value = encode_metadata(record)
    assert value.endswith(b"\x00")  # no tagged field: every one at its default
    # Two tagged fields: tag 1 (EligibleLeaderReplicas at version 2: size 1, an empty compact
    # array) and tag 9, which no version of PartitionRecord knows (size 2).
    with_tags = value[:-1] + b"\x02" + b"\x01\x01\x01" + b"\x09\x02\xab\xcd"
    decoded = decode_metadata(with_tags)
    assert isinstance(decoded.data, Struct)
    assert decoded.data["EligibleLeaderReplicas"] == ()  # tag 1 at version 2: an empty ELR array
    assert decoded.data.unknown_tagged == ((9, b"\xab\xcd"),)
    assert encode_metadata(decoded) == with_tags


def test_unknown_record_types_and_versions_are_carried_not_dropped() -> None:
    unknown_type = b"\x01\x63\x00" + b"\x05new!"  # frame 1, api key 99, version 0, a body no table knows
    record = decode_metadata(unknown_type)
    assert record == MetadataRecord(99, 0, b"\x05new!")
    assert not record.known and record.name == "UnknownRecord(apiKey=99)"
    assert encode_metadata(record) == unknown_type
    newer = b"\x01\x02\x07" + b"\xff\xfe"  # TopicRecord version 7: newer than the tables
    assert decode_metadata(newer) == MetadataRecord(2, 7, b"\xff\xfe")
    assert encode_metadata(decode_metadata(newer)) == newer
    key, value = struct.pack(">hh", 0, 42), b"\x00\x01"
    control = decode_control(key, value)
    assert control == ControlRecord(42, value) and not control.known
    assert encode_control(control) == (key, value)


def test_a_malformed_record_is_refused_naming_its_offset_and_field() -> None:
    good = encode_metadata(metadata_record("TopicRecord", Name="orders", TopicId=_topic_id()))
    truncated = _one_record_batch(good[:-5])
    with pytest.raises(MalformedRecordError, match=r"record at offset 40: TopicRecord.TopicId: .*needs 16 bytes"):
        list(batch_records(decode_batch(truncated)))
    name_null = good[:3] + b"\x00" + good[3 + 1 + len("orders") :]
    with pytest.raises(
        MalformedRecordError, match=r"offset 40: TopicRecord.Name: .*null, but the field is not nullable"
    ):
        list(batch_records(decode_batch(_one_record_batch(name_null))))
    with pytest.raises(MalformedRecordError, match=r"offset 40: frame version: 0, expected 1 \(KRaft's 2.8 preview"):
        list(batch_records(decode_batch(_one_record_batch(b"\x00" + good[1:]))))
    with pytest.raises(MalformedRecordError, match=r"offset 40: TopicRecord: 1 bytes left after the message"):
        list(batch_records(decode_batch(_one_record_batch(good + b"\x00"))))
    with pytest.raises(MalformedRecordError, match=r"offset 40: key: 1 bytes: a metadata record's key is null"):
        list(batch_records(decode_batch(_one_record_batch(good, key=b"k"))))
    with pytest.raises(MalformedRecordError, match=r"offset 40: SnapshotHeaderRecord.LastContainedLogTimestamp"):
        list(batch_records(decode_batch(_one_record_batch(b"\x00\x00\x00", struct.pack(">hh", 0, 3), control=True))))
    tags_descending = good[:-1] + b"\x02\x05\x00\x03\x00"
    with pytest.raises(MalformedRecordError, match=r"TopicRecord: tag 3 after tag 5: tags must ascend"):
        list(batch_records(decode_batch(_one_record_batch(tags_descending))))


def test_a_damaged_batch_is_refused_naming_its_position_base_offset_and_field() -> None:
    batch = new_batch(7, 2, [metadata_record("NoOpRecord")], 1_700_000_000_000)
    data = encode_batch(batch)
    assert decode_batch(data) == batch
    flipped = bytearray(data)
    flipped[-1] ^= 0x01
    with pytest.raises(CorruptBatchError, match=r"at byte 0 \(base offset 7\): CRC32C mismatch"):
        decode_batch(bytes(flipped))
    with pytest.raises(CorruptBatchError, match=r"magic 1, expected 2"):
        decode_batch(data[:16] + b"\x01" + data[17:])
    gzip = encode_batch(RecordBatch(7, 2, 0x01, 0, 1, 1, -1, -1, -1, batch.records))
    with pytest.raises(CorruptBatchError, match=r"attributes: gzip compression; a metadata log batch is uncompressed"):
        decode_batch(gzip)
    with pytest.raises(CorruptBatchError, match=r"batch needs \d+ bytes"):
        decode_batch(data[:-3])


def test_a_batch_kraft_writes_holds_consecutive_offsets_and_no_producer() -> None:
    records = [
        metadata_record("TopicRecord", Name="orders", TopicId=_topic_id()),
        metadata_record("PartitionRecord", 2, PartitionId=0, TopicId=_topic_id(), Replicas=(1, 2, 3), Isr=(1, 2, 3),
                        Leader=1, LeaderEpoch=0, PartitionEpoch=0),
    ]  # fmt: skip
    batch = decode_batch(encode_batch(new_batch(100, 4, records, 1_700_000_000_000)))
    assert [offset for offset, _ in batch_records(batch)] == [100, 101]
    assert [record for _, record in batch_records(batch)] == records
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.last_offset) == (-1, -1, -1, 101)
    header = ControlRecord(SNAPSHOT_HEADER, Struct({"Version": 0, "LastContainedLogTimestamp": 5}))
    assert decode_batch(encode_batch(new_batch(0, 1, [header], 5, control=True))).is_control
    with pytest.raises(ValueError, match="control batch holds control records only"):
        new_batch(0, 1, [header], 5)


def test_version_ranges_read_as_kafkas_schemas_write_them() -> None:
    assert Versions.parse("0+") == Versions(0, None) and 7 in Versions.parse("0+")
    assert Versions.parse("0-2") == Versions(0, 2) and 3 not in Versions.parse("0-2")
    assert str(Versions.parse("3")) == "3" and str(Versions.parse("2+")) == "2+"
    assert str(Uuid.parse("YM5a_I75RvmiOO7ZHB5iEQ")) == "YM5a_I75RvmiOO7ZHB5iEQ"
    with pytest.raises(MalformedMessageError, match="version 3 is not one of 0-2"):
        message.decode(METADATA_RECORDS[3], 3, b"")


def test_an_error_deep_in_a_message_names_the_whole_path_to_its_field() -> None:
    schema = CONTROL_RECORDS[KRAFT_VOTERS]
    endpoint = Struct({"Name": "CONTROLLER", "Host": "127.0.0.1", "Port": 9093})
    feature = Struct({"MinSupportedVersion": 0, "MaxSupportedVersion": 1})
    voters = tuple(
        Struct(
            {"VoterId": i, "VoterDirectoryId": _topic_id(), "Endpoints": (endpoint,), "KRaftVersionFeature": feature}
        )
        for i in (1, 2)
    )
    encoded = message.encode(schema, 0, Struct({"Version": 0, "Voters": voters}))
    host = encoded.rindex(b"127.0.0.1")
    damaged = encoded[: host - 1] + b"\x7f" + encoded[host:]  # the second voter's host claims 126 bytes
    with pytest.raises(MalformedMessageError, match=r"field VotersRecord.Voters\[1\].Endpoints\[0\].Host at byte"):
        message.decode(schema, 0, damaged)
