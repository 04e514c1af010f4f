"""The controller object the node driver owns on the quorum leader.

Theory of operation
-------------------
The controller holds the **committed image** (everything up to the high watermark) and a queue
of **pending batches** -- records it has handed to the driver that are not yet committed. The
**working image** is the committed image with the pending batches replayed; handlers read it, so
a request sees the effect of every request before it (Kafka's QuorumController does the same with
its timeline snapshots). Images are persistent values, so keeping one per pending batch is cheap
and committing or rolling back is a pointer move.

The controller keeps the image, the handlers and the timers; the request lifecycle -- who waits
for which offset, what a renounce fails -- is its driver's, the
:class:`~raftmeta.controller.quorum.QuorumController` (a request crosses into the controller once,
through ``handle``). Driver contract (one task owns the controller and calls it in order):

1. ``handle(method, request, now_ms[, ids, random]) -> Handled`` (the topic-id and random sources
   default to the ones given to the constructor). Reads (DescribeTopics, DescribeCluster,
   ListPartitionReassignments) are answered at once from the committed image (``handled.response``,
   ``handled.done``). Mutations return ``handled.records``: if not empty, they are a pending batch
   now; propose them to the consensus core, in order, and ``commit`` them once they commit; the
   answer, ``handled.response``, is true then. If empty, the answer is final now when
   ``handled.done``, else once the newest pending batch commits (a no-op must not overtake
   earlier writes).
2. ``commit(batches, last_offset)``: the oldest ``batches`` pending batches committed as one log
   batch ending at ``last_offset``.
3. ``apply_committed(records, last_offset)`` for committed batches this controller did not produce
   (a previous leader's tail; control batches such as LeaderChangeRecord and NoOpRecord, which are
   accepted at any time). A foreign metadata batch is only valid with nothing pending; the driver
   must not call ``handle`` before the first batch of its own epoch is committed (KRaft's rule).
4. ``renounce()`` on losing leadership: pending batches and work under way are dropped, and the
   working image becomes the committed image again.
5. ``tick(now_ms) -> Handled | None``: fences brokers whose session (``session_timeout_ms``) has run
   out; its records are proposed and committed like a request's. Heartbeats (through ``handle``) keep
   the last-contact time, which is soft state: never logged, reset by ``renounce``; a broker
   without one gets a full session from the first tick (as Kafka's ``activate``: a new controller
   never fences a broker for heartbeats that went to its predecessor). When no broker needs
   fencing and ``auto_leader_rebalance_enable`` is on, a tick every
   ``leader_imbalance_check_interval_ms`` elects preferred leaders where they are unfenced and in
   sync (KRaft's ``maybeBalancePartitionLeaders``; the first round one interval after activation).
   After ``activate``, ticks first make the leaderless check (``elections.leaderless_rule``).
6. ``working`` / ``resume()``: a broker leaving or returning may take several turns
   (:mod:`raftmeta.controller.work`). While ``working``, ``handle`` takes no write (hold them) and
   ``tick`` does nothing; once the last turn's batch has committed, ``resume()`` gives the next
   turn's ``Handled``, proposed like any other; the request's answer comes with its last turn.

Idempotent retries: a mutating request with a ``request_id`` appends a RequestRecord holding its
serialized response in the same batch; a retry whose id is in the working image's table (so
committed *or* pending) gets that response and writes nothing -- if it is the same request (its
digest, :mod:`raftmeta.controller.requests`); the id on different work is refused.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from google.protobuf.message import Message

from placement.rng import RandomSource
from raftmeta.api.catalogue import RPCS, Served
from raftmeta.api.limits import REQUEST_ID_CHARS_MAX as REQUEST_ID_MAX
from raftmeta.controller import assign_dirs, brokers, isr, producer_ids, reassign, topic_configs, topics
from raftmeta.controller.changes import (
    AUTO_LEADER_REBALANCE,
    BOOTSTRAP_RECORDS,
    BROKER_SESSION_EXPIRED,
    LEADERLESS_ELECTED,
)
from raftmeta.controller.delta import ImageBuilder
from raftmeta.controller.elections import (
    ScanPass,
    fence_steps,
    leaderless_rule,
    preferred_rule,
    scan_records,
)
from raftmeta.controller.encoded import EncodedPartitions, EncodedTopics
from raftmeta.controller.errors import RequestError
from raftmeta.controller.image import REQUEST_TABLE_CAPACITY, MetadataImage
from raftmeta.controller.requests import request_sha256
from raftmeta.controller.result import (
    DEFAULT_CONFIG,
    ControllerConfig,
    ControllerResult,
    TopicIdSource,
    Work,
)
from raftmeta.controller.snapshot import image_from_records, image_to_records
from raftmeta.controller.work import TurnBudget, start
from raftmeta.records.decode import with_record
from raftmeta.records.kafka.mapping import METADATA_VERSION, METADATA_VERSION_FEATURE
from raftmeta.v1 import controller_pb2, errors_pb2, records_pb2

# Record kinds that carry no metadata: consensus control records and snapshot framing.
_CONTROL_KINDS = frozenset({"leader_change", "no_op", "snapshot_header", "snapshot_footer", "voters"})

Handler = Callable[..., ControllerResult[Any]]


@dataclass(frozen=True, slots=True)
class Method:
    name: str
    handler: Handler
    request_type: type[Message]
    response_type: type[Message]
    mutating: bool


# The handler of each RPC the controller serves; every other fact is its catalogue row.
HANDLERS: dict[str, Handler] = {
    "CreateTopics": topics.create_topics,
    "CreatePartitions": topics.create_partitions,
    "DeleteTopics": topics.delete_topics,
    "ElectLeaders": topics.elect_leaders,
    "AlterPartitionReassignments": reassign.alter_partition_reassignments,
    "RegisterBroker": brokers.register_broker,
    "BrokerHeartbeat": brokers.broker_heartbeat,
    "UnregisterBroker": brokers.unregister_broker,
    "AlterPartition": isr.alter_partition,
    "AssignReplicasToDirs": assign_dirs.assign_replicas_to_dirs,
    "AllocateProducerIds": producer_ids.allocate_producer_ids,
    "DescribeTopics": topics.describe_topics,
    "ListPartitionReassignments": reassign.list_partition_reassignments,
    "DescribeCluster": brokers.describe_cluster,
    "DescribeConfigs": topic_configs.describe_configs,
    "IncrementalAlterConfigs": topic_configs.incremental_alter_configs,
}
METHODS: dict[str, Method] = {
    row.name: Method(row.name, HANDLERS[row.name], row.request_type, row.response_type, row.mutating)
    for row in RPCS.values()
    if row.served is Served.CONTROLLER
}
assert set(HANDLERS) == set(METHODS), "a handler without a catalogue row served by the controller"


@dataclass(frozen=True, slots=True)
class Handled:
    """What ``handle`` / ``tick`` / ``resume`` hand the driver.

    ``records``: propose them as one batch when not empty; once it commits, ``commit`` it.
    ``response``: the answer (None for a timer's batches and work's turns, which answer nobody),
    final now when ``done``; otherwise true once the batch -- or, with no records, the newest
    pending batch -- commits (a no-op must not overtake earlier writes).
    """

    method: str
    records: Sequence[records_pb2.MetadataRecord]
    response: Message | None
    done: bool
    # What made the batch, for log lines: the method, or a timer's cause (changes.TIMER_CAUSES).
    cause: str = ""


@dataclass(frozen=True, slots=True)
class _Work:
    """Work under way: its steps and the request it answers (None: a timer's)."""

    steps: Work[Any]
    method: str
    request: Message | None
    request_id: str
    digest: bytes


def _fence_stale_work(
    image: MetadataImage, stale: list[int], config: ControllerConfig
) -> Work[controller_pb2.BrokerHeartbeatResponse]:
    """Fence each stale broker in a batch of its own (or several), on the image after the ones
    before it: Kafka's maybeFenceOneStaleBroker, which reschedules itself at once while brokers
    are stale. Answers nobody (the response is never read)."""
    records: list[records_pb2.MetadataRecord] = []
    for broker_id in stale:
        if records:
            image = yield records
        _, records = yield from fence_steps(
            image, broker_id, config.unclean_leader_election_enable, TurnBudget.of(config)
        )
    return ControllerResult(tuple(records), controller_pb2.BrokerHeartbeatResponse())


class _PendingBatch(NamedTuple):
    """A batch handed to the driver, not committed yet."""

    image: MetadataImage  # the working image after this batch
    encoded: Sequence[EncodedPartitions] = ()  # the topics it creates, as their records encode them


class Controller:
    def __init__(
        self,
        image: MetadataImage | None = None,
        *,
        config: ControllerConfig = DEFAULT_CONFIG,
        committed_offset: int = -1,
        ids: TopicIdSource | None = None,
        random: RandomSource | None = None,
    ) -> None:
        """``ids`` and ``random`` are the default sources for ``handle`` (the driver passes
        ``lambda: uuid.uuid4().bytes`` and a seeded ``placement.JavaRandom``)."""
        self.config = config
        self.ids = ids
        self.random = random
        self._committed = image if image is not None else MetadataImage.empty()
        self._committed_offset = committed_offset
        self._pending: deque[_PendingBatch] = deque()
        # Soft state: broker id -> time of its last heartbeat (or registration), in ms.
        self.last_contact_ms: dict[int, int] = {}
        # Broker id -> where its registration was committed (Kafka's registerBrokerRecordOffsets):
        # derived from the committed log on every node, so a new leader has it too. A broker
        # known only from a snapshot counts as registered at the snapshot's offset.
        self.registrations: dict[int, brokers.RegistrationOffset] = {
            b.id: brokers.RegistrationOffset(b.epoch, committed_offset) for b in self._committed.brokers.values()
        }
        # Soft state: when the next automatic preferred-leader round is due (None: not scheduled;
        # the first tick of a leadership schedules it one check interval later, as Kafka does).
        self.next_balance_ms: int | None = None
        # Soft state: the automatic round's pass over the image, while one is under way.
        self.balance_pass: ScanPass | None = None
        # Soft state: the leaderless check's pass, from activation until it is over.
        self.leaderless_pass: ScanPass | None = None
        # Work that takes several turns (a broker leaving or returning), while it is under way.
        self._work: _Work | None = None
        # Topics committed since the last snapshot, as their creation encoded them (encoded.py).
        self.encoded = EncodedTopics()

    # ---- views ----------------------------------------------------------------------------------
    @property
    def committed_image(self) -> MetadataImage:
        return self._committed

    @property
    def image(self) -> MetadataImage:
        """The working image: committed + every pending batch."""
        return self._pending[-1].image if self._pending else self._committed

    @property
    def committed_offset(self) -> int:
        return self._committed_offset

    @property
    def pending_count(self) -> int:
        return len(self._pending)

    # ---- requests -------------------------------------------------------------------------------
    def handle(
        self,
        method: str,
        request: Message,
        now_ms: int,
        ids: TopicIdSource | None = None,
        random: RandomSource | None = None,
    ) -> Handled:
        """Handle one request (see the module docstring). ``ids``/``random`` override the sources
        given to the constructor; a request that needs a missing one raises ValueError."""
        ids = ids or self.ids or _no_ids
        random = random or self.random or _NoRandom()
        spec = METHODS.get(method)
        if spec is None:
            raise RequestError(f"unknown method {method!r}: expected one of {', '.join(METHODS)}")
        if not isinstance(request, spec.request_type):
            raise RequestError(f"{method} takes a {spec.request_type.__name__}, got {type(request).__name__}")
        if not spec.mutating:
            result = spec.handler(self._committed, request, now_ms, ids, random, self.config)
            return Handled(method, (), result.response, True)
        if self._work is not None:
            raise RuntimeError(f"{method}: a write while work is under way (hold it until `working` is False)")
        request_id: str = getattr(request, "request_id", "")
        if len(request_id) > REQUEST_ID_MAX:
            raise RequestError(f"request_id: at most {REQUEST_ID_MAX} characters, got {len(request_id)}")
        digest = request_sha256(request) if request_id else b""
        if request_id:
            entry = self.image.requests.get(request_id)
            if entry is not None:
                if entry.method != method:
                    raise RequestError(f"request_id {request_id!r} was already used for {entry.method}, not {method}")
                if entry.request_sha256 and entry.request_sha256 != digest:
                    raise RequestError(
                        f"request_id {request_id!r} was already used for a different {method} request: "
                        "a retry must resend the same request; new work needs a new request_id"
                    )
                return self._answer(method, spec.response_type.FromString(entry.response))
        if isinstance(request, controller_pb2.BrokerHeartbeatRequest):
            # The one handler that reads log offsets: whether the broker caught up with its
            # registration, which the image (made of records, not offsets) cannot say.
            result = brokers.broker_heartbeat(self.image, request, now_ms, ids, random, self.config, self.registrations)
        elif isinstance(request, controller_pb2.RegisterBrokerRequest):
            # Whose session is alive is soft state (heartbeat times), not in the image either.
            sessions = brokers.live_sessions(self.last_contact_ms, now_ms, self.config.session_timeout_ms)
            result = brokers.register_broker(self.image, request, now_ms, ids, random, self.config, sessions)
        else:
            result = spec.handler(self.image, request, now_ms, ids, random, self.config)
        self._note_contact(method, request, result.response, now_ms)
        if result.more is not None:
            self._work = _Work(result.more, method, request, request_id, digest)
            return self._push_turn(result.records, method)
        return self._finish(method, request_id, digest, result)

    def _finish(self, method: str, request_id: str, digest: bytes, result: ControllerResult[Any]) -> Handled:
        """The last batch of a request (its only one, unless it took several turns)."""
        records = result.records
        if not records:
            return self._answer(method, result.response)
        if request_id:
            records = with_record(
                records,
                records_pb2.MetadataRecord(
                    request=records_pb2.RequestRecord(
                        request_id=request_id,
                        method=method,
                        response=result.response.SerializeToString(),
                        request_sha256=digest,
                    )
                ),
            )
        self._push(records, result)
        return Handled(method, records, result.response, False, method)

    def _push_turn(self, records: Sequence[records_pb2.MetadataRecord], cause: str) -> Handled:
        """A batch of work that goes on in later turns: it answers nobody."""
        if records:
            self._pending.append(_PendingBatch(self.image.replay_all(records)))
        return Handled("Work", tuple(records), None, False, cause)

    # ---- work over several turns ----------------------------------------------------------------
    @property
    def working(self) -> bool:
        """Work that takes several turns is under way (raftmeta.controller.work): until it ends,
        ``handle`` takes no write and ``tick`` does nothing; call ``resume`` once per turn."""
        return self._work is not None

    def resume(self) -> Handled:
        """The next turn of the work under way: a batch of its own (answering nobody), or, in its
        last turn, the request's answer as ``handle`` gives it.
        Call it once the previous turn's batch has committed, so that turns never pile up in the
        log faster than the quorum takes them."""
        work = self._work
        if work is None:
            raise RuntimeError("resume: no work is under way")
        try:
            records = work.steps.send(self.image)
        except StopIteration as done:
            self._work = None
            result: ControllerResult[Any] = done.value
            if work.request is None:  # a timer's work: its last batch answers nobody either
                return self._push_timer(list(result.records), self.image.replay_all(result.records), work.method)
            return self._finish(work.method, work.request_id, work.digest, result)
        except BaseException:
            self._work = None  # a failed step cannot go on; its committed batches stand
            raise
        return self._push_turn(records, work.method)

    def _answer(self, method: str, response: Message) -> Handled:
        """An answer with no records: final now, or once the newest pending batch commits."""
        return Handled(method, (), response, not self._pending)

    def _note_contact(self, method: str, request: Message, response: Message, now_ms: int) -> None:
        """A successful heartbeat or registration renews the broker's session (soft state)."""
        if method in ("BrokerHeartbeat", "RegisterBroker") and getattr(response, "error_code", 0) == errors_pb2.NONE:
            self.last_contact_ms[getattr(request, "broker_id")] = now_ms  # noqa: B009

    def _push(self, records: Sequence[records_pb2.MetadataRecord], result: ControllerResult[Any]) -> None:
        # One path from a handler's records to state: replay, with a create's values as its memo
        # (the leader built the records from them; reading them back cost a third of its work).
        builder = ImageBuilder(self.image, keep_encoded=True)
        builder.replay_all(records, memo=result.new_topics or ())
        image = builder.build()
        self._pending.append(_PendingBatch(image, builder.encoded))

    # ---- time -----------------------------------------------------------------------------------
    def tick(self, now_ms: int) -> Handled | None:
        """The controller's timers, one batch per call (or None): fence the unfenced brokers whose
        session has expired (one per batch: work over several turns when there are several);
        else, after activation, the leaderless check; else, when due, elect preferred leaders
        where they are available (``auto_leader_rebalance_enable``). Nothing while work is under
        way."""
        if self._work is not None:
            return None
        fencing = self._fence_stale(now_ms)
        if fencing is not None:
            return fencing
        leaderless = self._elect_leaderless()
        if leaderless is not None:
            return leaderless
        return self._balance_leaders(now_ms)

    def _fence_stale(self, now_ms: int) -> Handled | None:
        image = self.image
        for broker_id in image.brokers:
            self.last_contact_ms.setdefault(broker_id, now_ms)
        stale = brokers.stale_brokers(image, self.last_contact_ms, now_ms, self.config.session_timeout_ms)
        if not stale:
            return None
        result = start(_fence_stale_work(image, stale, self.config), controller_pb2.BrokerHeartbeatResponse())
        if result.more is not None:
            self._work = _Work(result.more, BROKER_SESSION_EXPIRED, None, "", b"")
            return self._push_turn(result.records, BROKER_SESSION_EXPIRED)
        return self._push_timer(list(result.records), image.replay_all(result.records), BROKER_SESSION_EXPIRED)

    def _balance_leaders(self, now_ms: int) -> Handled | None:
        """KRaft's periodic ``maybeBalancePartitionLeaders``. Kafka schedules a round one interval
        after a write leaves a partition imbalanced; raftmeta checks once per interval (a pass
        over the image, not a cost per record), which bounds the wait the same way. A pass looks
        at no more than ``tick_scan_partitions_max`` partitions a tick and goes on
        10 ms later, so no tick holds the node's loop in proportion to the image."""
        config = self.config
        if not config.auto_leader_rebalance_enable:
            return None
        if self.next_balance_ms is None:
            self.next_balance_ms = now_ms + config.leader_imbalance_check_interval_ms
        if now_ms < self.next_balance_ms:
            return None
        if self.balance_pass is None:
            self.balance_pass = ScanPass.over(self.image)
        image = self.image
        records, more = scan_records(
            image,
            self.balance_pass,
            preferred_rule(image),
            config.max_elections_per_imbalance,
            config.tick_scan_partitions_max,
        )
        # Kafka reschedules at once (10 ms) when a round hit its limit; so does a pass that
        # looked at as many partitions as one tick may.
        self.next_balance_ms = now_ms + (10 if more else config.leader_imbalance_check_interval_ms)
        if not more:
            self.balance_pass = None
        if not records:
            return None
        return self._push_timer(records, self.image.replay_all(records), AUTO_LEADER_REBALANCE)

    def _elect_leaderless(self) -> Handled | None:
        """The leaderless check a new controller makes (elections.leaderless_rule): a pass over
        the image, at most ``tick_scan_partitions_max`` partitions a tick."""
        scan = self.leaderless_pass
        if scan is None:
            return None
        config = self.config
        image = self.image
        records, more = scan_records(
            image,
            scan,
            leaderless_rule(image, config.unclean_leader_election_enable),
            config.partition_changes_per_batch_max,
            config.tick_scan_partitions_max,
        )
        if not more:
            self.leaderless_pass = None
        if not records:
            return None
        return self._push_timer(records, image.replay_all(records), LEADERLESS_ELECTED)

    def _push_timer(self, records: list[records_pb2.MetadataRecord], image: MetadataImage, cause: str) -> Handled:
        """A batch a timer produced: it answers nobody, and commits in order with the requests."""
        self._pending.append(_PendingBatch(image))
        return Handled("Tick", tuple(records), None, False, cause)

    # ---- the log --------------------------------------------------------------------------------
    def commit(self, batches: int, last_offset: int) -> None:
        """The oldest ``batches`` pending batches committed, together, as the log batch whose last
        record has ``last_offset``: the committed image becomes the working image after them.

        Under load the driver combines queued requests into one log batch (one append, one
        fsync, one Fetch round for all of them); they still are separate pending batches here,
        each with its own working image, committed (or lost) together as the log keeps them.
        Which batches are whose, and which answers wait for which offset, is the driver's
        (:class:`~raftmeta.controller.quorum.QuorumController`)."""
        if not 0 < batches <= len(self._pending):
            raise ValueError(f"commit of {batches} batches: {len(self._pending)} pending")
        if last_offset <= self._committed_offset:
            raise ValueError(f"batch ending at {last_offset} does not follow committed offset {self._committed_offset}")
        pending = self._pending
        for _ in range(batches):
            head = pending.popleft()
            for encoded in head.encoded:
                self.encoded.add(last_offset, encoded)
        brokers.registration_offsets_after(self._committed, head.image, last_offset, self.registrations)
        self._committed = head.image
        self._committed_offset = last_offset

    def apply_committed(self, records: Iterable[records_pb2.MetadataRecord], last_offset: int) -> None:
        """Replay a committed batch this controller did not produce (followers use this path too).

        Control batches (LeaderChangeRecord, NoOpRecord, snapshot framing) change no metadata and
        may commit between this controller's own batches: they are accepted at any time. A batch
        with metadata records is only valid with nothing pending -- otherwise the log holds writes
        this controller did not make ahead of its own, and it raises.
        """
        if not isinstance(records, Sequence):
            records = list(records)
        if all(r.WhichOneof("record") in _CONTROL_KINDS for r in records):
            if not self._pending:
                self._committed_offset = max(self._committed_offset, last_offset)
            return
        if self._pending:
            raise ValueError("a foreign batch committed while this controller has pending batches: logs diverged")
        if last_offset <= self._committed_offset:
            raise ValueError(f"batch ending at {last_offset} does not follow committed offset {self._committed_offset}")
        builder = ImageBuilder(self._committed, keep_encoded=True)
        builder.replay_all(records)
        committed = builder.build()
        brokers.registration_offsets_after(self._committed, committed, last_offset, self.registrations)
        self._committed = committed
        self._committed_offset = last_offset
        for encoded in builder.encoded:
            self.encoded.add(last_offset, encoded)

    def activate(self) -> None:
        """This controller became the active one: its soft state starts afresh (Kafka's
        BrokerHeartbeatManager on activation). Heartbeat times from an earlier leadership of this
        node are stale -- the brokers heartbeated to other controllers meanwhile -- and would fence
        them at the first tick; every broker gets a full session from the first tick instead."""
        self.last_contact_ms.clear()
        self.next_balance_ms = None
        self.balance_pass = None
        self._work = None
        self.leaderless_pass = ScanPass.over(self.image)

    def bootstrap(self) -> Handled | None:
        """The records an active controller writes first when the image lacks them (Kafka's
        ``ActivationRecordsGenerator.recordsForEmptyLog``): the FeatureLevelRecord of
        metadata.version, without which a Kafka broker's metadata loader publishes nothing. Kafka
        writes them only into an empty log; raftmeta also into a log written before it wrote them,
        so brokers can join a quorum of any age. None when the image has them. Its batch answers
        nobody and commits in order with the requests after it."""
        if self.image.feature_level(METADATA_VERSION_FEATURE) is not None:
            return None
        records = [
            records_pb2.MetadataRecord(
                feature_level=records_pb2.FeatureLevelRecord(
                    name=METADATA_VERSION_FEATURE, feature_level=METADATA_VERSION
                )
            )
        ]
        self._pending.append(_PendingBatch(self.image.replay_all(records)))
        return Handled("Bootstrap", tuple(records), None, False, BOOTSTRAP_RECORDS)

    def renounce(self) -> None:
        """Leadership lost: pending batches and work under way are dropped (the working image is
        the committed one again), and the soft state with them. Whoever waited for them is the
        driver's to answer."""
        self._pending.clear()
        self._work = None
        self.leaderless_pass = None
        self.last_contact_ms.clear()
        self.next_balance_ms = None
        self.balance_pass = None

    # ---- snapshots ------------------------------------------------------------------------------
    def snapshot(self) -> tuple[int, list[records_pb2.MetadataRecord]]:
        """(committed offset, the committed image as records)."""
        return self._committed_offset, image_to_records(self._committed)

    @classmethod
    def from_snapshot(
        cls,
        records: Iterable[records_pb2.MetadataRecord],
        offset: int,
        *,
        config: ControllerConfig = DEFAULT_CONFIG,
        request_table_capacity: int = REQUEST_TABLE_CAPACITY,
    ) -> Controller:
        """A controller whose committed image is the snapshot's (taken at ``offset``)."""
        encodings: list[EncodedPartitions] = []
        image = image_from_records(records, request_table_capacity, encoded=encodings)
        controller = cls(image, config=config, committed_offset=offset)
        for encoded in encodings:
            controller.encoded.add(offset, encoded)
        return controller


def _no_ids() -> bytes:
    raise ValueError("this request needs topic ids: pass ids= to Controller() or handle()")


class _NoRandom:
    def next_int(self, bound: int) -> int:
        raise ValueError("this request needs a random source: pass random= to Controller() or handle()")
