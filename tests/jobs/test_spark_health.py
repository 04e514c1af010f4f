"""Partition health in the verify job: the Spark expressions give exactly what
``raftmeta.api.health.classify`` gives on the same partitions, ``min.insync.replicas`` comes from the
topic's own ConfigRecords, and verify reports the figures and fails on a partition left
under-replicated with every replica's broker live."""

from __future__ import annotations

import random
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from raftmeta.api.health import PartitionHealth, classify
from raftmeta.jobs.health import CHECK_NAME, FLAGS, health_columns, newest_topics, topic_min_isr
from raftmeta.jobs.verify import run_verify, write_outputs
from tests.jobs.quorum_logs import append_everywhere, fence_broker, min_isr_config, partition_change, write_quorum

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

LIVE = {0, 1, 2, 4}
Row = tuple[list[int] | None, list[int] | None, int | None, list[int] | None, int]


def sample_partitions(count: int, seed: int = 18) -> list[Row]:
    """(replicas, isr, leader, adding_replicas, min_isr): the corner cases, then random ones over
    brokers 0..5 (3 and 5 are not live), nulls, empty lists and duplicates included."""
    rows: list[Row] = [
        ([0, 1, 2], [0, 1, 2], 0, None, 1),
        ([0, 1, 2], [1, 2], 1, [], 2),
        ([3, 1], [3], -1, None, 1),
        ([], [], -1, None, 1),
        (None, None, None, None, 1),
        ([4, 0, 1, 2], [0, 1, 2], 0, [4], 3),
        ([4, 0, 1, 2], [0, 1], 0, [4], 2),
        ([1, 1, 2], [1, 2], 1, None, 2),
        ([5, 0], [5, 0], 5, None, 2),
    ]
    rng = random.Random(seed)
    for _ in range(count):
        replicas = rng.sample(range(6), rng.randint(1, 4))
        isr = [b for b in replicas if rng.random() < 0.7]
        leader = rng.choice([*isr, -1]) if isr else -1
        adding = [b for b in replicas[:-1] if rng.random() < 0.15] if rng.random() < 0.3 else None
        rows.append((replicas, isr, leader, adding, rng.randint(1, 4)))
    return rows


def test_the_spark_rules_equal_the_pure_function(spark: SparkSession) -> None:
    rows = sample_partitions(400)
    frame = spark.createDataFrame(
        [(i, *row) for i, row in enumerate(rows)],
        "id int, replicas array<int>, isr array<int>, leader int, adding_replicas array<int>, min_isr int",
    )
    got = {r["id"]: tuple(r[f] for f in FLAGS) for r in frame.select("id", *health_columns(LIVE)).collect()}
    for i, (replicas, isr, leader, adding, min_isr) in enumerate(rows):
        expected = classify(replicas or [], isr or [], -1 if leader is None else leader, LIVE, min_isr, adding or [])
        assert PartitionHealth(*got[i]) == expected, rows[i]
    assert any(PartitionHealth(*flags).stuck_under_replicated for flags in got.values()), "the sample covers it"


def test_min_isr_is_the_topics_newest_config_written_after_its_creation(spark: SparkSession) -> None:
    topics = newest_topics(
        spark.createDataFrame(
            [(10, "topic", "a", True), (100, "topic", "a", True)]  # a was deleted and created again
            + [(10, "topic", name, True) for name in "bcd"]
            + [(200, "topic", "d", False)],  # a damaged batch does not count
            "offset bigint, record_type string, topic_name string, crc_ok boolean",
        )
    )
    configs = spark.createDataFrame(
        [
            (50, "config", "a", "min.insync.replicas", "3", True),  # an earlier topic named a
            (150, "config", "a", "min.insync.replicas", "2", True),
            (20, "config", "b", "min.insync.replicas", "2", True),
            (30, "config", "b", "min.insync.replicas", None, True),  # deleted: the default again
            (20, "config", "c", "retention.ms", "5", True),
            (40, "config", "d", "min.insync.replicas", "2", True),
            (41, "config", "d", "min.insync.replicas", "4", False),  # a damaged batch does not count
        ],
        "offset bigint, record_type string, config_resource string, config_name string, config_value string, "
        "crc_ok boolean",
    )
    assert {r["topic_name"]: r["min_isr"] for r in topic_min_isr(topics, configs).collect()} == {"a": 2, "d": 2}


def test_verify_reports_health_and_fails_on_an_isr_that_should_have_grown(spark: SparkSession, tmp_path: Path) -> None:
    logs = write_quorum(tmp_path, topics=12, lagging=False)
    # topic-i partition p: replicas [(i + p + k) % 6 for k in 0..2], the first leads; brokers 0..5 unfenced.
    append_everywhere(
        tmp_path,
        logs,
        [min_isr_config("topic-2", "3"), min_isr_config("topic-3", "2"), min_isr_config("topic-3", None)],
    )
    # Broker 1 dropped out of topic-1-0's ISR and never came back although it is registered and unfenced.
    append_everywhere(tmp_path, logs, [partition_change(1, 0, leader=2, isr=[2, 3], leader_epoch=1, partition_epoch=1)])
    # topic-4-1 lost its leader (its ISR kept): offline.
    append_everywhere(tmp_path, logs, [partition_change(4, 1, leader=-1, leader_epoch=1, partition_epoch=1)])
    result = run_verify(spark, str(tmp_path))
    failed = {c.name: c.detail for c in result.checks if not c.passed}
    assert list(failed) == [CHECK_NAME]
    assert failed[CHECK_NAME] == (
        "topic-1-0 is under-replicated at the end of the log (isr [2, 3], replicas [1, 2, 3], leader 2) although "
        "every replica's broker is registered and unfenced"
    )
    figures = result.figures
    assert figures["under_replicated_partitions"] == 1
    assert figures["under_replicated_with_live_replicas"] == 1
    assert figures["offline_partitions"] == 1
    assert figures["unavailable_partitions"] == 1
    assert figures["under_min_isr_partitions"] == 1, "the leaderless one (Kafka counts it)"
    assert figures["at_min_isr_partitions"] == 3, "topic-2 (3 of 3 in sync); topic-3's config was deleted"
    assert figures["preferred_leader_away_partitions"] == 2
    paths = write_outputs(result, str(tmp_path), tmp_path / "report")
    assert paths["health_png"].stat().st_size > 1000
    assert paths["health_png"].name in paths["html"].read_text()


def test_an_isr_shrunk_by_a_fenced_broker_passes(spark: SparkSession, tmp_path: Path) -> None:
    logs = write_quorum(tmp_path, topics=4, lagging=False)
    change = partition_change(1, 0, leader=2, isr=[2, 3], leader_epoch=1, partition_epoch=1)
    append_everywhere(tmp_path, logs, [change, fence_broker(1)])
    result = run_verify(spark, str(tmp_path))
    assert result.passed, [c for c in result.checks if not c.passed]
    assert result.figures["under_replicated_partitions"] == 1
    assert result.figures["under_replicated_with_live_replicas"] == 0
