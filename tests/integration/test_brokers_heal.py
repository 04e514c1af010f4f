"""Brokers that heal, with real processes (issue: a recovered broker never rejoined an ISR; a paused
controller leader got the whole fleet fenced):

- a broker fails and recovers: its partitions' ISRs regrow (AlterPartition from the fleet's
  partition leaders) and leadership returns to it (the controller's automatic preferred-leader
  election), with nothing else done;
- the controller leader is paused for twice the broker session while the fleet's heartbeats go
  through it: no broker is fenced (the fleet moves to another node; the new controller gives every
  broker a fresh session);
- a controlled shutdown moves leaderships and ISR memberships away before the broker stops: no
  partition goes offline, and the broker comes back as a new incarnation.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from raftmeta.cli.brokers import _fleet_call
from raftmeta.client import RetryPolicy, SyncControllerClient
from raftmeta.local import quorum as local_quorum
from raftmeta.v1 import controller_pb2, errors_pb2

from .conftest import FAST_NODE_ARGS
from .test_node import wait_until

pytestmark = pytest.mark.integration

SESSION_TIMEOUT_MS = 3000
HEAL_ARGS = [
    *FAST_NODE_ARGS,
    "--session-timeout-ms",
    str(SESSION_TIMEOUT_MS),
    "--leader-imbalance-check-interval-seconds",
    "1",
]
ASSIGNMENT = [[0, 1, 2], [1, 2, 0], [2, 0, 1], [0, 2, 1]]


@pytest.fixture
def healing(tmp_path: Path) -> Iterator[tuple[local_quorum.LocalQuorum, SyncControllerClient]]:
    started = local_quorum.up(
        tmp_path / "q",
        nodes=3,
        brokers=3,
        racks=3,
        node_args=HEAL_ARGS,
        heartbeat_interval_ms=200,
        catch_up_delay_ms=500,
        fleet_args=["--isr-check-interval-ms", "200"],
    )
    try:
        with SyncControllerClient(started.bootstrap_server, retry=RetryPolicy(deadline_s=20)) as client:
            topic = controller_pb2.CreatableTopic(name="orders")
            for index, brokers in enumerate(ASSIGNMENT):
                topic.assignments.add(partition_index=index, broker_ids=brokers)
            created = client.create_topics(controller_pb2.CreateTopicsRequest(topics=[topic])).topics[0]
            assert created.error_code == errors_pb2.NONE, created.error_message
            yield started, client
    finally:
        local_quorum.down(local_quorum.LocalQuorum.load(tmp_path / "q"))
        for node in started.nodes:
            log = Path(node.log)
            if log.exists():
                text = log.read_text()
                assert "Traceback" not in text, f"node {node.id} crashed:\n{text[-4000:]}"


def partitions(client: SyncControllerClient) -> list[controller_pb2.PartitionDescription]:
    return list(client.describe_topics(["orders"]).topics[0].partitions)


def healthy(client: SyncControllerClient) -> bool:
    """Every ISR is the full replica set and every leader the preferred replica."""
    return all(set(p.isr) == set(p.replicas) and p.leader == p.replicas[0] for p in partitions(client))


def fenced(client: SyncControllerClient) -> list[int]:
    return sorted(b.broker_id for b in client.describe_cluster().brokers if b.fenced)


def test_a_failed_broker_that_recovers_rejoins_its_isrs_and_leads_again(
    healing: tuple[local_quorum.LocalQuorum, SyncControllerClient],
) -> None:
    quorum, client = healing
    bootstrap = quorum.bootstrap_server
    wait_until(lambda: healthy(client), what="a healthy start")
    _fleet_call(bootstrap, 10.0, "FailBrokers", (0,))
    wait_until(lambda: fenced(client) == [0], what="broker 0 fenced")
    after_failure = partitions(client)
    assert all(0 not in p.isr and p.leader != 0 for p in after_failure)  # seed 002: onBrokerFailure
    _fleet_call(bootstrap, 10.0, "RecoverBrokers", (0,))
    # onBrokerStartup: unfenced, back in every ISR, and leader of the partitions it prefers.
    wait_until(lambda: healthy(client), timeout_s=30, what="ISRs full and preferred leaders back")
    assert fenced(client) == []
    leaders = [p.leader for p in partitions(client)]
    assert leaders == [a[0] for a in ASSIGNMENT]


def _leader(client: SyncControllerClient) -> int:
    return int(client.describe_quorum().leader_id)


def test_pausing_the_controller_the_fleet_talks_to_fences_no_broker(
    healing: tuple[local_quorum.LocalQuorum, SyncControllerClient],
) -> None:
    quorum, client = healing
    pids = {n.id: n.pid for n in quorum.nodes}
    # The fleet calls the first node of its bootstrap list (node 1) until a call fails: make node 1
    # the controller by pausing whichever node leads until node 1 wins an election.
    for _ in range(12):
        wait_until(lambda: _leader(client) > 0, what="a leader")
        leader = _leader(client)
        if leader == 1:
            break
        os.kill(pids[leader], signal.SIGSTOP)
        try:
            paused = leader
            wait_until(lambda: _leader(client) not in (-1, paused), what="another leader")  # noqa: B023
        finally:
            os.kill(pids[leader], signal.SIGCONT)
    assert _leader(client) == 1, "node 1 never became the leader"
    wait_until(lambda: fenced(client) == [], what="every broker unfenced")
    epochs = {b.broker_id: b.broker_epoch for b in client.describe_cluster().brokers}
    os.kill(pids[1], signal.SIGSTOP)
    try:
        end = time.monotonic() + 2 * SESSION_TIMEOUT_MS / 1000
        while time.monotonic() < end:
            assert fenced(client) == [], "a broker was fenced while its heartbeats could reach another node"
            time.sleep(0.2)
    finally:
        os.kill(pids[1], signal.SIGCONT)
    assert _leader(client) != 1
    assert {b.broker_id: b.broker_epoch for b in client.describe_cluster().brokers} == epochs
    assert fenced(client) == []


def test_controlled_shutdown_leaves_no_partition_offline(
    healing: tuple[local_quorum.LocalQuorum, SyncControllerClient],
) -> None:
    quorum, client = healing
    bootstrap = quorum.bootstrap_server
    wait_until(lambda: healthy(client), what="a healthy start")
    status = _fleet_call(bootstrap, 20.0, "ShutdownBrokers", (0,))
    [state] = [b for b in status.brokers if b.broker_id == 0]
    assert state.shut_down and state.fenced
    # Done before the broker stopped: no leaderless partition, broker 0 in no ISR, leads nothing.
    after = partitions(client)
    assert all(p.leader not in (-1, 0) and 0 not in p.isr for p in after), after
    assert fenced(client) == [0]
    epoch_before = next(b.broker_epoch for b in client.describe_cluster().brokers if b.broker_id == 0)
    _fleet_call(bootstrap, 10.0, "RecoverBrokers", (0,))
    wait_until(lambda: healthy(client), timeout_s=30, what="the restarted broker back in its ISRs and leading")
    # A restart is a new incarnation: registered again, with a new broker epoch.
    epoch_after = next(b.broker_epoch for b in client.describe_cluster().brokers if b.broker_id == 0)
    assert epoch_after > epoch_before
