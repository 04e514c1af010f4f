"""raftmeta's codec of Kafka's metadata log against Kafka's own decoder, live: a real KRaft
quorum's metadata logs (every node's segments and .checkpoint snapshots) after topic creation, a
config change, a broker restart, a reassignment and a topic deletion decode to what
``kafka-dump-log --cluster-metadata-decoder`` of the pinned release shows, field by field, and
encode back to their bytes; and segments and snapshots written by raftmeta's writer are read by
that tool without an error, showing the same fields.

The cluster is ``worked_kraft_cluster`` (conftest.py): its own, stopped after the operations.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from raftmeta.kraft.cluster import KraftCluster
from raftmeta.kraft.dump_log import DumpedFile, differences, dump_log_segments, parse_dump
from raftmeta.records.kafka import fast
from raftmeta.records.kafka.batch import batch_size, encode_batch, iter_batches
from raftmeta.records.kafka.frames import ControlRecord, LogRecord, batch_records, metadata_record, new_batch
from raftmeta.records.kafka.json_view import file_view
from raftmeta.records.kafka.message import Struct
from raftmeta.records.kafka.schema import Uuid
from raftmeta.records.kafka.schemas import SNAPSHOT_FOOTER, SNAPSHOT_HEADER

pytestmark = pytest.mark.kraft


def _metadata_files(log_dir: Path) -> list[Path]:
    """A node's segments and snapshots (not the .deleted ones an async delete leaves behind)."""
    return sorted(log_dir.glob("*.log")) + sorted(log_dir.glob("*.checkpoint"))


def test_every_record_of_every_node_decodes_as_kafka_dump_log_shows_it(worked_kraft_cluster: KraftCluster) -> None:
    files = [path for log_dir in worked_kraft_cluster.log_dirs().values() for path in _metadata_files(log_dir)]
    assert sum(p.suffix == ".checkpoint" for p in files) >= 6, files
    dumped = {Path(f.path): f for f in parse_dump(dump_log_segments(files))}
    assert sorted(dumped) == sorted(files)
    problems: list[str] = []
    seen: Counter[str] = Counter()
    for path in files:
        data = path.read_bytes()
        ours = file_view(data)
        problems += differences(ours, dumped[path].batches, where=str(path))
        for position, batch in iter_batches(data):
            if encode_batch(batch) != data[position : position + batch_size(data, position)]:
                problems.append(f"{path} batch at offset {batch.base_offset}: encodes to other bytes")
        for batch_view in ours:
            for record in batch_view.records:
                data_json = record.payload.get("data")
                kind = str(record.payload["type"]) if record.label == "payload" else record.label
                seen[kind] += 1
                if kind == "PARTITION_CHANGE_RECORD" and isinstance(data_json, dict) and "addingReplicas" in data_json:
                    seen["reassignment started"] += 1
    assert problems == []
    for kind in (
        "TOPIC_RECORD", "PARTITION_RECORD", "CONFIG_RECORD", "PARTITION_CHANGE_RECORD", "REMOVE_TOPIC_RECORD",
        "REGISTER_BROKER_RECORD", "BROKER_REGISTRATION_CHANGE_RECORD", "REGISTER_CONTROLLER_RECORD",
        "FEATURE_LEVEL_RECORD", "BEGIN_TRANSACTION_RECORD", "END_TRANSACTION_RECORD", "NO_OP_RECORD",
        "LeaderChange", "KRaftVersion", "KRaftVoters", "SnapshotHeader", "SnapshotFooter", "reassignment started",
    ):  # fmt: skip
        assert seen[kind] > 0, (kind, seen)


def _written_by_raftmeta(directory: Path, source: Path) -> list[Path]:
    """A segment and a snapshot written by raftmeta's writer: the records of ``source`` (a real
    segment) decoded and written again batch for batch, then a batch of every record type raftmeta
    writes that a young cluster's log lacks; and a snapshot of a few of them."""
    data = source.read_bytes()
    batches = []
    offset = 0
    for _, batch in iter_batches(data):
        records: list[LogRecord] = [record for _, record in batch_records(batch)]
        batches.append(
            new_batch(offset, batch.partition_leader_epoch, records, batch.max_timestamp, control=batch.is_control)
        )
        offset += len(records)
    topic = Uuid(bytes(range(1, 17)))
    extra: list[LogRecord] = [
        metadata_record("FenceBrokerRecord", Id=1, Epoch=40),
        metadata_record("UnfenceBrokerRecord", Id=1, Epoch=41),
        metadata_record("UnregisterBrokerRecord", BrokerId=2, BrokerEpoch=12),
        metadata_record("ProducerIdsRecord", BrokerId=0, BrokerEpoch=30, NextProducerId=2000),
        metadata_record("PartitionChangeRecord", 2, PartitionId=1, TopicId=topic, Isr=(0, 1), Leader=0,
                        EligibleLeaderReplicas=(2,)),
        metadata_record("BrokerRegistrationChangeRecord", 3, BrokerId=0, BrokerEpoch=30, Fenced=1,
                        InControlledShutdown=1),
        metadata_record("ConfigRecord", ResourceType=2, ResourceName="orders", Name="retention.ms", Value=None),
        metadata_record("RemoveTopicRecord", TopicId=topic),
    ]  # fmt: skip
    batches.append(new_batch(offset, 7, extra, 1_800_000_000_000))
    segment = directory / "00000000000000000000.log"
    segment.write_bytes(b"".join(encode_batch(b) for b in batches))
    header = ControlRecord(SNAPSHOT_HEADER, Struct({"Version": 0, "LastContainedLogTimestamp": 1_800_000_000_000}))
    footer = ControlRecord(SNAPSHOT_FOOTER, Struct({"Version": 0}))
    snapshot = directory / f"{offset + len(extra):020d}-{7:010d}.checkpoint"
    snapshot.write_bytes(
        encode_batch(new_batch(0, 7, [header], 1_800_000_000_000, control=True))
        + encode_batch(new_batch(1, 7, extra[:4], 1_800_000_000_000))
        + encode_batch(new_batch(5, 7, [footer], 1_800_000_000_000, control=True))
    )
    return [segment, snapshot]


def test_kafka_dump_log_reads_what_raftmeta_writes(worked_kraft_cluster: KraftCluster, tmp_path: Path) -> None:
    controller = worked_kraft_cluster.controllers[0].node_id
    source = _metadata_files(worked_kraft_cluster.log_dirs()[controller])[0]
    files = _written_by_raftmeta(tmp_path, source)
    dumped: dict[Path, DumpedFile] = {Path(f.path): f for f in parse_dump(dump_log_segments(files))}
    for path in files:
        kafka_file = dumped[path]
        assert all(batch.fields["isvalid"] == "true" for batch in kafka_file.batches)
        assert differences(file_view(path.read_bytes()), kafka_file.batches, where=str(path)) == []
    shown = [r.payload.get("type") for b in dumped[files[0]].batches for r in b.records]
    for kind in ("FENCE_BROKER_RECORD", "UNFENCE_BROKER_RECORD", "UNREGISTER_BROKER_RECORD", "PRODUCER_IDS_RECORD"):
        assert kind in shown


def test_the_fast_path_reads_and_writes_every_partition_record_of_a_live_quorum_byte_for_byte(
    worked_kraft_cluster: KraftCluster,
) -> None:
    """raftmeta/records/kafka/fast.py against the field tables on a real quorum's records: every
    PartitionRecord and PartitionChangeRecord (creations, ISR changes, a reassignment's adding and
    removing replicas) is read by the fast path into the fields the generic reader reads, and
    written back to its very bytes."""
    counts: Counter[str] = Counter()
    for log_dir in worked_kraft_cluster.log_dirs().values():
        for path in _metadata_files(log_dir):
            for _, batch in iter_batches(path.read_bytes()):
                if batch.is_control:
                    continue
                for stored, (_, record) in zip(batch.records, batch_records(batch), strict=True):
                    assert stored.value is not None and isinstance(record.data, Struct)
                    if record.name == "PartitionRecord":
                        partition = fast.read_partition(stored.value)
                        assert partition is not None, (path, record)
                        assert fast.partition_value(partition) == stored.value
                        fields = record.data
                        assert (partition.replicas, partition.isr, partition.leader, partition.leader_epoch) == (
                            fields["Replicas"], fields["Isr"], fields["Leader"], fields["LeaderEpoch"],
                        )  # fmt: skip
                        counts["partition"] += 1
                    elif record.name == "PartitionChangeRecord":
                        change = fast.read_partition_change(stored.value)
                        assert change is not None, (path, record)
                        assert fast.partition_change_value(change) == stored.value
                        assert (change.isr, change.leader, change.replicas, change.adding_replicas) == (
                            record.data["Isr"], record.data["Leader"], record.data["Replicas"],
                            record.data["AddingReplicas"],
                        )  # fmt: skip
                        counts["change"] += 1
    assert counts["partition"] >= 5 and counts["change"] >= 3, counts
