"""The node: one asyncio task owns the consensus core and the controller and performs the core's
Readies in the order the core's driver contract requires (raftmeta/raft/__init__.py):

    quorum state (fsync'd) -> snapshot install -> truncate/append -> send -> flush -> apply

(appends, flushes and high-watermark checkpoints are queued on the writer thread, in order,
without the task waiting for them: see raftmeta/server/disk.py). Inputs arrive on one inbox:
RaftService requests and the answers to our own requests, ControllerService requests, fsync
completions, controller ticks, finished snapshots and "the leader's process is gone". The gRPC
servicers (raftmeta/server/services.py) enqueue and await a future; the task resolves it.
External inputs are bounded (``inbox_max``, ``pending_requests_max``): past the bound the
servicer answers RESOURCE_EXHAUSTED instead of growing memory.

Proposing (the open batch): the records of handled requests wait in an open batch until a
follower asks for data (its Fetch arrives, or one is parked here), the batch is full, or
``LINGER_MS`` passed; then they are proposed as ONE log batch. With no load a follower's Fetch is
always parked, so nothing waits; under load one append, one fsync and one Fetch round serve every
request that queued meanwhile. Each request keeps its own pending state, answer and RequestRecord
(its records end with it, so every record of a combined batch belongs to the request after it).

Leadership: a new leader's controller answers requests only once the first batch of its own
epoch (the LeaderChangeRecord) is committed, so it has replayed everything the previous leader
committed (KRaft's rule). On losing leadership, requests waiting for a commit fail with
NotControllerError: the gRPC layer turns that into UNAVAILABLE/NOT_CONTROLLER, the client
retries with the same request id, and the new leader answers from its request table if the
batch did commit -- an outcome that was never "failed".

Stopping (SIGTERM): a leader resigns first (EndQuorumEpoch, waiting up to ``resign_timeout_ms``
for the acknowledgements) so that a successor is elected at once. A follower whose leader's
process dies sees the connection break, confirms that the port refuses connections, and starts
the election without waiting out the fetch timeout (``peer_unavailable``).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import random
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import Message

from placement import JavaRandom
from raftmeta.controller import Controller
from raftmeta.controller.controller import METHODS
from raftmeta.controller.errors import RequestError
from raftmeta.controller.snapshot import SnapshotEncoder
from raftmeta.logs import get_logger
from raftmeta.raft import (
    NO_LEADER,
    CommittedTruncationError,
    Entry,
    Envelope,
    NotLeaderError,
    ProposalLimitError,
    QuorumStateData,
    RaftConfig,
    RaftCore,
    Ready,
    Role,
    SnapshotImage,
)
from raftmeta.raft.state import LeaderState
from raftmeta.records.decode import decode_records, parse_records
from raftmeta.server.config import NodeConfig
from raftmeta.server.disk import DiskWriter
from raftmeta.server.peers import Peers, is_request
from raftmeta.storage.datadir import NodeStorage
from raftmeta.storage.quorum_state import check_voters
from raftmeta.storage.snapshot import Snapshot
from raftmeta.v1 import controller_pb2, raft_pb2, records_pb2

METHOD_RESPONSES: dict[str, type[Message]] = {name: m.response_type for name, m in METHODS.items()}
# Snapshot once this many times the last snapshot's records were committed (if more than the
# configured interval): see Node._maybe_snapshot.
SNAPSHOT_GROWTH = 2
# How many queued inputs the task handles before it asks the core for a Ready (batching).
DRAIN_MAX = 512
# The open batch (see Node._stage): at most this many bytes of records are combined into one log
# batch, so that Fetch answers and a follower's work per answer stay bounded with big requests.
COMBINED_BATCH_BYTES = 512 * 1024
# ... and it is proposed after at most this long even if no follower asks for data (a safety net:
# under load a follower's Fetch closes it much sooner; with no load one is waiting already).
LINGER_MS = 5
# A follower appends and fsyncs on its loop thread (no writer-thread hand-offs) up to this many
# bytes per Ready -- a lightly loaded quorum's single request; under load, with bigger batches,
# the writer thread's fsync overlaps the loop's replay instead (see Node._flush_inline).
INLINE_FLUSH_MAX_BYTES = 4096
# A leader with at most this many requests waiting for a commit answers them before it sends the
# watermark-only Fetch answers of the same Ready (latency); busier, it feeds its followers first.
ANSWER_FIRST_MAX_WAITING = 4

LOST_ELECTION_STATE_HINT = (
    "if a copy of this node's quorum-state file exists (a backup), stop the node and put it back; otherwise "
    "nothing is needed: the node rejoins when a leader of a later epoch reaches it, and votes again from the "
    "next epoch on (docs/storage.md, 'Damaged disk')"
)


class NotControllerError(Exception):
    """This node is not (or no longer) the active controller; ``leader_id`` is -1 if unknown."""

    def __init__(self, leader_id: int) -> None:
        super().__init__(f"NOT_CONTROLLER: this node is not the controller (leader {leader_id})")
        self.leader_id = leader_id


class OverloadedError(Exception):
    """A bound was hit (inbox or pending requests): RESOURCE_EXHAUSTED."""


class ControllerFailedError(Exception):
    """The controller raised something other than a RequestError on one request: a bug. The
    request is answered INTERNAL and dropped; the node keeps serving (see ``_handle_admin``)."""


class SystemRandom:
    """The core's and placers' injected randomness, from the OS (drivers may use real randomness)."""

    def __init__(self) -> None:
        self._rng = random.Random(os.urandom(16))

    def next_int(self, bound: int) -> int:
        return self._rng.randrange(bound)


@dataclass(frozen=True, slots=True)
class RaftInput:
    envelope: Envelope
    reply: asyncio.Future[Any] | None  # set for inbound requests


@dataclass(frozen=True, slots=True)
class AdminInput:
    method: str
    request: Message
    reply: asyncio.Future[Any]


@dataclass(frozen=True, slots=True)
class Flushed:
    durable_end_offset: int
    ready_seq: int


@dataclass(frozen=True, slots=True)
class Tick:
    pass


@dataclass(frozen=True, slots=True)
class SnapshotTaken:
    image: SnapshotImage


@dataclass(frozen=True, slots=True)
class LeaderGone:
    """The leader of ``epoch`` refused a TCP connection: its process is gone."""

    leader_id: int
    epoch: int


Input = RaftInput | AdminInput | Flushed | Tick | SnapshotTaken | LeaderGone


class Inbox:
    """The node task's input queue: a deque and at most one waiter. ``asyncio.Queue.get`` under
    ``wait_for`` costs a Task and extra loop rounds on every wake-up; this node task wakes up
    thousands of times a second, and the wake-up is on the commit path."""

    def __init__(self) -> None:
        self._items: deque[Input] = deque()
        self._waiter: asyncio.Future[None] | None = None

    def put_nowait(self, item: Input) -> None:
        self._items.append(item)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def get_nowait(self) -> Input:
        return self._items.popleft()

    def qsize(self) -> int:
        return len(self._items)

    def empty(self) -> bool:
        return not self._items

    async def wait(self, timeout_s: float) -> None:
        """Until an item is queued or ``timeout_s`` passed."""
        if self._items:
            return
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiter = waiter
        timer = loop.call_later(timeout_s, _release, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            self._waiter = None


def _release(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


# Probing a leader whose connection broke: a refused connect proves it gone; no answer (timeout)
# proves nothing; an accepted one is retried a few times (a dying process may still accept).
LEADER_PROBE_TIMEOUT_S = 0.2
LEADER_PROBES = 10
LEADER_PROBE_INTERVAL_S = 0.02


def now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class Node:
    def __init__(self, config: NodeConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        self.log = get_logger("node", node_id=config.node_id)
        self.inbox = Inbox()
        self.leader_changed = asyncio.Event()
        self._stopping = False
        self._inbound: dict[int, asyncio.Future[Any]] = {}
        self._next_inbound_id = -1
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._held: deque[AdminInput] = deque()
        self._own: set[int] = set()  # last offsets of the log batches our controller proposed
        # The open batch: records of handled requests not yet proposed (see _stage).
        self._open_keys: list[int] = []
        self._open_records: list[bytes] = []
        self._open_bytes = 0
        self._open_since = 0
        self._controller_ready = False
        # Group commit: at most one fsync queued on the writer thread; Readies that want one while
        # it runs get the next one, which covers all their appends.
        self._flush_seq = 0
        # Committed batches whose replay waits for the next turn (see _perform).
        self._deferred_committed: list[Entry] = []
        self._flush_running = False
        self._flush_again = False
        self._records_since_snapshot = 0
        self._last_snapshot_records = 0  # records in the last snapshot taken or loaded
        self._snapshotting = False
        self._snapshot_encoder = SnapshotEncoder()  # used by one snapshot at a time (_snapshotting)
        self._tasks: list[asyncio.Task[None]] = []
        self._disk_failure: BaseException | None = None
        self._probing: set[int] = set()
        self.random = SystemRandom()

    # -- start-up ----------------------------------------------------------------------------------
    async def start(self) -> None:
        cfg = self.config
        self._loop_ref = asyncio.get_running_loop()
        storage = await asyncio.to_thread(
            NodeStorage.open,
            cfg.data_dir,
            cluster_id=cfg.cluster_id,
            node_id=cfg.node_id,
            repair=cfg.repair_log,
            segment_bytes=cfg.segment_bytes,
        )
        self.disk = DiskWriter(storage, list(cfg.voters))
        snapshot = storage.latest_snapshot
        start_offset = snapshot.snapshot_id.offset if snapshot else 0
        entries = [
            Entry.from_batch(b) for b in storage.log.iter_batches(max(start_offset, storage.log.log_start_offset))
        ]
        image = None
        if snapshot is not None:
            image = SnapshotImage(
                snapshot.snapshot_id.offset, snapshot.snapshot_id.epoch, await self.disk.read_file(snapshot)
            )
        stored = storage.quorum_state
        if stored is not None:
            check_voters(storage.quorum_state_file.path, stored, tuple(cfg.voters))
        quorum_state = QuorumStateData(stored.epoch, stored.leader_id, stored.voted_id) if stored else None
        self.raft_config = RaftConfig(
            node_id=cfg.node_id,
            voters=tuple(sorted(cfg.voters)),
            cluster_id=cfg.cluster_id,
            fetch_timeout_ms=cfg.fetch_timeout_ms,
            election_timeout_ms=cfg.election_timeout_ms,
            election_backoff_max_ms=cfg.election_backoff_max_ms,
            fetch_max_wait_ms=cfg.fetch_max_wait_ms,
            fetch_hw_linger_ms=cfg.fetch_hw_linger_ms,
            request_timeout_ms=cfg.request_timeout_ms,
        )
        self.core = RaftCore(
            self.raft_config,
            self.random,
            now_ms(),
            quorum_state=quorum_state,
            entries=entries,
            snapshot=image,
            high_watermark=storage.high_watermark.checkpointed,
            # Answers meant for a previous incarnation's requests can never match a new one.
            first_correlation_id=time.time_ns() << 8,
        )
        if self.core.start_note is not None:
            self.log.warning(
                "election state recovered from the log",
                quorum_state=storage.quorum_state_problem or "older than the log",
                detail=self.core.start_note,
                epoch=self.core.epoch,
                what_to_do=LOST_ELECTION_STATE_HINT,
            )
        self.controller = self._controller_from(snapshot)
        self.peers = Peers(
            cfg.node_id,
            cfg.voters,
            lambda env: self.inbox.put_nowait(RaftInput(env, None)),
            request_timeout_ms=cfg.request_timeout_ms,
            fetch_max_wait_ms=cfg.fetch_max_wait_ms,
            unavailable=self.peer_unavailable,
            tls=cfg.tls,
            fetch_rpc=cfg.fetch_rpc,
        )
        self.log = self.log.bind(cluster_id=cfg.cluster_id)
        self.log.info(
            "node started",
            log_start_offset=storage.log.log_start_offset,
            log_end_offset=storage.log.log_end_offset,
            high_watermark=storage.high_watermark.checkpointed,
            snapshot=start_offset,
        )

    def _controller_from(self, snapshot: Snapshot | None) -> Controller:
        config = self.config.controller
        from dataclasses import replace

        config = replace(config, cluster_id=self.config.cluster_id, node_id=self.node_id)
        if snapshot is None:
            controller = Controller(config=config)
        else:
            records = parse_records(snapshot.records)
            self._last_snapshot_records = len(records)
            controller = Controller.from_snapshot(records, snapshot.snapshot_id.offset - 1, config=config)
        controller.ids = lambda: uuid.uuid4().bytes
        controller.random = JavaRandom(int.from_bytes(os.urandom(6), "big"))
        return controller

    # -- the task ----------------------------------------------------------------------------------
    async def run(self) -> None:
        self._tasks = [asyncio.create_task(self._tick_loop())]
        try:
            await self._loop()
        except CommittedTruncationError as exc:
            self.log.error(
                "stopping: refused to truncate committed offsets",
                offset=exc.offset,
                high_watermark=exc.high_watermark,
                reason=str(exc),
            )
            raise
        finally:
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _loop(self) -> None:
        deadline = self.core.poll(now_ms())
        await self._perform(self.core.take_ready())  # the start-up replay: committed batches on disk
        self._freeze_heap("start-up replay")
        while not self._stopping:
            deadline = await self._turn(deadline)
        if self.is_leader:
            await self._resign(deadline)

    async def _turn(self, deadline: int) -> int:
        """One round: wait for inputs (or the core's deadline), step them, perform the Ready."""
        if self._disk_failure is not None:
            raise self._disk_failure
        items: list[Input] = []
        inbox = self.inbox
        if inbox.empty():
            await inbox.wait(max(0.0, (deadline - now_ms()) / 1000))
        while len(items) < DRAIN_MAX and not inbox.empty():
            items.append(inbox.get_nowait())
        now = now_ms()
        for item in items:
            self._handle(now, item)
        if self._open_keys:
            self._maybe_close_open(now)
        deadline = self.core.poll(now)
        ready = self.core.take_ready()
        if not ready.is_empty():
            await self._perform(ready)
        if self._deferred_committed and not self.inbox.qsize():
            # The replay waits for the Fetch this turn sent (see _perform): one loop round lets
            # the Fetch stream's writer task hand it to gRPC first -- replayed right here, it
            # would leave only after the replay (0.2 ms per commit on the critical path).
            await asyncio.sleep(0)
            if not self.inbox.qsize():
                self._apply_committed_entries([])
        if self._open_keys:
            deadline = min(deadline, self._open_since + LINGER_MS)
        return deadline

    async def _resign(self, deadline: int) -> None:
        """Graceful shutdown of the leader (SIGTERM): EndQuorumEpoch to the other voters, with the
        longest logs ranked first, so the best successor starts an election at once instead of
        waiting out the fetch timeout. Bounded by ``resign_timeout_ms``: a voter that does not
        acknowledge (it is down) costs no more than that."""
        from raftmeta.raft.state import ResignedState

        now = now_ms()
        self.log.info("resigning leadership before stopping", epoch=self.core.epoch)
        self.core.resign(now)
        deadline = min(deadline, self.core.poll(now))
        await self._perform(self.core.take_ready())
        until = now + self.config.resign_timeout_ms
        while now_ms() < until:
            state = self.core.state
            if not isinstance(state, ResignedState) or not state.unacknowledged:
                break
            deadline = await self._turn(min(deadline, until))
        self.log.info("resigned", unacknowledged=sorted(getattr(self.core.state, "unacknowledged", ())))

    def _track(self, task: asyncio.Task[None]) -> None:
        """Keep a helper task until it ends (``run`` cancels the ones still running when it stops)."""
        self._tasks.append(task)
        task.add_done_callback(lambda t: self._tasks.remove(t) if t in self._tasks else None)

    def _disk_failed(self, error: BaseException) -> None:
        """A background write failed (writer thread): stop the node. The core already counts the
        batch as appended, so carrying on could acknowledge what the disk does not hold."""
        loop = self._loop_ref

        def fail() -> None:
            if self._disk_failure is None:
                self._disk_failure = error
                self.inbox.put_nowait(Tick())  # wake the node task, which raises it

        with contextlib.suppress(RuntimeError):  # the loop already closed: the node is gone anyway
            loop.call_soon_threadsafe(fail)

    def _freeze_heap(self, why: str) -> None:
        """Move everything alive now (above all the metadata image: millions of objects for a big
        cluster) out of the cyclic collector's reach. Full collections would otherwise rescan the
        whole image again and again while nothing in it is garbage; the controller's replay
        measured ~20% faster with the image frozen. ``gc.freeze`` is O(1); the image stays
        reference-counted, so records that a later change drops are still freed."""
        gc.freeze()
        self.log.info("heap frozen", reason=why, frozen_objects=gc.get_freeze_count())

    def stop(self) -> None:
        self._stopping = True
        self.inbox.put_nowait(Tick())

    async def close(self) -> None:
        for future in (*self._inbound.values(), *self._waiting.values()):
            if not future.done():
                future.set_exception(NotControllerError(NO_LEADER))
        await self.peers.close()
        await self.disk.close()

    # -- inputs ------------------------------------------------------------------------------------
    def submit_raft(self, source: int, message: Any) -> asyncio.Future[Any]:
        """An inbound RaftService request; the future resolves with the core's answer."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        correlation_id = self._next_inbound_id
        self._next_inbound_id -= 1
        self._inbound[correlation_id] = future
        future.add_done_callback(lambda _: self._inbound.pop(correlation_id, None))
        self.inbox.put_nowait(RaftInput(Envelope(source, self.node_id, correlation_id, message), future))
        return future

    def submit_admin(self, method: str, request: Message) -> asyncio.Future[Any]:
        """A ControllerService request for this node's controller (the servicer checked leadership)."""
        if self.inbox.qsize() >= self.config.inbox_max or len(self._waiting) >= self.config.pending_requests_max:
            raise OverloadedError(
                f"node {self.node_id} is overloaded: inbox {self.inbox.qsize()}/{self.config.inbox_max}, "
                f"pending {len(self._waiting)}/{self.config.pending_requests_max}"
            )
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.inbox.put_nowait(AdminInput(method, request, future))
        return future

    @property
    def is_leader(self) -> bool:
        return self.core.role is Role.LEADER

    def _handle(self, now: int, item: Input) -> None:
        if isinstance(item, RaftInput):
            envelope = item.envelope
            if item.reply is not None and item.reply.done():
                return  # the caller gave up (deadline): do not step a request nobody waits for
            if self._open_keys and type(envelope.message) is raft_pb2.FetchRequest:
                self._close_open(now)  # a follower asks for data: the open batch goes in its answer
            self.core.step(now, envelope)
        elif isinstance(item, AdminInput):
            self._handle_admin(now, item)
        elif isinstance(item, Flushed):
            self.core.on_log_flushed(now, item.durable_end_offset, item.ready_seq)
        elif isinstance(item, SnapshotTaken):
            self._snapshotting = False
            self.core.on_snapshot_created(now, item.image)
            # The image grew since the last freeze: without this, each time the heap grows by a
            # quarter the collector walks all of it (Python's full-collection rule) -- pauses of
            # hundreds of ms with a big image, showing up as p99 latency.
            self._freeze_heap("snapshot taken")
        elif isinstance(item, LeaderGone):
            self._leader_gone(now, item)
        elif self.is_leader and self._controller_ready:
            handled = self.controller.tick(now)
            if handled is not None:
                self._stage(now, handled.key, handled.records)

    def _handle_admin(self, now: int, item: AdminInput) -> None:
        if item.reply.done():
            return
        if not self.is_leader:
            item.reply.set_exception(NotControllerError(self.core.leader_id))
            return
        if not self._controller_ready:
            self._held.append(item)  # answered once this leader's epoch has its first commit
            return
        try:
            handled = self.controller.handle(item.method, item.request, now)
        except RequestError as exc:
            item.reply.set_exception(exc)
            return
        except Exception as exc:
            # A handler bug must not become a query of death: if it ended the node task, the
            # client's retry (same request id) would kill the next leader too. Handlers are pure
            # and the controller only adopts a new working image once replay succeeded, so its state
            # is as before this request; answer INTERNAL and keep serving.
            self.log.exception("controller failed on a request", method=item.method)
            item.reply.set_exception(ControllerFailedError(f"{item.method}: {type(exc).__name__}: {exc}"))
            return
        if handled.done:
            item.reply.set_result(handled.response)
            return
        early = None
        if self.config.unsafe_ack_before_commit and handled.records:
            # Test-only bug: the answer the commit would release, released before the commit.
            early = self._uncommitted_answer(item)
        if early is not None:
            item.reply.set_result(early)
        else:
            self._waiting[handled.key] = item.reply
        if handled.records:
            self._stage(now, handled.key, handled.records)

    def _uncommitted_answer(self, item: AdminInput) -> Message | None:
        """The response stored in the pending batch's RequestRecord (unsafe_ack_before_commit only);
        None for requests without a request id (broker registrations, heartbeats): those wait for
        the commit as usual, so the planted bug only touches the admin writes the checker follows."""
        request_id: str = getattr(item.request, "request_id", "")
        entry = self.controller.image.requests.get(request_id) if request_id else None
        if entry is None:
            return None
        response: Message = METHOD_RESPONSES[item.method].FromString(entry.response)
        return response

    # -- proposing: the open batch ------------------------------------------------------------------
    def _stage(self, now: int, key: int, records: tuple[records_pb2.MetadataRecord, ...]) -> None:
        """Queue a handled request's records for the log. Requests with a request id (their
        records end with their RequestRecord, so every record of a combined batch is attributable
        to the request after it) join the open batch, which becomes ONE log batch when a follower
        asks for data, when it is full, or after ``LINGER_MS`` (see ``_maybe_close_open``): under
        load, one append, one fsync and one Fetch round then serve many requests (Kafka's
        controller accumulates its records the same way). Anything else -- broker registrations,
        heartbeats, fencing -- is a batch of its own, in order behind the open batch."""
        data = [r.SerializeToString() for r in records]
        if records[-1].WhichOneof("record") != "request":
            self._close_open(now)
            self._propose([key], data, now)
            return
        size = sum(map(len, data))
        if self._open_keys and self._open_bytes + size > COMBINED_BATCH_BYTES:
            self._close_open(now)
        if not self._open_keys:
            self._open_since = now
        self._open_keys.append(key)
        self._open_records.extend(data)
        self._open_bytes += size

    def _maybe_close_open(self, now: int) -> None:
        """Propose the open batch if waiting longer gains nothing: a follower's Fetch is parked
        here (it would carry the batch at once), there is no other voter, or it lingered enough."""
        state = self.core.state
        if (
            now - self._open_since >= LINGER_MS
            or len(self.raft_config.voters) == 1
            or (isinstance(state, LeaderState) and state.parked)
        ):
            self._close_open(now)

    def _close_open(self, now: int) -> None:
        if self._open_keys:
            keys, records = self._open_keys, self._open_records
            self._open_keys, self._open_records, self._open_bytes = [], [], 0
            self._propose(keys, records, now)

    def _propose(self, keys: list[int], records: list[bytes], now: int) -> None:
        try:
            entry = self.core.propose(now, records)
        except (NotLeaderError, ProposalLimitError) as exc:
            # The controller already counts the batches as pending; with the log refusing them, the
            # only consistent state is a clean slate (rare: leadership just changed, or overload).
            self.log.warning("proposal refused; renouncing pending controller state", error=str(exc))
            self._renounce()
            return
        last = entry.next_offset - 1
        self.controller.appended_together(keys, last)
        self._own.add(last)

    # -- performing a Ready ------------------------------------------------------------------------
    async def _perform(self, ready: Ready) -> None:
        soft = ready.soft_state
        if self._deferred_committed and (soft is not None or ready.install_snapshot is not None):
            self._apply_committed_entries([])  # a role change or a new image sees every commit first
        if (
            soft is not None
            and soft.role is not Role.LEADER
            and (self._own or self._waiting or self._held or self._open_keys)
        ):
            self._renounce()
        if ready.quorum_state is not None:
            await self.disk.write_quorum_state(ready.quorum_state)
        if ready.install_snapshot is not None:
            image = ready.install_snapshot
            snapshot = await self.disk.install_snapshot(image.end_offset, image.epoch, image.data)
            self.controller = self._controller_from(snapshot)
            self._own.clear()
            self.log.info("installed snapshot from the leader", end_offset=image.end_offset, epoch=image.epoch)
            self._freeze_heap("snapshot installed")
        flushed_now = False
        if ready.truncate_to is not None or ready.append:
            batches = [e.data for e in ready.append]
            if self._flush_inline(ready):
                # A follower's fsync is its whole share of the commit path: done here, its next
                # Fetch (which reports the new durable offset) leaves in this same turn.
                durable = self.disk.append_and_flush_now(ready.truncate_to, batches)
                self.inbox.put_nowait(Flushed(durable, ready.seq))
                flushed_now = True
            else:
                self.disk.truncate_and_append(ready.truncate_to, batches, self._disk_failed)
        # A lightly loaded leader answers its clients before the followers' Fetches that this
        # same commit released (they only carry the new high watermark): the answers are resolved
        # futures, and the loop runs their continuations in that order. A follower does the
        # opposite: its next Fetch is what the leader waits for, its replay is not. Under load the
        # leader feeds its followers first: their next round is what the waiting requests need.
        committed_first = (
            bool(ready.committed) and self.core.role is Role.LEADER and len(self._waiting) <= ANSWER_FIRST_MAX_WAITING
        )
        if committed_first:
            self._apply_committed_entries(ready.committed)
        for envelope in ready.messages:
            if is_request(envelope.message):
                self.peers.send(envelope)
            else:
                future = self._inbound.pop(envelope.correlation_id, None)
                if future is not None and not future.done():
                    future.set_result(envelope.message)
        if ready.flush and not flushed_now:
            self._flush_seq = ready.seq
            if self._flush_running:
                self._flush_again = True
            else:
                self._start_flush()
        if ready.committed and not committed_first:
            if flushed_now:
                # The Fetch that reports this flush goes out in the next turn (its Flushed input
                # is queued already): replay after it, not before, since the leader waits for it.
                self._deferred_committed.extend(ready.committed)
            else:
                self._apply_committed_entries(ready.committed)
        if soft is not None:
            self._on_soft_state(soft.role, soft.epoch, soft.leader_id)

    def _flush_inline(self, ready: Ready) -> bool:
        """Whether to append and fsync this Ready's batches on the loop thread (see
        :meth:`DiskWriter.append_and_flush_now`): a follower's small append that wants a flush,
        with nothing queued on the writer thread. A leader never blocks its loop on a fsync: its
        own flush runs beside the followers' Fetch round trip, and its loop serves every client."""
        return (
            ready.flush
            and self.core.role is not Role.LEADER
            and not self.config.unsafe_skip_fsync
            and not self._flush_running
            and self.disk.idle
            and sum(len(e.data) for e in ready.append) <= INLINE_FLUSH_MAX_BYTES
        )

    def _apply_committed_entries(self, entries: list[Entry]) -> None:
        if self._deferred_committed:
            entries = [*self._deferred_committed, *entries]
            self._deferred_committed.clear()
        if not entries:
            return
        self._apply_committed(entries)
        self.disk.checkpoint_high_watermark(self.core.high_watermark, self._disk_failed)
        self._maybe_snapshot(entries[-1])

    def _apply_committed(self, entries: list[Entry]) -> None:
        """Apply committed batches in order. Consecutive batches this controller did not produce
        (all of a follower's, a start-up replay, a new leader's inherited tail) are replayed as
        one: building the next persistent image costs about as much for one batch as for a
        thousand, and a follower under load commits hundreds of small batches per Ready."""
        foreign: list[records_pb2.MetadataRecord] = []
        foreign_last = -1
        for entry in entries:
            last = entry.next_offset - 1
            mine = last in self._own
            if mine:
                self._own.discard(last)
            if (mine or self._own) and foreign:
                self.controller.apply_committed(foreign, foreign_last)
                foreign = []
            if mine:
                for completion in self.controller.on_commit(last):
                    future = self._waiting.pop(completion.key, None)
                    if future is not None and not future.done() and completion.response is not None:
                        future.set_result(completion.response)
            elif self._own:
                self.controller.apply_committed(decode_records(entry.data), last)  # between our own batches
            else:
                foreign.extend(decode_records(entry.data))
                foreign_last = last
            self._records_since_snapshot += entry.next_offset - entry.base_offset
            if self.is_leader and not self._controller_ready and entry.epoch == self.core.epoch:
                if foreign:
                    self.controller.apply_committed(foreign, foreign_last)
                    foreign = []
                self._activate_controller(last)
        if foreign:
            self.controller.apply_committed(foreign, foreign_last)

    def _activate_controller(self, committed_offset: int) -> None:
        """The first batch of this leader's epoch is committed: everything before it is replayed."""
        self._controller_ready = True
        self.log.info("controller active", epoch=self.core.epoch, committed_offset=committed_offset)
        held, self._held = list(self._held), deque()
        now = now_ms()
        for item in held:
            self._handle_admin(now, item)

    def _renounce(self) -> None:
        for completion in self.controller.renounce():
            del completion
        failed = [*self._waiting.values(), *(h.reply for h in self._held)]
        self._waiting.clear()
        self._held.clear()
        self._own.clear()
        self._open_keys, self._open_records, self._open_bytes = [], [], 0
        for future in failed:
            if not future.done():
                future.set_exception(NotControllerError(self.core.leader_id))

    def _on_soft_state(self, role: Role, epoch: int, leader_id: int) -> None:
        self.log = self.log.bind(epoch=epoch)
        self.log.info("role changed", role=role.value, leader_id=leader_id)
        if role is not Role.LEADER:
            self._controller_ready = False
        self.leader_changed.set()
        self.leader_changed = asyncio.Event()

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
        image = self.controller.committed_image
        encoder = self._snapshot_encoder
        self._snapshotting = True
        self._records_since_snapshot = 0

        def records() -> list[bytes]:
            # On the snapshot thread: images are immutable values, so reading this one while the
            # node task builds the next ones is safe.
            return encoder.records(image)

        self._track(asyncio.create_task(self._take_snapshot(offset + 1, last_entry.epoch, records)))

    async def _take_snapshot(self, end_offset: int, epoch: int, records: Callable[[], list[bytes]]) -> None:
        try:
            _, data, count = await self.disk.take_snapshot(end_offset, epoch, records, int(time.time() * 1000))
        except Exception:
            self._snapshotting = False
            self.log.exception("snapshot failed", end_offset=end_offset)
            return
        self._last_snapshot_records = count
        self.log.info("snapshot taken", end_offset=end_offset, epoch=epoch, bytes=len(data), records=count)
        self.inbox.put_nowait(SnapshotTaken(SnapshotImage(end_offset, epoch, data)))

    # -- background tasks --------------------------------------------------------------------------
    def _start_flush(self) -> None:
        """Group commit: one fsync covers every append submitted before it (the writer thread runs
        jobs in order), reported with the seq of the last Ready whose appends it covers."""
        self._flush_running = True
        self._flush_again = False
        seq = self._flush_seq
        self.disk.flush(
            lambda durable: self._flushed(durable, seq), self._disk_failed, fsync=not self.config.unsafe_skip_fsync
        )

    def _flushed(self, durable_end_offset: int, seq: int) -> None:
        self._flush_running = False
        self.inbox.put_nowait(Flushed(durable_end_offset, seq))
        if self._flush_again:
            self._start_flush()

    async def _tick_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.tick_interval_ms / 1000)
            self.inbox.put_nowait(Tick())

    # -- a dead leader ----------------------------------------------------------------------------
    def peer_unavailable(self, peer: int) -> None:
        """A call to ``peer`` failed (the connection broke or was refused, or it timed out).

        If ``peer`` is our leader, check whether its process is gone: a refused TCP connect
        means nothing listens on its address any more (SIGKILL, crash), which is certain, unlike
        silence (a paused or slow leader), which only the fetch timeout can judge."""
        core = self.core
        if core.role is not Role.FOLLOWER or core.leader_id != peer or peer in self._probing:
            return
        self._probing.add(peer)
        self._track(asyncio.create_task(self._probe_leader(peer, core.epoch)))

    async def _probe_leader(self, peer: int, epoch: int) -> None:
        host, _, port = self.config.voters[peer].rpartition(":")
        outcome = "accepting"
        try:
            for _ in range(LEADER_PROBES):
                try:
                    _, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), LEADER_PROBE_TIMEOUT_S)
                except ConnectionRefusedError:
                    outcome = "refused"
                    self.inbox.put_nowait(LeaderGone(peer, epoch))
                    return
                except (OSError, TimeoutError) as exc:
                    outcome = type(exc).__name__
                    return  # unreachable or slow, not provably gone: the fetch timeout decides
                # Accepted -- possibly by the kernel for a process that is still being torn down
                # (its connections reset before its listening socket closes): look again shortly.
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()
                await asyncio.sleep(LEADER_PROBE_INTERVAL_S)
        finally:
            self._probing.discard(peer)
            self.log.info("probed the leader after a failed call", leader_id=peer, outcome=outcome)

    def _leader_gone(self, now: int, item: LeaderGone) -> None:
        """Start the election now rather than after the fetch timeout (2 s by default).

        The core has one input for "the leader is gone": the leader's own EndQuorumEpoch, which
        a resigning leader sends. A dead leader cannot send it, so the driver steps it on the
        leader's behalf -- it only moves this follower's election timer (KIP-595: the follower
        stops defending the leader against pre-votes and runs after a rank-based delay); it
        persists nothing and changes no epoch or vote, so safety does not depend on it.

        Every follower ranks the successors the same way: the dead leader's own id first, then
        the others by id. The core starts the voter at rank k after 0, 100, 200, 400... ms
        (Kafka's rank backoff), so the first follower runs after 100 ms rather than at once:
        the other followers notice the death within a few ms of each other (their Fetches break
        together), and a pre-vote that reached one still defending the dead leader would be
        refused, leaving the candidate to wait out a whole election timeout. If the first
        follower's log is behind, the next one runs 100 ms later and wins."""
        core = self.core
        if core.role is not Role.FOLLOWER or core.leader_id != item.leader_id or core.epoch != item.epoch:
            return
        successors = [item.leader_id, *(v for v in sorted(self.config.voters) if v != item.leader_id)]
        self.log.info("leader process gone; electing a successor now", leader_id=item.leader_id)
        request = raft_pb2.EndQuorumEpochRequest(
            cluster_id=self.config.cluster_id,
            leader_id=item.leader_id,
            leader_epoch=item.epoch,
            preferred_successors=successors,
        )
        correlation_id = self._next_inbound_id  # no future waits on it: the core's answer is dropped
        self._next_inbound_id -= 1
        core.step(now, Envelope(item.leader_id, self.node_id, correlation_id, request))

    # -- views -------------------------------------------------------------------------------------
    def describe_quorum(self) -> controller_pb2.DescribeQuorumResponse:

        core = self.core
        response = controller_pb2.DescribeQuorumResponse(
            cluster_id=self.config.cluster_id,
            leader_id=core.leader_id,
            leader_epoch=core.epoch,
            high_watermark=core.high_watermark,
        )
        state = core.state
        if not isinstance(state, LeaderState):
            return response
        now = now_ms()
        hw = core.high_watermark
        for voter in sorted(self.config.voters):
            if voter == self.node_id:
                end, fetched = core.durable_end_offset, now
            else:
                replica = state.replicas.get(voter)
                end, fetched = (replica.end_offset, replica.last_fetch_ms) if replica else (0, -1)
            response.voters.append(
                controller_pb2.QuorumReplicaState(
                    replica_id=voter,
                    log_end_offset=end,
                    lag=max(0, hw - end),
                    last_fetch_ms_ago=now - fetched if fetched > 0 else -1,
                    last_caught_up_ms_ago=-1,
                )
            )
        for observer, replica in sorted(state.observers.items()):
            response.observers.append(
                controller_pb2.QuorumReplicaState(
                    replica_id=observer,
                    log_end_offset=replica.end_offset,
                    lag=max(0, hw - replica.end_offset),
                    last_fetch_ms_ago=now - replica.last_fetch_ms,
                    last_caught_up_ms_ago=-1,
                )
            )
        return response
