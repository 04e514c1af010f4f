"""Topic configs the controller accepts, validated as Kafka's ``ConfigDef`` / ``LogConfig`` do.

Each key has a type (LONG, INT, BOOLEAN, STRING, LIST), a validator and a default; messages are
Kafka's, so a Kafka user recognises them (``Invalid value abc for configuration retention.ms: Not a
number of type LONG``, ``Unknown topic config name: foo``). Values are normalised the way Kafka
stores them: trimmed, booleans lower-cased, lists joined with bare commas.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from raftmeta.controller.errors import ApiError
from raftmeta.v1 import errors_pb2

_INTEGER = re.compile(r"[+-]?[0-9]+")
_LONG_RANGE = (-(1 << 63), (1 << 63) - 1)
_INT_RANGE = (-(1 << 31), (1 << 31) - 1)
# Digits of the longest number in range (a LONG has 19). Counted before converting: Python's
# int() refuses strings of more than 4300 digits with a ValueError (found by `raftmeta fuzz`).
_DIGITS_MAX = 19

UNCLEAN_LEADER_ELECTION_ENABLE = "unclean.leader.election.enable"
MIN_INSYNC_REPLICAS = "min.insync.replicas"


@dataclass(frozen=True, slots=True)
class ConfigKey:
    name: str
    type: str  # "LONG" | "INT" | "BOOLEAN" | "STRING" | "LIST"
    default: str
    at_least: int | None = None
    one_of: tuple[str, ...] = ()


TOPIC_CONFIGS: dict[str, ConfigKey] = {
    key.name: key
    for key in (
        ConfigKey("cleanup.policy", "LIST", "delete", one_of=("compact", "delete")),
        ConfigKey(
            "compression.type",
            "STRING",
            "producer",
            one_of=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
        ),
        ConfigKey("delete.retention.ms", "LONG", "86400000", at_least=0),
        ConfigKey("max.message.bytes", "INT", "1048588", at_least=0),
        ConfigKey(MIN_INSYNC_REPLICAS, "INT", "1", at_least=1),
        ConfigKey("retention.bytes", "LONG", "-1"),
        ConfigKey("retention.ms", "LONG", "604800000", at_least=-1),
        ConfigKey("segment.bytes", "INT", "1073741824", at_least=1024 * 1024),
        ConfigKey("segment.ms", "LONG", "604800000", at_least=1),
        ConfigKey(UNCLEAN_LEADER_ELECTION_ENABLE, "BOOLEAN", "false"),
    )
}


def _invalid(value: str, name: str, why: str) -> ApiError:
    return ApiError(errors_pb2.INVALID_CONFIG, f"Invalid value {value} for configuration {name}: {why}")


def _integer(value: str) -> int | None:
    """The decimal integer ``value`` spells (sign and leading zeros allowed, as Java's
    Long.parseLong), or None if it is not one or has more digits than any number in range."""
    if _INTEGER.fullmatch(value) is None:
        return None
    sign = "-" if value.startswith("-") else ""
    digits = value.lstrip("+-").lstrip("0") or "0"
    if len(digits) > _DIGITS_MAX:
        return None
    return int(sign + digits)


def normalize_value(key: ConfigKey, raw: str) -> str | ApiError:
    """The value as Kafka stores it, or the INVALID_CONFIG error for it."""
    value = raw.strip()
    if key.type in ("LONG", "INT"):
        bounds = _LONG_RANGE if key.type == "LONG" else _INT_RANGE
        number = _integer(value)
        if number is None or not bounds[0] <= number <= bounds[1]:
            return _invalid(value, key.name, f"Not a number of type {key.type}")
        if key.at_least is not None and number < key.at_least:
            return _invalid(value, key.name, f"Value must be at least {key.at_least}")
        return str(number)
    if key.type == "BOOLEAN":
        lowered = value.lower()
        if lowered not in ("true", "false"):
            return _invalid(value, key.name, "Expected value to be either true or false")
        return lowered
    if key.type == "LIST":
        items = [item.strip() for item in value.split(",")] if value else []
        for item in items:
            if item not in key.one_of:
                return _invalid(value, key.name, f"String must be one of: {', '.join(key.one_of)}")
        if not items:
            return _invalid(value, key.name, f"String must be one of: {', '.join(key.one_of)}")
        if len(set(items)) != len(items):
            return ApiError(errors_pb2.INVALID_CONFIG, f"Configuration '{key.name}' values must not be duplicated.")
        return ",".join(items)
    if key.one_of and value not in key.one_of:
        return _invalid(value, key.name, f"String must be one of: {', '.join(key.one_of)}")
    return value


def validate_topic_configs(configs: Mapping[str, str]) -> dict[str, str] | ApiError:
    """Normalised configs in name order, or the first error (unknown names first, as Kafka)."""
    for name in sorted(configs):
        if name not in TOPIC_CONFIGS:
            return ApiError(errors_pb2.INVALID_CONFIG, f"Unknown topic config name: {name}")
    normalized: dict[str, str] = {}
    for name in sorted(configs):
        result = normalize_value(TOPIC_CONFIGS[name], configs[name])
        if isinstance(result, ApiError):
            return result
        normalized[name] = result
    return normalized


def is_true(value: str | None) -> bool:
    return value is not None and value.strip().lower() == "true"
