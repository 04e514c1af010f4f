"""Which partitions a broker fencing, unfencing or an election request touches, and their records.

The election rules themselves are in :mod:`raftmeta.controller.partition_change`; this module
finds the partitions to run them on (Kafka's ``generateLeaderAndIsrUpdates``) and decides the
election type per topic (unclean only when the topic, or else the cluster default, enables it).

Finding the partitions scans the image (O(partitions)); fencing and unfencing are rare events, and
a per-broker index would cost every replayed record instead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from raftmeta.controller.configs import UNCLEAN_LEADER_ELECTION_ENABLE, is_true
from raftmeta.controller.image import NO_LEADER, MetadataImage, TopicImage
from raftmeta.controller.partition_change import Election, PartitionChangeBuilder
from raftmeta.v1 import records_pb2


def unclean_enabled(image: MetadataImage, topic: TopicImage, default: bool) -> bool:
    value = image.topic_config(topic, UNCLEAN_LEADER_ELECTION_ENABLE)
    return default if value is None else is_true(value)


def _changes(
    image: MetadataImage,
    touches: Callable[[int, tuple[int, ...]], bool],
    is_acceptable: Callable[[int], bool],
    remove_from_isr: int,
    unclean_default: bool,
) -> list[records_pb2.MetadataRecord]:
    records: list[records_pb2.MetadataRecord] = []
    for topic in image.topics_sorted():
        election = Election.UNCLEAN if unclean_enabled(image, topic, unclean_default) else Election.ONLINE
        for pid, part in enumerate(topic.partitions):
            if not touches(part.leader, part.isr):
                continue
            builder = PartitionChangeBuilder(part, topic.topic_id, pid, is_acceptable, election=election)
            if remove_from_isr != NO_LEADER:
                builder.set_target_isr([b for b in part.isr if b != remove_from_isr])
            record = builder.build()
            if record is not None:
                records.append(record)
    return records


def leave_records(image: MetadataImage, broker_id: int, unclean_default: bool) -> list[records_pb2.MetadataRecord]:
    """Kafka's ``generateLeaderAndIsrUpdates`` with ``brokerToRemove``: the broker leaves every ISR
    it is not the last member of and every leadership (a new leader where one is in sync, else
    none). Fencing, controlled shutdown and unregistering all start with these records."""

    def acceptable(candidate: int) -> bool:
        return candidate != broker_id and image.is_unfenced(candidate)

    def touches(leader: int, isr: tuple[int, ...]) -> bool:
        return leader == broker_id or broker_id in isr

    return _changes(image, touches, acceptable, broker_id, unclean_default)


def fence_records(image: MetadataImage, broker_id: int, unclean_default: bool) -> list[records_pb2.MetadataRecord]:
    """Kafka's ``handleBrokerFenced``: the broker leaves every ISR and every leadership (partition
    changes first), then a FenceBrokerRecord."""
    broker = image.brokers[broker_id]
    records = leave_records(image, broker_id, unclean_default)
    records.append(
        records_pb2.MetadataRecord(
            fence_broker=records_pb2.FenceBrokerRecord(broker_id=broker_id, broker_epoch=broker.epoch)
        )
    )
    return records


def unregister_records(image: MetadataImage, broker_id: int, unclean_default: bool) -> list[records_pb2.MetadataRecord]:
    """Kafka's ``handleBrokerUnregistered``: the broker leaves every ISR and leadership, then an
    UnregisterBrokerRecord removes its registration."""
    broker = image.brokers[broker_id]
    records = leave_records(image, broker_id, unclean_default)
    records.append(
        records_pb2.MetadataRecord(
            unregister_broker=records_pb2.UnregisterBrokerRecord(broker_id=broker_id, broker_epoch=broker.epoch)
        )
    )
    return records


def unfence_records(image: MetadataImage, broker_id: int, unclean_default: bool) -> list[records_pb2.MetadataRecord]:
    """Kafka's ``handleBrokerUnfenced``: an UnfenceBrokerRecord, then leaderless partitions elect
    again with the returning broker acceptable (it still shows fenced in ``image``)."""
    broker = image.brokers[broker_id]
    records = [
        records_pb2.MetadataRecord(
            unfence_broker=records_pb2.UnfenceBrokerRecord(broker_id=broker_id, broker_epoch=broker.epoch)
        )
    ]

    def acceptable(candidate: int) -> bool:
        return candidate == broker_id or image.is_unfenced(candidate)

    def touches(leader: int, _isr: tuple[int, ...]) -> bool:
        return leader == NO_LEADER

    records.extend(_changes(image, touches, acceptable, NO_LEADER, unclean_default))
    return records


@dataclass
class BalancePass:
    """Where a pass of the imbalance check stands: the topics there were when it began, by name
    (topics created since are looked at by the next pass), and the next partition to look at."""

    names: list[str]
    topic_index: int = 0
    partition_index: int = 0

    @classmethod
    def over(cls, image: MetadataImage) -> BalancePass:
        return cls([topic.name for topic in image.topics_sorted()])


def balance_records(
    image: MetadataImage, max_elections: int, scan: BalancePass, scan_max: int
) -> tuple[list[records_pb2.MetadataRecord], bool]:
    """Kafka's ``maybeBalancePartitionLeaders``: a PREFERRED election on every imbalanced
    partition (a leader that is not its first replica: Kafka's ``imbalancedPartitions``) whose
    preferred replica is unfenced and in sync, by topic name then partition id, at most
    ``max_elections`` records. Kafka keeps an index of imbalanced partitions; raftmeta looks at
    the image instead, at most ``scan_max`` partitions a call, from where ``scan`` stands (which
    moves on). Returns (records, whether the pass has more to look at: run again at once rather
    than after the interval)."""
    records: list[records_pb2.MetadataRecord] = []
    scanned = 0
    names = scan.names
    while scan.topic_index < len(names):
        topic = image.topic_by_name(names[scan.topic_index])
        partitions = topic.partitions if topic is not None else ()
        pid = scan.partition_index
        while pid < len(partitions):
            if len(records) >= max_elections or scanned >= scan_max:
                scan.partition_index = pid
                return records, True
            part = partitions[pid]
            scanned += 1
            if part.leader != NO_LEADER and part.leader != part.replicas[0]:
                assert topic is not None
                record = PartitionChangeBuilder(
                    part, topic.topic_id, pid, image.is_unfenced, election=Election.PREFERRED
                ).build()
                if record is not None:
                    records.append(record)
            pid += 1
        scan.topic_index += 1
        scan.partition_index = 0
    return records, False
