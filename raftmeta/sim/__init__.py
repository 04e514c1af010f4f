"""Deterministic simulation of a raftmeta quorum (VOPR / RaftEventSimulationTest style).

Many :class:`raftmeta.raft.RaftCore` instances run in one process against a virtual clock,
a seeded network and simulated disks; every parameter and fault is drawn from one seed, so a
failing seed replays exactly (``raftmeta sim --seed S --trace``). See docs/consensus.md.
"""

from raftmeta.sim.checker import Checker, InvariantViolation
from raftmeta.sim.cluster import RunResult, Simulation
from raftmeta.sim.params import FAULT_KINDS, SimParams, draw_params
from raftmeta.sim.runner import BUGS, Summary, parse_faults, repro_command, run_one, run_seeds

__all__ = [
    "BUGS",
    "FAULT_KINDS",
    "Checker",
    "InvariantViolation",
    "RunResult",
    "SimParams",
    "Simulation",
    "Summary",
    "draw_params",
    "parse_faults",
    "repro_command",
    "run_one",
    "run_seeds",
]
