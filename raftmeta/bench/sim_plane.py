"""``raftmeta bench sim-plane``: what one seed of the plane's soak costs (``raftmeta sim --plane``).

The soak runs thousands of seeds, so its length is the CPU one seed takes: the median over
``--repeats`` rounds of the same ``--seeds`` seeds (every fault kind, the seed picks the cluster,
as the soak runs them) of the CPU seconds the round took, as seeds and simulated events per CPU
second. CPU time, not wall time: the machine is shared, and a soak with ``--jobs N`` gets N cores'
worth of it. The round's wall time is reported beside it, with the load average.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import click

from raftmeta.bench.results import machine, median, write_result
from raftmeta.cli.common import emit_json, output_option
from raftmeta.sim import FAULT_KINDS, run_seeds

STEPS = 3000  # raftmeta sim's default, as the soak runs


@click.command("sim-plane")
@click.option("--seeds", type=click.IntRange(min=1), default=8, show_default=True, help="Seeds per round.")
@click.option("--first-seed", type=click.IntRange(min=0), default=100_000, show_default=True)
@click.option("--repeats", type=click.IntRange(min=1), default=3, show_default=True, help="Rounds (median).")
@click.option(
    "--out", "out_path", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Also write here."
)
@output_option
def command(seeds: int, first_seed: int, repeats: int, out_path: Path | None, output: str) -> None:
    """CPU per seed of the plane's soak (seeds and events per CPU second)."""
    cpu_s: list[float] = []
    wall_s: list[float] = []
    events = 0
    load = os.getloadavg()
    for _ in range(repeats):
        cpu, wall = time.process_time(), time.perf_counter()
        summary = run_seeds(
            range(first_seed, first_seed + seeds), steps=STEPS, voters=None, kinds=frozenset(FAULT_KINDS), plane=True
        )
        cpu_s.append(time.process_time() - cpu)
        wall_s.append(time.perf_counter() - wall)
        events = summary.events
        if summary.violations:
            raise click.ClickException(f"a measured seed fails: {summary.violations[0]}")
    cpu = median(cpu_s)
    document: dict[str, Any] = {
        "cpu_s_per_seed": round(cpu / seeds, 4),
        "seeds_per_cpu_s": round(seeds / cpu, 3),
        "events_per_cpu_s": round(events / cpu),
        "events_per_round": events,
        "wall_s_per_round": round(median(wall_s), 3),
        "load_average_at_start": [round(x, 2) for x in load],
        "params": {"seeds": seeds, "first_seed": first_seed, "repeats": repeats, "steps": STEPS},
        "machine": machine(),
    }
    write_result(document, out_path)
    if output == "json":
        emit_json(document)
    else:
        click.echo(
            f"plane seeds: {document['cpu_s_per_seed']} CPU s each, {document['seeds_per_cpu_s']} per CPU s, "
            f"{document['events_per_cpu_s']:,} events per CPU s (median of {repeats} rounds of {seeds} seeds)"
        )
