"""``raftmeta sim``: run the deterministic consensus simulator over many seeds.

Exit 1 on any invariant violation, printing the seed, the invariant and the exact command that
replays it with a trace.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from raftmeta.cli.common import EXIT_FAILED, INT64_MAX, emit_json, int_range, output_option, usage_error
from raftmeta.sim.cluster import RunResult
from raftmeta.sim.params import FAULT_KINDS
from raftmeta.sim.runner import BUGS, NEEDS_PLANE, Summary, parse_faults, run_seeds, timeline_name, timeline_page
from raftmeta.sim.soak import SUMMARY_NAME, SoakSpec, run_soak, soak_document

# ``--soak``: far more seeds than CI's budget, none of them CI's (docs/consensus.md, "Budgets").
SOAK_SEEDS = 10_000
SOAK_FIRST_SEED = 100_000


@click.command("sim")
@click.option("--seeds", "seed_count", type=int_range(1), default=None, help="Number of seeds to run [100].")
@click.option("--seed", "first_seed", type=int_range(0, INT64_MAX), default=None,
              help="First seed (alone: run only it).")  # fmt: skip
@click.option("--steps", type=int_range(1), default=3000, show_default=True, help="Events in the fault phase.")
@click.option("--voters", type=int_range(1, 5), default=None, help="Voters (1-5); default: the seed picks.")
@click.option(
    "--faults",
    "faults_text",
    default="all",
    show_default=True,
    help=f"all | none | comma-separated subset of: {', '.join(FAULT_KINDS)}.",
)
@click.option("--trace", is_flag=True, help="Print one line per event (to stderr with --output json).")
@click.option("--bug", type=click.Choice(BUGS), default=None, hidden=True, help="Plant a known bug (tests only).")
@click.option(
    "--plane/--cores",
    default=True,
    show_default=True,
    help="--plane: the whole metadata plane (QuorumControllers, a broker fleet, clients creating and reading); "
    "--cores: the consensus cores alone, with a simple proposer (faster, more seeds per second).",
)
@click.option(
    "--soak",
    is_flag=True,
    help=f"The long run: {SOAK_SEEDS} seeds from {SOAK_FIRST_SEED} (unless --seeds/--seed say otherwise) over "
    f"--jobs processes, progress on stderr, one file per failing seed and {SUMMARY_NAME} in --report-dir.",
)
@click.option(
    "--jobs",
    type=int_range(1),
    default=None,
    help="With --soak: worker processes [the number of CPUs].",
)
@click.option(
    "--report-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("."),
    show_default=True,
    help="Where a seed whose client history is not linearizable gets its HTML timeline (with --plane); "
    "with --soak, every failing seed's file and the summary.",
)
@output_option
def sim(
    seed_count: int | None,
    first_seed: int | None,
    steps: int,
    voters: int | None,
    faults_text: str,
    trace: bool,
    bug: str | None,
    plane: bool,
    soak: bool,
    jobs: int | None,
    report_dir: Path,
    output: str,
) -> None:
    """Simulate quorums under seeded faults and check the consensus invariants.

    Each seed picks the cluster (unless --voters), the fault mix and rates; phase 1 runs
    --steps events with faults, phase 2 heals and requires progress. Invariants (DESIGN.md §9,
    1-6) are checked after every event and at the end.
    """
    if jobs is not None and not soak:
        raise usage_error("--jobs runs a soak's seeds in parallel: add --soak", "--jobs")
    if bug in NEEDS_PLANE and not plane:
        raise usage_error(f"{bug} is a bug of the whole plane: drop --cores (--plane is the default)", "--bug")
    try:
        kinds = parse_faults(faults_text)
    except ValueError as exc:
        raise usage_error(str(exc), "--faults") from None
    if soak:
        start = first_seed if first_seed is not None else SOAK_FIRST_SEED
        count = seed_count if seed_count is not None else SOAK_SEEDS
    else:
        start = first_seed if first_seed is not None else 0
        count = seed_count if seed_count is not None else (1 if first_seed is not None else 100)
    as_json = output == "json"
    trace_out = sys.stderr if as_json else sys.stdout

    def write_trace(line: str) -> None:
        trace_out.write(line + "\n")

    def report(result: RunResult, command: str) -> None:
        page = timeline_page(result, command)
        if page is not None:
            report_dir.mkdir(parents=True, exist_ok=True)
            path = report_dir / timeline_name(result.seed)
            path.write_text(page, encoding="utf-8")
            click.echo(f"  seed {result.seed}: timeline of the failing window: {path}", err=as_json)
        if as_json:
            return
        p = result.params
        status = "ok" if result.violation is None else f"VIOLATION {result.violation.invariant}"
        click.echo(
            f"seed {result.seed}: voters={p.voters} observers={p.observers} faults={','.join(sorted(p.faults)) or '-'} "
            f"events={result.events} elections={result.elections} commits={result.commits} "
            f"acked={result.acknowledged} liveness={result.liveness_ms}ms {status}"
        )
        if result.violation is not None:
            click.echo(f"  seed {result.seed} violates {result.violation.invariant}: {result.violation.detail}")
            click.echo(f"  reproduce: {command}")

    if soak:
        if trace:
            raise usage_error("--trace prints one seed's events: replay a failing seed without --soak", "--trace")
        workers = jobs if jobs is not None else os.cpu_count() or 1

        def progress(line: str) -> None:
            click.echo(line, err=True)

        def failed(record: dict[str, Any], written: list[Path]) -> None:
            invariant, detail = record["violation"]
            click.echo(f"soak: seed {record['seed']} violates {invariant}: {detail}", err=True)
            click.echo(f"  reproduce: {record['command']}", err=True)
            click.echo(f"  written: {', '.join(map(str, written))}", err=True)

        load = os.getloadavg()
        spec = SoakSpec(steps, voters, kinds, bug, plane)
        summary = run_soak(
            range(start, start + count),
            spec,
            jobs=workers,
            report_dir=report_dir,
            progress=progress,
            on_failure=failed,
        )
        if as_json:
            emit_json(soak_document(summary, first_seed=start, seeds=count, jobs=workers, load=load))
        else:
            _print_summary(summary)
            click.echo(f"summary: {report_dir / SUMMARY_NAME}")
        if summary.violations:
            raise SystemExit(EXIT_FAILED)
        return
    summary = run_seeds(
        range(start, start + count),
        steps=steps,
        voters=voters,
        kinds=kinds,
        bug=bug,
        trace=write_trace if trace else None,
        on_result=report,
        plane=plane,
    )
    if as_json:
        emit_json(summary.to_json())
    else:
        _print_summary(summary)
    if summary.violations:
        raise SystemExit(EXIT_FAILED)


def _print_summary(summary: Summary) -> None:
    faults = ", ".join(f"{k}={v}" for k, v in sorted(summary.faults.items())) or "none"
    checks = ", ".join(f"{k}={v:,}" for k, v in sorted(summary.checks.items()))
    click.echo(f"checks: {checks}")
    click.echo(
        f"total: runs={summary.runs} events={summary.events} elections={summary.elections} "
        f"commits={summary.commits} acked={summary.acknowledged} violations={len(summary.violations)} "
        f"events/s={summary.events_per_s:,.0f} ({summary.seconds:.1f} s)"
    )
    click.echo(f"faults: {faults}")
    for v in summary.violations:
        click.echo(f"FAILED seed {v['seed']} ({v['invariant']}): {v['detail']}\n  reproduce: {v['command']}")
