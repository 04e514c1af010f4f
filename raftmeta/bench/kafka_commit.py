"""``raftmeta bench commit --target kraft|both``: the commit benchmark over the Kafka protocol,
against raftmeta and against a real KRaft cluster, with the same client code.

Each side is started fresh for each round (a raftmeta quorum of 3 nodes with Kafka listeners and
3 simulated brokers; KRaft: 3 controllers and 3 brokers); ``--clients`` tasks in this process,
each with a connection of its own (:class:`raftmeta.kafka.connection.KafkaConnection`), create
topics of ``--partitions`` partitions (RF 3), one topic per CreateTopics, back to back: first
``--warmup`` seconds not counted (both sides alike; KRaft's JVMs need it, see
:func:`kafka_commit_load`), then a warm-up second and ``--duration`` seconds measured. Where the
requests go is where each system's users send them: raftmeta's clients all connect to the
leader's Kafka listener (as the gRPC benchmark's do: a follower would forward, one more hop);
KRaft's spread over the brokers, which forward to the active controller (a KRaft controller
serves no CreateTopics from clients).

Figures per side, with the gRPC benchmark's keys: ``ops_per_s``, ``latency_ms`` (client-side
mean, p50, p99), ``records_per_s`` (the metadata log's high watermark growth over the window,
read from the leader with DescribeQuorum -- on KRaft, the active controller), ``node_cpu_ms_per_op``
(the voters: raftmeta's nodes, KRaft's controllers), ``leader_cpu_ms_per_op`` (the leader / the
active controller), ``brokers_cpu_ms_per_op`` (KRaft's brokers; raftmeta's simulated fleet),
``machine_busy_percent``, and ``client_cpu_percent``: this load generator's own CPU over the
window, in percent of one core -- near 100 it would be the bottleneck and the ratio meaningless.
With ``both`` the rounds alternate the order (raftmeta first in the first, third, ... rounds),
each round's ``ratio`` is of its own two measurements, and the document's are their medians.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from raftmeta.bench.commit import cpu_seconds, high_watermark_window, measure
from raftmeta.bench.compare import COMMIT_BETTER, SIDES, ratios, side_by_side
from raftmeta.bench.kafka_ops import create_topic
from raftmeta.bench.results import machine, median, percentile
from raftmeta.bench.sides import CLIENT_ID, Side, make_side
from raftmeta.kafka.connection import KafkaConnection

CONNECT_TIMEOUT_S = 10.0
CREATE_TIMEOUT_S = 30.0
REPLICATION_FACTOR = 3


class LeaderProbe:
    """What :func:`raftmeta.bench.commit.high_watermark_window` asks: the leader's DescribeQuorum."""

    def __init__(self, side: Side) -> None:
        self.side = side

    async def describe_quorum(self) -> Any:
        return await self.side.quorum_state()


async def kafka_commit_load(
    side: Side, clients: int, partitions: int, duration_s: float, warmup_s: float = 0.0
) -> dict[str, Any]:
    """The load against a started side, and its figures; ``warmup_s`` seconds of the same load
    first, not counted (a JVM just started runs interpreted code until its JIT has compiled the
    hot paths: measured at once, KRaft's creates/s grew by 25 % (1 client) to 60 % (8 clients)
    over its first 20 s here)."""
    state = await side.quorum_state()
    leader = state.leader_id
    addresses = side.admin_addresses(leader)
    if side.name == "raftmeta":
        addresses = addresses[:1]  # the leader's listener only (see the module's doc)
    connections = [
        await KafkaConnection.open(addresses[i % len(addresses)], CLIENT_ID, CONNECT_TIMEOUT_S) for i in range(clients)
    ]
    pool: asyncio.Queue[KafkaConnection] = asyncio.Queue()
    for connection in connections:
        pool.put_nowait(connection)
    prefix = f"k{os.getpid()}-{time.monotonic_ns() % 1_000_000}"
    counter = iter(range(1 << 62))

    async def create() -> None:
        connection = await pool.get()
        try:
            await create_topic(
                connection, f"{prefix}-{next(counter)}", partitions, REPLICATION_FACTOR, CREATE_TIMEOUT_S
            )
        finally:
            pool.put_nowait(connection)

    if warmup_s > 0:
        await measure(create, clients, warmup_s)
    voters = side.voter_pids()
    brokers = side.broker_pids()
    brokers_before = cpu_seconds(brokers)
    client_before, wall_before = time.process_time(), time.perf_counter()
    try:
        hw_task = asyncio.create_task(high_watermark_window(LeaderProbe(side), duration_s, voters, leader))
        load = await measure(create, clients, duration_s)
        window = await hw_task
    finally:
        await asyncio.gather(*(c.close() for c in connections))
    client_cpu_s, wall_s = time.process_time() - client_before, time.perf_counter() - wall_before
    brokers_after = cpu_seconds(brokers)
    lat = load.latencies

    def per_op_ms(cpu_s: float | None) -> float | None:
        return round(cpu_s * 1000 / len(lat), 3) if cpu_s is not None and lat else None

    # The brokers' CPU is read over warm-up and window alike: per create of the whole load.
    brokers_cpu = None if brokers_before is None or brokers_after is None else brokers_after - brokers_before
    return {
        "ops": len(lat),
        "ops_per_s": round(len(lat) / duration_s, 1),
        "records_per_s": round(window.records / duration_s, 1),
        "latency_ms": {
            "mean": round(sum(lat) * 1000 / len(lat), 3) if lat else None,
            "p50": round(median(lat) * 1000, 3) if lat else None,
            "p99": round(percentile(lat, 0.99) * 1000, 3) if lat else None,
        },
        "node_cpu_ms_per_op": per_op_ms(window.node_cpu_s),
        "leader_cpu_ms_per_op": per_op_ms(window.leader_cpu_s),
        "brokers_cpu_ms_per_op": per_op_ms(brokers_cpu * duration_s / wall_s if brokers_cpu is not None else None),
        "machine_busy_percent": window.machine_busy_percent,
        "client_cpu_percent": round(100 * client_cpu_s / wall_s, 1),
        "errors": load.errors,
        "request_path": "leader's Kafka listener"
        if side.name == "raftmeta"
        else "brokers, forwarded to the active controller",
    }


def measure_side(
    name: str,
    round_dir: Path,
    clients: int,
    partitions: int,
    duration_s: float,
    voters: int,
    brokers: int,
    warmup_s: float,
    raftmeta_node_args: Sequence[str] = (),
) -> dict[str, Any]:
    """Start the side fresh, run the load, stop it; its figures and its start-up time."""
    from raftmeta.server.app import run

    side = make_side(name, round_dir / name, voters, brokers, raftmeta_node_args if name == "raftmeta" else ())
    started = time.perf_counter()
    try:
        side.start()
        startup_s = round(time.perf_counter() - started, 2)
        figures = run(kafka_commit_load(side, clients, partitions, duration_s, warmup_s))
    finally:
        side.stop()
    return {**figures, "startup_s": startup_s}


def run_comparison(
    targets: tuple[str, ...],
    clients: int,
    partitions: int,
    duration_s: float,
    rounds: int,
    work_dir: Path,
    voters: int = 3,
    brokers: int = 3,
    warmup_s: float = 0.0,
    raftmeta_node_args: Sequence[str] = (),
) -> dict[str, Any]:
    """``rounds`` rounds of each side in ``targets`` on fresh processes, in alternating order;
    ``raftmeta_node_args`` go to raftmeta's nodes (``--fetch-rpc``, ``--node-arg``)."""
    from raftmeta.kraft.classpath import kafka_version

    load_before = os.getloadavg()
    version = kafka_version() if "kraft" in targets else None  # fails loudly without the release
    measured: list[dict[str, Any]] = []
    for index in range(rounds):
        order = list(targets) if index % 2 == 0 else list(reversed(targets))
        round_load = os.getloadavg()
        figures = {
            name: measure_side(
                name,
                work_dir / f"round-{index}",
                clients,
                partitions,
                duration_s,
                voters,
                brokers,
                warmup_s,
                raftmeta_node_args,
            )
            for name in order
        }
        entry: dict[str, Any] = {"order": order, **{name: figures[name] for name in SIDES if name in figures}}
        if len(figures) == 2:
            entry["ratio"] = ratios(figures["raftmeta"], figures["kraft"], COMMIT_BETTER)
        entry["load_average"] = {
            "before": [round(x, 2) for x in round_load],
            "after": [round(x, 2) for x in os.getloadavg()],
        }
        measured.append(entry)
    load_after = os.getloadavg()
    return {
        "benchmark": "commit",
        "target": "both" if len(targets) == 2 else targets[0],
        "protocol": "kafka",
        "kafka_version": version,
        "nodes": voters,
        "brokers": brokers,
        "clients": clients,
        "partitions": partitions,
        "replication_factor": REPLICATION_FACTOR,
        "duration_s": duration_s,
        "warmup_s": warmup_s,
        "raftmeta_node_args": list(raftmeta_node_args),
        **side_by_side(measured, COMMIT_BETTER),
        "rounds": measured,
        "load_average": {"before": [round(x, 2) for x in load_before], "after": [round(x, 2) for x in load_after]},
        "machine": machine(),
    }
