"""The voter set a Kafka broker reads through the Kafka listener names the voters' Kafka listeners
as their CONTROLLER endpoints (raftmeta's log names their raft addresses there)."""

from __future__ import annotations

from raftmeta.kafka.context import KafkaNode
from raftmeta.kafka.voter_endpoints import with_kafka_listeners
from raftmeta.records import codec
from raftmeta.v1 import records_pb2

NODES = (KafkaNode(1, "10.0.0.1", 9093), KafkaNode(2, "10.0.0.2", 9093))


def _voters(*ids: int) -> bytes:
    voters = records_pb2.VotersRecord(version=0)
    for voter_id in ids:
        entry = voters.voters.add(voter_id=voter_id, min_supported_version=0, max_supported_version=1)
        entry.endpoints.add(name="CONTROLLER", host="127.0.0.1", port=7000 + voter_id)  # the raft address
    return records_pb2.MetadataRecord(voters=voters).SerializeToString()


def test_voters_records_name_the_kafka_listeners_and_nothing_else_changes() -> None:
    topic = records_pb2.MetadataRecord(topic=records_pb2.TopicRecord(name="orders", topic_id=b"\x01" * 16))
    header = records_pb2.MetadataRecord(snapshot_header=records_pb2.SnapshotHeaderRecord(version=0))
    plain_control = codec.encode_batch(0, 2, [header.SerializeToString()], 111, control=True)
    voters = codec.encode_batch(1, 2, [_voters(1, 2, 3)], 222, control=True)
    data = codec.encode_batch(2, 2, [topic.SerializeToString()], 333)
    served = with_kafka_listeners(plain_control + voters + data, NODES)
    first, second, third = codec.iter_batches(served)
    assert (first.data, third.data) == (plain_control, data)  # byte for byte
    assert (second.base_offset, second.epoch, second.header.append_timestamp_ms, second.header.is_control) == (
        1, 2, 222, True)  # fmt: skip
    (record,) = [records_pb2.MetadataRecord.FromString(r) for r in second.records()]
    assert [(v.voter_id, [(e.name, e.host, e.port) for e in v.endpoints]) for v in record.voters.voters] == [
        (1, [("CONTROLLER", "10.0.0.1", 9093)]),
        (2, [("CONTROLLER", "10.0.0.2", 9093)]),
        (3, []),  # its Kafka listener is unknown here: no address a broker could use
    ]
    assert [(v.min_supported_version, v.max_supported_version) for v in record.voters.voters] == [(0, 1)] * 3
