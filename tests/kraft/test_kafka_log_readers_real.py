"""The JVM reader (Kafka's own decoder inside Spark) and raftmeta's Python reader give the same
rows, row for row, on every node's metadata log of a real KRaft quorum worked through topic
creation, a config change, a broker restart, a reassignment and a topic deletion, snapshots
included."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from raftmeta.kraft.cluster import KraftCluster
from tests.jobs.kafka_log_compare import rows_both_ways

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.kraft


def test_a_real_quorums_logs_read_the_same_both_ways(worked_kraft_cluster: KraftCluster, spark: SparkSession) -> None:
    log_dirs = worked_kraft_cluster.log_dirs()
    rows = rows_both_ways(spark, sorted(str(d) for d in log_dirs.values()))
    assert {r["node"] for r in rows} == set(log_dirs)
    assert {r["file"] for r in rows if r["file"].endswith(".checkpoint")}, "snapshots are read too"
    # Damage only where a stopped node's last segment may end inside a batch; every batch's CRC holds.
    assert all(r["crc_ok"] for r in rows if r["damage"] is None)
    types = {r["record_type"] for r in rows}
    assert {"TopicRecord", "PartitionRecord", "PartitionChangeRecord", "RemoveTopicRecord", "ConfigRecord"} <= types
