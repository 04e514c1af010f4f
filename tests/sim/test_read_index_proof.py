"""The simulator's read-index proof rule (raftmeta.sim.cluster.read_proven), case by case: each
voter set the leader had while the read waited is judged on its own terms."""

from __future__ import annotations

from raftmeta.sim.cluster import read_proven

FIVE = (1, 2, 3, 4, 5)


def test_a_read_confirmed_before_the_leader_appended_its_own_removal_is_proven() -> None:
    """Seed 140280: leader 5 confirmed a read by its own echo and those of 2 and 3 (3 of 5), then
    appended its own removal in the same drive. The set of 4 without it alone would need 3 echoes;
    the set of 5 it waited under holds the proof (a majority of it meets every majority of the
    next set, one change at a time)."""
    assert read_proven(5, (FIVE, (1, 2, 3, 4)), {2, 3})
    assert not read_proven(5, ((1, 2, 3, 4),), {2, 3})


def test_a_leader_that_removed_itself_does_not_vouch_for_itself() -> None:
    """Seed 100942: of voters {1, 2}, leader 2 waited under {1} only (its removal in force) and no
    voter echoed: its own count proves nothing."""
    assert not read_proven(2, ((1,),), set())
    assert read_proven(2, ((1,),), {1})


def test_an_echo_counts_only_toward_a_set_its_sender_is_in() -> None:
    """Leader 1 of {1, 2, 3, 4} removes 4: an echo from 4 and its own make 2, a majority of the new
    set {1, 2, 3} only if 4 were in it -- {2, 3} alone could have elected another leader."""
    assert not read_proven(1, ((1, 2, 3, 4), (1, 2, 3)), {4})
    assert read_proven(1, ((1, 2, 3, 4), (1, 2, 3)), {2})


def test_a_single_voter_leader_is_its_own_majority_before_a_voter_is_added() -> None:
    """Seed 100494: a single voter released a read by its own count, then added a voter."""
    assert read_proven(1, ((1,), (1, 2)), set())
    assert not read_proven(1, ((1, 2),), set())
