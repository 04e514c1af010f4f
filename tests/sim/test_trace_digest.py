"""Speed-ups of the simulator change nothing a seed does: a few plane seeds' digests (their whole
trace and figures, ``raftmeta.sim.runner.trace_digest``) are pinned.

A change that is *meant* to change what seeds do (a new fault, another draw, a controller rule)
changes these digests too: the failure message prints the new one; pin it in the same commit and
say there why the seeds moved.
"""

from __future__ import annotations

import pytest

from raftmeta.sim import FAULT_KINDS
from raftmeta.sim.runner import trace_digest

STEPS = 3000
# Seeds of the plane's soak (every fault kind allowed, the seed picks the cluster and the mix):
# 3 voters with storage faults, voter changes and flush races; 5 voters snapshotting every 20
# batches under clock skew and epoch delays; 2 voters with Figure 8 and leadership transfers.
PINNED = {
    100000: "8756cd33a270143c35ffae7f8d9f43f7a0cf2d9b22c855fb437f0423262eb07d",
    100007: "aeb5d00de8eae16b077a0e79f4efe0c08d943ee3a555f2d3a8ded6bd812134c7",
    100012: "38dbdf35fb1632cfcba5cb1187ad12e04893ae521787b53b5a7e2d32d584bf23",
}


@pytest.mark.sim
@pytest.mark.parametrize("seed", sorted(PINNED))
def test_a_plane_seed_does_what_it_did(seed: int) -> None:
    digest = trace_digest(seed, steps=STEPS, voters=None, kinds=frozenset(FAULT_KINDS), plane=True)
    assert digest == PINNED[seed], f"seed {seed} now does something else (digest {digest})"
