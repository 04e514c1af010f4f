"""Run many seeds and sum them up (the engine of ``raftmeta sim`` and of the sim tests)."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from raftmeta.raft import Faults
from raftmeta.sim.cluster import DRIVER_BUGS, RunResult, Simulation
from raftmeta.sim.params import FAULT_KINDS, draw_params
from raftmeta.sim.rule_bugs import RULE_BUGS

# Each planted bug breaks one rule; the simulator must catch every one (tests/sim). The core's
# are raftmeta.raft.Faults switches, the others the simulated driver's (DRIVER_BUGS).
CORE_BUGS = (
    "ack_unpersisted",
    "double_vote",
    "hw_from_old_epoch",
    "commit_old_epoch_by_count",
    "vote_not_persisted",
    "forget_vote_on_restart",
    "voter_change_while_pending",
    "hw_from_committed_voters",
    # Storage faults (docs/storage.md, "Repair from the quorum"): repair from a damaged copy, count
    # a damaged batch toward the high watermark, vote again at once after losing the quorum-state.
    "repair_unchecked",
    "count_damaged_toward_hw",
    "vote_without_fence",
    # Behind the vote fence, acknowledge the leader's batches (caught through the figure8 fault).
    "ack_behind_fence",
    # A flush report covering writes a later truncation removed (caught through the flush_race fault).
    "flush_covers_later_truncation",
)
# Bugs of the whole plane (raftmeta.sim.plane): the controller answers a write when it proposes
# it; partition leaders never ask for a caught-up follower back (the ISR never regrows); the
# controller never moves leadership back to preferred replicas; a node elected again keeps the
# broker heartbeat times of its earlier leadership (and fences brokers that heartbeated elsewhere);
# a partition change is written without a new partition epoch. Then one mutation of the
# controller's rules per rule of the oracle (raftmeta.sim.rule_bugs).
PLANE_BUGS = (
    "ack_before_commit",
    "no_isr_expansion",
    "no_auto_rebalance",
    "stale_broker_sessions",
    "stale_partition_epoch",
    *RULE_BUGS,
)
# Core switches only the whole plane can see: it alone issues linearizable reads (a read served
# without the read-index round; a Fetch of an older epoch accepted, whose stale barrier echo then
# confirms a read). The read-index proof (raftmeta.sim.cluster) catches both.
READ_BUGS = ("stale_reads", "accept_stale_fetch")
BUGS = (*CORE_BUGS, *sorted(DRIVER_BUGS), *PLANE_BUGS, *READ_BUGS)
# The bugs that need the whole plane (``plane=True``, ``raftmeta sim --plane``).
NEEDS_PLANE = (*PLANE_BUGS, *READ_BUGS)


def parse_faults(text: str) -> frozenset[str]:
    """``all`` | ``none`` | a comma-separated subset of FAULT_KINDS; ValueError otherwise."""
    if text == "all":
        return frozenset(FAULT_KINDS)
    if text == "none":
        return frozenset()
    kinds = frozenset(k.strip() for k in text.split(",") if k.strip())
    unknown = sorted(kinds - set(FAULT_KINDS))
    if unknown or not kinds:
        raise ValueError(f"unknown fault kinds {unknown}; choose from {', '.join(FAULT_KINDS)}, all or none")
    return kinds


def faults_arg(kinds: frozenset[str]) -> str:
    if kinds == frozenset(FAULT_KINDS):
        return "all"
    return ",".join(sorted(kinds)) if kinds else "none"


def repro_command(
    seed: int, steps: int, voters: int | None, kinds: frozenset[str], bug: str | None, plane: bool = False
) -> str:
    parts = ["raftmeta sim", f"--seed {seed}", f"--steps {steps}"]
    parts.append("--plane" if plane else "--cores")
    if voters is not None:
        parts.append(f"--voters {voters}")
    parts.append(f"--faults {faults_arg(kinds)}")
    if bug:
        parts.append(f"--bug {bug}")
    parts.append("--trace")
    return " ".join(parts)


@dataclass(slots=True)
class Summary:
    runs: int = 0
    events: int = 0
    elections: int = 0
    commits: int = 0
    acknowledged: int = 0
    snapshots_installed: int = 0
    faults: dict[str, int] = field(default_factory=dict)
    checks: dict[str, int] = field(default_factory=dict)
    violations: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def events_per_s(self) -> float:
        return self.events / self.seconds if self.seconds > 0 else 0.0

    def add(self, result: RunResult, command: str) -> None:
        self.runs += 1
        self.events += result.events
        self.elections += result.elections
        self.commits += result.commits
        self.acknowledged += result.acknowledged
        self.snapshots_installed += result.snapshots_installed
        for kind, count in result.faults.items():
            self.faults[kind] = self.faults.get(kind, 0) + count
        for invariant, count in result.checks.items():
            self.checks[invariant] = self.checks.get(invariant, 0) + count
        if result.violation is not None:
            self.violations.append(
                {
                    "seed": result.seed,
                    "invariant": result.violation.invariant,
                    "detail": result.violation.detail,
                    "command": command,
                }
            )

    def to_json(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "events": self.events,
            "elections": self.elections,
            "commits": self.commits,
            "acknowledged": self.acknowledged,
            "snapshots_installed": self.snapshots_installed,
            "faults": dict(sorted(self.faults.items())),
            "checks": dict(sorted(self.checks.items())),
            "violations": self.violations,
            "events_per_s": round(self.events_per_s),
            "seconds": round(self.seconds, 3),
        }


def timeline_page(result: RunResult, command: str) -> str | None:
    """The HTML timeline of a run whose client history is not linearizable (None otherwise)."""
    failed = result.history_failure
    if failed is None:
        return None
    from raftmeta.lincheck.timeline import render_failure

    title = f"raftmeta sim seed {result.seed}: {failed.summary}"
    return render_failure(failed.ops, failed.failure, title=title, replay=command)


def timeline_name(seed: int) -> str:
    return f"sim-seed-{seed}-timeline.html"


def run_one(
    seed: int,
    *,
    steps: int,
    voters: int | None,
    kinds: frozenset[str],
    bug: str | None = None,
    trace: Callable[[str], None] | None = None,
    plane: bool = False,
) -> RunResult:
    """One seed: the consensus cores alone, or (``plane``) the whole metadata plane."""
    assert bug is None or bug in BUGS, f"unknown bug switch {bug}"
    assert plane or bug not in NEEDS_PLANE, f"{bug} is a bug of the whole plane: run it with plane=True"
    params = draw_params(seed, voters=voters, allowed_faults=kinds)
    core_faults = Faults(**{bug: True}) if bug in CORE_BUGS or bug in READ_BUGS else Faults()
    driver_bugs = frozenset({bug}) if bug in DRIVER_BUGS else frozenset()
    if plane:
        from raftmeta.sim.plane import PlaneSimulation

        simulation: Simulation = PlaneSimulation(
            params,
            core_faults=core_faults,
            plane_bugs=frozenset({bug}) if bug in PLANE_BUGS else frozenset(),
            driver_bugs=driver_bugs,
            trace=trace,
        )
    else:
        simulation = Simulation(params, core_faults=core_faults, driver_bugs=driver_bugs, trace=trace)
    return simulation.run(steps)


def trace_digest(
    seed: int, *, steps: int, voters: int | None, kinds: frozenset[str], bug: str | None = None, plane: bool = False
) -> str:
    """SHA-256 of everything a seed does: its trace (every event, as ``--trace`` prints it) and its
    figures (events, commits, faults by kind, checks by invariant, the violation). A change meant
    to make the simulator faster leaves every seed's digest as it was."""
    digest = hashlib.sha256()

    def take(line: str) -> None:
        digest.update(line.encode())
        digest.update(b"\n")

    result = run_one(seed, steps=steps, voters=voters, kinds=kinds, bug=bug, trace=take, plane=plane)
    violation = None if result.violation is None else [result.violation.invariant, result.violation.detail]
    figures = {
        "events": result.events,
        "elections": result.elections,
        "commits": result.commits,
        "acknowledged": result.acknowledged,
        "snapshots_installed": result.snapshots_installed,
        "liveness_ms": result.liveness_ms,
        "virtual_ms": result.virtual_ms,
        "faults": result.faults,
        "checks": result.checks,
        "violation": violation,
    }
    digest.update(json.dumps(figures, sort_keys=True).encode())
    return digest.hexdigest()


def run_seeds(
    seeds: Iterable[int],
    *,
    steps: int,
    voters: int | None,
    kinds: frozenset[str],
    bug: str | None = None,
    trace: Callable[[str], None] | None = None,
    on_result: Callable[[RunResult, str], None] | None = None,
    stop_on_violation: bool = False,
    plane: bool = False,
) -> Summary:
    summary = Summary()
    started = time.perf_counter()
    for seed in seeds:
        result = run_one(seed, steps=steps, voters=voters, kinds=kinds, bug=bug, trace=trace, plane=plane)
        command = repro_command(seed, steps, voters, kinds, bug, plane)
        summary.add(result, command)
        if on_result is not None:
            on_result(result, command)
        if stop_on_violation and result.violation is not None:
            break
    summary.seconds = time.perf_counter() - started
    return summary
