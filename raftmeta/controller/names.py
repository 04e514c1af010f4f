"""Topic name rules: Kafka's ``org.apache.kafka.common.internals.Topic``, with its messages.

A legal name is 1..249 characters of ``[a-zA-Z0-9._-]`` and is neither ``.`` nor ``..``.
Because Kafka's metric names turn ``.`` into ``_``, two names that differ only there collide:
creating one while the other exists is INVALID_TOPIC_EXCEPTION, and any name holding either
character gets the kafka-topics.sh warning.
"""

from __future__ import annotations

import re

# Kafka's Topic.MAX_NAME_LENGTH. A longer name is INVALID_TOPIC_EXCEPTION for that topic alone.
MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]*")
COLLISION_WARNING = (
    "WARNING: Due to limitations in metric names, topics with a period ('.') or underscore ('_') could "
    "collide. To avoid issues it is best to use either, but not both."
)


def invalid_topic_reason(name: str) -> str | None:
    """Kafka's ``Topic.validate`` message for an illegal name, or None when the name is legal."""
    if not name:
        reason = "the empty string is not allowed"
    elif name == ".":
        reason = "'.' is not allowed"
    elif name == "..":
        reason = "'..' is not allowed"
    elif len(name) > MAX_NAME_LENGTH:
        reason = f"the length of '{name}' is longer than the max allowed length {MAX_NAME_LENGTH}"
    elif _LEGAL.fullmatch(name) is None:
        reason = f"'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
    else:
        return None
    return f"Topic name is invalid: {reason}"


def has_collision_chars(name: str) -> bool:
    return "." in name or "_" in name


def unify_collision_chars(name: str) -> str:
    return name.replace(".", "_")
