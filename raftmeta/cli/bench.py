"""``raftmeta bench``: benchmarks that print (and optionally write) JSON results.

Each benchmark lives in ``raftmeta/bench/<name>.py`` and exposes a click command named
``command``; it is listed here once its module exists.
"""

from __future__ import annotations

import click

from raftmeta.cli.main import LazyGroup

BENCHMARKS: dict[str, str] = {
    "commit": "raftmeta.bench.commit:command",
    "controller": "raftmeta.bench.controller:command",
    "core": "raftmeta.bench.core:command",
    "failover": "raftmeta.bench.failover:command",
    "kafka-format": "raftmeta.bench.kafka_format:command",
    "kafka-verify": "raftmeta.bench.kafka_verify:command",
    "placement": "raftmeta.bench.placement:command",
    "replay": "raftmeta.bench.replay:command",
    "scale": "raftmeta.bench.scale:command",
    "sim-plane": "raftmeta.bench.sim_plane:command",
    "storage": "raftmeta.bench.storage:command",
}


@click.group(cls=LazyGroup, lazy_commands=BENCHMARKS)
def bench() -> None:
    """Measure raftmeta: each benchmark prints one JSON document of medians and ratios.

    Results are medians over repeated runs, with a baseline (the machine's floor) measured in
    the same process, because this kind of machine is shared and noisy.
    """
