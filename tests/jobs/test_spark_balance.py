"""Balance figures are aggregated in Spark (the driver never holds a row per partition); they must
equal what placement's own ``balance_report`` says about the same final assignment, fetched here
whole because the log is tiny. The log has the awkward cases: a broker without a rack, an
unregistered broker, a replica on an unknown broker, a leaderless partition, partitions short
of racks, a deleted topic and a leader moved by a change record."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from placement import UsableBroker
from placement.metrics import Spread, balance_report
from raftmeta.jobs.verify import run_verify
from raftmeta.v1 import records_pb2 as pb
from tests.jobs.quorum_logs import append_everywhere, fence_broker, partition_change, write_quorum

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark


def register(broker: int, rack: str | None) -> bytes:
    record = pb.RegisterBrokerRecord(broker_id=broker, incarnation_id=bytes([broker + 1]) * 16, broker_epoch=broker + 1)
    if rack is not None:
        record.rack = rack
    return pb.MetadataRecord(register_broker=record).SerializeToString()


def topic(index: int, name: str, assignments: list[tuple[list[int], list[int], int]]) -> list[bytes]:
    topic_id = index.to_bytes(16, "big")
    records = [pb.MetadataRecord(topic=pb.TopicRecord(name=name, topic_id=topic_id))]
    for p, (replicas, isr, leader) in enumerate(assignments):
        partition = pb.PartitionRecord(topic_id=topic_id, partition_id=p, replicas=replicas, isr=isr, leader=leader)
        records.append(pb.MetadataRecord(partition=partition))
    return [r.SerializeToString() for r in records]


def reference_figures(final: list[Any], brokers: dict[int, tuple[str | None, str | None, bool]]) -> dict[str, Any]:
    """The figures as placement computes them from the whole final assignment."""
    usable = [
        UsableBroker(b, rack=rack, fenced=fenced, pool=pool) for b, (rack, pool, fenced) in sorted(brokers.items())
    ]
    by_topic: dict[str, dict[int, list[int]]] = {}
    for row in final:
        by_topic.setdefault(row["topic_name"], {})[row["partition_id"]] = list(row["replicas"])
    report = balance_report({t: [parts[p] for p in sorted(parts)] for t, parts in sorted(by_topic.items())}, usable)
    current = {b.id: 0 for b in usable}
    for row in final:
        if row["leader"] >= 0:
            current[row["leader"]] = current.get(row["leader"], 0) + 1
    return {
        "topics": len(by_topic),
        "partitions": report.partitions,
        "brokers": len(usable),
        "replica_skew": round(report.replica_skew, 6),
        "leader_skew": round(report.leader_skew, 6),
        "current_leader_skew": round(Spread.of(current).skew, 6),
        "leaderless_partitions": sum(1 for row in final if row["leader"] < 0),
        "rack_spread_violations": report.rack_spread_violations,
        "replicas_per_broker": {str(k): v for k, v in sorted(report.replicas.per_broker.items())},
        "preferred_leaders_per_broker": {str(k): v for k, v in sorted(report.leaders.per_broker.items())},
        "leaders_per_broker": {str(k): v for k, v in sorted(current.items())},
    }


def test_figures_equal_placements_report_on_the_final_assignment(spark: SparkSession, tmp_path: Path) -> None:
    logs = write_quorum(tmp_path, topics=4, lagging=False)  # brokers 0-5 in rack-0..rack-2
    append_everywhere(tmp_path, logs, [register(6, None), register(7, "rack-0")])
    unregister = pb.MetadataRecord(unregister_broker=pb.UnregisterBrokerRecord(broker_id=7, broker_epoch=8))
    append_everywhere(tmp_path, logs, [unregister.SerializeToString()])
    skewed = [
        ([0, 3, 6], [0, 3, 6], 0),  # racks 0, 0 and none: 2 of min(3, 4) racks
        ([1, 4], [1, 4], 1),  # one rack for two replicas
        ([2, 5, 9], [2], -1),  # broker 9 never registered (a rack of its own: none); no leader
        ([6, 0, 1], [6, 0, 1], 6),
    ]
    append_everywhere(tmp_path, logs, topic(20, "skewed", skewed))
    removal = pb.MetadataRecord(remove_topic=pb.RemoveTopicRecord(topic_id=(3).to_bytes(16, "big")))
    append_everywhere(tmp_path, logs, [removal.SerializeToString()])
    # Broker 1 is fenced (an ISR short of a live broker would fail isr-full-when-replicas-live).
    change = partition_change(1, 0, leader=2, isr=[2, 3], leader_epoch=1, partition_epoch=1)
    append_everywhere(tmp_path, logs, [change, fence_broker(1)])

    result = run_verify(spark, str(tmp_path))
    failed = {c.name: c.detail for c in result.checks if not c.passed}
    assert list(failed) == ["partition-states-valid"], failed
    assert "skewed-2 at offset" in failed["partition-states-valid"]
    assert "replica not a registered broker" in failed["partition-states-valid"]

    final = result.state.final.collect()
    assert len(final) == 3 * 3 + 4, "topic-3 is gone"
    expected = reference_figures(final, result.state.brokers)
    assert {k: result.figures[k] for k in expected} == expected
    # The awkward cases did happen.
    assert (expected["leaderless_partitions"], expected["rack_spread_violations"]) == (1, 3)
    assert "9" in expected["replicas_per_broker"] and "7" not in expected["replicas_per_broker"]
    assert result.state.partition("topic-1", 0) == ([1, 2, 3], [2, 3], 2)
    assert result.state.partition("topic-3", 0) is None
    assert result.state.topic_names() == ["skewed", "topic-0", "topic-1", "topic-2"]


def test_split_files_read_the_same_rows(spark: SparkSession, tmp_path: Path) -> None:
    write_quorum(tmp_path, topics=12)
    for level in ("records", "batches"):
        whole = spark.read.format("raftmeta").option("level", level).load(str(tmp_path))
        split = spark.read.format("raftmeta").option("level", level).option("split_bytes", "200").load(str(tmp_path))
        assert split.rdd.getNumPartitions() > whole.rdd.getNumPartitions()
        assert sorted(split.collect()) == sorted(whole.collect())
    narrow = (
        spark.read.format("raftmeta")
        .option("columns", "offset,record_type,topic_name")
        .option("record_types", "topic")
        .load(str(tmp_path / "node-1"))
    )
    assert narrow.columns == ["offset", "record_type", "topic_name"]
    assert sorted(r["topic_name"] for r in narrow.collect()) == sorted(f"topic-{i}" for i in range(12))
