"""The ``Ready``: everything the driver must do after feeding the core, in order.

The order of the fields is the order of the driver contract (see the package docstring):
persist ``quorum_state`` -> install ``install_snapshot`` -> ``repair`` -> ``truncate_to`` -> ``append`` ->
send ``messages`` -> (``flush``: fsync soon, then ``on_log_flushed``) -> apply ``committed``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from raftmeta.raft.log import Entry
from raftmeta.raft.types import Envelope, QuorumStateData, SnapshotImage, SoftState


@dataclass(slots=True)
class Ready:
    # Sequence number of this Ready; pass the last one applied to ``on_log_flushed``.
    seq: int = 0
    # 1. Write atomically and fsync (temp file, fsync, rename, fsync dir) before anything else:
    #    the messages below may include a vote or an epoch acknowledgement that relies on it.
    quorum_state: QuorumStateData | None = None
    # 2. A snapshot fetched from the leader: write it, fsync it, replace the whole log with an
    #    empty log starting at its end offset, and reload the state machine from it.
    install_snapshot: SnapshotImage | None = None
    #    ... unless this is set: then only the log below the snapshot's end goes, the batches from
    #    there on stay (a follower fetched from a damaged batch the leader holds only in its
    #    snapshot; its own batches above the snapshot are intact copies of committed ones).
    install_keeps_log: bool = False
    # 3. Truncate the log to this offset (remove every batch at or above it).
    truncate_to: int | None = None
    # 3b. Damaged batches repaired from a peer's intact copy: overwrite each in place (same base
    #     offset, epoch and length as the damaged one, or the front of a damaged range) and fsync
    #     before going on -- the core counts a repaired batch as durable at once (docs/storage.md,
    #     "Repair from the quorum"). Before the truncation: every copy lies below it, and it may
    #     cut a damaged range right after the front repaired here.
    repair: list[Entry] = field(default_factory=list)
    # 4. Append these batches byte for byte (no fsync needed yet).
    append: list[Entry] = field(default_factory=list)
    # 5. Send. None of these depends on an unflushed log entry: the core holds such messages
    #    (a follower's next Fetch) until ``on_log_flushed`` reports the entries durable.
    messages: list[Envelope] = field(default_factory=list)
    # 6. The log has unflushed entries: fsync (group commit is fine: one fsync may cover many
    #    Readies) and report with ``on_log_flushed(now_ms, durable_end_offset, ready_seq)``.
    flush: bool = False
    # 7. Newly committed batches (below the high watermark), in offset order: apply them.
    committed: list[Entry] = field(default_factory=list)
    # Role / epoch / leader changed since the last Ready (fail pending proposals on a change).
    soft_state: SoftState | None = None
    # Linearizable reads confirmed (RaftCore.read_index): (read id, index). Answer each from a state
    # machine that has applied every committed batch below index (it may have to apply this
    # Ready's ``committed`` first). A read not listed when leadership is lost never will be.
    reads: list[tuple[int, int]] = field(default_factory=list)

    def is_empty(self) -> bool:
        return (
            self.quorum_state is None
            and self.install_snapshot is None
            and self.truncate_to is None
            and not self.repair
            and not self.append
            and not self.messages
            and not self.flush
            and not self.committed
            and self.soft_state is None
            and not self.reads
        )
