"""A batch's append timestamp is the leader's wall clock (docs/log-format.md), not the driver's
monotonic clock that timers run on: the driver passes the difference once (wall_clock_offset_ms)."""

from __future__ import annotations

from raftmeta.raft import RaftConfig, RaftCore, Role
from raftmeta.records.codec import decode_header

from .harness import SeededSource

WALL_MS = 1_764_000_000_000  # 2025-11-24, an instant on the Unix epoch's scale


def test_leader_change_and_proposals_carry_wall_clock_time() -> None:
    monotonic_ms = 5_000
    config = RaftConfig(node_id=1, voters=(1,), cluster_id="t", wall_clock_offset_ms=WALL_MS - monotonic_ms)
    core = RaftCore(config, SeededSource(1), monotonic_ms)
    core.poll(monotonic_ms + 3_000)
    assert core.role is Role.LEADER
    entry = core.propose(monotonic_ms + 3_500, [b"record"])
    [leader_change, proposal] = core.take_ready().append
    assert decode_header(leader_change.data).append_timestamp_ms == WALL_MS + 3_000
    assert decode_header(proposal.data).append_timestamp_ms == WALL_MS + 3_500
    assert proposal == entry
