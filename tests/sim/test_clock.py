"""A simulated node's clock (raftmeta.sim.cluster.SimNode): suspensions stop it, clock_skew slows
it, and the simulator wakes the node when its own clock reaches a deadline."""

from __future__ import annotations

from raftmeta.sim.cluster import SimNode
from raftmeta.sim.disk import SimDisk


def test_a_skewed_clock_runs_slow_from_the_moment_it_is_skewed_and_never_jumps() -> None:
    node = SimNode(1, SimDisk())
    assert node.clock(1_000) == 1_000
    node.set_clock_rate(1_000, 500)
    assert node.clock(1_000) == 1_000
    assert node.clock(3_000) == 2_000
    node.set_clock_rate(3_000, 1000)
    assert node.clock(3_000) == 2_000
    assert node.clock(4_000) == 3_000


def test_a_deadline_on_a_slow_clock_is_reached_later_in_simulated_time() -> None:
    node = SimNode(1, SimDisk())
    node.set_clock_rate(0, 250)
    at = node.simulated_time_of(0, 1_000)  # the node's clock reads 1,000 after 4,000 simulated ms
    assert at == 4_000
    assert node.clock(at) >= 1_000 > node.clock(at - 1)
    # A deadline already passed is due now, as with an unskewed clock (never in the past).
    assert node.simulated_time_of(8_000, 1_000) == 8_000


def test_a_suspension_stops_a_skewed_clock_too() -> None:
    node = SimNode(1, SimDisk())
    node.set_clock_rate(0, 500)
    node.suspend(1_000, 3_000)
    assert node.clock(2_000) == 500
    assert node.clock(3_000) == 500
    assert node.clock(5_000) == 1_500


def test_the_clock_is_marked_skewed_while_and_since_it_ran_at_another_rate() -> None:
    node = SimNode(1, SimDisk())
    node.set_clock_rate(100, 1000)
    assert node.skewed_until < 0, "1.0 is no skew"
    node.set_clock_rate(200, 700)
    assert node.skewed_until > 10**9
    node.set_clock_rate(900, 1000)
    assert node.skewed_until == 900


def test_a_deadline_already_passed_is_due_now_never_in_the_past() -> None:
    """A timer armed for a deadline the node's clock has passed fires now. Before, it was queued
    in the past and the simulation's time ran back: a client call answered before it was invoked
    (``raftmeta sim --plane --faults all --seed 1045`` before the figure8 kind: HistoryError,
    complete 42860 before invoke 42938)."""
    for permille in (1000, 500):
        node = SimNode(1, SimDisk())
        node.set_clock_rate(0, permille)
        now = 10_000
        passed = node.clock(now) - 300
        assert node.simulated_time_of(now, passed) == now
        assert node.simulated_time_of(now, node.clock(now)) == now
