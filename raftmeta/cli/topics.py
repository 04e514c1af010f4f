"""``raftmeta topics create|list|describe|alter|delete``, mirroring kafka-topics.sh.

Flags and the describe layout are Kafka 4.4's (``Topic: t Partition: 0 Leader: 1 Replicas: 1,2,3
Isr: 1,2,3 Elr: N/A LastKnownElr: N/A``), so what a Kafka user types and reads works here; so do
kafka-topics.sh's action flags (``raftmeta topics --list`` is ``raftmeta topics list``) and its
``Created topic orders.`` line. JSON shapes are the contract of DESIGN.md §8.
"""

from __future__ import annotations

import re
from typing import Any

import click
from click.core import ParameterSource

from raftmeta.api.health import DESCRIBE_FILTERS, classify, min_insync_replicas
from raftmeta.api.ids import uuid_to_str
from raftmeta.cli.common import (
    BROKER_ID,
    TOPIC_PARTITION_COUNT,
    TOPIC_REPLICATION_FACTOR,
    FlagConflict,
    check_int,
    emit_json,
    int_range,
    output_option,
    request_id_option,
    usage_error,
)
from raftmeta.cli.connect import bootstrap_options, connect
from raftmeta.v1 import controller_pb2, errors_pb2

PLACERS = ("striped", "legacy", "balanced")
# kafka-topics.sh's actions, as flags, and the subcommand each one is here.
ACTION_FLAGS = {
    "--create": "create",
    "--list": "list",
    "--describe": "describe",
    "--alter": "alter",
    "--delete": "delete",
}
# Errors that --if-not-exists / --if-exists turn into "nothing to do" (Kafka's TopicExistsException
# and its missing-topic check).
ALREADY_EXISTS = "TOPIC_ALREADY_EXISTS"
UNKNOWN_TOPIC = "UNKNOWN_TOPIC_OR_PARTITION"


def parse_configs(pairs: tuple[str, ...]) -> dict[str, str]:
    """``("k=v", ...)`` → dict; a malformed pair is a usage error naming it."""
    configs: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise usage_error(f"{pair!r} is not key=value", "--config")
        if key.strip() in configs:
            raise usage_error(f"config {key.strip()!r} given twice", "--config")
        configs[key.strip()] = value.strip()
    return configs


def parse_replica_assignment(text: str) -> list[controller_pb2.ReplicaAssignment]:
    """Kafka's ``--replica-assignment 0:1:2,1:2:0`` (partition i = i-th comma group) → assignments.

    Only the syntax is checked here (by the placement package's parser); the controller checks the
    rules (known brokers, no duplicates, equal replica counts) and answers
    INVALID_REPLICA_ASSIGNMENT naming the partition.
    """
    import placement  # numpy and the placers: only for commands that take an assignment

    try:
        partitions = placement.parse_replica_assignment(text)
    except placement.PlacementError as exc:
        raise usage_error(str(exc), "--replica-assignment") from exc
    for index, brokers in enumerate(partitions):
        for broker in brokers:
            check_int(broker, BROKER_ID.low, BROKER_ID.high, f"partition {index}: broker id", "--replica-assignment")
    return [controller_pb2.ReplicaAssignment(partition_index=i, broker_ids=b) for i, b in enumerate(partitions)]


def check_manual_assignment(ctx: click.Context, replica_assignment: str | None, *counts: str) -> None:
    """``--replica-assignment`` is the whole placement: it cannot be empty, and the flags that
    would place replicas otherwise cannot be given with it. kafka-topics.sh refuses
    ``--partitions``/``--replication-factor`` with it on create (``Option "[replica-assignment]"
    can't be used with option "[partitions]"``); an explicit ``--placer`` would be ignored, so it
    is refused too (its default is not). ``counts``: the count flags refused here, as set."""
    if replica_assignment is None:
        return
    if not replica_assignment.strip():
        raise usage_error("empty: give one broker list per partition, e.g. 0:1:2,1:2:0", "--replica-assignment")
    if counts:
        raise FlagConflict("--replica-assignment", counts[0], "the assignment sets it")
    if ctx.get_parameter_source("placer") not in (ParameterSource.DEFAULT, None):
        raise FlagConflict("--replica-assignment", "--placer", "a manual assignment is not placed by a placer")


def error_name(code: int) -> str:
    if code in errors_pb2.ErrorCode.values():
        return errors_pb2.ErrorCode.Name(errors_pb2.ErrorCode.ValueType(code))
    return str(code)


class TopicsGroup(click.Group):
    """``topics`` also takes kafka-topics.sh's action flags: ``topics --list ...`` runs ``topics
    list ...`` (exactly one action, as in Kafka)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands:
            actions = [arg for arg in args if arg in ACTION_FLAGS]
            if len(actions) > 1:
                raise usage_error(
                    "Command must include exactly one action: --list, --describe, --create, --alter or --delete"
                )
            if actions:
                rest = list(args)
                rest.remove(actions[0])
                args = [ACTION_FLAGS[actions[0]], *rest]
        return super().parse_args(ctx, args)


@click.group(cls=TopicsGroup)
def topics() -> None:
    """Create, list, describe, alter and delete topics (kafka-topics.sh flags).

    kafka-topics.sh's action flags work too: `raftmeta topics --list --bootstrap-server B` is
    `raftmeta topics list --bootstrap-server B`.
    """


@topics.command("create")
@bootstrap_options
@click.option("--topic", "names", multiple=True, required=True, help="Topic name; repeat to create several.")
@click.option(
    "--partitions", type=TOPIC_PARTITION_COUNT, default=None, help="Number of partitions (default: the cluster's)."
)
@click.option(
    "--replication-factor",
    type=TOPIC_REPLICATION_FACTOR,
    default=None,
    help="Replicas per partition (default: the cluster's).",
)
@click.option(
    "--replica-assignment", default=None, help="Manual placement, e.g. 0:1:2,1:2:0 (partition i = i-th group)."
)
@click.option("--config", "configs", multiple=True, help="Topic config key=value; repeatable.")
@click.option("--placer", type=click.Choice(PLACERS), default="striped", show_default=True,
              help="Replica placer (not with --replica-assignment).")  # fmt: skip
@click.option("--broker-pool", default="", help="Place replicas only on brokers of this pool.")
@click.option("--validate-only", is_flag=True, help="Check the request and show the answer; write nothing.")
@click.option(
    "--if-not-exists", is_flag=True, help="A topic that already exists is not an error (it is left as it is)."
)
@request_id_option
@output_option
@click.pass_context
def create(
    ctx: click.Context,
    bootstrap_server: str,
    timeout: float,
    names: tuple[str, ...],
    partitions: int | None,
    replication_factor: int | None,
    replica_assignment: str | None,
    configs: tuple[str, ...],
    placer: str,
    broker_pool: str,
    validate_only: bool,
    if_not_exists: bool,
    request_id: str,
    output: str,
) -> None:
    """Create topics. Exits 1 if any topic was rejected (each rejection names the rule)."""
    counts = {"--partitions": partitions, "--replication-factor": replication_factor}
    check_manual_assignment(ctx, replica_assignment, *(flag for flag, value in counts.items() if value is not None))
    assignments = parse_replica_assignment(replica_assignment) if replica_assignment is not None else []
    request = controller_pb2.CreateTopicsRequest(validate_only=validate_only, request_id=request_id)
    for name in names:
        topic = controller_pb2.CreatableTopic(name=name, placer=placer, broker_pool=broker_pool)
        if partitions is not None:
            topic.num_partitions = partitions
        if replication_factor is not None:
            topic.replication_factor = replication_factor
        topic.assignments.extend(assignments)
        topic.configs.update(parse_configs(configs))
        request.topics.append(topic)
    with connect(bootstrap_server, timeout) as client:
        response = client.create_topics(request, deadline_s=timeout)
    results = [
        {
            "name": result.name,
            "topic_id": uuid_to_str(result.topic_id),
            "error_code": error_name(result.error_code),
            "error_message": result.error_message,
            "num_partitions": result.num_partitions,
            "replication_factor": result.replication_factor,
        }
        for result in response.topics
    ]
    # Kafka's --if-not-exists: the request is still sent, and TOPIC_ALREADY_EXISTS is not an error.
    ignored = {ALREADY_EXISTS} if if_not_exists else set()
    failed = [r for r in results if r["error_code"] not in ("NONE", *ignored)]
    if output == "json":
        emit_json({"topics": results, "validate_only": validate_only})
    else:
        for r in results:
            if r["error_code"] == "NONE":
                # kafka-topics.sh's own line (scripts grep it); the topic id is in --output json.
                click.echo(f"Topic {r['name']} would be created." if validate_only else f"Created topic {r['name']}.")
            elif r["error_code"] not in ignored:
                click.echo(f"Error while creating topic {r['name']}: {r['error_code']}: {r['error_message']}", err=True)
    if failed:
        raise SystemExit(1)


def is_internal(name: str) -> bool:
    """Internal topics, for --exclude-internal: names starting with ``__`` (Kafka's own, such as
    ``__consumer_offsets`` and ``__transaction_state``, all do)."""
    return name.startswith("__")


def topic_filter(pattern: str | None) -> re.Pattern[str] | None:
    """Kafka's ``--topic`` with --list/--describe is a regular expression matched against the
    whole name, with ``,`` as ``|`` (kafka.tools.filter.TopicFilter.IncludeList)."""
    if pattern is None:
        return None
    text = pattern.strip().replace(",", "|").lstrip("\"'").rstrip("\"'")
    try:
        return re.compile(text)
    except re.error as exc:
        raise usage_error(f"{pattern!r} is not a regular expression: {exc}", "--topic") from exc


@topics.command("list")
@bootstrap_options
@click.option("--topic", "pattern", default=None, help="Only topics whose whole name matches this regular expression.")
@click.option("--exclude-internal", is_flag=True, help="Leave out internal topics (names starting with '__').")
@output_option
def list_topics(
    bootstrap_server: str, timeout: float, pattern: str | None, exclude_internal: bool, output: str
) -> None:
    """List topic names, one per line, sorted (kafka-topics.sh --list)."""
    wanted = topic_filter(pattern)
    with connect(bootstrap_server, timeout) as client:
        # Names only: a page holds 2000 topics instead of 2000 partitions.
        response = client.describe_topics((), exclude_partitions=True)
    listed = [
        {"name": t.name, "topic_id": uuid_to_str(t.topic_id), "internal": is_internal(t.name)}
        for t in sorted(response.topics, key=lambda t: t.name)
        if t.error_code == errors_pb2.NONE and (wanted is None or wanted.fullmatch(t.name))
    ]
    if exclude_internal:
        listed = [t for t in listed if not t["internal"]]
    if output == "json":
        emit_json({"topics": listed})
        return
    for t in listed:
        click.echo(t["name"])


def describe_document(response: controller_pb2.DescribeTopicsResponse) -> list[dict[str, Any]]:
    return [
        {
            "name": topic.name,
            "topic_id": uuid_to_str(topic.topic_id),
            "error_code": error_name(topic.error_code),
            "error_message": topic.error_message,
            "configs": dict(sorted(topic.configs.items())),
            "partitions": [
                {
                    "partition": p.partition,
                    "leader": p.leader,
                    "leader_epoch": p.leader_epoch,
                    "partition_epoch": p.partition_epoch,
                    "replicas": list(p.replicas),
                    "isr": list(p.isr),
                    "adding_replicas": list(p.adding_replicas),
                    "removing_replicas": list(p.removing_replicas),
                }
                for p in topic.partitions
            ],
        }
        for topic in response.topics
    ]


def format_describe(topics_doc: list[dict[str, Any]], *, topic_lines: bool = True) -> str:
    """Kafka's describe layout: one topic line, then one tab-indented line per partition.
    ``topic_lines=False``: the partition lines alone, as kafka-topics.sh prints a filtered describe."""
    lines: list[str] = []
    for topic in topics_doc:
        if topic["error_code"] != "NONE":
            lines.append(f"Error describing topic {topic['name']}: {topic['error_code']}: {topic['error_message']}")
            continue
        parts = topic["partitions"]
        # During a reassignment the replicas include the ones being added: the factor excludes them.
        rf = len(parts[0]["replicas"]) - len(parts[0]["adding_replicas"]) if parts else 0
        configs = ",".join(f"{k}={v}" for k, v in topic["configs"].items())
        if topic_lines:
            lines.append(
                f"Topic: {topic['name']}\tTopicId: {topic['topic_id']}\tPartitionCount: {len(parts)}\t"
                f"ReplicationFactor: {rf}\tConfigs: {configs}"
            )
        for p in parts:
            line = (
                f"\tTopic: {topic['name']}\tPartition: {p['partition']}\tLeader: "
                f"{p['leader'] if p['leader'] >= 0 else 'none'}\tReplicas: {_ids(p['replicas'])}\tIsr: {_ids(p['isr'])}"
            )
            if p["adding_replicas"]:
                line += f"\tAdding Replicas: {_ids(p['adding_replicas'])}"
            if p["removing_replicas"]:
                line += f"\tRemoving Replicas: {_ids(p['removing_replicas'])}"
            # Kafka 4's columns for eligible leader replicas (KIP-966), which raftmeta does not keep:
            # N/A, as kafka-topics.sh prints them for a partition that reports none.
            lines.append(line + "\tElr: N/A\tLastKnownElr: N/A")
    return "\n".join(lines)


def _ids(ids: list[int]) -> str:
    return ",".join(str(i) for i in ids)


# kafka-topics.sh --describe's partition filters: flag -> parameter name.
HEALTH_FLAGS = {f"--{name}": name.replace("-", "_") for name in DESCRIBE_FILTERS}


def health_filter(chosen: dict[str, bool]) -> str | None:
    """The one partition filter given (a ``DESCRIBE_FILTERS`` name), or None. Two at once is a usage
    error, as in the Scala TopicCommand (checkInvalidArgs: each report option is invalid with the
    others; the later Java port dropped the check and ORs them)."""
    given = [flag for flag, param in HEALTH_FLAGS.items() if chosen.get(param)]
    if len(given) > 1:
        raise FlagConflict(given[0], given[1], "describe shows one kind of partition at a time")
    return given[0].removeprefix("--") if given else None


def filter_partitions(
    topics_doc: list[dict[str, Any]], describe_filter: str, live_brokers: set[int]
) -> list[dict[str, Any]]:
    """The topics with only the partitions the filter shows (``raftmeta.api.health``'s rules, the topic's
    ``min.insync.replicas`` from its configs); topics left with none are dropped, topics that failed
    to describe are kept (their error is still reported)."""
    kept: list[dict[str, Any]] = []
    for topic in topics_doc:
        if topic["error_code"] != "NONE":
            kept.append(topic)
            continue
        min_isr = min_insync_replicas(topic["configs"])
        partitions = [
            p
            for p in topic["partitions"]
            if classify(p["replicas"], p["isr"], p["leader"], live_brokers, min_isr, p["adding_replicas"]).matches(
                describe_filter
            )
        ]
        if partitions:
            kept.append({**topic, "partitions": partitions})
    return kept


@topics.command("describe")
@bootstrap_options
@click.option("--topic", "names", multiple=True, help="Topic to describe; repeatable. Default: every topic.")
@click.option("--exclude-internal", is_flag=True, help="Leave out internal topics (names starting with '__').")
@click.option("--if-exists", is_flag=True, help="A topic that does not exist is not an error (it is left out).")
@click.option(
    "--consistency",
    type=click.Choice(["linearizable", "stale"]),
    default="linearizable",
    show_default=True,
    help="linearizable: the leader answers after confirming it still leads (every acknowledged write "
    "shows); stale: the first node reached answers from its own copy at once (may lag; needs no leader).",
)
@click.option("--under-replicated-partitions", is_flag=True,
              help="Only partitions with fewer in-sync replicas than replicas.")  # fmt: skip
@click.option("--unavailable-partitions", is_flag=True,
              help="Only partitions with no leader or a leader that is not a live (unfenced) broker.")  # fmt: skip
@click.option("--under-min-isr-partitions", is_flag=True,
              help="Only partitions with no leader or fewer in-sync replicas than min.insync.replicas.")  # fmt: skip
@click.option("--at-min-isr-partitions", is_flag=True,
              help="Only partitions with exactly min.insync.replicas in-sync replicas.")  # fmt: skip
@click.option(
    "--partition-size-limit-per-response",
    "partition_limit",
    type=int_range(1),
    default=None,
    help="At most this many partitions in one DescribeTopics answer (the node caps it at its own "
    "maximum, 2000); the command reads every answer. Default: the node's maximum.",
)
@output_option
def describe(
    bootstrap_server: str,
    timeout: float,
    names: tuple[str, ...],
    exclude_internal: bool,
    if_exists: bool,
    consistency: str,
    under_replicated_partitions: bool,
    unavailable_partitions: bool,
    under_min_isr_partitions: bool,
    at_min_isr_partitions: bool,
    partition_limit: int | None,
    output: str,
) -> None:
    """Describe topics: leaders, replicas and ISR of every partition.

    With one of kafka-topics.sh's filters (--under-replicated-partitions, --unavailable-partitions,
    --under-min-isr-partitions, --at-min-isr-partitions) only the matching partitions are shown, as
    partition lines without topic lines (Kafka's layout); min.insync.replicas is the topic's config
    (default 1).
    """
    describe_filter = health_filter(
        {
            "under_replicated_partitions": under_replicated_partitions,
            "unavailable_partitions": unavailable_partitions,
            "under_min_isr_partitions": under_min_isr_partitions,
            "at_min_isr_partitions": at_min_isr_partitions,
        }
    )
    stale = consistency == "stale"
    live: set[int] = set()
    with connect(bootstrap_server, timeout) as client:
        response = client.describe_topics(names, stale=stale, partition_limit=partition_limit or 0)
        if describe_filter == "unavailable-partitions":
            # Kafka's live brokers are the ones DescribeCluster lists: registered and unfenced.
            live = {b.broker_id for b in client.describe_cluster(stale=stale).brokers if not b.fenced}
    document = [
        t
        for t in describe_document(response)
        if not (exclude_internal and is_internal(t["name"])) and not (if_exists and t["error_code"] == UNKNOWN_TOPIC)
    ]
    if describe_filter is not None:
        document = filter_partitions(document, describe_filter, live)
    if output == "json":
        emit_json({"topics": document})
    elif document:
        click.echo(format_describe(document, topic_lines=describe_filter is None))
    if any(t["error_code"] != "NONE" for t in document):
        raise SystemExit(1)


@topics.command("alter")
@bootstrap_options
@click.option("--topic", "name", required=True, help="Topic to alter.")
@click.option("--partitions", type=TOPIC_PARTITION_COUNT, required=True, help="The new total number of partitions.")
@click.option("--replica-assignment", default=None, help="Manual placement of the new partitions only, e.g. 3:4,4:5.")
@click.option(
    "--placer",
    type=click.Choice(PLACERS),
    default="striped",
    show_default=True,
    help="Placer for new partitions (not with --replica-assignment).",
)
@click.option("--if-exists", is_flag=True, help="A topic that does not exist is not an error (nothing is changed).")
@request_id_option
@output_option
@click.pass_context
def alter(
    ctx: click.Context,
    bootstrap_server: str,
    timeout: float,
    name: str,
    partitions: int,
    replica_assignment: str | None,
    placer: str,
    if_exists: bool,
    request_id: str,
    output: str,
) -> None:
    """Add partitions to a topic (partitions only grow, as in Kafka)."""
    check_manual_assignment(ctx, replica_assignment)
    topic = controller_pb2.CreatePartitionsTopic(name=name, count=partitions, placer=placer)
    if replica_assignment is not None:
        topic.assignments.extend(parse_replica_assignment(replica_assignment))
    with connect(bootstrap_server, timeout) as client:
        request = controller_pb2.CreatePartitionsRequest(topics=[topic], request_id=request_id)
        response = client.create_partitions(request, deadline_s=timeout)
    results = [
        {"name": r.name, "error_code": error_name(r.error_code), "error_message": r.error_message}
        for r in response.results
    ]
    ignored = {UNKNOWN_TOPIC} if if_exists else set()
    if output == "json":
        emit_json({"topics": results})
    else:
        for r in results:
            if r["error_code"] == "NONE":
                click.echo(f"Topic {r['name']} now has {partitions} partitions.")
            elif r["error_code"] not in ignored:
                click.echo(f"Error while altering topic {r['name']}: {r['error_code']}: {r['error_message']}", err=True)
    if any(r["error_code"] not in ("NONE", *ignored) for r in results):
        raise SystemExit(1)


@topics.command("delete")
@bootstrap_options
@click.option("--topic", "names", multiple=True, required=True, help="Topic to delete; repeatable.")
@click.option("--if-exists", is_flag=True, help="A topic that does not exist is not an error.")
@request_id_option
@output_option
def delete(
    bootstrap_server: str, timeout: float, names: tuple[str, ...], if_exists: bool, request_id: str, output: str
) -> None:
    """Delete topics."""
    request = controller_pb2.DeleteTopicsRequest(topic_names=list(names), request_id=request_id)
    with connect(bootstrap_server, timeout) as client:
        response = client.delete_topics(request, deadline_s=timeout)
    results = [
        {
            "name": r.name,
            "topic_id": uuid_to_str(r.topic_id),
            "error_code": error_name(r.error_code),
            "error_message": r.error_message,
        }
        for r in response.responses
    ]
    ignored = {UNKNOWN_TOPIC} if if_exists else set()
    if output == "json":
        emit_json({"topics": results})
    else:
        for r in results:
            if r["error_code"] == "NONE":
                click.echo(f"Topic {r['name']} deleted.")
            elif r["error_code"] not in ignored:
                click.echo(f"Error while deleting topic {r['name']}: {r['error_code']}: {r['error_message']}", err=True)
    if any(r["error_code"] not in ("NONE", *ignored) for r in results):
        raise SystemExit(1)
