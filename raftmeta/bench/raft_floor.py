"""The bare-Raft floor of ``raftmeta bench commit``: the node's replication machinery with
everything else taken away, measured in the same run as the node.

Three processes, as a quorum of three (or as many as the bench's ``--nodes``): a leader and its
followers, each with its own data dir on the quorum's filesystem. What they share with the node:

- the client path: the bench's ``ControllerClient`` calls ``CreateTopics`` (unary, the generated
  servicer decodes the request and encodes the answer) on the leader, with the node's server
  options and event loop;
- the log: each process opens a ``NodeStorage`` and writes through the node's ``DiskWriter``
  (one writer thread; the leader queues its appends and keeps at most one fsync queued -- group
  commit; a follower appends and fsyncs on its loop when the writer is idle and the append is
  small, as the node does);
- the batch format (``encode_batch``: CRC32C, the same framing, checked again on append);
- replication: followers pull over the node's ``FetchStream`` (``Peers`` and ``FetchStreamCall``
  on the follower side), the leader parks a Fetch that finds nothing new and answers it when the
  next batch is appended, the high watermark is the node's ``majority_offset`` over the leader's
  durable end and the followers' fetch offsets, and a follower's next Fetch leaves after its fsync
  (its fetch offset says what it holds on disk);
- batching: requests wait in an open batch that is proposed when a follower asks for data (a
  Fetch is parked or arrives) and no batch is in flight (appended, not yet committed), so under
  load one append, one fsync and one Fetch round serve every request that queued meanwhile -- the
  node's rule, minus its 5 ms and 512 KiB bounds.

What it leaves out: the controller (validation, placement, the image, request ids), the
consensus core's state machine and checks (epochs, elections, divergence, check-quorum), the
node's inbox and task hand-off, snapshots, metrics, health and reflection. A create's record is
its request's bytes. So the gap between the node and this floor is what all of that costs.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import json
import os
import sys
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import grpc.aio

from raftmeta.api.limits import grpc_server_options
from raftmeta.local.python_command import python_command
from raftmeta.logs import get_logger
from raftmeta.raft import Envelope
from raftmeta.raft.quorum import majority_offset
from raftmeta.records.codec import encode_batch
from raftmeta.server.disk import DiskWriter
from raftmeta.server.group_commit import INLINE_FLUSH_MAX_BYTES
from raftmeta.server.peers import Peers
from raftmeta.storage.datadir import NodeStorage
from raftmeta.v1 import controller_pb2, raft_pb2

CLUSTER_ID = "raft-floor"
LEADER_ID = 1
EPOCH = 1
# The node's defaults (raftmeta.server.config / raftmeta.raft.config): long-poll wait, Fetch size.
FETCH_MAX_WAIT_MS = 500
FETCH_MAX_BYTES = 1 << 20
REQUEST_TIMEOUT_MS = 2000
# A follower whose Fetch stream broke asks again after this (the core retries after its request
# timeout; the floor has no election to protect, so it retries soon).
REFETCH_AFTER_S = 0.05
PORT_LINE = "RAFT_FLOOR_PORT "
# The leader's last line when it stops: each batch's commit time and its append-to-commit time
# (CLOCK_MONOTONIC seconds: the bench reads the same clock), for the batches of a measured window.
COMMITS_LINE = "RAFT_FLOOR_COMMITS "
CONTROLLER_SERVICE = controller_pb2.DESCRIPTOR.services_by_name["ControllerService"].full_name
RAFT_SERVICE = raft_pb2.DESCRIPTOR.services_by_name["RaftService"].full_name
Context = grpc.aio.ServicerContext[Any, Any]


def open_disk(data_dir: Path, node_id: int, voters: list[int]) -> DiskWriter:
    storage = NodeStorage.open(data_dir, cluster_id=CLUSTER_ID, node_id=node_id)
    return DiskWriter(storage, voters)


def disk_failed(error: BaseException) -> None:
    # The floor has nothing to recover to: a failed write ends the process, and the bench reports it.
    get_logger("bench.raft-floor").error("disk write failed", error=repr(error))
    os._exit(1)


# -- the leader ------------------------------------------------------------------------------------
@dataclass
class Parked:
    """A follower's Fetch that found nothing new: answered by the next append, or empty at its
    long-poll deadline."""

    request: raft_pb2.FetchRequest
    reply: asyncio.Future[raft_pb2.FetchResponse]
    timer: asyncio.TimerHandle


class Leader:
    def __init__(self, disk: DiskWriter, voters: int) -> None:
        self.disk = disk
        self.voters = voters
        self.loop = asyncio.get_running_loop()
        self.end = disk.storage.log.log_end_offset
        self.durable = self.end
        self.high_watermark = self.end
        # Appended batches not yet fetched by every follower: base offsets, next offsets, bytes.
        self.bases: list[int] = []
        self.nexts: list[int] = []
        self.batches: list[bytes] = []
        self.follower_offsets: dict[int, int] = {}
        self.parked: dict[int, Parked] = {}
        self.open_records: list[bytes] = []
        self.open_replies: list[asyncio.Future[None]] = []
        self.propose_scheduled = False
        # (next offset of a batch, the requests it answers, when it was proposed), in log order.
        self.waiting: deque[tuple[int, list[asyncio.Future[None]], float]] = deque()
        # (when a batch committed, seconds from its proposal): the node's commit latency metric.
        self.commits: list[tuple[float, float]] = []
        self.flush_running = False
        self.flush_again = False

    # A create joins the open batch; the batch goes out when a follower is asking for data.
    def submit(self, record: bytes) -> asyncio.Future[None]:
        reply: asyncio.Future[None] = self.loop.create_future()
        self.open_records.append(record)
        self.open_replies.append(reply)
        if (self.parked and not self.in_flight()) or self.voters == 1:
            self.schedule_propose()
        return reply

    def in_flight(self) -> bool:
        """Whether a batch is appended and not yet committed (the open batch waits for it)."""
        return self.end > self.high_watermark

    def schedule_propose(self) -> None:
        if not self.propose_scheduled:
            # One loop round later: every request that arrived in this round joins the batch.
            # (A quorum of one has no follower to ask for data: its leader proposes at once.)
            self.propose_scheduled = True
            self.loop.call_soon(self.propose)

    def propose(self) -> None:
        self.propose_scheduled = False
        if not self.open_records:
            return
        records, replies = self.open_records, self.open_replies
        self.open_records, self.open_replies = [], []
        base = self.end
        batch = encode_batch(base, EPOCH, records, int(time.time() * 1000))
        self.end = base + len(records)
        self.bases.append(base)
        self.nexts.append(self.end)
        self.batches.append(batch)
        self.waiting.append((self.end, replies, time.monotonic()))
        # Followers first (their round is what the requests wait for), then the leader's own disk.
        for peer in list(self.parked):
            parked = self.parked.pop(peer)
            parked.timer.cancel()
            if not parked.reply.done():
                parked.reply.set_result(self.answer(parked.request.fetch_offset))
        self.disk.truncate_and_append(None, [batch], disk_failed)
        if self.flush_running:
            self.flush_again = True
        else:
            self.start_flush()

    def start_flush(self) -> None:
        self.flush_running = True
        self.flush_again = False
        self.disk.flush(self.flushed, disk_failed, fsync=True)

    def flushed(self, durable: int) -> None:
        self.flush_running = False
        self.durable = durable
        self.advance()
        if self.flush_again:
            self.start_flush()

    def advance(self) -> None:
        hw = majority_offset([self.durable, *self.follower_offsets.values()], self.voters)
        if hw <= self.high_watermark:
            return
        self.high_watermark = hw
        waiting = self.waiting
        now = time.monotonic()
        while waiting and waiting[0][0] <= hw:
            _, replies, proposed = waiting.popleft()
            self.commits.append((now, now - proposed))
            for reply in replies:
                if not reply.done():
                    reply.set_result(None)
        if self.open_records and self.parked and not self.in_flight():
            self.schedule_propose()  # the batch in flight committed: the open one goes to the parked
        # Drop what every follower has.
        if len(self.follower_offsets) == self.voters - 1:
            low = min(self.follower_offsets.values())
            cut = bisect.bisect_right(self.nexts, low)
            if cut:
                del self.bases[:cut], self.nexts[:cut], self.batches[:cut]

    def answer(self, offset: int) -> raft_pb2.FetchResponse:
        """Whole batches from ``offset``, at most FETCH_MAX_BYTES (at least one)."""
        i = bisect.bisect_left(self.bases, offset)
        parts: list[bytes] = []
        size = 0
        while i < len(self.batches) and (not parts or size + len(self.batches[i]) <= FETCH_MAX_BYTES):
            parts.append(self.batches[i])
            size += len(self.batches[i])
            i += 1
        return raft_pb2.FetchResponse(
            leader_id=LEADER_ID,
            leader_epoch=EPOCH,
            high_watermark=self.high_watermark,
            records=parts[0] if len(parts) == 1 else b"".join(parts),
        )

    async def fetch(self, request: raft_pb2.FetchRequest) -> raft_pb2.FetchResponse:
        peer = request.replica_id
        self.follower_offsets[peer] = request.fetch_offset
        self.advance()
        if self.open_records and not self.in_flight():
            self.propose()  # a follower asks for data and nothing is in flight: the open batch goes now
        if request.fetch_offset < self.end:
            return self.answer(request.fetch_offset)
        reply: asyncio.Future[raft_pb2.FetchResponse] = self.loop.create_future()
        empty = raft_pb2.FetchResponse(leader_id=LEADER_ID, leader_epoch=EPOCH)

        def expire() -> None:
            if self.parked.get(peer) is parked:
                del self.parked[peer]
            if not reply.done():
                empty.high_watermark = self.high_watermark
                reply.set_result(empty)

        parked = Parked(request, reply, self.loop.call_later(request.max_wait_ms / 1000, expire))
        self.parked[peer] = parked
        return await reply


def floor_handlers(leader: Leader) -> list[grpc.GenericRpcHandler[Any, Any]]:
    """CreateTopics and FetchStream only, with the generated (de)serializers (the node's services
    use the same ones): the request's bytes are the record, the answer says NONE per topic."""

    async def create_topics(
        request: controller_pb2.CreateTopicsRequest, context: Context
    ) -> controller_pb2.CreateTopicsResponse:
        await leader.submit(request.SerializeToString())
        return controller_pb2.CreateTopicsResponse(
            topics=[controller_pb2.CreatableTopicResult(name=topic.name) for topic in request.topics]
        )

    async def fetch_stream(
        request_iterator: AsyncIterator[raft_pb2.FetchRequest], context: Context
    ) -> AsyncIterator[raft_pb2.FetchResponse]:
        # One answer per request, in order (as the node's RaftServicer.FetchStream).
        async for request in request_iterator:
            yield await leader.fetch(request)

    controller = grpc.unary_unary_rpc_method_handler(
        create_topics,
        request_deserializer=controller_pb2.CreateTopicsRequest.FromString,
        response_serializer=controller_pb2.CreateTopicsResponse.SerializeToString,
    )
    fetch = grpc.stream_stream_rpc_method_handler(
        fetch_stream,
        request_deserializer=raft_pb2.FetchRequest.FromString,
        response_serializer=raft_pb2.FetchResponse.SerializeToString,
    )
    return [
        grpc.method_handlers_generic_handler(CONTROLLER_SERVICE, {"CreateTopics": controller}),
        grpc.method_handlers_generic_handler(RAFT_SERVICE, {"FetchStream": fetch}),
    ]


async def serve_leader(data_dir: Path, voters: int) -> None:
    disk = await asyncio.to_thread(open_disk, data_dir, LEADER_ID, list(range(1, voters + 1)))
    leader = Leader(disk, voters)
    server = grpc.aio.server(options=grpc_server_options())
    server.add_generic_rpc_handlers(floor_handlers(leader))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    get_logger("bench.raft-floor").info("leader serving", port=port)
    print(f"{PORT_LINE}{port}", flush=True)
    await until_stdin_closes()
    await server.stop(grace=None)
    await disk.close()
    print(COMMITS_LINE + json.dumps([(round(at, 6), round(took, 6)) for at, took in leader.commits]), flush=True)


# -- a follower ------------------------------------------------------------------------------------
class Follower:
    def __init__(self, node_id: int, leader_address: str, disk: DiskWriter) -> None:
        self.node_id = node_id
        self.disk = disk
        self.loop = asyncio.get_running_loop()
        self.peers = Peers(
            node_id,
            {LEADER_ID: leader_address},
            self.deliver,
            request_timeout_ms=REQUEST_TIMEOUT_MS,
            fetch_max_wait_ms=FETCH_MAX_WAIT_MS,
            unavailable=self.stream_failed,
            fetch_rpc="stream",
        )
        self.correlation_id = 0
        self.refetch: asyncio.TimerHandle | None = None

    def fetch(self) -> None:
        self.correlation_id += 1
        request = raft_pb2.FetchRequest(
            cluster_id=CLUSTER_ID,
            replica_id=self.node_id,
            replica_epoch=EPOCH,
            fetch_offset=self.disk.storage.log.durable_end_offset,
            last_fetched_epoch=EPOCH,
            max_wait_ms=FETCH_MAX_WAIT_MS,
            max_bytes=FETCH_MAX_BYTES,
        )
        self.peers.send(Envelope(self.node_id, LEADER_ID, self.correlation_id, request))

    def deliver(self, envelope: Envelope) -> None:
        response: Any = envelope.message
        records: bytes = response.records
        if not records:
            self.fetch()
        elif self.disk.idle and len(records) <= INLINE_FLUSH_MAX_BYTES:
            self.disk.append_and_flush_now(None, [records])
            self.fetch()
        else:
            self.disk.truncate_and_append(None, [records], disk_failed)
            self.disk.flush(lambda _durable: self.fetch(), disk_failed, fsync=True)

    def stream_failed(self, peer: int) -> None:
        # The request in flight was dropped with the stream: ask again shortly.
        if self.refetch is None or self.refetch.cancelled():
            self.refetch = self.loop.call_later(REFETCH_AFTER_S, self._refetch)

    def _refetch(self) -> None:
        self.refetch = None
        self.fetch()


async def serve_follower(data_dir: Path, node_id: int, leader_address: str, voters: int) -> None:
    disk = await asyncio.to_thread(open_disk, data_dir, node_id, list(range(1, voters + 1)))
    follower = Follower(node_id, leader_address, disk)
    follower.fetch()
    await until_stdin_closes()
    await follower.peers.close()
    await disk.close()


async def until_stdin_closes() -> None:
    # The bench closes our stdin to stop us (or dies, which closes it too).
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


def main(argv: list[str] | None = None) -> None:
    """``python -m raftmeta.bench.raft_floor leader|follower ...``: one process of the floor."""
    from raftmeta.logs import configure_logging
    from raftmeta.server.app import run

    parser = argparse.ArgumentParser(prog="raftmeta.bench.raft_floor")
    parser.add_argument("role", choices=("leader", "follower"))
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--voters", type=int, default=3)
    parser.add_argument("--node-id", type=int, default=LEADER_ID)
    parser.add_argument("--leader", default="")
    args = parser.parse_args(argv)
    configure_logging("warning")
    if args.role == "leader":
        run(serve_leader(args.data_dir, args.voters))
    else:
        run(serve_follower(args.data_dir, args.node_id, args.leader, args.voters))


# -- the bench's side ------------------------------------------------------------------------------
@dataclass
class FloorProcesses:
    processes: list[asyncio.subprocess.Process]
    leader_address: str
    # The leader's batches once it stopped: (commit time, append to commit), monotonic seconds.
    commits: list[tuple[float, float]] = field(default_factory=list)

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.processes]


async def start_floor(work_dir: Path, voters: int = 3) -> FloorProcesses:
    """Start the leader, then the followers; return once the leader listens."""

    async def spawn(*args: str) -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(
            *python_command("-m", "raftmeta.bench.raft_floor"),
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )

    root = work_dir / "raft-floor"
    leader = await spawn("leader", "--data-dir", str(root / "node-1"), "--voters", str(voters))
    floor = FloorProcesses([leader], "")
    try:
        assert leader.stdout is not None
        while True:
            line = (await asyncio.wait_for(leader.stdout.readline(), 30)).decode()
            if not line:
                raise RuntimeError("the raft floor's leader exited before listening")
            if line.startswith(PORT_LINE):
                floor.leader_address = f"127.0.0.1:{int(line[len(PORT_LINE) :])}"
                break
        for node_id in range(2, voters + 1):
            floor.processes.append(
                await spawn(
                    "follower",
                    "--data-dir",
                    str(root / f"node-{node_id}"),
                    "--node-id",
                    str(node_id),
                    "--leader",
                    floor.leader_address,
                    "--voters",
                    str(voters),
                )
            )
    except BaseException:
        await stop_floor(floor)
        raise
    return floor


async def stop_floor(floor: FloorProcesses) -> None:
    for process in floor.processes:
        if process.stdin is not None:
            process.stdin.close()
    leader = floor.processes[0]
    if leader.stdout is not None:
        with contextlib.suppress(TimeoutError):
            # Read to the end (the commits line may be bigger than the pipe holds) before waiting.
            for line in (await asyncio.wait_for(leader.stdout.read(), 10)).decode().splitlines():
                if line.startswith(COMMITS_LINE):
                    floor.commits = [(at, took) for at, took in json.loads(line[len(COMMITS_LINE) :])]
    for process in floor.processes:
        try:
            await asyncio.wait_for(process.wait(), 10)
        except TimeoutError:
            process.kill()
            await process.wait()


async def raft_floor(
    work_dir: Path, clients: int, partitions: int, duration_s: float, voters: int = 3
) -> dict[str, Any]:
    """The floor's figures: p50 with one client (``raft_p50_ms``), creates/s and p50 with
    ``clients`` (``raft_ops_per_s``, ``raft_p50_ms_loaded``), and the CPU its processes spent per
    create under that load. With one client both p50s are of the same ``duration_s`` window."""
    from raftmeta.bench.commit import WARMUP_S, cpu_seconds, measure
    from raftmeta.bench.results import median, percentile
    from raftmeta.client import ControllerClient, RetryPolicy

    floor = await start_floor(work_dir, voters)
    try:
        prefix = f"r{os.getpid()}-{time.monotonic_ns() % 1_000_000}"
        counter = iter(range(1 << 62))
        retry = RetryPolicy(deadline_s=30, attempt_timeout_s=30)
        async with ControllerClient([floor.leader_address], retry=retry) as client:

            async def create() -> None:
                topic = controller_pb2.CreatableTopic(
                    name=f"{prefix}-{next(counter)}", num_partitions=partitions, replication_factor=3
                )
                await client.create_topics(controller_pb2.CreateTopicsRequest(topics=[topic]))

            await create()  # a follower is fetching: the quorum commits
            # The 1-client p50 beside a loaded run; a 1-client run's own window gives it.
            single = await measure(create, 1, min(duration_s, 3.0)) if clients > 1 else None
            cpu: list[float | None] = []

            leader_pids = floor.pids[:1]

            window: list[float] = []

            async def cpu_window() -> None:
                await asyncio.sleep(WARMUP_S)
                window.append(time.monotonic())
                cpu.extend((cpu_seconds(floor.pids), cpu_seconds(leader_pids)))
                await asyncio.sleep(duration_s)
                cpu.extend((cpu_seconds(floor.pids), cpu_seconds(leader_pids)))
                window.append(time.monotonic())

            watcher = asyncio.create_task(cpu_window())
            loaded = await measure(create, clients, duration_s)
            await watcher
            single = single or loaded
    finally:
        await stop_floor(floor)
    if not single.latencies or not loaded.latencies:
        raise RuntimeError(f"the raft floor committed nothing (errors: {single.errors or loaded.errors})")
    before, leader_before, after, leader_after = cpu

    def per_op_ms(start: float | None, end: float | None) -> float | None:
        return None if start is None or end is None else round((end - start) * 1000 / len(loaded.latencies), 3)

    window_start, window_end = window
    commits = [took for at, took in floor.commits if window_start <= at <= window_end]

    return {
        "raft_p50_ms": round(median(single.latencies) * 1000, 3),
        "raft_p99_ms": round(percentile(single.latencies, 0.99) * 1000, 3),
        "raft_ops_per_s": round(len(loaded.latencies) / duration_s, 1),
        "raft_p50_ms_loaded": round(median(loaded.latencies) * 1000, 3),
        "raft_clients": clients,
        "raft_voters": voters,
        "raft_cpu_ms_per_op": per_op_ms(before, after),
        # The leader's share: with small requests its event loop is what saturates first.
        "raft_leader_cpu_ms_per_op": per_op_ms(leader_before, leader_after),
        # Mean proposal-to-commit time of the leader's batches in the window: the node's
        # leader_path_ms.append_to_commit (its raftmeta_raft_commit_latency_seconds) on the floor.
        "raft_append_to_commit_ms": round(sum(commits) * 1000 / len(commits), 3) if commits else None,
        "raft_errors": {**single.errors, **loaded.errors},
    }


if __name__ == "__main__":
    main()
