"""The perform policy: in which order a driver carries out one :class:`~raftmeta.raft.ready.Ready`.

The driver contract (this package's docstring) fixes what must precede what; within it a driver
has three freedoms, and this module is the one place that uses them, for the node
(raftmeta/server/node.py) and the simulator (raftmeta/sim) alike:

- **Answer first.** A leader with few requests waiting (``ANSWER_FIRST_MAX_WAITING``) applies the
  committed batches -- releasing its clients' answers -- before it sends the Fetch answers of the
  same Ready, which only carry the new high watermark. Busier, it feeds its followers first: their
  next round is what the waiting requests need.
- **Inline flush.** A follower whose append is small may fsync it on its own task and report it at
  once (``on_log_flushed`` in the same turn), so that its next Fetch -- which claims the new
  durable offset -- leaves now. Whether the disk allows that is the driver's to say.
- **Replay after the Fetch.** A follower that flushed inline defers replaying the committed
  batches until its Fetch has left: the leader waits for the Fetch, not for the replay.

:func:`plan` is pure; each driver performs the steps it returns, in order, with its own IO.
"""

from __future__ import annotations

import enum

from raftmeta.raft.ready import Ready

# A leader with at most this many requests waiting for a commit answers them before it sends the
# watermark-only Fetch answers of the same Ready (latency); busier, it feeds its followers first.
ANSWER_FIRST_MAX_WAITING = 4


class Step(enum.Enum):
    # Write the quorum state atomically and fsync it: nothing below happens before it is durable.
    PERSIST_QUORUM_STATE = "persist quorum state"
    # Role, epoch or leader changed: rebind logs, wake whoever waits for a leader.
    ANNOUNCE_ROLE = "announce role"
    # Write and fsync the fetched snapshot, reload the state machine, ``on_snapshot_installed``.
    INSTALL_SNAPSHOT = "install snapshot"
    # Overwrite each damaged batch with a peer's intact copy and fsync, then truncate, before the
    # rest (the core counts a repaired batch as durable at once; the copies lie below the
    # truncation, which may cut a damaged range right after its repaired front).
    REPAIR_LOG = "repair log"
    # Truncate (unless REPAIR_LOG did) and append the log; its fsync is asked for by REQUEST_FLUSH.
    WRITE_LOG = "write log"
    # Truncate and append, and fsync now on the driver's task (reported by REPORT_FLUSH).
    WRITE_AND_FLUSH_LOG = "write and flush log"
    # Apply the committed batches to the state machine and release the answers they complete.
    APPLY_COMMITTED = "apply committed"
    # Send the messages (requests to peers, answers to their requests).
    SEND = "send"
    # Ask for a (group-commit) fsync; its completion is reported with ``on_log_flushed``.
    REQUEST_FLUSH = "request flush"
    # Hold the committed batches for a replay once the Fetch just sent has left.
    DEFER_COMMITTED = "defer committed"
    # Report the inline fsync (``on_log_flushed``) and perform the Ready that follows at once.
    REPORT_FLUSH = "report flush"


def plan(ready: Ready, *, leader: bool, waiting: int, inline_flush_allowed: bool) -> tuple[Step, ...]:
    """The steps that perform ``ready``, in order.

    ``leader``: this node leads; ``waiting``: requests waiting for a commit answer;
    ``inline_flush_allowed``: the driver's disk could fsync this Ready's append on the task now
    (a small append, nothing queued on the disk). A leader never flushes inline: its own fsync
    runs beside the followers' Fetch round trip, and its task serves every client."""
    writes = (ready.truncate_to is not None and not ready.repair) or bool(ready.append)
    inline = inline_flush_allowed and writes and ready.flush and not leader
    steps: list[Step] = []
    if ready.quorum_state is not None:
        steps.append(Step.PERSIST_QUORUM_STATE)
    if ready.soft_state is not None:
        steps.append(Step.ANNOUNCE_ROLE)
    if ready.install_snapshot is not None:
        steps.append(Step.INSTALL_SNAPSHOT)
    if ready.repair:
        steps.append(Step.REPAIR_LOG)
    if writes:
        steps.append(Step.WRITE_AND_FLUSH_LOG if inline else Step.WRITE_LOG)
    answer_first = bool(ready.committed) and leader and waiting <= ANSWER_FIRST_MAX_WAITING
    if answer_first:
        steps.append(Step.APPLY_COMMITTED)
    # Always: a voter set that came into force (even with nothing to send) is learned here.
    steps.append(Step.SEND)
    if ready.flush and not inline:
        steps.append(Step.REQUEST_FLUSH)
    if ready.committed and not answer_first:
        steps.append(Step.DEFER_COMMITTED if inline else Step.APPLY_COMMITTED)
    if inline:
        steps.append(Step.REPORT_FLUSH)
    return tuple(steps)
