"""The health of a KRaft log's partitions at its end -- each topic at its ``min.insync.replicas``
(its own ConfigRecord, else the cluster's default, else Kafka's 1) -- is the same through the
driver-side replay (raftmeta/jobs/kraft_verify.py) and Spark SQL over either reader's rows
(raftmeta/jobs/kraft_spark.py): the health flags' figures, the verdict and the unhealthy
partitions named, row for row. The log has the cases the rule turns on: a topic's own minimum, the
cluster default set, a topic config deleted, one no plain integer, a topic deleted and created
again under its name (its old config gone with it), a leader on a fenced broker, a leaderless
partition, a reassignment in flight."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from raftmeta.jobs.kafka_log_jar import reader_jar
from raftmeta.jobs.kraft_spark import verify_kraft_spark
from raftmeta.jobs.kraft_verify import BROKER_RESOURCE, TOPIC_RESOURCE, verify_kraft
from raftmeta.records.kafka.frames import LogRecord, metadata_record
from raftmeta.records.kafka.schema import Uuid
from tests.jobs.kraft_quorums import write_kraft_quorum

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

STRICT, LOOSE, DELETED, ODD, AGAIN, FIRST = (Uuid(bytes([n]) * 16) for n in range(1, 7))
RACKS = {0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "c"}


def _partition(topic: Uuid, partition: int, replicas: list[int], isr: list[int], leader: int) -> LogRecord:
    return metadata_record(
        "PartitionRecord", 2, TopicId=topic, PartitionId=partition, Replicas=tuple(replicas), Isr=tuple(isr),
        Leader=leader, LeaderEpoch=0, PartitionEpoch=0,
    )  # fmt: skip


def _min_isr(topic: str, value: str | None) -> LogRecord:
    resource = TOPIC_RESOURCE if topic else BROKER_RESOURCE  # "": the cluster's default
    return metadata_record(
        "ConfigRecord", ResourceType=resource, ResourceName=topic, Name="min.insync.replicas", Value=value
    )


BATCHES: list[list[LogRecord]] = [
    [
        metadata_record("RegisterBrokerRecord", 3, BrokerId=b, BrokerEpoch=1, Fenced=False, Rack=rack)
        for b, rack in RACKS.items()
    ],
    [
        metadata_record("TopicRecord", Name="strict", TopicId=STRICT),
        _min_isr("strict", "3"),
        _partition(STRICT, 0, [0, 2, 4], [0, 2, 4], 0),  # at its minimum
        _partition(STRICT, 1, [1, 3, 5], [1, 3], 1),  # under its own minimum of 3, not the default's
        _partition(STRICT, 2, [2, 4, 0], [2, 4, 0], 2),
    ],
    [
        metadata_record("TopicRecord", Name="loose", TopicId=LOOSE),
        _min_isr("loose", "1"),  # its own 1 beats the cluster's 2 set below
        _partition(LOOSE, 0, [0, 2, 4], [0], 0),
    ],
    [
        metadata_record("TopicRecord", Name="deleted", TopicId=DELETED),
        _min_isr("deleted", "1"),
        _partition(DELETED, 0, [1, 3, 5], [1], 1),
    ],
    [
        metadata_record("TopicRecord", Name="odd", TopicId=ODD),
        _min_isr("odd", "1"),
        _partition(ODD, 0, [1, 2, 4], [1], 1),
        _min_isr("odd", " 1"),  # no plain integer (Kafka's ConfigDef never writes one): as if unset
    ],
    [
        metadata_record("TopicRecord", Name="again", TopicId=FIRST),
        _min_isr("again", "1"),
        _partition(FIRST, 0, [0, 3, 4], [0], 0),
        metadata_record("RemoveTopicRecord", TopicId=FIRST),
        metadata_record("TopicRecord", Name="again", TopicId=AGAIN),  # its predecessor's config went with it
        _partition(AGAIN, 0, [0, 3, 4], [0], 0),
        _partition(AGAIN, 1, [5, 1, 2], [5, 1], -1),  # leaderless
    ],
    [
        _min_isr("", "2"),  # the cluster's default for every topic without its own
        _min_isr("deleted", None),  # deleted: the cluster's default again
        metadata_record("PartitionChangeRecord", 2, TopicId=STRICT, PartitionId=2, Leader=4),
        metadata_record("BrokerRegistrationChangeRecord", 2, BrokerId=4, BrokerEpoch=1, Fenced=1),
        # A directory of broker 5 offline (KIP-858): its registration keeps the others, and its
        # fencing is unchanged -- every reader must leave it live.
        metadata_record("BrokerRegistrationChangeRecord", 2, BrokerId=5, BrokerEpoch=1, LogDirs=(Uuid(b"\x55" * 16),)),
        # A reassignment in flight: the replica being added counts out of the factor.
        metadata_record(
            "PartitionChangeRecord", 2, TopicId=STRICT, PartitionId=0, Replicas=(0, 2, 4, 1), AddingReplicas=(1,)
        ),
    ],
]


def test_min_isr_and_the_health_verdict_are_the_same_through_spark_sql(spark: SparkSession, tmp_path: Path) -> None:
    reader_jar()  # fails naming `make jvm-reader` when the reader is not built
    quorum = write_kraft_quorum(tmp_path, BATCHES)
    expected = verify_kraft(quorum)
    assert expected.passed, expected.checks
    figures = expected.figures
    # By hand, so that equal results are the right ones. Live brokers: 0-3 and 5 (4 is fenced).
    # strict (min 3): p0 [0,2,4,+1] ISR 3 at min; p1 ISR 2 under min; p2 led by fenced 4, ISR 3.
    # loose (min 1): ISR 1 at min, under-replicated. deleted, odd (cluster default 2): ISR 1 under.
    # again (cluster default 2, not its predecessor's 1): p0 ISR 1 under; p1 leaderless (under min
    # however big its ISR, and at min with an ISR of 2, as Kafka counts both).
    assert figures["under_min_isr_partitions"] == 5
    assert figures["at_min_isr_partitions"] == 4
    assert (figures["offline_partitions"], figures["unavailable_partitions"]) == (1, 2)
    assert figures["under_replicated_partitions"] == 6
    health = expected.health
    assert health["verdict"] == "FAILED"
    listed = health["unhealthy_partitions"]["listed"]
    assert [(p["topic"], p["partition"], p["min_isr"], p["why"][0]) for p in listed] == [
        ("again", 1, 2, "offline"),
        ("strict", 2, 3, "leader_not_live"),
        ("again", 0, 2, "under_min_isr"),
        ("deleted", 0, 2, "under_min_isr"),
        ("odd", 0, 2, "under_min_isr"),
        ("strict", 1, 3, "under_min_isr"),
        ("loose", 0, 1, "under_replicated"),
    ]
    assert health["unhealthy_partitions"]["total"] == len(listed)
    for reader in ("jvm", "python"):
        result = verify_kraft_spark(spark, quorum, reader)
        assert {k: v for k, v in result.figures.items() if k != "reader"} == figures, reader
        assert result.health == health, reader
