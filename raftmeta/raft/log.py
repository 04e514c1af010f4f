"""The core's in-memory view of the replicated log: an index of whole batches above the
latest snapshot, plus the epoch index that ``validate_offset_and_epoch`` needs.

Batches are the unit: the leader frames one proposal as one batch, followers store the
leader's batches byte for byte, and every offset the protocol exchanges (fetch offsets, end
offsets, the high watermark) is a batch boundary. Truncation therefore removes whole batches.
"""

from __future__ import annotations

import bisect
import enum
from collections.abc import Iterable
from dataclasses import dataclass

from raftmeta.records.codec import Batch


@dataclass(frozen=True, slots=True)
class Entry:
    """One batch of the log: offsets [base_offset, next_offset), appended in ``epoch``."""

    base_offset: int
    epoch: int
    next_offset: int
    data: bytes

    @classmethod
    def from_batch(cls, batch: Batch) -> Entry:
        return cls(batch.base_offset, batch.epoch, batch.next_offset, batch.data)


class Validation(enum.Enum):
    VALID = "valid"
    DIVERGING = "diverging"
    SNAPSHOT = "snapshot"


@dataclass(frozen=True, slots=True)
class OffsetAndEpoch:
    offset: int
    epoch: int


@dataclass(frozen=True, slots=True)
class ValidationResult:
    """Kafka's ``ValidOffsetAndEpoch``: for DIVERGING, ``offset``/``epoch`` are the end offset
    and epoch to truncate to; for SNAPSHOT, the log start (the snapshot to fetch)."""

    kind: Validation
    offset: int = 0
    epoch: int = 0


class LogView:
    """Batches [start_offset, end_offset) in memory; below start_offset is the snapshot."""

    __slots__ = ("_bases", "_entries", "_epoch_starts", "_epochs", "start_epoch", "start_offset")

    def __init__(self, start_offset: int = 0, start_epoch: int = 0, entries: Iterable[Entry] = ()) -> None:
        self.start_offset = start_offset
        self.start_epoch = start_epoch
        self._entries: list[Entry] = []
        self._bases: list[int] = []
        # Epoch index: epoch e covers [start_e, start_of_next_epoch). The first element is the
        # log start (the snapshot's epoch), so queries about older epochs answer SNAPSHOT.
        self._epochs: list[int] = [start_epoch]
        self._epoch_starts: list[int] = [start_offset]
        for entry in entries:
            self.append(entry)

    # -- reading ---------------------------------------------------------------------------------
    @property
    def end_offset(self) -> int:
        return self._entries[-1].next_offset if self._entries else self.start_offset

    @property
    def last_epoch(self) -> int:
        return self._entries[-1].epoch if self._entries else self.start_epoch

    def __len__(self) -> int:
        return len(self._entries)

    def entries(self) -> list[Entry]:
        return list(self._entries)

    def index_of(self, offset: int) -> int:
        """Index of the batch starting at ``offset`` (== len when offset is the end)."""
        if offset == self.end_offset:
            return len(self._entries)
        i = bisect.bisect_left(self._bases, offset)
        assert i < len(self._bases) and self._bases[i] == offset, f"offset {offset} is not a batch boundary"
        return i

    def read(self, from_offset: int, max_bytes: int) -> list[Entry]:
        """Whole batches from ``from_offset`` (a batch boundary), at most ``max_bytes`` of them
        but always at least one if any exists (so a large batch cannot stall a follower)."""
        i = self.index_of(from_offset)
        out: list[Entry] = []
        size = 0
        entries = self._entries
        while i < len(entries):
            entry = entries[i]
            size += len(entry.data)
            if out and size > max_bytes:
                break
            out.append(entry)
            i += 1
        return out

    def slice(self, from_offset: int, to_offset: int) -> list[Entry]:
        """The batches covering [from_offset, to_offset), both batch boundaries."""
        if from_offset >= to_offset:
            return []
        return self._entries[self.index_of(from_offset) : self.index_of(to_offset)]

    def entry_before(self, offset: int) -> Entry | None:
        """The batch ending at ``offset`` (None at the log start)."""
        i = self.index_of(offset)
        return self._entries[i - 1] if i > 0 else None

    def entry_at(self, base_offset: int) -> Entry | None:
        """The batch starting at ``base_offset``, or None if there is none."""
        i = bisect.bisect_left(self._bases, base_offset)
        if i < len(self._bases) and self._bases[i] == base_offset:
            return self._entries[i]
        return None

    def entry_covering(self, offset: int) -> Entry | None:
        """The batch holding ``offset`` (at its base or inside it), or None if there is none."""
        i = bisect.bisect_right(self._bases, offset) - 1
        if i >= 0 and offset < self._entries[i].next_offset:
            return self._entries[i]
        return None

    def epoch_of_batch(self, base_offset: int) -> int | None:
        """The epoch of the batch starting at ``base_offset``, or None if there is none."""
        i = bisect.bisect_left(self._bases, base_offset)
        if i < len(self._bases) and self._bases[i] == base_offset:
            return self._entries[i].epoch
        return None

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch | None:
        """The largest epoch <= ``epoch`` in the log and the end offset of that epoch; None if
        ``epoch`` is older than everything above the snapshot (Kafka's endOffsetForEpoch)."""
        i = bisect.bisect_right(self._epochs, epoch) - 1
        if i < 0:
            return None
        end = self._epoch_starts[i + 1] if i + 1 < len(self._epochs) else self.end_offset
        return OffsetAndEpoch(end, self._epochs[i])

    def validate_offset_and_epoch(self, offset: int, epoch: int) -> ValidationResult:
        """Kafka's ReplicatedLog.validateOffsetAndEpoch, on the leader for a fetcher whose log
        ends at ``offset`` with a last batch of ``epoch``."""
        start = self.start_offset
        if offset < start or (offset == start and start > 0 and epoch != self.start_epoch):
            return ValidationResult(Validation.SNAPSHOT, start, self.start_epoch)
        found = self.end_offset_for_epoch(epoch)
        if found is None:
            return ValidationResult(Validation.SNAPSHOT, start, self.start_epoch)
        if found.epoch != epoch or found.offset < offset:
            if found.offset < start:
                return ValidationResult(Validation.SNAPSHOT, start, self.start_epoch)
            return ValidationResult(Validation.DIVERGING, found.offset, found.epoch)
        return ValidationResult(Validation.VALID, offset, epoch)

    # -- writing ---------------------------------------------------------------------------------
    def append(self, entry: Entry) -> None:
        assert entry.base_offset == self.end_offset, f"append at {entry.base_offset}, log ends at {self.end_offset}"
        assert entry.next_offset > entry.base_offset
        assert entry.epoch >= self.last_epoch, f"epoch {entry.epoch} after {self.last_epoch}"
        if entry.epoch != self._epochs[-1]:
            self._epochs.append(entry.epoch)
            self._epoch_starts.append(entry.base_offset)
        self._entries.append(entry)
        self._bases.append(entry.base_offset)

    def replace(self, entry: Entry) -> Entry | None:
        """Put a repaired copy in place of the batch with the same base offset, epoch and end --
        or at the front of a damaged range of several batches (one entry here until repaired,
        raftmeta/storage/damage.py), whose rest stays one entry of the copy's epoch: returned (None
        when the copy fills the slot). A copy of a later epoch than the slot's (a slot across an
        epoch change) starts that epoch there."""
        i = bisect.bisect_left(self._bases, entry.base_offset)
        assert i < len(self._bases) and self._bases[i] == entry.base_offset, f"no batch at {entry.base_offset}"
        old = self._entries[i]
        assert old.epoch <= entry.epoch and entry.next_offset <= old.next_offset, "a repair must fill its slot"
        following = self._entries[i + 1].epoch if i + 1 < len(self._entries) else entry.epoch
        assert entry.epoch <= following, "a repair keeps the epochs non-decreasing"
        self._entries[i] = entry
        rest = None
        if entry.next_offset < old.next_offset:
            rest = Entry(entry.next_offset, entry.epoch, old.next_offset, old.data[len(entry.data) :])
            self._entries.insert(i + 1, rest)
            self._bases.insert(i + 1, rest.base_offset)
        if entry.epoch != old.epoch:
            self._rebuild_epochs()
        return rest

    def replace_back(self, entry: Entry) -> None:
        """Put a repaired copy at the back of the damaged range that holds its base offset (its end
        the range's, its epoch the range's: repair.copy_fills_back); the range's front stays one
        entry, its bytes the range's first ones."""
        i = bisect.bisect_right(self._bases, entry.base_offset) - 1
        assert i >= 0, f"no batch holds {entry.base_offset}"
        old = self._entries[i]
        assert old.base_offset < entry.base_offset and old.next_offset == entry.next_offset, "the back of a range"
        assert old.epoch == entry.epoch and len(entry.data) < len(old.data), "a repair fills its slot"
        front = Entry(old.base_offset, old.epoch, entry.base_offset, old.data[: len(old.data) - len(entry.data)])
        self._entries[i] = front
        self._entries.insert(i + 1, entry)
        self._bases.insert(i + 1, entry.base_offset)

    def truncate_to(self, offset: int) -> int:
        """Remove every batch that does not lie entirely below ``offset``; return the new end
        (the largest batch boundary <= offset)."""
        assert offset >= self.start_offset, f"truncate to {offset} below the log start {self.start_offset}"
        i = bisect.bisect_left(self._bases, offset)
        if i < len(self._entries) and self._bases[i] == offset:
            pass
        elif i > 0 and self._entries[i - 1].next_offset > offset:
            i -= 1  # offset falls inside batch i-1: it goes too
        del self._entries[i:]
        del self._bases[i:]
        end = self.end_offset
        while len(self._epochs) > 1 and self._epoch_starts[-1] >= end:
            self._epochs.pop()
            self._epoch_starts.pop()
        return end

    def trim_prefix(self, offset: int, epoch: int) -> None:
        """Drop the batches below ``offset`` (a snapshot now covers them)."""
        assert self.start_offset <= offset <= self.end_offset
        i = self.index_of(offset)
        del self._entries[:i]
        del self._bases[:i]
        self.start_offset = offset
        self.start_epoch = epoch
        self._rebuild_epochs()  # cheap: snapshots and repairs across an epoch change are rare

    def _rebuild_epochs(self) -> None:
        """The epoch index from the log start's epoch and the batches."""
        self._epochs = [self.start_epoch]
        self._epoch_starts = [self.start_offset]
        for entry in self._entries:
            if entry.epoch != self._epochs[-1]:
                self._epochs.append(entry.epoch)
                self._epoch_starts.append(entry.base_offset)

    def reset(self, offset: int, epoch: int) -> None:
        """Discard everything: the log now starts (and ends) at a snapshot."""
        self._entries.clear()
        self._bases.clear()
        self.start_offset = offset
        self.start_epoch = epoch
        self._epochs = [epoch]
        self._epoch_starts = [offset]
