"""Replaying the committed metadata in Spark: the final state, and invariant 7 on every
partition state along the log (a bad intermediate state fails even if a later one is fine)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from raftmeta.jobs.state import NodeReplay, state_checks
from tests.jobs.quorum_logs import append_everywhere, partition_change, write_quorum

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark


def node_records(spark: SparkSession, root: Path, node_id: int = 1) -> NodeReplay:
    return NodeReplay(spark, str(root / f"node-{node_id}"))


def test_clean_log_passes_and_gives_the_final_state(spark: SparkSession, tmp_path: Path) -> None:
    logs = write_quorum(tmp_path, topics=4, lagging=False)
    # Broker 1 fails: topic-1 partition 0 (replicas [1, 2, 3]) moves its leadership to 2.
    append_everywhere(tmp_path, logs, [partition_change(1, 0, leader=2, isr=[2, 3], leader_epoch=1, partition_epoch=1)])
    checks, state = state_checks(node_records(spark, tmp_path))
    assert all(c.passed for c in checks), checks
    assert state.topic_names() == ["topic-0", "topic-1", "topic-2", "topic-3"]
    assert state.partition("topic-1", 0) == ([1, 2, 3], [2, 3], 2)
    assert state.partition("topic-0", 2) == ([2, 3, 4], [2, 3, 4], 2)
    assert sorted(state.brokers) == [0, 1, 2, 3, 4, 5]
    assert state.brokers[4] == ("rack-1", None, False)


def test_bad_intermediate_states_fail_naming_partition_and_offset(spark: SparkSession, tmp_path: Path) -> None:
    logs = write_quorum(tmp_path, topics=4, lagging=False)
    bad = append_everywhere(
        tmp_path,
        logs,
        [
            partition_change(0, 0, replicas=[0, 0, 2], leader_epoch=0, partition_epoch=1),
            partition_change(1, 1, leader=5, leader_epoch=1, partition_epoch=1),
            partition_change(2, 2, leader=0, leader_epoch=0, partition_epoch=1),
        ],
    )
    # A later change repairs topic-0 partition 0; the bad state in between must still be reported.
    append_everywhere(tmp_path, logs, [partition_change(0, 0, replicas=[0, 1, 2], leader_epoch=0, partition_epoch=2)])
    checks, _ = state_checks(node_records(spark, tmp_path))
    verdict = {c.name: c for c in checks}
    assert verdict["partitions-of-known-topics"].passed
    detail = verdict["partition-states-valid"].detail
    assert not verdict["partition-states-valid"].passed
    assert f"topic-0-0 at offset {bad}: duplicate replica" in detail
    assert f"topic-1-1 at offset {bad + 1}: leader outside the ISR" in detail
    assert f"topic-2-2 at offset {bad + 2}: leader changed without a new leader epoch" in detail
    assert detail.count("topic-0-0") == 1, "the repaired state at the next offset is valid"


def test_replica_outside_the_topics_pool_fails(spark: SparkSession, tmp_path: Path) -> None:
    from raftmeta.v1 import records_pb2

    logs = write_quorum(tmp_path, topics=2, lagging=False)
    gold = [
        records_pb2.MetadataRecord(
            register_broker=records_pb2.RegisterBrokerRecord(
                broker_id=b, incarnation_id=bytes([b]) * 16, broker_epoch=b, rack=f"rack-{b % 2}", pool="gold"
            )
        )
        for b in (10, 11)
    ]
    topic_id = (77).to_bytes(16, "big")
    topic = records_pb2.MetadataRecord(
        topic=records_pb2.TopicRecord(name="vault", topic_id=topic_id, broker_pool="gold")
    )
    partitions = [
        records_pb2.MetadataRecord(
            partition=records_pb2.PartitionRecord(topic_id=topic_id, partition_id=p, replicas=r, isr=r, leader=r[0])
        )
        for p, r in enumerate([[10, 11], [11, 3]])
    ]
    append_everywhere(tmp_path, logs, [r.SerializeToString() for r in gold])
    offset = append_everywhere(tmp_path, logs, [r.SerializeToString() for r in (topic, *partitions)])
    checks, state = state_checks(node_records(spark, tmp_path))
    verdict = {c.name: c for c in checks}
    assert not verdict["partition-states-valid"].passed
    detail = verdict["partition-states-valid"].detail
    assert f"vault-1 at offset {offset + 2}: replica outside the topic's broker pool" in detail
    assert "vault-0" not in detail
    assert state.brokers[10] == ("rack-0", "gold", False)
