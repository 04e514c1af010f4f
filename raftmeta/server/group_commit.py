"""When and how a node makes its appends durable: group commit on the disk's writer thread, whose
results come back to the node task as :class:`~raftmeta.server.inbox.Flushed` inputs, or a
follower's small append fsynced inline on the loop thread, reported by the node in the same turn."""

from __future__ import annotations

from collections.abc import Callable

from raftmeta.raft import Ready, Role
from raftmeta.server.inbox import Flushed, Input
from raftmeta.server.seams import Disk

# A follower appends and fsyncs on its loop thread (no writer-thread hand-offs) up to this many
# bytes per Ready -- a lightly loaded quorum's single request; under load, with bigger batches,
# the writer thread's fsync overlaps the loop's replay instead (see GroupCommit.inline).
INLINE_FLUSH_MAX_BYTES = 4096


class GroupCommit:
    """At most one flush queued on the disk; Readies that want one while it runs get the next
    one, which covers all their appends (the writer runs jobs in order)."""

    def __init__(
        self,
        disk: Disk,
        put: Callable[[Input], None],
        on_failure: Callable[[BaseException], None],
        *,
        fsync: bool,
    ) -> None:
        self._disk = disk
        self._put = put  # the node's inbox
        self._on_failure = on_failure
        self._fsync = fsync  # False: the test-only unsafe_skip_fsync mode
        self._seq = 0
        self.running = False
        self._again = False

    def inline(self, ready: Ready, role: Role) -> bool:
        """Whether to append and fsync this Ready's batches on the loop thread (see
        :meth:`~raftmeta.server.seams.Disk.append_and_flush_now`): a follower's small append that
        wants a flush, with nothing queued on the disk. A leader never blocks its loop on a fsync:
        its own flush runs beside the followers' Fetch round trip, and its loop serves every client."""
        return (
            ready.flush
            and role is not Role.LEADER
            and self._fsync
            and not self.running
            and self._disk.idle
            and sum(len(e.data) for e in ready.append) <= INLINE_FLUSH_MAX_BYTES
        )

    def append_and_flush_now(self, ready: Ready, batches: list[bytes]) -> int:
        """Append and fsync ``ready``'s batches now; the durable end offset, which the caller
        reports to the core itself (``on_log_flushed``, in the same turn)."""
        return self._disk.append_and_flush_now(ready.truncate_to, batches)

    def request(self, seq: int) -> None:
        """A flush for the appends of the Ready ``seq`` and all before it."""
        self._seq = seq
        if self.running:
            self._again = True
        else:
            self._start()

    def _start(self) -> None:
        # One flush covers every append submitted before it; it is reported with the seq of the
        # last Ready whose appends it covers.
        self.running = True
        self._again = False
        seq = self._seq
        self._disk.flush(lambda durable: self._flushed(durable, seq), self._on_failure, fsync=self._fsync)

    def _flushed(self, durable_end_offset: int, seq: int) -> None:
        self.running = False
        self._put(Flushed(durable_end_offset, seq))
        if self._again:
            self._start()
