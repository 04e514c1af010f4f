"""Pure KRaft-style consensus (KIP-595 Raft with pull replication, KIP-996 pre-vote, KIP-630
snapshots): no sockets, disk, clock, threads or hidden randomness. See docs/consensus.md.

How the core sees the log
-------------------------
The core keeps an in-memory view of the log (:class:`~raftmeta.raft.log.LogView`): the
batches above the oldest retained snapshot (base offset, epoch, next offset, exact bytes) and
an epoch index. It answers Fetches from it, validates fetch offsets against it and tells the driver
what to write; the driver's segment log is the durable copy of the same batches. We chose this
over etcd's injected Storage because the driver's writer thread appends asynchronously (the
core would otherwise read a log that lags its own decisions), because Fetch answers are then
a slice of memory, and because the metadata log above a snapshot is small. On start the driver
passes what it recovered (quorum state, batches above the snapshot, snapshot, HW checkpoint).

The driver contract (persist -> fsync -> send -> apply -> advance)
-------------------------------------------------------------------
One task owns a :class:`RaftCore`. On every input -- ``step(now_ms, envelope)``,
``propose(now_ms, records)``, ``on_log_flushed(...)``, ``on_snapshot_created(...)``,
``on_snapshot_installed(...)``,
``transfer_leadership``/``resign``, or a timer -- it calls ``deadline = core.poll(now_ms)``
and ``ready = core.take_ready()``, then performs the Ready in this order:

1. ``quorum_state``: write it atomically and fsync (temp file, fsync, rename, fsync dir)
   before anything below -- the messages may carry a vote or an epoch that relies on it.
2. ``install_snapshot``: write and fsync the snapshot, replace the log by an empty log that
   starts at its end offset, reload the state machine from it, then call
   ``on_snapshot_installed(now_ms, image)`` (the fetch timer restarts after the load).
3. ``truncate_to`` then ``append``: write the batches byte for byte (no fsync needed yet).
4. ``messages``: send each envelope to ``destination``. A response carries the correlation id
   of its request: complete the pending RPC with that id. A request of ours gets a fresh id;
   step its response back in with the same id. Drop failed requests silently (the core
   retries by itself). No message depends on unflushed log data: the core holds those (a
   follower's next Fetch, whose fetch offset claims durability) until step 5 reports.
5. ``flush``: fsync the log (group commit: one fsync may cover many Readies), then call
   ``on_log_flushed(now_ms, durable_end_offset, ready.seq)`` with the seq of the last Ready
   whose writes the fsync covered. The leader counts itself toward the high watermark only
   through this report.
6. ``committed``: apply these batches to the state machine, in order; release the client
   responses of proposals whose (base offset, epoch) is committed. ``soft_state`` tells when
   the role or leader changed (fail pending proposals on leadership loss).
7. Advance: sleep until ``deadline`` or the next input, whichever comes first.

A Ready must be fully performed before the next one (the sequence numbers say which is which).

What may run in parallel, what may be reordered
-----------------------------------------------
The order above is the safe default. A driver may depart from it only as follows (etcd's raft
doc.go grants the same freedoms), and raftmeta's drivers -- the node and the simulator -- take
them through one policy, :func:`raftmeta.raft.perform.plan`:

- Steps 4 and 5 may overlap: sending need not wait for the fsync, since no message depends on
  unflushed log data. The fsync runs beside the sends (the writer thread, group commit) and is
  reported later with ``on_log_flushed``; the leader counts itself toward the high watermark
  only through that report.
- Step 6 may come before step 4 ("answer first"): committed batches are durable on a majority
  already, so applying them -- and answering the clients they complete -- does not wait for this
  Ready's sends. The node does so while a leader has few requests waiting (their answers are its
  latency); under load its followers' next round comes first.
- Step 6 may be deferred past step 4 and the Readies that follow ("replay after the Fetch"): a
  follower that fsyncs inline reports the flush at once and sends the Fetch it releases before it
  replays, since the leader waits for the Fetch, not the replay. A role change or a snapshot
  install applies deferred batches first, and a read is answered only from a state machine that
  holds its index.
- Role changes (``soft_state``) are announced after step 1 and before the rest: the logs of the
  Ready carry the new epoch, and waiters learn of the leader once the vote behind it is durable.
- Steps 1, 2 and the truncation of step 3 never move: every later step relies on them.
"""

from placement.rng import RandomSource
from raftmeta.raft.config import Faults, RaftConfig
from raftmeta.raft.core import RaftCore
from raftmeta.raft.log import Entry, LogView, Validation, ValidationResult
from raftmeta.raft.ready import Ready
from raftmeta.raft.state import ReplicaProgress
from raftmeta.raft.types import (
    NO_LEADER,
    NO_VOTE,
    VOTE_FENCED,
    VOTE_UNKNOWN,
    CommittedTruncationError,
    Envelope,
    NotLeaderError,
    ProposalLimitError,
    QuorumStateData,
    Role,
    SnapshotImage,
    SoftState,
    UnrecoverableStateError,
    UnrepairableEntryError,
)

__all__ = [
    "NO_LEADER",
    "NO_VOTE",
    "VOTE_FENCED",
    "VOTE_UNKNOWN",
    "CommittedTruncationError",
    "Entry",
    "Envelope",
    "Faults",
    "LogView",
    "NotLeaderError",
    "ProposalLimitError",
    "QuorumStateData",
    "RaftConfig",
    "RaftCore",
    "RandomSource",
    "Ready",
    "ReplicaProgress",
    "Role",
    "SnapshotImage",
    "SoftState",
    "UnrecoverableStateError",
    "UnrepairableEntryError",
    "Validation",
    "ValidationResult",
]
