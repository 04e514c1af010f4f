"""The metadata image: an immutable value holding everything the records say.

Modelled on Kafka's ``MetadataImage`` (``ClusterImage`` + ``TopicsImage`` + ``ConfigurationsImage``)
plus the bounded table of answered request ids. An image is never mutated: ``image.replay(record)``
and :class:`~raftmeta.controller.delta.ImageBuilder` return a new image that shares all unchanged
structure with the old one (see :mod:`raftmeta.controller.pmap`), so the committed image and the
controller's working image can coexist cheaply.

Values are NamedTuples (immutable, fast to build -- replay builds one per record) and their
sequence fields are tuples. Configs are plain dicts that are never mutated once in an image.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from raftmeta.controller.pmap import PMap

if TYPE_CHECKING:
    from raftmeta.v1 import records_pb2

NO_LEADER = -1
TOPIC_RESOURCE = 2  # ConfigResourceType.CONFIG_RESOURCE_TYPE_TOPIC (Kafka's ConfigResource.Type numbers)
BROKER_RESOURCE = 4  # CONFIG_RESOURCE_TYPE_BROKER; resource name "" = the cluster-wide default
CLUSTER_DEFAULT = (BROKER_RESOURCE, "")
# How many answered request ids every image remembers. A constant of the log format, not a tunable:
# every replica must evict the same ids or their images (and their answers to retries) would differ.
REQUEST_TABLE_CAPACITY = 10_000


class Endpoint(NamedTuple):
    name: str
    host: str
    port: int


class BrokerRegistration(NamedTuple):
    id: int
    epoch: int
    incarnation_id: bytes
    rack: str | None
    pool: str | None
    fenced: bool
    endpoints: tuple[Endpoint, ...] = ()
    # The broker's online log directories (16-byte uuids, KIP-858); () when it named none.
    log_dirs: tuple[bytes, ...] = ()


class PartitionRegistration(NamedTuple):
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    # Each replica's log directory, in replica order (KIP-858); () when every one is Kafka's
    # MIGRATING (raftmeta/controller/directories.py).
    directories: tuple[bytes, ...] = ()

    @property
    def preferred_leader(self) -> int:
        return self.replicas[0]


class TopicImage(NamedTuple):
    name: str
    topic_id: bytes
    # Indexed by partition id: partitions are always 0..n-1 (CreatePartitions only appends).
    partitions: tuple[PartitionRegistration, ...]
    # Explicitly set topic configs (name -> value); never mutated.
    configs: Mapping[str, str]
    # The broker pool the topic was created in (None = any broker).
    pool: str | None = None


class RequestEntry(NamedTuple):
    seq: int
    method: str
    response: bytes
    # SHA-256 of the request it answered (see raftmeta.controller.requests); b"" if not recorded.
    request_sha256: bytes = b""


@dataclass(frozen=True, slots=True, eq=False)
class RequestTable:
    """Answered request ids, oldest evicted first once ``capacity`` is exceeded.

    ``by_id`` maps a request id to its entry, ``by_seq`` the insertion sequence to the id (so the
    oldest is found without scanning); ``next_seq`` only rises.
    """

    by_id: PMap[str, RequestEntry] = field(default_factory=PMap)
    by_seq: PMap[int, str] = field(default_factory=PMap)
    next_seq: int = 0
    capacity: int = REQUEST_TABLE_CAPACITY
    # No live entry has a lower sequence number (entries below it were evicted): eviction starts
    # here instead of scanning the table for its minimum (a min() over 10,000 entries per request
    # was a fifth of the leader's time in the commit benchmark).
    oldest_seq: int = 0

    def get(self, request_id: str) -> RequestEntry | None:
        entry: RequestEntry | None = self.by_id.get(request_id)
        return entry

    def __len__(self) -> int:
        return len(self.by_id)

    def __eq__(self, other: object) -> bool:
        # Logical equality: the same answers in the same order. Sequence numbers restart when an
        # image is rebuilt from a snapshot, so they are not compared.
        if not isinstance(other, RequestTable):
            return NotImplemented
        return (
            self.capacity == other.capacity
            and len(self) == len(other)
            and [(rid, e.method, e.response, e.request_sha256) for rid, e in self.in_order()]
            == [(rid, e.method, e.response, e.request_sha256) for rid, e in other.in_order()]
        )

    __hash__ = None  # type: ignore[assignment]

    def in_order(self) -> Iterator[tuple[str, RequestEntry]]:
        """Entries oldest first (the order a snapshot must write them in)."""
        for request_id in sorted(self.by_id, key=lambda rid: self.by_id[rid].seq):
            yield request_id, self.by_id[request_id]


@dataclass(frozen=True, slots=True)
class MetadataImage:
    """Everything the committed (or working) log prefix says. Build with ``MetadataImage.empty()``
    and ``replay``; compare with ``==``."""

    brokers: Mapping[int, BrokerRegistration] = field(default_factory=dict)
    topics: PMap[bytes, TopicImage] = field(default_factory=PMap)
    topic_ids: PMap[str, bytes] = field(default_factory=PMap)
    # Kafka's collision index: name with '.' replaced by '_' -> existing names that normalise to it.
    collisions: PMap[str, tuple[str, ...]] = field(default_factory=PMap)
    # Non-topic config resources: (resource type, resource name) -> {name: value}.
    configs: Mapping[tuple[int, str], Mapping[str, str]] = field(default_factory=dict)
    # Derived load per broker, kept incrementally so placement never scans every partition.
    replica_counts: Mapping[int, int] = field(default_factory=dict)
    leader_counts: Mapping[int, int] = field(default_factory=dict)
    partition_count: int = 0
    requests: RequestTable = field(default_factory=RequestTable)
    # Derived index of the partitions with a reassignment in progress (adding or removing
    # replicas), so heartbeats and ListPartitionReassignments never scan every partition.
    reassigning: PMap[tuple[bytes, int], bool] = field(default_factory=PMap)
    # Finalized feature levels (FeatureLevelRecord): name -> level, metadata.version among them.
    features: Mapping[str, int] = field(default_factory=dict)
    # Every producer id below this one is given out (ProducerIdsRecord, AllocateProducerIds).
    next_producer_id: int = 0

    @staticmethod
    def empty(request_table_capacity: int = REQUEST_TABLE_CAPACITY) -> MetadataImage:
        return MetadataImage(requests=RequestTable(capacity=request_table_capacity))

    # ---- replay ---------------------------------------------------------------------------------
    def replay(self, record: records_pb2.MetadataRecord) -> MetadataImage:
        """The image after ``record``; raises ReplayError (and changes nothing) if it cannot follow."""
        from raftmeta.controller.delta import ImageBuilder

        builder = ImageBuilder(self)
        builder.replay(record)
        return builder.build()

    def replay_all(self, records: Iterable[records_pb2.MetadataRecord]) -> MetadataImage:
        """The image after every record in order (one builder: the fast path for batches and logs)."""
        from raftmeta.controller.delta import ImageBuilder

        builder = ImageBuilder(self)
        builder.replay_all(records)
        return builder.build()

    # ---- reads ----------------------------------------------------------------------------------
    def topic_by_name(self, name: str) -> TopicImage | None:
        topic_id = self.topic_ids.get(name)
        if topic_id is None:
            return None
        topic: TopicImage = self.topics[topic_id]
        return topic

    def partition(self, topic_id: bytes, partition_id: int) -> PartitionRegistration | None:
        topic: TopicImage | None = self.topics.get(topic_id)
        if topic is None or not 0 <= partition_id < len(topic.partitions):
            return None
        return topic.partitions[partition_id]

    def feature_level(self, name: str) -> int | None:
        """A feature's finalized level, None when no FeatureLevelRecord set it."""
        return self.features.get(name)

    def is_unfenced(self, broker_id: int) -> bool:
        broker = self.brokers.get(broker_id)
        return broker is not None and not broker.fenced

    def cluster_config(self, name: str) -> str | None:
        return self.configs.get(CLUSTER_DEFAULT, {}).get(name)

    def topic_config(self, topic: TopicImage, name: str) -> str | None:
        """A topic's effective explicit config: the topic's own value, else the cluster default."""
        value = topic.configs.get(name)
        return value if value is not None else self.cluster_config(name)

    def reassignments(self) -> list[tuple[TopicImage, int, PartitionRegistration]]:
        """Every partition with a reassignment in progress, by topic name then partition id."""
        found = []
        for topic_id, pid in self.reassigning:
            topic: TopicImage = self.topics[topic_id]
            found.append((topic, pid, topic.partitions[pid]))
        found.sort(key=lambda item: (item[0].name, item[1]))
        return found

    def topics_sorted(self) -> list[TopicImage]:
        return sorted((topic for _, topic in self.topics.iter_items()), key=lambda t: t.name)
