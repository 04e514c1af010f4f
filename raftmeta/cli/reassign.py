"""``raftmeta reassign generate|execute|verify|cancel|list``, mirroring kafka-reassign-partitions.sh.

``generate`` reads the cluster (DescribeTopics, DescribeCluster) and prints a plan in Kafka's
reassignment JSON (``{"version": 1, "partitions": [{"topic", "partition", "replicas"}]}``) with the
number of replica moves and the balance before and after (``placement.reassign``: as few moves as
reach the goal). ``execute`` submits a plan file through AlterPartitionReassignments (optionally a
few moves at a time), ``verify`` compares the cluster with the plan, ``cancel`` reverts the plan's
ongoing moves, ``list`` shows the ongoing ones. The brokers copy data in simulation: a fleet broker
reports a new replica caught up after ``raftmeta brokers fleet --catch-up-delay-ms``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import click

from placement.brokers import UsableBroker
from placement.errors import PlacementError
from placement.metrics import BalanceReport
from placement.reassign import PLAN_PLACERS, ReassignmentPlan, plan_reassignment
from placement.rng import JavaRandom
from raftmeta.cli.common import (
    BROKER_ID,
    INT32_MAX,
    SEED,
    CheckFailed,
    FlagConflict,
    check_int,
    emit_json,
    int_range,
    output_option,
    usage_error,
)
from raftmeta.cli.connect import bootstrap_options, connect
from raftmeta.cli.topics import error_name
from raftmeta.client import SyncControllerClient
from raftmeta.v1 import controller_pb2, errors_pb2

POLL_INTERVAL_S = 0.5
PlanEntry = tuple[str, int, list[int]]


@click.group()
def reassign() -> None:
    """Move partition replicas between brokers (kafka-reassign-partitions.sh)."""


# ---- reading the cluster -------------------------------------------------------------------------
def _assignment(client: SyncControllerClient, topics: list[str], strict: bool = True) -> dict[str, list[list[int]]]:
    """topic -> replica lists as the controller counts them (without replicas still being added).
    A topic the controller answers with an error fails the command, or with ``strict=False`` is
    left out (execute: the reassignment request answers for it, per partition)."""
    described = client.describe_topics(topics)
    current: dict[str, list[list[int]]] = {}
    for topic in described.topics:
        if topic.error_code != errors_pb2.NONE:
            if not strict:
                continue
            raise CheckFailed(f"topic {topic.name}: {error_name(topic.error_code)}: {topic.error_message}")
        current[topic.name] = [
            [b for b in p.replicas if b not in set(p.adding_replicas)]
            for p in sorted(topic.partitions, key=lambda p: p.partition)
        ]
    return current


def _cluster(client: SyncControllerClient, topics: list[str]) -> tuple[dict[str, list[list[int]]], list[UsableBroker]]:
    """(topic -> replica lists as :func:`_assignment` gives them, the registered brokers)."""
    current = _assignment(client, topics)
    cluster = client.describe_cluster()
    brokers = [
        UsableBroker(
            b.broker_id,
            rack=b.rack if b.HasField("rack") else None,
            fenced=b.fenced,
            pool=b.pool if b.HasField("pool") else None,
        )
        for b in sorted(cluster.brokers, key=lambda b: b.broker_id)
    ]
    return current, brokers


def _parse_ids(text: str, option: str) -> list[int]:
    try:
        ids = [int(part) for part in text.split(",") if part.strip()]
    except ValueError as exc:
        raise usage_error(f"{text!r} is not a comma-separated list of broker ids", option) from exc
    return [check_int(i, BROKER_ID.low, BROKER_ID.high, "broker id", option) for i in ids]


# ---- generate ------------------------------------------------------------------------------------
def _balance_rows(before: BalanceReport, after: BalanceReport) -> list[tuple[str, str, str]]:
    def spread(report: BalanceReport, kind: str) -> str:
        s = report.replicas if kind == "replicas" else report.leaders
        return f"{s.min}/{s.max}/{s.stddev:.2f}"

    return [
        ("replicas per broker min/max/stddev", spread(before, "replicas"), spread(after, "replicas")),
        ("leaders per broker min/max/stddev", spread(before, "leaders"), spread(after, "leaders")),
        ("replica skew (max/mean)", f"{before.replica_skew:.2f}", f"{after.replica_skew:.2f}"),
        ("leader skew (max/mean)", f"{before.leader_skew:.2f}", f"{after.leader_skew:.2f}"),
        ("rack spread violations", str(before.rack_spread_violations), str(after.rack_spread_violations)),
    ]


def _report_document(report: BalanceReport) -> dict[str, Any]:
    document = report.to_dict()
    document.pop("topics")
    return document


def plan_document(plan: ReassignmentPlan) -> dict[str, Any]:
    return {
        "current": plan.current_json(),
        "proposed": plan.to_kafka_json(),
        "moves": plan.moves,
        "reorders": plan.reorders,
        "partitions_changed": len(plan.changed()),
        "before": _report_document(plan.before),
        "after": _report_document(plan.after),
    }


@reassign.command("generate")
@bootstrap_options
@click.option("--topics", "topic_list", default="", help="Comma-separated topics to plan for (default: every topic).")
@click.option(
    "--topics-to-move-json-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help='Topics to plan for, as kafka-reassign-partitions.sh reads them: {"topics": [{"topic": "t"}], "version": 1}.',
)
@click.option("--to-pool", default=None, help="Move every replica outside this broker pool into it.")
@click.option("--exclude-brokers", default=None, help="Comma-separated broker ids to move every replica off.")
@click.option(
    "--broker-list",
    default=None,
    help="Comma-separated broker ids the replicas may use (kafka-reassign-partitions.sh): every other broker "
    "is excluded.",
)
@click.option("--rebalance", is_flag=True, help="Even out replicas (±1 per broker) and preferred leaders.")
@click.option("--placer", type=click.Choice(PLAN_PLACERS), default="minimal", show_default=True,
              help="With --rebalance: minimal = fewest moves; balanced = re-place topics (per-topic ±1).")  # fmt: skip
@click.option("--seed", type=SEED, default=0, show_default=True, help="Random seed of the balanced placer.")
@click.option("--disable-rack-aware", is_flag=True,
              help="Balance before rack spread (kafka-reassign-partitions.sh's flag): a partition may then "
                   "lose a rack it spans.")  # fmt: skip
@click.option("--plan-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the proposed plan (Kafka's JSON) to this file for execute.")  # fmt: skip
@output_option
def generate(
    bootstrap_server: str,
    timeout: float,
    topic_list: str,
    topics_to_move_json_file: Path | None,
    to_pool: str | None,
    exclude_brokers: str | None,
    broker_list: str | None,
    rebalance: bool,
    placer: str,
    seed: int,
    disable_rack_aware: bool,
    plan_file: Path | None,
    output: str,
) -> None:
    """Propose a reassignment: into a pool, off some brokers, or rebalanced."""
    if to_pool is None and exclude_brokers is None and broker_list is None and not rebalance:
        raise usage_error("give at least one of --to-pool, --exclude-brokers, --broker-list, --rebalance")
    if placer == "balanced" and not rebalance:
        raise usage_error("--placer balanced re-places topics: it needs --rebalance", "--placer")
    if topic_list and topics_to_move_json_file is not None:
        raise FlagConflict("--topics", "--topics-to-move-json-file", "both name the topics")
    exclude = _parse_ids(exclude_brokers, "--exclude-brokers") if exclude_brokers else []
    allowed = _parse_ids(broker_list, "--broker-list") if broker_list is not None else None
    if allowed is not None and not allowed:
        raise usage_error("is empty: name the brokers the replicas may use", "--broker-list")
    topics = [t.strip() for t in topic_list.split(",") if t.strip()]
    if topics_to_move_json_file is not None:
        topics = read_topics_to_move(topics_to_move_json_file)
    with connect(bootstrap_server, timeout) as client:
        current, brokers = _cluster(client, topics)
    if allowed is not None:
        unknown = sorted(set(allowed) - {b.id for b in brokers})
        if unknown:
            raise usage_error(f"brokers {unknown} are not registered", "--broker-list")
        exclude = sorted(set(exclude) | {b.id for b in brokers if b.id not in allowed})
    if not current:
        raise CheckFailed("no topics to plan for")
    try:
        plan = plan_reassignment(
            current,
            brokers,
            exclude=exclude,
            pool=to_pool,
            rebalance=rebalance,
            placer=placer,
            random=JavaRandom(seed),
            rack_aware=not disable_rack_aware,
        )
    except PlacementError as exc:
        raise CheckFailed(f"no plan: {exc}") from exc
    if plan_file is not None:
        plan_file.write_text(json.dumps(plan.to_kafka_json()) + "\n")
    if output == "json":
        emit_json(plan_document(plan))
        return
    click.echo("Current partition replica assignment")
    click.echo(json.dumps(plan.current_json()))
    click.echo("")
    click.echo("Proposed partition reassignment configuration")
    click.echo(json.dumps(plan.to_kafka_json()))
    click.echo("")
    click.echo(
        f"Replica moves: {plan.moves} ({len(plan.changed())} partitions change, {plan.reorders} only reorder "
        "their replicas)"
    )
    rows = _balance_rows(plan.before, plan.after)
    width = max(len(r[0]) for r in rows)
    # Before: every registered broker; after: the brokers the plan may use (unfenced, kept, in the pool).
    click.echo(f"{'balance':<{width}}  {'before':>14}  {'after':>14}")
    for name, before, after in rows:
        click.echo(f"{name:<{width}}  {before:>14}  {after:>14}")
    if plan_file is not None:
        click.echo(f"Plan written to {plan_file}.")


def read_topics_to_move(path: Path) -> list[str]:
    """kafka-reassign-partitions.sh's --topics-to-move-json-file: ``{"topics": [{"topic": "t"}, ...],
    "version": 1}`` -> the topic names; a malformed file is a usage error naming the flag."""
    option = "--topics-to-move-json-file"
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise usage_error(f"cannot read {path}: {exc}", option) from exc
    items = document.get("topics") if isinstance(document, dict) else None
    if not isinstance(items, list) or not items:
        raise usage_error(f'{path}: expected {{"topics": [{{"topic": "name"}}, ...], "version": 1}}', option)
    names: list[str] = []
    for index, item in enumerate(items):
        name = item.get("topic") if isinstance(item, dict) else None
        if not isinstance(name, str) or not name:
            raise usage_error(f"{path}: topics[{index}] needs a string topic", option)
        if name not in names:
            names.append(name)
    return names


# ---- plan files ----------------------------------------------------------------------------------
def read_plan(path: Path) -> list[PlanEntry]:
    """Kafka's reassignment JSON → [(topic, partition, replicas)]; a malformed file is a usage error."""
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise usage_error(f"cannot read {path}: {exc}", "--plan") from exc
    if (
        not isinstance(document, dict)
        or document.get("version") != 1
        or not isinstance(document.get("partitions"), list)
    ):
        raise usage_error(f'{path}: expected {{"version": 1, "partitions": [...]}}', "--plan")
    entries: list[PlanEntry] = []
    seen: set[tuple[str, int]] = set()
    for index, item in enumerate(document["partitions"]):
        topic, partition, replicas = (
            (item.get(k) for k in ("topic", "partition", "replicas")) if isinstance(item, dict) else (None, None, None)
        )
        if (
            not isinstance(topic, str)
            or not isinstance(partition, int)
            or not isinstance(replicas, list)
            or not all(isinstance(b, int) for b in replicas)
        ):
            raise usage_error(
                f"{path}: partitions[{index}] needs a string topic, an int partition and an int list replicas",
                "--plan",
            )
        check_int(partition, 0, INT32_MAX, f"{path}: partitions[{index}].partition", "--plan")
        for broker in replicas:
            check_int(
                broker, BROKER_ID.low, BROKER_ID.high, f"{path}: partitions[{index}].replicas: broker id", "--plan"
            )
        if (topic, partition) in seen:
            raise usage_error(f"{path}: partition {topic}-{partition} appears twice", "--plan")
        seen.add((topic, partition))
        entries.append((topic, partition, replicas))
    return entries


def _alter_request(entries: list[PlanEntry], cancel: bool = False) -> controller_pb2.AlterPartitionReassignmentsRequest:
    request = controller_pb2.AlterPartitionReassignmentsRequest()
    by_topic: dict[str, controller_pb2.ReassignableTopic] = {}
    for topic, partition, replicas in entries:
        if topic not in by_topic:
            by_topic[topic] = request.topics.add(name=topic)
        by_topic[topic].partitions.add(partition_index=partition, replicas=[] if cancel else replicas, cancel=cancel)
    return request


def _results(response: controller_pb2.AlterPartitionReassignmentsResponse) -> list[dict[str, Any]]:
    return [
        {
            "topic": t.name,
            "partition": p.partition_index,
            "error_code": error_name(p.error_code),
            "error_message": p.error_message,
        }
        for t in response.results
        for p in t.partitions
    ]


def _ongoing(client: SyncControllerClient) -> set[tuple[str, int]]:
    listed = client.list_partition_reassignments()
    if listed.error_code != errors_pb2.NONE:
        raise CheckFailed(f"{error_name(listed.error_code)}: {listed.error_message}")
    return {(t.name, p.partition_index) for t in listed.topics for p in t.partitions}


def _waves(entries: list[PlanEntry], current: dict[str, list[list[int]]], moves_max: int) -> list[list[PlanEntry]]:
    """Consecutive groups of plan entries with at most ``moves_max`` replica copies each (a single
    partition needing more is a wave of its own)."""
    waves: list[list[PlanEntry]] = []
    wave: list[PlanEntry] = []
    moves = 0
    for entry in entries:
        topic, partition, replicas = entry
        old = current.get(topic, [])
        needed = len(set(replicas) - set(old[partition])) if partition < len(old) else len(replicas)
        if wave and moves + needed > moves_max:
            waves.append(wave)
            wave, moves = [], 0
        wave.append(entry)
        moves += needed
    if wave:
        waves.append(wave)
    return waves


# ---- execute -------------------------------------------------------------------------------------
@reassign.command("execute")
@bootstrap_options
@click.option("--plan", "plan_path", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Reassignment JSON (reassign generate's proposal, or Kafka's format).")  # fmt: skip
@click.option("--throttle-moves", type=int_range(1), default=None,
              help="At most N replica copies in flight: submit in waves, each once the last completes.")  # fmt: skip
@click.option("--additional", is_flag=True, help="Start even though other reassignments are in progress.")
@click.option("--wait-timeout", type=click.FloatRange(min=0.1), default=600.0, show_default=True,
              help="Seconds a throttled execute waits for each wave.")  # fmt: skip
@output_option
def execute(
    bootstrap_server: str,
    timeout: float,
    plan_path: Path,
    throttle_moves: int | None,
    additional: bool,
    wait_timeout: float,
    output: str,
) -> None:
    """Start the plan's reassignments (Kafka's --execute)."""
    entries = read_plan(plan_path)
    if not entries:
        raise CheckFailed(f"{plan_path}: the plan moves nothing")
    results: list[dict[str, Any]] = []
    with connect(bootstrap_server, timeout) as client:
        running = _ongoing(client)
        if running and not additional:
            raise CheckFailed(
                f"Cannot execute because there is an existing partition assignment ({len(running)} partitions "
                "moving). Use --additional to start this one as well (REASSIGNMENT_IN_PROGRESS)."
            )
        current = _assignment(client, sorted({t for t, _, _ in entries}), strict=throttle_moves is not None)
        rollback = rollback_json(entries, current)
        if output != "json":
            click.echo(rollback_text(rollback))
        waves = [entries] if throttle_moves is None else _waves(entries, current, throttle_moves)
        for number, wave in enumerate(waves, start=1):
            response = client.alter_partition_reassignments(_alter_request(wave), deadline_s=timeout)
            wave_results = _results(response)
            results.extend(wave_results)
            if output != "json":
                # Kafka's line: sorted by topic and partition, "reassignment" for one.
                ok = sorted((r["topic"], r["partition"]) for r in wave_results if r["error_code"] == "NONE")
                started = [f"{topic}-{partition}" for topic, partition in ok]
                prefix = f"Wave {number}/{len(waves)}: s" if len(waves) > 1 else "S"
                if started:
                    plural = "" if len(started) == 1 else "s"
                    click.echo(f"{prefix}uccessfully started partition reassignment{plural} for {','.join(started)}")
                for r in wave_results:
                    if r["error_code"] != "NONE":
                        click.echo(
                            f"Error reassigning {r['topic']}-{r['partition']}: {r['error_code']}: {r['error_message']}",
                            err=True,
                        )
            if len(waves) > 1:
                _wait_for(client, wave, wait_timeout)
    failed = [r for r in results if r["error_code"] != "NONE"]
    if output == "json":
        emit_json({"partitions": results, "waves": len(waves), "rollback": rollback})
    if failed:
        raise SystemExit(1)


def rollback_json(entries: list[PlanEntry], current: dict[str, list[list[int]]]) -> dict[str, Any]:
    """The current assignment of the plan's partitions in Kafka's reassignment JSON, sorted by
    topic and partition, as kafka-reassign-partitions --execute prints it to roll back with
    (``log_dirs`` "any" per replica, as Kafka writes it). A partition the cluster does not have is
    left out: the reassignment answers for it."""
    partitions = []
    for topic, partition, _ in sorted(entries, key=lambda e: (e[0], e[1])):
        replicas = current.get(topic, [])
        if partition < len(replicas):
            assigned = replicas[partition]
            partitions.append(
                {"topic": topic, "partition": partition, "replicas": assigned, "log_dirs": ["any"] * len(assigned)}
            )
    return {"version": 1, "partitions": partitions}


def rollback_text(rollback: dict[str, Any]) -> str:
    """kafka-reassign-partitions --execute's first lines, byte for byte (compact JSON)."""
    return (
        "Current partition replica assignment\n\n"
        f"{json.dumps(rollback, separators=(',', ':'))}\n\n"
        "Save this to use as the --reassignment-json-file option during rollback"
    )


def _wait_for(client: SyncControllerClient, wave: list[PlanEntry], wait_timeout: float) -> None:
    wanted = {(t, p) for t, p, _ in wave}
    deadline = time.monotonic() + wait_timeout
    while wanted & _ongoing(client):
        if time.monotonic() >= deadline:
            raise CheckFailed(
                f"{len(wanted & _ongoing(client))} reassignments still in progress after {wait_timeout:g} s; "
                "they go on: see reassign list / verify"
            )
        time.sleep(POLL_INTERVAL_S)


# ---- verify --------------------------------------------------------------------------------------
@reassign.command("verify")
@bootstrap_options
@click.option("--plan", "plan_path", type=click.Path(dir_okay=False, path_type=Path), required=True)
@output_option
def verify(bootstrap_server: str, timeout: float, plan_path: Path, output: str) -> None:
    """Check the plan against the cluster (Kafka's --verify). Exits 1 unless every move is complete."""
    entries = read_plan(plan_path)
    with connect(bootstrap_server, timeout) as client:
        described = client.describe_topics(sorted({t for t, _, _ in entries}))
    partitions = {
        (t.name, p.partition): p for t in described.topics if t.error_code == errors_pb2.NONE for p in t.partitions
    }
    rows: list[dict[str, Any]] = []
    for topic, partition, target in entries:
        found = partitions.get((topic, partition))
        if found is None:
            status, replicas = "unknown", []
        else:
            replicas = list(found.replicas)
            if found.adding_replicas or found.removing_replicas:
                status = "in_progress"
            else:
                status = "complete" if replicas == target else "different"
        rows.append({"topic": topic, "partition": partition, "status": status, "replicas": replicas, "target": target})
    complete = all(r["status"] == "complete" for r in rows)
    if output == "json":
        emit_json({"complete": complete, "partitions": rows})
    else:
        for r in rows:
            name = f"{r['topic']}-{r['partition']}"
            message = {
                "complete": f"Reassignment of partition {name} is completed.",
                "in_progress": f"Reassignment of partition {name} is still in progress.",
                "different": f"There is no active reassignment of partition {name}, but replicas are "
                f"{_ids(r['replicas'])} rather than {_ids(r['target'])}.",
                "unknown": f"Partition {name} does not exist.",
            }[r["status"]]
            click.echo(message)
    if not complete:
        raise SystemExit(1)


def _ids(ids: list[int]) -> str:
    return ",".join(str(i) for i in ids)


# ---- cancel / list -------------------------------------------------------------------------------
@reassign.command("cancel")
@bootstrap_options
@click.option("--plan", "plan_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Cancel the ongoing moves of this plan's partitions.")  # fmt: skip
@click.option("--all", "cancel_all", is_flag=True, help="Cancel every ongoing reassignment.")
@output_option
def cancel(bootstrap_server: str, timeout: float, plan_path: Path | None, cancel_all: bool, output: str) -> None:
    """Cancel reassignments: the adding replicas are dropped, the original replicas restored."""
    if (plan_path is None) == (not cancel_all):
        raise usage_error("give exactly one of --plan FILE and --all")
    with connect(bootstrap_server, timeout) as client:
        running: list[PlanEntry] = [] if plan_path else [(t, p, []) for t, p in sorted(_ongoing(client))]
        entries: list[PlanEntry] = read_plan(plan_path) if plan_path is not None else running
        if not entries:
            results: list[dict[str, Any]] = []
        else:
            response = client.alter_partition_reassignments(_alter_request(entries, cancel=True), deadline_s=timeout)
            results = _results(response)
    # A partition whose move already finished has nothing to cancel: reported, not a failure.
    failed = [r for r in results if r["error_code"] not in ("NONE", "NO_REASSIGNMENT_IN_PROGRESS")]
    if output == "json":
        emit_json({"partitions": results})
    else:
        cancelled = [f"{r['topic']}-{r['partition']}" for r in results if r["error_code"] == "NONE"]
        idle = [f"{r['topic']}-{r['partition']}" for r in results if r["error_code"] == "NO_REASSIGNMENT_IN_PROGRESS"]
        click.echo(f"Successfully cancelled partition reassignments for: {','.join(cancelled) or '(none)'}")
        if idle:
            click.echo(f"None in progress for: {','.join(idle)}")
        for r in failed:
            click.echo(
                f"Error cancelling {r['topic']}-{r['partition']}: {r['error_code']}: {r['error_message']}", err=True
            )
    if failed:
        raise SystemExit(1)


@reassign.command("list")
@bootstrap_options
@click.option("--topic", "names", multiple=True, help="Only this topic; repeatable. Default: every topic.")
@output_option
def list_reassignments(bootstrap_server: str, timeout: float, names: tuple[str, ...], output: str) -> None:
    """Ongoing reassignments (Kafka's --list)."""
    request = controller_pb2.ListPartitionReassignmentsRequest(
        topics=[controller_pb2.TopicPartitions(topic=name) for name in names]
    )
    with connect(bootstrap_server, timeout) as client:
        listed = client.list_partition_reassignments(request)
    if listed.error_code != errors_pb2.NONE:
        raise CheckFailed(f"{error_name(listed.error_code)}: {listed.error_message}")
    rows: list[dict[str, Any]] = [
        {
            "topic": t.name,
            "partition": p.partition_index,
            "replicas": list(p.replicas),
            "adding_replicas": list(p.adding_replicas),
            "removing_replicas": list(p.removing_replicas),
            "isr": list(p.isr),
            "leader": p.leader,
        }
        for t in listed.topics
        for p in t.partitions
    ]
    if output == "json":
        emit_json({"reassignments": rows})
        return
    if not rows:
        click.echo("No partition reassignments found.")
        return
    click.echo("Current partition reassignments:")
    for r in rows:
        click.echo(
            f"{r['topic']}-{r['partition']}: replicas: {_ids(r['replicas'])}. adding: {_ids(r['adding_replicas'])}. "
            f"removing: {_ids(r['removing_replicas'])}. isr: {_ids(r['isr'])}."
        )
