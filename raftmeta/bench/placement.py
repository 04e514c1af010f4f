"""``raftmeta bench placement``: how fast each placer places, and how balanced the result is.

Places ``--partitions`` partitions of one topic on ``--brokers`` brokers spread evenly over
``--racks`` racks (broker i in rack i*R//N, all unfenced) with each placer, ``--runs`` times,
and reports the median seconds (wall and CPU), partitions per second and the skew (max/mean per
broker) of leaders and replicas of the run seeded with ``--seed``. A perfect placement's skew
is ceil(T/N)/(T/N), 1.0 when N divides T.
"""

from __future__ import annotations

import time
from collections import Counter
from itertools import chain
from pathlib import Path
from typing import Any

import click

from placement.api import PLACERS, place_replicas
from placement.brokers import UsableBroker
from placement.metrics import perfect_skew, skew
from placement.rng import JavaRandom
from raftmeta.bench.results import machine, median, result_file_option, write_result
from raftmeta.cli.common import emit_json, output_option, usage_error


def run_placer(
    placer: str, brokers: list[UsableBroker], partitions: int, factor: int, seed: int
) -> tuple[float, float, list[list[int]]]:
    """One placement: wall and CPU seconds around the placer call only.

    CPU seconds are reported too because the machine is shared: under contention the wall
    time grows while the CPU time the placer needs does not.
    """
    started, cpu_started = time.perf_counter(), time.process_time()
    assignment = place_replicas(placer, brokers, partitions, factor, JavaRandom(seed))
    return time.perf_counter() - started, time.process_time() - cpu_started, assignment


def skews(assignment: list[list[int]], broker_ids: list[int]) -> tuple[float, float]:
    leaders = Counter(replicas[0] for replicas in assignment)
    replicas = Counter(chain.from_iterable(assignment))
    return skew(leaders.get(b, 0) for b in broker_ids), skew(replicas.get(b, 0) for b in broker_ids)


def benchmark(
    partitions: int, brokers: int, racks: int, factor: int, runs: int, seed: int, placers: tuple[str, ...]
) -> dict[str, Any]:
    cluster = [UsableBroker(i, f"rack{i * racks // brokers}") for i in range(brokers)]
    ids = [b.id for b in cluster]
    results: dict[str, Any] = {}
    for placer in placers:
        seconds: list[float] = []
        cpu_seconds: list[float] = []
        first: list[list[int]] = []
        for run in range(runs):
            elapsed, cpu, assignment = run_placer(placer, cluster, partitions, factor, seed + run)
            seconds.append(elapsed)
            cpu_seconds.append(cpu)
            if run == 0:
                first = assignment
            del assignment  # do not hold two large assignments at once
        leader_skew, replica_skew = skews(first, ids)  # of the run with seed --seed
        took = median(seconds)
        results[placer] = {
            "partitions": partitions,
            "seconds": round(took, 4),
            "partitions_per_s": round(partitions / took) if took > 0 else None,
            "leader_skew": round(leader_skew, 4),
            "replica_skew": round(replica_skew, 4),
            "runs_seconds": [round(s, 4) for s in seconds],
            "cpu_seconds": round(median(cpu_seconds), 4),
        }
    return {
        "benchmark": "placement",
        "config": {
            "partitions": partitions,
            "brokers": brokers,
            "racks": racks,
            "replication_factor": factor,
            "runs": runs,
            "seed": seed,
            "perfect_leader_skew": round(perfect_skew(partitions, brokers), 4),
            "perfect_replica_skew": round(perfect_skew(partitions * factor, brokers), 4),
        },
        "machine": machine(),
        "placers": results,
    }


@click.command()
@click.option("--partitions", type=click.IntRange(min=1), default=1_000_000, show_default=True)
@click.option("--brokers", type=click.IntRange(min=1), default=100, show_default=True)
@click.option("--racks", type=click.IntRange(min=1), default=5, show_default=True)
@click.option("--replication-factor", "factor", type=click.IntRange(min=1), default=3, show_default=True)
@click.option("--runs", type=click.IntRange(min=1), default=3, show_default=True, help="Runs per placer (median).")
@click.option(
    "--seed", type=int, default=0, show_default=True, help="java.util.Random seed of the first run (+1 per run)."
)
@click.option("--placer", "placers", type=click.Choice(PLACERS), multiple=True, help="Only these placers (repeat).")
@result_file_option
@output_option
def command(
    partitions: int,
    brokers: int,
    racks: int,
    factor: int,
    runs: int,
    seed: int,
    placers: tuple[str, ...],
    result_file: Path | None,
    output: str,
) -> None:
    """Time the striped, legacy and balanced placers and report their leader and replica skew.

    Target on a 2-core machine: the striped placer places 1,000,000 partitions (RF 3, 100
    brokers, 5 racks) in at most 2 s.
    """
    if racks > brokers:
        raise usage_error(f"cannot spread {brokers} brokers over {racks} racks", "--racks")
    if factor > brokers:
        raise usage_error(f"replication factor {factor} exceeds the {brokers} brokers", "--replication-factor")
    document = benchmark(partitions, brokers, racks, factor, runs, seed, placers or PLACERS)
    write_result(document, result_file)
    if output == "json":
        emit_json(document)
        return
    click.echo(f"{partitions} partitions, RF {factor}, {brokers} brokers in {racks} racks, median of {runs} runs")
    for placer, figures in document["placers"].items():
        click.echo(
            f"  {placer:<9} {figures['seconds']:>8.3f} s ({figures['cpu_seconds']:.3f} s CPU)  "
            f"{figures['partitions_per_s']:>10} partitions/s  "
            f"leader skew {figures['leader_skew']:.3f}  replica skew {figures['replica_skew']:.3f}"
        )
