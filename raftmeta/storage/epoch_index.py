"""The leader-epoch index: which epoch starts at which offset (Kafka's LeaderEpochFileCache).

Pure and in memory. The log rebuilds it on open from its segments (and the snapshot it starts
after), keeps it in step with appends and truncations, and answers the consensus core's
divergence question: "where does epoch E end in your log?" (KIP-595 Fetch validation).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

UNDEFINED = -1


@dataclass(frozen=True, slots=True)
class EpochEntry:
    epoch: int
    start_offset: int


class EpochIndex:
    """Entries with strictly increasing epochs and start offsets, plus an optional floor.

    The floor is the snapshot the log starts after, ``(end_offset, epoch)``: the record just
    below ``end_offset`` had ``epoch``. It answers for epochs older than the first entry once the
    segments holding them have been deleted, and gives an empty log its last epoch.
    """

    def __init__(self) -> None:
        self._epochs: list[int] = []
        self._starts: list[int] = []
        self.floor: tuple[int, int] | None = None

    @property
    def entries(self) -> list[EpochEntry]:
        return [EpochEntry(e, s) for e, s in zip(self._epochs, self._starts, strict=True)]

    @property
    def last_epoch(self) -> int:
        """Epoch of the last record (or of the floor for an empty log); 0 for nothing at all."""
        if self._epochs:
            return self._epochs[-1]
        return self.floor[1] if self.floor is not None else 0

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that a batch of ``epoch`` starts at ``start_offset`` (a no-op within an epoch)."""
        if self._epochs and epoch == self._epochs[-1]:
            return
        if epoch < self.last_epoch:
            raise ValueError(f"epoch {epoch} after epoch {self.last_epoch}: epochs never go backwards in a log")
        if self._starts and start_offset == self._starts[-1]:
            # The previous entry holds no record: it was clamped to the log start by
            # truncate_from_start after every record of its epoch was deleted (the floor keeps it).
            self._epochs.pop()
            self._starts.pop()
        elif self._starts and start_offset < self._starts[-1]:
            raise ValueError(
                f"epoch {epoch} starts at {start_offset}, before epoch {self._epochs[-1]} at {self._starts[-1]}"
            )
        self._epochs.append(epoch)
        self._starts.append(start_offset)

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch of the record at ``offset`` (which must be in the log or just below it)."""
        i = bisect.bisect_right(self._starts, offset) - 1
        if i >= 0:
            return self._epochs[i]
        if self.floor is not None and offset < self.floor[0]:
            return self.floor[1]
        return UNDEFINED

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """``(largest known epoch <= epoch, its end offset)``; ``(-1, -1)`` when there is none.

        The end offset is the start of the next higher epoch, or the log end offset for the
        latest epoch (Kafka's LeaderEpochFileCache.endOffsetFor).
        """
        i = bisect.bisect_right(self._epochs, epoch) - 1
        if i >= 0:
            end = self._starts[i + 1] if i + 1 < len(self._starts) else log_end_offset
            return self._epochs[i], end
        if self.floor is not None and self.floor[1] <= epoch:
            return self.floor[1], self.floor[0]
        return UNDEFINED, UNDEFINED

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget epochs that start at or after ``end_offset`` (the log was truncated there)."""
        keep = bisect.bisect_left(self._starts, end_offset)
        del self._epochs[keep:]
        del self._starts[keep:]

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset``: drop epochs wholly below it, clamp the first."""
        i = bisect.bisect_right(self._starts, start_offset) - 1
        if i <= 0:
            if i == 0:
                self._starts[0] = start_offset
            return
        del self._epochs[:i]
        del self._starts[:i]
        self._starts[0] = start_offset

    def clear(self) -> None:
        self._epochs.clear()
        self._starts.clear()
