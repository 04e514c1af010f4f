"""A node's simulated disk: the log, the quorum-state file and the snapshot, with crash
semantics. The quorum state and snapshots are written synchronously (atomic rename + fsync,
as the driver contract demands); log appends and truncations are durable only after a flush.
A crash returns the log to its state at the last flush (optionally keeping part of the
unflushed tail, as a disk may have written some of it)."""

from __future__ import annotations

import bisect

from raftmeta.raft import Entry, QuorumStateData, SnapshotImage
from raftmeta.sim.rng import SeededRandom


class SimDisk:
    __slots__ = ("_durable_count", "_pre_truncation", "entries", "quorum_state", "snapshot")

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self._durable_count = 0
        # The durable log as it was before an unflushed truncation (a crash brings it back).
        self._pre_truncation: list[Entry] | None = None
        self.quorum_state: QuorumStateData | None = None
        self.snapshot: SnapshotImage | None = None

    @property
    def end_offset(self) -> int:
        if self.entries:
            return self.entries[-1].next_offset
        return self.snapshot.end_offset if self.snapshot else 0

    def last_entry(self) -> Entry | None:
        return self.entries[-1] if self.entries else None

    def durably_holds(self, entry: Entry) -> bool:
        """Whether ``entry`` would survive a crash right now (it is flushed, or in the snapshot)."""
        if self.snapshot is not None and entry.next_offset <= self.snapshot.end_offset:
            return True
        durable = self._pre_truncation if self._pre_truncation is not None else self.entries[: self._durable_count]
        i = bisect.bisect_left(durable, entry.base_offset, key=lambda e: e.base_offset)
        return i < len(durable) and durable[i].base_offset == entry.base_offset and durable[i].epoch == entry.epoch

    def append(self, entry: Entry) -> None:
        self.entries.append(entry)

    def truncate_to(self, offset: int) -> None:
        entries = self.entries
        i = bisect.bisect_left(entries, offset, key=lambda e: e.base_offset)
        if i < self._durable_count and self._pre_truncation is None:
            self._pre_truncation = entries[: self._durable_count]
        del entries[i:]
        self._durable_count = min(self._durable_count, i)

    def flush(self) -> int:
        self._durable_count = len(self.entries)
        self._pre_truncation = None
        return self.end_offset

    def install(self, image: SnapshotImage) -> None:
        self.snapshot = image
        self.entries = []
        self._durable_count = 0
        self._pre_truncation = None

    def trim(self, image: SnapshotImage, log_start_offset: int) -> None:
        """A snapshot was written: segments below the core's log start are deleted."""
        self.snapshot = image
        i = bisect.bisect_left(self.entries, log_start_offset, key=lambda e: e.base_offset)
        del self.entries[:i]
        self._durable_count = max(0, self._durable_count - i)
        if self._pre_truncation is not None:
            self._pre_truncation = [e for e in self._pre_truncation if e.base_offset >= log_start_offset]

    def recover(self) -> None:
        """On start, as Kafka's truncateToLatestSnapshot: a log that ends below the snapshot (its
        tail was lost, the snapshot was not), or whose last epoch is older than the snapshot's (a
        crash undid a truncation the snapshot came after), restarts empty at the snapshot's end."""
        snapshot = self.snapshot
        if (
            snapshot is not None
            and self.entries
            and (self.entries[-1].next_offset <= snapshot.end_offset or self.entries[-1].epoch < snapshot.epoch)
        ):
            self.entries = []
            self._durable_count = 0
            self._pre_truncation = None

    def crash(self, rng: SeededRandom, keep_unflushed: bool) -> int:
        """Lose what was not flushed; return the number of batches lost."""
        before = len(self.entries)
        if self._pre_truncation is not None:
            self.entries = self._pre_truncation
        else:
            keep = self._durable_count
            if keep_unflushed and before > keep:
                keep += rng.randint(0, before - keep)
            del self.entries[keep:]
        self._pre_truncation = None
        self._durable_count = len(self.entries)
        return max(0, before - len(self.entries))
