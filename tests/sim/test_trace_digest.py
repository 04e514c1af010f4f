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
# 3 voters with storage faults and voter changes; 5 voters snapshotting every 20 batches under
# clock skew and epoch delays; 2 voters with Figure 8 and leadership transfers.
PINNED = {
    100000: "70cf75609ed995e08f356d6c653d5446d37b134766aff6a500d48b81ed811ad5",
    100007: "6a815b2762deff980f206cf63979646098826bce0e7e29aff224debc8fb94575",
    100012: "9ef18d5ef4a621d6320517d161d50080fe73dd635d1795e2b4ad624a0272aa52",
}


@pytest.mark.sim
@pytest.mark.parametrize("seed", sorted(PINNED))
def test_a_plane_seed_does_what_it_did(seed: int) -> None:
    digest = trace_digest(seed, steps=STEPS, voters=None, kinds=frozenset(FAULT_KINDS), plane=True)
    assert digest == PINNED[seed], f"seed {seed} now does something else (digest {digest})"
