"""Config APIs for topics: DescribeConfigs, IncrementalAlterConfigs and (legacy) AlterConfigs.

Only topic resources (type 2) hold configs in raftmeta. Broker and broker-logger resources are
answered with an empty list, as a broker with nothing set would, because Kafka tools ask for them
alongside topics; any other resource type is INVALID_REQUEST. Like a broker, DescribeConfigs lists
every known topic config, defaults included (``is_default``/``config_source`` tell them apart).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from raftmeta.controller.configs import TOPIC_CONFIGS
from raftmeta.controller.topic_configs import replace_ops
from raftmeta.kafka.context import ApiContext, CallRefused, call
from raftmeta.kafka.framing import Request
from raftmeta.v1 import controller_pb2, errors_pb2

TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8
# Kafka's ConfigSource numbers.
DYNAMIC_TOPIC_CONFIG = 1
DEFAULT_CONFIG = 5
# Kafka's ConfigType numbers (DescribeConfigsResponse.ConfigType), for the types of
# raftmeta.controller.configs.TOPIC_CONFIGS; an unknown key is reported as STRING.
CONFIG_TYPES = {"BOOLEAN": 1, "STRING": 2, "INT": 3, "SHORT": 4, "LONG": 5, "DOUBLE": 6, "LIST": 7}
CONFIG_TYPE_STRING = CONFIG_TYPES["STRING"]
INVALID_REQUEST = errors_pb2.INVALID_REQUEST


def _config_type(name: str) -> int:
    key = TOPIC_CONFIGS.get(name)
    return CONFIG_TYPES.get(key.type, CONFIG_TYPE_STRING) if key is not None else CONFIG_TYPE_STRING


def _config_values(entry: controller_pb2.ConfigEntry) -> dict[str, Any]:
    return {
        "name": entry.name,
        "value": entry.value,
        "read_only": False,
        "is_default": entry.is_default,
        "config_source": DEFAULT_CONFIG if entry.is_default else DYNAMIC_TOPIC_CONFIG,
        "is_sensitive": False,
        "synonyms": [],
        "config_type": _config_type(entry.name),
        "documentation": None,
    }


def _result(resource: Any, code: int, message: str | None, configs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "error_code": code,
        "error_message": message,
        "resource_type": resource.resource_type,
        "resource_name": resource.resource_name,
        "configs": configs,
    }


async def describe_configs(ctx: ApiContext, request: Request) -> dict[str, Any]:
    body = request.body
    topics = sorted({r.resource_name for r in body.resources if r.resource_type == TOPIC})
    described: dict[str, controller_pb2.DescribeConfigsResult] = {}
    refused: CallRefused | None = None
    if topics:
        try:
            response: controller_pb2.DescribeConfigsResponse = await call(
                ctx, "DescribeConfigs", controller_pb2.DescribeConfigsRequest(topics=topics, include_defaults=True)
            )
            described = {r.topic: r for r in response.results}
        except CallRefused as exc:
            refused = exc
    results = []
    for resource in body.resources:
        if resource.resource_type in (BROKER, BROKER_LOGGER):
            results.append(_result(resource, 0, None, []))
        elif resource.resource_type != TOPIC:
            message = f"resource type {resource.resource_type} has no configs in raftmeta (only topics do)"
            results.append(_result(resource, INVALID_REQUEST, message, []))
        elif refused is not None:
            results.append(_result(resource, refused.error_code, refused.message, []))
        else:
            found = described[resource.resource_name]
            keys = set(resource.configuration_keys) if resource.configuration_keys else None
            configs = [_config_values(e) for e in found.configs if keys is None or e.name in keys]
            results.append(_result(resource, int(found.error_code), found.error_message or None, configs))
    return {"throttle_time": 0, "results": results}


async def incremental_alter_configs(ctx: ApiContext, request: Request) -> dict[str, Any]:
    """IncrementalAlterConfigs: Kafka's op numbers are raftmeta's (SET, DELETE, APPEND, SUBTRACT)."""

    def ops(resource: Any) -> list[controller_pb2.AlterConfigOp]:
        return [
            controller_pb2.AlterConfigOp(name=c.name, op=c.config_operation, value=c.value or "")
            for c in resource.configs or ()
        ]

    return await _alter_topic_configs(ctx, request.body, ops)


async def alter_configs(ctx: ApiContext, request: Request) -> dict[str, Any]:
    """Legacy AlterConfigs: each topic's configs become exactly the ones named (the others go back to
    their defaults), validated like IncrementalAlterConfigs. The replacement is ops of the same
    controller alteration (``topic_configs.replace_ops``), computed from the controller's image.

    A null config list (not nullable in Kafka's schema; a broker cannot read such a request) would
    read as "replace with nothing" and clear the topic: the whole request is refused instead."""
    body = request.body
    resources = body.resources or ()
    if any(r.configs is None for r in resources):
        message = "AlterConfigs: a resource's configs are null (the field is not nullable)"
        return {"throttle_time": 0, "responses": [_refused(r, message) for r in resources]}
    return await _alter_topic_configs(ctx, body, lambda r: replace_ops((c.name, c.value) for c in r.configs))


def _refused(resource: Any, message: str) -> dict[str, Any]:
    return {
        "resource_type": resource.resource_type,
        "resource_name": resource.resource_name,
        "error_code": INVALID_REQUEST,
        "error_message": message,
    }


async def _alter_topic_configs(
    ctx: ApiContext, body: Any, ops_of: Callable[[Any], list[controller_pb2.AlterConfigOp]]
) -> dict[str, Any]:
    """One controller IncrementalAlterConfigs for the topic resources (``ops_of`` gives each one's
    ops), an answer per resource; other resource types are refused, each with INVALID_REQUEST."""
    grpc_request = controller_pb2.IncrementalAlterConfigsRequest(validate_only=body.validate_only)
    others = []
    for resource in body.resources or ():
        if resource.resource_type != TOPIC:
            others.append(resource)
            continue
        grpc_request.topics.add(topic=resource.resource_name, ops=ops_of(resource))
    results: dict[str, dict[str, Any]] = {}
    if grpc_request.topics:
        try:
            response: controller_pb2.IncrementalAlterConfigsResponse = await call(
                ctx, "IncrementalAlterConfigs", grpc_request
            )
            results = {
                r.topic: {"error_code": int(r.error_code), "error_message": r.error_message or None}
                for r in response.results
            }
        except CallRefused as exc:
            results = {
                t.topic: {"error_code": exc.error_code, "error_message": exc.message} for t in grpc_request.topics
            }
    responses = []
    for resource in body.resources or ():
        if resource in others:
            message = f"resource type {resource.resource_type} cannot be altered in raftmeta (only topics can)"
            responses.append(_refused(resource, message))
        else:
            base = {"resource_type": resource.resource_type, "resource_name": resource.resource_name}
            responses.append({**base, **results[resource.resource_name]})
    return {"throttle_time": 0, "responses": responses}
