"""``raftmeta demo``: the guided tour behind ``make demo``.

Launches a local 3-node quorum with 9 simulated brokers in 3 racks, creates topics through gRPC
(striped, balanced, a manual assignment, one in a broker pool, and an invalid request) and one
through a Kafka admin client on the nodes' Kafka listeners (docs/kafka-protocol.md), fails a
broker and watches leadership move (seed 002), recovers it and watches the cluster heal (the ISRs
regrow, preferred leaders come back), shows the topics and the quorum, then
retires broker 8 by moving every replica off it (a reassignment plan, executed), replays all
three nodes' logs with Spark and prints the report's path. Then real Apache Kafka brokers on a
quorum of their own carry messages through a broker's crash and restart, and Spark verifies that
quorum's log too (:mod:`raftmeta.cli.demo_brokers`). Every step prints the
command it runs, so a newcomer can repeat any of them by hand. The quorums are always stopped.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import click

from raftmeta.cli.common import EXIT_FAILED
from raftmeta.cli.demo_brokers import kafka_brokers_tour
from raftmeta.cli.demo_brokers import stop as stop_brokers_tour
from raftmeta.cli.demo_steps import StepFailed, run, wait_for
from raftmeta.local.python_command import python_command, raftmeta_command

SESSION_TIMEOUT_MS = 4000
KAFKA_TOUR_DIR = "kafka"  # the real brokers' quorum, inside the demo's data dir


KAFKA_SNIPPET = """\
from confluent_kafka.admin import AdminClient, NewTopic
admin = AdminClient({{"bootstrap.servers": "{servers}"}})
futures = admin.create_topics([NewTopic("clicks", 4, 3, config={{"retention.ms": "3600000"}})])
print({{name: future.result() or "created" for name, future in futures.items()}})"""


def kafka_client_step(servers: str) -> None:
    """Create one topic with a real Kafka admin client (confluent-kafka) through the nodes' Kafka
    listeners."""
    click.secho("\n== Create a topic with a Kafka admin client (confluent-kafka), through the nodes' Kafka listeners",
                bold=True)  # fmt: skip
    snippet = KAFKA_SNIPPET.format(servers=servers)
    click.secho(f"$ python -c '{snippet}'", fg="cyan")
    result = subprocess.run(python_command("-c", snippet), text=True, capture_output=True, check=False)
    click.echo(result.stdout, nl=False)
    if result.returncode != 0:
        click.echo(result.stderr, nl=False, err=True)
        raise StepFailed("the Kafka admin client could not create 'clicks'")


def _healed(via: list[str], broker: str) -> bool:
    """No partition is under-replicated and ``broker`` leads orders-0 (its preferred replica)."""
    describe = raftmeta_command("topics", "describe", *via, "-o", "json")
    under = subprocess.run([*describe, "--under-replicated-partitions"], capture_output=True, text=True, check=False)
    orders = subprocess.run([*describe, "--topic", "orders"], capture_output=True, text=True, check=False)
    if under.returncode != 0 or orders.returncode != 0:
        return False
    lagging = [p for t in json.loads(under.stdout)["topics"] for p in t["partitions"]]
    leader = json.loads(orders.stdout)["topics"][0]["partitions"][0]["leader"]
    return not lagging and str(leader) == broker


def _observing(via: list[str], node: int) -> bool:
    """The leader lists ``node`` among its observers. A leader that removed itself resigns, and --
    no longer a voter, so no new leader tells it -- looks for the leader as an observer only once
    its election timeout has passed (as Kafka's KRaft does): ~1 s in which it is in no list."""
    status = subprocess.run(
        raftmeta_command("quorum", "status", *via, "-o", "json"),
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    return status.returncode == 0 and node in [o["id"] for o in json.loads(status.stdout)["observers"]]


def _reassigned(via: list[str], plan: Path) -> bool:
    verify = raftmeta_command("reassign", "verify", *via, "--plan", str(plan))
    return subprocess.run(verify, capture_output=True, check=False).returncode == 0


@click.command()
@click.option(
    "--data-dir", type=click.Path(file_okay=False, path_type=Path), default=Path("demo-data"), show_default=True
)
@click.option("--keep", is_flag=True, help="Keep the quorum running at the end (stop it with `raftmeta quorum down`).")
def demo(data_dir: Path, keep: bool) -> None:
    """Run a 3-node quorum, create topics, break a broker, change the voters, and verify every log
    with Spark; then produce and consume through real Kafka brokers on a quorum, crash one of them,
    and verify that log too."""
    if data_dir.exists():
        shutil.rmtree(data_dir)
    report_dir = data_dir / "report"
    started = time.monotonic()
    try:
        up = run(
            "Launch a local 3-node quorum, an observer node 4, and 9 simulated brokers in 3 racks "
            "(brokers 0-2 form pool 'fast'); preferred leaders are checked every 2 s here; Kafka's default, "
            "and raftmeta's, is 300 s",
            "quorum", "up", "--data-dir", str(data_dir), "--nodes", "3", "--observers", "1", "--brokers", "9",
            "--racks", "3",
            "--pool", "fast=0-2", "--session-timeout-ms", str(SESSION_TIMEOUT_MS), "--heartbeat-interval-ms", "500",
            "--leader-imbalance-check-interval-seconds", "2", "--kafka", "--detach", "--output", "json", capture=True,
        )  # fmt: skip
        bootstrap = json.loads(up)["bootstrap_server"]
        kafka_servers = json.loads(up)["kafka_bootstrap_servers"]
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
        kafka_client_step(kafka_servers)
        run("The Kafka client's topic, as raftmeta's own client sees it", "topics", "describe", *via,
            "--topic", "clicks")  # fmt: skip
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
        run(f"Under-replicated partitions while broker {victim} is down (kafka-topics --under-replicated-partitions)",
            "topics", "describe", *via, "--under-replicated-partitions")  # fmt: skip
        run(f"Recover broker {victim}: heartbeats resume and the controller unfences it",
            "brokers", "recover", *via, "--id", victim)  # fmt: skip
        click.echo("   waiting for its partition leaders to add it back to their ISRs (AlterPartition) and for the")
        click.echo("   controller's preferred-leader election to give it its leaderships back (checked every 2 s here;")
        click.echo(
            "   with the default 300 s, or `raftmeta leader-election --election-type preferred` to do it now) ..."
        )
        wait_for(lambda: _healed(via, victim), 60,
                  f"broker {victim} did not rejoin its ISRs and lead orders-0 again within 60 s")  # fmt: skip
        run("Brokers after the recovery", "brokers", "list", *via)
        run(f"Healed without an operator: full ISRs again, and broker {victim} leads orders-0 again",
            "topics", "describe", *via, "--topic", "orders")  # fmt: skip
        plan = data_dir / "retire-broker-8.json"
        run("Retire broker 8: plan moving every replica off it (fewest moves, racks kept; balance before/after)",
            "reassign", "generate", *via, "--exclude-brokers", "8", "--plan-file", str(plan))  # fmt: skip
        click.echo("   rack-c keeps brokers 2 and 5 only, and every partition keeps a replica in each of its racks")
        click.echo("   (as Kafka's rack-aware plans do), so those two take more; --disable-rack-aware would trade")
        click.echo("   rack spread for balance (the 'rack spread violations' row)")
        run("Execute the plan: new replicas catch up through their brokers' heartbeats, then the old ones leave",
            "reassign", "execute", *via, "--plan", str(plan), "--throttle-moves", "6")  # fmt: skip
        wait_for(lambda: _reassigned(via, plan), 60, "the reassignment did not complete within 60 s")
        run("Every move is complete", "reassign", "verify", *via, "--plan", str(plan))
        run("No replica is left on broker 8", "topics", "describe", *via, "--topic", "orders")
        run("The quorum as its leader sees it (kafka-metadata-quorum describe)", "quorum", "status", *via)
        run("Grow the quorum: make observer node 4 a voter (KIP-853's AddRaftVoter, one change at a time)",
            "quorum", "add-controller", "--data-dir", str(data_dir), "--controller-id", "4")  # fmt: skip
        run("Replace node 1: remove it from the voters (it keeps replicating as an observer until stopped)",
            "quorum", "remove-controller", "--data-dir", str(data_dir), "--controller-id", "1")  # fmt: skip
        click.echo("   waiting for node 1 to find the new leader: it resigned, and looks for the leader as an")
        click.echo("   observer once its election timeout has passed (as KRaft does) ...")
        wait_for(lambda: _observing(via, 1), 30,
                  "node 1 did not fetch from the new leader as an observer within 30 s", every_s=0.5)  # fmt: skip
        run("Voters 2, 3 and 4 now; node 1 observes", "quorum", "status", *via, "--status")
        run("The quorum still commits: create a topic", "topics", "create", *via,
            "--topic", "after-the-change", "--partitions", "3", "--replication-factor", "3")  # fmt: skip
        run("Stop the quorum (its logs stay on disk)", "quorum", "down", "--data-dir", str(data_dir))
        run("Replay every node's log with Spark and verify them", "verify", "--data-dir", str(data_dir),
            "--report-dir", str(report_dir))  # fmt: skip
        kafka_brokers_tour(data_dir / KAFKA_TOUR_DIR)
    except StepFailed as exc:
        click.secho(f"\ndemo failed: {exc}", fg="red", err=True)
        logs = data_dir / "logs"
        if logs.exists():
            click.secho(f"node and broker logs are in {logs}", err=True)
        raise SystemExit(EXIT_FAILED) from None
    finally:
        if not keep and (data_dir / "quorum.json").exists():
            subprocess.run(raftmeta_command("quorum", "down", "--data-dir", str(data_dir)),
                           capture_output=True, check=False)  # fmt: skip
        if not keep:
            stop_brokers_tour(data_dir / KAFKA_TOUR_DIR)
    click.secho(f"\nDemo finished in {time.monotonic() - started:.0f} s.", bold=True)
    click.echo(f"Report: {(report_dir / 'report.html').resolve()}")
    click.echo(
        f"The Kafka brokers' quorum's report: {(data_dir / KAFKA_TOUR_DIR / 'report' / 'report.html').resolve()}"
    )
    click.echo(f"Inspect a node's log: raftmeta log dump --data-dir {data_dir / 'node-1'}")
