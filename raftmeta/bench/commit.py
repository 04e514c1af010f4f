"""``raftmeta bench commit``: committed creates/s, records/s and latency of a real local quorum,
next to the floors of the same machine measured in the same run.

The run, all on loopback in a scratch directory (the same filesystem for every file):

1. floors: a trivial grpc.aio unary echo server in a separate process (raw bytes, no protobuf,
   the node's event loop), called by the same number of client tasks over one channel from this
   process, as the load below is; the RTT with one call outstanding; and a loop of 100-byte
   appends + fsync on the quorum's filesystem; and the bare-Raft floor
   (:mod:`raftmeta.bench.raft_floor`: three processes with the node's transport, Fetch stream,
   disk writer and client path, and no controller), its p50 with one client (``raft_p50_ms``)
   and its creates/s with ``--clients`` (``raft_ops_per_s``).
2. a quorum of ``--nodes`` node processes (fsync on, default timeouts) and ``--brokers``
   simulated brokers (their ISR check pushed past the run: FLEET_ISR_CHECK_INTERVAL_MS);
   ``--clients`` tasks in this process each create topics of ``--partitions`` partitions (RF 3),
   one topic per request, back to back, through the leader (a follower would forward: one more
   hop). A warm-up second is not counted.

``ops_per_s``: acknowledged CreateTopics per second; ``records_per_s``: growth of the leader's
high watermark per second (every committed record: topics, partitions, request records);
``latency_ms``: client-side p50/p99 of the acknowledged creates; ``node_commit_latency_ms``: the
leader's own commit latency over the window (its ``raftmeta_raft_commit_latency_seconds``
histogram, docs/metrics.md: append to commit, without the client's trip and the controller's work);
``node_cpu_ms_per_op``: CPU time (user + system, from /proc) of all node processes over the measured
window per acknowledged create -- steadier than throughput on a shared machine, so A/B comparisons quote it too;
``leader_cpu_ms_per_op``: the leader's share of it (with small requests the leader's event loop is
the bottleneck); ``machine_busy_percent``: how busy all CPUs were over the window (/proc/stat) --
well under 100 % with the leader at one core means the run was bound by the leader's one thread,
not by the machine. ``ratios``: the node's figures over the floors of the same run -- creates/s
over the echo server's calls/s and over the bare-Raft floor's creates/s (same clients), p50 over
RTT + 2 fsyncs and over the bare-Raft p50 (same clients), node CPU per create over the floor's.
``--rounds N`` measures the bare-Raft floor and the node N times, each on fresh processes, in
alternating order; every round keeps its own figures and ratios (``rounds``), and the document's
are their medians: on a shared machine whose speed drifts, a median of same-round ratios is what
an A/B comparison can quote.
Nothing here asserts a speed; docs/performance.md compares the figures with their targets.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
import grpc
import grpc.aio

from raftmeta.api.limits import grpc_channel_options
from raftmeta.bench.compare import SIDES, TARGETS
from raftmeta.bench.results import (
    machine,
    median,
    median_of_rounds,
    option_given,
    percentile,
    refuse_options_given,
    result_file_option,
    scratch_dir,
    work_dir_option,
    write_result,
)
from raftmeta.cli.common import CheckFailed, emit_json, output_option
from raftmeta.local.python_command import python_command
from raftmeta.server.peers import FETCH_RPCS, FetchRpc
from raftmeta.v1 import controller_pb2

ECHO_METHOD = "/raftmeta.bench.Echo/Echo"
WARMUP_S = 1.0
FSYNC_SAMPLES = 2000
# The echo payload: about the size of a serialized one-topic CreateTopicsRequest.
ECHO_PAYLOAD = b"x" * 64
# The simulated brokers' partition leaders describe every topic (a stale read, O(image) on the
# node's event loop) once per ISR check, 1 s by default: with 1000-partition topics that is
# seconds of a node's loop per second once the image holds ~200,000 partitions, which measures
# the simulation's polling, not the commit path. No ISR changes are due during a run (every
# broker stays up), so the check is pushed past any run's end.
FLEET_ISR_CHECK_INTERVAL_MS = 3_600_000


# -- floors ------------------------------------------------------------------------------------------
def echo_server_main() -> None:
    """The floor's server process: echo raw bytes until stdin closes (the parent exits or says so)."""
    from raftmeta.server.app import run

    async def serve() -> None:
        async def echo(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
            return request

        handler = grpc.method_handlers_generic_handler(
            "raftmeta.bench.Echo", {"Echo": grpc.unary_unary_rpc_method_handler(echo)}
        )
        server = grpc.aio.server(options=grpc_channel_options())
        server.add_generic_rpc_handlers((handler,))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        print(port, flush=True)
        # Serve until the parent closes our stdin.
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
        await server.stop(grace=None)

    run(serve())


@dataclass
class Load:
    """Latencies (s) of the calls that completed inside the measured window, and the errors."""

    latencies: list[float] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)


async def echo_floor(clients: int, duration_s: float) -> dict[str, float]:
    process = await asyncio.create_subprocess_exec(
        *python_command("-c", "from raftmeta.bench.commit import echo_server_main; echo_server_main()"),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        line = await asyncio.wait_for(process.stdout.readline(), 30)
        if not line.strip().isdigit():
            raise CheckFailed("the echo server did not start")
        target = f"127.0.0.1:{int(line)}"
        async with grpc.aio.insecure_channel(target, options=grpc_channel_options()) as channel:
            call = channel.unary_unary(ECHO_METHOD, request_serializer=None, response_deserializer=None)  # raw bytes
            await call(ECHO_PAYLOAD, timeout=10)  # connect before measuring

            async def one() -> None:
                await call(ECHO_PAYLOAD, timeout=10)

            single = await measure(one, 1, min(duration_s, 3.0))
            loaded = await measure(one, clients, duration_s) if clients > 1 else single
    finally:
        if process.stdin is not None:
            process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), 10)
        except TimeoutError:
            process.kill()
            await process.wait()
    window = loaded_window(duration_s, clients, single_window=min(duration_s, 3.0))
    return {
        "grpc_unary_rtt_ms": round(median(single.latencies) * 1000, 3),
        "grpc_unary_p99_ms": round(percentile(single.latencies, 0.99) * 1000, 3),
        "grpc_unary_ops_per_s": round(len(loaded.latencies) / window, 1),
        "grpc_unary_p50_ms_loaded": round(median(loaded.latencies) * 1000, 3),
    }


def loaded_window(duration_s: float, clients: int, *, single_window: float) -> float:
    return duration_s if clients > 1 else single_window


def fsync_floor(directory: Path) -> dict[str, float]:
    """100-byte appends + fsync on the quorum's filesystem (notes: ~0.12 ms here)."""
    path = directory / "fsync-floor"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    samples: list[float] = []
    try:
        data = b"f" * 100
        for _ in range(FSYNC_SAMPLES):
            started = time.perf_counter()
            os.write(fd, data)
            os.fsync(fd)
            samples.append(time.perf_counter() - started)
    finally:
        os.close(fd)
        path.unlink()
    return {"fsync_ms": round(median(samples) * 1000, 4), "fsync_p99_ms": round(percentile(samples, 0.99) * 1000, 4)}


async def measure(operation: Any, tasks: int, duration_s: float) -> Load:
    """Run ``operation`` back to back in ``tasks`` tasks for a warm-up plus ``duration_s``; keep
    the latencies of the calls that finished inside the window."""
    load = Load()
    started = time.perf_counter()
    window_start = started + WARMUP_S
    window_end = window_start + duration_s

    async def worker() -> None:
        while True:
            begun = time.perf_counter()
            if begun >= window_end:
                return
            try:
                await operation()
            except Exception as exc:
                name = type(exc).__name__
                load.errors[name] = load.errors.get(name, 0) + 1
                await asyncio.sleep(0.01)
                continue
            done = time.perf_counter()
            if window_start <= begun and done <= window_end:
                load.latencies.append(done - begun)

    await asyncio.gather(*(worker() for _ in range(tasks)))
    return load


def compare_command(
    target: str,
    nodes: int,
    clients: int,
    partitions: int,
    duration: float,
    brokers: int,
    work_dir: Path | None,
    rounds: int,
    warmup: float,
    result_file: Path | None,
    output: str,
    raftmeta_node_args: Sequence[str] = (),
) -> None:
    """``--target kraft|both``: the Kafka-protocol load against each side, and its report;
    ``raftmeta_node_args`` go to raftmeta's nodes."""
    from raftmeta.bench.kafka_commit import run_comparison

    targets = SIDES if target == "both" else (target,)
    with scratch_dir(work_dir, "commit") as scratch:
        document = run_comparison(
            targets, clients, partitions, duration, rounds, scratch, nodes, brokers, warmup, raftmeta_node_args
        )
    write_result(document, result_file)
    if output == "json":
        emit_json(document)
        return
    for name in SIDES:
        if name in document:
            side, lat = document[name], document[name]["latency_ms"]
            click.echo(
                f"{name}: {side['ops_per_s']} creates/s, {side['records_per_s']} records/s, p50 {lat['p50']} ms, "
                f"p99 {lat['p99']} ms, voters' CPU {side['node_cpu_ms_per_op']} ms/create, "
                f"client CPU {side['client_cpu_percent']} %"
            )
    if "ratio" in document:
        click.echo(f"raftmeta/kraft (median of {rounds} rounds' ratios): {document['ratio']}")


# -- the quorum ----------------------------------------------------------------------------------------
def machine_ticks() -> tuple[int, int] | None:
    """(busy, total) CPU ticks of the whole machine so far (Linux /proc/stat; None elsewhere).
    Idle and iowait count as not busy."""
    try:
        with open("/proc/stat") as stat:
            values = [int(v) for v in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    total = sum(values[:8])  # user nice system idle iowait irq softirq steal (guest is inside user)
    return total - values[3] - values[4], total


def cpu_seconds(pids: list[int]) -> float | None:
    """User + system CPU time of these processes so far (Linux /proc; None elsewhere)."""
    total = 0
    try:
        for pid in pids:
            # The command name (field 2) may hold spaces: split after its closing parenthesis.
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
    except (OSError, IndexError, ValueError):
        return None
    return total / os.sysconf("SC_CLK_TCK")


async def commit_load(
    addresses: dict[int, str],
    clients: int,
    partitions: int,
    duration_s: float,
    pids: dict[int, int] | None = None,
    metrics: dict[int, str] | None = None,
) -> dict[str, Any]:
    """The load and its figures; ``pids`` maps node ids to their processes (for the CPU figures),
    ``metrics`` to their metrics endpoints (for the leader's own commit-latency histogram)."""
    from raftmeta.client import ControllerClient, RetryPolicy

    prefix = f"b{os.getpid()}-{time.monotonic_ns() % 1_000_000}"
    counter = iter(range(1 << 62))
    retry = RetryPolicy(deadline_s=30, attempt_timeout_s=30)
    async with ControllerClient(list(addresses.values()), retry=retry) as probe:
        leader = (await probe.describe_quorum()).leader_id
    # The leader first: the others would forward every request to it (one more hop).
    ordered = [addresses[leader], *(a for node, a in sorted(addresses.items()) if node != leader)]
    async with ControllerClient(ordered, retry=retry) as client:

        async def create() -> None:
            topic = controller_pb2.CreatableTopic(
                name=f"{prefix}-{next(counter)}", num_partitions=partitions, replication_factor=3
            )
            response = await client.create_topics(controller_pb2.CreateTopicsRequest(topics=[topic]))
            if response.topics[0].error_code != 0:
                raise RuntimeError(response.topics[0].error_message)

        hw_task = asyncio.create_task(
            high_watermark_window(client, duration_s, pids or {}, leader, (metrics or {}).get(leader))
        )
        load = await measure(create, clients, duration_s)
        window = await hw_task
    lat = load.latencies

    def per_op_ms(cpu_s: float | None) -> float | None:
        return round(cpu_s * 1000 / len(lat), 3) if cpu_s is not None and lat else None

    return {
        "ops": len(lat),
        "ops_per_s": round(len(lat) / duration_s, 1),
        "node_cpu_ms_per_op": per_op_ms(window.node_cpu_s),
        "leader_cpu_ms_per_op": per_op_ms(window.leader_cpu_s),
        "leader_controller_ms_per_op": per_op_ms(window.leader_controller_s),
        "machine_busy_percent": window.machine_busy_percent,
        "records_per_s": round(window.records / duration_s, 1),
        "latency_ms": {
            "mean": round(sum(lat) * 1000 / len(lat), 3) if lat else None,
            "p50": round(median(lat) * 1000, 3) if lat else None,
            "p99": round(percentile(lat, 0.99) * 1000, 3) if lat else None,
        },
        "node_commit_latency_ms": window.node_commit_latency_ms,
        "leader_path_ms": window.leader_path_ms,
        "errors": load.errors,
        "leader": leader,
    }


@dataclass(frozen=True)
class Window:
    """What the measured window saw besides the clients' latencies."""

    records: int  # committed: the high watermark's growth
    node_cpu_s: float | None  # all node processes
    leader_cpu_s: float | None
    machine_busy_percent: float | None  # all CPUs of the machine
    # The leader's raftmeta_raft_commit_latency_seconds over the window (p50/p99, interpolated
    # within its buckets): append to commit on the node, next to the client's round trip.
    node_commit_latency_ms: dict[str, float | None] | None = None
    # Seconds the leader's controller spent handling admin requests in the window (the sum of its
    # raftmeta_controller_event_queue_processing_time_seconds): validation, placement, the
    # records and the working image, measured inside the node, on its event loop.
    leader_controller_s: float | None = None
    # Means over the window of the leader's own timings of a request's path (ms): waiting in the
    # node's inbox, the controller's processing, and its batch's append to commit.
    leader_path_ms: dict[str, float | None] | None = None


async def high_watermark_window(
    client: Any, duration_s: float, pids: dict[int, int], leader: int, metrics_address: str | None = None
) -> Window:
    """Committed records inside the measured window, the CPU seconds the node processes (and
    the leader alone) spent in it, how busy the machine was and the leader's own commit latency.
    The leader's metrics are scraped outside the CPU window, so the scrapes cost no CPU per op."""
    from raftmeta.metrics.scrape import fetch, window

    await asyncio.sleep(WARMUP_S)
    scrape_before = await asyncio.to_thread(fetch, metrics_address) if metrics_address else None
    before = (await client.describe_quorum()).high_watermark
    nodes = list(pids.values())
    leader_pids = [pids[leader]] if leader in pids else []
    cpu_before, leader_before, ticks_before = cpu_seconds(nodes), cpu_seconds(leader_pids), machine_ticks()
    await asyncio.sleep(duration_s)
    cpu_after, leader_after, ticks_after = cpu_seconds(nodes), cpu_seconds(leader_pids), machine_ticks()
    after = (await client.describe_quorum()).high_watermark
    node_latency = None
    controller_s = None
    path = None
    if metrics_address and scrape_before is not None:
        from raftmeta.metrics.scrape import (
            COMMIT_LATENCY,
            EVENT_PROCESSING_TIME,
            EVENT_QUEUE_TIME,
            histogram_growth,
            histogram_mean_ms,
        )

        scrape_after = await asyncio.to_thread(fetch, metrics_address)
        controller_s = histogram_growth(scrape_before, scrape_after, EVENT_PROCESSING_TIME)[0]
        path = {
            name: histogram_mean_ms(scrape_before, scrape_after, metric)
            for name, metric in (
                ("inbox_wait", EVENT_QUEUE_TIME),
                ("controller", EVENT_PROCESSING_TIME),
                ("append_to_commit", COMMIT_LATENCY),
            )
        }
        latency = window(scrape_after, scrape_before, COMMIT_LATENCY)
        node_latency = {
            name: None if q is None else round(q * 1000, 3)
            for name, q in (
                ("p50", latency.histogram_quantile(COMMIT_LATENCY, 0.5)),
                ("p99", latency.histogram_quantile(COMMIT_LATENCY, 0.99)),
            )
        }

    def spent(start: float | None, end: float | None) -> float | None:
        return None if start is None or end is None else end - start

    busy = None
    if ticks_before is not None and ticks_after is not None and ticks_after[1] > ticks_before[1]:
        busy = round(100 * (ticks_after[0] - ticks_before[0]) / (ticks_after[1] - ticks_before[1]), 1)
    return Window(
        int(after - before),
        spent(cpu_before, cpu_after),
        spent(leader_before, leader_after) if leader_pids else None,
        busy,
        node_latency,
        controller_s,
        path,
    )


def controller_bounds(result: dict[str, Any], floor: dict[str, Any], raft_p50: float) -> dict[str, float | None]:
    """What the bare-Raft floor plus the node's controller alone would reach, from figures of the
    same run: the floor's leader CPU per create plus the controller's processing time per create
    measured inside the node's leader (``leader_controller_ms_per_op``).

    ``controller_bound_ops_per_s_vs_raft``: creates/s over the floor's if the leader's CPU were
    the floor leader's plus the controller's and nothing else -- with small requests the leader's
    event loop saturates first (``leader_cpu_ms_per_op`` times ``ops_per_s`` is about one core),
    so its CPU per create bounds creates/s. ``controller_bound_p50_vs_raft_p50``: the p50 if the
    controller's processing were the only thing added to the floor's path. The node's ratios
    cannot beat these without a cheaper controller."""
    controller = result.get("leader_controller_ms_per_op")
    raft_leader_cpu = floor.get("raft_leader_cpu_ms_per_op")
    bounds: dict[str, float | None] = {
        "controller_bound_ops_per_s_vs_raft": None,
        "controller_bound_p50_vs_raft_p50": None,
    }
    if controller is not None and raft_leader_cpu:
        bounds["controller_bound_ops_per_s_vs_raft"] = round(raft_leader_cpu / (raft_leader_cpu + controller), 3)
    if controller is not None and raft_p50:
        bounds["controller_bound_p50_vs_raft_p50"] = round((raft_p50 + controller) / raft_p50, 3)
    return bounds


def run_benchmark(
    nodes: int,
    clients: int,
    partitions: int,
    duration_s: float,
    brokers: int,
    work_dir: Path,
    fetch_rpc: FetchRpc = "stream",
    node_args: tuple[str, ...] = (),
    raft_floor: bool = True,
    rounds: int = 1,
) -> dict[str, Any]:
    """The floors, then ``rounds`` rounds of the bare-Raft floor and the node, each on a fresh
    quorum, in alternating order (the floor first in the first, third, ... rounds, the node first
    in the others: a drift in the machine's speed over the run falls on both sides). Every round's ratios are of its own
    two measurements; the document's figures and ratios are their medians over the rounds."""
    from raftmeta.server.app import event_loop_name, run

    load_before = os.getloadavg()
    floor: dict[str, Any] = {**run(echo_floor(clients, min(duration_s, 10.0))), **fsync_floor(work_dir)}
    measured = [
        measure_round(
            work_dir / f"round-{index}",
            nodes,
            clients,
            partitions,
            duration_s,
            brokers,
            floor,
            ["--fetch-rpc", fetch_rpc, *node_args],
            raft_floor=raft_floor,
            node_first=index % 2 == 1,
        )
        for index in range(rounds)
    ]
    load_after = os.getloadavg()
    merged = median_of_rounds(measured, summed=frozenset({"errors", "raft_errors"}))
    return {
        "benchmark": "commit",
        "nodes": nodes,
        "clients": clients,
        "partitions": partitions,
        "duration_s": duration_s,
        "fsync": True,
        "fetch_rpc": fetch_rpc,
        "node_args": list(node_args),
        "fleet_isr_check_interval_ms": FLEET_ISR_CHECK_INTERVAL_MS,
        "event_loop": event_loop_name(),
        **merged["node"],
        "floor": {**floor, **merged["floor"]},
        "ratios": merged["ratios"],
        "rounds": measured,
        "load_average": {"before": [round(x, 2) for x in load_before], "after": [round(x, 2) for x in load_after]},
        "machine": machine(),
    }


def measure_round(
    round_dir: Path,
    nodes: int,
    clients: int,
    partitions: int,
    duration_s: float,
    brokers: int,
    floors: dict[str, Any],
    node_args: list[str],
    *,
    raft_floor: bool,
    node_first: bool,
) -> dict[str, Any]:
    """One round: the bare-Raft floor (unless ``raft_floor`` is off) and the node's load, each on
    processes of its own, and the ratios of the two (with ``floors``, measured once per run)."""
    from raftmeta.local import quorum as local_quorum
    from raftmeta.server.app import run

    round_dir.mkdir(parents=True, exist_ok=True)

    def node_side() -> dict[str, Any]:
        quorum = local_quorum.up(
            round_dir / "quorum",
            nodes=nodes,
            brokers=brokers,
            racks=min(3, brokers),
            node_args=node_args,
            fleet_args=["--isr-check-interval-ms", str(FLEET_ISR_CHECK_INTERVAL_MS)],
        )
        try:
            addresses = {n.id: n.address for n in quorum.nodes}
            pids = {n.id: n.pid for n in quorum.nodes}
            metrics = {n.id: n.metrics_address for n in quorum.nodes if n.metrics_address}
            figures = run(commit_load(addresses, clients, partitions, duration_s, pids, metrics))
        finally:
            local_quorum.down(quorum)
        figures.pop("leader")
        return figures

    def floor_side() -> dict[str, Any]:
        if not raft_floor:
            return {}
        from raftmeta.bench.raft_floor import raft_floor as bare_raft

        return run(bare_raft(round_dir, clients, partitions, min(duration_s, 10.0), voters=nodes))

    load_before = os.getloadavg()
    if node_first:
        result = node_side()
        bare = floor_side()
    else:
        bare = floor_side()
        result = node_side()
    load_after = os.getloadavg()
    return {
        "node_first": node_first,
        "node": result,
        "floor": bare,
        "ratios": round_ratios(result, {**floors, **bare}, raft_floor=raft_floor),
        "load_average": {"before": [round(x, 2) for x in load_before], "after": [round(x, 2) for x in load_after]},
    }


def round_ratios(result: dict[str, Any], floor: dict[str, Any], *, raft_floor: bool) -> dict[str, float | None]:
    """The node's figures over the floors measured beside them."""
    p50 = result["latency_ms"]["p50"]
    latency_floor = floor["grpc_unary_rtt_ms"] + 2 * floor["fsync_ms"]
    ratios: dict[str, float | None] = {
        "ops_per_s_vs_grpc_unary": round(result["ops_per_s"] / floor["grpc_unary_ops_per_s"], 3),
        "p50_vs_rtt_plus_2_fsync": round(p50 / latency_floor, 3) if p50 else None,
    }
    if raft_floor:
        # Against the bare-Raft floor with the same number of clients: creates/s and p50.
        raft_p50 = floor["raft_p50_ms_loaded"]
        ratios["ops_per_s_vs_raft"] = round(result["ops_per_s"] / floor["raft_ops_per_s"], 3)
        ratios["p50_vs_raft_p50"] = round(p50 / raft_p50, 3) if p50 else None
        for name, node_key, raft_key in (
            ("node_cpu_per_op_vs_raft", "node_cpu_ms_per_op", "raft_cpu_ms_per_op"),
            ("leader_cpu_per_op_vs_raft_leader", "leader_cpu_ms_per_op", "raft_leader_cpu_ms_per_op"),
        ):
            node_cpu, raft_cpu = result[node_key], floor[raft_key]
            ratios[name] = round(node_cpu / raft_cpu, 3) if node_cpu and raft_cpu else None
        # The replication round, proposal to commit, on each leader (means over the window).
        node_round = (result.get("leader_path_ms") or {}).get("append_to_commit")
        raft_round = floor.get("raft_append_to_commit_ms")
        ratios["append_to_commit_vs_raft"] = round(node_round / raft_round, 3) if node_round and raft_round else None
        ratios.update(controller_bounds(result, floor, raft_p50))
    return ratios


@click.command()
@click.option("--nodes", type=click.IntRange(1, 9), default=3, show_default=True)
@click.option("--clients", type=click.IntRange(1, 1024), default=16, show_default=True, help="Concurrent client tasks.")
@click.option("--partitions", type=click.IntRange(1, 100_000), default=1, show_default=True, help="Per created topic.")
@click.option("--duration", type=click.FloatRange(min=0.5), default=20.0, show_default=True, help="Seconds measured.")
@click.option("--brokers", type=click.IntRange(min=3), default=3, show_default=True, help="Simulated brokers (RF 3).")
@work_dir_option
@click.option(
    "--fetch-rpc",
    type=click.Choice(FETCH_RPCS),
    default="stream",
    show_default=True,
    help="The nodes' Fetch transport (raftmeta node --fetch-rpc), for A/B runs.",
)
@click.option(
    "--node-arg",
    "node_args",
    multiple=True,
    help="An extra `raftmeta node` argument for every node (repeat it; e.g. --node-arg=--fetch-hw-linger-ms=0).",
)
@click.option(
    "--raft-floor/--no-raft-floor",
    default=True,
    show_default=True,
    help="Also measure the bare-Raft floor (raftmeta/bench/raft_floor.py) in this run.",
)
@click.option(
    "--rounds",
    type=click.IntRange(1, 20),
    default=1,
    show_default=True,
    help="Rounds of the bare-Raft floor and the node, in alternating order; figures are their medians.",
)
@click.option(
    "--target",
    type=click.Choice(TARGETS),
    default="raftmeta",
    show_default=True,
    help="raftmeta: this benchmark over gRPC, with the floors; kraft or both: over the Kafka protocol "
    "against a real KRaft cluster, raftmeta, or both interleaved (raftmeta/bench/kafka_commit.py).",
)
@click.option(
    "--warmup",
    type=click.FloatRange(min=0),
    default=10.0,
    show_default=True,
    help="With --target kraft|both: seconds of the same load before the measured window, on each side.",
)
@result_file_option
@output_option
def command(
    nodes: int,
    clients: int,
    partitions: int,
    duration: float,
    brokers: int,
    work_dir: Path | None,
    fetch_rpc: FetchRpc,
    node_args: tuple[str, ...],
    raft_floor: bool,
    rounds: int,
    target: str,
    warmup: float,
    result_file: Path | None,
    output: str,
) -> None:
    """Committed creates/s, records/s and latency of a local quorum, next to the machine's floors
    (or beside a real KRaft cluster: --target)."""
    if target != "raftmeta":
        refuse_options_given(
            {"raft_floor": "--raft-floor/--no-raft-floor"},
            "the bare-Raft floor is measured with --target raftmeta only (the Kafka-protocol comparison has none)",
        )
        if target == "kraft":
            refuse_options_given(
                {"fetch_rpc": "--fetch-rpc", "node_args": "--node-arg"},
                "raftmeta node settings apply where raftmeta nodes run: --target raftmeta or both",
            )
        raftmeta_node_args = [*(["--fetch-rpc", fetch_rpc] if option_given("fetch_rpc") else []), *node_args]
        compare_command(
            target,
            nodes,
            clients,
            partitions,
            duration,
            brokers,
            work_dir,
            rounds,
            warmup,
            result_file,
            output,
            raftmeta_node_args,
        )
        return
    refuse_options_given({"warmup": "--warmup"}, "the warm-up is of the Kafka-protocol comparison: --target kraft|both")
    with scratch_dir(work_dir, "commit") as scratch:
        document = run_benchmark(
            nodes, clients, partitions, duration, brokers, scratch, fetch_rpc, node_args, raft_floor, rounds
        )
    write_result(document, result_file)
    if output == "json":
        emit_json(document)
        return
    lat, floor = document["latency_ms"], document["floor"]
    click.echo(
        (f"median of {rounds} rounds: " if rounds > 1 else "")
        + f"{nodes} nodes, {clients} clients, {partitions} partition(s)/topic: "
        f"{document['ops_per_s']} creates/s, {document['records_per_s']} records/s, "
        f"p50 {lat['p50']} ms, p99 {lat['p99']} ms, node CPU {document['node_cpu_ms_per_op']} ms/create "
        f"(leader {document['leader_cpu_ms_per_op']}), machine {document['machine_busy_percent']} % busy"
    )
    click.echo(
        f"floor: gRPC unary {floor['grpc_unary_ops_per_s']} ops/s ({clients} tasks), "
        f"RTT {floor['grpc_unary_rtt_ms']} ms, "
        f"fsync {floor['fsync_ms']} ms"
        + (
            f", bare Raft {floor['raft_ops_per_s']} creates/s ({clients} clients), "
            f"p50 {floor['raft_p50_ms']} ms (1 client)"
            if raft_floor
            else ""
        )
        + f"; ratios {document['ratios']}"
    )
