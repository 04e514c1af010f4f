"""The ``figure8`` fault: Raft's Figure 8 built on purpose (Ongaro and Ousterhout, section 5.4.2).

Left to random crashes and partitions the sequence is rare (a switch that commits an older
epoch's entry by counting replicas was first caught at seed 190 of the all-faults mix). This
director builds it from the state of the run, one step at a time, reacting to elections as they
happen, with dropping partitions standing for deaths (a cut-off node keeps its log, as a node
restarted from a durable log does):

1. ``old_tail``: the leader L1 of epoch e is cut off, with a minority of the voters short of one
   at most; clients still reach it, so it appends a tail that only that minority holds.
2. The others elect L2 in e+1. It is cut off in the same step, before its BeginQuorumEpoch
   leaves: it holds a LeaderChange batch of e+1 over the offsets of L1's tail and nobody else does.
   L1's side joins the rest again (``old_returns``).
3. A holder of L1's tail (L1, most often) wins e+2 and replicates the tail (``replicate``). When
   Fetches of e+2 tell it that a majority holds the tail -- and not necessarily its own
   LeaderChange of e+2 -- it is cut off and L2 returns (``overwrite``): L2's log (last epoch e+1)
   beats the tail's holders (last epoch e), so it can win e+3 and overwrite the tail.

A correct leader commits nothing of the tail by count alone (KRaft advances the high watermark
only once a batch of the leader's own epoch is on a majority), so the overwrite is legal; a
leader that commits it breaks leader completeness when L2 wins. The scenario ends when L2's turn
is over, when a phase waits longer than its budget, or at the heal; meanwhile the run's other
injected faults wait (they would spoil the sequence), while the network's own faults go on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from raftmeta.raft import Role

if TYPE_CHECKING:
    from raftmeta.sim.cluster import Simulation

# The share of fault events that start a Figure 8 when the seed enables the kind (when one is
# not already under way): its own weight, above the even share of the other injected kinds,
# because one scenario needs several elections to go its way.
FIGURE8_WEIGHT = 0.5


@dataclass(slots=True)
class Figure8:
    """One scenario under way: the nodes of each step and the partitions that stand for deaths."""

    generation: int
    old_leader: int
    old_epoch: int
    phase: str = "old_tail"
    # The phase whose budget timer is queued (the simulation arms one per phase).
    timed_phase: str = ""
    # Partition ids this scenario holds open (cut-off nodes), by role.
    cut: dict[str, int] = field(default_factory=dict)
    second_leader: int = -1
    second_epoch: int = -1
    # Where L2's LeaderChange batch sits: L1's tail covers it.
    second_start: int = -1
    returning_leader: int = -1
    returning_epoch: int = -1
    # The end of the old tail in the returning leader's log: its own LeaderChange batch starts here.
    tail_end: int = -1
    acknowledged: set[int] = field(default_factory=set)


def phase_budget_ms(sim: Simulation) -> int:
    """How long a step may wait for its election before the scenario is abandoned: a fetch timeout
    for the followers to notice, and a few election rounds with their back-off."""
    params = sim.params
    return 2 * params.fetch_timeout_ms + 6 * params.election_timeout_ms + 200


def start(sim: Simulation, generation: int) -> Figure8 | None:
    """Step 1: cut the newest leader off with a minority short of one. None if there is no leader
    of three voters or more to start from."""
    leaders = [
        n for n in sim.nodes.values() if n.core is not None and n.core.role is Role.LEADER and not n.blocked(sim.now)
    ]
    if not leaders:
        return None
    node = max(leaders, key=lambda n: n.core.epoch if n.core else -1)
    core = node.core
    assert core is not None
    voters = list(core.voters)
    if len(voters) < 3 or node.node_id not in voters:
        return None
    others = [v for v in voters if v != node.node_id]
    partners = sim.rng.sample(others, (len(voters) - 1) // 2 - 1)
    scenario = Figure8(generation, node.node_id, core.epoch)
    scenario.cut["old"] = sim.cut_off({node.node_id, *partners})
    sim.trace_line(f"figure8: n{node.node_id} of epoch {core.epoch} cut off with {sorted(partners)}")
    return scenario


def on_leader(sim: Simulation, scenario: Figure8, node_id: int, epoch: int) -> bool:
    """A node became leader (before the messages of its first Ready leave). Returns whether the
    scenario is over."""
    if scenario.phase == "old_tail":
        if epoch <= scenario.old_epoch or node_id == scenario.old_leader:
            return False
        core = sim.nodes[node_id].core
        assert core is not None
        change = core.log.entry_before(core.log.end_offset)
        assert change is not None and change.epoch == epoch, "a new leader's first batch is its LeaderChange"
        scenario.second_leader, scenario.second_epoch, scenario.second_start = node_id, epoch, change.base_offset
        scenario.cut["second"] = sim.cut_off({node_id})
        sim.reconnect(scenario.cut.pop("old"))
        scenario.phase = "old_returns"
        sim.trace_line(f"figure8: n{node_id} of epoch {epoch} cut off at its election; the old side returns")
        return False
    if scenario.phase == "old_returns":
        if epoch <= scenario.second_epoch:
            return False
        core = sim.nodes[node_id].core
        assert core is not None
        change = core.log.entry_before(core.log.end_offset)
        assert change is not None and change.epoch == epoch
        tail = core.log.entry_before(change.base_offset) if change.base_offset > core.log.start_offset else None
        if tail is None or tail.epoch >= scenario.second_epoch or tail.next_offset <= scenario.second_start:
            sim.trace_line(f"figure8: n{node_id} of epoch {epoch} holds no older tail over n{scenario.second_leader}'s")
            return True
        scenario.returning_leader, scenario.returning_epoch = node_id, epoch
        scenario.tail_end = change.base_offset
        scenario.phase = "replicate"
        sim.trace_line(f"figure8: n{node_id} of epoch {epoch} replicates the tail ending at {change.base_offset}")
        return False
    if scenario.phase == "overwrite":
        return epoch > scenario.returning_epoch
    return False


def on_fetch(sim: Simulation, scenario: Figure8, leader_id: int, replica_id: int, epoch: int, offset: int) -> None:
    """The returning leader handled a Fetch: once its Fetches of its epoch show the tail on a
    majority, it is cut off and L2 returns."""
    if (
        scenario.phase != "replicate"
        or leader_id != scenario.returning_leader
        or epoch != scenario.returning_epoch
        or offset < scenario.tail_end
    ):
        return
    core = sim.nodes[leader_id].core
    if core is None or replica_id not in core.voters:
        return
    scenario.acknowledged.add(replica_id)
    if 1 + len(scenario.acknowledged) < len(core.voters) // 2 + 1:
        return
    scenario.cut["returning"] = sim.cut_off({leader_id})
    sim.reconnect(scenario.cut.pop("second"))
    scenario.phase = "overwrite"
    sim.trace_line(f"figure8: the tail is on a majority {sorted(scenario.acknowledged)}: n{leader_id} cut off")


def finish(sim: Simulation, scenario: Figure8) -> str:
    """The scenario ends: every partition it holds heals. Returns the fault count's name."""
    for partition in scenario.cut.values():
        sim.reconnect(partition)
    scenario.cut.clear()
    return "figure8_overwrite" if scenario.phase == "overwrite" else f"figure8_stopped_{scenario.phase}"
