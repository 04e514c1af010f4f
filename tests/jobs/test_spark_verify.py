"""The Spark side of verify: the ``raftmeta`` data source reads typed rows, and Spark's consistency
facts equal the single-process reference's on clean and doctored logs (a differential test)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from raftmeta.jobs.consistency import facts_to_checks, local_facts, spark_facts
from raftmeta.records import codec
from tests.jobs.quorum_logs import replace_in_node, rewrite_batch, write_quorum

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark


def test_record_level_rows_are_typed_and_complete(spark: SparkSession, tmp_path: Path) -> None:
    logs = write_quorum(tmp_path, topics=6)
    df = spark.read.format("raftmeta").load(str(tmp_path))
    expected = sum(codec.check_batch(b.data).record_count for node in logs.values() for b in node)
    assert df.count() == expected
    topics = df.where("node_id = 1 AND record_type = 'topic'").orderBy("offset").select("topic_name").collect()
    assert [r.topic_name for r in topics] == [f"topic-{i}" for i in range(6)]
    partition = df.where("node_id = 2 AND record_type = 'partition'").orderBy("offset").first()
    assert partition is not None
    assert partition.replicas == partition.isr
    assert partition.leader == partition.replicas[0]
    assert df.where("NOT crc_ok").count() == 0
    # Node 1 has committed only up to the start of its fourth batch: the rest is uncommitted.
    boundary = logs[1][3].base_offset
    (tmp_path / "node-1" / "high-watermark-checkpoint").write_text(f'{{"version": 1, "high_watermark": {boundary}}}')
    committed = spark.read.format("raftmeta").option("committed", "true").load(str(tmp_path))
    last = committed.where("node_id = 1").agg({"offset": "max"}).first()
    assert last is not None
    assert last[0] == boundary - 1
    assert committed.where("node_id = 2").count() == df.where("node_id = 2").count()


def test_batch_level_rows_have_equal_hashes_across_nodes(spark: SparkSession, tmp_path: Path) -> None:
    write_quorum(tmp_path, topics=6, lagging=False)
    batches = spark.read.format("raftmeta").option("level", "batches").load(str(tmp_path))
    per_offset = batches.groupBy("base_offset").agg({"hash": "count"}).collect()
    assert all(row[1] == 3 for row in per_offset)
    assert batches.select("hash").distinct().count() == len(per_offset)
    assert batches.where("last_offset != next_offset - 1").count() == 0


def doctor(kind: str, root: Path) -> None:
    logs = write_quorum(root)
    if kind == "clean":
        return
    if kind == "changed-record":
        victim = logs[2][3]
        header = codec.check_batch(victim.data)
        records = codec.split_records(victim.data, header)
        records[1] = records[1][:-1] + bytes([records[1][-1] ^ 1])
        replace_in_node(root, 2, victim.base_offset, rewrite_batch(victim.data, records=records))
    elif kind == "missing-offset":
        replace_in_node(root, 1, logs[1][5].base_offset, None)
    elif kind == "epoch-backwards":
        last = logs[1][-1]
        replace_in_node(root, 1, last.base_offset, rewrite_batch(last.data, epoch=1))
    elif kind == "crc-flip":
        victim = logs[3][2]
        replace_in_node(root, 3, victim.base_offset, victim.data[:-1] + bytes([victim.data[-1] ^ 0x40]))
    else:
        raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["clean", "changed-record", "missing-offset", "epoch-backwards", "crc-flip"])
def test_spark_and_reference_agree(spark: SparkSession, tmp_path: Path, kind: str) -> None:
    root = tmp_path / kind
    doctor(kind, root)
    reference = facts_to_checks(local_facts(str(root)))
    from_spark = facts_to_checks(spark_facts(spark, str(root)))
    assert from_spark == reference
    # Files split into tasks of a few batches each: damage must land in exactly one task.
    assert facts_to_checks(spark_facts(spark, str(root), split_bytes=300)) == reference
    assert all(c.passed for c in reference) == (kind == "clean")
    shutil.rmtree(root)
