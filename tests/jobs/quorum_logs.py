"""Synthetic quorum data dirs in the real on-disk layout (DESIGN.md §5), written with the
project's codec, and the doctoring tools the verify tests use to plant each kind of damage."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from raftmeta.records import codec
from raftmeta.storage.datadir import LOG_DIR_NAME
from raftmeta.storage.high_watermark import HIGH_WATERMARK_CHECKPOINT as HIGH_WATERMARK_FILE
from raftmeta.storage.high_watermark import render_high_watermark
from raftmeta.storage.meta_properties import META_PROPERTIES, MetaProperties
from raftmeta.v1 import records_pb2

CLUSTER_ID = "test-cluster"


def topic_batch(index: int) -> list[bytes]:
    """A TopicRecord and its 3 PartitionRecords (RF 3 over brokers 0..5)."""
    topic_id = index.to_bytes(16, "big")
    records = [records_pb2.MetadataRecord(topic=records_pb2.TopicRecord(name=f"topic-{index}", topic_id=topic_id))]
    for p in range(3):
        replicas = [(index + p + k) % 6 for k in range(3)]
        records.append(
            records_pb2.MetadataRecord(
                partition=records_pb2.PartitionRecord(
                    topic_id=topic_id, partition_id=p, replicas=replicas, isr=replicas, leader=replicas[0]
                )
            )
        )
    # The controller traces each batch to its request: the RequestRecord travels in the same batch.
    records.append(
        records_pb2.MetadataRecord(request=records_pb2.RequestRecord(request_id=f"req-{index}", method="CreateTopics"))
    )
    return [r.SerializeToString() for r in records]


def broker_registrations(count: int = 6, racks: int = 3) -> list[bytes]:
    """Brokers 0..count-1, broker i in rack i mod racks, registered unfenced."""
    return [
        records_pb2.MetadataRecord(
            register_broker=records_pb2.RegisterBrokerRecord(
                broker_id=i, incarnation_id=bytes([i + 1]) * 16, broker_epoch=i + 1, rack=f"rack-{i % racks}"
            )
        ).SerializeToString()
        for i in range(count)
    ]


def partition_change(index: int, partition: int, **fields: object) -> bytes:
    change = records_pb2.PartitionChangeRecord(topic_id=index.to_bytes(16, "big"), partition_id=partition)
    for name, value in fields.items():
        if name in ("isr", "replicas"):
            getattr(change, name).ids.extend(value)
        else:
            setattr(change, name, value)
    return records_pb2.MetadataRecord(partition_change=change).SerializeToString()


def fence_broker(broker_id: int) -> bytes:
    """The FenceBrokerRecord of a broker of ``broker_registrations`` (epoch id + 1)."""
    fence = records_pb2.FenceBrokerRecord(broker_id=broker_id, broker_epoch=broker_id + 1)
    return records_pb2.MetadataRecord(fence_broker=fence).SerializeToString()


def min_isr_config(topic: str, value: str | None) -> bytes:
    """A topic's ``min.insync.replicas`` ConfigRecord; ``value`` None deletes it."""
    record = records_pb2.ConfigRecord(
        resource_type=records_pb2.CONFIG_RESOURCE_TYPE_TOPIC, resource_name=topic, name="min.insync.replicas"
    )
    if value is not None:
        record.value = value
    return records_pb2.MetadataRecord(config=record).SerializeToString()


def leader_change(leader: int, epoch: int) -> list[bytes]:
    record = records_pb2.MetadataRecord(
        leader_change=records_pb2.LeaderChangeRecord(leader_id=leader, leader_epoch=epoch)
    )
    return [record.SerializeToString()]


@dataclass(frozen=True)
class LogBatch:
    base_offset: int
    data: bytes


def build_log(topics: int, *, epochs: int = 2) -> list[LogBatch]:
    """A leader's log: a LeaderChangeRecord per epoch, then topic batches spread over the epochs."""
    batches: list[LogBatch] = []
    offset = 0
    per_epoch = max(1, topics // epochs)
    index = 0
    for epoch in range(1, epochs + 1):
        registrations = [(broker_registrations(), False)] if epoch == 1 else []
        for records, control in [(leader_change(1, epoch), True), *registrations] + [
            (topic_batch(i), False) for i in range(index, min(topics, index + per_epoch) if epoch < epochs else topics)
        ]:
            data = codec.encode_batch(offset, epoch, records, 1_700_000_000_000 + offset, control=control)
            batches.append(LogBatch(offset, data))
            offset += len(records)
        index += per_epoch
    return batches


def write_node(
    root: Path, node_id: int, batches: list[LogBatch], high_watermark: int, *, segment_batches: int = 4
) -> Path:
    """One node's data dir; a new segment every ``segment_batches`` batches."""
    node_dir = root / f"node-{node_id}"
    log_dir = node_dir / LOG_DIR_NAME
    log_dir.mkdir(parents=True)
    (node_dir / META_PROPERTIES).write_text(MetaProperties(CLUSTER_ID, node_id).render())
    (node_dir / HIGH_WATERMARK_FILE).write_bytes(render_high_watermark(high_watermark))
    for start in range(0, len(batches), segment_batches):
        chunk = batches[start : start + segment_batches]
        (log_dir / f"{chunk[0].base_offset:020d}.log").write_bytes(b"".join(b.data for b in chunk))
    return node_dir


def write_quorum(root: Path, topics: int = 12, *, lagging: bool = True) -> dict[int, list[LogBatch]]:
    """Three nodes: 1 and 2 hold the whole log; node 3 (if lagging) misses the last two batches."""
    log = build_log(topics)
    end = codec.check_batch(log[-1].data).next_offset
    logs = {1: log, 2: log, 3: log[:-2] if lagging else log}
    for node_id, batches in logs.items():
        node_end = codec.check_batch(batches[-1].data).next_offset
        write_node(root, node_id, batches, high_watermark=min(end, node_end))
    return logs


def segment_files(root: Path, node_id: int) -> list[Path]:
    return sorted((root / f"node-{node_id}" / LOG_DIR_NAME).glob("*.log"))


def rewrite_batch(
    data: bytes, *, epoch: int | None = None, records: list[bytes] | None = None, fix_crc: bool = True
) -> bytes:
    """The same batch with another epoch or other records (CRC recomputed unless fix_crc=False)."""
    header = codec.check_batch(data)
    new = codec.encode_batch(
        header.base_offset,
        header.epoch if epoch is None else epoch,
        codec.split_records(data, header) if records is None else records,
        header.append_timestamp_ms,
        control=header.is_control,
    )
    if not fix_crc:
        new = new[:17] + data[17:21] + new[21:]
    return new


def replace_in_node(root: Path, node_id: int, base_offset: int, new: bytes | None) -> None:
    """Replace (or with None, remove) the batch at ``base_offset`` in node ``node_id``'s segment."""
    for path in segment_files(root, node_id):
        data = path.read_bytes()
        out: list[bytes] = []
        for batch in codec.iter_batches(data, verify_crc=False):
            if batch.base_offset == base_offset:
                if new is not None:
                    out.append(new)
            else:
                out.append(batch.data)
        path.write_bytes(b"".join(out))


def append_everywhere(root: Path, logs: dict[int, list[LogBatch]], records: list[bytes], epoch: int = 2) -> int:
    """Append one committed batch to every node (as a leader would replicate it); return its offset."""
    base = max(codec.check_batch(batches[-1].data).next_offset for batches in logs.values())
    data = codec.encode_batch(base, epoch, records, 1_800_000_000_000)
    for node_id, batches in logs.items():
        if codec.check_batch(batches[-1].data).next_offset != base:
            continue  # a lagging node does not get it
        last_segment = segment_files(root, node_id)[-1]
        last_segment.write_bytes(last_segment.read_bytes() + data)
        (root / f"node-{node_id}" / HIGH_WATERMARK_FILE).write_bytes(render_high_watermark(base + len(records)))
        logs[node_id] = [*batches, LogBatch(base, data)]
    return base
