"""``raftmeta placement``: preview replica placement and consumer assignment, offline.

``place`` runs one of the placers of the ``placement`` package (striped = KRaft's default,
legacy = AdminUtils, balanced = raftmeta's) on a cluster described on the command line, or
checks a manual ``--replica-assignment``, and prints the assignment with its balance figures.
``assign-consumers`` runs Kafka's consumer assignors. Nothing here talks to a quorum.
"""

from __future__ import annotations

import secrets
from typing import Any

import click
from rich.console import Console
from rich.table import Table

# Submodule imports: they resolve even where an editable install maps ``placement`` as a
# namespace package (the console script then skips placement/__init__.py).
from placement.api import PLACERS, place_replicas
from placement.assignors import STRATEGIES, assign_consumers
from placement.brokers import UsableBroker
from placement.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    PlacementError,
)
from placement.manual import parse_replica_assignment, validate_replica_assignment
from placement.metrics import BalanceReport, balance_report
from placement.pools import restrict_to_pool
from placement.rng import JavaRandom
from raftmeta.cli.common import (
    BROKER_ID,
    INT32_MAX,
    REPLICATION_FACTOR,
    SEED,
    check_int,
    emit_json,
    int_range,
    output_option,
    usage_error,
)

# A table with more rows than this is cut (the balance figures always cover every partition).
TABLE_PARTITIONS_MAX = 64
# Tables are as wide as their content (brokers are columns): never squeeze or ellipsize them;
# a terminal narrower than the table wraps the lines instead.
CONSOLE_WIDTH = 4000
# Previews run here, in memory: partitions of one topic (what `raftmeta bench placement` places in
# about 2 s) and brokers of one cluster.
PREVIEW_PARTITIONS_MAX = 1_000_000
PREVIEW_BROKERS_MAX = 10_000


def _console() -> Console:
    return Console(width=CONSOLE_WIDTH, highlight=False, soft_wrap=False)


def parse_brokers(spec: str, racks: int | None) -> list[UsableBroker]:
    """``--brokers``: ``id[:rack][:fenced][:pool=NAME]`` comma-separated, or a count N.

    With a count, brokers are 0..N-1; with ``--racks R`` they fill racks rack0..rack{R-1} in
    contiguous runs (broker i in rack i*R//N).
    """
    spec = spec.strip()
    if spec.isdigit():
        count = int(spec)
        if not 1 <= count <= PREVIEW_BROKERS_MAX:
            raise usage_error(f"the broker count {count} is not in the range 1..{PREVIEW_BROKERS_MAX}", "--brokers")
        if racks is not None and not 1 <= racks <= count:
            raise usage_error(f"--racks must be between 1 and the broker count {count}, got {racks}", "--racks")
        return [UsableBroker(i, None if racks is None else f"rack{i * racks // count}") for i in range(count)]
    if racks is not None:
        raise usage_error("--racks only goes with a broker count (e.g. --brokers 9 --racks 3)", "--racks")
    brokers: list[UsableBroker] = []
    seen: set[int] = set()
    for item in spec.split(","):
        parts = [p.strip() for p in item.split(":")]
        if not parts[0].isdigit():
            raise usage_error(f"{item!r}: expected id[:rack][:fenced][:pool=NAME] with a non-negative id", "--brokers")
        broker_id = check_int(int(parts[0]), BROKER_ID.low, BROKER_ID.high, f"{item!r}: broker id", "--brokers")
        if broker_id in seen:
            raise usage_error(f"broker {broker_id} is listed twice", "--brokers")
        seen.add(broker_id)
        rack: str | None = None
        pool: str | None = None
        fenced = False
        for token in parts[1:]:
            if token == "fenced":
                fenced = True
            elif token.startswith("pool="):
                pool = token.removeprefix("pool=") or None
            elif rack is None and token:
                rack = token
            else:
                raise usage_error(f"{item!r}: unexpected {token!r} (id[:rack][:fenced][:pool=NAME])", "--brokers")
        brokers.append(UsableBroker(broker_id, rack, fenced=fenced, pool=pool))
    if len(brokers) > PREVIEW_BROKERS_MAX:
        raise usage_error(f"{len(brokers)} brokers: at most {PREVIEW_BROKERS_MAX}", "--brokers")
    return brokers


def _param_for(error: PlacementError) -> str:
    """The command-line argument a placement error is about."""
    if isinstance(error, InvalidReplicaAssignmentError):
        return "--replica-assignment"
    if "broker pool" in str(error):
        return "--broker-pool"
    if isinstance(error, InvalidReplicationFactorError):
        return "--replication-factor"
    if isinstance(error, InvalidPartitionsError):
        return "--partitions"
    return "--brokers"


@click.group()
def placement() -> None:
    """Preview replica placement (Kafka's placers and raftmeta's balanced one) and consumer assignment.

    Offline: the cluster is described on the command line; nothing talks to a quorum.
    """


@placement.command("place")
@click.option(
    "--brokers",
    "brokers_spec",
    required=True,
    help="Brokers as id[:rack][:fenced][:pool=NAME],... (e.g. 0:rack-a,1:rack-a,2:rack-b,3:rack-b:fenced), or a count.",
)
@click.option(
    "--racks",
    type=int_range(1, PREVIEW_BROKERS_MAX),
    default=None,
    help="With a broker count: spread them over R racks.",
)
@click.option(
    "--partitions", type=int_range(1, PREVIEW_PARTITIONS_MAX), default=None, help="Number of partitions to place."
)
@click.option("--replication-factor", type=REPLICATION_FACTOR, default=None, help="Replicas per partition.")
@click.option("--placer", type=click.Choice(PLACERS), default="striped", show_default=True, help="Which placer.")
@click.option(
    "--seed", type=SEED, default=None, help="Seed of the java.util.Random the placer draws from (random if unset)."
)
@click.option("--broker-pool", default=None, help="Place only on brokers of this pool.")
@click.option(
    "--replica-assignment",
    default=None,
    help="Check a manual assignment instead of placing (kafka-topics syntax: 0:1:2,1:2:0).",
)
@output_option
def place_command(
    brokers_spec: str,
    racks: int | None,
    partitions: int | None,
    replication_factor: int | None,
    placer: str,
    seed: int | None,
    broker_pool: str | None,
    replica_assignment: str | None,
    output: str,
) -> None:
    """Place partitions on brokers and print the assignment and its balance.

    Example: raftmeta placement place --brokers 9 --racks 3 --partitions 54 --replication-factor 3 --seed 0
    """
    brokers = parse_brokers(brokers_spec, racks)
    if seed is None:
        seed = secrets.randbits(48)  # the driver, not the placer, owns randomness; printed to reproduce
    try:
        if replica_assignment is not None:
            parsed = parse_replica_assignment(replica_assignment)
            candidates = restrict_to_pool(brokers, broker_pool, len(parsed[0]))
            assignment = validate_replica_assignment(
                parsed,
                [b.id for b in candidates],
                replication_factor=replication_factor,
                expected_partitions=partitions,
            )
            source = "manual"
        else:
            if partitions is None:
                raise usage_error("required unless --replica-assignment is given", "--partitions")
            if replication_factor is None:
                raise usage_error("required unless --replica-assignment is given", "--replication-factor")
            assignment = place_replicas(
                placer, brokers, partitions, replication_factor, JavaRandom(seed), pool=broker_pool
            )
            source = placer
    except PlacementError as error:
        raise usage_error(str(error), _param_for(error)) from error
    shown = [b for b in brokers if broker_pool is None or b.pool == broker_pool]
    report = balance_report(assignment, shown)
    if output == "json":
        emit_json(
            {
                "placer": source,
                "seed": seed if source != "manual" else None,
                "broker_pool": broker_pool,
                "brokers": [{"id": b.id, "rack": b.rack, "fenced": b.fenced, "pool": b.pool} for b in brokers],
                "partitions": [{"partition": p, "replicas": r} for p, r in enumerate(assignment)],
                "balance": report.to_dict(),
            }
        )
        return
    _print_placement(source, seed, shown, assignment, report)


def _broker_header(broker: UsableBroker) -> str:
    lines = [str(broker.id), broker.rack or "-"]
    if broker.fenced:
        lines.append("fenced")
    return "\n".join(lines)


def _print_placement(
    source: str, seed: int, brokers: list[UsableBroker], assignment: list[list[int]], report: BalanceReport
) -> None:
    console = _console()
    title = "manual assignment" if source == "manual" else f"{source} placer, seed {seed}"
    # Titles go on their own line: rich would wrap a title wider than its table.
    console.print(f"{len(assignment)} partitions, {title} (L = leader, r = follower, . = none)")
    grid = Table()
    grid.add_column("partition", justify="right")
    grid.add_column("replicas")
    for broker in brokers:
        grid.add_column(_broker_header(broker), justify="center")
    for partition, replicas in enumerate(assignment[:TABLE_PARTITIONS_MAX]):
        cells = ["L" if replicas[0] == b.id else "r" if b.id in replicas else "." for b in brokers]
        grid.add_row(str(partition), ",".join(map(str, replicas)), *cells)
    console.print(grid)
    if len(assignment) > TABLE_PARTITIONS_MAX:
        console.print(f"... {len(assignment) - TABLE_PARTITIONS_MAX} more partitions (--output json lists all)")
    console.print("balance per broker")
    balance = Table()
    balance.add_column("")
    for broker in brokers:
        balance.add_column(_broker_header(broker), justify="right")
    for label in ("min", "max", "mean", "stddev", "max/mean"):
        balance.add_column(label, justify="right")
    for label, spread in (("replicas", report.replicas), ("leaders", report.leaders)):
        counts = [str(spread.per_broker.get(b.id, 0)) for b in brokers]
        figures = [str(spread.min), str(spread.max), f"{spread.mean:.2f}", f"{spread.stddev:.2f}", f"{spread.skew:.2f}"]
        balance.add_row(label, *counts, *figures)
    console.print(balance)
    console.print(
        f"rack spread: {report.rack_spread_violations} of {report.partitions} partitions span fewer than "
        "min(RF, racks) racks"
    )


def _parse_pairs(values: tuple[str, ...], param: str, shape: str) -> list[tuple[str, str]]:
    pairs = []
    for value in values:
        name, sep, rest = value.partition("=")
        if not sep or not name.strip():
            raise usage_error(f"{value!r}: expected {shape}", param)
        pairs.append((name.strip(), rest.strip()))
    return pairs


@placement.command("assign-consumers")
@click.option("--strategy", type=click.Choice(STRATEGIES), default="range", show_default=True, help="Kafka's assignor.")
@click.option(
    "--topic", "topics", multiple=True, required=True, help="A topic and its partition count: NAME=N (repeat)."
)
@click.option("--member", "members", multiple=True, required=True, help="A member and its topics: ID=t1,t2 (repeat).")
@click.option(
    "--previous",
    "previous_specs",
    multiple=True,
    help="For sticky: what a member owned before, ID=topic-partition,... (e.g. c1=orders-0,orders-3).",
)
@output_option
def assign_consumers_command(
    strategy: str, topics: tuple[str, ...], members: tuple[str, ...], previous_specs: tuple[str, ...], output: str
) -> None:
    """Assign topic partitions to consumer group members like Kafka's assignors.

    Example: raftmeta placement assign-consumers --strategy roundrobin --topic t=4 --member c0=t --member c1=t
    """
    partitions_per_topic: dict[str, int] = {}
    for name, count in _parse_pairs(topics, "--topic", "NAME=N"):
        if not count.isdigit():
            raise usage_error(f"{name}={count}: the partition count must be a non-negative integer", "--topic")
        partitions_per_topic[name] = check_int(
            int(count), 0, PREVIEW_PARTITIONS_MAX, f"{name}: partition count", "--topic"
        )
    subscriptions: dict[str, list[str]] = {}
    for member, listed in _parse_pairs(members, "--member", "ID=topic,topic"):
        if member in subscriptions:
            raise usage_error(f"member {member!r} is listed twice", "--member")
        subscriptions[member] = [t.strip() for t in listed.split(",") if t.strip()]
    previous: dict[str, list[tuple[str, int]]] = {}
    for member, owned in _parse_pairs(previous_specs, "--previous", "ID=topic-partition,..."):
        if member not in subscriptions:
            raise usage_error(f"member {member!r} is not one of the --member ids", "--previous")
        entries = []
        for item in filter(None, (x.strip() for x in owned.split(","))):
            topic, _, number = item.rpartition("-")
            if not topic or not number.isdigit():
                raise usage_error(f"{item!r}: expected topic-partition", "--previous")
            entries.append((topic, check_int(int(number), 0, INT32_MAX, f"{item!r}: partition", "--previous")))
        previous[member] = entries
    try:
        result = assign_consumers(strategy, partitions_per_topic, subscriptions, previous)
    except ValueError as error:
        raise usage_error(str(error), "--member") from error
    if output == "json":
        document: dict[str, Any] = {
            "strategy": strategy,
            "assignment": {m: [{"topic": t, "partition": p} for t, p in parts] for m, parts in result.items()},
            "counts": {m: len(parts) for m, parts in result.items()},
        }
        emit_json(document)
        return
    console = _console()
    console.print(f"{strategy} assignment (partitions per topic and member)")
    table = Table()
    table.add_column("topic")
    for member in result:
        table.add_column(member, justify="center")
    for topic in sorted(partitions_per_topic):
        row = [",".join(str(p) for t, p in result[m] if t == topic) or "." for m in result]
        table.add_row(topic, *row)
    table.add_row("total", *[str(len(parts)) for parts in result.values()])
    console.print(table)
