"""``raftmeta configs``: topic configs, with kafka-configs.sh's flags and layout.

    raftmeta configs --bootstrap-server B --describe --entity-type topics [--entity-name T] [--all]
    raftmeta configs --bootstrap-server B --alter --entity-type topics --entity-name T \\
        --add-config retention.ms=1000,cleanup.policy=[compact,delete] --delete-config segment.ms

``--alter`` sends one IncrementalAlterConfigs request (SET for each added key, DELETE for each
deleted one): the controller validates it as CreateTopics does, and writes nothing when it
refuses (docs/controller.md).
"""

from __future__ import annotations

from typing import Any

import click

from raftmeta.cli.common import CheckFailed, FlagConflict, emit_json, output_option, request_id_option, usage_error
from raftmeta.cli.connect import bootstrap_options, connect
from raftmeta.cli.topics import error_name
from raftmeta.v1 import controller_pb2

OP = controller_pb2.AlterConfigOp


def parse_add_config(text: str) -> list[tuple[str, str]]:
    """kafka-configs.sh's ``--add-config k1=v1,k2=[v2,v3]``: commas inside brackets belong to the
    value (a list, sent without the brackets)."""
    pairs: list[tuple[str, str]] = []
    depth, start, parts = 0, 0, []
    for i, char in enumerate(text):
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise usage_error(f"unbalanced ']' at character {i + 1} of {text!r}", "--add-config")
        elif char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth != 0:
        raise usage_error(f"unbalanced '[' in {text!r}", "--add-config")
    parts.append(text[start:])
    for part in parts:
        name, sep, value = part.partition("=")
        if not sep or not name.strip():
            raise usage_error(f"{part!r} is not key=value", "--add-config")
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        pairs.append((name.strip(), value))
    names = [n for n, _ in pairs]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise usage_error(f"config {duplicated[0]!r} given twice", "--add-config")
    return pairs


@click.command("configs")
@bootstrap_options
@click.option("--describe", "describe", is_flag=True, help="List configs of the entity (or of every topic).")
@click.option("--alter", "alter", is_flag=True, help="Change configs of the entity (--add-config, --delete-config).")
@click.option(
    "--entity-type", type=click.Choice(["topics"]), required=True, help="The kind of entity: topics (as Kafka)."
)
@click.option("--entity-name", default=None, help="The topic; --describe without it lists every topic.")
@click.option("--all", "show_all", is_flag=True, help="--describe: also every config at its default.")
@click.option("--add-config", default=None, help="k1=v1,k2=[v2,v3]: set these configs.")
@click.option("--delete-config", default=None, help="k1,k2: return these configs to their defaults.")
@click.option("--validate-only", is_flag=True, help="--alter: check and answer; write nothing.")
@request_id_option
@output_option
def configs(
    bootstrap_server: str,
    timeout: float,
    describe: bool,
    alter: bool,
    entity_type: str,
    entity_name: str | None,
    show_all: bool,
    add_config: str | None,
    delete_config: str | None,
    validate_only: bool,
    request_id: str,
    output: str,
) -> None:
    """Describe or alter topic configs (kafka-configs.sh)."""
    del entity_type  # topics only, checked by click
    if describe == alter:
        raise usage_error("give exactly one of --describe or --alter", "--describe")
    if describe:
        if add_config is not None or delete_config is not None:
            raise FlagConflict("--describe", "--add-config/--delete-config", "they alter configs")
        _describe(bootstrap_server, timeout, entity_name, show_all, output)
        return
    if entity_name is None:
        raise usage_error("--alter needs --entity-name", "--entity-name")
    if add_config is None and delete_config is None:
        raise usage_error("--alter needs --add-config or --delete-config", "--add-config")
    ops = (
        [OP(name=name, op=OP.SET, value=value) for name, value in parse_add_config(add_config or "")]
        if add_config
        else []
    )
    deleted = [name.strip() for name in (delete_config or "").split(",") if name.strip()]
    ops += [OP(name=name, op=OP.DELETE) for name in deleted]
    request = controller_pb2.IncrementalAlterConfigsRequest(
        topics=[controller_pb2.AlterConfigsTopic(topic=entity_name, ops=ops)],
        validate_only=validate_only,
        request_id=request_id,
    )
    with connect(bootstrap_server, timeout) as client:
        response = client.incremental_alter_configs(request, deadline_s=timeout)
    results = [
        {"name": r.topic, "error_code": error_name(r.error_code), "error_message": r.error_message}
        for r in response.results
    ]
    if output == "json":
        emit_json({"topics": results})
    for r in results:
        if r["error_code"] != "NONE":
            raise CheckFailed(
                f"Error while altering configs of topic {r['name']}: {r['error_code']}: {r['error_message']}"
            )
        if output != "json":
            verb = "Validated" if validate_only else "Completed updating"
            click.echo(f"{verb} config for topic {r['name']}.")


def _describe(bootstrap_server: str, timeout: float, topic: str | None, show_all: bool, output: str) -> None:
    with connect(bootstrap_server, timeout) as client:
        response = client.describe_configs([topic] if topic else [], include_defaults=show_all)
    document: list[dict[str, Any]] = [
        {
            "name": r.topic,
            "error_code": error_name(r.error_code),
            "error_message": r.error_message,
            "configs": [{"name": c.name, "value": c.value, "is_default": c.is_default} for c in r.configs],
        }
        for r in response.results
    ]
    if output == "json":
        emit_json({"topics": document})
    else:
        for t in document:
            if t["error_code"] != "NONE":
                continue
            click.echo(f"{'All' if show_all else 'Dynamic'} configs for topic {t['name']} are:")
            for c in t["configs"]:
                source = "DEFAULT_CONFIG" if c["is_default"] else "DYNAMIC_TOPIC_CONFIG"
                click.echo(f"  {c['name']}={c['value']} sensitive=false synonyms={{{source}:{c['name']}={c['value']}}}")
    failed = [t for t in document if t["error_code"] != "NONE"]
    if failed:
        raise CheckFailed(f"{failed[0]['name']}: {failed[0]['error_code']}: {failed[0]['error_message']}")
