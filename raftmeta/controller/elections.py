"""Which partitions a broker fencing, unfencing or an election request touches, and their records.

The election rules themselves are in :mod:`raftmeta.controller.partition_change`; this module
finds the partitions to run them on (Kafka's ``generateLeaderAndIsrUpdates``) and decides the
election type per topic (unclean only when the topic, or else the cluster default, enables it).

Finding the partitions scans the image (O(partitions)): fencing and unfencing are rare events, and
a per-broker index would cost every replayed record instead. The scans are resumable steps
(:mod:`raftmeta.controller.work`): a turn looks at a bounded number of partitions and writes a
bounded number of changes, so a broker in a million partitions does not hold the node's loop.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

from raftmeta.controller.configs import UNCLEAN_LEADER_ELECTION_ENABLE, is_true
from raftmeta.controller.directories import newly_offline, online_after, replica_directory
from raftmeta.controller.image import NO_LEADER, MetadataImage, PartitionRegistration, TopicImage
from raftmeta.controller.partition_change import Election, PartitionChangeBuilder
from raftmeta.controller.work import UNBOUNDED, Steps, TurnBudget, Visit, complete, partition_pass
from raftmeta.v1 import records_pb2

Records = list[records_pb2.MetadataRecord]


def unclean_enabled(image: MetadataImage, topic: TopicImage, default: bool) -> bool:
    value = image.topic_config(topic, UNCLEAN_LEADER_ELECTION_ENABLE)
    return default if value is None else is_true(value)


def _changes(
    image: MetadataImage,
    touches: Callable[[PartitionRegistration], bool],
    is_acceptable: Callable[[int], bool],
    remove_from_isr: int,
    unclean_default: bool,
    budget: TurnBudget,
    records: Records,
) -> Steps:
    """A change for every partition ``touches`` selects, after ``records``, in turns
    (:func:`~raftmeta.controller.work.partition_pass`)."""

    def visitor(image: MetadataImage, topic: TopicImage) -> Visit:
        election = Election.UNCLEAN if unclean_enabled(image, topic, unclean_default) else Election.ONLINE
        topic_id = topic.topic_id

        def visit(
            partitions: tuple[PartitionRegistration, ...], pid: int, stop: int, records: Records, full: int
        ) -> int:
            while pid < stop:
                part = partitions[pid]
                pid += 1
                if touches(part):
                    builder = PartitionChangeBuilder(
                        part, topic_id, pid - 1, is_acceptable, election=election, image=image
                    )
                    if remove_from_isr != NO_LEADER:
                        builder.set_target_isr([b for b in part.isr if b != remove_from_isr])
                    record = builder.build()
                    if record is not None:
                        records.append(record)
                        if len(records) >= full:
                            break
            return pid

        return visit

    return partition_pass(image, visitor, budget, records)


def _remove_broker(
    image: MetadataImage,
    broker_id: int,
    touches: Callable[[PartitionRegistration], bool],
    unclean_default: bool,
    budget: TurnBudget,
    records: Records,
) -> Steps:
    """Kafka's ``generateLeaderAndIsrUpdates`` with ``brokerToRemove`` on the partitions ``touches``
    selects: the broker leaves each one's ISR (unless it is the last member) and leadership (a new
    leader where one is in sync, else none)."""

    def acceptable(candidate: int) -> bool:
        return candidate != broker_id and image.is_unfenced(candidate)

    return _changes(image, touches, acceptable, broker_id, unclean_default, budget, records)


def leave_steps(image: MetadataImage, broker_id: int, unclean_default: bool, budget: TurnBudget) -> Steps:
    """The broker leaves every ISR it is not the last member of and every leadership. Fencing,
    controlled shutdown and unregistering all start with these records."""

    def touches(part: PartitionRegistration) -> bool:
        return part.leader == broker_id or broker_id in part.isr

    return _remove_broker(image, broker_id, touches, unclean_default, budget, [])


def offline_dirs_steps(
    image: MetadataImage,
    broker_id: int,
    offline_log_dirs: Collection[bytes],
    unclean_default: bool,
    budget: TurnBudget,
    records: Records,
) -> Steps:
    """Kafka's ``handleDirectoriesOffline``: when ``offline_log_dirs`` (a heartbeat's) names
    directories the broker still has registered, the broker leaves the ISR and leadership of every
    partition whose replica on it is in one of them, as a fenced broker leaves all of its, then a
    BrokerLogDirsChangeRecord keeps its other directories. Nothing when it names none of them (a
    broker repeats its offline directories in every heartbeat). ``image``: the working image the
    turn began with; ``records``: the turn's records so far, which it does not show yet."""
    broker = image.brokers[broker_id]
    offline = newly_offline(broker, frozenset(offline_log_dirs))
    if not offline:
        return image, records
    # The changes are built on the partitions as the turn's records leave them (a fence's).
    after = image.replay_all(records) if records else image

    def touches(part: PartitionRegistration) -> bool:
        return bool(part.directories) and replica_directory(part, broker_id) in offline

    last_image, records = yield from _remove_broker(after, broker_id, touches, unclean_default, budget, records)
    if last_image is after:  # one turn: the image it began with is the one before ``records``
        last_image = image
    change = records_pb2.BrokerLogDirsChangeRecord(
        broker_id=broker_id, broker_epoch=broker.epoch, log_dirs=online_after(broker, offline)
    )
    records.append(records_pb2.MetadataRecord(broker_log_dirs_change=change))
    return last_image, records


def fence_steps(image: MetadataImage, broker_id: int, unclean_default: bool, budget: TurnBudget) -> Steps:
    """Kafka's ``handleBrokerFenced``: the broker leaves every ISR and every leadership (partition
    changes first), then a FenceBrokerRecord."""
    epoch = image.brokers[broker_id].epoch
    last_image, records = yield from leave_steps(image, broker_id, unclean_default, budget)
    records.append(
        records_pb2.MetadataRecord(fence_broker=records_pb2.FenceBrokerRecord(broker_id=broker_id, broker_epoch=epoch))
    )
    return last_image, records


def unregister_steps(image: MetadataImage, broker_id: int, unclean_default: bool, budget: TurnBudget) -> Steps:
    """Kafka's ``handleBrokerUnregistered``: the broker leaves every ISR and leadership, then an
    UnregisterBrokerRecord removes its registration."""
    epoch = image.brokers[broker_id].epoch
    last_image, records = yield from leave_steps(image, broker_id, unclean_default, budget)
    records.append(
        records_pb2.MetadataRecord(
            unregister_broker=records_pb2.UnregisterBrokerRecord(broker_id=broker_id, broker_epoch=epoch)
        )
    )
    return last_image, records


def unfence_steps(image: MetadataImage, broker_id: int, unclean_default: bool, budget: TurnBudget) -> Steps:
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

    def touches(part: PartitionRegistration) -> bool:
        return part.leader == NO_LEADER

    return (yield from _changes(image, touches, acceptable, NO_LEADER, unclean_default, budget, records))


def fence_records(image: MetadataImage, broker_id: int, unclean_default: bool) -> Records:
    """Every record of :func:`fence_steps` at once."""
    return complete(fence_steps(image, broker_id, unclean_default, UNBOUNDED))


def unregister_records(image: MetadataImage, broker_id: int, unclean_default: bool) -> Records:
    """Every record of :func:`unregister_steps` at once."""
    return complete(unregister_steps(image, broker_id, unclean_default, UNBOUNDED))


def unfence_records(image: MetadataImage, broker_id: int, unclean_default: bool) -> Records:
    """Every record of :func:`unfence_steps` at once."""
    return complete(unfence_steps(image, broker_id, unclean_default, UNBOUNDED))


@dataclass
class ScanPass:
    """Where a pass over the image that runs between requests stands (the imbalance check, the
    leaderless check): the topics there were when it began, by name (topics created since are
    looked at by the next pass), and the next partition to look at. Each call reads the working
    image of its time, so requests may come between calls."""

    names: list[str]
    topic_index: int = 0
    partition_index: int = 0

    @classmethod
    def over(cls, image: MetadataImage) -> ScanPass:
        return cls([topic.name for topic in image.topics_sorted()])


# Per topic, the change a pass makes to one partition (partition id, partition), if any.
PartitionRule = Callable[[TopicImage], Callable[[int, PartitionRegistration], "records_pb2.MetadataRecord | None"]]


def scan_records(
    image: MetadataImage, scan: ScanPass, rule: PartitionRule, max_records: int, scan_max: int
) -> tuple[Records, bool]:
    """The records ``rule`` makes on the partitions after where ``scan`` stands (which moves
    on), by topic name then partition id: at most ``max_records`` of them, from at most
    ``scan_max`` partitions. Returns (records, whether the pass has more to look at)."""
    records: Records = []
    scanned = 0
    names = scan.names
    while scan.topic_index < len(names):
        topic = image.topic_by_name(names[scan.topic_index])
        if topic is not None:
            partitions = topic.partitions
            change = rule(topic)
            pid = scan.partition_index
            while pid < len(partitions):
                if len(records) >= max_records or scanned >= scan_max:
                    scan.partition_index = pid
                    return records, True
                scanned += 1
                record = change(pid, partitions[pid])
                if record is not None:
                    records.append(record)
                pid += 1
        scan.topic_index += 1
        scan.partition_index = 0
    return records, False


def preferred_rule(image: MetadataImage) -> PartitionRule:
    """Kafka's ``maybeBalancePartitionLeaders``: a PREFERRED election on every imbalanced
    partition (a leader that is not its first replica: Kafka's ``imbalancedPartitions``) whose
    preferred replica is unfenced and in sync. Kafka keeps an index of imbalanced partitions;
    raftmeta's pass looks at the image instead."""

    def for_topic(topic: TopicImage) -> Callable[[int, PartitionRegistration], records_pb2.MetadataRecord | None]:
        def change(pid: int, part: PartitionRegistration) -> records_pb2.MetadataRecord | None:
            if part.leader == NO_LEADER or part.leader == part.replicas[0]:
                return None
            return PartitionChangeBuilder.in_image(
                image, part, topic.topic_id, pid, election=Election.PREFERRED
            ).build()

        return change

    return for_topic


def leaderless_rule(image: MetadataImage, unclean_default: bool) -> PartitionRule:
    """A leaderless partition elects a leader where one is acceptable: the elections an unfence
    makes (:func:`unfence_steps`). An unfence that takes several batches is not atomic, and a
    leader that loses its leadership midway leaves the broker unfenced with some of those
    partitions still leaderless; nothing else would elect them, so a new controller looks once."""

    def for_topic(topic: TopicImage) -> Callable[[int, PartitionRegistration], records_pb2.MetadataRecord | None]:
        election = Election.UNCLEAN if unclean_enabled(image, topic, unclean_default) else Election.ONLINE

        def change(pid: int, part: PartitionRegistration) -> records_pb2.MetadataRecord | None:
            if part.leader != NO_LEADER:
                return None
            return PartitionChangeBuilder.in_image(image, part, topic.topic_id, pid, election=election).build()

        return change

    return for_topic
