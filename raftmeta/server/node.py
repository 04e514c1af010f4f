"""The node: the IO driver around one pure :class:`~raftmeta.controller.quorum.QuorumController`
(the consensus core, the controller and the request lifecycle between them). One asyncio task
owns it and performs its Readies in the order of the perform policy it shares with the simulator
(raftmeta/raft/perform.py), within the core's driver contract (raftmeta/raft/__init__.py):

    quorum state (fsync'd) -> role -> snapshot install -> repair (fsync'd) -> truncate/append -> send -> flush -> apply

(appends, flushes and high-watermark checkpoints are queued on the writer thread, in order,
without the task waiting for them: see raftmeta/server/disk.py). Inputs arrive on one inbox:
RaftService requests and the answers to our own requests, ControllerService requests, fsync
completions, controller ticks, finished snapshots and "the leader's process is gone". The gRPC
servicers (raftmeta/server/services.py) enqueue and await a future; the task resolves it from the
QuorumController's answers. External inputs are bounded (``inbox_max``, ``pending_requests_max``):
past the bound the servicer answers RESOURCE_EXHAUSTED instead of growing memory.

What the node keeps is IO only: the inbox and the futures, the disk, the peers and the timers.
``disk`` and ``peers`` are injected (raftmeta/server/seams.py; by default the data dir and gRPC);
group commit (group_commit.py), snapshot writing (snapshots.py), the leader probe (probe.py) and
the metrics of a Ready (telemetry.py) are helpers of one job each. The open batch, commit routing,
held requests, renouncing and the snapshot policy are the QuorumController's
(docs/architecture.md walks one CreateTopics through both).

Stopping (SIGTERM): a leader resigns first (EndQuorumEpoch, waiting up to ``resign_timeout_ms``
for the acknowledgements) so that a successor is elected at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Coroutine
from typing import Any

from google.protobuf.message import Message

from raftmeta.controller import Controller
from raftmeta.controller.errors import NotControllerError
from raftmeta.logs import get_logger
from raftmeta.metrics.node import NodeMetrics, raft_view
from raftmeta.raft import (
    NO_LEADER,
    CommittedTruncationError,
    Entry,
    Envelope,
    Ready,
    Role,
    SnapshotImage,
    UnrecoverableStateError,
    UnrepairableEntryError,
)
from raftmeta.raft.perform import Step, plan
from raftmeta.records.decode import LazyRecords
from raftmeta.server.addresses import AddressBook
from raftmeta.server.config import NodeConfig
from raftmeta.server.disk import open_disk
from raftmeta.server.group_commit import GroupCommit
from raftmeta.server.heap import HeapFreezer, collector_paused
from raftmeta.server.inbox import AdminInput, Flushed, Inbox, Input, LeaderGone, RaftInput, SnapshotTaken, Tick
from raftmeta.server.log_events import VOTE_RECORDED_EVENT
from raftmeta.server.peers import grpc_peers, is_request
from raftmeta.server.probe import LeaderProbe
from raftmeta.server.recover import SystemRandom, now_ms, recover_quorum_controller
from raftmeta.server.seams import Disk, PeerLink, PeersFactory
from raftmeta.server.snapshots import SnapshotWriter
from raftmeta.server.telemetry import observe_failed_answer, observe_ready
from raftmeta.v1 import controller_pb2

# How many queued inputs the task handles before it asks the core for a Ready (batching).
DRAIN_MAX = 512


class OverloadedError(Exception):
    """A bound was hit (inbox or pending requests): RESOURCE_EXHAUSTED."""


class Node:
    def __init__(self, config: NodeConfig, *, disk: Disk | None = None, peers: PeersFactory | None = None) -> None:
        """``disk``: the node's durable state (default: the data dir, opened by ``start``);
        ``peers``: its link to the other voters (default: gRPC)."""
        self.config = config
        self.node_id = config.node_id
        self.log = get_logger("node", node_id=config.node_id)
        self.inbox = Inbox()
        self.leader_changed = asyncio.Event()
        self._heap = HeapFreezer()
        self._stopping = False
        self._inbound: dict[int, asyncio.Future[Any]] = {}
        self._next_inbound_id = -1
        # Admin requests waiting for their answer from the QuorumController, by key.
        self._replies: dict[int, asyncio.Future[Any]] = {}
        self._next_key = 1
        self._given_disk = disk
        self._make_peers = peers if peers is not None else grpc_peers(config)
        self._tasks: list[asyncio.Task[None]] = []
        self._disk_failure: BaseException | None = None
        self.random = SystemRandom()
        # Metrics (docs/metrics.md): counters are plain ints on ``_stats``; gauges are read from
        # the core at scrape time; histograms are observed once per Ready, fsync or request.
        self.metrics = NodeMetrics()
        self._stats = self.metrics.stats

    # -- start-up ----------------------------------------------------------------------------------
    async def start(self) -> None:
        cfg = self.config
        self._loop_ref = asyncio.get_running_loop()
        self.disk: Disk = self._given_disk if self._given_disk is not None else await open_disk(cfg)
        durable = await self.disk.load()
        self.qc = recover_quorum_controller(cfg, durable, self.random, self.log)
        self.core = self.qc.core  # for views (describe_quorum) and the hot path
        self.metrics.set_view(lambda: raft_view(self.qc))
        snapshot = durable.snapshot
        self._stats.snapshot_size_bytes = len(snapshot.data) if snapshot is not None else 0
        self.disk.on_fsync = self.metrics.observe_fsync
        put = self.inbox.put_nowait
        log = lambda: self.log  # noqa: E731 -- the helpers log with the node's current fields
        self.address_book = AddressBook(cfg.voters, cfg.peer_addresses)
        # The address book, not the bootstrap voters: a voter added since (KIP-853) can lead.
        self.probe = LeaderProbe(self.qc, self.address_book.addresses, put, self._spawn, log)
        self.snapshots = SnapshotWriter(self.disk, put, self._spawn, self.metrics, log)
        self.group_commit = GroupCommit(self.disk, put, self._disk_failed, fsync=not cfg.unsafe_skip_fsync)
        self.peers: PeerLink = self._make_peers(lambda env: put(RaftInput(env, None)), self.probe.peer_unavailable)
        self.log = self.log.bind(cluster_id=cfg.cluster_id)
        self.log.info(
            "node started",
            log_start_offset=durable.log_start_offset,
            log_end_offset=durable.log_end_offset,
            high_watermark=durable.high_watermark,
            snapshot=snapshot.end_offset if snapshot is not None else 0,
            # Kept for repair from the quorum (docs/storage.md): the core vouches for nothing from the first on.
            damaged_batches=list(durable.damaged),
        )

    @property
    def controller(self) -> Controller:
        return self.qc.controller

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
        except UnrepairableEntryError as exc:
            self.log.error(
                "stopping: a damaged batch no other voter holds intact",
                offset=exc.base_offset,
                batch_epoch=exc.epoch,
                reason=str(exc),
            )
            raise
        except UnrecoverableStateError as exc:
            self.log.error(
                "stopping: no leader can be elected to send the state below the log",
                epoch=exc.epoch,
                log_start_offset=exc.end_offset,
                snapshot_epoch=exc.snapshot_epoch,
                log_end_offset=self.core.log_end_offset,
                voters_without_state=exc.missing,
                voters_with_state=exc.holding,
                reason=str(exc),
            )
            raise
        finally:
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _loop(self) -> None:
        deadline = self.qc.poll(now_ms())
        await self._perform(self.qc.take_ready())  # the start-up replay: committed batches on disk
        self._heap.freeze(self.core.high_watermark, self.log, "start-up replay", release=True)
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
            idle_from = time.perf_counter()
            await inbox.wait(max(0.0, (deadline - now_ms()) / 1000))
            self._stats.poll_idle_s += time.perf_counter() - idle_from
        while len(items) < DRAIN_MAX and not inbox.empty():
            items.append(inbox.get_nowait())
        now = now_ms()
        for item in items:
            self._handle(now, item)
        deadline = self.qc.poll(now)
        ready = self.qc.take_ready()
        if not ready.is_empty():
            await self._perform(ready)
        else:
            self._deliver()
        if self.qc.has_deferred and not self.inbox.qsize():
            # The replay waits for the Fetch this turn sent (see _perform): one loop round lets
            # the Fetch stream's writer task hand it to gRPC first -- replayed right here, it
            # would leave only after the replay (0.2 ms per commit on the critical path).
            await asyncio.sleep(0)
            if not self.inbox.qsize():
                self._apply_committed_entries([])
        return self.qc.deadline(deadline)

    async def _resign(self, deadline: int) -> None:
        """Graceful shutdown of the leader (SIGTERM): EndQuorumEpoch to the other voters, with the
        longest logs ranked first, so the best successor starts an election at once instead of
        waiting out the fetch timeout. Bounded by ``resign_timeout_ms``: a voter that does not
        acknowledge (it is down) costs no more than that."""
        now = now_ms()
        self.log.info("resigning leadership before stopping", epoch=self.core.epoch)
        self.core.resign(now)
        deadline = min(deadline, self.qc.poll(now))
        await self._perform(self.qc.take_ready())
        until = now + self.config.resign_timeout_ms
        while now_ms() < until:
            if not self.core.resignation_unacknowledged:
                break
            deadline = await self._turn(min(deadline, until))
        self.log.info("resigned", unacknowledged=sorted(self.core.resignation_unacknowledged))

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run a helper task until it ends (``run`` cancels the ones still running when it stops)."""
        task = asyncio.create_task(coro)
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

    def stop(self) -> None:
        self._stopping = True
        self.inbox.put_nowait(Tick())

    async def close(self) -> None:
        for future in (*self._inbound.values(), *self._replies.values()):
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
        if self.inbox.qsize() >= self.config.inbox_max or len(self._replies) >= self.config.pending_requests_max:
            raise OverloadedError(
                f"node {self.node_id} is overloaded: inbox {self.inbox.qsize()}/{self.config.inbox_max}, "
                f"pending {len(self._replies)}/{self.config.pending_requests_max}"
            )
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.inbox.put_nowait(AdminInput(method, request, future, time.perf_counter()))
        return future

    @property
    def is_leader(self) -> bool:
        return self.qc.is_leader

    def leader_and_log_start(self) -> tuple[int, int, int]:
        """(leader id or -1, epoch, log start offset) as the core knows them now: what a refused
        raft request through the Kafka listener tells the fetcher, as KRaft's empty answers do."""
        return self.core.leader_id, self.core.epoch, self.core.log.start_offset

    def voter_ids(self) -> frozenset[int]:
        """The voter set in force now (the Kafka listener refuses raft requests claiming a voter's id)."""
        return frozenset(self.core.voters)

    def _handle(self, now: int, item: Input) -> None:
        if isinstance(item, RaftInput):
            envelope = item.envelope
            if item.reply is not None and item.reply.done():
                return  # the caller gave up (deadline): do not step a request nobody waits for
            self.qc.step(now, envelope)
        elif isinstance(item, AdminInput):
            if item.reply.done():
                return
            key = self._next_key
            self._next_key += 1
            self._replies[key] = item.reply
            metrics = self.metrics
            started = time.perf_counter()
            metrics.event_queue_time.observe(started - item.enqueued)
            self.qc.submit(now, key, item.method, item.request)
            metrics.event_processing_time.observe(time.perf_counter() - started)
        elif isinstance(item, Flushed):
            self.qc.on_log_flushed(now, item.durable_end_offset, item.ready_seq)
        elif isinstance(item, SnapshotTaken):
            if item.image is None:
                self.qc.snapshot_failed()
                return
            self.qc.on_snapshot_created(now, item.image, item.records)
            # The image grew since the last freeze: without this, each time the heap grows by a
            # quarter the collector walks all of it (Python's full-collection rule) -- pauses of
            # hundreds of ms with a big image, showing up as p99 latency.
            self._heap.freeze(self.core.high_watermark, self.log, "snapshot taken", release=True)
        elif isinstance(item, LeaderGone):
            # No future waits on this correlation id: the core's answer goes nowhere.
            self.qc.leader_gone(now, item.leader_id, item.epoch, self._next_inbound_id)
            self._next_inbound_id -= 1
        else:
            self.qc.tick(now)

    def _deliver(self) -> None:
        """Hand the QuorumController's outputs to the outside: answers to their futures, events to
        the log, a due snapshot to the snapshot thread."""
        if not self.qc.has_output:
            return
        for answer in self.qc.take_answers():
            future = self._replies.pop(answer.key, None)
            if future is None or future.done():
                continue
            if answer.error is None:
                future.set_result(answer.response)
                continue
            observe_failed_answer(self.metrics, answer.error, self.log)
            future.set_exception(answer.error)
        for event, fields in self.qc.take_events():
            self.log.info(event, **fields)
        due = self.qc.take_snapshot_due()
        if due is not None:
            self.snapshots.start(due)

    # -- performing a Ready ------------------------------------------------------------------------
    async def _perform(self, ready: Ready) -> None:
        """Carry out ``ready`` in the order of the shared perform policy (raftmeta/raft/perform.py)."""
        self._deliver()  # a role change may have failed waiting requests (NOT_CONTROLLER)
        role = self.core.role
        leader = role is Role.LEADER
        observe_ready(self.metrics, ready, leader)
        writes = (ready.truncate_to is not None and not ready.repair) or bool(ready.append)
        steps = plan(
            ready,
            leader=leader,
            waiting=self.qc.waiting_count,
            inline_flush_allowed=writes and self.group_commit.inline(ready, role),
        )
        flushed_now: int | None = None  # the durable end offset of an inline flush
        for step in steps:
            if step is Step.PERSIST_QUORUM_STATE:
                assert ready.quorum_state is not None
                await self.disk.write_quorum_state(ready.quorum_state)
                if ready.quorum_state.voted_id >= 0:
                    # Durable before any answer leaves: chaos reads these to prove one vote per epoch.
                    vote = ready.quorum_state
                    self.log.info(VOTE_RECORDED_EVENT, epoch=vote.epoch, voted_id=vote.voted_id)
            elif step is Step.ANNOUNCE_ROLE:
                assert ready.soft_state is not None
                soft = ready.soft_state
                self._on_soft_state(soft.role, soft.epoch, soft.leader_id)
            elif step is Step.INSTALL_SNAPSHOT:
                assert ready.install_snapshot is not None
                await self._install_snapshot(ready.install_snapshot, keep_log=ready.install_keeps_log)
            elif step is Step.REPAIR_LOG:
                await self._repair(ready)
            elif step is Step.WRITE_LOG:
                self.disk.truncate_and_append(ready.truncate_to, [e.data for e in ready.append], self._disk_failed)
            elif step is Step.WRITE_AND_FLUSH_LOG:
                # A follower's fsync is its whole share of the commit path: done here, and
                # reported below, so that its next Fetch (which claims the new durable offset)
                # leaves in this same turn.
                flushed_now = self.group_commit.append_and_flush_now(ready, [e.data for e in ready.append])
            elif step is Step.APPLY_COMMITTED:
                self._apply_committed_entries(ready.committed)
            elif step is Step.SEND:
                self._send(ready.messages)
            elif step is Step.REQUEST_FLUSH:
                self.group_commit.request(ready.seq)
            elif step is Step.DEFER_COMMITTED:
                # The Fetch that reports the inline flush goes out below: replay after it.
                self.qc.defer_committed(now_ms(), ready.committed)
                self._stats.proposals_applied += len(ready.committed)
            elif step is Step.REPORT_FLUSH:
                assert flushed_now is not None
                self._deliver()
                # The core learns of the inline flush now, not from an input in the next turn: the
                # Ready it makes holds the follower's next Fetch, performed (sent) at once.
                self.qc.on_log_flushed(now_ms(), flushed_now, ready.seq)
                follow = self.qc.take_ready()
                if not follow.is_empty():
                    await self._perform(follow)
                return
        self._deliver()

    async def _install_snapshot(self, image: SnapshotImage, *, keep_log: bool) -> None:
        records = await self.disk.install_snapshot(image.end_offset, image.epoch, image.data, keep_log=keep_log)
        with collector_paused():
            self.qc.install_snapshot(LazyRecords(records), image.end_offset)
        self.qc.on_snapshot_installed(now_ms(), image)
        self._stats.snapshot_size_bytes = len(image.data)
        self.log.info(
            "installed snapshot from the leader", end_offset=image.end_offset, epoch=image.epoch, kept_log=keep_log
        )
        self._heap.freeze(self.core.high_watermark, self.log, "snapshot installed", release=True)

    def _send(self, messages: list[Envelope]) -> None:
        learned = self.address_book.learn(self.core.voter_set)
        if learned is not None:
            self.peers.learn(learned)
            self.log.info("voter set in force", voters=list(self.core.voters), new_addresses=learned)
        for envelope in messages:
            if is_request(envelope.message):
                self.peers.send(envelope)
            else:
                future = self._inbound.pop(envelope.correlation_id, None)
                if future is not None and not future.done():
                    future.set_result(envelope.message)

    async def _repair(self, ready: Ready) -> None:
        """Ready.repair: each damaged batch overwritten in place with a peer's intact copy and
        fsynced, then the Ready's truncation, before anything else of the Ready (the core counts a
        repaired batch as durable at once). Rare, so awaited behind the writer's queue."""
        await self.disk.repair(ready.truncate_to, [entry.data for entry in ready.repair])
        ready.truncate_to = None  # done
        for entry in ready.repair:
            self.log.warning(
                "repaired a damaged batch from the quorum",
                offset=entry.base_offset,
                end_offset=entry.next_offset,
                batch_epoch=entry.epoch,
                high_watermark=self.core.high_watermark,
                damaged_left=len(self.core.damaged),
            )

    def _apply_committed_entries(self, entries: list[Entry]) -> None:
        if not entries and not self.qc.has_deferred:
            return
        self._stats.proposals_applied += len(entries)
        self.qc.apply_committed(now_ms(), entries)
        self._heap.committed(self.core.high_watermark, self.log)
        self._deliver()  # the answers go out now: a light leader answers before its Fetch answers
        self.disk.checkpoint_high_watermark(self.core.high_watermark, self._disk_failed)

    def _on_soft_state(self, role: Role, epoch: int, leader_id: int) -> None:
        self.log = self.log.bind(epoch=epoch)
        self.log.info("role changed", role=role.value, leader_id=leader_id)
        self.metrics.role_changed(leader_id, role is Role.LEADER, time.perf_counter())
        self.leader_changed.set()
        self.leader_changed = asyncio.Event()

    # -- timers ------------------------------------------------------------------------------------
    async def _tick_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.tick_interval_ms / 1000)
            self.inbox.put_nowait(Tick())

    # -- views -------------------------------------------------------------------------------------
    def describe_quorum(self) -> controller_pb2.DescribeQuorumResponse:
        return self.qc.describe_quorum(now_ms(), self.config.cluster_id)
