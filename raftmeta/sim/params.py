"""Swarm testing: the seed picks the cluster and the fault mix, not only the event order
(TigerBeetle's VOPR). Each run enables a random subset of the allowed fault kinds with random
rates, so rare combinations are tried across seeds."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from raftmeta.sim.rng import SeededRandom

# lose_state: a crashed node sometimes comes back without its quorum-state file;
# crash_after_vote: a voter crashes right after granting a vote and soon comes back;
# membership: the leader adds an observer as a voter or removes a voter (KIP-853);
# suspend: a node's machine sleeps: it handles nothing, like a pause, and its monotonic clock
# stops, so its timers are late by the suspension when it wakes (clock-based leases fail);
# storage: a node crashes and its disk is damaged while it is down (raftmeta/sim/disk_faults.py);
# clock_skew: a node's clock runs slow for a while (the leader's, often, sometimes cut off from
# its peers meanwhile while clients still reach it);
# epoch_delay: a Fetch or its answer is held until the node it is for leads a later epoch;
# figure8: Raft's Figure 8 built step by step from the run's elections (raftmeta/sim/figure8.py);
# flush_race: a leader's truncation racing the fsync of its own batch (raftmeta/sim/flush_race.py).
FAULT_KINDS = (
    "kill",
    "crash_after_vote",
    "lose_state",
    "partition",
    "pause",
    "slow_disk",
    "drop",
    "duplicate",
    "reorder",
    "transfer",
    "membership",
    "suspend",
    "storage",
    "clock_skew",
    "epoch_delay",
    "figure8",
    "flush_race",
)
# Drawn after every other parameter, so that adding them left every earlier draw of a seed as it was.
LATE_KINDS = ("membership", "suspend", "storage", "clock_skew", "epoch_delay", "figure8", "flush_race")
PARTITION_KINDS = ("symmetric", "one_way", "isolate_leader", "minority", "bridge")


@dataclass(frozen=True, slots=True)
class SimParams:
    seed: int
    voters: int
    observers: int
    faults: frozenset[str]
    drop_rate: float
    duplicate_rate: float
    latency_min_ms: int
    latency_jitter_ms: int
    fault_interval_ms: int
    downtime_max_ms: int
    disk_latency_ms: int
    slow_disk_latency_ms: int
    proposal_interval_ms: int
    records_per_proposal_max: int
    snapshot_every_batches: int
    fetch_max_bytes: int
    # On a crash, keep a random part of the unflushed tail (a disk may have written some of it).
    keep_unflushed_on_crash: bool
    # Voters left crashed in the liveness phase (always a minority).
    left_down: int
    # Kafka's defaults (1 s / 2 s) or short ones that make elections race each other.
    election_timeout_ms: int
    fetch_timeout_ms: int
    # The leader's backpressure: few batches in flight (DESIGN.md §2b); also bounds the backlog
    # a healed cluster must replicate before the liveness check can pass.
    max_uncommitted_batches: int
    # The leader's wait for records before it answers a Fetch whose only news is the watermark
    # (0: KRaft's immediate answer; the node uses a few ms).
    fetch_hw_linger_ms: int = 0
    # How often the high-watermark checkpoint is written (0: with every change); a restart
    # starts from it, so a lagging checkpoint is what the real node recovers too.
    hw_checkpoint_interval_ms: int = 0
    fault_duration_max_ms: int = 4000
    liveness_budget_ms: int = 60_000
    extra: dict[str, int] = field(default_factory=dict)


def draw_params(seed: int, *, voters: int | None, allowed_faults: frozenset[str]) -> SimParams:
    rng = SeededRandom(seed ^ 0x5EED)
    n = voters if voters is not None else rng.choice((1, 2, 3, 3, 3, 4, 5, 5))
    classic = allowed_faults - set(LATE_KINDS)
    enabled = frozenset(k for k in sorted(classic) if rng.random() < 0.6)
    if classic and not enabled:
        enabled = frozenset({rng.choice(sorted(classic))})
    reorder = "reorder" in enabled
    election_ms = rng.choice((50, 100, 300, 1000, 1000))
    latency_min = rng.randint(1, 5)
    latency_jitter = rng.randint(5, 60) if reorder else rng.randint(0, 2)
    params = SimParams(
        seed=seed,
        voters=n,
        observers=rng.choice((0, 0, 1, 2)),
        faults=enabled,
        drop_rate=rng.uniform(0.01, 0.2) if "drop" in enabled else 0.0,
        duplicate_rate=rng.uniform(0.01, 0.1) if "duplicate" in enabled else 0.0,
        latency_min_ms=latency_min,
        latency_jitter_ms=latency_jitter,
        fault_interval_ms=rng.randint(200, 3000),
        downtime_max_ms=rng.randint(200, 6000),
        disk_latency_ms=rng.randint(0, 5),
        slow_disk_latency_ms=rng.randint(30, 600),
        proposal_interval_ms=rng.randint(2, 150),
        records_per_proposal_max=rng.randint(1, 4),
        snapshot_every_batches=rng.choice((0, 0, 20, 50, 200)),
        fetch_max_bytes=rng.choice((1, 256, 4096, 1 << 20)),
        keep_unflushed_on_crash=rng.random() < 0.5,
        left_down=rng.randint(0, (n - 1) // 2) if "kill" in enabled else 0,
        election_timeout_ms=election_ms,
        # A fetch timeout must exceed a long-poll round trip, or followers give up on a live leader.
        max_uncommitted_batches=rng.choice((16, 64, 256)),
        fetch_timeout_ms=max(2 * election_ms, 6 * (latency_min + latency_jitter)),
        # Drawn last, so that adding it left every earlier draw of a seed as it was.
        fetch_hw_linger_ms=rng.choice((0, 0, 5, 20)),
        hw_checkpoint_interval_ms=rng.choice((0, 100, 1000)),
    )
    if "membership" in allowed_faults and (not classic or rng.random() < 0.5):
        # Voter changes need a node to add: at least one observer.
        params = replace(params, faults=enabled | {"membership"}, observers=max(params.observers, 1))
    if "suspend" in allowed_faults and (not classic or rng.random() < 0.4):
        params = replace(params, faults=params.faults | {"suspend"})
    if "storage" in allowed_faults and (not classic or rng.random() < 0.4):
        params = replace(params, faults=params.faults | {"storage"})
    if "clock_skew" in allowed_faults and (not classic or rng.random() < 0.5):
        params = replace(params, faults=params.faults | {"clock_skew"})
    if "epoch_delay" in allowed_faults and (not classic or rng.random() < 0.5):
        params = replace(params, faults=params.faults | {"epoch_delay"})
    if "figure8" in allowed_faults and (not classic or rng.random() < 0.5):
        params = replace(params, faults=params.faults | {"figure8"})
    if "flush_race" in allowed_faults and (not classic or rng.random() < 0.5):
        params = replace(params, faults=params.faults | {"flush_race"})
    return params
