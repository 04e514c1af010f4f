"""The committed log's rules (the record half of :mod:`raftmeta.sim.oracle`): every committed
record judged from the replay of the records before it, and a node's image compared with that
replay after each batch.

The replay is a few dicts (brokers, topics, partitions, configs, request digests), written from
Kafka's rules (``PartitionChangeBuilder``, ``PartitionRegistration.merge``) and not by calling the
controller's handlers, its builder or its replay, so that a mutation of any of those cannot hide
itself here. Rules: leader-election, isr-addition, fenced-leads-nothing, epochs, removed-topic,
image-agrees (see the oracle's docstring).
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import text_format
from google.protobuf.message import Message

from raftmeta.api.ids import id_text
from raftmeta.controller.image import REQUEST_TABLE_CAPACITY, MetadataImage
from raftmeta.raft import Entry
from raftmeta.records.decode import record_bytes
from raftmeta.sim.checker import InvariantViolation
from raftmeta.v1 import records_pb2

NO_LEADER = -1
TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
UNCLEAN = "unclean.leader.election.enable"
# Records that change no metadata (Kafka's control records and NoOpRecord): a batch of only these
# leaves the image as it was.
NO_METADATA_KINDS = frozenset({"leader_change", "no_op", "snapshot_header", "snapshot_footer", "voters"})


def as_text(message: Message) -> str:
    """A record or request on one line, as a break names it."""
    return text_format.MessageToString(message, as_one_line=True, use_short_repeated_primitives=True)


def _is_true(value: str | None) -> bool:
    return value is not None and value.strip().lower() == "true"


@dataclass(slots=True)
class _Partition:
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    removing: tuple[int, ...] = ()
    adding: tuple[int, ...] = ()

    def facts(self) -> str:
        return (
            f"replicas {list(self.replicas)}, isr {list(self.isr)}, leader {self.leader}, "
            f"leader epoch {self.leader_epoch}, partition epoch {self.partition_epoch}"
            + (f", adding {list(self.adding)}, removing {list(self.removing)}" if self.adding or self.removing else "")
        )


@dataclass(slots=True)
class _Topic:
    name: str
    topic_id: bytes
    partitions: list[_Partition] = field(default_factory=list)
    configs: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class _Broker:
    epoch: int
    fenced: bool


class CommittedLogRules:
    """The committed log replayed by the rules. Feed it every committed batch once, in order
    (:meth:`consume`), and :meth:`compare` the image of the node that applied them."""

    def __init__(self, checks: Counter[str], *, unclean_default: bool = False) -> None:
        self.unclean_default = unclean_default
        self.next_offset = 0
        self.brokers: dict[int, _Broker] = {}
        self.topics: dict[bytes, _Topic] = {}
        self.names: dict[str, bytes] = {}
        self.removed: dict[bytes, str] = {}
        self.cluster_configs: dict[str, str] = {}
        self.requests: dict[str, bytes] = {}  # request id -> digest, oldest first (the table's bound)
        self.checks = checks  # shared with the answers' rules: one count per rule
        # Last offsets of the committed batches that change the image (not control batches only:
        # a LeaderChange, voters or no-op batch changes no metadata, so an image before it is the
        # image after it -- the controller's committed offset need not pass it).
        self._changing_ends: list[int] = []
        self._touched_topics: set[bytes] = set()
        self._touched_brokers: set[int] = set()
        self._touched_requests: list[str] = []
        self._removed_now = False

    # -- the committed log --------------------------------------------------------------------------
    def consume(self, entries: Sequence[Entry]) -> bool:
        """Check and replay the committed batches not seen yet; True if there were any (then
        :meth:`compare` the image of the node that applied them)."""
        fresh = False
        for entry in entries:
            if entry.next_offset <= self.next_offset:
                continue
            assert entry.base_offset == self.next_offset, (
                f"the oracle expects offset {self.next_offset}, a node applied {entry.base_offset}"
            )
            parse = records_pb2.MetadataRecord.FromString
            changes = False
            for index, raw in enumerate(record_bytes(entry.data)):
                record = parse(raw)
                changes = changes or record.WhichOneof("record") not in NO_METADATA_KINDS
                self._record(entry.base_offset + index, record)
            if changes:
                self._changing_ends.append(entry.next_offset - 1)
            self.next_offset = entry.next_offset
            fresh = True
        return fresh

    def check(self, offset: int, record: records_pb2.MetadataRecord) -> None:
        """Judge and replay one committed record (a reader that walks records, not batches)."""
        self._record(offset, record)
        self.next_offset = offset + 1

    def load(self, image: MetadataImage, offset: int) -> None:
        """Go on from a snapshot's image, the records before ``offset`` unseen (a tape with a gap)."""
        self.brokers = {b.id: _Broker(b.epoch, b.fenced) for b in image.brokers.values()}
        self.topics = {
            topic.topic_id: _Topic(
                topic.name,
                topic.topic_id,
                # The image's state but the directories (KIP-858), which no rule here judges.
                [
                    _Partition(
                        p.replicas,
                        p.isr,
                        p.leader,
                        p.leader_epoch,
                        p.partition_epoch,
                        p.removing_replicas,
                        p.adding_replicas,
                    )
                    for p in topic.partitions
                ],
                dict(topic.configs),
            )
            for _, topic in image.topics.iter_items()
        }
        self.names = {topic.name: topic_id for topic_id, topic in self.topics.items()}
        self.cluster_configs = dict(image.configs.get((BROKER_RESOURCE, ""), {}))
        self.requests = {request_id: entry.request_sha256 for request_id, entry in image.requests.in_order()}
        self.next_offset = offset

    def _break(self, rule: str, offset: int, record: Message, facts: str) -> InvariantViolation:
        return InvariantViolation(f"rule-{rule}", f"offset {offset}: {as_text(record)}; {facts}")

    def _record(self, offset: int, record: records_pb2.MetadataRecord) -> None:
        kind = record.WhichOneof("record")
        if kind == "partition_change":
            self._partition_change(offset, record, record.partition_change)
        elif kind == "partition":
            self._partition(offset, record, record.partition)
        elif kind == "topic":
            self._topic(offset, record, record.topic)
        elif kind == "remove_topic":
            self._remove_topic(offset, record, record.remove_topic)
        elif kind == "register_broker":
            self._register(offset, record, record.register_broker)
        elif kind in ("fence_broker", "unfence_broker", "unregister_broker", "broker_log_dirs_change"):
            self._broker_state(offset, record, kind, getattr(record, kind))
        elif kind == "config":
            self._config(offset, record, record.config)
        elif kind == "request":
            self._request(offset, record, record.request)

    def _topic_of(self, offset: int, record: Message, topic_id: bytes) -> _Topic:
        topic = self.topics.get(topic_id)
        if topic is None:
            removed = self.removed.get(topic_id)
            if removed is not None:
                raise self._break(
                    "removed-topic", offset, record, f"topic {removed!r} ({id_text(topic_id)}) was removed"
                )
            raise self._break("image-agrees", offset, record, f"no topic with id {id_text(topic_id)}")
        return topic

    def _unclean_enabled(self, topic: _Topic) -> bool:
        value = topic.configs.get(UNCLEAN, self.cluster_configs.get(UNCLEAN))
        return self.unclean_default if value is None else _is_true(value)

    def _broker_facts(self, broker_id: int) -> str:
        broker = self.brokers.get(broker_id)
        if broker is None:
            return f"broker {broker_id} is not registered"
        return f"broker {broker_id} epoch {broker.epoch} {'fenced' if broker.fenced else 'unfenced'}"

    def _unfenced(self, broker_id: int) -> bool:
        broker = self.brokers.get(broker_id)
        return broker is not None and not broker.fenced

    def _partition(self, offset: int, record: Message, rec: records_pb2.PartitionRecord) -> None:
        topic = self._topic_of(offset, record, rec.topic_id)
        part = _Partition(
            tuple(rec.replicas), tuple(rec.isr), rec.leader, rec.leader_epoch, rec.partition_epoch,
            tuple(rec.removing_replicas), tuple(rec.adding_replicas),
        )  # fmt: skip
        self.checks["leader-election"] += 1
        if rec.partition_id != len(topic.partitions):
            raise self._break(
                "image-agrees", offset, record, f"topic {topic.name!r} has {len(topic.partitions)} partitions"
            )
        if part.leader != NO_LEADER and (part.leader not in part.isr or not self._unfenced(part.leader)):
            raise self._break(
                "leader-election", offset, record, f"a new partition led by {self._broker_facts(part.leader)}"
            )
        topic.partitions.append(part)
        self._touched_topics.add(rec.topic_id)

    def _partition_change(self, offset: int, record: Message, rec: records_pb2.PartitionChangeRecord) -> None:
        topic = self._topic_of(offset, record, rec.topic_id)
        pid = rec.partition_id
        if not 0 <= pid < len(topic.partitions):
            raise self._break("image-agrees", offset, record, f"topic {topic.name!r} has {len(topic.partitions)}")
        before = topic.partitions[pid]
        where = f"{topic.name}-{pid} before: {before.facts()}"
        leader = rec.leader if rec.HasField("leader") else before.leader
        isr = tuple(rec.isr.ids) if rec.HasField("isr") else before.isr
        replicas = tuple(rec.replicas.ids) if rec.HasField("replicas") else before.replicas
        # Kafka: the leader epoch rises when the leader changes, or when a replica leaves the
        # replica set (triggerLeaderEpochBumpForReplicaReassignmentIfNeeded); the partition
        # epoch on every change (PartitionRegistration.merge). The ISR shrink bump ended in 3.6.
        leader_changed = leader != before.leader
        bump = leader_changed or not set(before.replicas) <= set(replicas)
        expected = (before.leader_epoch + int(bump), before.partition_epoch + 1)
        self.checks["epochs"] += 1
        if (rec.leader_epoch, rec.partition_epoch) != expected:
            raise self._break(
                "epochs",
                offset,
                record,
                f"{where}; expected leader epoch {expected[0]}, partition epoch {expected[1]}",
            )
        self.checks["leader-election"] += 1
        if leader_changed and leader != NO_LEADER:
            if leader not in replicas or leader not in isr or not self._unfenced(leader):
                raise self._break(
                    "leader-election", offset, record, f"{where}; new leader: {self._broker_facts(leader)}"
                )
            if rec.unclean_election:
                self.checks["leader-election-unclean"] += 1
                if not self._unclean_enabled(topic):
                    raise self._break(
                        "leader-election",
                        offset,
                        record,
                        f"{where}; an unclean election, but {UNCLEAN} is off for topic {topic.name!r}",
                    )
                if isr != (leader,):
                    raise self._break(
                        "leader-election", offset, record, f"{where}; an unclean election keeps ISR {list(isr)}"
                    )
            elif leader not in before.isr and not rec.HasField("replicas"):
                # Only a completed reassignment (a new replica list) may elect a replica that has
                # just joined the ISR; any other clean election takes a member of the ISR.
                raise self._break(
                    "leader-election",
                    offset,
                    record,
                    f"{where}; leader {leader} was not in the ISR and the change is not marked unclean",
                )
        elif rec.unclean_election:
            raise self._break("leader-election", offset, record, f"{where}; marked unclean without a new leader")
        self.checks["isr-addition"] += 1
        for broker in isr:
            if broker not in before.isr and (broker not in replicas or not self._unfenced(broker)):
                raise self._break(
                    "isr-addition", offset, record, f"{where}; joining the ISR: {self._broker_facts(broker)}"
                )
        topic.partitions[pid] = _Partition(
            replicas,
            isr,
            leader,
            rec.leader_epoch,
            rec.partition_epoch,
            tuple(rec.removing_replicas.ids) if rec.HasField("removing_replicas") else before.removing,
            tuple(rec.adding_replicas.ids) if rec.HasField("adding_replicas") else before.adding,
        )
        self._touched_topics.add(rec.topic_id)

    def _topic(self, offset: int, record: Message, rec: records_pb2.TopicRecord) -> None:
        if rec.topic_id in self.topics or rec.topic_id in self.removed or rec.name in self.names:
            raise self._break("image-agrees", offset, record, "the topic id or name is taken (or was removed)")
        self.topics[rec.topic_id] = _Topic(rec.name, rec.topic_id)
        self.names[rec.name] = rec.topic_id
        self._touched_topics.add(rec.topic_id)

    def _remove_topic(self, offset: int, record: Message, rec: records_pb2.RemoveTopicRecord) -> None:
        topic = self._topic_of(offset, record, rec.topic_id)
        del self.topics[rec.topic_id]
        del self.names[topic.name]
        self.removed[rec.topic_id] = topic.name
        self._touched_topics.add(rec.topic_id)
        self._removed_now = True

    def _register(self, offset: int, record: Message, rec: records_pb2.RegisterBrokerRecord) -> None:
        before = self.brokers.get(rec.broker_id)
        self.checks["epochs"] += 1
        if before is not None and rec.broker_epoch <= before.epoch:
            raise self._break("epochs", offset, record, f"{self._broker_facts(rec.broker_id)}: the epoch must rise")
        if before is not None and not before.fenced:
            # Kafka replaces a registration only once the old incarnation is fenced, so the new
            # (fenced) one never inherits a leadership.
            self._leads_nothing(offset, record, rec.broker_id)
        self.brokers[rec.broker_id] = _Broker(rec.broker_epoch, rec.fenced)
        self._touched_brokers.add(rec.broker_id)

    def _broker_state(self, offset: int, record: Message, kind: str, rec: Any) -> None:
        broker = self.brokers.get(rec.broker_id)
        self.checks["epochs"] += 1
        if broker is None or broker.epoch != rec.broker_epoch:
            raise self._break("epochs", offset, record, f"{self._broker_facts(rec.broker_id)}")
        if kind == "unregister_broker":
            del self.brokers[rec.broker_id]
        elif kind in ("fence_broker", "unfence_broker"):
            broker.fenced = kind == "fence_broker"
        if kind in ("fence_broker", "unregister_broker"):
            self._leads_nothing(offset, record, rec.broker_id)
        self._touched_brokers.add(rec.broker_id)

    def _leads_nothing(self, offset: int, record: Message, broker_id: int) -> None:
        self.checks["fenced-leads-nothing"] += 1
        for topic in self.topics.values():
            for pid, part in enumerate(topic.partitions):
                if part.leader == broker_id:
                    raise self._break(
                        "fenced-leads-nothing",
                        offset,
                        record,
                        f"broker {broker_id} still leads {topic.name}-{pid} ({part.facts()})",
                    )

    def _config(self, offset: int, record: Message, rec: records_pb2.ConfigRecord) -> None:
        if rec.resource_type == TOPIC_RESOURCE:
            topic_id = self.names.get(rec.resource_name)
            if topic_id is None:
                raise self._break("image-agrees", offset, record, f"no topic named {rec.resource_name!r}")
            configs = self.topics[topic_id].configs
            self._touched_topics.add(topic_id)
        elif rec.resource_type == BROKER_RESOURCE and rec.resource_name == "":
            configs = self.cluster_configs
        else:
            return  # a single broker's config: no rule here reads it
        if rec.HasField("value"):
            configs[rec.name] = rec.value
        else:
            configs.pop(rec.name, None)

    def _request(self, offset: int, record: Message, rec: records_pb2.RequestRecord) -> None:
        self.checks["request-digest"] += 1
        if rec.request_id in self.requests:
            raise self._break("request-digest", offset, record, f"request id {rec.request_id!r} is already answered")
        self.requests[rec.request_id] = rec.request_sha256
        self._touched_requests.append(rec.request_id)
        while len(self.requests) > REQUEST_TABLE_CAPACITY:  # the table's bound is part of the log format
            del self.requests[next(iter(self.requests))]

    # -- a node's image after a batch ----------------------------------------------------------------
    def compare(self, node_id: int, image: MetadataImage, offset: int) -> None:
        """The image of the node that applied the batches :meth:`consume` just replayed shows what
        they say about the topics and brokers they touched."""
        self.checks["image-agrees"] += 1
        at = f"node {node_id}'s image at offset {offset}"
        for topic_id in self._touched_topics:
            topic = self.topics.get(topic_id)
            shown = image.topics.get(topic_id)
            if topic is None:
                self.checks["removed-topic"] += 1
                name = self.removed[topic_id]
                left = [
                    what
                    for what, kept in (
                        ("its partitions", shown is not None),
                        ("its name", image.topic_ids.get(name) == topic_id),
                        ("a reassignment", any(key[0] == topic_id for key in image.reassigning)),
                    )
                    if kept
                ]
                if left:
                    raise InvariantViolation(
                        "rule-removed-topic",
                        f"{at} still holds removed topic {name!r} ({id_text(topic_id)}): {', '.join(left)}",
                    )
                continue
            # No directories (KIP-858): the simulated brokers register no log directory, so every
            # replica's is MIGRATING, which a partition keeps as none.
            mine = [
                (p.replicas, p.isr, p.leader, p.leader_epoch, p.partition_epoch, p.removing, p.adding, ())
                for p in topic.partitions
            ]
            theirs = [tuple(p) for p in shown.partitions] if shown is not None else None
            if theirs != mine or image.topic_ids.get(topic.name) != topic_id:
                raise InvariantViolation(
                    "rule-image-agrees", f"{at}: topic {topic.name!r} is {theirs}, the committed records say {mine}"
                )
        for broker_id in self._touched_brokers:
            broker = self.brokers.get(broker_id)
            registered = image.brokers.get(broker_id)
            mine_b = None if broker is None else (broker.epoch, broker.fenced)
            theirs_b = None if registered is None else (registered.epoch, registered.fenced)
            if mine_b != theirs_b:
                raise InvariantViolation(
                    "rule-image-agrees",
                    f"{at}: broker {broker_id} (epoch, fenced) is {theirs_b}, the records say {mine_b}",
                )
        if self._removed_now:
            self._check_counts(at, image)
        for request_id in self._touched_requests:
            digest = self.requests.get(request_id)
            if digest is None:
                continue  # evicted within the batch
            entry = image.requests.get(request_id)
            if entry is None or entry.request_sha256 != digest:
                raise InvariantViolation(
                    "rule-image-agrees",
                    f"{at}: request id {request_id!r} is "
                    f"{'missing' if entry is None else 'recorded with digest ' + entry.request_sha256.hex()[:16]}"
                    f", the records say digest {digest.hex()[:16]}",
                )
        self._touched_topics.clear()
        self._touched_brokers.clear()
        self._touched_requests.clear()
        self._removed_now = False

    def _check_counts(self, at: str, image: MetadataImage) -> None:
        """After a removal the image counts only the partitions of the topics that remain."""
        self.checks["removed-topic"] += 1
        partitions = sum(len(t.partitions) for t in self.topics.values())
        replicas: Counter[int] = Counter()
        leaders: Counter[int] = Counter()
        for topic in self.topics.values():
            for part in topic.partitions:
                replicas.update(part.replicas)
                if part.leader != NO_LEADER:
                    leaders[part.leader] += 1
        shown = (image.partition_count, dict(image.replica_counts), dict(image.leader_counts))
        if shown != (partitions, dict(replicas), dict(leaders)):
            raise InvariantViolation(
                "rule-removed-topic",
                f"{at} counts {shown[0]} partitions (replicas per broker {shown[1]}, leaders {shown[2]}); the "
                f"remaining topics have {partitions} ({dict(replicas)}, {dict(leaders)})",
            )

    # -- what the read-index rule needs of the log ---------------------------------------------------
    def last_change_at_or_before(self, offset: int) -> int:
        """The last offset at or before ``offset`` of a batch that changed the image (-1: none)."""
        ends = self._changing_ends
        at = bisect.bisect_right(ends, offset)
        return ends[at - 1] if at else -1
