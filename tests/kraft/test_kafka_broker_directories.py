"""A real Kafka broker with two log directories (JBOD) on a raftmeta quorum: its new replicas start
UNASSIGNED (Kafka's default directory for a broker with several), the broker's AssignmentsManager
tells raftmeta which directory holds each one (AssignReplicasToDirs, KIP-858), and raftmeta
commits it: the committed log then names, for every replica, the broker directory whose folder
holds the partition's data, and the broker was refused nothing.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from raftmeta.api.ids import uuid_to_str
from raftmeta.client import RetryPolicy, SyncControllerClient
from raftmeta.controller.directories import UNASSIGNED
from raftmeta.kraft.cluster import DEFAULT_READY_TIMEOUT_S, KraftNode
from raftmeta.local import quorum as local_quorum
from raftmeta.v1 import controller_pb2
from tests.kraft.directories import committed_directories, directory_ids, refused_assignments

pytestmark = [pytest.mark.kraft, pytest.mark.timeout(600)]
TOPIC = "jbod"
PARTITIONS = 8
LOG_DIRS = 2
POLL_S = 1.0


@pytest.fixture(scope="module")
def jbod(tmp_path_factory: pytest.TempPathFactory) -> Iterator[local_quorum.LocalQuorum]:
    directory = tmp_path_factory.mktemp("jbod") / "q"
    started = local_quorum.up(directory, nodes=1, kafka_brokers=1, racks=1, kafka_broker_log_dirs=LOG_DIRS)
    try:
        yield started
    finally:
        local_quorum.down(local_quorum.LocalQuorum.load(directory))


def _broker(quorum: local_quorum.LocalQuorum) -> KraftNode:
    real = local_quorum.kafka_brokers(quorum)
    assert real is not None
    (broker,) = real.brokers
    return broker


def test_a_jbod_brokers_replicas_are_assigned_to_the_directories_that_hold_them(
    jbod: local_quorum.LocalQuorum,
) -> None:
    broker = _broker(jbod)
    folders = directory_ids(broker)
    assert len(folders) == LOG_DIRS
    with SyncControllerClient(jbod.bootstrap_server, retry=RetryPolicy(deadline_s=30)) as client:
        registered = {b.broker_id for b in client.describe_cluster().brokers}
        assert broker.node_id in registered
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
    log = Path(broker.log).read_text(errors="replace")
    assert "maybeSendAssignments: sending" in log, "the broker sent its assignments"
    assert refused_assignments(broker) == []
