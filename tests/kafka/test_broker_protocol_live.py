"""A broker's lifecycle through a real quorum's Kafka listener, checked through the gRPC client:
what BrokerRegistration, BrokerHeartbeat and AlterPartition commit is what the simulated fleet's
gRPC calls commit (the controller's rules; their answers are golden-tested against KRaft in
tests/kraft/test_broker_protocol_golden.py)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest

from raftmeta.bench.kafka_brokers import SimulatedBroker, registration
from raftmeta.bench.kafka_ops import describe_quorum
from raftmeta.client import RetryPolicy, SyncControllerClient
from raftmeta.kafka.connection import KafkaConnection
from raftmeta.local import quorum as local_quorum

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]
TIMEOUT_S = 30.0
LEADER, FOLLOWER = 7, 8
# Fast elections; the brokers' session timeout stays the controller's default (Kafka's 9 s), which
# the few requests between two heartbeats of a broker take far less than.
NODE_ARGS = ["--fetch-timeout-ms", "1000", "--election-timeout-ms", "500"]


async def _register(connection: KafkaConnection, cluster_id: str, broker_id: int) -> int:
    broker = SimulatedBroker(broker_id, f"rack-{broker_id}", uuid.uuid4(), uuid.uuid4())
    answer = await connection.call(62, 4, registration(broker, cluster_id, ()), TIMEOUT_S)
    assert answer.error_code.name == "none", answer
    return int(answer.broker_epoch)


async def _heartbeat(connection: KafkaConnection, broker_id: int, epoch: int, offset: int, **flags: bool) -> Any:
    values = {"broker_id": broker_id, "broker_epoch": epoch, "current_metadata_offset": offset,
              "want_fence": False, "want_shut_down": flags.get("want_shut_down", False),
              "offline_log_dirs": [], "cordoned_log_dirs": []}  # fmt: skip
    answer = await connection.call(63, 2, values, TIMEOUT_S)
    assert answer.error_code.name == "none", answer
    return answer


async def _caught_up(connection: KafkaConnection) -> int:
    """The offset of a broker that has applied everything committed."""
    return (await describe_quorum(connection, TIMEOUT_S)).high_watermark - 1


def _fenced(client: SyncControllerClient) -> dict[int, bool]:
    return {b.broker_id: b.fenced for b in client.describe_cluster().brokers}


def test_a_broker_registers_catches_up_changes_an_isr_and_shuts_down(tmp_path: Path) -> None:
    quorum = local_quorum.up(tmp_path / "q", nodes=3, node_args=NODE_ARGS, kafka=True)
    try:
        with SyncControllerClient(quorum.bootstrap_server, retry=RetryPolicy(deadline_s=20)) as client:
            asyncio.run(_lifecycle(quorum, client))
    finally:
        local_quorum.down(local_quorum.LocalQuorum.load(tmp_path / "q"))


async def _lifecycle(quorum: local_quorum.LocalQuorum, client: SyncControllerClient) -> None:
    # Any node: a follower forwards to the leader as it does for admin requests.
    address = quorum.nodes[-1].kafka_address
    assert address is not None
    connection = await KafkaConnection.open(address, "test-broker", TIMEOUT_S)
    try:
        leader_epoch = await _register(connection, quorum.cluster_id, LEADER)
        assert _fenced(client) == {LEADER: True}
        behind = await _heartbeat(connection, LEADER, leader_epoch, offset=0)
        assert (behind.is_caught_up, behind.is_fenced) == (False, True)
        assert _fenced(client) == {LEADER: True}
        caught_up = await _heartbeat(connection, LEADER, leader_epoch, await _caught_up(connection))
        assert (caught_up.is_caught_up, caught_up.is_fenced) == (True, False)
        follower_epoch = await _register(connection, quorum.cluster_id, FOLLOWER)
        await _heartbeat(connection, FOLLOWER, follower_epoch, await _caught_up(connection))
        assert _fenced(client) == {LEADER: False, FOLLOWER: False}

        created = await connection.call(
            19, 7,
            {"topics": [{"name": "isr", "num_partitions": -1, "replication_factor": -1, "configs": [],
                         "assignments": [{"partition_index": 0, "broker_ids": [LEADER, FOLLOWER]}]}],
             "timeout": 30_000, "validate_only": False},
            TIMEOUT_S,
        )  # fmt: skip
        topic_id = created.topics[0].topic_id
        shrink = {"broker_id": LEADER, "broker_epoch": leader_epoch, "topics": [{"topic_id": topic_id, "partitions": [
            {"partition_index": 0, "leader_epoch": 0, "partition_epoch": 0, "leader_recovery_state": 0,
             "new_isr_with_epochs": [{"broker_id": LEADER, "broker_epoch": leader_epoch}]}]}]}  # fmt: skip
        answer = await connection.call(56, 3, shrink, TIMEOUT_S)
        [partition] = answer.topics[0].partitions
        assert (partition.error_code.name, list(partition.isr), partition.partition_epoch) == ("none", [LEADER], 1)
        (described,) = client.describe_topics(["isr"]).topics
        assert [(p.leader, list(p.isr)) for p in described.partitions] == [(LEADER, [LEADER])]

        shut_down = await _heartbeat(connection, FOLLOWER, follower_epoch, 0, want_shut_down=True)
        assert (shut_down.is_fenced, shut_down.should_shut_down) == (True, True)
        assert _fenced(client) == {LEADER: False, FOLLOWER: True}
    finally:
        await connection.close()
