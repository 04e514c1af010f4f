"""``raftmeta bench core``: the consensus core's speed, without IO.

- ``events_per_s``: simulated events per second of ``raftmeta sim`` (3 voters, all faults),
  the median over ``--repeats`` rounds of ``--seeds`` seeds; this is what bounds the soak.
- ``fetch_handling_us``: the leader's cost to handle one steady-state Fetch (validate the
  offset and epoch, count the fetcher toward the HW, answer with one new batch), as
  ``step`` + ``take_ready``; percentiles over ``--fetches`` calls.
- ``baseline_us``: building one FetchRequest protobuf, the floor any handler pays, measured
  in the same process because this machine is shared and noisy.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import click

from raftmeta.bench.results import machine, median, percentile, write_result
from raftmeta.cli.common import emit_json, output_option
from raftmeta.raft import Envelope, RaftConfig, RaftCore, Role
from raftmeta.sim import FAULT_KINDS, run_seeds
from raftmeta.sim.rng import SeededRandom
from raftmeta.v1 import raft_pb2


def _elected_leader() -> RaftCore:
    """A 3-voter core driven through pre-vote and vote to leadership by hand-made answers."""
    core = RaftCore(RaftConfig(node_id=1, voters=(1, 2, 3), cluster_id="b"), SeededRandom(1), 0)
    core.poll(10_000)  # past the election timeout: prospective, pre-votes sent
    for pre_vote in (True, False):
        ready = core.take_ready()
        request = next(e for e in ready.messages if e.destination == 2)
        message = request.message
        assert isinstance(message, raft_pb2.VoteRequest) and message.pre_vote is pre_vote
        epoch = message.candidate_epoch - 1 if pre_vote else message.candidate_epoch
        answer = raft_pb2.VoteResponse(leader_id=-1, leader_epoch=epoch, vote_granted=True, pre_vote=pre_vote)
        core.step(10_000, Envelope(2, 1, request.correlation_id, answer))
    assert core.role is Role.LEADER
    core.take_ready()
    core.on_log_flushed(10_000, core.log_end_offset, 1 << 40)
    core.take_ready()
    return core


def measure_fetch_us(fetches: int) -> list[float]:
    core = _elected_leader()
    epoch = core.epoch
    records = [b"x" * 100]
    samples: list[float] = []
    now = 10_000
    for i in range(fetches):
        now += 1
        fetch_offset = core.log_end_offset
        core.propose(now, records)
        core.on_log_flushed(now, core.log_end_offset, 1 << 40)
        core.take_ready()
        request = raft_pb2.FetchRequest(
            cluster_id="b",
            replica_id=2 + (i & 1),
            replica_epoch=epoch,
            fetch_offset=fetch_offset,
            last_fetched_epoch=epoch,
            max_wait_ms=500,
            max_bytes=1 << 20,
        )
        envelope = Envelope(2 + (i & 1), 1, i, request)
        started = time.perf_counter_ns()
        core.step(now, envelope)
        ready = core.take_ready()
        samples.append((time.perf_counter_ns() - started) / 1000)
        assert ready.messages, "the fetch was answered"
    return samples


def measure_baseline_us(count: int) -> list[float]:
    samples = []
    for i in range(count):
        started = time.perf_counter_ns()
        raft_pb2.FetchRequest(cluster_id="b", replica_id=2, replica_epoch=1, fetch_offset=i, last_fetched_epoch=1)
        samples.append((time.perf_counter_ns() - started) / 1000)
    return samples


@click.command("core")
@click.option("--seeds", type=click.IntRange(min=1), default=20, show_default=True, help="Seeds per round.")
@click.option("--steps", type=click.IntRange(min=100), default=5000, show_default=True)
@click.option("--repeats", type=click.IntRange(min=1), default=3, show_default=True, help="Rounds (median).")
@click.option("--fetches", type=click.IntRange(min=100), default=20_000, show_default=True)
@click.option(
    "--out", "out_path", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Also write here."
)
@output_option
def command(seeds: int, steps: int, repeats: int, fetches: int, out_path: Path | None, output: str) -> None:
    """Simulated events per second and the leader's Fetch handling time."""
    rates = []
    events = 0
    for _ in range(repeats):
        summary = run_seeds(range(seeds), steps=steps, voters=3, kinds=frozenset(FAULT_KINDS))
        rates.append(summary.events_per_s)
        events = summary.events
        assert not summary.violations, summary.violations[0]
    fetch = measure_fetch_us(fetches)
    baseline = measure_baseline_us(fetches)
    document: dict[str, Any] = {
        "events_per_s": round(median(rates)),
        "events_per_round": events,
        "fetch_handling_us": {
            "p50": round(percentile(fetch, 0.5), 2),
            "p90": round(percentile(fetch, 0.9), 2),
            "p99": round(percentile(fetch, 0.99), 2),
        },
        "baseline_us": {"fetch_request_build_p50": round(percentile(baseline, 0.5), 2)},
        "params": {"seeds": seeds, "steps": steps, "repeats": repeats, "fetches": fetches, "voters": 3},
        "machine": machine(),
    }
    write_result(document, out_path)
    if output == "json":
        emit_json(document)
    else:
        f = document["fetch_handling_us"]
        click.echo(f"events/s: {document['events_per_s']:,} (median of {repeats} rounds of {seeds} seeds)")
        click.echo(f"fetch handling: p50 {f['p50']} us, p90 {f['p90']} us, p99 {f['p99']} us")
