"""The leader-loss path in the whole-plane simulator (raftmeta/sim/plane.py) is the node's
(raftmeta/server/probe.py): a follower whose call to its leader fails asks the QuorumController
whether to probe (``leader_to_probe``), proves the death (a refused connect: the process is down),
and calls ``QuorumController.leader_gone``, which starts the election at once instead of after the
fetch timeout. A paused leader accepts connections and proves nothing: the fetch timeout judges it."""

from __future__ import annotations

from dataclasses import replace

from raftmeta.raft import Role
from raftmeta.sim import draw_params
from raftmeta.sim.cluster import PROPOSE, SimNode
from raftmeta.sim.plane import PlaneSimulation

FAULTLESS: frozenset[str] = frozenset()
# Long timeouts, so that an election before the fetch timeout can only be the leader-loss path's.
ELECTION_TIMEOUT_MS = 1_000
FETCH_TIMEOUT_MS = 2_000
SETTLE_MS = 500  # after the controller is active: the followers fetch from it, clients work


def steady_plane(seed: int) -> tuple[PlaneSimulation, SimNode]:
    """A faultless 3-voter plane whose controller is active and has served a while: the plane
    and its leader's node."""
    params = replace(
        draw_params(seed, voters=3, allowed_faults=FAULTLESS),
        election_timeout_ms=ELECTION_TIMEOUT_MS,
        fetch_timeout_ms=FETCH_TIMEOUT_MS,
    )
    sim = PlaneSimulation(params)
    for node in sim.nodes.values():
        sim._start(node)
    sim._push(1, PROPOSE, None)
    sim._loop(1_000_000, stop=lambda: bool(sim.activated_ms))
    assert sim.activated_ms, "no controller became active"
    sim._loop(1_000_000, until_ms=sim.now + SETTLE_MS)
    leaders = [n for n in sim.nodes.values() if n.core is not None and n.core.role is Role.LEADER]
    assert len(leaders) == 1, sim._leader_summary()
    return sim, leaders[0]


def new_leader(sim: PlaneSimulation, old: SimNode) -> SimNode | None:
    for node in sim.nodes.values():
        if node is not old and node.core is not None and node.core.role is Role.LEADER:
            return node
    return None


def test_a_dead_leaders_followers_elect_a_successor_before_the_fetch_timeout() -> None:
    sim, leader = steady_plane(7)
    crashed_at = sim.now
    sim._crash(leader)
    sim._loop(1_000_000, until_ms=crashed_at + FETCH_TIMEOUT_MS, stop=lambda: new_leader(sim, leader) is not None)
    successor = new_leader(sim, leader)
    assert successor is not None, f"no successor within the fetch timeout: {sim._leader_summary()}"
    assert sim.now - crashed_at < FETCH_TIMEOUT_MS
    # Both followers proved the death and took the QuorumController's path.
    assert sim.checker.checks.get("leader-gone") == 2, sim.checker.checks
    assert not sim.probing


def test_a_paused_leader_proves_nothing_and_waits_for_the_fetch_timeout() -> None:
    sim, leader = steady_plane(7)
    paused_at = sim.now
    leader.paused_until = paused_at + 2 * FETCH_TIMEOUT_MS
    sim._loop(1_000_000, until_ms=paused_at + FETCH_TIMEOUT_MS - 1)
    assert new_leader(sim, leader) is None, "a paused leader was replaced before the fetch timeout"
    assert "leader-gone" not in sim.checker.checks
    sim._loop(1_000_000, until_ms=leader.paused_until, stop=lambda: new_leader(sim, leader) is not None)
    assert new_leader(sim, leader) is not None, f"no successor after the fetch timeout: {sim._leader_summary()}"
    assert "leader-gone" not in sim.checker.checks


def test_a_failed_call_to_a_peer_that_is_not_our_leader_is_not_probed() -> None:
    sim, leader = steady_plane(7)
    follower = next(n for n in sim.nodes.values() if n is not leader and n.core is not None)
    other = next(n for n in sim.nodes.values() if n not in (leader, follower))
    sim._call_failed(follower, other.node_id)
    assert not sim.probing
    sim._call_failed(follower, leader.node_id)
    assert sim.probing == {(follower.node_id, leader.node_id)}
