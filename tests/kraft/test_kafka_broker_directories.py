"""Real Kafka brokers with two log directories each (JBOD) on a raftmeta quorum.

Their new replicas start UNASSIGNED (Kafka's default directory for a broker with several), each
broker's AssignmentsManager tells raftmeta which directory holds each one (AssignReplicasToDirs,
KIP-858), and raftmeta commits it: the committed log then names, for every replica, the broker
directory whose folder holds the partition's data, and no broker was refused anything.

Then one broker's second directory fails the way Kafka's own LogDirFailureTest makes it fail (the
folder replaced by a file): the broker reports it offline in its heartbeats, and raftmeta moves
the leadership and ISR membership of every partition with its replica there to the other broker
and drops the directory from its registration; produce with acks=all goes on to every partition.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from raftmeta.api.ids import uuid_to_str
from raftmeta.client import RetryPolicy, SyncControllerClient
from raftmeta.controller.directories import UNASSIGNED
from raftmeta.kraft.cluster import DEFAULT_READY_TIMEOUT_S, KraftNode
from raftmeta.local import quorum as local_quorum
from raftmeta.v1 import controller_pb2
from tests.kraft.directories import (
    CommittedPartition,
    committed_directories,
    committed_log_dirs,
    committed_partitions,
    directory_ids,
    refused_assignments,
)

pytestmark = [pytest.mark.kraft, pytest.mark.timeout(600)]
TOPIC = "jbod"
PARTITIONS = 8
LOG_DIRS = 2
BROKERS = 2
POLL_S = 1.0
FAILED_TOPIC = "jbod-failure"
# The broker finds its directory failed at its next high-watermark checkpoint (Kafka's
# replica.high.watermark.checkpoint.interval.ms, 5 s) or write to it, reports it in its next
# heartbeat, and the controller's records commit; the launcher's ready timeout bounds it all.
FAILURE_WAIT_S = DEFAULT_READY_TIMEOUT_S
CLIENT_TIMEOUT_S = 120.0


@pytest.fixture(scope="module")
def jbod(tmp_path_factory: pytest.TempPathFactory) -> Iterator[local_quorum.LocalQuorum]:
    directory = tmp_path_factory.mktemp("jbod") / "q"
    started = local_quorum.up(directory, nodes=1, kafka_brokers=BROKERS, racks=1, kafka_broker_log_dirs=LOG_DIRS)
    try:
        yield started
    finally:
        local_quorum.down(local_quorum.LocalQuorum.load(directory))


def _brokers(quorum: local_quorum.LocalQuorum) -> list[KraftNode]:
    real = local_quorum.kafka_brokers(quorum)
    assert real is not None and len(real.brokers) == BROKERS
    return list(real.brokers)


def _folders(brokers: list[KraftNode]) -> dict[str, Path]:
    """Every broker's log directories by id."""
    folders = {}
    for broker in brokers:
        own = directory_ids(broker)
        assert len(own) == LOG_DIRS
        folders.update(own)
    return folders


def _wait_for(what: str, condition: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"not {what} within {timeout_s:.0f} s"
        time.sleep(POLL_S)


def test_a_jbod_brokers_replicas_are_assigned_to_the_directories_that_hold_them(
    jbod: local_quorum.LocalQuorum,
) -> None:
    brokers = _brokers(jbod)
    folders = _folders(brokers)
    with SyncControllerClient(jbod.bootstrap_server, retry=RetryPolicy(deadline_s=30)) as client:
        registered = {b.broker_id for b in client.describe_cluster().brokers}
        assert {b.node_id for b in brokers} <= registered
        created = client.create_topics(
            controller_pb2.CreateTopicsRequest(
                topics=[controller_pb2.CreatableTopic(name=TOPIC, num_partitions=PARTITIONS, replication_factor=1)]
            )
        )
        assert [t.error_code for t in created.topics] == [0], created
        topic_id = uuid_to_str(created.topics[0].topic_id)
        node_dir = jbod.nodes[0].data_dir
        # Created UNASSIGNED (the broker has two directories); the broker's assignments follow as
        # it creates each partition's log. Waited for within the launcher's ready timeout.
        deadline = time.monotonic() + DEFAULT_READY_TIMEOUT_S
        while True:
            committed = committed_directories(node_dir, client.describe_quorum().high_watermark)
            ours = {pid: committed.get((topic_id, pid)) for pid in range(PARTITIONS)}
            if all(d is not None and d[0] in folders for d in ours.values()) or time.monotonic() > deadline:
                break
            time.sleep(POLL_S)
    assert all(d is not None and d[0] in folders for d in ours.values()), (
        f"not every replica assigned to one of {sorted(folders)} (UNASSIGNED is {uuid_to_str(UNASSIGNED)}): {ours}"
    )
    for pid, directories in ours.items():
        assert directories is not None
        assert (folders[directories[0]] / f"{TOPIC}-{pid}").is_dir(), f"{TOPIC}-{pid} is not in {directories[0]}"
    for broker in brokers:
        log = Path(broker.log).read_text(errors="replace")
        assert "maybeSendAssignments: sending" in log, f"broker {broker.node_id} sent its assignments"
        assert refused_assignments(broker) == []


def _produce_to_every_partition(bootstrap: str, topic: str, partitions: int, round_: int) -> None:
    """One message per partition from an idempotent producer with acks=all: each acknowledged."""
    failures: list[str] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})

    def delivered(error: Any, message: Any) -> None:
        if error is not None:
            failures.append(f"{message.topic()}-{message.partition()}: {error}")

    for pid in range(partitions):
        producer.produce(topic, value=f"{round_}:{pid}".encode(), partition=pid, on_delivery=delivered)
    remaining = producer.flush(CLIENT_TIMEOUT_S)
    assert remaining == 0 and not failures, f"{remaining} messages undelivered; failures: {failures}"


def test_a_failed_log_directory_moves_leadership_and_isr_off_it_and_produce_goes_on(
    jbod: local_quorum.LocalQuorum,
) -> None:
    brokers = _brokers(jbod)
    folders = _folders(brokers)
    bootstrap = ",".join(b.address for b in brokers)
    node_dir = jbod.nodes[0].data_dir
    with SyncControllerClient(jbod.bootstrap_server, retry=RetryPolicy(deadline_s=30)) as client:
        created = client.create_topics(
            controller_pb2.CreateTopicsRequest(
                topics=[
                    controller_pb2.CreatableTopic(
                        name=FAILED_TOPIC, num_partitions=PARTITIONS, replication_factor=BROKERS
                    )
                ]
            )
        )
        assert [t.error_code for t in created.topics] == [0], created
        topic_id = uuid_to_str(created.topics[0].topic_id)

        def committed() -> dict[int, CommittedPartition]:
            parts = committed_partitions(node_dir, client.describe_quorum().high_watermark)
            return {pid: parts[(topic_id, pid)] for pid in range(PARTITIONS) if (topic_id, pid) in parts}

        _wait_for(
            "every replica assigned to its directory",
            lambda: (
                len(parts := committed()) == PARTITIONS
                and all(d in folders for p in parts.values() for d in p.directories)
            ),
            DEFAULT_READY_TIMEOUT_S,
        )
        _produce_to_every_partition(bootstrap, FAILED_TOPIC, PARTITIONS, 0)
        before = committed()
        # A leader's replica in its broker's second directory ("data-1"; the first holds the
        # broker's metadata log, whose failure stops the broker instead).
        victims = [
            (part.leader, part.directories[part.replicas.index(part.leader)])
            for part in before.values()
            if folders[part.directories[part.replicas.index(part.leader)]].name != "data"
        ]
        assert victims, f"no partition leads from a broker's second directory: {before}"
        broker_id, failed = victims[0]
        moved = {
            pid
            for pid, part in before.items()
            if broker_id in part.replicas and part.directories[part.replicas.index(broker_id)] == failed
        }
        # Kafka's LogDirFailureTest: the directory's folder replaced by a file.
        folder = folders[failed]
        shutil.rmtree(folder)
        folder.touch()

        def moved_off() -> bool:
            _produce_to_every_partition(bootstrap, FAILED_TOPIC, PARTITIONS, 1)  # writes find the failure too
            hw = client.describe_quorum().high_watermark
            parts = committed()
            return failed not in committed_log_dirs(node_dir, hw)[broker_id] and all(
                parts[pid].leader != broker_id and broker_id not in parts[pid].isr for pid in moved
            )

        _wait_for(f"broker {broker_id}'s directory {failed} offline in the committed log", moved_off, FAILURE_WAIT_S)
        after = committed()
        hw = client.describe_quorum().high_watermark
    # The other partitions keep their leader and ISR; the broker keeps its other directory.
    for pid in set(before) - moved:
        assert (after[pid].leader, after[pid].isr) == (before[pid].leader, before[pid].isr), pid
    (other,) = [d for d, path in folders.items() if path.parent == folder.parent and d != failed]
    assert committed_log_dirs(node_dir, hw)[broker_id] == [other]
    _produce_to_every_partition(bootstrap, FAILED_TOPIC, PARTITIONS, 2)
