"""DescribeConfigs and IncrementalAlterConfigs for topics: Kafka's ops, messages and error codes;
a refused topic writes nothing, the others one ConfigRecord per changed key."""

from __future__ import annotations

from typing import Any

import pytest

from raftmeta.controller import topic_configs
from raftmeta.controller.image import MetadataImage
from raftmeta.v1 import controller_pb2, errors_pb2, records_pb2

from .helpers import Context

OP = controller_pb2.AlterConfigOp


@pytest.fixture
def ctx() -> Context:
    context = Context()
    context.add_brokers([1, 2, 3])
    context.create_ok("orders", configs={"retention.ms": "1000"})
    context.create_ok("audit")
    return context


def alter(*topics: tuple[str, list[controller_pb2.AlterConfigOp]], validate_only: bool = False) -> Any:
    return controller_pb2.IncrementalAlterConfigsRequest(
        topics=[controller_pb2.AlterConfigsTopic(topic=name, ops=ops) for name, ops in topics],
        validate_only=validate_only,
    )


def op(name: str, kind: int = OP.SET, value: str = "") -> controller_pb2.AlterConfigOp:
    return controller_pb2.AlterConfigOp(name=name, op=kind, value=value)  # type: ignore[arg-type]


def configs_of(image: MetadataImage, name: str, include_defaults: bool = False) -> dict[str, tuple[str, bool]]:
    request = controller_pb2.DescribeConfigsRequest(topics=[name], include_defaults=include_defaults)
    [result] = topic_configs.describe_configs(image, request).response.results
    assert result.error_code == errors_pb2.NONE
    return {c.name: (c.value, c.is_default) for c in result.configs}


def errors(result: Any) -> list[tuple[str, str]]:
    return [(errors_pb2.ErrorCode.Name(r.error_code), r.error_message) for r in result.response.results]


def test_set_and_delete_write_one_config_record_per_changed_key(ctx: Context) -> None:
    request = alter(("orders", [op("retention.ms", value=" 2000 "), op("cleanup.policy", value="compact")]))
    result = ctx.run(topic_configs.incremental_alter_configs, request)
    assert errors(result) == [("NONE", "")]
    assert [(r.config.name, r.config.value) for r in result.records] == [
        ("cleanup.policy", "compact"),
        ("retention.ms", "2000"),  # normalised as Kafka stores it
    ]
    assert all(r.config.resource_type == records_pb2.CONFIG_RESOURCE_TYPE_TOPIC for r in result.records)
    assert configs_of(ctx.image, "orders") == {"cleanup.policy": ("compact", False), "retention.ms": ("2000", False)}

    result = ctx.run(topic_configs.incremental_alter_configs, alter(("orders", [op("retention.ms", OP.DELETE)])))
    [record] = result.records
    assert record.config.name == "retention.ms" and not record.config.HasField("value")
    described = configs_of(ctx.image, "orders", include_defaults=True)
    assert described["retention.ms"] == ("604800000", True), "back to Kafka's default"
    assert described["cleanup.policy"] == ("compact", False)


def test_an_unchanged_value_writes_nothing(ctx: Context) -> None:
    result = ctx.call(topic_configs.incremental_alter_configs, alter(("orders", [op("retention.ms", value="1000")])))
    assert errors(result) == [("NONE", "")] and result.records == ()


def test_list_configs_append_and_subtract_items(ctx: Context) -> None:
    ctx.run(topic_configs.incremental_alter_configs, alter(("audit", [op("cleanup.policy", OP.APPEND, "compact")])))
    assert configs_of(ctx.image, "audit")["cleanup.policy"] == ("delete,compact", False)
    ctx.run(topic_configs.incremental_alter_configs, alter(("audit", [op("cleanup.policy", OP.SUBTRACT, "delete")])))
    assert configs_of(ctx.image, "audit")["cleanup.policy"] == ("compact", False)


@pytest.mark.parametrize(
    ("ops", "code", "message"),
    [
        ([op("foo", value="1")], "INVALID_CONFIG", "Unknown topic config name: foo"),
        (
            [op("retention.ms", value="abc")],
            "INVALID_CONFIG",
            "Invalid value abc for configuration retention.ms: Not a number of type LONG",
        ),
        (
            [op("retention.ms", OP.APPEND, "5")],
            "INVALID_CONFIG",
            "Config value append is not allowed for config key: retention.ms",
        ),
        (
            [op("retention.ms", value="5"), op("retention.ms", OP.DELETE)],
            "INVALID_REQUEST",
            "Error due to duplicate config keys: retention.ms",
        ),
        ([op("cleanup.policy", OP.SUBTRACT, "delete")], "INVALID_CONFIG", "String must be one of"),
    ],
)
def test_a_refused_topic_writes_nothing_and_the_others_are_applied(
    ctx: Context, ops: list[controller_pb2.AlterConfigOp], code: str, message: str
) -> None:
    result = ctx.call(
        topic_configs.incremental_alter_configs, alter(("audit", ops), ("orders", [op("segment.ms", value="60000")]))
    )
    (audit_code, audit_message), orders = errors(result)
    assert audit_code == code and message in audit_message
    assert orders == ("NONE", "")
    assert [(r.config.resource_name, r.config.name) for r in result.records] == [("orders", "segment.ms")]


def test_unknown_and_duplicate_topics_and_validate_only(ctx: Context) -> None:
    result = ctx.call(
        topic_configs.incremental_alter_configs,
        alter(("nope", [op("retention.ms", value="1")]), ("audit", []), ("audit", [])),
    )
    assert [code for code, _ in errors(result)] == ["UNKNOWN_TOPIC_OR_PARTITION", "INVALID_REQUEST", "INVALID_REQUEST"]
    checked = ctx.call(
        topic_configs.incremental_alter_configs, alter(("orders", [op("retention.ms", value="5")]), validate_only=True)
    )
    assert errors(checked) == [("NONE", "")] and checked.records == ()


@pytest.mark.parametrize(
    ("name", "code", "message"),
    [
        ("", "INVALID_REQUEST", "Default topic resources are not allowed."),
        (
            "bad/name",
            "INVALID_TOPIC_EXCEPTION",
            "Topic name is invalid: 'bad/name' contains one or more characters other than ASCII alphanumerics, "
            "'.', '_' and '-'",
        ),
        ("..", "INVALID_TOPIC_EXCEPTION", "Topic name is invalid: '..' is not allowed"),
        ("__cluster_metadata", "UNKNOWN_TOPIC_OR_PARTITION", "The topic '__cluster_metadata' does not exist."),
        ("nope", "UNKNOWN_TOPIC_OR_PARTITION", "The topic 'nope' does not exist."),
    ],
)
def test_a_name_no_topic_can_have_is_refused_before_it_is_looked_up(
    ctx: Context, name: str, code: str, message: str
) -> None:
    # Kafka 4.4's answers to these names (its controller validates the name first).
    result = ctx.call(topic_configs.incremental_alter_configs, alter((name, [op("retention.ms", value="5")])))
    assert errors(result) == [(code, message)] and result.records == ()


def test_describe_every_topic_and_an_unknown_one(ctx: Context) -> None:
    everything = topic_configs.describe_configs(ctx.image, controller_pb2.DescribeConfigsRequest()).response
    assert [r.topic for r in everything.results] == ["audit", "orders"]
    unknown = topic_configs.describe_configs(ctx.image, controller_pb2.DescribeConfigsRequest(topics=["nope"]))
    assert errors(unknown) == [("UNKNOWN_TOPIC_OR_PARTITION", "This server does not host this topic-partition.")]


def test_replace_ops_make_the_configs_exactly_the_ones_named(ctx: Context) -> None:
    ctx.run(topic_configs.incremental_alter_configs, alter(("orders", [op("cleanup.policy", value="compact")])))
    assert configs_of(ctx.image, "orders") == {"retention.ms": ("1000", False), "cleanup.policy": ("compact", False)}
    # Legacy AlterConfigs of {segment.ms}: retention.ms and cleanup.policy go back to their defaults.
    ops = topic_configs.replace_ops([("segment.ms", "60000")])
    checked = ctx.call(topic_configs.incremental_alter_configs, alter(("orders", ops), validate_only=True))
    assert errors(checked) == [("NONE", "")] and checked.records == ()
    result = ctx.run(topic_configs.incremental_alter_configs, alter(("orders", ops)))
    assert errors(result) == [("NONE", "")]
    assert [(r.config.name, r.config.HasField("value")) for r in result.records] == [
        ("cleanup.policy", False),
        ("retention.ms", False),
        ("segment.ms", True),
    ]
    assert configs_of(ctx.image, "orders") == {"segment.ms": ("60000", False)}
    # Replacing with nothing clears the topic; an invalid value refuses the whole replacement.
    refused = ctx.call(
        topic_configs.incremental_alter_configs, alter(("orders", topic_configs.replace_ops([("retention.ms", "x")])))
    )
    assert errors(refused)[0][0] == "INVALID_CONFIG" and refused.records == ()
    twice = topic_configs.replace_ops([("retention.ms", "5"), ("retention.ms", "6")])
    duplicate = ctx.call(topic_configs.incremental_alter_configs, alter(("orders", twice)))
    assert errors(duplicate) == [("INVALID_REQUEST", "Error due to duplicate config keys: retention.ms")]
    assert duplicate.records == ()
    ctx.run(topic_configs.incremental_alter_configs, alter(("orders", topic_configs.replace_ops([]))))
    assert configs_of(ctx.image, "orders") == {}
