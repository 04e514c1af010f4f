"""``raftmeta bench failover --target kraft|both``: creates through the Kafka protocol while the
metadata log's leader is killed (SIGKILL) or paused (SIGSTOP), on raftmeta and on a real KRaft
cluster, with the same client code.

For each ``--fault``, each side is started fresh and runs ``--rounds`` rounds; with ``both`` the
rounds alternate between the sides (raftmeta first in the first, third, ... rounds), the idle
side waiting without load. A round: ``--clients`` tasks, each with its own connection, create
one-partition topics back to back for a second; the leader (a raftmeta node; KRaft's active
controller) is broken; the round measures, from the signal, ``failover_ms`` -- the first
acknowledgement of a create *sent after* it -- ``all_clients_ms`` and ``slowest_create_ms`` as
the gRPC benchmark does (:func:`raftmeta.bench.failover.measure_round`); then the load stops, the
leader is healed (restarted, or resumed) and must catch up (DescribeQuorum: its log end offset at
the high watermark) before the next round.

Where the clients go: on KRaft, the brokers (which forward to the active controller; no broker is
broken); on raftmeta, every node's Kafka listener, each client starting at another (as the gRPC
benchmark's clients do), so some are connected to the leader that breaks. A client whose
connection breaks, or whose create has no answer within ``ATTEMPT_TIMEOUT_S`` (a paused process
never answers), moves on to the next address; an error answer is retried after a short backoff.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any, Final

from raftmeta.bench.compare import SIDES, failover_better, meets_target, ratios
from raftmeta.bench.failover import Acks, Sample, figures, measure_round
from raftmeta.bench.kafka_ops import KafkaError, create_topic
from raftmeta.bench.results import machine
from raftmeta.bench.sides import CLIENT_ID, Fault, Side, make_side
from raftmeta.cli.common import CheckFailed
from raftmeta.kafka.connection import KafkaConnection
from raftmeta.logs import get_logger

STEADY_S: Final = 1.0  # load before each fault
# How long a create may go unanswered before the client gives up on its connection (Kafka's
# AdminClient waits request.timeout.ms, 30 s, which a paused process would fill).
ATTEMPT_TIMEOUT_S: Final = 5.0
BACKOFF_S: Final = 0.005
CATCH_UP_TIMEOUT_S: Final = 120.0
# How long a round waits for every client's first create after the fault. Longer than the gRPC
# benchmark's 30 s: a KRaft broker's request to a paused controller is only retried elsewhere
# after its own request.timeout.ms (30 s by default), so a KRaft pause round takes that long.
ROUND_TIMEOUT_S: Final = 120.0
log = get_logger("bench.kafka-failover")


async def kafka_load(addresses: list[str], clients: int, acks: Acks, stop: asyncio.Event) -> None:
    prefix = f"kf{os.getpid()}-{time.monotonic_ns() % 1_000_000}"

    async def worker(index: int) -> None:
        rotated = addresses[index % len(addresses) :] + addresses[: index % len(addresses)]
        position = 0
        connection: KafkaConnection | None = None
        seq = 0
        try:
            while not stop.is_set():
                if connection is None or connection.broken:
                    if connection is not None:
                        await connection.close()
                        position += 1
                    try:
                        address = rotated[position % len(rotated)]
                        connection = await KafkaConnection.open(address, CLIENT_ID, ATTEMPT_TIMEOUT_S)
                    except (OSError, TimeoutError):
                        connection = None
                        position += 1
                        acks.errors += 1
                        await asyncio.sleep(BACKOFF_S)
                        continue
                seq += 1
                sent = time.monotonic()
                try:
                    await create_topic(connection, f"{prefix}-{index}-{seq}", 1, 3, ATTEMPT_TIMEOUT_S)
                except (KafkaError, OSError, TimeoutError):
                    acks.errors += 1  # a broken connection is replaced at the loop's top
                    await asyncio.sleep(BACKOFF_S)
                    continue
                acks.times.append((index, sent, time.monotonic()))
        finally:
            if connection is not None:
                await connection.close()

    await asyncio.gather(*(worker(i) for i in range(clients)))


async def one_round(side: Side, fault: Fault, clients: int) -> tuple[Sample, int]:
    """Break the leader under load, measure, heal, wait for its catch-up; the sample and the
    clients' errors."""
    leader = (await side.quorum_state()).leader_id
    acks = Acks()
    stop = asyncio.Event()
    runner = asyncio.create_task(kafka_load(side.admin_addresses(leader), clients, acks, stop))
    try:
        await asyncio.sleep(STEADY_S)
        leader = (await side.quorum_state()).leader_id
        broken = time.monotonic()
        await side.inject(fault, leader)
        sample = await measure_round(acks, broken, clients, ROUND_TIMEOUT_S)
    finally:
        stop.set()
        await runner
    log.info("failover round", side=side.name, fault=fault, leader=leader, **sample.__dict__)
    await side.heal(fault, leader)
    await caught_up(side, leader)
    return sample, acks.errors


async def caught_up(side: Side, node_id: int) -> None:
    deadline = time.monotonic() + CATCH_UP_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            state = await side.quorum_state()
        except ConnectionError:
            state = None
        if state is not None and state.leader_id != node_id and state.caught_up(node_id):
            return
        await asyncio.sleep(0.05)
    raise CheckFailed(f"{side.name}: voter {node_id} did not catch up within {CATCH_UP_TIMEOUT_S} s of its healing")


def summary(samples: list[Sample], errors: int) -> dict[str, Any]:
    return {
        "failover_ms": figures([s.failover_ms for s in samples]),
        "samples_ms": [s.failover_ms for s in samples],
        "all_clients_ms": figures([s.all_clients_ms for s in samples]),
        "all_clients_samples_ms": [s.all_clients_ms for s in samples],
        "slowest_create_ms": figures([s.slowest_create_ms for s in samples]),
        "client_errors": errors,
    }


def run_fault(
    fault: Fault, targets: tuple[str, ...], count: int, clients: int, work_dir: Path, voters: int
) -> tuple[dict[str, dict[str, Any]], list[list[str]]]:
    """Every side of ``targets`` started for this fault, ``count`` rounds alternating between them."""
    from raftmeta.server.app import run

    sides = {name: make_side(name, work_dir / name, voters) for name in targets}
    samples: dict[str, list[Sample]] = {name: [] for name in targets}
    errors = dict.fromkeys(targets, 0)
    orders: list[list[str]] = []
    try:
        for side in sides.values():
            side.start()
        for index in range(count):
            order = list(targets) if index % 2 == 0 else list(reversed(targets))
            orders.append(order)
            for name in order:
                sample, round_errors = run(one_round(sides[name], fault, clients))
                samples[name].append(sample)
                errors[name] += round_errors
    finally:
        for side in sides.values():
            side.stop()
    return {name: summary(samples[name], errors[name]) for name in targets}, orders


def run_comparison(
    targets: tuple[str, ...], count: int, clients: int, faults: tuple[Fault, ...], work_dir: Path, voters: int = 3
) -> dict[str, Any]:
    from raftmeta.kraft.classpath import kafka_version

    load_before = os.getloadavg()
    version = kafka_version() if "kraft" in targets else None  # fails loudly without the release
    per_side: dict[str, dict[str, Any]] = {name: {"faults": {}} for name in targets}
    orders: dict[str, list[list[str]]] = {}
    for fault in faults:
        results, orders[fault] = run_fault(fault, targets, count, clients, work_dir / fault, voters)
        for name, result in results.items():
            per_side[name]["faults"][fault] = result
    for document in per_side.values():
        first = document["faults"][faults[0]]
        # The first fault's figures at the top level, as the gRPC benchmark's document has them.
        document["failover_ms"] = first["failover_ms"]
        document["samples_ms"] = first["samples_ms"]
        document["client_errors"] = sum(f["client_errors"] for f in document["faults"].values())
    comparison: dict[str, Any] = {name: per_side[name] for name in SIDES if name in per_side}
    if len(targets) == 2:
        better = failover_better(faults)
        comparison["ratio"] = ratios(per_side["raftmeta"], per_side["kraft"], better)
        comparison["ratio_better"] = better
        comparison["meets_target"] = meets_target(comparison["ratio"], better)
    return {
        "benchmark": "failover",
        "target": "both" if len(targets) == 2 else targets[0],
        "protocol": "kafka",
        "kafka_version": version,
        "nodes": voters,
        "rounds": count,
        "clients": clients,
        "attempt_timeout_s": ATTEMPT_TIMEOUT_S,
        **comparison,
        "order": orders,
        "load_average": {"before": [round(x, 2) for x in load_before], "after": [round(x, 2) for x in os.getloadavg()]},
        "machine": machine(),
    }
