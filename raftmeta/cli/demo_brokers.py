"""The last part of ``raftmeta demo``: real Apache Kafka brokers on a raftmeta quorum.

A second quorum (3 voters) with three brokers of the pinned Kafka release (``quorum up
--kafka-brokers 3``, ids 100-102 in three racks): a topic made through gRPC, messages produced
(acks=all, idempotent) through the brokers, the leader of partition 0 killed (kill -9), fenced
once its session runs out, produce going on without it, then restarted: back in every ISR, its
preferred leaderships back; a consumer group reads every message exactly once; the quorum is
stopped and Spark verifies its log. Kafka's jars come from ``make kafka`` (the Makefile resolves
them before the demo); a broker that cannot start fails the step, naming its log.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import click

from raftmeta.cli.demo_steps import StepFailed, run, wait_for
from raftmeta.local import quorum as local_quorum
from raftmeta.local.python_command import python_command, raftmeta_command

TOPIC = "events"
BATCH = 5000  # messages per produce step
# Brokers heartbeat every 2 s (Kafka's default) and are fenced after this session; the quorum's
# automatic preferred-leader election runs every LEADER_IMBALANCE_S (Kafka's default is 300 s).
SESSION_TIMEOUT_MS = 6000
LEADER_IMBALANCE_S = 2
# A restarted broker's JVM loads Kafka again: tens of seconds on a loaded two-core machine (the
# launcher's own ready timeout bounds it); the ISRs and leaderships follow within seconds.
HEAL_TIMEOUT_S = 120.0

PRODUCE = """\
from confluent_kafka import Producer
producer = Producer({{"bootstrap.servers": "{servers}", "acks": "all", "enable.idempotence": True}})
acknowledged = []
for i in range({first}, {last}):
    producer.produce("{topic}", value=str(i).encode(), on_delivery=lambda e, m: e is None and acknowledged.append(m))
    producer.poll(0)
producer.flush(60)
print(f"{{len(acknowledged)}} of {count} messages acknowledged by the brokers (acks=all, idempotent)")
raise SystemExit(0 if len(acknowledged) == {count} else 1)"""

CONSUME = """\
from collections import Counter
from confluent_kafka import Consumer
consumer = Consumer({{"bootstrap.servers": "{servers}", "group.id": "demo", "auto.offset.reset": "earliest"}})
consumer.subscribe(["{topic}"])
seen, idle = Counter(), 0
while sum(seen.values()) < {count} and idle < 60:
    batch = consumer.consume(1000, timeout=1.0)
    idle = 0 if batch else idle + 1
    seen.update(m.value().decode() for m in batch if m.error() is None)
consumer.close()
missing = {count} - len(set(seen) & {{str(i) for i in range({count})}})
twice = sum(1 for n in seen.values() if n > 1)
print(f"consumer group 'demo' read {{len(seen)}} distinct messages of {count}: {{missing}} missing, {{twice}} twice")
raise SystemExit(0 if not missing and not twice else 1)"""


def _python(title: str, snippet: str) -> None:
    click.secho(f"\n== {title}", bold=True)
    click.secho(f"$ python -c '{snippet}'", fg="cyan")
    result = subprocess.run(python_command("-c", snippet), text=True, capture_output=True, check=False)
    click.echo(result.stdout, nl=False)
    if result.returncode != 0:
        click.echo(result.stderr[-4000:], nl=False, err=True)
        raise StepFailed(f"{title}: exited with {result.returncode}")


def _describe(via: list[str]) -> list[dict[str, Any]]:
    described = subprocess.run(
        raftmeta_command("topics", "describe", *via, "--topic", TOPIC, "-o", "json"),
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if described.returncode != 0:
        return []
    partitions: list[dict[str, Any]] = json.loads(described.stdout)["topics"][0]["partitions"]
    return partitions


def _fenced(via: list[str], broker: int) -> bool:
    listed = subprocess.run(raftmeta_command("brokers", "list", *via, "-o", "json"), capture_output=True, text=True,
                            check=False)  # fmt: skip
    if listed.returncode != 0:
        return False
    return any(b["id"] == broker and b["fenced"] for b in json.loads(listed.stdout)["brokers"])


def _healed(via: list[str], brokers: list[int]) -> bool:
    """Every ISR is whole and every partition led by its preferred (first) replica."""
    partitions = _describe(via)
    return bool(partitions) and all(sorted(p["isr"]) == brokers and p["leader"] == p["replicas"][0] for p in partitions)


def kafka_brokers_tour(data_dir: Path) -> None:
    """The tour's steps on a quorum of its own in ``data_dir`` (stopped by the caller's cleanup
    through ``quorum down``, as the first quorum)."""
    up = run(
        "Real Apache Kafka brokers on a raftmeta quorum: a new 3-node quorum and three Kafka 4.4 brokers "
        "(ids 100-102, racks a-c) that register with it, heartbeat and replicate its metadata log as observers",
        "quorum", "up", "--data-dir", str(data_dir), "--nodes", "3", "--kafka-brokers", "3", "--racks", "3",
        "--session-timeout-ms", str(SESSION_TIMEOUT_MS),
        "--leader-imbalance-check-interval-seconds", str(LEADER_IMBALANCE_S), "--detach", "--output", "json",
        capture=True,
    )  # fmt: skip
    document = json.loads(up)
    via = ["--bootstrap-server", document["bootstrap_server"]]
    servers = document["kafka_brokers_bootstrap"]
    brokers = sorted(b["id"] for b in document["kafka_brokers"])
    run("The Kafka brokers as raftmeta registered them (unfenced once caught up with the log)",
        "brokers", "list", *via)  # fmt: skip
    run(f"Create '{TOPIC}' through raftmeta's gRPC client (KRaft's striped placer) on the real brokers",
        "topics", "create", *via, "--topic", TOPIC, "--partitions", "6", "--replication-factor", "3")  # fmt: skip
    _python(
        f"Produce {BATCH} messages through the brokers",
        PRODUCE.format(servers=servers, topic=TOPIC, first=0, last=BATCH, count=BATCH),
    )
    partitions = _describe(via)
    if not partitions:
        raise StepFailed(f"'{TOPIC}' could not be described")
    victim = int(partitions[0]["leader"])
    real = local_quorum.kafka_brokers(local_quorum.LocalQuorum.load(data_dir))
    if real is None:
        raise StepFailed(f"no Kafka brokers recorded in {data_dir}")
    pid = real.node(victim).pid
    click.secho(f"\n== Kill Kafka broker {victim}, the leader of {TOPIC}-0 (a crash: no controlled shutdown)",
                bold=True)  # fmt: skip
    click.secho(f"$ kill -9 {pid}", fg="cyan")
    real.kill(victim)
    click.echo(f"   waiting for its session ({SESSION_TIMEOUT_MS / 1000:g} s) to run out: raftmeta fences it ...")
    wait_for(
        lambda: _fenced(via, victim), HEAL_TIMEOUT_S, f"broker {victim} was not fenced within {HEAL_TIMEOUT_S:g} s"
    )
    run(f"Its partitions have new leaders from their ISRs, and broker {victim} left every ISR",
        "topics", "describe", *via, "--topic", TOPIC)  # fmt: skip
    _python(
        f"Produce {BATCH} more while broker {victim} is down",
        PRODUCE.format(servers=servers, topic=TOPIC, first=BATCH, last=2 * BATCH, count=BATCH),
    )
    click.secho(f"\n== Restart Kafka broker {victim} with its storage and configuration", bold=True)
    restarted = real.node(victim)
    click.secho(f"$ {restarted.argv[0]} ... kafka.Kafka {restarted.node_dir}/server.properties", fg="cyan")
    real.start_node(victim)
    real.wait_ready([victim])
    click.echo("   it registered again and is unfenced; waiting for its partition leaders to add it back to their")
    click.echo(
        f"   ISRs (AlterPartition) and the election every {LEADER_IMBALANCE_S} s to give it its leaderships back ..."
    )
    wait_for(lambda: _healed(via, brokers), HEAL_TIMEOUT_S,
             f"broker {victim} did not rejoin every ISR and lead again within {HEAL_TIMEOUT_S:g} s")  # fmt: skip
    run("Healed without an operator: whole ISRs, preferred leaders", "topics", "describe", *via, "--topic", TOPIC)
    _python(
        f"A consumer group reads all {2 * BATCH} messages: none lost, none twice",
        CONSUME.format(servers=servers, topic=TOPIC, count=2 * BATCH),
    )
    run("Stop the quorum and its brokers (the brokers first: each gets its controlled shutdown)",
        "quorum", "down", "--data-dir", str(data_dir))  # fmt: skip
    run("Replay this quorum's logs with Spark and verify them (the brokers' copies are observers', left out)",
        "verify", "--data-dir", str(data_dir), "--report-dir", str(data_dir / "report"))  # fmt: skip


def stop(data_dir: Path) -> None:
    """``quorum down`` for the tour's quorum, if it was started (the demo's cleanup)."""
    if (data_dir / local_quorum.QUORUM_FILE).exists():
        subprocess.run(raftmeta_command("quorum", "down", "--data-dir", str(data_dir)), capture_output=True,
                       check=False)  # fmt: skip
