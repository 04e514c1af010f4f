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
    100000: "b51e8ab82c5a34e4ac82c447cb7bdc4ba4c2e7addb8a48580868ff3c9eb6c019",
    100007: "87f0269431ba75f16c08368703ba251e909e5990a155cb61e0b0824f3900a8be",
    100012: "aaaaac1fdded212e4e901c45c63692267c3b5514621b558b7dac4362b771a0ab",
}


@pytest.mark.sim
@pytest.mark.parametrize("seed", sorted(PINNED))
def test_a_plane_seed_does_what_it_did(seed: int) -> None:
    digest = trace_digest(seed, steps=STEPS, voters=None, kinds=frozenset(FAULT_KINDS), plane=True)
    assert digest == PINNED[seed], f"seed {seed} now does something else (digest {digest})"
