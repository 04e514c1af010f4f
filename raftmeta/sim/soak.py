"""The soak: many seeds with every checker, over the machine's cores (``raftmeta sim --soak``).

Each seed runs alone in a worker process (a seed's run depends on its seed only, so the order the
workers finish in changes nothing but the order of the lines). The parent sums the results,
prints progress on stderr, writes one file per failing seed (what failed, and the command that
replays it; with the plane, the timeline of a client history the checker refused) and keeps a
JSON summary up to date in the report directory -- also when the soak is interrupted, marked
``complete: false``. An exception the simulator raises (a bug of the simulator or of the code it
drives, not a broken invariant) fails its seed as ``simulator-error``, its traceback in the seed's
file; the soak goes on with the next seed.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from raftmeta.sim.checker import InvariantViolation
from raftmeta.sim.cluster import RunResult
from raftmeta.sim.params import draw_params
from raftmeta.sim.runner import Summary, repro_command, run_one, timeline_name, timeline_page

SUMMARY_NAME = "soak-summary.json"
# The invariant a seed fails when the simulator raised instead of finishing its run.
SIMULATOR_ERROR = "simulator-error"
# How often the progress line and the summary file are refreshed.
PROGRESS_INTERVAL_S = 30.0


@dataclass(frozen=True, slots=True)
class SoakSpec:
    steps: int
    voters: int | None
    kinds: frozenset[str]
    bug: str | None
    plane: bool


def failure_name(seed: int) -> str:
    return f"sim-seed-{seed}-failure.txt"


def _run_seed(spec: SoakSpec, seed: int) -> dict[str, Any]:
    """One seed in a worker: what the parent needs of it, as plain data (pickled back)."""
    command = repro_command(seed, spec.steps, spec.voters, spec.kinds, spec.bug, spec.plane)
    try:
        result = run_one(seed, steps=spec.steps, voters=spec.voters, kinds=spec.kinds, bug=spec.bug, plane=spec.plane)
        page = timeline_page(result, command)
    except Exception as error:  # any exception fails this seed, never the soak
        return _simulator_error(seed, command, error)
    violation = result.violation
    return {
        "seed": seed,
        "events": result.events,
        "elections": result.elections,
        "commits": result.commits,
        "acknowledged": result.acknowledged,
        "snapshots_installed": result.snapshots_installed,
        "faults": result.faults,
        "checks": result.checks,
        "violation": None if violation is None else (violation.invariant, violation.detail),
        "command": command,
        "timeline": page,
        "traceback": None,
    }


def _simulator_error(seed: int, command: str, error: Exception) -> dict[str, Any]:
    """The record of a seed whose run raised: no figures (the run did not finish), the exception
    as its violation and the traceback for its file."""
    return {
        "seed": seed,
        "events": 0,
        "elections": 0,
        "commits": 0,
        "acknowledged": 0,
        "snapshots_installed": 0,
        "faults": {},
        "checks": {},
        "violation": (SIMULATOR_ERROR, f"{type(error).__name__}: {error}"),
        "command": command,
        "timeline": None,
        "traceback": "".join(traceback.format_exception(error)),
    }


def _as_result(spec: SoakSpec, record: dict[str, Any]) -> RunResult:
    seed = record["seed"]
    result = RunResult(seed, draw_params(seed, voters=spec.voters, allowed_faults=spec.kinds))
    for name in ("events", "elections", "commits", "acknowledged", "snapshots_installed", "faults", "checks"):
        setattr(result, name, record[name])
    if record["violation"] is not None:
        result.violation = InvariantViolation(*record["violation"])
    return result


def write_failure(report_dir: Path, record: dict[str, Any]) -> list[Path]:
    """The failing seed's file (and its timeline, if its client history was refused; the
    traceback, if the simulator raised)."""
    report_dir.mkdir(parents=True, exist_ok=True)
    invariant, detail = record["violation"]
    path = report_dir / failure_name(record["seed"])
    lines = [f"seed {record['seed']} violates {invariant}", detail, f"replay: {record['command']}"]
    written = [path]
    if record["timeline"] is not None:
        page = report_dir / timeline_name(record["seed"])
        page.write_text(record["timeline"], encoding="utf-8")
        lines.append(f"timeline of the failing window: {page.name}")
        written.append(page)
    if record["traceback"] is not None:
        lines.append(record["traceback"].rstrip("\n"))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return written


def soak_document(summary: Summary, *, first_seed: int, seeds: int, jobs: int, load: Sequence[float]) -> dict[str, Any]:
    document = summary.to_json()
    document.update(
        first_seed=first_seed,
        seeds=seeds,
        complete=summary.runs == seeds,
        jobs=jobs,
        load_average_at_start=[round(x, 2) for x in load],
        load_average_now=[round(x, 2) for x in os.getloadavg()],
    )
    return document


def run_soak(
    seeds: range,
    spec: SoakSpec,
    *,
    jobs: int,
    report_dir: Path,
    progress: Callable[[str], None],
    on_failure: Callable[[dict[str, Any], list[Path]], None] | None = None,
) -> Summary:
    """Run every seed over ``jobs`` worker processes (1: in this process), keeping
    ``report_dir/soak-summary.json`` current. Returns the summary (violations sorted by seed)."""
    summary = Summary()
    load = os.getloadavg()
    started = time.perf_counter()
    report_dir.mkdir(parents=True, exist_ok=True)
    summary_path = report_dir / SUMMARY_NAME
    last_report = started

    def refresh() -> None:
        summary.seconds = time.perf_counter() - started
        summary.violations.sort(key=lambda v: v["seed"])
        document = soak_document(summary, first_seed=seeds.start, seeds=len(seeds), jobs=jobs, load=load)
        summary_path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")

    def take(record: dict[str, Any]) -> None:
        nonlocal last_report
        summary.add(_as_result(spec, record), record["command"])
        if record["violation"] is not None:
            written = write_failure(report_dir, record)
            if on_failure is not None:
                on_failure(record, written)
        now = time.perf_counter()
        if now - last_report >= PROGRESS_INTERVAL_S or summary.runs == len(seeds):
            last_report = now
            refresh()
            elapsed = now - started
            rate = summary.runs / elapsed if elapsed > 0 else 0.0
            left = (len(seeds) - summary.runs) / rate if rate > 0 else 0.0
            progress(
                f"soak: {summary.runs}/{len(seeds)} seeds, {len(summary.violations)} failing, "
                f"{summary.events / elapsed:,.0f} events/s, {elapsed:,.0f} s, about {left:,.0f} s left"
            )

    run = partial(_run_seed, spec)
    # A soak stopped with SIGTERM (as by a job runner) ends like one interrupted at the keyboard:
    # the workers are terminated and the summary says how far it got.
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        if jobs <= 1:
            for seed in seeds:
                take(run(seed))
        else:
            # Spawned workers: no state of this process (its trace hooks, open files) is shared.
            with multiprocessing.get_context("spawn").Pool(jobs) as pool:
                for record in pool.imap_unordered(run, seeds, chunksize=1):
                    take(record)
    finally:
        signal.signal(signal.SIGTERM, previous)
        refresh()
    return summary


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")
