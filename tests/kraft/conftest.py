"""The real KRaft cluster the `kraft` tests share: ONE 3-controller, 3-broker, 3-rack cluster per
test run (the `kraft` phase runs in one process), stopped at the end.

Read-only checks, golden comparisons and benchmarks use ``kraft_cluster``; a test that kills,
pauses or reconfigures nodes starts its own (``KraftCluster.start`` in its own tmp dir), so that
the shared cluster is the same for every test. When it cannot start, the fixture errors with the
failing node's name and the tails of its logs (``KraftNodeError``), or with what is missing
(``KafkaNotResolved``: ``make kafka``); it never skips.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pytest

from raftmeta.kraft.cluster import KraftCluster
from raftmeta.kraft.tools import TOPIC_COMMAND, run_tool

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def kraft_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KraftCluster]:
    cluster = KraftCluster.start(tmp_path_factory.mktemp("kraft"), controllers=3, brokers=3, racks=3)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    """One Spark session with the JVM reader of Kafka-format logs on its ``spark.jars`` (fails
    naming `make jvm-reader` when it is not built)."""
    from raftmeta.jobs.kafka_log_jar import reader_jars
    from raftmeta.jobs.session import build_session

    jars = reader_jars()
    session = build_session(
        "local[2]", app_name="raftmeta-kraft-tests", local_dir=str(tmp_path_factory.mktemp("spark-local")), jars=jars
    )
    yield session
    session.stop()


CONFIG_COMMAND = "org.apache.kafka.tools.ConfigCommand"
REASSIGN_COMMAND = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
SNAPSHOT_EVERY = {"metadata.log.max.snapshot.interval.ms": "3000"}


def _wait_for(what: str, condition: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s:.0f} s")
        time.sleep(0.5)


@pytest.fixture(scope="session")
def worked_kraft_cluster(tmp_path_factory: pytest.TempPathFactory) -> KraftCluster:
    """A 3-controller, 3-broker quorum of its own (it restarts a broker and reassigns: the
    shared ``kraft_cluster`` stays as it started), with snapshots every few seconds, after topic
    creation, a config change, a broker restart, a reassignment and a topic deletion; stopped, so
    that no segment is being written while tests read its metadata logs
    (test_kafka_log_golden.py, test_kraft_verify_real.py)."""
    cluster = KraftCluster.start(
        tmp_path_factory.mktemp("kraft-worked"), controllers=3, brokers=3, racks=3, controller_config=SNAPSHOT_EVERY
    )
    try:
        bootstrap = ["--bootstrap-server", cluster.bootstrap_servers]
        run_tool(TOPIC_COMMAND, *bootstrap, "--create", "--topic", "golden-a", "--partitions", "3",
                 "--replication-factor", "3")  # fmt: skip
        # Partition 0 on brokers 0 and 1, so that moving it to 2 and 1 adds and removes a replica.
        run_tool(TOPIC_COMMAND, *bootstrap, "--create", "--topic", "golden-b", "--replica-assignment", "0:1,1:2",
                 "--config", "retention.ms=60000")  # fmt: skip
        run_tool(CONFIG_COMMAND, *bootstrap, "--alter", "--entity-type", "topics", "--entity-name", "golden-a",
                 "--add-config", "cleanup.policy=compact")  # fmt: skip
        cluster.restart(1)
        plan = cluster.data_dir / "reassignment.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "golden-b", "partition": 0,
                                                                   "replicas": [2, 1]}]}))  # fmt: skip
        run_tool(REASSIGN_COMMAND, *bootstrap, "--execute", "--reassignment-json-file", str(plan))
        verify = [REASSIGN_COMMAND, *bootstrap, "--verify", "--reassignment-json-file", str(plan)]
        _wait_for(
            "the reassignment of golden-b-0 completes",
            lambda: "is completed" in run_tool(*verify).stdout,
            cluster.ready_timeout_s,
        )
        run_tool(TOPIC_COMMAND, *bootstrap, "--delete", "--topic", "golden-b")
        controllers = [cluster.log_dirs()[n.node_id] for n in cluster.controllers]
        # Each controller snapshots what it has applied every few seconds: wait for one past the
        # bootstrap snapshot on each, so the comparison covers snapshots of a worked cluster.
        _wait_for(
            "every controller writes a snapshot",
            lambda: all(len(list(d.glob("*.checkpoint"))) >= 2 for d in controllers),
            cluster.ready_timeout_s,
        )
    finally:
        cluster.stop()
    return cluster
