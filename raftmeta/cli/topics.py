"""``raftmeta topics create|describe|alter|delete``, mirroring kafka-topics.sh.

Flags and the describe layout are Kafka's (``Topic: t Partition: 0 Leader: 1 Replicas: 1,2,3
Isr: 1,2,3``), so what a Kafka user types and reads works here. JSON shapes are the contract of
DESIGN.md §8.
"""

from __future__ import annotations

from typing import Any

import click

import placement
from raftmeta.cli.common import CheckFailed, emit_json, output_option, usage_error
from raftmeta.cli.connect import bootstrap_options, connect
from raftmeta.ids import uuid_to_str
from raftmeta.v1 import controller_pb2, errors_pb2

PLACERS = ("striped", "legacy", "balanced")


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
    try:
        partitions = placement.parse_replica_assignment(text)
    except placement.PlacementError as exc:
        raise usage_error(str(exc), "--replica-assignment") from exc
    return [controller_pb2.ReplicaAssignment(partition_index=i, broker_ids=b) for i, b in enumerate(partitions)]


def error_name(code: int) -> str:
    if code in errors_pb2.ErrorCode.values():
        return errors_pb2.ErrorCode.Name(errors_pb2.ErrorCode.ValueType(code))
    return str(code)


@click.group()
def topics() -> None:
    """Create, describe, alter and delete topics (kafka-topics.sh flags)."""


@topics.command("create")
@bootstrap_options
@click.option("--topic", "names", multiple=True, required=True, help="Topic name; repeat to create several.")
@click.option("--partitions", type=int, default=None, help="Number of partitions (default: the cluster's).")
@click.option("--replication-factor", type=int, default=None, help="Replicas per partition (default: the cluster's).")
@click.option(
    "--replica-assignment", default=None, help="Manual placement, e.g. 0:1:2,1:2:0 (partition i = i-th group)."
)
@click.option("--config", "configs", multiple=True, help="Topic config key=value; repeatable.")
@click.option("--placer", type=click.Choice(PLACERS), default="striped", show_default=True, help="Replica placer.")
@click.option("--broker-pool", default="", help="Place replicas only on brokers of this pool.")
@click.option("--validate-only", is_flag=True, help="Check the request and show the answer; write nothing.")
@output_option
def create(
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
    output: str,
) -> None:
    """Create topics. Exits 1 if any topic was rejected (each rejection names the rule)."""
    if replica_assignment and (partitions is not None or replication_factor is not None):
        raise usage_error("give either --replica-assignment or --partitions/--replication-factor, not both")
    request = controller_pb2.CreateTopicsRequest(validate_only=validate_only)
    for name in names:
        topic = controller_pb2.CreatableTopic(name=name, placer=placer, broker_pool=broker_pool)
        if partitions is not None:
            topic.num_partitions = partitions
        if replication_factor is not None:
            topic.replication_factor = replication_factor
        if replica_assignment:
            topic.assignments.extend(parse_replica_assignment(replica_assignment))
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
    failed = [r for r in results if r["error_code"] != "NONE"]
    if output == "json":
        emit_json({"topics": results, "validate_only": validate_only})
    else:
        verb = "would be created" if validate_only else "created"
        for r in results:
            if r["error_code"] == "NONE":
                click.echo(f"Topic {r['name']} {verb} (TopicId: {r['topic_id'] or '-'}).")
            else:
                click.echo(f"Error while creating topic {r['name']}: {r['error_code']}: {r['error_message']}", err=True)
    if failed:
        raise SystemExit(1)


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


def format_describe(topics_doc: list[dict[str, Any]]) -> str:
    """Kafka's describe layout: one topic line, then one tab-indented line per partition."""
    lines: list[str] = []
    for topic in topics_doc:
        if topic["error_code"] != "NONE":
            lines.append(f"Error describing topic {topic['name']}: {topic['error_code']}: {topic['error_message']}")
            continue
        parts = topic["partitions"]
        # During a reassignment the replicas include the ones being added: the factor excludes them.
        rf = len(parts[0]["replicas"]) - len(parts[0]["adding_replicas"]) if parts else 0
        configs = ",".join(f"{k}={v}" for k, v in topic["configs"].items())
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
            lines.append(line)
    return "\n".join(lines)


def _ids(ids: list[int]) -> str:
    return ",".join(str(i) for i in ids)


@topics.command("describe")
@bootstrap_options
@click.option("--topic", "names", multiple=True, help="Topic to describe; repeatable. Default: every topic.")
@output_option
def describe(bootstrap_server: str, timeout: float, names: tuple[str, ...], output: str) -> None:
    """Describe topics: leaders, replicas and ISR of every partition."""
    with connect(bootstrap_server, timeout) as client:
        response = client.describe_topics(names)
    document = describe_document(response)
    if output == "json":
        emit_json({"topics": document})
    else:
        click.echo(format_describe(document))
    if any(t["error_code"] != "NONE" for t in document):
        raise SystemExit(1)


@topics.command("alter")
@bootstrap_options
@click.option("--topic", "name", required=True, help="Topic to alter.")
@click.option("--partitions", type=click.IntRange(min=1), required=True, help="The new total number of partitions.")
@click.option("--replica-assignment", default=None, help="Manual placement of the new partitions only, e.g. 3:4,4:5.")
@click.option(
    "--placer", type=click.Choice(PLACERS), default="striped", show_default=True, help="Placer for new partitions."
)
@output_option
def alter(
    bootstrap_server: str,
    timeout: float,
    name: str,
    partitions: int,
    replica_assignment: str | None,
    placer: str,
    output: str,
) -> None:
    """Add partitions to a topic (partitions only grow, as in Kafka)."""
    topic = controller_pb2.CreatePartitionsTopic(name=name, count=partitions, placer=placer)
    if replica_assignment:
        topic.assignments.extend(parse_replica_assignment(replica_assignment))
    with connect(bootstrap_server, timeout) as client:
        response = client.create_partitions(controller_pb2.CreatePartitionsRequest(topics=[topic]), deadline_s=timeout)
    results = [
        {"name": r.name, "error_code": error_name(r.error_code), "error_message": r.error_message}
        for r in response.results
    ]
    if output == "json":
        emit_json({"topics": results})
    else:
        for r in results:
            if r["error_code"] == "NONE":
                click.echo(f"Topic {r['name']} now has {partitions} partitions.")
            else:
                click.echo(f"Error while altering topic {r['name']}: {r['error_code']}: {r['error_message']}", err=True)
    if any(r["error_code"] != "NONE" for r in results):
        raise SystemExit(1)


@topics.command("delete")
@bootstrap_options
@click.option("--topic", "names", multiple=True, required=True, help="Topic to delete; repeatable.")
@output_option
def delete(bootstrap_server: str, timeout: float, names: tuple[str, ...], output: str) -> None:
    """Delete topics."""
    request = controller_pb2.DeleteTopicsRequest(topic_names=list(names))
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
    if output == "json":
        emit_json({"topics": results})
    else:
        for r in results:
            if r["error_code"] == "NONE":
                click.echo(f"Topic {r['name']} deleted.")
            else:
                click.echo(f"Error while deleting topic {r['name']}: {r['error_code']}: {r['error_message']}", err=True)
    if any(r["error_code"] != "NONE" for r in results):
        raise CheckFailed("some topics were not deleted")
