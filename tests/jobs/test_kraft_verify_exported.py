"""A raftmeta quorum's own logs, verified as they are (raftmeta/jobs/verify.py: the Python data
source, the checks in Spark), and the same logs exported to Kafka's format (``raftmeta log export
--format kafka``), verified through the driver-side path and Spark SQL over either reader, give the
same health: the figures, the verdict and the unhealthy partitions named -- on a log with a topic's
``min.insync.replicas`` set, a fenced broker leading partitions and an ISR shrunk under the
minimum. The verify of Kafka's format is thus held to the verify of raftmeta's own, not only to
itself."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from raftmeta.jobs.health import FIGURES
from raftmeta.jobs.kafka_log_jar import reader_jar
from raftmeta.jobs.kraft_spark import verify_kraft_spark
from raftmeta.jobs.kraft_verify import verify_kraft
from raftmeta.jobs.verify import run_verify
from raftmeta.storage.kafka_export import export_kafka
from tests.jobs.quorum_logs import append_everywhere, fence_broker, min_isr_config, partition_change, write_quorum

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

COMPARED = (*FIGURES.values(), "rack_spread_violations", "fenced_brokers", "partitions", "topics")


def test_an_exported_raftmeta_log_has_the_health_raftmetas_verify_gives(spark: SparkSession, tmp_path: Path) -> None:
    reader_jar()  # fails naming `make jvm-reader` when the reader is not built
    own = tmp_path / "raftmeta"
    logs = write_quorum(own, lagging=False)
    append_everywhere(
        own,
        logs,
        [
            min_isr_config("topic-2", "3"),
            min_isr_config("topic-1", "2"),
            min_isr_config("topic-1", None),  # deleted: Kafka's default again
            fence_broker(4),
            # Both on fenced broker 4, so that isr-full-when-replicas-live (raftmeta's check) passes.
            # Replicas 2, 3, 4: under topic-2's minimum of 3.
            partition_change(2, 0, isr=[2, 3], leader=2, leader_epoch=1, partition_epoch=1),
            # Replicas 3, 4, 5: at the default minimum of 1, under-replicated.
            partition_change(3, 0, isr=[3], leader=3, leader_epoch=1, partition_epoch=1),
        ],
    )
    exported = tmp_path / "kafka"
    for node in (1, 2, 3):
        export_kafka(own / f"node-{node}", exported / f"node-{node}")

    reference = run_verify(spark, str(own))
    assert reference.passed, reference.checks
    health = reference.health
    assert health["verdict"] == "FAILED"
    why = {(p["topic"], p["partition"]): p["why"] for p in health["unhealthy_partitions"]["listed"]}
    assert why[("topic-2", 0)] == ["under_min_isr", "under_replicated"]
    assert why[("topic-3", 0)] == ["under_replicated"]
    assert sum(w == ["leader_not_live"] for w in why.values()) == 6  # broker 4 leads six partitions
    want = {k: reference.figures[k] for k in COMPARED}

    driver = verify_kraft(exported)
    assert driver.passed, driver.checks
    assert ({k: driver.figures[k] for k in COMPARED}, driver.health) == (want, health)
    for reader in ("jvm", "python"):
        result = verify_kraft_spark(spark, exported, reader)
        assert result.passed, (reader, result.checks)
        assert ({k: result.figures[k] for k in COMPARED}, result.health) == (want, health), reader
