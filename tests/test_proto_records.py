"""Every metadata record type, and every message of the gRPC contracts, round-trips through
protobuf binary and JSON encodings with every field set."""

from __future__ import annotations

from typing import TYPE_CHECKING

from google.protobuf import json_format
from google.protobuf.descriptor import FieldDescriptor

from raftmeta.v1 import controller_pb2, errors_pb2, fleet_pb2, raft_pb2, records_pb2

if TYPE_CHECKING:
    from google.protobuf.message import Message

_SCALARS = {
    FieldDescriptor.TYPE_STRING: "value-é",
    FieldDescriptor.TYPE_BYTES: bytes(range(16)),
    FieldDescriptor.TYPE_BOOL: True,
    FieldDescriptor.TYPE_INT32: -7,
    FieldDescriptor.TYPE_INT64: 1 << 40,
    FieldDescriptor.TYPE_UINT32: 7,
    FieldDescriptor.TYPE_UINT64: 1 << 41,
}


def populate(message: Message, depth: int = 0) -> Message:
    """Set every field of ``message`` (first member of each oneof) to a non-default value."""
    descriptor = message.DESCRIPTOR
    for field in descriptor.fields:
        oneof = field.containing_oneof
        # A real oneof: only its first member is set here ("_x" oneofs are proto3 `optional` fields).
        if oneof is not None and oneof.fields[0] is not field and not oneof.name.startswith("_"):
            continue
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            getattr(message, field.name)["key"] = "value"
        elif field.message_type is not None:
            if depth > 3:
                continue
            if field.is_repeated:
                populate(getattr(message, field.name).add(), depth + 1)
            else:
                populate(getattr(message, field.name), depth + 1)
        elif field.enum_type is not None:
            value = field.enum_type.values[-1].number
            if field.is_repeated:
                getattr(message, field.name).append(value)
            else:
                setattr(message, field.name, value)
        else:
            scalar = _SCALARS[field.type]
            if field.is_repeated:
                getattr(message, field.name).extend([scalar, scalar])
            else:
                setattr(message, field.name, scalar)
    return message


def roundtrip(message: Message) -> None:
    binary = type(message).FromString(message.SerializeToString())
    assert binary == message
    as_json = json_format.MessageToJson(message, preserving_proto_field_name=True)
    parsed = json_format.Parse(as_json, type(message)())
    assert parsed == message


def test_every_metadata_record_type_roundtrips() -> None:
    oneof = records_pb2.MetadataRecord.DESCRIPTOR.oneofs_by_name["record"]
    assert len(oneof.fields) >= 12
    for field in oneof.fields:
        record = records_pb2.MetadataRecord()
        populate(getattr(record, field.name))
        getattr(record, field.name).SetInParent()
        assert record.WhichOneof("record") == field.name
        roundtrip(record)


def test_every_service_message_roundtrips() -> None:
    for module in (raft_pb2, controller_pb2, records_pb2, fleet_pb2):
        for name, descriptor in module.DESCRIPTOR.message_types_by_name.items():
            message_class = getattr(module, name)
            message = populate(message_class())
            roundtrip(message)
            assert descriptor.full_name.startswith("raftmeta.v1.")


def test_partition_change_record_tells_unchanged_from_empty() -> None:
    unchanged = records_pb2.PartitionChangeRecord(topic_id=b"\x01" * 16, partition_id=0)
    emptied = records_pb2.PartitionChangeRecord(topic_id=b"\x01" * 16, partition_id=0, isr=records_pb2.BrokerIdList())
    again = records_pb2.PartitionChangeRecord.FromString(emptied.SerializeToString())
    assert not unchanged.HasField("isr")
    assert again.HasField("isr")
    assert list(again.isr.ids) == []
    assert not again.HasField("leader")
    with_leader = records_pb2.PartitionChangeRecord(leader=-1)
    assert records_pb2.PartitionChangeRecord.FromString(with_leader.SerializeToString()).HasField("leader")


def test_error_codes_use_kafka_names_and_numbers() -> None:
    expected = {
        "NONE": 0,
        "UNKNOWN_SERVER_ERROR": -1,
        "INVALID_TOPIC_EXCEPTION": 17,
        "TOPIC_ALREADY_EXISTS": 36,
        "INVALID_PARTITIONS": 37,
        "INVALID_REPLICATION_FACTOR": 38,
        "INVALID_REPLICA_ASSIGNMENT": 39,
        "INVALID_CONFIG": 40,
        "NOT_CONTROLLER": 41,
        "FENCED_LEADER_EPOCH": 74,
        "INCONSISTENT_CLUSTER_ID": 104,
    }
    for name, number in expected.items():
        assert errors_pb2.ErrorCode.Value(name) == number
    result = controller_pb2.CreatableTopicResult(name="t", error_code=errors_pb2.TOPIC_ALREADY_EXISTS)
    assert json_format.MessageToDict(result)["errorCode"] == "TOPIC_ALREADY_EXISTS"


def test_create_topics_defaults_are_distinguishable() -> None:
    topic = controller_pb2.CreatableTopic(name="t")
    assert not topic.HasField("num_partitions")
    assert not topic.HasField("replication_factor")
    topic.num_partitions = 0
    assert topic.HasField("num_partitions")
