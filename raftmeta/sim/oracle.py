"""The controller's rules as an oracle: every committed change checked against the rule that
allows it, from the image before it (issue 44, deliverable 4).

The plane's invariant 7 checks the *shape* of every partition state; this module checks the rules
that produced it. It keeps its own replay of the committed log (a few dicts: brokers, topics,
partitions, configs, request digests), written from Kafka's rules and not by calling the
controller's handlers, its builder or its replay, so a mutation of any of those cannot hide itself
here. Where the same rule must be written twice (an epoch bump, a digest) it is written from
Kafka's definition (``PartitionChangeBuilder`` and ``PartitionRegistration.merge``; the digest the
log format stores), and the two copies meet only in the log, where they must agree.

Rules (the invariant a break is reported under is ``rule-<name>``):

- ``leader-election``: a new leader is a registered, unfenced replica; a clean election takes it
  from the ISR before the change; an unclean one is marked ``unclean_election``, only where the
  topic (or else the cluster default) enables ``unclean.leader.election.enable``, and resets the
  ISR to the new leader alone. A new partition's leader is an unfenced member of its ISR.
- ``isr-addition``: a broker joins an ISR only registered and unfenced, as a replica.
- ``fenced-leads-nothing``: once a FenceBrokerRecord or UnregisterBrokerRecord is replayed, that
  broker leads no partition (the controller moves its leaderships first).
- ``epochs``: a partition change has partition epoch + 1; leader epoch + 1 when the leader changes
  or a replica leaves the replica set, unchanged otherwise. Broker epochs rise with every
  registration, and a fence, unfence or unregistration names the registered epoch.
- ``removed-topic``: after a RemoveTopicRecord no record names the topic again, and the node's
  image holds nothing of it: no id, no name, no partitions in its counts, no reassignment.
- ``image-agrees``: after every committed batch, the node that first applied it shows the topics
  and brokers the batch touched as this replay does (and its request table the same digests).
- ``request-digest``: a request id answers only its own request: a RequestRecord carries the
  digest of the request handled, an id is recorded once, and a request answered from the table
  (a retry) has the digest recorded for its id.
- ``heartbeat-epoch``: a heartbeat is accepted (answered NONE) only with the broker's registered
  epoch in the image it was handled on.
- ``alter-partition``: an AlterPartition is accepted for a partition only from its leader, with the
  sender's registered broker epoch and the partition's current leader and partition epochs; the
  ISR members it adds are registered, unfenced, given with their registered epochs (or -1, unknown),
  and the record's additions are ones the leader asked for (the leader alone knows who caught up).
- ``read-index``: a linearizable read is answered from an image at or past its index (the
  consensus core's: the high watermark when the read reached the leader, and at least the
  leader's first batch) and past every offset any node had applied by then.
- ``broker-fenced-leader`` (the simulated brokers' side): the metadata the partition leaders read
  never shows a fenced broker leading a partition.

A break is an :class:`~raftmeta.sim.checker.InvariantViolation` naming the rule, the offset, the
record and the image facts that broke it; the simulator adds the command that replays the seed.
"""

from __future__ import annotations

import bisect
import hashlib
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import text_format
from google.protobuf.message import Message

from raftmeta.controller.controller import Controller
from raftmeta.controller.image import REQUEST_TABLE_CAPACITY, MetadataImage
from raftmeta.raft import Entry
from raftmeta.records.decode import record_bytes
from raftmeta.sim.checker import InvariantViolation
from raftmeta.v1 import controller_pb2, errors_pb2, records_pb2

NO_LEADER = -1
UNKNOWN_BROKER_EPOCH = -1  # AlterPartition v3 (KIP-903): an ISR member whose epoch the leader does not know
TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
UNCLEAN = "unclean.leader.election.enable"
# Records that change no metadata (Kafka's control records and NoOpRecord): a batch of only these
# leaves the image as it was.
NO_METADATA_KINDS = frozenset({"leader_change", "no_op", "snapshot_header", "snapshot_footer", "voters"})
# The request fields a retry may change (the log format's digest leaves them out): the caller's
# wait, and the id itself.
UNDIGESTED = ("request_id", "timeout_ms")

RULES = (
    "leader-election",
    "isr-addition",
    "fenced-leads-nothing",
    "epochs",
    "removed-topic",
    "image-agrees",
    "request-digest",
    "heartbeat-epoch",
    "alter-partition",
    "read-index",
    "broker-fenced-leader",
)


def digest_of(request: Message) -> bytes:
    """SHA-256 of the request as the log format defines it (deterministic serialization, without
    the fields of ``UNDIGESTED``)."""
    body = type(request)()
    body.CopyFrom(request)
    for name in UNDIGESTED:
        if name in body.DESCRIPTOR.fields_by_name:
            body.ClearField(name)
    return hashlib.sha256(body.SerializeToString(deterministic=True)).digest()


def _text(message: Message) -> str:
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


@dataclass(slots=True)
class _Handling:
    """What a controller's ``handle`` saw of one request: the request (kept so its ``id`` stays
    unique while it is here), the controller, its working image, its committed offset."""

    request: Message
    controller: Controller
    image: MetadataImage
    committed_offset: int


class RuleOracle:
    """The committed log replayed by the rules (see the module docstring). Feed it every committed
    batch once, in order (:meth:`consume`), and let it watch each controller's handling
    (:meth:`watch`) and the answers (:meth:`answered`)."""

    def __init__(self, *, unclean_default: bool = False) -> None:
        self.unclean_default = unclean_default
        self.next_offset = 0
        self.brokers: dict[int, _Broker] = {}
        self.topics: dict[bytes, _Topic] = {}
        self.names: dict[str, bytes] = {}
        self.removed: dict[bytes, str] = {}
        self.cluster_configs: dict[str, str] = {}
        self.requests: dict[str, bytes] = {}  # request id -> digest, oldest first (the table's bound)
        self.checks: Counter[str] = Counter()
        self._handled: dict[int, _Handling] = {}
        self._arrived: dict[tuple[int, int], int] = {}  # (node, call key) -> last offset applied anywhere
        # Last offsets of the committed batches that change the image (not control batches only:
        # a LeaderChange, voters or no-op batch changes no metadata, so an image before it is the
        # image after it -- the controller's committed offset need not pass it).
        self._changing_ends: list[int] = []
        self._touched_topics: set[bytes] = set()
        self._touched_brokers: set[int] = set()
        self._touched_requests: list[str] = []
        self._removed_now = False
        # A break found inside a controller's handle: raised by raise_pending (raising there would
        # reach the client as the controller's own failure, not as the rule).
        self.pending: InvariantViolation | None = None

    def raise_pending(self) -> None:
        if self.pending is not None:
            raise self.pending

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
                topic.name, topic.topic_id, [_Partition(*part) for part in topic.partitions], dict(topic.configs)
            )
            for _, topic in image.topics.iter_items()
        }
        self.names = {topic.name: topic_id for topic_id, topic in self.topics.items()}
        self.cluster_configs = dict(image.configs.get((BROKER_RESOURCE, ""), {}))
        self.requests = {request_id: entry.request_sha256 for request_id, entry in image.requests.in_order()}
        self.next_offset = offset

    def _break(self, rule: str, offset: int, record: Message, facts: str) -> InvariantViolation:
        return InvariantViolation(f"rule-{rule}", f"offset {offset}: {_text(record)}; {facts}")

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
        elif kind in ("fence_broker", "unfence_broker", "unregister_broker"):
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
                raise self._break("removed-topic", offset, record, f"topic {removed!r} ({topic_id.hex()}) was removed")
            raise self._break("image-agrees", offset, record, f"no topic with id {topic_id.hex()}")
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
        else:
            broker.fenced = kind == "fence_broker"
        if kind != "unfence_broker":
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
                        f"{at} still holds removed topic {name!r} ({topic_id.hex()}): {', '.join(left)}",
                    )
                continue
            mine = [
                (p.replicas, p.isr, p.leader, p.leader_epoch, p.partition_epoch, p.removing, p.adding)
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

    # -- requests as the controllers handle them --------------------------------------------------------
    def watch(self, controller: Controller) -> None:
        """Wrap ``controller.handle``: remember the image each request was handled on, and check
        the request-id rule there (a retry answered from the table, a RequestRecord written)."""
        handle = controller.handle

        def handle_watched(method: str, request: Message, now_ms: int, *args: Any, **kwargs: Any) -> Any:
            image = controller.image
            committed = controller.committed_offset
            handled = handle(method, request, now_ms, *args, **kwargs)
            self._handled[id(request)] = _Handling(request, controller, image, committed)
            request_id: str = getattr(request, "request_id", "")
            if request_id and self.pending is None:
                try:
                    self._check_request_id(method, request, request_id, image, handled.records)
                except InvariantViolation as broken:
                    self.pending = broken
            return handled

        controller.handle = handle_watched  # type: ignore[method-assign]

    def _check_request_id(
        self,
        method: str,
        request: Message,
        request_id: str,
        image: MetadataImage,
        records: Iterable[records_pb2.MetadataRecord],
    ) -> None:
        self.checks["request-digest"] += 1
        digest = digest_of(request)
        entry = image.requests.get(request_id)
        written = [r.request for r in records if r.WhichOneof("record") == "request"]
        if entry is not None and (written or entry.request_sha256 != digest or entry.method != method):
            raise InvariantViolation(
                "rule-request-digest",
                f"request id {request_id!r} ({method}, digest {digest.hex()[:16]}) answered from the table, "
                f"which recorded it for {entry.method} with digest {entry.request_sha256.hex()[:16]}: {_text(request)}",
            )
        for rec in written:
            if rec.request_id != request_id or rec.request_sha256 != digest:
                raise InvariantViolation(
                    "rule-request-digest",
                    f"{method} with request id {request_id!r} (digest {digest.hex()[:16]}) wrote {_text(rec)[:200]}",
                )

    def _last_change_at_or_before(self, offset: int) -> int:
        """The last offset at or before ``offset`` of a batch that changed the image (-1: none)."""
        ends = self._changing_ends
        at = bisect.bisect_right(ends, offset)
        return ends[at - 1] if at else -1

    def arrived(self, node_id: int, key: int, committed_last: int) -> None:
        """A read reached a node when ``committed_last`` was committed (the image must reach it)."""
        self._arrived[(node_id, key)] = committed_last

    def answered(self, node_id: int, controller: Controller, key: int, request: Message, response: Message) -> None:
        """A call answered by ``node_id``: the rules on what may be accepted, checked on the image
        the request was handled on."""
        arrived = self._arrived.pop((node_id, key), None)
        handling = self._handled.pop(id(request), None)
        if handling is None or handling.request is not request or handling.controller is not controller:
            return  # handled by an earlier controller of the node (a snapshot replaced it) or elsewhere
        if isinstance(response, controller_pb2.DescribeTopicsResponse):
            self.checks["read-index"] += 1
            if arrived is not None and handling.committed_offset < self._last_change_at_or_before(arrived):
                raise InvariantViolation(
                    "rule-read-index",
                    f"node {node_id} answered a read from its image at offset {handling.committed_offset}; "
                    f"offset {arrived} was committed when the read arrived: {_text(request)[:200]}",
                )
        elif isinstance(response, controller_pb2.BrokerHeartbeatResponse):
            assert isinstance(request, controller_pb2.BrokerHeartbeatRequest)
            self.checks["heartbeat-epoch"] += 1
            registered = handling.image.brokers.get(request.broker_id)
            if response.error_code == errors_pb2.NONE and (
                registered is None or registered.epoch != request.broker_epoch
            ):
                raise InvariantViolation(
                    "rule-heartbeat-epoch",
                    f"node {node_id} accepted a heartbeat of broker {request.broker_id} with epoch "
                    f"{request.broker_epoch}; registered: {registered.epoch if registered else 'none'}",
                )
        elif isinstance(response, controller_pb2.AlterPartitionResponse):
            assert isinstance(request, controller_pb2.AlterPartitionRequest)
            self._alter_partition(node_id, handling.image, request, response)

    def _alter_partition(
        self,
        node_id: int,
        image: MetadataImage,
        request: controller_pb2.AlterPartitionRequest,
        response: controller_pb2.AlterPartitionResponse,
    ) -> None:
        if response.error_code != errors_pb2.NONE:
            return
        sender = image.brokers.get(request.broker_id)
        asked = {(bytes(t.topic_id), p.partition_index): p for t in request.topics for p in t.partitions}
        for topic_result in response.topics:
            for result in topic_result.partitions:
                if result.error_code != errors_pb2.NONE:
                    continue
                self.checks["alter-partition"] += 1
                data = asked[(bytes(topic_result.topic_id), result.partition_index)]
                part = image.partition(bytes(topic_result.topic_id), result.partition_index)
                problems = []
                if sender is None or sender.epoch != request.broker_epoch:
                    problems.append(
                        f"sender epoch {request.broker_epoch}, registered {sender.epoch if sender else None}"
                    )
                if part is None:
                    problems.append("no such partition")
                else:
                    if part.leader != request.broker_id:
                        problems.append(f"the leader is {part.leader}")
                    if (data.leader_epoch, data.partition_epoch) != (part.leader_epoch, part.partition_epoch):
                        problems.append(
                            f"asked at leader epoch {data.leader_epoch}, partition epoch {data.partition_epoch}; "
                            f"current {part.leader_epoch}, {part.partition_epoch}"
                        )
                    for member in data.new_isr_with_epochs:
                        if member.broker_id in part.isr:
                            continue
                        joining = image.brokers.get(member.broker_id)
                        if joining is None or joining.fenced:
                            problems.append(f"adds {'fenced' if joining else 'unregistered'} broker {member.broker_id}")
                        elif member.broker_epoch not in (UNKNOWN_BROKER_EPOCH, joining.epoch):
                            problems.append(
                                f"adds broker {member.broker_id} at epoch {member.broker_epoch}, "
                                f"registered {joining.epoch}"
                            )
                    added = set(result.isr) - set(part.isr)
                    beyond = added - {m.broker_id for m in data.new_isr_with_epochs}
                    if beyond:
                        problems.append(f"the ISR gained {sorted(beyond)}, which the leader did not ask for")
                if problems:
                    raise InvariantViolation(
                        "rule-alter-partition",
                        f"node {node_id} accepted AlterPartition from broker {request.broker_id} for partition "
                        f"{result.partition_index} of {bytes(topic_result.topic_id).hex()}: {'; '.join(problems)}",
                    )

    # -- the simulated brokers' side -----------------------------------------------------------------
    def told(self, image: MetadataImage, source: Callable[[], str]) -> None:
        """The partition leaders read ``image``: no fenced broker leads a partition in it."""
        self.checks["broker-fenced-leader"] += 1
        fenced = {b for b, r in image.brokers.items() if r.fenced}
        if not fenced:
            return
        for _, topic in image.topics.iter_items():
            for pid, part in enumerate(topic.partitions):
                if part.leader in fenced:
                    raise InvariantViolation(
                        "rule-broker-fenced-leader",
                        f"{source()} tells the brokers that fenced broker {part.leader} leads {topic.name}-{pid} "
                        f"(isr {list(part.isr)}, leader epoch {part.leader_epoch})",
                    )
