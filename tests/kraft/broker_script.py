"""The broker-protocol golden script: one sequence of BrokerRegistration, BrokerHeartbeat,
CreateTopics, AlterPartition and AssignReplicasToDirs requests a broker (or a partition leader) sends its controller,
run against a real KRaft controller and against raftmeta's Kafka listener.

Each step's answer becomes a flat view (field -> value) with what legitimately differs between
two clusters replaced by placeholders: broker epochs (KRaft's are log offsets, raftmeta's count
registrations; each side's epochs are numbered in order of first appearance, so "the same epoch
again" and "a new one" still compare) and topic ids. Offsets are never in an answer; the script
reports each side's own high watermark as the broker's metadata offset when it must be caught up.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from raftmeta.bench.kafka_brokers import SimulatedBroker, registration
from raftmeta.bench.kafka_ops import describe_quorum
from raftmeta.kafka.connection import KafkaConnection

CALL_TIMEOUT_S: Final = 30.0
# Ids no real broker or controller of the session's clusters uses (brokers 0..2, controllers 3001+).
B1, B2, B3, B4 = 2001, 2002, 2003, 2004
NOT_REGISTERED: Final = 2999
NOT_A_REPLICA: Final = 2998
# Added to a broker's epoch: past any epoch either side has given in the script.
STALE: Final = 1000
TOPIC: Final = "golden-broker-protocol"
UNKNOWN_TOPIC_ID: Final = uuid.UUID(int=0xDEADBEEF)
# CreateTopics answers every config of the new topic: compared by the tools' golden test, not here.
NOT_COMPARED: Final = frozenset({"configs"})


@dataclass
class Script:
    """One side's run: its connection to the controller, and the placeholders it gave out."""

    connection: KafkaConnection
    cluster_id: str
    features: Sequence[tuple[str, int, int]]
    steps: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    epochs: dict[int, str] = field(default_factory=dict)
    broker_epochs: dict[int, int] = field(default_factory=dict)
    topic_id: uuid.UUID = UNKNOWN_TOPIC_ID

    def epoch(self, value: int) -> Any:
        if value < 0:
            return value
        return self.epochs.setdefault(value, f"<epoch {len(self.epochs) + 1}>")

    async def call(self, step: str, api_key: int, version: int, values: dict[str, Any]) -> Any:
        response = await self.connection.call(api_key, version, values, CALL_TIMEOUT_S)
        self.steps.append((step, self.view(response)))
        return response

    def view(self, response: Any) -> dict[str, Any]:
        flat: dict[str, Any] = {}
        _flatten(response, "", flat, self)
        return flat

    async def offset(self) -> int:
        """Where a broker that keeps up with the log is: the last committed offset."""
        return (await describe_quorum(self.connection, CALL_TIMEOUT_S)).high_watermark - 1

    # -- the requests ---------------------------------------------------------------------------

    async def register(self, step: str, broker_id: int, incarnation: int, **changes: Any) -> Any:
        broker = SimulatedBroker(broker_id, "rack-golden", uuid.UUID(int=incarnation), directory_of(broker_id))
        values = {**registration(broker, self.cluster_id, self.features), **changes}
        response = await self.call(step, 62, 4, values)
        if int(response.error_code.value) == 0:
            self.broker_epochs[broker_id] = int(response.broker_epoch)
        return response

    async def heartbeat(
        self, step: str, broker_id: int, *, epoch: int | None = None, offset: int | None = None, **flags: bool
    ) -> Any:
        values = {
            "broker_id": broker_id,
            "broker_epoch": self.broker_epochs.get(broker_id, 1) if epoch is None else epoch,
            "current_metadata_offset": await self.offset() if offset is None else offset,
            "want_fence": flags.get("want_fence", False),
            "want_shut_down": flags.get("want_shut_down", False),
            "offline_log_dirs": [],
        }
        return await self.call(step, 63, 1, values)

    async def alter(
        self,
        step: str,
        new_isr: Sequence[int],
        *,
        sender: int = B1,
        leader_epoch: int = 0,
        partition_epoch: int = 0,
        epochs: dict[int, int] | None = None,
        version: int = 3,
        **changes: Any,
    ) -> Any:
        members = [{"broker_id": b, "broker_epoch": (epochs or {}).get(b, self.broker_epochs.get(b, -1))}
                   for b in new_isr]  # fmt: skip
        partition = {"partition_index": 0, "leader_epoch": leader_epoch, "partition_epoch": partition_epoch,
                     "leader_recovery_state": 0, "new_isr": list(new_isr), "new_isr_with_epochs": members}  # fmt: skip
        partition.update({k: v for k, v in changes.items() if k in partition})
        values = {
            "broker_id": sender,
            "broker_epoch": changes.get("sender_epoch", self.broker_epochs[sender]),
            "topics": [{"topic_id": changes.get("topic_id", self.topic_id), "partitions": [partition]}],
        }
        return await self.call(step, 56, version, values)


def _flatten(value: Any, path: str, into: dict[str, Any], script: Script) -> None:
    name = path.rsplit(".", 1)[-1]
    if dataclasses.is_dataclass(value):
        for item in dataclasses.fields(value):
            if item.name not in NOT_COMPARED:
                _flatten(getattr(value, item.name), f"{path}.{item.name}" if path else item.name, into, script)
    elif isinstance(value, tuple) and name != "isr":
        for i, item in enumerate(value):
            _flatten(item, f"{path}[{i}]", into, script)
    elif name == "broker_epoch":
        into[path] = script.epoch(int(value))
    elif name == "topic_id":
        into[path] = "<topic id>" if value == script.topic_id else str(value)
    elif name == "throttle_time":
        into[path] = int(value.total_seconds() * 1000)
    elif hasattr(value, "name") and hasattr(value, "value"):  # an ErrorCode
        into[path] = value.name
    elif isinstance(value, tuple):
        into[path] = [int(v) for v in value]
    else:
        into[path] = value


async def lifecycle(script: Script) -> None:
    """Registration and heartbeats: epochs, fencing until caught up, incarnations, refusals."""
    s = script
    await s.register("register B1", B1, 1)
    await s.register("register B1 again, same incarnation", B1, 1)
    await s.heartbeat("heartbeat B1, wrong broker epoch", B1, epoch=s.broker_epochs[B1] + STALE)
    await s.heartbeat("heartbeat of a broker never registered", NOT_REGISTERED, epoch=1)
    await s.heartbeat("heartbeat B1, behind its registration", B1, offset=0)
    await s.heartbeat("heartbeat B1, caught up", B1)
    await s.register("register B1, new incarnation, while its session is alive", B1, 2)
    await s.heartbeat("heartbeat B1, want_fence", B1, want_fence=True)
    # KRaft 4's BrokerHeartbeatTracker: the session outlives the fencing.
    await s.register("register B1, new incarnation, fenced but its session alive", B1, 2)
    await s.heartbeat("heartbeat B1, caught up again", B1)
    await s.register("register B2", B2, 3)
    await s.heartbeat("heartbeat B2, caught up", B2)
    await s.register("register B3 as a ZooKeeper broker", B3, 4, is_migrating_zk_broker=True)
    await s.register("register B3 without log directories", B3, 4, log_dirs=[])
    await s.register("register B3 with a reserved log directory", B3, 4, log_dirs=[uuid.UUID(int=1)])
    twice = uuid.UUID(int=(B3 << 64) | 7)
    await s.register("register B3 with a log directory twice", B3, 4, log_dirs=[twice, twice])
    await s.register("register B3 of another cluster", B3, 4, cluster_id="AAAAAAAAAAAAAAAAAAAAAA")


async def isr_changes(script: Script) -> None:
    """AlterPartition from the leader of a partition on B1 and B2 (both unfenced)."""
    s = script
    created = await s.call(
        "create the topic on B1 and B2",
        19,
        7,
        {"topics": [{"name": TOPIC, "num_partitions": -1, "replication_factor": -1,
                     "assignments": [{"partition_index": 0, "broker_ids": [B1, B2]}], "configs": []}],
         "timeout": 30_000, "validate_only": False},
    )  # fmt: skip
    s.topic_id = created.topics[0].topic_id
    s.steps[-1] = (s.steps[-1][0], s.view(created))  # the topic id is known now: a placeholder
    await s.alter("shrink the ISR to the leader", [B1])
    await s.alter("expand the ISR again", [B1, B2], partition_epoch=1)
    await s.alter("an older leader epoch", [B1], leader_epoch=-1, partition_epoch=2)
    await s.alter("an older partition epoch", [B1], partition_epoch=1)
    await s.alter("a newer leader epoch", [B1], leader_epoch=5, partition_epoch=2)
    await s.alter("from a replica that does not lead", [B1], sender=B2, partition_epoch=2)
    await s.alter("an ISR with a broker outside the replicas", [B1, NOT_A_REPLICA], partition_epoch=2)
    await s.alter("an ISR without the leader", [B2], partition_epoch=2)
    await s.alter(
        "an ISR member's stale broker epoch", [B1, B2], partition_epoch=2, epochs={B2: s.broker_epochs[B2] + STALE}
    )
    await s.alter("a move to RECOVERING", [B1], partition_epoch=2, leader_recovery_state=1)
    await s.alter("the leader's stale broker epoch", [B1], partition_epoch=2, sender_epoch=s.broker_epochs[B1] + STALE)
    await s.alter("an unknown topic id", [B1], partition_epoch=2, topic_id=UNKNOWN_TOPIC_ID)
    await s.alter("an unknown partition", [B1], partition_epoch=2, partition_index=5)
    await s.alter("shrink at v2 (no broker epochs)", [B1], partition_epoch=2, version=2)
    await s.heartbeat("heartbeat B2, want_shut_down, leading nothing", B2, want_shut_down=True)
    await s.alter("expand to a fenced broker", [B1, B2], partition_epoch=3)


def directory_of(broker_id: int) -> uuid.UUID:
    """The log directory :meth:`Script.register` registers ``broker_id`` with."""
    return uuid.UUID(int=(broker_id << 64) | 0x1000)


async def directory_assignments(script: Script) -> None:
    """AssignReplicasToDirs (KIP-858) from B1, a replica of the script's partition: its own
    directory (where the controller already placed it: its only one), the same again, a stale
    broker epoch, a broker never registered, an unknown topic id and an unknown partition."""
    s = script

    async def assign(step: str, topics: list[dict[str, Any]], **changes: Any) -> Any:
        values = {
            "broker_id": changes.get("broker_id", B1),
            "broker_epoch": changes.get("broker_epoch", s.broker_epochs[B1]),
            "directories": [{"id_": directory_of(B1), "topics": topics}],
        }
        return await s.call(step, 73, 0, values)

    partition_0 = [{"topic_id": s.topic_id, "partitions": [{"partition_index": 0}]}]
    await assign("assign B1's replica to its directory", partition_0)
    await assign("assign B1's replica to its directory again", partition_0)
    await assign("assign with a stale broker epoch", partition_0, broker_epoch=s.broker_epochs[B1] + STALE)
    await assign("assign from a broker never registered", partition_0, broker_id=NOT_REGISTERED, broker_epoch=1)
    unknown = [
        {"topic_id": UNKNOWN_TOPIC_ID, "partitions": [{"partition_index": 0}, {"partition_index": 1}]},
        {"topic_id": s.topic_id, "partitions": [{"partition_index": 5}, {"partition_index": 0}]},
    ]
    await assign("assign an unknown topic id and an unknown partition", unknown)


async def known_differences(script: Script) -> None:
    """The steps where raftmeta answers otherwise on purpose (last: the brokers they register on
    one side only are used by nothing after them)."""
    s = script
    await s.heartbeat("heartbeat B1, want_shut_down, leading the partition", B1, want_shut_down=True)
    await s.register("register B3 without features", B3, 7, features=[])
    await s.register("register B4 with B1's log directory", B4, 8, log_dirs=[directory_of(B1)])


async def cleanup(script: Script) -> None:
    """Leave a shared cluster as it was: the topic deleted, the test's brokers unregistered."""
    connection = script.connection
    deleted = await connection.call(
        20, 6, {"topics": [{"name": TOPIC, "topic_id": None}], "timeout": 30_000}, CALL_TIMEOUT_S
    )
    assert [r.error_code.name for r in deleted.responses] in (["none"], ["unknown_topic_or_partition"]), deleted
    for broker_id in (B1, B2, B3, B4):
        unregistered = await connection.call(64, 0, {"broker_id": broker_id}, CALL_TIMEOUT_S)
        # Brokers the script's refused registrations never registered are not registered.
        assert unregistered.error_code.name in ("none", "broker_id_not_registered"), (broker_id, unregistered)
