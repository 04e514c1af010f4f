"""A node's metrics: counters the driver bumps as plain ints, histograms it observes outside the
per-record loops, and gauges computed at scrape time from state the driver already holds.

Cost on the node's hot path: a counter is an ``int +=`` on :class:`NodeStats` (no lock, no
label lookup); prometheus_client only sees it when :class:`NodeCollector` runs, on the
exposition thread. Gauges (role, epoch, offsets, broker and partition health) cost nothing
until a scrape reads them. Histograms take prometheus_client's lock once per fsync, per
snapshot, per admin request or per committed leader batch -- never per record.

Each node has its own :class:`~prometheus_client.CollectorRegistry` (not the process-global
one), so tests and the simulator can run several nodes in one process.

Threads: the exposition server runs collections on its own thread while the node task changes
the state read here. Everything read is either an immutable value (the metadata image, ints)
or copied in one C-level step (``list(d.items())``) before it is iterated.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Histogram, disable_created_metrics
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from raftmeta.controller.image import NO_LEADER, MetadataImage, PartitionRegistration, TopicImage
from raftmeta.controller.quorum import QuorumController
from raftmeta.metrics import catalog
from raftmeta.metrics.grpc import GrpcMetrics

# No ``*_created`` series (the creation time of every counter and histogram): they double the
# series count and no dashboard here reads them. A process-wide switch of prometheus_client.
disable_created_metrics()  # type: ignore[no-untyped-call]

ROLES = ("unattached", "prospective", "candidate", "leader", "follower", "resigned", "observer")

# Buckets (seconds) sized for this system: a commit takes 1-5 ms on loopback, an fsync 0.1-1 ms
# on an SSD, an election 0.1-3 s, a snapshot of a big image seconds.
LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)
FSYNC_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)
ELECTION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 30.0, 60.0)
# A request waits in the inbox and is handled in tens of microseconds when the node is idle.
EVENT_BUCKETS = (0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)
SNAPSHOT_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


@dataclass(slots=True)
class NodeStats:
    """Counters the node task bumps on its own thread (plain ints: the cheapest possible)."""

    append_records: int = 0
    fetch_records: int = 0
    poll_idle_s: float = 0.0
    leader_changes: int = 0
    proposals_committed: int = 0
    proposals_applied: int = 0
    proposals_failed: int = 0
    metadata_errors: int = 0
    snapshot_size_bytes: int = 0


@dataclass(frozen=True, slots=True)
class RaftView:
    """What the scrape-time gauges show, read from the node's core and controller in one go."""

    role: str
    epoch: int
    leader_id: int
    voted_id: int
    high_watermark: int
    log_end_offset: int
    log_end_epoch: int
    unknown_voters: int
    pending: int
    active_controller: bool
    applied_offset: int
    image: MetadataImage
    # Storage faults (docs/storage.md, "Repair from the quorum").
    damaged_batches: int = 0
    repairs: int = 0


@dataclass(frozen=True, slots=True)
class ImageHealth:
    fenced_brokers: int
    active_brokers: int
    topics: int
    partitions: int
    offline: int
    imbalanced: int
    under_replicated: int


def image_health(image: MetadataImage) -> ImageHealth:
    """Broker and partition health of one image: a walk over every partition (the reference;
    :class:`HealthCache` gives the same without walking unchanged topics)."""
    brokers = list(image.brokers.values())
    fenced = sum(1 for b in brokers if b.fenced)
    offline = imbalanced = under = 0
    topics = 0
    for _, topic in image.topics.iter_items():
        topics += 1
        o, i, u = _partition_counts(topic.partitions)
        offline, imbalanced, under = offline + o, imbalanced + i, under + u
    return ImageHealth(fenced, len(brokers) - fenced, topics, image.partition_count, offline, imbalanced, under)


class HealthCache:
    """:func:`image_health` without walking every partition of every image: a topic's counts are
    kept while its image is the same object (images are persistent values: a batch replaces only
    the topics it changes), so a scrape of an image that changed costs a look at every topic and
    a walk over the partitions of the topics that changed. ``tests/metrics`` holds it equal to
    :func:`image_health`."""

    def __init__(self) -> None:
        # topic id -> (the topic's image, offline, imbalanced, under-replicated)
        self._topics: dict[bytes, tuple[TopicImage, int, int, int]] = {}
        self._image: MetadataImage | None = None
        self._health: ImageHealth | None = None

    def health(self, image: MetadataImage) -> ImageHealth:
        if image is self._image and self._health is not None:
            return self._health
        kept = self._topics
        topics: dict[bytes, tuple[TopicImage, int, int, int]] = {}
        offline = imbalanced = under = 0
        for topic_id, topic in image.topics.iter_items():
            counts = kept.get(topic_id)
            if counts is None or counts[0] is not topic:
                counts = (topic, *_partition_counts(topic.partitions))
            topics[topic_id] = counts
            offline += counts[1]
            imbalanced += counts[2]
            under += counts[3]
        fenced = sum(1 for b in image.brokers.values() if b.fenced)
        health = ImageHealth(
            fenced, len(image.brokers) - fenced, len(topics), image.partition_count, offline, imbalanced, under
        )
        self._topics, self._image, self._health = topics, image, health
        return health


def _partition_counts(partitions: Iterable[PartitionRegistration]) -> tuple[int, int, int]:
    """(offline, imbalanced, under-replicated) partitions."""
    offline = imbalanced = under = 0
    for p in partitions:
        if p.leader == NO_LEADER:
            offline += 1
        elif p.leader != p.replicas[0]:
            imbalanced += 1
        if len(p.isr) < len(p.replicas):
            under += 1
    return offline, imbalanced, under


def raft_view(qc: QuorumController) -> RaftView:
    """The gauges' values from a node's QuorumController (attribute reads only: no locks, no
    copies of anything big -- the committed image is an immutable value)."""
    core = qc.core
    progress = core.voter_progress()
    unknown = 0
    if progress is not None:
        unknown = sum(1 for voter, r in progress.items() if voter != core.node_id and not r.acknowledged)
        unknown += sum(1 for voter in core.voters if voter != core.node_id and voter not in progress)
    controller = qc.controller
    role = core.role.value
    return RaftView(
        role=role,
        epoch=core.epoch,
        leader_id=core.leader_id,
        voted_id=max(core.voted_id, -1),  # VOTE_UNKNOWN (-2) after a lost quorum-state file: none known
        high_watermark=core.high_watermark,
        log_end_offset=core.log_end_offset,
        log_end_epoch=core.log.last_epoch,
        unknown_voters=unknown,
        pending=qc.waiting_count if role == "leader" else 0,
        active_controller=qc.is_leader and qc.active,
        applied_offset=controller.committed_offset,
        image=controller.committed_image,
        # A damaged newest snapshot with no fallback counts as one: the state below the log.
        damaged_batches=len(core.damaged) + (1 if core.state_missing else 0),
        repairs=core.repairs,
    )


class NodeCollector(Collector):
    """Yields the counters of :class:`NodeStats` and the gauges of a :class:`RaftView`."""

    def __init__(self, stats: NodeStats, view: Callable[[], RaftView | None]) -> None:
        self._stats = stats
        self._view = view
        self._health = HealthCache()

    def _read_view(self) -> RaftView | None:
        """The view, read on the exposition thread while the node task may be changing what it
        reads (a truncation emptying the log between a length check and an index): such a race
        raises, and a second read a moment later sees a consistent state."""
        try:
            return self._view()
        except (IndexError, KeyError, RuntimeError):
            return self._view()

    def collect(self) -> Iterable[Metric]:
        stats = self._stats
        for name, value in (
            ("raftmeta_raft_append_records_total", stats.append_records),
            ("raftmeta_raft_fetch_records_total", stats.fetch_records),
            ("raftmeta_raft_poll_idle_seconds_total", stats.poll_idle_s),
            ("raftmeta_raft_leader_changes_seen_total", stats.leader_changes),
            ("raftmeta_raft_proposals_committed_total", stats.proposals_committed),
            ("raftmeta_raft_proposals_applied_total", stats.proposals_applied),
            ("raftmeta_raft_proposals_failed_total", stats.proposals_failed),
            ("raftmeta_controller_metadata_errors_total", stats.metadata_errors),
        ):
            spec = catalog.spec(name)
            yield CounterMetricFamily(spec.family, spec.help, value=value)
        yield _gauge("raftmeta_raft_snapshot_size_bytes", stats.snapshot_size_bytes)
        view = self._read_view()
        if view is None:  # the node has not started yet
            return
        state = GaugeMetricFamily("raftmeta_raft_current_state", catalog.spec("raftmeta_raft_current_state").help,
                                  labels=["state"])  # fmt: skip
        for role in ROLES:
            state.add_metric([role], 1.0 if role == view.role else 0.0)
        yield state
        is_leader = view.role == "leader"
        yield from (
            _gauge("raftmeta_raft_current_leader", view.leader_id),
            _gauge("raftmeta_raft_current_epoch", view.epoch),
            _gauge("raftmeta_raft_current_vote", view.voted_id),
            _gauge("raftmeta_raft_high_watermark", view.high_watermark),
            _gauge("raftmeta_raft_log_end_offset", view.log_end_offset),
            _gauge("raftmeta_raft_log_end_epoch", view.log_end_epoch),
            _gauge("raftmeta_raft_number_unknown_voter_connections", view.unknown_voters),
            _gauge("raftmeta_raft_has_leader", view.leader_id != NO_LEADER),
            _gauge("raftmeta_raft_is_leader", is_leader),
            _gauge("raftmeta_raft_proposals_pending", view.pending),
            _gauge("raftmeta_raft_damaged_batches", view.damaged_batches),
            _gauge("raftmeta_controller_active_controller_count", view.active_controller),
            _gauge("raftmeta_controller_last_applied_record_offset", view.applied_offset),
            _gauge("raftmeta_controller_last_committed_record_offset", view.high_watermark - 1),
            _gauge("raftmeta_controller_last_applied_record_lag_records",
                   max(0, view.high_watermark - 1 - view.applied_offset)),
        )  # fmt: skip
        health = self._health.health(view.image)
        yield from (
            _gauge("raftmeta_controller_fenced_broker_count", health.fenced_brokers),
            _gauge("raftmeta_controller_active_broker_count", health.active_brokers),
            _gauge("raftmeta_controller_global_topic_count", health.topics),
            _gauge("raftmeta_controller_global_partition_count", health.partitions),
            _gauge("raftmeta_controller_offline_partitions_count", health.offline),
            _gauge("raftmeta_controller_preferred_replica_imbalance_count", health.imbalanced),
            _gauge("raftmeta_controller_under_replicated_partitions", health.under_replicated),
        )
        repairs = catalog.spec("raftmeta_raft_repairs_total")
        yield CounterMetricFamily(repairs.family, repairs.help, value=view.repairs)


def _gauge(name: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, catalog.spec(name).help, value=float(value))


def _histogram(name: str, registry: CollectorRegistry, buckets: tuple[float, ...]) -> Histogram:
    spec = catalog.spec(name)
    return Histogram(name, spec.help, buckets=buckets, registry=registry)


@dataclass(slots=True)
class _Pending:
    next_offset: int
    appended_at: float


class NodeMetrics:
    """One node's registry, its counters (:attr:`stats`), histograms and the bookkeeping for
    commit and election latency. Fed by the node task (raftmeta/server/node.py); the core knows
    nothing of it."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=False)
        self.stats = NodeStats()
        self._view: Callable[[], RaftView | None] = lambda: None
        self.registry.register(NodeCollector(self.stats, self._current_view))
        self.grpc = GrpcMetrics(self.registry)
        r = self.registry
        self.commit_latency = _histogram("raftmeta_raft_commit_latency_seconds", r, LATENCY_BUCKETS)
        self.election_latency = _histogram("raftmeta_raft_election_latency_seconds", r, ELECTION_BUCKETS)
        self.fsync_duration = _histogram("raftmeta_raft_fsync_duration_seconds", r, FSYNC_BUCKETS)
        self.snapshot_duration = _histogram("raftmeta_raft_snapshot_duration_seconds", r, SNAPSHOT_BUCKETS)
        self.event_queue_time = _histogram("raftmeta_controller_event_queue_time_seconds", r, EVENT_BUCKETS)
        self.event_processing_time = _histogram(
            "raftmeta_controller_event_queue_processing_time_seconds", r, EVENT_BUCKETS
        )
        # Leader batches appended and not yet committed: (next offset, when appended).
        self._uncommitted: deque[_Pending] = deque()
        self._leader_id = NO_LEADER
        self._election_started: float | None = time.perf_counter()  # a node starts without a leader

    def set_view(self, view: Callable[[], RaftView | None]) -> None:
        self._view = view

    def _current_view(self) -> RaftView | None:
        return self._view()

    # -- commit latency (leader) -------------------------------------------------------------------
    def leader_appended(self, next_offset: int, now: float) -> None:
        """The leader appended batches ending before ``next_offset`` (one call per Ready)."""
        self._uncommitted.append(_Pending(next_offset, now))

    def committed(self, high_watermark: int, batches: int, now: float) -> None:
        """``batches`` were committed up to ``high_watermark`` (one call per Ready)."""
        self.stats.proposals_committed += batches
        pending = self._uncommitted
        observe = self.commit_latency.observe
        while pending and pending[0].next_offset <= high_watermark:
            observe(now - pending.popleft().appended_at)

    # -- elections ---------------------------------------------------------------------------------
    def role_changed(self, leader_id: int, is_leader: bool, now: float) -> None:
        """A soft-state change: count new leaders, time the elections between them."""
        if not is_leader:
            self._uncommitted.clear()  # appends of a leadership that ended never commit as ours
        if leader_id == NO_LEADER:
            if self._election_started is None:
                self._election_started = now
        else:
            if leader_id != self._leader_id:
                self.stats.leader_changes += 1
            if self._election_started is not None:
                self.election_latency.observe(now - self._election_started)
                self._election_started = None
        self._leader_id = leader_id

    def observe_fsync(self, seconds: float) -> None:
        self.fsync_duration.observe(seconds)

    def snapshot_taken(self, seconds: float, size_bytes: int) -> None:
        self.snapshot_duration.observe(seconds)
        self.stats.snapshot_size_bytes = size_bytes


def family_names(registry: CollectorRegistry) -> Iterator[str]:
    """Every exposed sample name in ``registry`` (a test and docs helper)."""
    for metric in registry.collect():
        for sample in metric.samples:
            yield sample.name
