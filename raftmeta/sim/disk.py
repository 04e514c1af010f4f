"""A node's simulated disk: the log, the quorum-state file, the high-watermark checkpoint and the
snapshot, with the crash semantics of the real storage (raftmeta/storage).

* Log appends reach the page cache (``entries``) at once and the disk (``durable``) only through
  an fsync. An fsync covers what was written before it *started* (:meth:`flush_begin` takes a
  barrier, :meth:`flush_end` makes the writes before it durable), so a flush that completes after
  a later truncation and append reports only what it covered -- the race a driver's flush report
  must get right (``RaftCore.on_log_flushed``).
* A truncation is durable when it returns (``SegmentLog.truncate_to`` fsyncs the segment and the
  directory), and so is everything written before it in the same file.
* A crash keeps the durable log, plus (when the seed says so) an in-order prefix of the writes
  that were not flushed yet: a disk may have written some of them.
* The quorum-state file is replaced atomically; a write in flight at a crash is lost whole (the
  simulator delays it, see ``Simulation._perform``). It can also be lost outright (``lose_state``).
* Repairs (``Ready.repair``) overwrite a damaged batch in place and are durable on return. The
  damage itself is injected by ``raftmeta.sim.disk_faults``.
* A snapshot written while an fsync runs (a follower snapshots what it has just appended) deletes
  the segments below it; the unflushed writes there count as done, so the fsync still covers only
  the writes before it started (:meth:`trim`).
* The high-watermark checkpoint is written lazily and clamped to the durable log, as
  ``HighWatermarkCheckpoint`` does; a restart starts the core from it.
"""

from __future__ import annotations

import bisect

from raftmeta.raft import Entry, QuorumStateData, SnapshotImage
from raftmeta.raft.repair import damage_of
from raftmeta.sim.rng import SeededRandom

APPEND, TRUNCATE = 0, 1


class SimDisk:
    __slots__ = (
        "_ops_done",
        "durable",
        "entries",
        "hw_checkpoint",
        "missing_snapshot",
        "pending",
        "quorum_state",
        "quorum_state_lost",
        "snapshot",
        "spans",
    )

    def __init__(self) -> None:
        self.entries: list[Entry] = []  # what the node reads back (page cache)
        self.durable: list[Entry] = []  # what survives a crash
        # Writes not yet durable, in order: (APPEND, entry) or (TRUNCATE, offset).
        self.pending: list[tuple[int, Entry | int]] = []
        self._ops_done = 0  # writes made durable so far (pending[0] is write number _ops_done)
        self.quorum_state: QuorumStateData | None = None
        # The quorum-state file failed its checksum and was set aside: not a new node's missing file.
        self.quorum_state_lost = False
        self.hw_checkpoint = 0
        self.snapshot: SnapshotImage | None = None
        # Damaged slots across an epoch change (disk_faults.zero_across_epochs): base offset -> the
        # highest epoch their offsets may be of, as the real storage reports them (damage.py).
        self.spans: dict[int, int] = {}
        # (end offset, epoch) of a damaged newest snapshot with no fallback (disk_faults.lose_snapshot):
        # the log starts there, the state below it is on no file of this disk until an install.
        self.missing_snapshot: tuple[int, int] | None = None

    @property
    def end_offset(self) -> int:
        return _end(self.entries, self.snapshot)

    @property
    def durable_end_offset(self) -> int:
        return _end(self.durable, self.snapshot)

    def last_entry(self) -> Entry | None:
        return self.entries[-1] if self.entries else None

    def durable_last_epoch(self) -> int:
        if self.durable:
            return self.durable[-1].epoch
        return self.snapshot.epoch if self.snapshot else 0

    def durably_holds(self, entry: Entry, *, intact: bool = True) -> bool:
        """Whether ``entry`` would survive a crash right now (it is flushed, or in the snapshot);
        ``intact``: and its bytes are the batch's (a damaged copy holds nothing)."""
        if self.snapshot is not None and entry.next_offset <= self.snapshot.end_offset:
            return True
        durable = self.durable
        i = bisect.bisect_right(durable, entry.base_offset, key=lambda e: e.base_offset) - 1
        if i < 0 or not durable[i].epoch <= entry.epoch <= self.spans.get(durable[i].base_offset, durable[i].epoch):
            return False
        held = durable[i]
        if held.base_offset == entry.base_offset:
            return not intact or held.data == entry.data
        # Inside a damaged range of its epoch (several batches rotted into one slot): held, damaged.
        return not intact and entry.next_offset <= held.next_offset and damage_of(held) is not None

    # -- writes ----------------------------------------------------------------------------------
    def append(self, entry: Entry) -> None:
        self.entries.append(entry)
        self.pending.append((APPEND, entry))

    def truncate_to(self, offset: int) -> None:
        _truncate(self.entries, offset)
        self.spans = {b: e for b, e in self.spans.items() if b < offset}
        # Durable on return, with everything written before it (one file, one fsync).
        self.pending.append((TRUNCATE, offset))
        self._apply(len(self.pending))

    def repair(self, entry: Entry) -> None:
        """Overwrite the damaged batch in ``entry``'s slot with ``entry`` (written and fsynced in
        place, durable on return) -- or the front of a damaged range of several batches, whose
        rest stays damaged (raftmeta/storage/damage.py). A slot across an epoch change takes a batch
        of any epoch of its span; its rest then starts at that epoch. A batch that starts inside a
        damaged range and ends where it ends goes at its back, the range's front staying damaged
        (damage.repaired_back: a leader's snapshot ends inside the range)."""
        max_epoch = self.spans.pop(entry.base_offset, None)
        for entries in (self.entries, self.durable):
            i = bisect.bisect_left(entries, entry.base_offset, key=lambda e: e.base_offset)
            if (
                0 < i <= len(entries)
                and entries[i - 1].next_offset == entry.next_offset > entry.base_offset > entries[i - 1].base_offset
                and (i == len(entries) or entries[i].base_offset != entry.base_offset)
            ):
                slot = entries[i - 1]
                assert slot.epoch == entry.epoch and slot.base_offset not in self.spans, "a repair fills its slot"
                front = Entry(
                    slot.base_offset, slot.epoch, entry.base_offset, slot.data[: len(slot.data) - len(entry.data)]
                )
                entries[i - 1 : i] = [front, entry]
                continue
            if i < len(entries) and entries[i].base_offset == entry.base_offset:
                slot = entries[i]
                bound = slot.epoch if max_epoch is None else max_epoch
                assert slot.epoch <= entry.epoch <= bound, "a repair fills its slot"
                assert entry.next_offset <= slot.next_offset, "a repair fills its slot"
                entries[i] = entry
                if entry.next_offset < slot.next_offset:
                    rest = slot.data[len(entry.data) :]
                    entries.insert(i + 1, Entry(entry.next_offset, entry.epoch, slot.next_offset, rest))
                    if max_epoch is not None and max_epoch > entry.epoch:
                        self.spans[entry.next_offset] = max_epoch

    def flush_begin(self) -> tuple[int, int]:
        """An fsync starts: it covers the writes made so far. Returns its barrier and the log end
        it will report (``SegmentLog.flush`` returns the end of what it synced)."""
        return self._ops_done + len(self.pending), self.end_offset

    def flush_end(self, barrier: int) -> None:
        """The fsync that began at ``barrier`` completed: the writes before it are durable."""
        self._apply(barrier - self._ops_done)

    def _apply(self, count: int) -> None:
        for kind, value in self.pending[: max(0, count)]:
            if kind == APPEND:
                assert isinstance(value, Entry)
                self.durable.append(value)
            else:
                assert isinstance(value, int)
                _truncate(self.durable, value)
        done = max(0, min(count, len(self.pending)))
        del self.pending[:done]
        self._ops_done += done

    def install(self, image: SnapshotImage) -> None:
        """A snapshot fetched from the leader replaces the whole log (durable on return)."""
        self.snapshot = image
        self.missing_snapshot = None
        self.entries = []
        self.durable = []
        self.spans = {}
        self._ops_done += len(self.pending)
        self.pending = []

    def trim(self, image: SnapshotImage, log_start_offset: int) -> None:
        """A snapshot was written: segments below the core's log start are deleted."""
        self.snapshot = image
        self.missing_snapshot = None
        for entries in (self.entries, self.durable):
            i = bisect.bisect_left(entries, log_start_offset, key=lambda e: e.base_offset)
            del entries[:i]
        self.spans = {b: e for b, e in self.spans.items() if b >= log_start_offset}
        # Unflushed appends below the log start are covered by the durable snapshot now. They are
        # the oldest writes (a truncation makes every write before it durable, so the pending ones
        # are appends in offset order): count them as done, so that an fsync in flight still
        # covers only the writes made before it started (its barrier counts writes).
        covered = 0
        for kind, value in self.pending:
            if kind != APPEND or not isinstance(value, Entry) or value.base_offset >= log_start_offset:
                break
            covered += 1
        assert all(
            not (kind == APPEND and isinstance(value, Entry) and value.base_offset < log_start_offset)
            for kind, value in self.pending[covered:]
        ), "unflushed appends are in offset order"
        del self.pending[:covered]
        self._ops_done += covered

    def checkpoint_high_watermark(self, high_watermark: int) -> None:
        """Lazily persisted HW, never above the durable log, never backwards (HighWatermarkCheckpoint)."""
        value = min(high_watermark, self.durable_end_offset)
        self.hw_checkpoint = max(self.hw_checkpoint, value)

    # -- crashes ---------------------------------------------------------------------------------
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
            self.durable = []

    def crash(self, rng: SeededRandom, keep_unflushed: bool) -> int:
        """Lose what was not flushed (maybe not all of it); return the number of batches lost."""
        before = len(self.entries)
        if keep_unflushed and self.pending:
            self._apply(rng.randint(0, len(self.pending)))
        self._ops_done += len(self.pending)
        self.pending = []
        self.entries = list(self.durable)
        return max(0, before - len(self.entries))


def _end(entries: list[Entry], snapshot: SnapshotImage | None) -> int:
    if entries:
        return entries[-1].next_offset
    return snapshot.end_offset if snapshot else 0


def _truncate(entries: list[Entry], offset: int) -> None:
    i = bisect.bisect_left(entries, offset, key=lambda e: e.base_offset)
    del entries[i:]
