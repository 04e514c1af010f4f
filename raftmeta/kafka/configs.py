"""Config APIs for topics: DescribeConfigs, IncrementalAlterConfigs and (legacy) AlterConfigs.

Only topic resources (type 2) hold configs in raftmeta. Broker and broker-logger resources are
answered with an empty list, as a broker with nothing set would, because Kafka tools ask for them
alongside topics; any other resource type is INVALID_REQUEST. Like a broker, DescribeConfigs lists
every known topic config, defaults included (``is_default``/``config_source`` tell them apart).
"""

from __future__ import annotations

from collections import Counter
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
DELETE_OP = controller_pb2.AlterConfigOp.DELETE  # Kafka's OpType ids are raftmeta's


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


# A resource's controller ops, or the message it is refused with (INVALID_REQUEST) before any call.
Ops = list[controller_pb2.AlterConfigOp] | str


async def incremental_alter_configs(ctx: ApiContext, request: Request) -> dict[str, Any]:
    """IncrementalAlterConfigs: Kafka's op numbers are raftmeta's (SET, DELETE, APPEND, SUBTRACT).
    A resource with a null value for any op but DELETE is refused before the controller, as a Kafka
    broker refuses it."""

    def ops(resource: Any) -> Ops:
        nulls = [c.name for c in resource.configs or () if c.value is None and c.config_operation != DELETE_OP]
        if nulls:
            return _null_values(nulls)
        return [
            controller_pb2.AlterConfigOp(name=c.name, op=c.config_operation, value=c.value or "")
            for c in resource.configs or ()
        ]

    return await _alter_topic_configs(ctx, request.body, ops)


async def alter_configs(ctx: ApiContext, request: Request) -> dict[str, Any]:
    """Legacy AlterConfigs: each topic's configs become exactly the ones named (the others go back to
    their defaults), validated like IncrementalAlterConfigs. The replacement is ops of the same
    controller alteration (``topic_configs.replace_ops``), computed from the controller's image.

    As a Kafka broker does before it forwards the request, a resource naming a key with a null value
    is refused (INVALID_REQUEST, ``Null value not supported for : <keys>``). A null config list (not
    nullable in Kafka's schema) never gets here: the frame is refused when it is read
    (:func:`raftmeta.kafka.framing.decode_request`), as Kafka's parser refuses it."""

    def ops(resource: Any) -> Ops:
        nulls = [c.name for c in resource.configs if c.value is None]
        if nulls:
            return _null_values(nulls)
        return replace_ops((c.name, c.value) for c in resource.configs)

    return await _alter_topic_configs(ctx, request.body, ops)


def _null_values(names: list[str]) -> str:
    """Kafka's message (ConfigAdminManager) for config entries whose value is null."""
    return f"Null value not supported for : {', '.join(names)}"


def _refused(resource: Any, message: str) -> dict[str, Any]:
    return {
        "resource_type": resource.resource_type,
        "resource_name": resource.resource_name,
        "error_code": INVALID_REQUEST,
        "error_message": message,
    }


async def _alter_topic_configs(ctx: ApiContext, body: Any, ops_of: Callable[[Any], Ops]) -> dict[str, Any]:
    """One controller IncrementalAlterConfigs for the topic resources (``ops_of`` gives each one's
    ops), an answer per resource; other resource types are refused, each with INVALID_REQUEST.

    A topic named by two resources goes to the controller as it is (which refuses both: a resource
    may appear once), whatever ``ops_of`` would have said about either."""
    resources = list(body.resources or ())
    topics = Counter(r.resource_name for r in resources if r.resource_type == TOPIC)
    grpc_request = controller_pb2.IncrementalAlterConfigsRequest(validate_only=body.validate_only)
    refused: dict[int, str] = {}
    for index, resource in enumerate(resources):
        if resource.resource_type != TOPIC:
            refused[index] = f"resource type {resource.resource_type} cannot be altered in raftmeta (only topics can)"
            continue
        ops = ops_of(resource) if topics[resource.resource_name] == 1 else []
        if isinstance(ops, str):
            refused[index] = ops
            continue
        grpc_request.topics.add(topic=resource.resource_name, ops=ops)
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
    for index, resource in enumerate(resources):
        if index in refused:
            responses.append(_refused(resource, refused[index]))
        else:
            base = {"resource_type": resource.resource_type, "resource_name": resource.resource_name}
            responses.append({**base, **results[resource.resource_name]})
    return {"throttle_time": 0, "responses": responses}
