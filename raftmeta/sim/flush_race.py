"""The ``flush_race`` fault: a truncation racing an fsync, built on purpose.

A follower never truncates with an fsync of its own in flight: it sends its next Fetch, whose
answer could make it truncate, only once its last append is durable (``RaftCore._maybe_send_fetch``).
The truncation that can race a flush is a leader's: elected with a damaged batch no other voter
holds, it drops that batch and everything after it and resigns (the repair round of
``raftmeta.raft.repair``) -- while the fsync of the LeaderChange batch it has just appended still
runs. That fsync's report then covers nothing at or past the truncation point
(``RaftCore.on_log_flushed``), though by the time it completes the next leader's batches may fill
those offsets again, unflushed. Left to the storage faults the sequence is rare; this director
builds it from the run's state, one step at a time:

1. ``tail``: the leader L is cut off from its peers; clients still reach it, so it appends a tail
   nobody else holds.
2. Once two batches of that tail are durable on L's disk, L crashes, the older one's write is
   lost (its bytes read back as zeros: ``disk_faults.lose_write``), its disk turns slow and it
   restarts at once; only the links to L come back (``reelect``). The others cannot elect each
   other without L's vote, which its longer log withholds, so L wins the next epoch.
3. ``race``: elected, L appends its LeaderChange batch (a slow fsync) and asks the others for the
   damaged batch; none holds it, so L truncates and resigns while that fsync runs. The scenario
   ends there (``flush_race_in_flight``, or ``flush_race_after_flush`` if the fsync had already
   completed): every link comes back, the others elect the next leader, and L fetches its batches
   over the truncated offsets before the slow fsync reports.

A phase that waits longer than its budget ends the scenario (``flush_race_stopped_<phase>``), as
does the heal. Meanwhile the run's other injected faults wait, as for a Figure 8.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from raftmeta.raft import Role

if TYPE_CHECKING:
    from raftmeta.sim.cluster import SimNode, Simulation

# Batches of the cut-off leader's tail that must be durable before it crashes: the damaged one and
# a later one (the last durable batch is never damaged: recovery would take it for a torn write).
TAIL_BATCHES = 2


@dataclass(slots=True)
class FlushRace:
    """One scenario under way."""

    generation: int
    leader: int
    epoch: int
    # L's log end when it was cut off: its batches from here on are held by nobody else.
    tail_start: int
    phase: str = "tail"
    timed_phase: str = ""
    # Partition ids this scenario holds open.
    cut: dict[str, int] = field(default_factory=dict)
    damaged_offset: int = -1


def phase_budget_ms(sim: Simulation) -> int:
    """As a Figure 8's step: a fetch timeout for the others to notice, a few election rounds."""
    params = sim.params
    return 2 * params.fetch_timeout_ms + 6 * params.election_timeout_ms + 200


def start(sim: Simulation, generation: int) -> FlushRace | None:
    """Step 1: cut the newest leader off. None without a leader among two voters or more."""
    leaders = [
        n for n in sim.nodes.values() if n.core is not None and n.core.role is Role.LEADER and not n.blocked(sim.now)
    ]
    if not leaders:
        return None
    node = max(leaders, key=lambda n: n.core.epoch if n.core else -1)
    core = node.core
    assert core is not None
    if len(core.voters) < 2 or node.node_id not in core.voters:
        return None
    scenario = FlushRace(generation, node.node_id, core.epoch, core.log.end_offset)
    scenario.cut["leader"] = sim.cut_off({node.node_id})
    sim.trace_line(f"flush_race: n{node.node_id} of epoch {core.epoch} cut off at {core.log.end_offset}")
    return scenario


def on_flushed(sim: Simulation, scenario: FlushRace, node: SimNode) -> bool:
    """An fsync of ``node`` completed. Step 2 once L's tail has two durable batches. Returns
    whether the scenario is over (L is no longer the leader that appended the tail)."""
    if scenario.phase != "tail" or node.node_id != scenario.leader:
        return False
    core = node.core
    if core is None or core.role is not Role.LEADER or core.epoch != scenario.epoch:
        sim.trace_line(f"flush_race: n{node.node_id} lost its leadership before its tail was durable")
        return True
    tail = [e for e in node.disk.durable if e.base_offset >= scenario.tail_start]
    if len(tail) < TAIL_BATCHES:
        return False
    victim = tail[0]
    if not sim.crash_with_lost_write(node, victim.base_offset):
        # The crash found that batch already inside a damaged range (a storage fault of the run
        # merged it with its neighbours): its write is lost already, and no race follows.
        sim.trace_line(f"flush_race: n{node.node_id}'s batch at {victim.base_offset} was already damaged")
        return True
    scenario.damaged_offset = victim.base_offset
    sim.reconnect(scenario.cut.pop("leader"))
    others = {v for v in core.voters if v != node.node_id}
    scenario.cut["others"] = sim.separate(others)
    scenario.phase = "reelect"
    sim.trace_line(
        f"flush_race: n{node.node_id} crashed with its write at {victim.base_offset} lost; restarting with a "
        f"slow disk, the others cut from each other"
    )
    return False


def on_leader(sim: Simulation, scenario: FlushRace, node_id: int, epoch: int) -> bool:
    """A node became leader. Returns whether the scenario is over (another node won)."""
    if scenario.phase != "reelect" or epoch <= scenario.epoch:
        return False
    if node_id != scenario.leader:
        sim.trace_line(f"flush_race: n{node_id} won epoch {epoch}, not n{scenario.leader}")
        return True
    scenario.phase = "race"
    sim.trace_line(f"flush_race: n{node_id} leads epoch {epoch} with its batch at {scenario.damaged_offset} damaged")
    return False


def on_truncate(scenario: FlushRace, node: SimNode) -> str | None:
    """``node`` truncates its log: in the ``race`` phase, L's truncation ends the scenario. Returns
    the fault count's name then (whether an fsync was in flight), else None."""
    if scenario.phase != "race" or node.node_id != scenario.leader:
        return None
    return "flush_race_in_flight" if node.flush_pending else "flush_race_after_flush"


def finish(sim: Simulation, scenario: FlushRace) -> None:
    """Every partition the scenario holds heals."""
    for partition in scenario.cut.values():
        sim.reconnect(partition)
    scenario.cut.clear()
