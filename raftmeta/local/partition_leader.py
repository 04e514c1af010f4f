"""What a simulated partition leader asks of the controller: ISR expansion and shrink.

raftmeta has no data plane, so "a follower has caught up" is modelled on time: a replica is in
sync once its broker has been up (heartbeating, unfenced) -- and the replica assigned to it --
for ``catch_up_ms``; it is out of sync once its broker has been down longer than
``replica_lag_time_max_ms`` (Kafka's ``replica.lag.time.max.ms``, default 30 s). The leader then
does what Kafka's ``Partition.maybeExpandIsr`` / ``maybeShrinkIsr`` do: it sends AlterPartition
with the new ISR, computed from the leader and partition epochs it last saw.

Pure: time comes in as an argument. The fleet (real processes) and the simulator both use it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from raftmeta.v1 import controller_pb2

# Kafka's replica.lag.time.max.ms default.
REPLICA_LAG_TIME_MAX_MS = 30_000


@dataclass(frozen=True, slots=True)
class BrokerLiveness:
    """A broker as the partition leaders see it. ``up_since_ms``: when it last came up
    (heartbeating and unfenced), None while down; ``down_since_ms``: when it last went down,
    None while up."""

    broker_epoch: int
    up_since_ms: int | None
    down_since_ms: int | None = None


@dataclass(frozen=True, slots=True)
class PartitionState:
    topic_id: bytes
    partition: int
    leader: int
    leader_epoch: int
    partition_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class IsrChange:
    state: PartitionState
    new_isr: tuple[int, ...]

    @property
    def added(self) -> list[int]:
        return [b for b in self.new_isr if b not in self.state.isr]

    @property
    def removed(self) -> list[int]:
        return [b for b in self.state.isr if b not in self.new_isr]


def isr_changes(
    partitions: Iterable[PartitionState],
    brokers: Mapping[int, BrokerLiveness],
    now_ms: int,
    *,
    catch_up_ms: int,
    replica_lag_time_max_ms: int = REPLICA_LAG_TIME_MAX_MS,
    replica_seen_since_ms: Mapping[tuple[bytes, int, int], int] | None = None,
) -> list[IsrChange]:
    """The ISR change each partition led by an up broker of ``brokers`` asks for, if any.

    ``replica_seen_since_ms`` maps (topic id, partition, broker) to when the leaders first saw
    that replica assigned (a reassignment's new replica starts copying then); a replica with no
    entry counts from its broker's ``up_since_ms``."""
    seen = replica_seen_since_ms or {}
    changes: list[IsrChange] = []
    for state in partitions:
        leader = brokers.get(state.leader)
        if leader is None or leader.up_since_ms is None:
            continue  # only a live leader reports ISR changes
        isr = list(state.isr)
        for replica in state.isr:
            live = brokers.get(replica)
            if replica == state.leader or live is None:
                continue
            if live.down_since_ms is not None and now_ms - live.down_since_ms > replica_lag_time_max_ms:
                isr.remove(replica)  # maybeShrinkIsr: no fetch for longer than the lag limit
        for replica in state.replicas:
            live = brokers.get(replica)
            if replica in isr or live is None or live.up_since_ms is None:
                continue
            since = max(live.up_since_ms, seen.get((state.topic_id, state.partition, replica), live.up_since_ms))
            if now_ms - since >= catch_up_ms:
                isr.append(replica)  # maybeExpandIsr: the follower reached the high watermark
        if tuple(isr) != state.isr:
            changes.append(IsrChange(state, tuple(isr)))
    return changes


def alter_partition_requests(
    changes: Iterable[IsrChange], brokers: Mapping[int, BrokerLiveness]
) -> dict[int, controller_pb2.AlterPartitionRequest]:
    """One AlterPartition request per leader broker, with every ISR member's broker epoch."""
    requests: dict[int, controller_pb2.AlterPartitionRequest] = {}
    topics: dict[tuple[int, bytes], controller_pb2.AlterPartitionTopic] = {}
    for change in changes:
        state = change.state
        leader = state.leader
        request = requests.get(leader)
        if request is None:
            request = controller_pb2.AlterPartitionRequest(broker_id=leader, broker_epoch=brokers[leader].broker_epoch)
            requests[leader] = request
        topic = topics.get((leader, state.topic_id))
        if topic is None:
            topic = request.topics.add(topic_id=state.topic_id)
            topics[(leader, state.topic_id)] = topic
        data = topic.partitions.add(
            partition_index=state.partition, leader_epoch=state.leader_epoch, partition_epoch=state.partition_epoch
        )
        for broker_id in change.new_isr:
            data.new_isr_with_epochs.add(broker_id=broker_id, broker_epoch=brokers[broker_id].broker_epoch)
    return requests


def partition_states(response: controller_pb2.DescribeTopicsResponse) -> list[PartitionState]:
    """The partitions of a DescribeTopics answer, as the leaders need them."""
    return [
        PartitionState(
            topic_id=bytes(topic.topic_id),
            partition=p.partition,
            leader=p.leader,
            leader_epoch=p.leader_epoch,
            partition_epoch=p.partition_epoch,
            replicas=tuple(p.replicas),
            isr=tuple(p.isr),
        )
        for topic in response.topics
        if topic.error_code == 0
        for p in topic.partitions
    ]
