"""In-memory twins of a node's two IO seams (raftmeta/server/seams.py): a disk that keeps the log,
election state and snapshot in lists, and a network that carries RaftService requests from one
node's peers straight into another node's inbox. Nodes built with them run the real node code --
inbox, futures, group commit, the QuorumController -- in one event loop, with no files and no
sockets."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence

from raftmeta.raft import Entry, Envelope, QuorumStateData, SnapshotImage
from raftmeta.raft.types import RaftMessage
from raftmeta.records import codec
from raftmeta.server.node import Node
from raftmeta.server.seams import DurableState, PeerLink, PeersFactory
from raftmeta.v1 import records_pb2


def entries_of(data: bytes) -> list[Entry]:
    return [Entry.from_batch(batch) for batch in codec.iter_batches(data)]


class MemoryDisk:
    """A disk that forgets nothing and fsyncs instantly. Every call completes before it returns
    (so it is always ``idle``); ``flush`` reports on the next loop round, as the writer thread's
    completion does. Once ``failure`` is set, every write fails with it, as a full or broken disk
    would."""

    def __init__(self) -> None:
        self.on_fsync: Callable[[float], None] | None = None
        self.failure: BaseException | None = None
        self.quorum_state: QuorumStateData | None = None
        self.entries: list[Entry] = []
        self.snapshot: SnapshotImage | None = None
        self.snapshot_records: list[bytes] = []
        self.high_watermark = 0
        self.fsyncs = 0
        self.installed = 0  # snapshots fetched from a leader
        # Base offsets of entries whose bytes are damaged, reported on load (a repair clears one).
        self.damaged: set[int] = set()
        # (end offset, epoch) of a damaged newest snapshot with no fallback, reported on load until
        # the leader's is installed (docs/storage.md, "A damaged snapshot with no fallback").
        self.missing_snapshot: tuple[int, int] | None = None

    @property
    def idle(self) -> bool:
        return True

    @property
    def end_offset(self) -> int:
        if self.entries:
            return self.entries[-1].next_offset
        return self.snapshot.end_offset if self.snapshot is not None else 0

    async def load(self) -> DurableState:
        start = self.entries[0].base_offset if self.entries else self.end_offset
        return DurableState(
            quorum_state=self.quorum_state,
            quorum_state_problem=None,
            entries=list(self.entries),
            snapshot=self.snapshot,
            snapshot_records=list(self.snapshot_records),
            high_watermark=self.high_watermark,
            log_start_offset=start,
            log_end_offset=self.end_offset,
            damaged=sorted(self.damaged),
            missing_snapshot=self.missing_snapshot,
        )

    def _write(self) -> None:
        if self.failure is not None:
            raise self.failure

    async def write_quorum_state(self, state: QuorumStateData) -> None:
        self._write()
        self.quorum_state = state

    async def install_snapshot(
        self, end_offset: int, epoch: int, data: bytes, *, keep_log: bool = False
    ) -> Sequence[bytes]:
        self._write()
        # The image's records: the data batches (a control batch holds the voter set).
        records = [
            record for batch in codec.iter_batches(data) if not batch.header.is_control for record in batch.records()
        ]
        self.snapshot = SnapshotImage(end_offset, epoch, data)
        self.snapshot_records = records
        self.missing_snapshot = None
        self.entries = [e for e in self.entries if e.base_offset >= end_offset] if keep_log else []
        self.installed += 1
        return records

    async def repair(self, truncate_to: int | None, copies: Sequence[bytes]) -> None:
        self._truncate_and_append(truncate_to, [])
        for copy in copies:
            (entry,) = entries_of(copy)
            i = next(k for k, e in enumerate(self.entries) if e.base_offset == entry.base_offset)
            assert (self.entries[i].epoch, self.entries[i].next_offset) == (entry.epoch, entry.next_offset)
            self.entries[i] = entry
            self.damaged.discard(entry.base_offset)

    def _truncate_and_append(self, truncate_to: int | None, batches: Sequence[bytes]) -> None:
        self._write()
        if truncate_to is not None:
            self.entries = [e for e in self.entries if e.next_offset <= truncate_to]
        for data in batches:
            self.entries.extend(entries_of(data))

    def append_and_flush_now(self, truncate_to: int | None, batches: Sequence[bytes]) -> int:
        self._truncate_and_append(truncate_to, batches)
        self.fsyncs += 1
        return self.end_offset

    def truncate_and_append(
        self, truncate_to: int | None, batches: Sequence[bytes], on_failure: Callable[[BaseException], None]
    ) -> None:
        try:
            self._truncate_and_append(truncate_to, batches)
        except Exception as exc:
            on_failure(exc)

    def flush(self, done: Callable[[int], None], on_failure: Callable[[BaseException], None], *, fsync: bool) -> None:
        try:
            self._write()
        except Exception as exc:
            on_failure(exc)
            return
        self.fsyncs += fsync
        asyncio.get_running_loop().call_soon(done, self.end_offset)

    def checkpoint_high_watermark(self, high_watermark: int, on_failure: Callable[[BaseException], None]) -> None:
        try:
            self._write()
        except Exception as exc:
            on_failure(exc)
            return
        self.high_watermark = high_watermark

    async def take_snapshot(
        self,
        end_offset: int,
        epoch: int,
        records: Callable[[], Iterable[bytes | codec.FramedRecords]],
        timestamp_ms: int,
        *,
        voters: records_pb2.VotersRecord | None = None,
    ) -> tuple[bytes, int]:
        self._write()
        payload = [
            record
            for item in records()
            for record in (item.records() if isinstance(item, codec.FramedRecords) else [item])
        ]
        # Any self-describing bytes do: the core only chunks them (and finds the voter set in its
        # control batch), and install_snapshot above is the only reader.
        data = b""
        if voters is not None:
            record = records_pb2.MetadataRecord(voters=voters).SerializeToString()
            data = codec.encode_batch(0, epoch, [record], timestamp_ms, control=True)
        if payload:
            data += codec.encode_batch(1, epoch, payload, timestamp_ms)
        self.snapshot = SnapshotImage(end_offset, epoch, data)
        self.snapshot_records = payload
        self.entries = [e for e in self.entries if e.base_offset >= end_offset]
        return data, len(payload)

    async def close(self) -> None:
        return None


class MemoryNetwork:
    """Voters that reach each other through their inboxes. A node reaches only the nodes
    ``connect``ed and not ``cut`` off; a call to any other fails at once, as a refused
    connection does."""

    def __init__(self) -> None:
        self.nodes: dict[int, Node] = {}
        self.cut: set[int] = set()

    def connect(self, node: Node) -> None:
        self.nodes[node.node_id] = node

    def peers(self, node_id: int) -> PeersFactory:
        def make(deliver: Callable[[Envelope], None], unavailable: Callable[[int], None]) -> PeerLink:
            return MemoryPeers(self, node_id, deliver, unavailable)

        return make

    def reachable(self, source: int, destination: int) -> Node | None:
        if source in self.cut or destination in self.cut:
            return None
        return self.nodes.get(destination)


class MemoryPeers:
    def __init__(
        self,
        network: MemoryNetwork,
        node_id: int,
        deliver: Callable[[Envelope], None],
        unavailable: Callable[[int], None],
    ) -> None:
        self._network = network
        self._node_id = node_id
        self._deliver = deliver
        self._unavailable = unavailable
        self.sent = 0

    def learn(self, addresses: dict[int, str]) -> None:
        del addresses  # the in-memory network reaches every node by id

    def send(self, envelope: Envelope) -> None:
        self.sent += 1
        destination = envelope.destination
        target = self._network.reachable(self._node_id, destination)
        if target is None:
            self._unavailable(destination)
            return
        # Through bytes, as over the wire: neither side may hold on to the other's message objects.
        future = target.submit_raft(self._node_id, _copy(envelope.message))

        def answered(done: asyncio.Future[RaftMessage]) -> None:
            if done.cancelled() or done.exception() is not None:
                return  # the node stopped: the core retries on its own timers
            if self._network.reachable(self._node_id, destination) is None:
                return  # cut off while the request was in flight: the answer is lost
            answer = _copy(done.result())
            self._deliver(Envelope(destination, self._node_id, envelope.correlation_id, answer))

        future.add_done_callback(answered)

    async def close(self) -> None:
        return None


def _copy(message: RaftMessage) -> RaftMessage:
    copy: RaftMessage = type(message).FromString(message.SerializeToString())
    return copy
