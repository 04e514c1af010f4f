"""The JVM reader (Kafka's own decoder inside Spark) and raftmeta's Python reader give the same
rows, row for row, on the committed real KRaft log on three controllers, and on a doctored copy:
a flipped byte under the CRC, a dropped batch, a record whose frame does not decode, a torn tail
and a batch length that cannot be trusted."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from raftmeta.jobs.kafka_log_jar import reader_jar
from raftmeta.jobs.kafka_log_rows import COLUMN_NAMES, read_log_rows
from raftmeta.records.kafka.batch import batch_size, encode_batch, iter_batches
from raftmeta.records.kafka.frames import metadata_record, new_batch
from tests.jobs.kafka_log_compare import rows_both_ways
from tests.jobs.test_kraft_verify import SEGMENT, SNAPSHOT, TOPIC_T1, quorum, segment_of  # noqa: F401 (fixture)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SEGMENT_RECORDS = 157  # offsets 0-156 (tests/records/kafka/data/README.md)


def log_dirs(data_dir: Path) -> list[str]:
    return sorted(str(p) for p in data_dir.glob("controller-*/data/__cluster_metadata-0"))


def test_the_committed_sample_reads_the_same_both_ways(spark: SparkSession, quorum: Path) -> None:  # noqa: F811
    rows = rows_both_ways(spark, log_dirs(quorum))
    segment = [r for r in rows if r["file"] == SEGMENT]
    assert len(segment) == 3 * SEGMENT_RECORDS
    assert all(r["crc_ok"] and r["damage"] is None for r in rows)
    types = {r["record_type"] for r in rows}
    assert {"PartitionRecord", "PartitionChangeRecord", "RegisterBrokerRecord", "LeaderChangeMessage"} <= types
    assert {"VotersRecord", "SnapshotHeaderRecord", "SnapshotFooterRecord", "RemoveTopicRecord"} <= types
    partitions = [r for r in segment if r["record_type"] == "PartitionRecord" and r["node"] == 3001]
    assert all(r["replicas"] and r["isr"] is not None and r["partition_epoch"] is not None for r in partitions)


def test_a_doctored_copy_reads_the_same_both_ways(spark: SparkSession, quorum: Path) -> None:  # noqa: F811
    # 3002: one flipped byte under the CRC (the batch at byte 292, offsets 3-11: its max timestamp).
    flipped = segment_of(quorum, 3002)
    data = bytearray(flipped.read_bytes())
    data[292 + 40] ^= 0x01
    flipped.write_bytes(bytes(data))
    # 3003: the sixth batch dropped.
    dropped = segment_of(quorum, 3003)
    data = bytearray(dropped.read_bytes())
    position, sixth = list(iter_batches(bytes(data)))[5]
    del data[position : position + batch_size(bytes(data), position)]
    dropped.write_bytes(bytes(data))
    # 3001: the frame version of the first record of the first metadata batch made 5 (Kafka reads 1
    # only), and the last batch cut short (a torn tail).
    torn = segment_of(quorum, 3001)
    data = bytearray(torn.read_bytes())
    metadata_at, batch = next((p, b) for p, b in iter_batches(bytes(data)) if not b.is_control)
    value = batch.records[0].value
    assert value is not None
    frame_at = bytes(data).index(value, metadata_at + 61)
    data[frame_at] = 5
    torn.write_bytes(bytes(data[:-10]))
    # 3002's snapshot: its second batch's length made larger than any batch may be.
    snapshot = quorum / "controller-3002" / "data" / "__cluster_metadata-0" / SNAPSHOT
    data = bytearray(snapshot.read_bytes())
    second_at = list(iter_batches(bytes(data)))[1][0]
    data[second_at + 8 : second_at + 12] = (0x7FFFFFF0).to_bytes(4, "big")
    snapshot.write_bytes(bytes(data))

    rows = rows_both_ways(spark, log_dirs(quorum))
    by_node = {node: [r for r in rows if r["node"] == node and r["file"] == SEGMENT] for node in (3001, 3002, 3003)}
    assert {r["base_offset"] for r in by_node[3002] if r["crc_ok"] is False} == {3}
    assert sixth.base_offset not in {r["base_offset"] for r in by_node[3003]}
    record_damage = [r for r in by_node[3001] if r["damage"] == "record"]
    assert [(r["base_offset"], r["offset"]) for r in record_damage] == [(batch.base_offset, batch.base_offset)]
    assert by_node[3001][-1]["damage"] == "truncated"
    unreadable = [r for r in rows if r["file"] == SNAPSHOT and r["damage"] is not None]
    assert [(r["node"], r["position"], r["damage"]) for r in unreadable] == [(3002, second_at, "unreadable")]


def test_fields_a_records_version_lacks_read_the_same_both_ways(spark: SparkSession, quorum: Path) -> None:  # noqa: F811
    # Version 0 of PartitionRecord and PartitionChangeRecord has no ELR: null both ways (Kafka's default).
    records = [
        metadata_record("PartitionRecord", 0, TopicId=TOPIC_T1, PartitionId=7, Replicas=(0, 1), Isr=(0, 1), Leader=0),
        metadata_record("PartitionChangeRecord", 0, TopicId=TOPIC_T1, PartitionId=7, Isr=(0,)),
    ]
    segment = segment_of(quorum, 3001)
    segment.write_bytes(segment.read_bytes() + encode_batch(new_batch(157, 1, records, 1_800_000_000_000)))
    rows = rows_both_ways(spark, log_dirs(quorum))
    added = [r for r in rows if r["node"] == 3001 and r["file"] == SEGMENT and r["base_offset"] == 157]
    assert [(r["record_type"], r["record_version"], r["elr"], r["isr"]) for r in added] == [
        ("PartitionRecord", 0, None, [0, 1]),
        ("PartitionChangeRecord", 0, None, [0]),
    ]


def test_a_query_gets_only_its_columns_from_the_reader(spark: SparkSession, quorum: Path) -> None:  # noqa: F811
    """Spark pushes the columns a query reads into the JVM reader's scan (the scan's output is
    those columns alone), so that the others are never put in its rows."""
    reader_jar()
    rows = read_log_rows(spark, log_dirs(quorum), "jvm").select("offset", "record_type")
    plan = rows._jdf.queryExecution().executedPlan().toString()  # py4j: the plan has no public handle
    scan = next(line for line in plan.splitlines() if "BatchScan" in line)
    assert "offset" in scan and "record_type" in scan, scan
    assert not any(f"{name}#" in scan for name in COLUMN_NAMES if name not in ("offset", "record_type")), scan
