"""``raftmeta bench failover``: how long creates stop when the leader dies, hangs or is cut off.

A local quorum (default timeouts, fsync on) runs a steady create load: ``--clients`` tasks in
this process, one topic per request, each with its own client whose bootstrap list holds every
node (starting at a different one), with the client's own retry policy -- its default per-attempt
deadline and its watch of a call that takes long (raftmeta/client/__init__.py) -- and quick backoff. Each
round breaks the leader with one ``--fault``:

- ``kill``: SIGKILL. Its followers see the connection refused and elect at once (the node's
  dead-leader probe): the floor is the successor's 100 ms rank delay plus the election's rounds.
- ``pause``: SIGSTOP. The process accepts connections and answers nothing: only the followers'
  fetch timeout (2 s by default) can judge it, then one pre-vote and one vote round elect a
  successor, whose first commit (its LeaderChangeRecord) makes it active. The floor is the fetch
  timeout; the rounds add milliseconds.
- ``partition``: every link to and from the leader drops its bytes -- the other nodes' and the
  clients' -- through the chaos package's TCP proxies (raftmeta/chaos/proxy.py; this quorum's
  peer and client traffic all cross them). The same floor as a pause; the old leader keeps
  running and resigns after 1.5 fetch timeouts without a majority (check quorum).

and measures, from the fault: ``failover_ms``, the first acknowledgement of a create *sent after*
the fault (so committed by the new leader: one sent before may have been committed by the old
leader and answered a moment later, a conservative rule); ``all_clients_ms``, the time by which
every client has had such an acknowledgement (a client stuck on the broken leader shows here);
and ``slowest_create_ms``, the longest any create acknowledged meanwhile took (what a user who
issued it while the leader hung waited). Then the fault is healed (the killed node restarted,
the paused one resumed, the links restored) and the old leader must catch up (its log end offset
equal to the high watermark) before the next round. Medians, p99 and max over ``--rounds``
rounds per fault, every sample, never asserted. Each fault kind runs on a quorum of its own.
"""

from __future__ import annotations

import abc
import asyncio
import os
import signal
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import click

from raftmeta.bench.compare import SIDES, TARGETS
from raftmeta.bench.results import (
    machine,
    median,
    percentile,
    refuse_options_given,
    result_file_option,
    scratch_dir,
    work_dir_option,
    write_result,
)
from raftmeta.cli.common import CheckFailed, emit_json, output_option
from raftmeta.logs import get_logger
from raftmeta.v1 import controller_pb2

ROUND_TIMEOUT_S = 30.0
STEADY_S = 1.0  # load before each fault
Fault = Literal["kill", "pause", "partition"]
FAULTS: tuple[Fault, ...] = ("kill", "pause", "partition")
# The core starts the first-ranked successor of a leader whose process is gone after this long
# (raftmeta/controller/quorum.py, QuorumController.leader_gone).
RANK_DELAY_MS = 100
CLIENTS_NODE_ID = 0  # the bench's clients, as one end of the proxied links (node ids start at 1)
log = get_logger("bench.failover")


@dataclass
class Acks:
    """Creates acknowledged: (client index, monotonic time sent, monotonic time acknowledged)."""

    times: list[tuple[int, float, float]] = field(default_factory=list)
    errors: int = 0


@dataclass(frozen=True)
class Sample:
    failover_ms: float
    all_clients_ms: float
    slowest_create_ms: float


def load_retry(probe_after_s: float | None) -> Any:
    """The load's retry policy: the client's defaults (per-attempt deadline, watch), quick backoff
    (the benchmark measures the quorum, not the backoff), the round's whole budget."""
    from raftmeta.client import RetryPolicy

    policy = RetryPolicy(deadline_s=ROUND_TIMEOUT_S, initial_backoff_s=0.005, max_backoff_s=0.05)
    if probe_after_s is not None:
        policy = replace(policy, probe_after_s=probe_after_s)
    return policy


async def load(addresses: list[str], clients: int, acks: Acks, stop: asyncio.Event, retry: Any) -> None:
    from raftmeta.client import ClientError, ControllerClient

    prefix = f"f{os.getpid()}-{time.monotonic_ns() % 1_000_000}"

    async def worker(index: int) -> None:
        # Each client starts at another node: some are connected to the leader when it breaks.
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
                acks.times.append((index, sent, time.monotonic()))

    await asyncio.gather(*(worker(i) for i in range(clients)))


# -- the quorum and its faults ---------------------------------------------------------------------
class Target(abc.ABC):
    """A running quorum the rounds break and heal. ``client_addresses`` are what the load dials;
    ``probe_addresses`` what the bench's own probe (leader, catch-up) dials."""

    client_addresses: list[str]
    probe_addresses: list[str]

    @abc.abstractmethod
    async def start(self) -> None: ...

    @abc.abstractmethod
    def pid(self, node_id: int) -> int: ...

    @abc.abstractmethod
    async def inject(self, fault: Fault, node_id: int) -> None: ...

    @abc.abstractmethod
    async def heal(self, fault: Fault, node_id: int) -> None: ...

    @abc.abstractmethod
    async def close(self) -> None: ...


class LocalTarget(Target):
    """Nodes on their own addresses (no proxies): kill and pause."""

    def __init__(self, work_dir: Path, nodes: int) -> None:
        self.work_dir = work_dir
        self.nodes = nodes
        self.quorum: Any = None

    async def start(self) -> None:
        from raftmeta.local import quorum as local_quorum

        self.quorum = await asyncio.to_thread(
            local_quorum.up, self.work_dir / "quorum", nodes=self.nodes, brokers=3, racks=3
        )
        self.client_addresses = [n.address for n in self.quorum.nodes]
        self.probe_addresses = self.client_addresses

    def pid(self, node_id: int) -> int:
        pid: int = self.quorum.node(node_id).pid
        return pid

    async def inject(self, fault: Fault, node_id: int) -> None:
        from raftmeta.local import quorum as local_quorum

        sig = {"kill": signal.SIGKILL, "pause": signal.SIGSTOP}[fault]
        local_quorum.signal_node(self.quorum, node_id, sig)

    async def heal(self, fault: Fault, node_id: int) -> None:
        from raftmeta.local import quorum as local_quorum

        if fault == "pause":
            local_quorum.signal_node(self.quorum, node_id, signal.SIGCONT)
            return
        await wait_exit(self.pid(node_id))
        local_quorum.restart(self.quorum, node_id)

    async def close(self) -> None:
        from raftmeta.local import quorum as local_quorum

        if self.quorum is not None:
            await asyncio.to_thread(local_quorum.down, self.quorum)


class ProxiedTarget(Target):
    """Every link through a proxy of this process (the chaos cluster, plus one proxy per node for
    the bench's clients), with the nodes' default timeouts: partition."""

    def __init__(self, work_dir: Path, nodes: int) -> None:
        from raftmeta.chaos.cluster import ChaosCluster, ClusterConfig
        from raftmeta.server.config import NodeConfig

        defaults = NodeConfig(
            node_id=1, listen="127.0.0.1:1", voters={1: "127.0.0.1:1"}, data_dir=work_dir, cluster_id="x"
        )
        config = ClusterConfig(
            nodes=nodes,
            brokers=3,
            racks=3,
            fetch_timeout_ms=defaults.fetch_timeout_ms,
            election_timeout_ms=defaults.election_timeout_ms,
            session_timeout_ms=9000,  # `raftmeta node`'s default
            snapshot_interval_records=defaults.snapshot_interval_records,
        )
        self.cluster = ChaosCluster(config, work_dir / "quorum")
        self.client_proxies: list[Any] = []

    async def start(self) -> None:
        from raftmeta.chaos.proxy import LinkProxy
        from raftmeta.local import quorum as local_quorum

        await self.cluster.start()
        ids = self.cluster.node_ids
        ports = local_quorum.free_ports(len(ids))
        self.client_proxies = [
            LinkProxy(CLIENTS_NODE_ID, i, port, self.cluster.address(i), self.cluster.network)
            for i, port in zip(ids, ports, strict=True)
        ]
        for proxy in self.client_proxies:
            await proxy.start()
        self.client_addresses = [proxy.address for proxy in self.client_proxies]
        # The bench's probe reads the quorum's state around the rounds, never during a partition.
        self.probe_addresses = [self.cluster.address(i) for i in ids]

    def pid(self, node_id: int) -> int:
        assert self.cluster.quorum is not None
        return self.cluster.quorum.node(node_id).pid

    def links(self, node_id: int) -> set[tuple[int, int]]:
        others = [CLIENTS_NODE_ID, *(i for i in self.cluster.node_ids if i != node_id)]
        return {(node_id, o) for o in others} | {(o, node_id) for o in others}

    async def inject(self, fault: Fault, node_id: int) -> None:
        self.cluster.network.block(self.links(node_id))

    async def heal(self, fault: Fault, node_id: int) -> None:
        self.cluster.network.unblock(self.links(node_id))

    async def close(self) -> None:
        await asyncio.gather(*(proxy.close() for proxy in self.client_proxies), return_exceptions=True)
        await self.cluster.close()


# -- the rounds ------------------------------------------------------------------------------------
async def rounds(target: Target, fault: Fault, count: int, clients: int, retry: Any) -> tuple[list[Sample], int]:
    from raftmeta.client import ControllerClient, RetryPolicy

    acks = Acks()
    stop = asyncio.Event()
    runner = asyncio.create_task(load(target.client_addresses, clients, acks, stop, retry))
    samples: list[Sample] = []
    probe_retry = RetryPolicy(deadline_s=ROUND_TIMEOUT_S, attempt_timeout_s=1.0, initial_backoff_s=0.01)
    try:
        async with ControllerClient(target.probe_addresses, retry=probe_retry) as probe:
            for _ in range(count):
                await asyncio.sleep(STEADY_S)
                leader = (await probe.describe_quorum()).leader_id
                await target.inject(fault, leader)
                broken = time.monotonic()
                samples.append(await measure_round(acks, broken, clients))
                log.info("failover round", fault=fault, leader=leader, **samples[-1].__dict__)
                await target.heal(fault, leader)
                await caught_up(probe, leader)
    finally:
        stop.set()
        await runner
    return samples, acks.errors


async def measure_round(acks: Acks, broken: float, clients: int, timeout_s: float = ROUND_TIMEOUT_S) -> Sample:
    """Wait (up to ``timeout_s``) until every client has had a create sent after the fault acknowledged."""
    deadline = broken + timeout_s
    first: dict[int, float] = {}  # client -> its first acknowledgement of a create sent after the fault
    seen = 0
    while len(first) < clients:
        if time.monotonic() > deadline:
            raise CheckFailed(
                f"{clients - len(first)} of {clients} clients had no create acknowledged within "
                f"{timeout_s} s of the fault"
            )
        for index, sent, acknowledged in acks.times[seen:]:
            if sent >= broken and index not in first:
                first[index] = acknowledged
        seen = len(acks.times)
        await asyncio.sleep(0.001)
    everyone = max(first.values())
    slowest = max(
        (acknowledged - sent for _, sent, acknowledged in acks.times if acknowledged >= broken and sent <= everyone),
        default=0.0,
    )
    return Sample(
        round((min(first.values()) - broken) * 1000, 1),
        round((everyone - broken) * 1000, 1),
        round(slowest * 1000, 1),
    )


async def wait_exit(pid: int) -> None:
    from raftmeta.local import quorum as local_quorum

    for _ in range(1000):
        if not local_quorum.alive(pid):
            return
        await asyncio.sleep(0.01)
    raise CheckFailed(f"the killed leader (pid {pid}) did not exit")


async def caught_up(probe: Any, node_id: int) -> None:
    deadline = time.monotonic() + ROUND_TIMEOUT_S
    while time.monotonic() < deadline:
        status = await probe.describe_quorum()
        if status.leader_id != node_id and any(
            v.replica_id == node_id and v.lag == 0 and v.log_end_offset > 0 for v in status.voters
        ):
            return
        await asyncio.sleep(0.05)
    raise CheckFailed(f"node {node_id} did not catch up within {ROUND_TIMEOUT_S} s of the fault's end")


def figures(values: list[float]) -> dict[str, float]:
    return {
        "median": round(median(values), 1),
        "p99": round(percentile(values, 0.99), 1),
        "max": round(max(values), 1),
    }


def floor_of(fault: Fault, fetch_timeout_ms: int) -> dict[str, Any]:
    if fault == "kill":
        return {
            "floor_ms": RANK_DELAY_MS,
            "floor": "the first-ranked successor's delay after the dead-leader probe (a refused connect); "
            "the pre-vote, vote and first-commit rounds add a few ms",
        }
    return {
        "floor_ms": fetch_timeout_ms,
        "floor": "the followers' fetch timeout (a hung leader cannot be told from a slow one sooner); "
        "one pre-vote round, one vote round and the new leader's first commit add a few ms",
    }


def run_fault(
    fault: Fault, nodes: int, count: int, clients: int, work_dir: Path, retry: Any
) -> tuple[list[Sample], int]:
    from raftmeta.server.app import run

    async def go() -> tuple[list[Sample], int]:
        target: Target = ProxiedTarget(work_dir, nodes) if fault == "partition" else LocalTarget(work_dir, nodes)
        try:
            await target.start()
            return await rounds(target, fault, count, clients, retry)
        finally:
            await target.close()

    return run(go())


def run_benchmark(
    nodes: int,
    count: int,
    clients: int,
    work_dir: Path,
    faults: tuple[Fault, ...] = ("kill",),
    probe_after_s: float | None = None,
) -> dict[str, Any]:
    from raftmeta.server.app import event_loop_name
    from raftmeta.server.config import NodeConfig

    load_before = os.getloadavg()
    defaults = NodeConfig(node_id=1, listen="127.0.0.1:1", voters={1: "127.0.0.1:1"}, data_dir=work_dir, cluster_id="x")
    retry = load_retry(probe_after_s)
    per_fault: dict[str, dict[str, Any]] = {}
    errors = 0
    for fault in faults:
        samples, fault_errors = run_fault(fault, nodes, count, clients, work_dir / fault, retry)
        errors += fault_errors
        per_fault[fault] = {
            "failover_ms": figures([s.failover_ms for s in samples]),
            "samples_ms": [s.failover_ms for s in samples],
            "all_clients_ms": figures([s.all_clients_ms for s in samples]),
            "all_clients_samples_ms": [s.all_clients_ms for s in samples],
            "slowest_create_ms": figures([s.slowest_create_ms for s in samples]),
            "client_errors": fault_errors,
            **floor_of(fault, defaults.fetch_timeout_ms),
        }
    first = per_fault[faults[0]]
    return {
        "benchmark": "failover",
        "nodes": nodes,
        "rounds": count,
        "clients": clients,
        "faults": per_fault,
        # The first fault's figures at the top level, as before --fault existed.
        "failover_ms": first["failover_ms"],
        "samples_ms": first["samples_ms"],
        "client_errors": errors,
        "client": {
            "attempt_timeout_s": retry.attempt_timeout_s,
            "probe_after_s": retry.probe_after_s,
            "probe_interval_s": retry.probe_interval_s,
            "probe_timeout_s": retry.probe_timeout_s,
        },
        "timeouts_ms": {
            "fetch": defaults.fetch_timeout_ms,
            "election": defaults.election_timeout_ms,
            "fetch_max_wait": defaults.fetch_max_wait_ms,
            "request": defaults.request_timeout_ms,
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
    "--fault",
    "faults",
    type=click.Choice(FAULTS),
    multiple=True,
    default=("kill",),
    show_default=True,
    help="How the leader is broken each round: SIGKILL, SIGSTOP, or cut off from every peer and "
    "client (repeat it to run several, each on a quorum of its own).",
)
@click.option(
    "--client-probe-after",
    "probe_after_s",
    type=click.FloatRange(min=0),
    default=None,
    help="The load clients' RetryPolicy.probe_after_s (0: no watch, the per-attempt deadline "
    "alone); default: the client's.",
)
@click.option(
    "--target",
    type=click.Choice(TARGETS),
    default="raftmeta",
    show_default=True,
    help="raftmeta: this benchmark over gRPC; kraft or both: over the Kafka protocol against a real "
    "KRaft cluster, raftmeta, or both with their rounds alternating (raftmeta/bench/kafka_failover.py).",
)
@work_dir_option
@result_file_option
@output_option
def command(
    nodes: int,
    count: int,
    clients: int,
    faults: tuple[Fault, ...],
    probe_after_s: float | None,
    target: str,
    work_dir: Path | None,
    result_file: Path | None,
    output: str,
) -> None:
    """Time from breaking the leader to the first create acknowledged by the new leader."""
    if target != "raftmeta":
        refuse_options_given(
            {"probe_after_s": "--client-probe-after"},
            "it sets the gRPC load clients' retry policy, so it applies to --target raftmeta only "
            "(the Kafka-protocol clients of --target kraft|both move on after their own attempt timeout)",
        )
        compare_command(target, nodes, count, clients, faults, work_dir, result_file, output)
        return
    if nodes not in (3, 5) and "partition" in faults:
        raise click.UsageError("--fault partition runs 3 or 5 nodes (the chaos cluster's sizes)")
    ordered = tuple(dict.fromkeys(faults))
    with scratch_dir(work_dir, "failover") as scratch:
        document = run_benchmark(nodes, count, clients, scratch, ordered, probe_after_s)
    write_result(document, result_file)
    if output == "json":
        emit_json(document)
        return
    for fault, result in document["faults"].items():
        fig, everyone = result["failover_ms"], result["all_clients_ms"]
        click.echo(
            f"{fault}, {count} rounds: first create {fig['median']} ms median, {fig['p99']} ms p99, "
            f"{fig['max']} ms max; every client {everyone['median']} / {everyone['p99']} ms; "
            f"floor {result['floor_ms']} ms (samples {result['samples_ms']})"
        )


def compare_command(
    target: str,
    nodes: int,
    count: int,
    clients: int,
    faults: tuple[Fault, ...],
    work_dir: Path | None,
    result_file: Path | None,
    output: str,
) -> None:
    """``--target kraft|both``: the Kafka-protocol rounds on each side, and their report."""
    from raftmeta.bench.kafka_failover import run_comparison

    if "partition" in faults:
        raise click.UsageError("--fault partition runs with --target raftmeta only (its proxies carry gRPC links)")
    kinds: tuple[Literal["kill", "pause"], ...] = tuple(f for f in dict.fromkeys(faults) if f != "partition")
    targets = SIDES if target == "both" else (target,)
    with scratch_dir(work_dir, "failover") as scratch:
        document = run_comparison(targets, count, clients, kinds, scratch, nodes)
    write_result(document, result_file)
    if output == "json":
        emit_json(document)
        return
    for name in SIDES:
        for fault, result in document.get(name, {}).get("faults", {}).items():
            fig = result["failover_ms"]
            click.echo(
                f"{name}, {fault}, {count} rounds: first create {fig['median']} ms median, {fig['p99']} ms p99 "
                f"(samples {result['samples_ms']})"
            )
    if "ratio" in document:
        click.echo(f"raftmeta/kraft: {document['ratio']}")
