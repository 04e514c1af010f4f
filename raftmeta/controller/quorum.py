"""QuorumController: the consensus core and the controller as one pure object (Kafka's
QuorumController), driven like the core -- no IO, no clock, no randomness of its own.

Theory of operation
-------------------
A node owns one ``QuorumController``, which owns the node's :class:`~raftmeta.raft.RaftCore` and
its :class:`~raftmeta.controller.Controller`. Inputs:

* ``submit(now, key, method, request)``: an admin request; ``key`` is the driver's (it maps the
  key to whoever waits for the answer). Not the leader: answered NOT_CONTROLLER at once. The
  leader's controller before the first batch of its own epoch commits: held, and handled once it
  has (KRaft's rule: it has then replayed everything the previous leader committed).
* ``step(now, envelope)``, ``on_log_flushed(...)``, ``on_snapshot_created(...)``: the core's.
* ``tick(now)``: the controller's timers (broker sessions, automatic preferred-leader elections).
* ``apply_committed(entries)`` / ``defer_committed(entries)``: committed batches from a Ready, once
  the driver has written and sent what it must first.
* ``install_snapshot(records, end_offset)``: the driver wrote a snapshot fetched from the leader.

Outputs, after any input:

* ``take_ready()``: the core's :class:`~raftmeta.raft.Ready` (perform it as the core's driver
  contract says); a Ready that changes the role first applies any deferred commit, then -- off the
  leader -- renounces: every request waiting for a commit or held fails with NOT_CONTROLLER.
* ``take_answers()``: :class:`Answer` s, ``key -> response | error`` (``NotControllerError``,
  ``RequestError``, ``ControllerFailedError``).
* ``take_snapshot_due()``: a :class:`SnapshotDue` when the committed image should be written.
* ``take_events()``: things worth a log line (the driver logs them; this object cannot).
* ``read_stale(now, method, request)``: a read answered at once from this node's committed image
  (``consistency: STALE``), leader or not.

Reads
-----
DescribeTopics, DescribeCluster and ListPartitionReassignments are linearizable by default: the
leader starts a read-index round (``RaftCore.read_index``) and answers once the core confirms it
and the controller has applied every batch below the read's index -- from an image at least as
new as the commit point when the read arrived, after a majority of voters proved that no other
leader had been elected by then. A read costs one Fetch round trip and writes nothing.
* ``deadline(core_deadline)``: when to come back even without input (the open batch's linger).

Work over several turns
-----------------------
A broker leaving or returning when it is in many partitions is controller work over several
turns (:mod:`raftmeta.controller.work`): ``poll`` runs its next turn once the previous turn's batch
has committed (``deadline`` is then "now"), and writes that arrive meanwhile -- admin requests,
heartbeats, voter changes -- are held and handled in order when it ends. Reads are answered
meanwhile. Leadership lost midway fails the held requests and the work's own with NOT_CONTROLLER.

The open batch
--------------
Requests with a request id (their records end with their RequestRecord, so every record of a
combined batch belongs to the request after it) join an open batch, proposed as ONE log batch
when a follower asks for data (its Fetch arrives, or one is parked here) and no batch is in
flight (appended, not yet committed), when it is full, or after ``LINGER_MS``: under load one
append, one fsync and one Fetch round per follower serve every request that queued during the
previous commit (proposing at every follower's Fetch makes a batch per Fetch, half the size, at
more CPU per request: docs/performance.md). Anything else -- broker registrations, heartbeats,
fencing -- is a batch of its own, in order behind the open batch.

Pending work and commit routing
-------------------------------
This object owns every request it cannot answer at once, in one lifecycle
(:mod:`raftmeta.controller.lifecycle`: a state per request, the allowed moves as a table): held,
reading, staged in the open batch, working, or in the offset-keyed table (``_pending``) under the
offset whose commit makes its answer true. That table is the one key space: a batch this
controller proposed is known there by its last offset, with how many of the ``Controller``'s
pending batches it holds (``Controller.commit``); every other committed batch (a follower's, the
start-up replay, a new leader's inherited tail) is replayed, consecutive ones together. After each
applied batch, everything waiting at or below its offset is answered. A request crosses into the
``Controller`` once (``handle``); the ``Controller`` keeps the image, the handlers and the timers.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import Message

from raftmeta.controller.changes import LOGGED_METHODS, TIMER_CAUSES, Line, describe_changes
from raftmeta.controller.controller import METHODS, Controller, Handled
from raftmeta.controller.encoded import EncodedTopics
from raftmeta.controller.errors import ControllerFailedError, NotControllerError, RequestError
from raftmeta.controller.image import MetadataImage
from raftmeta.controller.lifecycle import Event, Pending, PendingTable, State
from raftmeta.raft import (
    Entry,
    Envelope,
    NotLeaderError,
    ProposalLimitError,
    RaftCore,
    Ready,
    ReplicaProgress,
    Role,
    SnapshotImage,
)
from raftmeta.raft.core import VoterChangeError
from raftmeta.raft.voters import Endpoint, VoterNode
from raftmeta.records.decode import LazyRecords, record_bytes, serialized
from raftmeta.v1 import controller_pb2, raft_pb2, records_pb2

# The open batch: at most this many bytes of records are combined into one log batch, so Fetch
# answers and a follower's work per answer stay bounded with big requests ...
COMBINED_BATCH_BYTES = 512 * 1024
# ... and it is proposed after at most this long even if no follower asks for data (a safety net:
# under load a follower's Fetch closes it much sooner; with no load one is waiting already).
LINGER_MS = 5
# Snapshot once this many times the last snapshot's records were committed (if more than the
# configured interval): see _maybe_snapshot.
SNAPSHOT_GROWTH = 2
# KIP-853's voter changes: handled by the consensus core, answered once the change commits.
VOTER_CHANGE_RESPONSES: dict[str, type[Message]] = {
    "AddRaftVoter": controller_pb2.AddRaftVoterResponse,
    "RemoveRaftVoter": controller_pb2.RemoveRaftVoterResponse,
    "UpdateRaftVoter": controller_pb2.UpdateRaftVoterResponse,
}
NEVER = 1 << 62
METHOD_RESPONSES: dict[str, type[Message]] = {name: m.response_type for name, m in METHODS.items()}

# (records of a snapshot, the offset of its last record) -> a controller with that committed image.
ControllerFactory = Callable[[Sequence[records_pb2.MetadataRecord], int], Controller]


@dataclass(frozen=True, slots=True)
class Answer:
    """The outcome of the driver's request ``key``: a response, or an error to raise."""

    key: int
    response: Message | None = None
    error: Exception | None = None


@dataclass(frozen=True, slots=True)
class SnapshotDue:
    """Write a snapshot of ``image`` (committed, immutable) ending at ``end_offset`` in ``epoch``,
    then report it with ``on_snapshot_created`` (or ``snapshot_failed``)."""

    end_offset: int
    epoch: int
    image: MetadataImage
    # The voter set in force at ``end_offset``: snapshots carry it (KIP-853), so it outlives the log.
    voters: records_pb2.VotersRecord | None = None
    # Topics created since the last snapshot as their creation encoded them (SnapshotEncoder).
    created: EncodedTopics | None = None


# A batch of this controller's changes that the log truncated away (or leadership lost before it
# was appended): its change lines never became facts.
DROPPED_LINES = "controller changes dropped: their batch was not committed"


@dataclass(frozen=True, slots=True)
class ProposedLines:
    """The change lines of a proposed batch: logged when it commits, in ``epoch``."""

    epoch: int
    proposed_ms: int
    lines: list[Line]


@dataclass(frozen=True, slots=True)
class QuorumControllerConfig:
    # Snapshot every this many committed records (or more, as the image grows: _maybe_snapshot).
    snapshot_interval_records: int = 10_000
    # Test-only bug: answer admin requests when proposed instead of when committed.
    unsafe_ack_before_commit: bool = False


def _is_read(method: str, request: Message) -> bool:
    """Whether a request is a read (answered after a read-index round; never held behind work)."""
    spec = METHODS.get(method)
    return spec is not None and not spec.mutating and isinstance(request, spec.request_type)


def is_stale_read(request: Message) -> bool:
    """Whether a request asks to be answered from the local image (``consistency: STALE``)."""
    return getattr(request, "consistency", controller_pb2.LINEARIZABLE) == controller_pb2.STALE


class QuorumController:
    """One node's consensus core and controller with the request lifecycle between them. Not
    thread-safe: one driver task owns it (see the module docstring)."""

    def __init__(
        self,
        core: RaftCore,
        controller: Controller,
        make_controller: ControllerFactory,
        *,
        config: QuorumControllerConfig | None = None,
        snapshot_records: int = 0,
    ) -> None:
        self.core = core
        self.controller = controller
        self._make_controller = make_controller
        self.config = config or QuorumControllerConfig()
        # All pending work (lifecycle.py): what waits for an offset -- this controller's batches
        # and the answers they make true, voter changes, confirmed reads -- and what waits for
        # something else: held requests, reads in their read-index round, the work under way's
        # request, the open batch.
        self._pending = PendingTable()
        self._held: deque[Pending] = deque()
        self._reads: dict[int, Pending] = {}  # read-index rounds under way: read id -> request
        self._work_request: Pending | None = None
        # The open batch: the records of ``_open_batches`` of the controller's pending batches,
        # the requests answered when it commits, and their change lines.
        self._open_batches = 0
        self._open_requests: list[Pending] = []
        self._open_records: list[bytes] = []
        self._open_lines: list[Line] = []
        self._open_bytes = 0
        self._open_since = 0
        # The last offset of this controller's newest proposed batch: an answer with no records of
        # its own waits for it when the open batch is empty (a no-op must not overtake writes).
        self._newest_own = -1
        # The last offset applied (own, foreign or control batch): what waits for an offset at or
        # below it is answered.
        self._applied = controller.committed_offset
        self._active = False
        self._deferred: list[Entry] = []
        self._deferred_at = 0
        self._answers: list[Answer] = []
        self._now_ms = 0
        self._events: list[tuple[str, dict[str, Any]]] = []
        self._records_since_snapshot = 0
        self._last_snapshot_records = snapshot_records  # records in the last snapshot taken or loaded
        self._snapshotting = False
        self._snapshot_due: SnapshotDue | None = None
        # The change lines of this controller's proposed batches (changes.py), by last offset until
        # the batch commits (logged then, as facts) or another batch commits there (logged as
        # dropped). A deposed leader logs no change it never committed.
        self._proposed_lines: dict[int, ProposedLines] = {}
        # The controller's work under way: what started it, when, and the batches and records it
        # wrote so far (for its log lines).
        self._work_cause = ""
        self._work_started_ms = 0
        self._work_batches = 0
        self._work_records = 0

    # -- views -------------------------------------------------------------------------------------
    @property
    def is_leader(self) -> bool:
        return self.core.role is Role.LEADER

    @property
    def active(self) -> bool:
        """This leader's controller answers requests (its epoch's first batch is committed)."""
        return self._active

    @property
    def waiting_count(self) -> int:
        """Requests waiting for a commit, a read-index round or the controller to become active."""
        return (
            self._pending.request_count
            + len(self._held)
            + len(self._reads)
            + len(self._open_requests)
            + (self._work_request is not None)
        )

    @property
    def has_deferred(self) -> bool:
        return bool(self._deferred)

    def deadline(self, core_deadline: int) -> int:
        """When the driver must come back without input: the core's deadline, the open batch's
        linger, or now when the controller's work can take its next turn, if sooner."""
        if self._work_runnable():
            return min(core_deadline, self._now_ms)  # the next turn of the work under way
        if self._open_batches:
            return min(core_deadline, self._open_since + LINGER_MS)
        return core_deadline

    # -- inputs ------------------------------------------------------------------------------------
    def submit(self, now_ms: int, key: int, method: str, request: Message) -> None:
        """An admin request; its answer comes out of ``take_answers`` under ``key``. A read that
        asks for ``consistency: STALE`` is answered at once from this node's image, leader or not."""
        self._now_ms = now_ms
        if is_stale_read(request):
            self._answers.append(self._read(key, method, request))
        elif not self.is_leader:
            self._answers.append(Answer(key, error=NotControllerError(self.core.leader_id)))
        else:
            pending = Pending(key, method, request)
            if not self._active or ((self._held or self.controller.working) and not _is_read(method, request)):
                pending.move(Event.HOLD)
                self._held.append(pending)
            else:
                self._handle(now_ms, pending)

    def step(self, now_ms: int, envelope: Envelope) -> None:
        self._now_ms = now_ms
        if not self._open_batches or type(envelope.message) is not raft_pb2.FetchRequest:
            self.core.step(now_ms, envelope)
            return
        # A follower asks for data. With nothing uncommitted the open batch goes in its answer;
        # with a batch in flight it waits for that batch's commit, which this Fetch may bring.
        if not self._in_flight():
            self._propose_open_batch(now_ms)
        self.core.step(now_ms, envelope)
        if self._open_batches and not self._in_flight():
            self._propose_open_batch(now_ms)

    def on_log_flushed(self, now_ms: int, offset: int, ready_seq: int) -> None:
        self.core.on_log_flushed(now_ms, offset, ready_seq)

    def on_snapshot_created(self, now_ms: int, image: SnapshotImage, records: int) -> None:
        self._snapshotting = False
        self._last_snapshot_records = records
        self.controller.encoded.prune(image.end_offset)
        self.core.on_snapshot_created(now_ms, image)

    def snapshot_failed(self) -> None:
        self._snapshotting = False

    def leader_to_probe(self, peer: int) -> int | None:
        """A call to ``peer`` failed (its connection broke or was refused, or it timed out): the
        epoch whose leader the driver should prove gone -- ``peer`` is the leader this node follows
        -- or None (nothing to prove: a peer that is not our leader costs us no election).

        The one rule of the leader-loss path, for every driver: the node proves the death with a
        connect to the leader's port (raftmeta/server/probe.py), the simulator by whether the
        leader's process is down (raftmeta/sim/plane.py); both then call :meth:`leader_gone` with
        this epoch. A paused or partitioned leader proves nothing: the fetch timeout judges it."""
        core = self.core
        if core.role is not Role.FOLLOWER or core.leader_id != peer:
            return None
        return core.epoch

    def leader_gone(self, now_ms: int, leader_id: int, epoch: int, correlation_id: int) -> bool:
        """The driver proved that the leader of ``epoch`` is gone (its port refuses connections):
        start the election now rather than after the fetch timeout (2 s by default). Returns
        whether it applied (this node still follows that leader in that epoch).

        The core has one input for "the leader is gone": the leader's own EndQuorumEpoch, which a
        resigning leader sends. A dead leader cannot send it, so it is stepped on the leader's
        behalf (``correlation_id`` is the driver's, for an answer nobody waits for) -- it only
        moves this follower's election timer (KIP-595: the follower stops defending the leader
        against pre-votes and runs after a rank-based delay); it persists nothing and changes no
        epoch or vote, so safety does not depend on it.

        Every follower ranks the successors the same way: the dead leader's own id first, then the
        others by id. The core starts the voter at rank k after 0, 100, 200, 400... ms (Kafka's
        rank backoff), so the first follower runs after 100 ms rather than at once: the other
        followers notice the death within a few ms of each other (their Fetches break together),
        and a pre-vote that reached one still defending the dead leader would be refused, leaving
        the candidate to wait out a whole election timeout. If the first follower's log is behind,
        the next one runs 100 ms later and wins."""
        core = self.core
        if core.role is not Role.FOLLOWER or core.leader_id != leader_id or core.epoch != epoch:
            return False
        successors = [leader_id, *(v for v in sorted(core.voters) if v != leader_id)]
        request = raft_pb2.EndQuorumEpochRequest(
            cluster_id=core.config.cluster_id,
            leader_id=leader_id,
            leader_epoch=epoch,
            preferred_successors=successors,
        )
        self.step(now_ms, Envelope(leader_id, core.node_id, correlation_id, request))
        self._events.append(("leader process gone; electing a successor now", {"leader_id": leader_id}))
        return True

    def tick(self, now_ms: int) -> None:
        """The controller's timers (leader only): fence brokers whose session ran out, elect
        preferred leaders when the imbalance check is due."""
        if self.is_leader and self._active:
            before = self.controller.image
            handled = self.controller.tick(now_ms)
            if handled is not None:
                if self.controller.working:  # a fence that takes several turns
                    self._work_started(now_ms, handled)
                if handled.records:
                    lines = self._note_changes(before, handled.cause, handled.records)
                    self._stage(now_ms, handled.records, None, lines)

    def poll(self, now_ms: int) -> int:
        """Close the open batch if waiting longer gains nothing; run the next turn of the
        controller's work if its last batch has committed; fire the core's timers. Returns the
        core's next deadline (see :meth:`deadline`)."""
        self._now_ms = now_ms
        if self._open_batches:
            self._maybe_propose_open_batch(now_ms)
        if self._work_runnable():
            self._resume_work(now_ms)
        return self.core.poll(now_ms)

    def take_ready(self) -> Ready:
        ready = self.core.take_ready()
        soft = ready.soft_state
        if self._deferred and (soft is not None or ready.install_snapshot is not None):
            self.apply_committed(self._deferred_at, [])  # a role change or a new image sees every commit first
        for read_id, index in ready.reads:
            read = self._reads.pop(read_id, None)
            if read is not None:
                # Answered once the image holds everything below the read's index.
                read.move(Event.CONFIRM)
                self._pending.add(index - 1, read)
        if soft is not None and soft.role is not Role.LEADER:
            self._active = False
            if (
                self._pending
                or self._held
                or self._reads
                or self._open_batches
                or self._open_requests
                or self._work_request is not None
                or self.controller.working
            ):
                self._renounce()
        self._release()
        return ready

    def describe_quorum(self, now_ms: int, cluster_id: str) -> controller_pb2.DescribeQuorumResponse:
        """The quorum as this node sees it (Kafka's DescribeQuorum): per replica only on the
        leader. -1 where a value is unknown: a voter that has not fetched in this epoch (down,
        or not yet reached) has no known log end offset, lag or fetch time."""
        core = self.core
        response = controller_pb2.DescribeQuorumResponse(
            cluster_id=cluster_id, leader_id=core.leader_id, leader_epoch=core.epoch, high_watermark=core.high_watermark
        )
        voters = core.voter_progress()
        observers = core.observer_progress()
        if voters is None or observers is None:
            return response
        hw = core.high_watermark

        voter_set = core.voter_set

        def row(
            replica_id: int, replica: ReplicaProgress | None, directory_id: bytes
        ) -> controller_pb2.QuorumReplicaState:
            answer = _row(replica_id, replica)
            answer.directory_id = directory_id
            node = voter_set.node(replica_id)
            if node is not None:
                answer.endpoints.extend(
                    controller_pb2.RaftVoterListener(name=e.name, host=e.host, port=e.port) for e in node.endpoints
                )
            return answer

        def voter_directory(voter_id: int) -> bytes:
            """A voter's directory id: the voter set's, else (a bootstrap voter without one) its own
            word -- this node's, or what the voter's Fetches carry."""
            node = voter_set.node(voter_id)
            if node is not None and node.directory_id:
                return node.directory_id
            if voter_id == core.node_id:
                return core.config.directory_id
            replica = voters.get(voter_id)
            return replica.directory_id if replica is not None else b""

        def _row(replica_id: int, replica: ReplicaProgress | None) -> controller_pb2.QuorumReplicaState:
            if replica_id == core.node_id:
                return controller_pb2.QuorumReplicaState(
                    replica_id=replica_id,
                    log_end_offset=core.durable_end_offset,
                    lag=max(0, hw - core.durable_end_offset),
                    last_fetch_ms_ago=0,
                    last_caught_up_ms_ago=0,
                )
            if replica is None or not replica.acknowledged:
                return controller_pb2.QuorumReplicaState(
                    replica_id=replica_id, log_end_offset=-1, lag=-1, last_fetch_ms_ago=-1, last_caught_up_ms_ago=-1
                )
            caught_up = replica.last_caught_up_ms
            return controller_pb2.QuorumReplicaState(
                replica_id=replica_id,
                log_end_offset=replica.end_offset,
                lag=max(0, hw - replica.end_offset),
                last_fetch_ms_ago=now_ms - replica.last_fetch_ms,
                last_caught_up_ms_ago=now_ms - caught_up if caught_up >= 0 else -1,
            )

        response.voters.extend(row(v, voters.get(v), voter_directory(v)) for v in sorted(core.voters))
        response.observers.extend(row(o, r, r.directory_id) for o, r in sorted(observers.items()))
        return response

    def read_stale(self, now_ms: int, method: str, request: Message) -> Message:
        """A read answered from this node's committed image now, without a read-index round (it
        may miss the newest writes). RequestError for a request that is not a read."""
        spec = METHODS.get(method)
        if spec is None or spec.mutating:
            raise RequestError(f"{method} is not a read: only reads can be served stale")
        handled = self.controller.handle(method, request, now_ms)
        assert handled.done and handled.response is not None
        return handled.response

    def install_snapshot(self, records: Sequence[records_pb2.MetadataRecord], end_offset: int) -> None:
        """The driver wrote the Ready's ``install_snapshot``: the image is the snapshot's now."""
        self.controller = self._make_controller(records, end_offset - 1)
        self._pending.forget_own()
        self._applied = end_offset - 1
        self._last_snapshot_records = len(records)
        for offset in sorted(o for o in self._proposed_lines if o < end_offset):
            # The snapshot holds the outcome, not the batch: whether it was ours is not known here.
            proposed = self._proposed_lines.pop(offset)
            self._events.append(
                (
                    "controller changes of unknown fate: the log was replaced by a snapshot",
                    {"epoch": proposed.epoch, "offset": offset, "changes": len(proposed.lines)},
                )
            )

    def on_snapshot_installed(self, now_ms: int, image: SnapshotImage) -> None:
        """The driver finished ``install_snapshot`` at ``now_ms`` (see RaftCore.on_snapshot_installed)."""
        self.core.on_snapshot_installed(now_ms, image)

    def defer_committed(self, now_ms: int, entries: Sequence[Entry]) -> None:
        """Hold committed batches for a later ``apply_committed`` (a follower replays after its
        next Fetch has left); a Ready that changes the role or the image applies them first."""
        self._deferred.extend(entries)
        self._deferred_at = now_ms

    def apply_committed(self, now_ms: int, entries: Sequence[Entry]) -> None:
        """Apply committed batches (after any deferred ones), in order: release the answers of
        this controller's own batches, replay the others. Consecutive foreign batches are
        replayed as one: building the next image costs about as much for one batch as for a
        thousand, and a follower under load commits hundreds of small batches per Ready."""
        self._now_ms = now_ms
        if self._deferred:
            entries = [*self._deferred, *entries]
            self._deferred = []
        if not entries:
            return
        controller = self.controller
        table = self._pending
        # Foreign records stay serialized: replay reads most of them from their bytes.
        foreign: list[bytes] = []
        foreign_last = -1
        for entry in entries:
            if self._proposed_lines:
                self._resolve_lines(entry, now_ms)
            last = entry.next_offset - 1
            batches = table.take_own(last) if table.has_own else 0
            if (batches or table.has_own) and foreign:
                controller.apply_committed(LazyRecords(foreign), foreign_last)
                foreign = []
            if batches:
                controller.commit(batches, last)
            elif table.has_own:
                controller.apply_committed(LazyRecords(record_bytes(entry.data)), last)  # between our own batches
            else:
                foreign.extend(record_bytes(entry.data))
                foreign_last = last
            self._applied = last
            self._records_since_snapshot += entry.next_offset - entry.base_offset
            if self.is_leader and not self._active and entry.epoch == self.core.epoch:
                if foreign:
                    controller.apply_committed(LazyRecords(foreign), foreign_last)
                    foreign = []
                self._activate(now_ms, last)
        if foreign:
            controller.apply_committed(LazyRecords(foreign), foreign_last)
        self._release()
        self._maybe_snapshot(entries[-1])

    # -- outputs -----------------------------------------------------------------------------------
    @property
    def has_output(self) -> bool:
        """Anything for ``take_answers``, ``take_events`` or ``take_snapshot_due`` (a driver
        checks this once per turn: most turns have nothing)."""
        return bool(self._answers or self._events or self._snapshot_due is not None)

    def take_answers(self) -> list[Answer]:
        answers, self._answers = self._answers, []
        return answers

    def take_snapshot_due(self) -> SnapshotDue | None:
        due, self._snapshot_due = self._snapshot_due, None
        return due

    def take_events(self) -> list[tuple[str, dict[str, Any]]]:
        events, self._events = self._events, []
        return events

    # -- requests ----------------------------------------------------------------------------------
    def _handle(self, now_ms: int, pending: Pending) -> None:
        """The one place a request crosses into the controller (``handle``); where it then waits is
        its state (lifecycle.py)."""
        method, request = pending.method, pending.request
        if method in VOTER_CHANGE_RESPONSES:
            self._change_voters(now_ms, pending)
            return
        if _is_read(method, request):
            # A read: answered after a read-index round (the request itself cannot fail validation
            # later: reads are answered from the committed image like this, only later).
            pending.move(Event.READ_INDEX)
            self._reads[self.core.read_index(now_ms)] = pending
            return
        before = self.controller.image
        try:
            handled = self.controller.handle(method, request, now_ms)
        except RequestError as exc:
            self._answer(pending, error=exc)
            return
        except Exception as exc:
            # A handler bug must not become a query of death: if it ended the node task, the
            # client's retry (same request id) would kill the next leader too. Handlers are pure
            # and the controller only adopts a new working image once replay succeeded, so its
            # state is as before this request; answer INTERNAL and keep serving.
            error = ControllerFailedError(f"{method}: {type(exc).__name__}: {exc}")
            error.__cause__ = exc
            self._answer(pending, error=error)
            return
        request_id: str = getattr(request, "request_id", "")
        if handled.done and request_id:
            # A client's write answered with no records is a read of this node's image: a
            # leader deposed without knowing it would refuse from a stale image (a CreatePartitions
            # refused UNKNOWN_TOPIC after the topic was created elsewhere: the plane's
            # linearizability check, seed 5542). Like a read, it waits for a read-index round.
            # Broker heartbeats and registrations (no request id) are answered at once, as
            # Kafka's controller answers a write event with no records.
            pending.response = handled.response
            pending.move(Event.READ_INDEX)
            self._reads[self.core.read_index(now_ms)] = pending
            return
        lines = self._note_changes(before, method, handled.records) if handled.records else []
        if self.controller.working:
            self._work_started(now_ms, handled)
            pending.move(Event.WORK)
            self._work_request = pending
            if handled.records:
                self._stage(now_ms, handled.records, None, lines)
            return
        early = self._uncommitted_answer(method, request) if self.config.unsafe_ack_before_commit else None
        if early is not None and handled.records:
            self._answer(pending, early)
            self._stage(now_ms, handled.records, None, lines)
            return
        self._place(now_ms, pending, handled, lines)

    def _place(self, now_ms: int, pending: Pending, handled: Handled, lines: list[Line]) -> None:
        """Where a handled request waits for its answer: with its batch, behind the newest pending
        batch (an answer with no records), or nowhere (answered now)."""
        pending.response = handled.response
        if handled.records:
            self._stage(now_ms, handled.records, pending, lines)
        elif handled.done:
            self._answer(pending, handled.response)
        elif self._open_batches:
            pending.move(Event.STAGE)
            self._open_requests.append(pending)
        else:
            pending.move(Event.APPEND)
            self._pending.add(self._newest_own, pending)

    def _answer(self, pending: Pending, response: Message | None = None, error: Exception | None = None) -> None:
        pending.move(Event.ANSWER)
        self._answers.append(Answer(pending.key, response, error))

    def _work_runnable(self) -> bool:
        """The controller's work under way can take its next turn: this node leads and the last
        turn's batch has committed."""
        return self.controller.working and self.is_leader and not self._in_flight()

    def _resume_work(self, now_ms: int) -> None:
        """The next turn of the controller's work under way (its previous batch has committed);
        once it ends, the writes held behind it are handled, in order."""
        before = self.controller.image
        try:
            handled = self.controller.resume()
        except Exception as exc:
            # As in _handle: a bug must not end the node task. The controller dropped the work;
            # its committed batches are a valid prefix (work.py); the request, if any, is
            # answered INTERNAL, and the held writes go on.
            error = ControllerFailedError(f"{self._work_cause}: {type(exc).__name__}: {exc}")
            error.__cause__ = exc
            self._events.append(("controller work failed", {"cause": self._work_cause, "error": str(error)}))
            request, self._work_request = self._work_request, None
            if request is not None:
                self._answer(request, error=error)
            self._handle_held(now_ms)
            return
        lines: list[Line] = []
        if handled.records:
            self._work_batches += 1
            self._work_records += len(handled.records)
            lines = self._note_changes(before, handled.cause, handled.records, partitions=False)
        request = self._work_request if not self.controller.working else None
        if request is not None:  # the last turn: the request's answer comes with it
            self._work_request = None
            self._place(now_ms, request, handled, lines)
        elif handled.records:
            self._stage(now_ms, handled.records, None, lines)
        if not self.controller.working:
            self._events.append(
                (
                    "controller work finished",
                    {
                        "cause": self._work_cause,
                        "batches": self._work_batches,
                        "records": self._work_records,
                        "duration_ms": now_ms - self._work_started_ms,
                        "held_requests": len(self._held),
                    },
                )
            )
            self._handle_held(now_ms)

    def _work_started(self, now_ms: int, first: Handled) -> None:
        """The controller's work takes more than this turn: ``first`` is its first batch."""
        self._work_cause, self._work_started_ms = first.cause, now_ms
        self._work_batches, self._work_records = int(bool(first.records)), len(first.records)
        self._events.append(("controller work started", {"cause": first.cause, "records": len(first.records)}))

    def _handle_held(self, now_ms: int) -> None:
        """Handle held requests in order until one starts work that takes several turns."""
        held = self._held
        while held and not self.controller.working:
            self._handle(now_ms, held.popleft())

    def _change_voters(self, now_ms: int, pending: Pending) -> None:
        """AddRaftVoter / RemoveRaftVoter: the core appends the VotersRecord (or refuses, with
        Kafka's code); the answer waits for its commit."""
        self._propose_open_batch(now_ms)  # requests that came first are logged first
        method, request = pending.method, pending.request
        try:
            if isinstance(request, (controller_pb2.AddRaftVoterRequest, controller_pb2.UpdateRaftVoterRequest)):
                endpoints = tuple(Endpoint(e.name, e.host, e.port) for e in request.listeners)
                voter = VoterNode(request.voter_id, bytes(request.voter_directory_id), endpoints)
                if isinstance(request, controller_pb2.AddRaftVoterRequest):
                    entry = self.core.add_voter(now_ms, voter)
                else:
                    entry = self.core.update_voter(now_ms, voter)
            else:
                assert isinstance(request, controller_pb2.RemoveRaftVoterRequest)
                entry = self.core.remove_voter(now_ms, request.voter_id, bytes(request.voter_directory_id))
        except VoterChangeError as refused:
            self._answer(
                pending, VOTER_CHANGE_RESPONSES[method](error_code=refused.code, error_message=refused.message)
            )
            return
        self._events.append(
            ("voter change appended", {"method": method, "voter_id": request.voter_id, "offset": entry.base_offset})
        )
        pending.response = VOTER_CHANGE_RESPONSES[method]()
        pending.move(Event.APPEND)
        self._pending.add(entry.next_offset - 1, pending)

    def _note_changes(
        self,
        image: MetadataImage,
        cause: str,
        records: Sequence[records_pb2.MetadataRecord],
        partitions: bool = True,
    ) -> list[Line]:
        """Broker and partition changes as info lines (fencing, ISR changes, elections), kept with
        their batch until it commits (:meth:`_resolve_lines`). Without ``partitions``, only the
        broker lines: work over many turns lists its first turn's partitions, and its 'controller
        work finished' line counts the rest."""
        if cause in LOGGED_METHODS or cause in TIMER_CAUSES:
            return [
                line for line in describe_changes(image, cause, records) if partitions or line[0].startswith("broker")
            ]
        return []

    def _resolve_lines(self, entry: Entry, now_ms: int) -> None:
        """``entry`` is committed: the change lines of a batch of ours that ends where it does, in
        the epoch it was proposed in, are facts now; those of any other batch of ours at or
        below it were truncated away, and are logged as dropped."""
        last = entry.next_offset - 1
        for offset in sorted(o for o in self._proposed_lines if o <= last):
            proposed = self._proposed_lines.pop(offset)
            where = {"epoch": proposed.epoch, "offset": offset}
            if offset == last and entry.epoch == proposed.epoch:
                took = {"commit_ms": now_ms - proposed.proposed_ms}
                self._events.extend((message, {**fields, **where, **took}) for message, fields in proposed.lines)
            else:
                self._events.append(
                    (
                        DROPPED_LINES,
                        {
                            **where,
                            "changes": len(proposed.lines),
                            "first_change": proposed.lines[0][0],
                            "committed_epoch": entry.epoch,
                        },
                    )
                )

    def _release(self) -> None:
        """Answer everything waiting for an offset the image has reached: the requests of this
        controller's committed batches, committed voter changes, confirmed reads."""
        for slot in self._pending.complete_up_to(max(self._applied, self.controller.committed_offset)):
            for pending in slot.requests:
                if pending.state is State.CONFIRMED and pending.response is None:
                    answer = self._read(pending.key, pending.method, pending.request)
                    self._answer(pending, answer.response, answer.error)
                else:
                    self._answer(pending, pending.response)

    def _read(self, key: int, method: str, request: Message) -> Answer:
        try:
            response = self.read_stale(self._now_ms, method, request)
        except RequestError as exc:
            return Answer(key, error=exc)
        except Exception as exc:
            error = ControllerFailedError(f"{method}: {type(exc).__name__}: {exc}")
            error.__cause__ = exc
            return Answer(key, error=error)
        return Answer(key, response)

    def _uncommitted_answer(self, method: str, request: Message) -> Message | None:
        """The response stored in the pending batch's RequestRecord (unsafe_ack_before_commit
        only); None for requests without a request id (broker registrations, heartbeats): those
        wait for the commit as usual, so the planted bug only touches the admin writes a checker
        follows."""
        request_id: str = getattr(request, "request_id", "")
        entry = self.controller.image.requests.get(request_id) if request_id else None
        if entry is None:
            return None
        return METHOD_RESPONSES[method].FromString(entry.response)

    def _activate(self, now_ms: int, committed_offset: int) -> None:
        """The first batch of this leader's epoch is committed: everything before it is replayed."""
        self._active = True
        self.controller.activate()
        self._events.append(("controller active", {"epoch": self.core.epoch, "committed_offset": committed_offset}))
        bootstrap = self.controller.bootstrap()
        if bootstrap is not None:  # before any held request: they see the image with it
            self._stage(now_ms, bootstrap.records, None, [])
            self._events.append(
                (
                    "bootstrap records appended",
                    {"epoch": self.core.epoch, "offset": self._newest_own, "records": len(bootstrap.records)},
                )
            )
        self._handle_held(now_ms)

    def _renounce(self, refused: Sequence[Pending] = ()) -> None:
        """Leadership lost (or the log refused a proposal, whose requests are ``refused``): every
        request waiting for a commit or held fails with one NOT_CONTROLLER; the controller's
        working image rolls back."""
        self.controller.renounce()
        failed: list[Pending] = [*refused, *self._held, *self._reads.values(), *self._open_requests]
        if self._work_request is not None:
            failed.append(self._work_request)
        high_watermark = self.core.high_watermark
        for slot in self._pending.take_all():
            for pending in slot.requests:
                # A leader that removed itself resigns in the step that commits the change, and a
                # proposal refused in that same step (the open batch) renounces too: that change
                # succeeded, whatever the fate of the rest.
                if pending.method in VOTER_CHANGE_RESPONSES and slot.offset < high_watermark:
                    self._answer(pending, pending.response)
                else:
                    failed.append(pending)
        self._held.clear()
        self._reads.clear()
        self._work_request = None
        self._newest_own = -1
        never_appended = self._open_lines
        self._open_batches, self._open_requests, self._open_records, self._open_lines = 0, [], [], []
        self._open_bytes = 0
        error = NotControllerError(self.core.leader_id)
        for pending in failed:
            pending.move(Event.RENOUNCE)
            self._answers.append(Answer(pending.key, error=error))
        # Changes never appended to the log are dropped now; proposed ones wait for the commit
        # that decides their fate (the next leader may commit them, or truncate them away).
        if never_appended:
            self._events.append(
                (
                    DROPPED_LINES,
                    {
                        "epoch": self.core.epoch,
                        "changes": len(never_appended),
                        "first_change": never_appended[0][0],
                        "reason": "leadership lost before they were appended",
                    },
                )
            )

    # -- proposing: the open batch -----------------------------------------------------------------
    def _stage(
        self,
        now_ms: int,
        records: Sequence[records_pb2.MetadataRecord],
        pending: Pending | None,
        lines: list[Line],
    ) -> None:
        """One of the controller's pending batches (and the request it answers, if any) goes into
        the open batch -- or, without a RequestRecord at its end, into a log batch of its own."""
        data = serialized(records)
        if pending is not None:
            pending.move(Event.STAGE)
        if records[-1].WhichOneof("record") != "request":
            if self._propose_open_batch_first(now_ms, pending):
                self._propose(now_ms, 1, data, [pending] if pending is not None else [], lines)
            return
        size = sum(map(len, data))
        if (
            self._open_batches
            and self._open_bytes + size > COMBINED_BATCH_BYTES
            and not self._propose_open_batch_first(now_ms, pending)
        ):
            return
        if not self._open_batches:
            self._open_since = now_ms
        self._open_batches += 1
        if pending is not None:
            self._open_requests.append(pending)
        self._open_records.extend(data)
        self._open_bytes += size
        if lines:
            self._open_lines.extend(lines)

    def _propose_open_batch_first(self, now_ms: int, pending: Pending | None) -> bool:
        """Propose the open batch before a batch that cannot join it. False if the log refused
        it: this controller renounced, and the pending batch just handled (``pending``'s) went
        with the rest, so ``pending`` fails as theirs did."""
        before = self.controller.pending_count
        self._propose_open_batch(now_ms)
        if self.controller.pending_count >= before:
            return True
        if pending is not None:
            pending.move(Event.RENOUNCE)
            self._answers.append(Answer(pending.key, error=NotControllerError(self.core.leader_id)))
        return False

    def _maybe_propose_open_batch(self, now_ms: int) -> None:
        """Propose the open batch if waiting longer gains nothing: a follower's Fetch is parked
        here (it would carry the batch at once), there is no other voter, or it lingered enough."""
        if (
            now_ms - self._open_since >= LINGER_MS
            or len(self.core.voters) == 1
            or (self.core.has_parked_fetch and not self._in_flight())
        ):
            self._propose_open_batch(now_ms)

    def _in_flight(self) -> bool:
        """Whether the leader's log holds a batch not yet committed."""
        core = self.core
        return core.log.end_offset > core.high_watermark

    def _propose_open_batch(self, now_ms: int) -> None:
        if self._open_batches:
            batches, records, requests, lines = (
                self._open_batches,
                self._open_records,
                self._open_requests,
                self._open_lines,
            )
            self._open_batches, self._open_records, self._open_requests, self._open_lines = 0, [], [], []
            self._open_bytes = 0
            self._propose(now_ms, batches, records, requests, lines)

    def _propose(
        self, now_ms: int, batches: int, records: list[bytes], requests: list[Pending], lines: list[Line]
    ) -> None:
        """Append ``batches`` of the controller's pending batches as one log batch; ``requests``
        are answered when it commits."""
        try:
            entry = self.core.propose(now_ms, records)
        except (NotLeaderError, ProposalLimitError) as exc:
            # The controller already counts the batches as pending; with the log refusing them, the
            # only consistent state is a clean slate (rare: leadership just changed, or overload).
            self._events.append(("proposal refused; renouncing pending controller state", {"error": str(exc)}))
            self._renounce(requests)
            return
        last = entry.next_offset - 1
        table = self._pending
        table.add_batches(last, batches)
        for pending in requests:
            pending.move(Event.APPEND)
            table.add(last, pending)
        self._newest_own = last
        if lines:
            self._proposed_lines[last] = ProposedLines(self.core.epoch, now_ms, lines)

    # -- snapshots ---------------------------------------------------------------------------------
    def _maybe_snapshot(self, last_entry: Entry) -> None:
        """Snapshot every ``snapshot_interval_records`` committed records -- or, once the image is
        big, every time twice as many records as the last snapshot held were committed. A
        snapshot costs time proportional to the whole image (every node converts it to records
        and writes it), so a fixed interval would make its cost per committed record grow with
        the cluster (quadratic overall); this keeps it at about half a record converted per
        record committed, and the log a restart replays at most twice the snapshot (Kafka bounds
        it by bytes, 20 MiB by default, for the same reason)."""
        threshold = max(self.config.snapshot_interval_records, SNAPSHOT_GROWTH * self._last_snapshot_records)
        if self._snapshotting or self._records_since_snapshot < threshold:
            return
        offset = self.controller.committed_offset
        if offset != last_entry.next_offset - 1:
            return  # the controller has not applied up to this batch yet (cannot happen, checked anyway)
        self._snapshotting = True
        self._records_since_snapshot = 0
        voters = self.core.voter_history.at(offset + 1).to_record()
        controller = self.controller
        self._snapshot_due = SnapshotDue(
            offset + 1, last_entry.epoch, controller.committed_image, voters, controller.encoded
        )
