"""Followers time out on a hung leader one after another (RaftCore._fetch_jitter), so the first
to stand wins: no split vote, no election backoff on top of the fetch timeout."""

from __future__ import annotations

from raftmeta.raft import RaftConfig

from .harness import Net

SEEDS = 30


def _next_leader_after_cutting_off(seed: int) -> tuple[int, int, int]:
    """(epochs the election took, virtual ms to the next leader, the fetch timeout)."""
    net = Net([1, 2, 3], seed=seed)
    old = net.elect()
    net.advance(300, step_ms=1)
    epoch = net.cores[old].epoch
    net.down.add(old)
    net.isolate(old)
    cut_at = net.now
    while not [n for n in net.leaders() if n != old]:
        net.advance(1, step_ms=1)
    [new] = [n for n in net.leaders() if n != old]
    return net.cores[new].epoch - epoch, net.now - cut_at, net.cores[new].config.fetch_timeout_ms


def test_a_hung_leaders_followers_do_not_split_the_vote() -> None:
    for seed in range(SEEDS):
        epochs, waited_ms, fetch_timeout_ms = _next_leader_after_cutting_off(seed)
        assert epochs == 1, f"seed {seed}: a split vote ({epochs} epochs)"
        # The fetch timeout, at most a tenth more, and a pre-vote and a vote round.
        assert waited_ms <= fetch_timeout_ms * 11 // 10 + 50, f"seed {seed}: {waited_ms} ms"


def test_the_jitter_is_at_most_a_tenth_of_the_fetch_timeout() -> None:
    net = Net([1, 2, 3])
    net.elect()
    timeout = RaftConfig(node_id=1, voters=(1,)).fetch_timeout_ms
    for core in net.cores.values():
        draws = [core._fetch_jitter() for _ in range(500)]
        assert min(draws) >= 0 and max(draws) < timeout // 10
        assert len(set(draws)) > 50, "drawn, not fixed"
