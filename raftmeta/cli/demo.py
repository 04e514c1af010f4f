"""``raftmeta demo``: the guided tour behind ``make demo``.

The full tour (DESIGN.md §1, issue "node") launches a 3-node quorum with 9 simulated brokers in
3 racks, creates topics through gRPC, fails and recovers a broker, and replays every node's log
with Spark. Each step runs only if the part it needs exists; steps whose parts are not built yet
are listed as such, plainly -- the demo never pretends they ran.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

import click

from raftmeta.cli.common import EXIT_FAILED

if TYPE_CHECKING:
    from collections.abc import Callable


@dataclass(frozen=True)
class Step:
    title: str
    # Module whose presence means the step's part is built.
    needs: str
    # The raftmeta command line the step runs (arguments after "raftmeta").
    argv: tuple[str, ...]


STEPS: tuple[Step, ...] = (
    Step("The metadata record types the log carries", "raftmeta.cli.records", ("records", "types")),
    Step(
        "Preview placement: 12 partitions, RF 3, on 9 brokers in 3 racks (Kafka's striped placer)",
        "raftmeta.cli.placement",
        (
            "placement",
            "place",
            "--brokers",
            "0:rack-a,1:rack-a,2:rack-a,3:rack-b,4:rack-b,5:rack-b,6:rack-c,7:rack-c,8:rack-c",
            "--partitions",
            "12",
            "--replication-factor",
            "3",
            "--seed",
            "0",
        ),
    ),
    Step(
        "Simulate 20 seeded 3-voter clusters under faults and check the Raft invariants",
        "raftmeta.sim",
        ("sim", "--seeds", "20", "--voters", "3"),
    ),
    Step(
        "Launch a local 3-node quorum with 9 simulated brokers in 3 racks",
        "raftmeta.server",
        ("quorum", "up"),
    ),
    Step("Replay every node's log with Spark and verify", "raftmeta.jobs", ("verify",)),
)


def _available(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def _run(argv: tuple[str, ...]) -> int:
    return subprocess.call([sys.executable, "-m", "raftmeta", *argv])


@click.command()
def demo() -> None:
    """Walk through what raftmeta can do today, step by step."""
    ran: list[str] = []
    missing: list[str] = []
    runner: Callable[[tuple[str, ...]], int] = _run
    for number, step in enumerate(STEPS, start=1):
        click.secho(f"\n== Step {number}: {step.title}", bold=True)
        if not _available(step.needs):
            click.secho(f"   not built yet (needs {step.needs}); skipped", fg="yellow")
            missing.append(step.title)
            continue
        click.echo(f"   $ raftmeta {' '.join(step.argv)}")
        code = runner(step.argv)
        if code != 0:
            click.secho(f"   step failed with exit code {code}", fg="red")
            raise SystemExit(EXIT_FAILED)
        ran.append(step.title)
    click.secho(f"\nDemo ran {len(ran)} of {len(STEPS)} steps.", bold=True)
    if missing:
        click.secho("Not built yet, so not shown:", fg="yellow")
        for title in missing:
            click.echo(f"  - {title}")
