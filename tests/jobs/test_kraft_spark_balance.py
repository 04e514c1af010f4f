"""The placement balance and rack spread of a KRaft log, computed in Spark SQL over the JVM reader's
rows (raftmeta/jobs/kraft_spark.py), equal the driver-side replay's (raftmeta/jobs/kraft_verify.py)
figure for figure, on a log with the awkward cases: racks of two brokers, one of three, one with
none, a fenced broker, an unregistered one, a rack spread violation, a leaderless partition, a
leader away from its preferred replica, an ISR short of the replicas, a reassignment in flight and
a deleted topic."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from raftmeta.jobs.kafka_log_jar import reader_jar
from raftmeta.jobs.kraft_spark import verify_kraft_spark
from raftmeta.jobs.kraft_verify import verify_kraft
from raftmeta.records.kafka.frames import LogRecord, metadata_record
from raftmeta.records.kafka.schema import Uuid
from tests.jobs.kraft_quorums import write_kraft_quorum

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ORDERS, GONE, LOGS = (Uuid(bytes([n]) * 16) for n in (1, 2, 3))
RACKS = {0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: None, 6: "c"}


def _partition(topic: Uuid, partition: int, replicas: list[int], isr: list[int], leader: int) -> LogRecord:
    return metadata_record(
        "PartitionRecord", 2, TopicId=topic, PartitionId=partition, Replicas=tuple(replicas), Isr=tuple(isr),
        Leader=leader, LeaderEpoch=0, PartitionEpoch=0,
    )  # fmt: skip


def _change(topic: Uuid, partition: int, **fields: object) -> LogRecord:
    return metadata_record("PartitionChangeRecord", 2, TopicId=topic, PartitionId=partition, **fields)


BATCHES: list[list[LogRecord]] = [
    [
        metadata_record("RegisterBrokerRecord", 3, BrokerId=b, BrokerEpoch=1, Fenced=False, Rack=rack)
        for b, rack in RACKS.items()
    ],
    [
        metadata_record("TopicRecord", Name="orders", TopicId=ORDERS),
        _partition(ORDERS, 0, [0, 2, 4], [0, 2, 4], 0),
        _partition(ORDERS, 1, [0, 1, 2], [0, 1, 2], 1),  # racks a, a, b: 2 of the 3 it could span
        _partition(ORDERS, 2, [2, 3, 4], [2, 3], 2),  # racks b, b, c; an ISR short of the replicas
        _partition(ORDERS, 3, [4, 5, 0], [4], -1),  # leaderless
    ],
    [
        metadata_record("TopicRecord", Name="gone", TopicId=GONE),
        _partition(GONE, 0, [1, 3, 5], [1, 3, 5], 1),
        _partition(GONE, 1, [3, 4, 5], [3, 4, 5], 3),
    ],
    [metadata_record("TopicRecord", Name="logs", TopicId=LOGS), _partition(LOGS, 0, [1, 3, 5], [1, 3, 5], 3)],
    [
        _change(ORDERS, 0, Leader=2),  # led away from its preferred replica
        _change(ORDERS, 1, Replicas=(0, 1, 2, 3), AddingReplicas=(3,)),  # a reassignment in flight
        metadata_record("RemoveTopicRecord", TopicId=GONE),
        metadata_record("BrokerRegistrationChangeRecord", 2, BrokerId=5, BrokerEpoch=1, Fenced=1),
        metadata_record("UnregisterBrokerRecord", BrokerId=6, BrokerEpoch=1),
    ],
]


def test_the_balance_in_spark_sql_equals_the_driver_replays(spark: SparkSession, tmp_path: Path) -> None:
    reader_jar()  # fails naming `make jvm-reader` when the reader is not built
    quorum = write_kraft_quorum(tmp_path, BATCHES)
    expected = verify_kraft(quorum)
    assert expected.passed, expected.checks
    figures = expected.figures
    # The case by hand, so that equal figures are the right ones: broker 6 unregistered, 5 fenced.
    assert figures["replicas_per_broker"] == {"0": 3, "1": 2, "2": 3, "3": 3, "4": 3, "5": 2}
    assert figures["preferred_leaders_per_broker"] == {"0": 2, "1": 1, "2": 1, "3": 0, "4": 1, "5": 0}
    assert figures["leaders_per_broker"] == {"0": 0, "1": 1, "2": 2, "3": 1, "4": 0, "5": 0}
    assert (figures["partitions"], figures["topics"], figures["brokers"]) == (5, 2, 6)
    assert (figures["leaderless_partitions"], figures["rack_spread_violations"]) == (1, 2)
    assert figures["isr_size_counts"] == {"1/3": 1, "2/3": 1, "3/3": 2, "3/4": 1}
    # Kafka's rule (kafka-topics.sh): the replica being added is out of the factor, so the
    # reassignment in flight (ISR 3 of replicas 0-3) is not under-replicated.
    assert (figures["under_replicated_partitions"], figures["fenced_brokers"]) == (2, 1)
    for reader in ("jvm", "python"):
        result = verify_kraft_spark(spark, quorum, reader)
        assert result.passed, result.checks
        assert {k: v for k, v in result.figures.items() if k != "reader"} == figures, reader
        assert result.health == expected.health, reader
