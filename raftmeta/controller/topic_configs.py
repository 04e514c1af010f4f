"""DescribeConfigs and IncrementalAlterConfigs for topics (Kafka's, what kafka-configs.sh sends),
pure handlers like the others: ``(image, request, ...) -> ControllerResult(records, response)``.

An alteration applies its ops in order to the topic's configs (SET a value, DELETE back to the
default, APPEND/SUBTRACT items of a LIST config), then validates the result with the same rules
CreateTopics uses (``configs.validate_topic_configs``: Kafka's messages). A topic whose ops fail
writes nothing and answers its error; the others write one ``ConfigRecord`` per changed key (no
value = deleted). ``validate_only`` answers the same and writes nothing.

Kafka's legacy AlterConfigs (key 33) *replaces* a topic's configs: the keys it names get its values
and every other key goes back to its default. :func:`replace_ops` expresses that as ops of this same
alteration, so the controller computes the replacement from its own image in one turn (no read by
the caller, no window for another change to be lost).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from placement.rng import RandomSource
from raftmeta.controller.configs import TOPIC_CONFIGS, validate_topic_configs
from raftmeta.controller.errors import ApiError
from raftmeta.controller.image import MetadataImage
from raftmeta.controller.names import invalid_topic_reason
from raftmeta.controller.result import DEFAULT_CONFIG, ControllerConfig, ControllerResult, TopicIdSource
from raftmeta.controller.topics import DUPLICATE_NAME, UNKNOWN_TOPIC
from raftmeta.v1 import controller_pb2, errors_pb2, records_pb2

OP = controller_pb2.AlterConfigOp
LIST_OPS = (OP.APPEND, OP.SUBTRACT)


def describe_configs(
    image: MetadataImage,
    request: controller_pb2.DescribeConfigsRequest,
    now_ms: int = 0,
    ids: TopicIdSource | None = None,
    random: RandomSource | None = None,
    config: ControllerConfig = DEFAULT_CONFIG,
) -> ControllerResult[controller_pb2.DescribeConfigsResponse]:
    """Each named topic's configs (every topic when none is named): the ones it sets, and with
    ``include_defaults`` every other known config at its default."""
    del now_ms, ids, random, config
    response = controller_pb2.DescribeConfigsResponse()
    names = list(request.topics) or [t.name for t in image.topics_sorted()]
    for name in names:
        result = response.results.add(topic=name)
        topic = image.topic_by_name(name)
        if topic is None:
            result.error_code = UNKNOWN_TOPIC.code  # type: ignore[assignment]
            result.error_message = UNKNOWN_TOPIC.message
            continue
        entries = {key: (value, False) for key, value in topic.configs.items()}
        if request.include_defaults:
            for key in TOPIC_CONFIGS:
                entries.setdefault(key, (TOPIC_CONFIGS[key].default, True))
        for key in sorted(entries):
            value, is_default = entries[key]
            result.configs.add(name=key, value=value, is_default=is_default)
    return ControllerResult((), response)


def incremental_alter_configs(
    image: MetadataImage,
    request: controller_pb2.IncrementalAlterConfigsRequest,
    now_ms: int,
    ids: TopicIdSource,
    random: RandomSource,
    config: ControllerConfig = DEFAULT_CONFIG,
) -> ControllerResult[controller_pb2.IncrementalAlterConfigsResponse]:
    del now_ms, ids, random, config
    response = controller_pb2.IncrementalAlterConfigsResponse()
    records: list[records_pb2.MetadataRecord] = []
    seen = [t.topic for t in request.topics]
    for altered in request.topics:
        result = response.results.add(topic=altered.topic)
        topic = image.topic_by_name(altered.topic)
        if seen.count(altered.topic) > 1:
            error: ApiError | None = DUPLICATE_NAME
        elif topic is None:
            error = _not_alterable(altered.topic)
        else:
            outcome = _apply_ops(dict(topic.configs), altered.ops)
            if isinstance(outcome, ApiError):
                error = outcome
            else:
                error = None
                records.extend(_changes(altered.topic, topic.configs, outcome))
        if error is not None:
            result.error_code = error.code  # type: ignore[assignment]
            result.error_message = error.message
    return ControllerResult(() if request.validate_only else tuple(records), response)


def replace_ops(configs: Iterable[tuple[str, str]]) -> list[controller_pb2.AlterConfigOp]:
    """Ops that make a topic's configs exactly ``configs`` (legacy AlterConfigs): SET each key named,
    in order (a key named twice is refused as in any alteration), then DELETE every other known key.

    Deleting every known key not named is the replacement because a topic can only hold known keys
    (CreateTopics and these alterations refuse any other: ``validate_topic_configs``), and deleting
    a key the topic does not set changes nothing. (Kafka refuses a null value before its controller
    sees the request, and so does the Kafka listener.)"""
    ops = [OP(name=name, op=OP.SET, value=value) for name, value in configs]
    named = {op.name for op in ops}
    ops += [OP(name=name, op=OP.DELETE) for name in TOPIC_CONFIGS if name not in named]
    return ops


def _not_alterable(name: str) -> ApiError:
    """Why a topic the image does not hold cannot be altered, as Kafka's controller says it (its
    ControllerConfigurationValidator checks the name before it looks the topic up): no name is the
    cluster's default resource, which topics do not have; an illegal name is INVALID_TOPIC_EXCEPTION;
    a legal one is unknown (with the message of Kafka's existence check, not the generic one)."""
    if not name:
        return ApiError(errors_pb2.INVALID_REQUEST, "Default topic resources are not allowed.")
    reason = invalid_topic_reason(name)
    if reason is not None:
        return ApiError(errors_pb2.INVALID_TOPIC_EXCEPTION, reason)
    return ApiError(errors_pb2.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")


def _apply_ops(configs: dict[str, str], ops: Sequence[controller_pb2.AlterConfigOp]) -> dict[str, str] | ApiError:
    """The topic's configs after ``ops`` (in order), validated and normalised, or the first error."""
    names = [op.name for op in ops]
    for op in ops:
        if names.count(op.name) > 1:
            return ApiError(errors_pb2.INVALID_REQUEST, f"Error due to duplicate config keys: {op.name}")
        key = TOPIC_CONFIGS.get(op.name)
        if key is None:
            return ApiError(errors_pb2.INVALID_CONFIG, f"Unknown topic config name: {op.name}")
        if op.op == OP.SET:
            configs[op.name] = op.value
        elif op.op == OP.DELETE:
            configs.pop(op.name, None)
        elif op.op in LIST_OPS:
            if key.type != "LIST":
                verb = "append" if op.op == OP.APPEND else "subtract"
                return ApiError(
                    errors_pb2.INVALID_CONFIG, f"Config value {verb} is not allowed for config key: {op.name}"
                )
            current = [item for item in configs.get(op.name, key.default).split(",") if item]
            items = [item.strip() for item in op.value.split(",") if item.strip()]
            if op.op == OP.APPEND:
                current += [item for item in items if item not in current]
            else:
                current = [item for item in current if item not in items]
            configs[op.name] = ",".join(current)
        else:
            return ApiError(errors_pb2.INVALID_REQUEST, f"Unknown config operation {op.op} for {op.name}")
    return validate_topic_configs(configs)


def _changes(topic: str, before: Mapping[str, str], after: Mapping[str, str]) -> list[records_pb2.MetadataRecord]:
    """One ConfigRecord per key whose value changed (no value: deleted, back to the default)."""
    records = []
    for name in sorted(set(before) | set(after)):
        if before.get(name) == after.get(name):
            continue
        change = records_pb2.ConfigRecord(
            resource_type=records_pb2.CONFIG_RESOURCE_TYPE_TOPIC, resource_name=topic, name=name
        )
        if name in after:
            change.value = after[name]
        records.append(records_pb2.MetadataRecord(config=change))
    return records
