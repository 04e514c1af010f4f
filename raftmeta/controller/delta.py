"""Replay: the one place where a ``MetadataRecord`` changes the metadata image.

:class:`ImageBuilder` is Kafka's ``MetadataDelta``: it starts from an immutable image, replays
records one at a time into private mutable drafts (copying a topic's partition list only the
first time the topic is touched), and ``build()`` returns the new immutable image. Every reader
uses it -- the controller's working image, followers applying committed batches, snapshot
loading, ``raftmeta log dump``, the simulator and the Spark job -- so they cannot disagree.

Replay refuses a record that cannot follow the image (unknown topic or partition, duplicate topic
id or name, a change to a removed topic, an epoch that does not follow, a leader outside the ISR)
with :class:`~raftmeta.controller.errors.ReplayError`. The builder is then unusable (its drafts may
hold part of the record); the image it started from is untouched, so callers simply drop it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import chain
from operator import itemgetter
from typing import Any, NamedTuple

from google.protobuf.message import DecodeError

from raftmeta.api.ids import UUID_BYTES, id_text
from raftmeta.api.limits import REQUEST_ID_CHARS_MAX
from raftmeta.controller.directories import normalized
from raftmeta.controller.encoded import EncodedPartitions, encoded_partitions
from raftmeta.controller.errors import ReplayError
from raftmeta.controller.image import (
    NO_LEADER,
    TOPIC_RESOURCE,
    BrokerRegistration,
    Endpoint,
    MetadataImage,
    PartitionRegistration,
    RequestEntry,
    RequestTable,
    TopicImage,
)
from raftmeta.controller.pmap import DELETED
from raftmeta.records.decode import LazyRecords
from raftmeta.records.wire import read_partition_state
from raftmeta.v1 import records_pb2

# NamedTuple's generated __new__ costs twice tuple.__new__; replay builds one per record.
_new_tuple = tuple.__new__
_LEGAL_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")
# Below this many partitions a topic's load is counted partition by partition: a Counter costs
# a few microseconds, more than the loop over a small topic.
_TALLY_MIN = 16
FEATURE_LEVEL_MAX = (1 << 15) - 1  # Kafka's FeatureLevelRecord.FeatureLevel is an int16
_TALLY_SAMPLE = 64  # partitions looked at to choose how to count a topic's partitions (_tally)


class _TopicDraft:
    """A topic being changed by the builder: a private, mutable copy."""

    __slots__ = ("configs", "fresh", "name", "partitions", "pool", "raw", "topic_id")

    def __init__(
        self,
        name: str,
        topic_id: bytes,
        partitions: list[PartitionRegistration],
        configs: dict[str, str],
        fresh: bool = False,
        pool: str | None = None,
    ) -> None:
        self.name = name
        self.pool = pool
        self.topic_id = topic_id
        self.partitions = partitions
        self.configs = configs
        # Created by this builder: its partitions enter the load counters once, in build().
        self.fresh = fresh
        # A fresh topic's PartitionRecords as replayed, while every one of them came canonical
        # through the fast path and none changed since (``keep_encoded``); else None.
        self.raw: list[bytes] | None = None

    def freeze(self) -> TopicImage:
        return TopicImage(self.name, self.topic_id, tuple(self.partitions), self.configs, self.pool)


class NewTopic(NamedTuple):
    """A topic as replaying its creation records makes it: ``TopicRecord{name, topic_id,
    broker_pool}``, a ``ConfigRecord`` per entry of ``configs`` (in that order), and a
    ``PartitionRecord`` per partition, by id: the memo of :meth:`ImageBuilder.replay_all`."""

    name: str
    topic_id: bytes
    pool: str | None
    configs: Mapping[str, str]
    partitions: tuple[PartitionRegistration, ...]


class ImageBuilder:
    """Replays records onto an image; ``build()`` returns the result. Not thread-safe, single use."""

    def __init__(self, image: MetadataImage, *, keep_encoded: bool = False) -> None:
        """``keep_encoded``: the topics this builder creates from canonical records keep their
        PartitionRecords' bytes, listed in ``encoded`` after :meth:`build` (see
        raftmeta/controller/encoded.py)."""
        self._image = image
        self._keep_encoded = keep_encoded
        self.encoded: list[EncodedPartitions] = []
        self._brokers: dict[int, BrokerRegistration] | None = None
        self._topics: dict[bytes, Any] = {}  # topic id -> _TopicDraft | DELETED
        self._names: dict[str, Any] = {}  # name -> topic id | DELETED
        self._collisions: dict[str, Any] = {}
        self._configs: dict[tuple[int, str], dict[str, str]] | None = None
        self._replica_counts: dict[int, int] | None = None
        self._leader_counts: dict[int, int] | None = None
        self._partition_count = image.partition_count
        self._reassigning: dict[tuple[bytes, int], Any] = {}  # (topic id, partition) -> True | DELETED
        self._requests: dict[str, Any] = {}
        self._request_seqs: dict[int, Any] = {}
        self._request_len = len(image.requests)
        self._features: dict[str, int] | None = None
        self._next_producer_id = image.next_producer_id
        self._next_seq = image.requests.next_seq
        self._oldest_seq = image.requests.oldest_seq
        self._interned: dict[tuple[int, ...], tuple[int, ...]] = {}
        self._built = False
        self._broken = False

    # ---- entry points ---------------------------------------------------------------------------
    def replay(self, record: records_pb2.MetadataRecord) -> None:
        self.replay_all((record,))

    def replay_all(self, records: Iterable[records_pb2.MetadataRecord], memo: Sequence[NewTopic] = ()) -> None:
        """Replay ``records`` in order. PartitionRecords -- most of any log -- take an inlined
        path here (no dispatch, no method call, locals instead of attributes); every other record
        goes through the dispatch table. The single-record ``replay`` comes here too, so there is
        one implementation.

        :class:`LazyRecords` (a snapshot's records, a follower's committed batches) are read as
        the serialized records they hold: the fast path below needs the bytes, and parsing a
        record only to serialize it again cost ~0.5 us a record, a tenth of loading a big
        snapshot.

        ``memo``: the values the records of a create were built from (a CreateTopics handler's
        ``ControllerResult.new_topics``), which must be exactly the topics whose creation
        records open ``records``. Replay takes each such topic from its value instead of reading
        its records back (:meth:`_replay_memo`), then replays the rest; the image is the one
        replay without the memo gives (tests/controller/test_new_topics.py)."""
        if self._built or self._broken:
            raise RuntimeError("ImageBuilder is single use: start a new one from the built image")
        if memo:
            records = self._replay_memo(records, memo)
        dispatch = _DISPATCH
        topics = self._topics
        interned = self._interned
        new_tuple = _new_tuple
        no_leader = NO_LEADER
        missing = _MISSING_STATE
        parse = records_pb2.MetadataRecord.FromString
        source: Iterable[records_pb2.MetadataRecord | bytes] = records
        states = _PARTITION_STATES
        if isinstance(records, LazyRecords):
            source = records.serialized
        try:
            for item in source:
                # The fast path for a new partition in a known state (see _partition_state): one
                # C call serializes the record, and its bytes say what reading nine protobuf
                # fields would (~2.2 us a record; each repeated field alone ~0.5 us). Canonical
                # encoding: MetadataRecord.partition (tag 0x12) alone, a one-byte length, then
                # PartitionRecord's topic_id (0x0a, 16 bytes), partition_id (0x10, a varint of at
                # most two bytes, absent when 0), and the rest -- the state. Anything else takes
                # the general path below.
                data = item if isinstance(item, bytes) else item.SerializeToString()
                size = len(data)
                if 20 <= size < 130 and data[0] == 0x12 and data[1] == size - 2 and data[2] == 0x0A and data[3] == 16:
                    pid = 0
                    start = 20
                    if size > 21 and data[20] == 0x10:
                        pid = data[21]
                        start = 22
                        if pid > 0x7F:
                            pid = (pid & 0x7F) | (data[22] << 7) if size > 22 and 0 < data[22] < 0x80 else -1
                            start = 23
                        elif not pid:
                            pid = -1  # a zero written out: not canonical, so not for the fast path
                    if pid >= 0:
                        state = states.get(data[start:], missing)
                        if state is missing:
                            state = _partition_state(data[start:])
                        if state is not None:
                            topic_id = data[4:20]
                            draft = topics.get(topic_id)
                            if draft is None or draft is DELETED:
                                draft = self._draft(topic_id, "PartitionRecord")
                            partitions = draft.partitions
                            if pid != len(partitions):
                                raise ReplayError(
                                    f"PartitionRecord {draft.name}-{pid}: expected partition id {len(partitions)} "
                                    "(partitions are created in order, each once)"
                                )
                            partitions.append(state)
                            if not draft.fresh:  # a fresh topic's partitions are counted once, in build()
                                self._partition_count += 1
                                self._count(state[0], state[2], 1)
                            elif draft.raw is not None:
                                draft.raw.append(data)
                            continue
                if isinstance(item, bytes):
                    try:
                        record = parse(item)
                    except DecodeError as exc:
                        # CRC-valid bytes that are no record: written so by a bug or another
                        # program. No repair is safe; say so instead of protobuf's bare message.
                        raise ReplayError(
                            f"a committed record is not a MetadataRecord ({exc}): refusing to apply it; "
                            "see `raftmeta log dump`"
                        ) from exc
                else:
                    record = item
                kind = record.WhichOneof("record")
                if kind != "partition":
                    if kind is None:
                        raise ReplayError("MetadataRecord has no record set (empty oneof)")
                    dispatch[kind](self, getattr(record, kind))
                    continue
                rec = record.partition
                topic_id = rec.topic_id
                draft = topics.get(topic_id)
                if draft is None or draft is DELETED:
                    draft = self._draft(topic_id, "PartitionRecord")
                draft.raw = None  # this record's bytes may not be canonical
                pid = rec.partition_id
                partitions = draft.partitions
                if pid != len(partitions):
                    raise ReplayError(
                        f"PartitionRecord {draft.name}-{pid}: expected partition id {len(partitions)} "
                        "(partitions are created in order, each once)"
                    )
                # Slicing a repeated field is ~2x faster than tuple() on it. Equal replica lists share
                # one interned tuple per builder (a cluster has few distinct orderings: less memory,
                # less cyclic-GC work), and a list is checked for duplicates only when first seen (only
                # lists that passed are interned). A new partition's ISR is usually its replica list.
                replica_list = rec.replicas[:]
                isr_list = rec.isr[:]
                replicas = tuple(replica_list)
                seen = interned.get(replicas)
                if seen is None:
                    distinct = bool(replicas) and len(set(replicas)) == len(replicas)
                    if distinct:
                        interned[replicas] = replicas
                else:
                    replicas = seen
                    distinct = True
                isr = replicas if isr_list == replica_list else tuple(isr_list)
                leader = rec.leader
                leader_epoch = rec.leader_epoch
                partition_epoch = rec.partition_epoch
                removing = rec.removing_replicas
                adding = rec.adding_replicas
                directories = rec.directories
                part = new_tuple(
                    PartitionRegistration,
                    (
                        replicas,
                        isr,
                        leader,
                        leader_epoch,
                        partition_epoch,
                        tuple(removing[:]) if removing else (),
                        tuple(adding[:]) if adding else (),
                        _directories(directories[:], len(replicas), f"PartitionRecord {draft.name}-{pid}")
                        if directories
                        else (),
                    ),
                )
                if not (
                    distinct
                    and (isr is replicas or (set(replicas).issuperset(isr) and len(set(isr)) == len(isr)))
                    and (leader == no_leader or leader in isr)
                    and leader_epoch >= 0
                    and partition_epoch >= 0
                    and not (removing or adding)  # a moving partition gets the full check
                ):
                    _check_partition(part, draft.name, pid, "PartitionRecord")
                if removing or adding:
                    self._reassigning[(topic_id, pid)] = True
                partitions.append(part)
                if not draft.fresh:  # a fresh topic's partitions are counted once, in build()
                    self._partition_count += 1
                    self._count(replicas, leader, 1)
        except BaseException:
            # The drafts may hold part of the failed record: this builder must never build.
            self._broken = True
            raise

    def build(self) -> MetadataImage:
        image = self._image
        topics = image.topics
        if self._built:
            raise RuntimeError("ImageBuilder.build() was already called: the image shares its dicts")
        if self._broken:
            raise RuntimeError("ImageBuilder: a replay failed; drop this builder (its starting image is intact)")
        self._built = True
        fresh = [d for d in self._topics.values() if d is not DELETED and d.fresh]
        if fresh:
            counts, leaders = self._counters()
            for draft in fresh:
                partitions = draft.partitions
                if len(partitions) > _TALLY_MIN:
                    _tally(partitions, counts, leaders)
                else:
                    for part in partitions:
                        for broker in part[0]:
                            counts[broker] = counts.get(broker, 0) + 1
                        leader = part[2]
                        if leader != NO_LEADER:
                            leaders[leader] = leaders.get(leader, 0) + 1
                self._partition_count += len(partitions)
                draft.fresh = False
        if self._topics:
            frozen = {tid: (d if d is DELETED else d.freeze()) for tid, d in self._topics.items()}
            topics = topics.evolve(frozen)
            if self._keep_encoded:
                for draft in fresh:
                    raw = draft.raw
                    if raw and len(raw) == len(draft.partitions):
                        self.encoded.append(encoded_partitions(frozen[draft.topic_id], raw))
        requests = image.requests
        if self._requests or self._request_seqs:
            requests = RequestTable(
                by_id=requests.by_id.evolve(self._requests),
                by_seq=requests.by_seq.evolve(self._request_seqs),
                next_seq=self._next_seq,
                oldest_seq=self._oldest_seq,
                capacity=requests.capacity,
            )
        return MetadataImage(
            brokers=self._brokers if self._brokers is not None else image.brokers,
            topics=topics,
            topic_ids=image.topic_ids.evolve(self._names),
            collisions=image.collisions.evolve(self._collisions),
            configs=self._configs if self._configs is not None else image.configs,
            replica_counts=self._replica_counts if self._replica_counts is not None else image.replica_counts,
            leader_counts=self._leader_counts if self._leader_counts is not None else image.leader_counts,
            partition_count=self._partition_count,
            requests=requests,
            reassigning=image.reassigning.evolve(self._reassigning),
            features=self._features if self._features is not None else image.features,
            next_producer_id=self._next_producer_id,
        )

    # ---- lookups through the drafts -------------------------------------------------------------
    def _topic_id_for(self, name: str) -> bytes | None:
        found = self._names.get(name)
        if found is None:
            found = self._image.topic_ids.get(name)
        return None if found is DELETED else found

    def _draft(self, topic_id: bytes, what: str) -> _TopicDraft:
        draft = self._topics.get(topic_id)
        if draft is None:
            topic: TopicImage | None = self._image.topics.get(topic_id)
            if topic is None:
                raise ReplayError(f"{what}: no topic with id {id_text(topic_id)} (unknown or removed)")
            draft = _TopicDraft(
                topic.name, topic.topic_id, list(topic.partitions), dict(topic.configs), pool=topic.pool
            )
            self._topics[topic_id] = draft
        elif draft is DELETED:
            raise ReplayError(f"{what}: topic id {id_text(topic_id)} was removed")
        return draft

    def _brokers_mut(self) -> dict[int, BrokerRegistration]:
        if self._brokers is None:
            self._brokers = dict(self._image.brokers)
        return self._brokers

    def _counters(self) -> tuple[dict[int, int], dict[int, int]]:
        """The builder's own copies of the load counters (copied on first use)."""
        if self._replica_counts is None or self._leader_counts is None:
            self._replica_counts = dict(self._image.replica_counts)
            self._leader_counts = dict(self._image.leader_counts)
        return self._replica_counts, self._leader_counts

    def _count(self, replicas: Iterable[int], leader: int, sign: int) -> None:
        """Adjust the load counters; a count that reaches zero is dropped so equal images compare
        equal however they were built."""
        counts, leaders = self._counters()
        for broker in replicas:
            value = counts.get(broker, 0) + sign
            if value:
                counts[broker] = value
            else:
                del counts[broker]
        if leader != NO_LEADER:
            value = leaders.get(leader, 0) + sign
            if value:
                leaders[leader] = value
            else:
                del leaders[leader]

    # ---- topics and partitions ------------------------------------------------------------------
    def _replay_topic(self, rec: records_pb2.TopicRecord) -> None:
        self._new_draft(rec.name, rec.topic_id, rec.broker_pool if rec.HasField("broker_pool") else None)

    def _new_draft(self, name: str, topic_id: bytes, pool: str | None) -> _TopicDraft:
        """What a TopicRecord does: checks, then a fresh draft, the name and the collision index."""
        if len(topic_id) != 16 or topic_id == bytes(16):
            raise ReplayError(f"TopicRecord {name!r}: topic_id must be 16 non-zero bytes, got {id_text(topic_id)!r}")
        if _LEGAL_NAME.fullmatch(name) is None or name in (".", ".."):
            raise ReplayError(f"TopicRecord: illegal topic name {name!r}")
        existing = self._topics.get(topic_id)
        if existing is None:
            existing = self._image.topics.get(topic_id)
        if existing is not None and existing is not DELETED:
            raise ReplayError(f"TopicRecord {name!r}: duplicate topic id {id_text(topic_id)}")
        if self._topic_id_for(name) is not None:
            raise ReplayError(f"TopicRecord: a topic named {name!r} already exists")
        draft = _TopicDraft(name, topic_id, [], {}, fresh=True, pool=pool)
        if self._keep_encoded:
            draft.raw = []
        self._topics[topic_id] = draft
        self._names[name] = topic_id
        if "." in name or "_" in name:
            key = name.replace(".", "_")
            current = self._collisions.get(key)
            if current is None:
                current = self._image.collisions.get(key, ())
            elif current is DELETED:
                current = ()
            self._collisions[key] = (*current, name)
        return draft

    def _replay_memo(
        self, records: Iterable[records_pb2.MetadataRecord], memo: Sequence[NewTopic]
    ) -> Sequence[records_pb2.MetadataRecord]:
        """Replay the creation records (TopicRecord, its ConfigRecords, its PartitionRecords) of
        each topic of ``memo`` from its value, and return the records after them.

        The leader's controller built those records itself from these very values: decoding them
        again and re-reading every protobuf field cost ~2.6 us per partition, most of applying a
        1000-partition topic. The same checks run (a failure raises ReplayError and breaks the
        builder, as replay does). Each topic's TopicRecord is read to prove the memo describes
        these records (a mismatch is a bug: ValueError); with ``keep_encoded``, the topic keeps
        its PartitionRecords' bytes as replay from bytes would."""
        if not isinstance(records, Sequence):
            records = list(records)
        raws = records.serialized if isinstance(records, LazyRecords) and self._keep_encoded else None
        position = 0
        try:
            for topic in memo:
                head = records[position] if position < len(records) else None
                if head is None or head.WhichOneof("record") != "topic" or head.topic.topic_id != topic.topic_id:
                    raise ValueError(
                        f"replay memo: topic {topic.name!r} is not the next record (index {position}) of its batch"
                    )
                position += 1 + len(topic.configs)
                end = position + len(topic.partitions)
                if end > len(records):
                    raise ValueError(f"replay memo: topic {topic.name!r} has more records than its batch holds")
                self._add_topic(topic, list(raws[position:end]) if raws is not None else None)
                position = end
        except BaseException:
            self._broken = True
            raise
        return records[position:]

    def _add_topic(self, topic: NewTopic, raw: list[bytes] | None) -> None:
        """What replaying ``topic``'s creation records does, from its values."""
        interned = self._interned
        no_leader = NO_LEADER
        draft = self._new_draft(topic.name, topic.topic_id, topic.pool)
        draft.raw = raw
        draft.configs.update(topic.configs)
        parts = topic.partitions
        # A create's partitions share a few values (one per replica order): each distinct
        # value is checked once, in order of first use, so a bad one is reported at the
        # first partition that has it, as replay would.
        for part in {id(p): p for p in parts}.values():
            replicas, isr, leader, leader_epoch, partition_epoch, removing, adding, _ = part
            # As in replay_all: a replica list is checked once per builder, then interned.
            distinct = replicas in interned
            if not distinct:
                distinct = bool(replicas) and len(set(replicas)) == len(replicas)
                if distinct:
                    interned[replicas] = replicas
            if not (
                distinct
                and (isr == replicas or (set(replicas).issuperset(isr) and len(set(isr)) == len(isr)))
                and (leader == no_leader or leader in isr)
                and leader_epoch >= 0
                and partition_epoch >= 0
                and not (removing or adding)
            ):
                first = next(pid for pid, p in enumerate(parts) if p is part)
                _check_partition(part, draft.name, first, "PartitionRecord")
            if removing or adding:
                for pid, p in enumerate(parts):
                    if p is part:
                        self._reassigning[(topic.topic_id, pid)] = True
        draft.partitions.extend(parts)

    def _replay_partition_change(self, rec: records_pb2.PartitionChangeRecord) -> None:
        pid = rec.partition_id
        draft = self._draft(rec.topic_id, "PartitionChangeRecord")
        draft.raw = None  # its replayed records no longer say what the partition is
        if not 0 <= pid < len(draft.partitions):
            raise ReplayError(
                f"PartitionChangeRecord {draft.name}-{pid}: no such partition (topic has {len(draft.partitions)})"
            )
        prev = draft.partitions[pid]
        leader = rec.leader if rec.HasField("leader") else prev.leader
        leader_changed = leader != prev.leader
        # Kafka's PartitionRegistration.merge: a record that names a leader (a new one, or the same
        # one when a replica leaves the replica set) starts a new leader epoch.
        expected_leader_epoch = prev.leader_epoch + (1 if rec.HasField("leader") else 0)
        if rec.partition_epoch != prev.partition_epoch + 1 or rec.leader_epoch != expected_leader_epoch:
            raise ReplayError(
                f"PartitionChangeRecord {draft.name}-{pid}: epochs (leader {rec.leader_epoch}, "
                f"partition {rec.partition_epoch}) do not follow "
                f"(leader {prev.leader_epoch}, partition {prev.partition_epoch}); expected "
                f"(leader {expected_leader_epoch}, partition {prev.partition_epoch + 1})"
            )
        replicas = tuple(rec.replicas.ids) if rec.HasField("replicas") else prev.replicas
        # Kafka's PartitionRegistration.merge: absent directories are the partition's own, which
        # must then still fit its replica list unless every one is MIGRATING (then a list of
        # MIGRATING as long as the new replica list, which raftmeta keeps as ()).
        directories = (
            _directories(rec.directories.ids, len(replicas), f"PartitionChangeRecord {draft.name}-{pid}")
            if rec.HasField("directories")
            else prev.directories
        )
        if directories and len(directories) != len(replicas):
            raise ReplayError(
                f"PartitionChangeRecord {draft.name}-{pid}: replicas {list(replicas)} changed without directories "
                f"while the partition keeps {len(directories)} (Kafka's InvalidReplicaDirectoriesException)"
            )
        part = PartitionRegistration(
            replicas,
            tuple(rec.isr.ids) if rec.HasField("isr") else prev.isr,
            leader,
            rec.leader_epoch,
            rec.partition_epoch,
            tuple(rec.removing_replicas.ids) if rec.HasField("removing_replicas") else prev.removing_replicas,
            tuple(rec.adding_replicas.ids) if rec.HasField("adding_replicas") else prev.adding_replicas,
            directories,
        )
        _check_partition(part, draft.name, pid, "PartitionChangeRecord")
        draft.partitions[pid] = part
        if part.adding_replicas or part.removing_replicas:
            self._reassigning[(rec.topic_id, pid)] = True
        elif prev.adding_replicas or prev.removing_replicas:
            self._reassigning[(rec.topic_id, pid)] = DELETED
        if not draft.fresh and (part.replicas != prev.replicas or leader_changed):
            self._count(prev.replicas, prev.leader, -1)
            self._count(part.replicas, part.leader, 1)

    def _replay_remove_topic(self, rec: records_pb2.RemoveTopicRecord) -> None:
        draft = self._draft(rec.topic_id, "RemoveTopicRecord")
        if not draft.fresh:
            for part in draft.partitions:
                self._count(part.replicas, part.leader, -1)
            self._partition_count -= len(draft.partitions)
        for pid, part in enumerate(draft.partitions):
            if part.adding_replicas or part.removing_replicas:
                self._reassigning[(rec.topic_id, pid)] = DELETED
        self._topics[rec.topic_id] = DELETED
        self._names[draft.name] = DELETED
        if "." in draft.name or "_" in draft.name:
            key = draft.name.replace(".", "_")
            current = self._collisions.get(key)
            if current is None:
                current = self._image.collisions.get(key, ())
            elif current is DELETED:
                current = ()
            remaining = tuple(n for n in current if n != draft.name)
            self._collisions[key] = remaining if remaining else DELETED

    # ---- brokers --------------------------------------------------------------------------------
    def _replay_register_broker(self, rec: records_pb2.RegisterBrokerRecord) -> None:
        if rec.broker_id < 0:
            raise ReplayError(f"RegisterBrokerRecord: broker id must be >= 0, got {rec.broker_id}")
        if len(rec.incarnation_id) != 16:
            raise ReplayError(f"RegisterBrokerRecord {rec.broker_id}: incarnation_id must be 16 bytes")
        brokers = self._brokers_mut()
        prev = brokers.get(rec.broker_id)
        if prev is not None and rec.broker_epoch <= prev.epoch:
            raise ReplayError(
                f"RegisterBrokerRecord {rec.broker_id}: broker epoch {rec.broker_epoch} does not rise above "
                f"the registered epoch {prev.epoch}"
            )
        brokers[rec.broker_id] = BrokerRegistration(
            rec.broker_id,
            rec.broker_epoch,
            rec.incarnation_id,
            rec.rack if rec.HasField("rack") else None,
            rec.pool if rec.HasField("pool") else None,
            rec.fenced,
            tuple(Endpoint(e.name, e.host, e.port) for e in rec.endpoints),
            tuple(rec.log_dirs),
        )

    def _registered(self, broker_id: int, epoch: int, what: str) -> BrokerRegistration:
        brokers = self._brokers if self._brokers is not None else self._image.brokers
        broker = brokers.get(broker_id)
        if broker is None:
            raise ReplayError(f"{what}: no broker registration found for broker id {broker_id}")
        if broker.epoch != epoch:
            raise ReplayError(f"{what}: broker {broker_id} is registered with epoch {broker.epoch}, not {epoch}")
        return broker

    def _replay_unregister_broker(self, rec: records_pb2.UnregisterBrokerRecord) -> None:
        self._registered(rec.broker_id, rec.broker_epoch, "UnregisterBrokerRecord")
        del self._brokers_mut()[rec.broker_id]

    def _replay_fence_broker(self, rec: records_pb2.FenceBrokerRecord) -> None:
        broker = self._registered(rec.broker_id, rec.broker_epoch, "FenceBrokerRecord")
        self._brokers_mut()[rec.broker_id] = broker._replace(fenced=True)

    def _replay_unfence_broker(self, rec: records_pb2.UnfenceBrokerRecord) -> None:
        broker = self._registered(rec.broker_id, rec.broker_epoch, "UnfenceBrokerRecord")
        self._brokers_mut()[rec.broker_id] = broker._replace(fenced=False)

    def _replay_broker_log_dirs_change(self, rec: records_pb2.BrokerLogDirsChangeRecord) -> None:
        broker = self._registered(rec.broker_id, rec.broker_epoch, "BrokerLogDirsChangeRecord")
        if not rec.log_dirs:  # Kafka replays an empty LogDirs as "unchanged"
            return
        for index, directory in enumerate(rec.log_dirs):
            if len(directory) != UUID_BYTES:
                raise ReplayError(
                    f"BrokerLogDirsChangeRecord {rec.broker_id}: log_dirs[{index}] is {len(directory)} bytes, "
                    f"not a {UUID_BYTES}-byte uuid"
                )
        self._brokers_mut()[rec.broker_id] = broker._replace(log_dirs=tuple(rec.log_dirs))

    # ---- configs and request ids ----------------------------------------------------------------
    def _replay_config(self, rec: records_pb2.ConfigRecord) -> None:
        value = rec.value if rec.HasField("value") else None
        if rec.resource_type == TOPIC_RESOURCE:
            topic_id = self._topic_id_for(rec.resource_name)
            if topic_id is None:
                raise ReplayError(f"ConfigRecord {rec.name}: no topic named {rec.resource_name!r}")
            configs = self._draft(topic_id, "ConfigRecord").configs
        elif rec.resource_type == records_pb2.CONFIG_RESOURCE_TYPE_BROKER:
            if self._configs is None:
                self._configs = {k: dict(v) for k, v in self._image.configs.items()}
            resource = (rec.resource_type, rec.resource_name)
            configs = self._configs.setdefault(resource, {})
            if value is None:
                configs.pop(rec.name, None)
                if not configs:  # an empty resource is no resource: images must compare equal
                    del self._configs[resource]
                return
        else:
            raise ReplayError(f"ConfigRecord {rec.name}: unsupported resource type {rec.resource_type}")
        if value is None:
            configs.pop(rec.name, None)
        else:
            configs[rec.name] = value

    def _replay_feature_level(self, rec: records_pb2.FeatureLevelRecord) -> None:
        if not rec.name:
            raise ReplayError("FeatureLevelRecord: name must not be empty")
        if not 0 <= rec.feature_level <= FEATURE_LEVEL_MAX:
            raise ReplayError(
                f"FeatureLevelRecord {rec.name}: feature_level {rec.feature_level} is outside 0..{FEATURE_LEVEL_MAX}"
            )
        if self._features is None:
            self._features = dict(self._image.features)
        if rec.feature_level == 0:  # Kafka's rule: level 0 removes the feature
            self._features.pop(rec.name, None)
        else:
            self._features[rec.name] = rec.feature_level

    def _replay_producer_ids(self, rec: records_pb2.ProducerIdsRecord) -> None:
        # Kafka's ProducerIdControlManager.replay: a block never goes back or repeats.
        if rec.next_producer_id <= self._next_producer_id:
            raise ReplayError(
                f"ProducerIdsRecord: next_producer_id {rec.next_producer_id} does not rise above "
                f"{self._next_producer_id} (producer id blocks are given out once, in order)"
            )
        self._next_producer_id = rec.next_producer_id

    def _request_entry(self, request_id: str) -> RequestEntry | None:
        entry = self._requests.get(request_id)
        if entry is None:
            entry = self._image.requests.by_id.get(request_id)
        return None if entry is DELETED else entry

    def _replay_request(self, rec: records_pb2.RequestRecord) -> None:
        request_id = rec.request_id
        if not 0 < len(request_id) <= REQUEST_ID_CHARS_MAX:
            raise ReplayError(f"RequestRecord: request_id must be 1..{REQUEST_ID_CHARS_MAX} characters")
        if self._request_entry(request_id) is not None:
            raise ReplayError(f"RequestRecord: request id {request_id!r} is already answered")
        seq = self._next_seq
        self._next_seq += 1
        self._requests[request_id] = RequestEntry(seq, rec.method, rec.response, rec.request_sha256)
        self._request_seqs[seq] = request_id
        self._request_len += 1
        capacity = self._image.requests.capacity
        while self._request_len > capacity:
            self._evict_oldest()

    def _evict_oldest(self) -> None:
        while True:
            seq = self._oldest_seq
            self._oldest_seq += 1
            request_id = self._request_seqs.get(seq)
            if request_id is None:
                request_id = self._image.requests.by_seq.get(seq)
            if request_id is None or request_id is DELETED:
                continue
            self._requests[request_id] = DELETED
            self._request_seqs[seq] = DELETED
            self._request_len -= 1
            return


# Serialized partition states (a PartitionRecord's bytes after topic_id and partition_id) -> the
# PartitionRegistration they decode to, or None for one the fast path leaves to the general path.
# Values are immutable and depend only on the key, so one table serves every builder (and
# thread). It is also what makes equal states one object in the image: a new partition's state
# is a replica order and its leader, and 100 brokers have ~970,000 orders of three, so ten
# million partitions hold at most that many distinct states. Shared, a partition costs the image
# a pointer instead of a ~150-byte tuple (a follower's image of 1M partitions on 100 brokers:
# 167 -> 118 MiB). The leader's new partitions share theirs the same way (controller/topics.py).
# The table's own cost is ~90 bytes an entry, at most ~90 MiB; past its bound it starts over
# (sharing then restarts, nothing else changes).
_PARTITION_STATES: dict[bytes, PartitionRegistration | None] = {}
SHARED_STATES_MAX = 1 << 20  # also bounds controller/topics.py's table of new partitions' states
_MISSING_STATE: Any = object()


def _tally(partitions: list[PartitionRegistration], counts: dict[int, int], leaders: dict[int, int]) -> None:
    """Add the replicas and leaders of many partitions to the load counters, the tallies made
    in C. With few brokers a topic's partitions share a handful of state objects: they are
    counted per distinct state. With many (100 brokers: nearly a state per partition) the
    replicas and leaders are counted one by one -- 0.15 us a partition, where counting per
    distinct state took 0.32. The first partitions say which case this is; both give the same
    counts."""
    if len({id(part) for part in partitions[:_TALLY_SAMPLE]}) <= _TALLY_SAMPLE // 4:
        for part, times in Counter(partitions).items():
            for broker in part[0]:
                counts[broker] = counts.get(broker, 0) + times
            leader = part[2]
            if leader != NO_LEADER:
                leaders[leader] = leaders.get(leader, 0) + times
        return
    for broker, times in Counter(chain.from_iterable(map(itemgetter(0), partitions))).items():
        counts[broker] = counts.get(broker, 0) + times
    for leader, times in Counter(map(itemgetter(2), partitions)).items():
        if leader != NO_LEADER:
            leaders[leader] = leaders.get(leader, 0) + times


def _partition_state(tail: bytes) -> PartitionRegistration | None:
    """The partition state ``tail`` encodes (see :func:`~raftmeta.records.wire.read_partition_state`),
    when replay may take it as it is: the state passes replay's checks (reassignments need the index
    of moving partitions, and the reader leaves them out). None sends the record to the general
    path, which reads its fields and reports any problem."""
    fields = read_partition_state(tail)
    state = None
    if fields is not None:
        replicas, isr, leader, leader_epoch, partition_epoch = fields
        if isr == replicas:
            isr = replicas
        if _state_ok(replicas, set(replicas), isr, leader, leader_epoch, partition_epoch):
            state = _new_tuple(
                PartitionRegistration, (replicas, isr, leader, leader_epoch, partition_epoch, (), (), ())
            )
    if len(_PARTITION_STATES) >= SHARED_STATES_MAX:
        _PARTITION_STATES.clear()
    _PARTITION_STATES[tail] = state
    return state


def _directories(ids: Sequence[bytes], replica_count: int, what: str) -> tuple[bytes, ...]:
    """A record's directories as a partition keeps them (every one MIGRATING: ()), checked as
    Kafka's ``checkDirectories``: one 16-byte id per replica (an empty list is all MIGRATING)."""
    for directory in ids:
        if len(directory) != UUID_BYTES:
            raise ReplayError(f"{what}: a directory id is 16 bytes, got {len(directory)}")
    if ids and len(ids) != replica_count:
        raise ReplayError(
            f"{what}: {len(ids)} directories for {replica_count} replicas (Kafka's InvalidReplicaDirectoriesException)"
        )
    return normalized(ids)


def _ignore(_builder: ImageBuilder, _record: Any) -> None:
    """Control and framing records (LeaderChange, NoOp, snapshot header/footer) carry no metadata."""


# Record kind -> replay function, made once (a builder per batch used to build its own table of
# bound methods, a few microseconds of every 1-partition create).
_DISPATCH: dict[str, Callable[[ImageBuilder, Any], None]] = {
    "topic": ImageBuilder._replay_topic,
    "partition_change": ImageBuilder._replay_partition_change,
    "remove_topic": ImageBuilder._replay_remove_topic,
    "register_broker": ImageBuilder._replay_register_broker,
    "unregister_broker": ImageBuilder._replay_unregister_broker,
    "fence_broker": ImageBuilder._replay_fence_broker,
    "unfence_broker": ImageBuilder._replay_unfence_broker,
    "broker_log_dirs_change": ImageBuilder._replay_broker_log_dirs_change,
    "config": ImageBuilder._replay_config,
    "request": ImageBuilder._replay_request,
    "feature_level": ImageBuilder._replay_feature_level,
    "producer_ids": ImageBuilder._replay_producer_ids,
    "leader_change": _ignore,
    "no_op": _ignore,
    "snapshot_header": _ignore,
    "snapshot_footer": _ignore,
    "voters": _ignore,  # the consensus core's (KIP-853): no metadata
}


def _state_ok(
    replicas: tuple[int, ...],
    replica_set: set[int],
    isr: tuple[int, ...],
    leader: int,
    leader_epoch: int,
    partition_epoch: int,
) -> bool:
    """Invariant 7 of DESIGN.md §9 but for the reassignment lists (``_reassignment_ok``)."""
    return (
        bool(replicas)
        and len(replica_set) == len(replicas)
        and replica_set.issuperset(isr)
        and len(set(isr)) == len(isr)
        and (leader == NO_LEADER or leader in isr)
        and leader_epoch >= 0
        and partition_epoch >= 0
    )


def _check_partition(part: PartitionRegistration, topic: str, pid: int, kind: str) -> None:
    """Invariant 7 of DESIGN.md §9, checked on every partition state replay produces."""
    replicas, isr, leader = part.replicas, part.isr, part.leader
    adding, removing = part.adding_replicas, part.removing_replicas
    replica_set = set(replicas)
    if _state_ok(replicas, replica_set, isr, leader, part.leader_epoch, part.partition_epoch) and _reassignment_ok(
        replica_set, adding, removing
    ):
        return
    what = f"{kind} {topic}-{pid}"
    if not _reassignment_ok(replica_set, adding, removing):
        raise ReplayError(
            f"{what}: adding {list(adding)} and removing {list(removing)} replicas must be distinct replicas of "
            f"{list(replicas)}, neither list naming a broker twice, and leave at least one replica"
        )
    if not replicas:
        raise ReplayError(f"{what}: a partition needs at least one replica")
    if len(replica_set) != len(replicas):
        raise ReplayError(f"{what}: replicas {list(replicas)} name a broker twice")
    for broker in isr:
        if broker not in replica_set:
            raise ReplayError(f"{what}: ISR member {broker} is not a replica ({list(replicas)})")
    if len(set(isr)) != len(isr):
        raise ReplayError(f"{what}: ISR {list(isr)} names a broker twice")
    if leader != NO_LEADER and leader not in isr:
        raise ReplayError(f"{what}: leader {leader} is not in the ISR {list(isr)}")
    raise ReplayError(f"{what}: epochs must be >= 0")


def _reassignment_ok(replica_set: set[int], adding: tuple[int, ...], removing: tuple[int, ...]) -> bool:
    """KIP-455's shape: adding and removing are disjoint subsets of the replicas (each broker once),
    and the target (replicas - removing) is not empty."""
    if not adding and not removing:
        return True
    moving = set(adding) | set(removing)
    return (
        len(moving) == len(adding) + len(removing)
        and replica_set.issuperset(moving)
        and len(replica_set) > len(removing)
    )
