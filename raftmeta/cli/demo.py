"""``raftmeta demo``: the guided tour behind ``make demo``.

Launches a local 3-node quorum with 9 simulated brokers in 3 racks, creates topics through gRPC
(striped, balanced, a manual assignment, one in a broker pool, and an invalid request), fails a
broker and watches leadership move (seed 002), recovers it, shows the topics and the quorum, then
retires broker 8 by moving every replica off it (a reassignment plan, executed), replays all
three nodes' logs with Spark and prints the report's path. Every step prints the
command it runs, so a newcomer can repeat any of them by hand. The quorum is always stopped.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import click

from raftmeta.cli.common import EXIT_FAILED

SESSION_TIMEOUT_MS = 4000


class StepFailed(Exception):
    pass


def run(title: str, *argv: str, expect_failure: bool = False, capture: bool = False) -> str:
    click.secho(f"\n== {title}", bold=True)
    click.secho(f"$ raftmeta {' '.join(argv)}", fg="cyan")
    result = subprocess.run([sys.executable, "-m", "raftmeta", *argv], text=True, capture_output=capture, check=False)
    if capture:
        click.echo(result.stdout, nl=False)
        if result.stderr:
            click.echo(result.stderr, nl=False, err=True)
    failed = result.returncode != 0
    if failed and not expect_failure:
        raise StepFailed(f"`raftmeta {' '.join(argv)}` exited with {result.returncode}")
    if expect_failure and not failed:
        raise StepFailed(f"`raftmeta {' '.join(argv)}` was expected to be rejected but succeeded")
    return result.stdout if capture else ""


@click.command()
@click.option(
    "--data-dir", type=click.Path(file_okay=False, path_type=Path), default=Path("demo-data"), show_default=True
)
@click.option("--keep", is_flag=True, help="Keep the quorum running at the end (stop it with `raftmeta quorum down`).")
def demo(data_dir: Path, keep: bool) -> None:
    """Run a 3-node quorum, create topics, break a broker, and verify every log with Spark."""
    if data_dir.exists():
        shutil.rmtree(data_dir)
    report_dir = data_dir / "report"
    started = time.monotonic()
    try:
        up = run(
            "Launch a local 3-node quorum with 9 simulated brokers in 3 racks (brokers 0-2 form pool 'fast')",
            "quorum", "up", "--data-dir", str(data_dir), "--nodes", "3", "--brokers", "9", "--racks", "3",
            "--pool", "fast=0-2", "--session-timeout-ms", str(SESSION_TIMEOUT_MS), "--heartbeat-interval-ms", "500",
            "--detach", "--output", "json", capture=True,
        )  # fmt: skip
        bootstrap = json.loads(up)["bootstrap_server"]
        via = ["--bootstrap-server", bootstrap]
        run("Registered brokers, with racks and pools", "brokers", "list", *via)
        run("Create a topic with KRaft's striped placer (the default)", "topics", "create", *via,
            "--topic", "orders", "--partitions", "6", "--replication-factor", "3")  # fmt: skip
        run("Create a topic with raftmeta's balanced placer (leaders within ±1 per broker)",
            "topics", "create", *via, "--topic", "payments", "--partitions", "9", "--replication-factor", "3",
            "--placer", "balanced")  # fmt: skip
        run("Create a topic with a manual replica assignment", "topics", "create", *via,
            "--topic", "audit", "--replica-assignment", "3:4:5,4:5:3,5:3:4")  # fmt: skip
        run("Create a topic inside broker pool 'fast' (seed 003's resource isolation)",
            "topics", "create", *via, "--topic", "latency-critical", "--partitions", "3", "--replication-factor", "3",
            "--broker-pool", "fast")  # fmt: skip
        run("An invalid request is refused, naming the field and the rule (and nothing is written)",
            "topics", "create", *via, "--topic", "bad name!", "--partitions", "3", "--replication-factor", "10",
            expect_failure=True)  # fmt: skip
        described = run("Where the leaders of 'orders' are", "topics", "describe", *via, "--topic", "orders",
                        "--output", "json", capture=True)  # fmt: skip
        victim = str(json.loads(described)["topics"][0]["partitions"][0]["leader"])
        run(f"Fail broker {victim}, the leader of orders-0: its heartbeats stop",
            "brokers", "fail", *via, "--id", victim)  # fmt: skip
        wait_s = SESSION_TIMEOUT_MS / 1000 + 2
        click.echo(f"   waiting {wait_s:.0f} s for its session to time out and the controller to fence it ...")
        time.sleep(wait_s)
        run(f"Partitions led by broker {victim} moved to the next ISR member; it left every ISR (seed 002)",
            "topics", "describe", *via, "--topic", "orders")  # fmt: skip
        run(f"Recover broker {victim}: heartbeats resume and the controller unfences it",
            "brokers", "recover", *via, "--id", victim)  # fmt: skip
        time.sleep(2)
        run("Brokers after the recovery", "brokers", "list", *via)
        plan = data_dir / "retire-broker-8.json"
        run("Retire broker 8: plan moving every replica off it (balance before and after, fewest moves)",
            "reassign", "generate", *via, "--exclude-brokers", "8", "--plan-file", str(plan))  # fmt: skip
        run("Execute the plan: new replicas catch up through their brokers' heartbeats, then the old ones leave",
            "reassign", "execute", *via, "--plan", str(plan), "--throttle-moves", "6")  # fmt: skip
        deadline = time.monotonic() + 60
        while subprocess.run([sys.executable, "-m", "raftmeta", "reassign", "verify", *via, "--plan", str(plan)],
                             capture_output=True, check=False).returncode != 0:  # fmt: skip
            if time.monotonic() > deadline:
                raise StepFailed("the reassignment did not complete within 60 s")
            time.sleep(1)
        run("Every move is complete", "reassign", "verify", *via, "--plan", str(plan))
        run("No replica is left on broker 8", "topics", "describe", *via, "--topic", "orders")
        run("The quorum as its leader sees it (kafka-metadata-quorum describe)", "quorum", "status", *via)
        run("Stop the quorum (its logs stay on disk)", "quorum", "down", "--data-dir", str(data_dir))
        run("Replay all three nodes' logs with Spark and verify them", "verify", "--data-dir", str(data_dir),
            "--report-dir", str(report_dir))  # fmt: skip
    except StepFailed as exc:
        click.secho(f"\ndemo failed: {exc}", fg="red", err=True)
        logs = data_dir / "logs"
        if logs.exists():
            click.secho(f"node and broker logs are in {logs}", err=True)
        raise SystemExit(EXIT_FAILED) from None
    finally:
        if not keep and (data_dir / "quorum.json").exists():
            subprocess.run([sys.executable, "-m", "raftmeta", "quorum", "down", "--data-dir", str(data_dir)],
                           capture_output=True, check=False)  # fmt: skip
    click.secho(f"\nDemo finished in {time.monotonic() - started:.0f} s.", bold=True)
    click.echo(f"Report: {(report_dir / 'report.html').resolve()}")
    click.echo(f"Inspect a node's log: raftmeta log dump --data-dir {data_dir / 'node-1'}")
