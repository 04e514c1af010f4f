"""``raftmeta bench failover``: how long creates stop when the leader dies.

A local quorum (default timeouts, fsync on) runs a steady create load (``--clients`` tasks in
this process, one topic per request, each client with every node in its bootstrap list and quick
retries). Each round SIGKILLs the leader and measures the time from the kill to the first create
acknowledged by a surviving node -- a create that the new leader committed, since the old leader
is dead. Only creates *sent* after the kill count: one sent before it may have been committed by
the old leader and answered a moment later (a conservative rule: it adds up to one commit
latency when every client was waiting on the dead leader). Then the killed node is restarted and
must catch up (its log end offset equal to the high watermark) before the next round. Reported:
the median, p99 and max over ``--rounds`` rounds (and every sample), never asserted.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from raftmeta.bench.results import machine, median, percentile, scratch_dir, write_result
from raftmeta.cli.common import CheckFailed, emit_json, output_option
from raftmeta.v1 import controller_pb2

ROUND_TIMEOUT_S = 30.0
STEADY_S = 1.0  # load before each kill


@dataclass
class Acks:
    """Creates acknowledged: (monotonic time sent, monotonic time acknowledged)."""

    times: list[tuple[float, float]] = field(default_factory=list)
    errors: int = 0


async def load(addresses: list[str], clients: int, acks: Acks, stop: asyncio.Event) -> None:
    from raftmeta.client import ClientError, ControllerClient, RetryPolicy

    # Quick retries: the benchmark measures the quorum, not the client's backoff.
    retry = RetryPolicy(deadline_s=ROUND_TIMEOUT_S, attempt_timeout_s=2.0, initial_backoff_s=0.005, max_backoff_s=0.05)
    prefix = f"f{os.getpid()}-{time.monotonic_ns() % 1_000_000}"

    async def worker(index: int) -> None:
        # Each client starts at another node: some are connected to the leader when it dies.
        rotated = addresses[index % len(addresses) :] + addresses[: index % len(addresses)]
        async with ControllerClient(rotated, retry=retry) as client:
            seq = 0
            while not stop.is_set():
                seq += 1
                topic = controller_pb2.CreatableTopic(name=f"{prefix}-{index}-{seq}", num_partitions=1)
                topic.replication_factor = 3
                sent = time.monotonic()
                try:
                    await client.create_topics(controller_pb2.CreateTopicsRequest(topics=[topic]))
                except ClientError:
                    acks.errors += 1
                    continue
                acks.times.append((sent, time.monotonic()))

    await asyncio.gather(*(worker(i) for i in range(clients)))


async def rounds(quorum: Any, count: int, clients: int) -> tuple[list[float], int]:
    from raftmeta import local_quorum
    from raftmeta.client import ControllerClient, RetryPolicy

    addresses = [n.address for n in quorum.nodes]
    acks = Acks()
    stop = asyncio.Event()
    runner = asyncio.create_task(load(addresses, clients, acks, stop))
    samples: list[float] = []
    probe_retry = RetryPolicy(deadline_s=ROUND_TIMEOUT_S, attempt_timeout_s=1.0, initial_backoff_s=0.01)
    try:
        async with ControllerClient(addresses, retry=probe_retry) as probe:
            for _ in range(count):
                await asyncio.sleep(STEADY_S)
                leader = quorum.node((await probe.describe_quorum()).leader_id)
                local_quorum.signal_node(quorum, leader.id, signal.SIGKILL)
                killed = time.monotonic()
                samples.append(await first_ack_after(acks, killed))
                await wait_exit(leader.pid)
                local_quorum.restart(quorum, leader.id)
                await caught_up(probe, leader.id)
    finally:
        stop.set()
        await runner
    return samples, acks.errors


async def first_ack_after(acks: Acks, killed: float) -> float:
    """Milliseconds from the kill to the first acknowledgement of a create sent after it."""
    deadline = killed + ROUND_TIMEOUT_S
    seen = 0
    while time.monotonic() < deadline:
        for sent, acknowledged in acks.times[seen:]:
            if sent >= killed:
                return (acknowledged - killed) * 1000
        seen = len(acks.times)
        await asyncio.sleep(0.001)
    raise CheckFailed(f"no create was acknowledged within {ROUND_TIMEOUT_S} s of killing the leader")


async def wait_exit(pid: int) -> None:
    from raftmeta import local_quorum

    for _ in range(1000):
        if not local_quorum.alive(pid):
            return
        await asyncio.sleep(0.01)
    raise CheckFailed(f"the killed leader (pid {pid}) did not exit")


async def caught_up(probe: Any, node_id: int) -> None:
    deadline = time.monotonic() + ROUND_TIMEOUT_S
    while time.monotonic() < deadline:
        status = await probe.describe_quorum()
        if any(v.replica_id == node_id and v.lag == 0 and v.log_end_offset > 0 for v in status.voters):
            return
        await asyncio.sleep(0.05)
    raise CheckFailed(f"node {node_id} did not catch up within {ROUND_TIMEOUT_S} s of its restart")


def run_benchmark(nodes: int, count: int, clients: int, work_dir: Path) -> dict[str, Any]:
    from raftmeta import local_quorum
    from raftmeta.server.app import event_loop_name, run
    from raftmeta.server.config import NodeConfig

    load_before = os.getloadavg()
    quorum = local_quorum.up(work_dir / "quorum", nodes=nodes, brokers=3, racks=3)
    try:
        samples, errors = run(rounds(quorum, count, clients))
    finally:
        local_quorum.down(quorum)
    defaults = NodeConfig(node_id=1, listen="127.0.0.1:1", voters={1: "127.0.0.1:1"}, data_dir=work_dir, cluster_id="x")
    return {
        "benchmark": "failover",
        "nodes": nodes,
        "rounds": count,
        "clients": clients,
        "failover_ms": {
            "median": round(median(samples), 1),
            "p99": round(percentile(samples, 0.99), 1),
            "max": round(max(samples), 1),
        },
        "samples_ms": [round(s, 1) for s in samples],
        "client_errors": errors,
        "timeouts_ms": {
            "fetch": defaults.fetch_timeout_ms,
            "election": defaults.election_timeout_ms,
            "fetch_max_wait": defaults.fetch_max_wait_ms,
        },
        "event_loop": event_loop_name(),
        "load_average": {"before": [round(x, 2) for x in load_before], "after": [round(x, 2) for x in os.getloadavg()]},
        "machine": machine(),
    }


@click.command()
@click.option("--nodes", type=click.IntRange(3, 9), default=3, show_default=True)
@click.option("--rounds", "count", type=click.IntRange(1, 1000), default=10, show_default=True)
@click.option("--clients", type=click.IntRange(1, 256), default=4, show_default=True, help="Create-load tasks.")
@click.option(
    "--work-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Scratch directory (default: a new temp dir, removed after).",
)
@click.option("--result-file", type=click.Path(dir_okay=False, path_type=Path), default=None)
@output_option
def command(nodes: int, count: int, clients: int, work_dir: Path | None, result_file: Path | None, output: str) -> None:
    """Time from SIGKILL of the leader to the first create acknowledged by the new leader."""
    with scratch_dir(work_dir, "failover") as scratch:
        document = run_benchmark(nodes, count, clients, scratch)
    write_result(document, result_file)
    if output == "json":
        emit_json(document)
        return
    figures = document["failover_ms"]
    click.echo(
        f"{count} rounds: failover median {figures['median']} ms, p99 {figures['p99']} ms, max {figures['max']} ms "
        f"(samples {document['samples_ms']})"
    )
