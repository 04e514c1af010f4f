"""The node's two IO seams, as types: its ``Disk`` and its ``PeerLink`` to the other voters.

The defaults are the real ones (:class:`raftmeta.server.disk.DiskWriter` over a data dir, the
gRPC :class:`raftmeta.server.peers.Peers`); tests hand a :class:`~raftmeta.server.node.Node`
in-memory twins instead (tests/server/twins.py), so a node -- or a cluster of them -- runs in one
event loop with no files and no sockets, through the same node code as production.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from raftmeta.raft import Entry, Envelope, QuorumStateData, SnapshotImage
from raftmeta.records.codec import FramedRecords
from raftmeta.v1 import records_pb2


@dataclass(frozen=True, slots=True)
class DurableState:
    """What a disk holds when the node starts: the core and the controller are rebuilt from it."""

    quorum_state: QuorumStateData | None
    # Why a quorum-state file that exists could not be read (the core then recovers it from the log).
    quorum_state_problem: str | None
    entries: list[Entry]  # the log above the snapshot
    snapshot: SnapshotImage | None  # ``data``: the snapshot file's bytes, which the core serves
    snapshot_records: Sequence[bytes]  # the snapshot's records (what ``data`` holds, decoded)
    high_watermark: int  # the last checkpoint
    log_start_offset: int
    log_end_offset: int
    # The data dir's directory id (meta.properties; KIP-853's replica key with the node id).
    directory_id: bytes = b""
    # Base offsets of the batches of ``entries`` whose bytes are damaged (their slot is known):
    # the raft core repairs them from the quorum (docs/storage.md, "Repair from the quorum").
    damaged: Sequence[int] = ()
    # Of those, the slots across an epoch change (no byte says where the epoch rises inside):
    # base offset -> the highest epoch their offsets may be of (raftmeta/storage/damage.py).
    damaged_epochs: Mapping[int, int] = field(default_factory=dict)
    # (end offset, epoch) of a damaged newest snapshot set aside with no fallback: the log starts
    # there and the state below it is missing until the leader's snapshot is installed.
    missing_snapshot: tuple[int, int] | None = None


class Disk(Protocol):
    """A node's durable state. The order in which calls are made is the order in which they take
    effect; ``truncate_and_append``, ``flush`` and ``checkpoint_high_watermark`` only queue work
    (``on_failure`` reports a failure later, and is fatal to the node)."""

    # Each fsync's duration in seconds (the node's histogram), set by the node.
    on_fsync: Callable[[float], None] | None

    @property
    def idle(self) -> bool:
        """Nothing queued or running: a caller may write on its own thread without reordering."""
        ...

    async def load(self) -> DurableState: ...

    async def write_quorum_state(self, state: QuorumStateData) -> None: ...

    async def install_snapshot(
        self, end_offset: int, epoch: int, data: bytes, *, keep_log: bool = False
    ) -> Sequence[bytes]:
        """Make a snapshot fetched from the leader the log's start (``keep_log``: the core's
        ``install_keeps_log``, the log from its end on stays); return its records."""
        ...

    async def repair(self, truncate_to: int | None, copies: Sequence[bytes]) -> None:
        """Overwrite damaged batches in place with the intact ``copies`` (Ready.repair), then
        truncate (if asked); fsynced on return."""
        ...

    def append_and_flush_now(self, truncate_to: int | None, batches: Sequence[bytes]) -> int:
        """Truncate/append and make durable on the caller's thread (only when ``idle``); return
        the durable end offset."""
        ...

    def truncate_and_append(
        self, truncate_to: int | None, batches: Sequence[bytes], on_failure: Callable[[BaseException], None]
    ) -> None: ...

    def flush(self, done: Callable[[int], None], on_failure: Callable[[BaseException], None], *, fsync: bool) -> None:
        """Queue a flush behind every append so far; ``done(durable end offset)`` runs on the loop."""
        ...

    def checkpoint_high_watermark(self, high_watermark: int, on_failure: Callable[[BaseException], None]) -> None: ...

    async def take_snapshot(
        self,
        end_offset: int,
        epoch: int,
        records: Callable[[], Iterable[bytes | FramedRecords]],
        timestamp_ms: int,
        *,
        voters: records_pb2.VotersRecord | None = None,
    ) -> tuple[bytes, int]:
        """Write a snapshot of ``records()`` (and the voter set in force at its end) and drop
        the log below it; return the snapshot's bytes (served to followers) and its record count."""
        ...

    async def close(self) -> None: ...


class PeerLink(Protocol):
    """Outbound requests to the other voters; their answers come back through ``deliver``."""

    def send(self, envelope: Envelope) -> None: ...

    def learn(self, addresses: dict[int, str]) -> None:
        """Voters added since start-up, and where they listen (from the log's VotersRecord)."""
        ...

    async def close(self) -> None: ...


# (deliver an answer, report a failed call to a peer) -> the node's link to its peers.
PeersFactory = Callable[[Callable[[Envelope], None], Callable[[int], None]], PeerLink]
