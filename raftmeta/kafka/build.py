"""Build kio's generated response types from plain values, whatever the version.

kio generates one frozen dataclass per API version, each with only the fields that version has.
A handler describes its answer once, as dicts with the union of every version's fields; `build`
keeps the fields the requested version's class has, converts nested dicts and lists into the
nested classes that version uses, and error codes into kio's ErrorCode. A field the version needs
but the handler did not give is a bug and raises (the per-version round-trip tests catch it).
"""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
from collections.abc import Mapping
from functools import cache
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32Timedelta, i64Timedelta

from raftmeta.kafka.partition_encoding import EncodedArray

ZERO_MS = i32Timedelta.parse(datetime.timedelta(0))


def _entity(tp: Any) -> type[Any] | None:
    """The dataclass inside ``tp`` (``X``, ``X | None``, ``tuple[X, ...]``), if there is one."""
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return tp
    if typing.get_origin(tp) in (tuple, types.UnionType, typing.Union):
        for arg in typing.get_args(tp):
            found = _entity(arg)
            if found is not None:
                return found
    return None


@cache
def _fields(cls: Any) -> tuple[tuple[str, Any, type[Any] | None], ...]:
    return tuple((f.name, f.type, _entity(f.type)) for f in dataclasses.fields(cls))


def _convert(tp: Any, nested: type[Any] | None, value: Any) -> Any:
    if value is None or isinstance(value, EncodedArray):
        return value  # EncodedArray: already the version's bytes (framing writes them)
    if nested is not None:
        if isinstance(value, Mapping):
            return build(nested, value)
        return tuple(build(nested, item) for item in value)
    if tp is ErrorCode:
        return ErrorCode(int(value))
    if tp is i32Timedelta:
        return i32Timedelta.parse(datetime.timedelta(milliseconds=int(value)))
    if tp is i64Timedelta:
        return i64Timedelta.parse(datetime.timedelta(milliseconds=int(value)))
    if isinstance(value, list):
        return tuple(value)
    return value


def build(cls: Any, values: Mapping[str, Any]) -> Any:
    """An instance of the kio class ``cls`` from ``values`` (extra keys ignored, see module doc)."""
    kwargs = {name: _convert(tp, nested, values[name]) for name, tp, nested in _fields(cls) if name in values}
    return cls(**kwargs)
