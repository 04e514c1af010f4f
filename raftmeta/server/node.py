"""The node: one asyncio task owns the consensus core and the controller and performs the core's
Readies in the order the core's driver contract requires (raftmeta/raft/__init__.py):

    quorum state (fsync'd) -> snapshot install -> truncate/append -> send -> flush -> apply

Inputs arrive on one queue: RaftService requests and the answers to our own requests,
ControllerService requests, fsync completions from the flusher, controller ticks and finished
snapshots. The gRPC servicers (raftmeta/server/services.py) enqueue and await a future; the
task resolves it. External inputs are bounded (``inbox_max``, ``pending_requests_max``): past
the bound the servicer answers RESOURCE_EXHAUSTED instead of growing memory.

Leadership: a new leader's controller answers requests only once the first batch of its own
epoch (the LeaderChangeRecord) is committed, so it has replayed everything the previous leader
committed (KRaft's rule). On losing leadership, requests waiting for a commit fail with
NotControllerError: the gRPC layer turns that into UNAVAILABLE/NOT_CONTROLLER, the client
retries with the same request id, and the new leader answers from its request table if the
batch did commit -- an outcome that was never "failed".
"""

from __future__ import annotations

import asyncio
import os
import random
import time
import uuid
from collections import deque
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import Message

from placement import JavaRandom
from raftmeta.controller import Controller
from raftmeta.controller.controller import METHODS
from raftmeta.controller.errors import RequestError
from raftmeta.logs import get_logger
from raftmeta.raft import (
    NO_LEADER,
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
from raftmeta.server.config import NodeConfig
from raftmeta.server.disk import DiskWriter
from raftmeta.server.peers import Peers, is_request
from raftmeta.storage import codec
from raftmeta.storage.datadir import NodeStorage
from raftmeta.storage.snapshot import Snapshot
from raftmeta.v1 import controller_pb2, records_pb2

METHOD_RESPONSES: dict[str, type[Message]] = {name: m.response_type for name, m in METHODS.items()}
# How many queued inputs the task handles before it asks the core for a Ready (batching).
DRAIN_MAX = 512


class NotControllerError(Exception):
    """This node is not (or no longer) the active controller; ``leader_id`` is -1 if unknown."""

    def __init__(self, leader_id: int) -> None:
        super().__init__(f"NOT_CONTROLLER: this node is not the controller (leader {leader_id})")
        self.leader_id = leader_id


class OverloadedError(Exception):
    """A bound was hit (inbox or pending requests): RESOURCE_EXHAUSTED."""


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


Input = RaftInput | AdminInput | Flushed | Tick | SnapshotTaken


def now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


def decode_records(entry_data: bytes) -> list[records_pb2.MetadataRecord]:
    header = codec.check_batch(entry_data)
    return [records_pb2.MetadataRecord.FromString(r) for r in codec.split_records(entry_data, header)]


class Node:
    def __init__(self, config: NodeConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        self.log = get_logger("node", node_id=config.node_id)
        self.inbox: asyncio.Queue[Input] = asyncio.Queue()
        self.leader_changed = asyncio.Event()
        self._stopping = False
        self._inbound: dict[int, asyncio.Future[Any]] = {}
        self._next_inbound_id = -1
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._held: deque[AdminInput] = deque()
        self._own: dict[int, int] = {}  # last offset of our pending batch -> controller key
        self._controller_ready = False
        self._flush_seq = 0
        self._flush_wanted = asyncio.Event()
        self._records_since_snapshot = 0
        self._snapshotting = False
        self._tasks: list[asyncio.Task[None]] = []
        self.random = SystemRandom()

    # -- start-up ----------------------------------------------------------------------------------
    async def start(self) -> None:
        cfg = self.config
        storage = await asyncio.to_thread(
            NodeStorage.open, cfg.data_dir, cluster_id=cfg.cluster_id, node_id=cfg.node_id, repair=cfg.repair_log
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
        quorum_state = QuorumStateData(stored.epoch, stored.leader_id, stored.voted_id) if stored else None
        self.raft_config = RaftConfig(
            node_id=cfg.node_id,
            voters=tuple(sorted(cfg.voters)),
            cluster_id=cfg.cluster_id,
            fetch_timeout_ms=cfg.fetch_timeout_ms,
            election_timeout_ms=cfg.election_timeout_ms,
            election_backoff_max_ms=cfg.election_backoff_max_ms,
            fetch_max_wait_ms=cfg.fetch_max_wait_ms,
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
        self.controller = self._controller_from(snapshot)
        self.peers = Peers(
            cfg.node_id,
            cfg.voters,
            lambda env: self.inbox.put_nowait(RaftInput(env, None)),
            request_timeout_ms=cfg.request_timeout_ms,
            fetch_max_wait_ms=cfg.fetch_max_wait_ms,
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
            records = [records_pb2.MetadataRecord.FromString(r) for r in snapshot.records]
            controller = Controller.from_snapshot(records, snapshot.snapshot_id.offset - 1, config=config)
        controller.ids = lambda: uuid.uuid4().bytes
        controller.random = JavaRandom(int.from_bytes(os.urandom(6), "big"))
        return controller

    # -- the task ----------------------------------------------------------------------------------
    async def run(self) -> None:
        self._tasks = [asyncio.create_task(self._flush_loop()), asyncio.create_task(self._tick_loop())]
        try:
            await self._loop()
        finally:
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _loop(self) -> None:
        deadline = self.core.poll(now_ms())
        await self._perform(self.core.take_ready())
        while not self._stopping:
            timeout = max(0.0, (deadline - now_ms()) / 1000)
            items: list[Input] = []
            try:
                items.append(await asyncio.wait_for(self.inbox.get(), timeout))
                while len(items) < DRAIN_MAX and not self.inbox.empty():
                    items.append(self.inbox.get_nowait())
            except TimeoutError:
                pass
            now = now_ms()
            for item in items:
                self._handle(now, item)
            deadline = self.core.poll(now)
            ready = self.core.take_ready()
            if not ready.is_empty():
                await self._perform(ready)

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
            self.core.step(now, envelope)
        elif isinstance(item, AdminInput):
            self._handle_admin(now, item)
        elif isinstance(item, Flushed):
            self.core.on_log_flushed(now, item.durable_end_offset, item.ready_seq)
        elif isinstance(item, SnapshotTaken):
            self._snapshotting = False
            self.core.on_snapshot_created(now, item.image)
        elif self.is_leader and self._controller_ready:
            handled = self.controller.tick(now)
            if handled is not None:
                self._propose(now, handled.key, handled.records)

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
        if handled.records and not self._propose(now, handled.key, handled.records):
            item.reply.set_exception(NotControllerError(self.core.leader_id))
            return
        if handled.done:
            item.reply.set_result(handled.response)
        elif self.config.unsafe_ack_before_commit and handled.records:
            # Test-only bug: the answer the commit would release, released before the commit.
            item.reply.set_result(self._uncommitted_answer(item))
        else:
            self._waiting[handled.key] = item.reply

    def _uncommitted_answer(self, item: AdminInput) -> Message:
        """The response stored in the pending batch's RequestRecord (unsafe_ack_before_commit only)."""
        request_id: str = getattr(item.request, "request_id", "")
        entry = self.controller.image.requests.get(request_id) if request_id else None
        if entry is None:
            raise NotControllerError(self.core.leader_id)
        response: Message = METHOD_RESPONSES[item.method].FromString(entry.response)
        return response

    def _propose(self, now: int, key: int, records: tuple[records_pb2.MetadataRecord, ...]) -> bool:
        try:
            entry = self.core.propose(now, [r.SerializeToString() for r in records])
        except (NotLeaderError, ProposalLimitError) as exc:
            # The controller already counts the batch as pending; with the log refusing it, the
            # only consistent state is a clean slate (rare: leadership just changed, or overload).
            self.log.warning("proposal refused; renouncing pending controller state", error=str(exc))
            self._renounce()
            return False
        last = entry.next_offset - 1
        self.controller.appended(key, last)
        self._own[last] = key
        return True

    # -- performing a Ready ------------------------------------------------------------------------
    async def _perform(self, ready: Ready) -> None:
        soft = ready.soft_state
        if soft is not None and soft.role is not Role.LEADER and (self._own or self._waiting or self._held):
            self._renounce()
        if ready.quorum_state is not None:
            await self.disk.write_quorum_state(ready.quorum_state)
        if ready.install_snapshot is not None:
            image = ready.install_snapshot
            snapshot = await self.disk.install_snapshot(image.end_offset, image.epoch, image.data)
            self.controller = self._controller_from(snapshot)
            self._own.clear()
            self.log.info("installed snapshot from the leader", end_offset=image.end_offset, epoch=image.epoch)
        if ready.truncate_to is not None or ready.append:
            await self.disk.truncate_and_append(ready.truncate_to, [e.data for e in ready.append])
        for envelope in ready.messages:
            if is_request(envelope.message):
                self.peers.send(envelope)
            else:
                future = self._inbound.pop(envelope.correlation_id, None)
                if future is not None and not future.done():
                    future.set_result(envelope.message)
        if ready.flush:
            self._flush_seq = ready.seq
            self._flush_wanted.set()
        if ready.committed:
            for entry in ready.committed:
                self._apply(entry)
            await self.disk.checkpoint_high_watermark(self.core.high_watermark)
            self._maybe_snapshot(ready.committed[-1])
        if soft is not None:
            self._on_soft_state(soft.role, soft.epoch, soft.leader_id)

    def _apply(self, entry: Entry) -> None:
        last = entry.next_offset - 1
        key = self._own.pop(last, None)
        if key is not None:
            for completion in self.controller.on_commit(last):
                future = self._waiting.pop(completion.key, None)
                if future is not None and not future.done() and completion.response is not None:
                    future.set_result(completion.response)
        else:
            self.controller.apply_committed(decode_records(entry.data), last)
        self._records_since_snapshot += entry.next_offset - entry.base_offset
        if self.is_leader and not self._controller_ready and entry.epoch == self.core.epoch:
            self._controller_ready = True
            self.log.info("controller active", epoch=self.core.epoch, committed_offset=last)
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
        if self._snapshotting or self._records_since_snapshot < self.config.snapshot_interval_records:
            return
        offset, records = self.controller.snapshot()
        if offset != last_entry.next_offset - 1:
            return  # the controller has not applied up to this batch yet (cannot happen, checked anyway)
        self._snapshotting = True
        self._records_since_snapshot = 0
        payload = [r.SerializeToString() for r in records]
        task = asyncio.create_task(self._take_snapshot(offset + 1, last_entry.epoch, payload))
        self._tasks.append(task)

    async def _take_snapshot(self, end_offset: int, epoch: int, payload: list[bytes]) -> None:
        try:
            snapshot = await self.disk.take_snapshot(end_offset, epoch, payload, int(time.time() * 1000))
            data = await self.disk.read_file(snapshot)
        except Exception:
            self._snapshotting = False
            self.log.exception("snapshot failed", end_offset=end_offset)
            return
        self.log.info("snapshot taken", end_offset=end_offset, epoch=epoch, bytes=len(data))
        self.inbox.put_nowait(SnapshotTaken(SnapshotImage(end_offset, epoch, data)))

    # -- background tasks --------------------------------------------------------------------------
    async def _flush_loop(self) -> None:
        """Group commit: one fsync covers every append made before it started."""
        while True:
            await self._flush_wanted.wait()
            self._flush_wanted.clear()
            seq = self._flush_seq
            durable = await (self.disk.unflushed_end() if self.config.unsafe_skip_fsync else self.disk.flush())
            self.inbox.put_nowait(Flushed(durable, seq))

    async def _tick_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.tick_interval_ms / 1000)
            self.inbox.put_nowait(Tick())

    # -- views -------------------------------------------------------------------------------------
    def describe_quorum(self) -> controller_pb2.DescribeQuorumResponse:
        from raftmeta.raft.state import LeaderState

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
