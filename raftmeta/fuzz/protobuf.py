"""Hypothesis strategies for arbitrary protobuf messages of any descriptor, and for mutations of
a given message.

:func:`messages` walks a descriptor's fields and draws, for each, either nothing (the field stays
unset) or a value biased towards the inputs that break servers: integers at the edges of their
type (0, -1, 2**31-1, -2**31, ...), empty / very long / non-ASCII strings and names that are
almost legal, repeated fields holding duplicates, maps, nested messages and enum numbers no
enum value has. Strings are valid UTF-8 only: protobuf refuses to serialize lone surrogates, so
sending them would test the client library, not the server.

:func:`mutated` starts from a message (typically a *valid* request) and changes one to a few
fields, list elements or map entries, so that a fuzz run also reaches the checks deep inside a
handler instead of bouncing off the first one.

``override`` lets a caller replace the strategy of a field by name (a bounded partition count, a
request id drawn from ids used before); it receives the field descriptor and returns a strategy
or None for the generic one.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from google.protobuf import message_factory
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from hypothesis import strategies as st

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
UINT32_MAX, UINT64_MAX = 2**32 - 1, 2**64 - 1
INT32_EDGES = (0, 1, -1, 2, -2, 3, 16, 249, 250, 10_001, 65_535, 65_536, INT32_MAX, INT32_MAX - 1, INT32_MIN)
INT64_EDGES = (*INT32_EDGES, INT32_MAX + 1, INT32_MIN - 1, 2**53, INT64_MAX, INT64_MIN)
STRING_EDGES = (
    "",
    ".",
    "..",
    " ",
    "-",
    "_",
    "a",
    "a.b",
    "a_b",
    "__cluster_metadata",
    "topic/with/slash",
    "new\nline",
    "nul\x00byte",
    "ünïcödé",
    "名前",
    "emoji-\U0001f642",
    "\u200b",
    "a" * 249,
    "a" * 250,
    "-1",
    "9" * 20,
    "striped",
    "legacy",
    "balanced",
    "retention.ms",
    "cleanup.policy",
    "true",
)
# Units repeated into very long strings; "9" makes a number too long for int() (4300 digits).
LONG_UNITS = ("a", ".", "é", "\U0001f642", "9", "-")
NAME_CHARS = "abcxyzABZ0189._-"
BYTES_EDGES = (b"", bytes(16), b"\xff" * 16, b"\x00" * 15 + b"\x01", b"\x01" * 17, b"\x01")

DUPLICATE_WEIGHT = 3
# Descriptors are typed Any: upb's classes are not google.protobuf.descriptor's, which the stubs name.
FieldDesc = Any
MessageDesc = Any
Override = Callable[[FieldDesc], "st.SearchStrategy[Any] | None"]


@dataclass(frozen=True, slots=True)
class Bounds:
    """Size bounds of generated values: they keep one example cheap to send and to handle."""

    list_max: int = 6
    map_max: int = 4
    text_max: int = 40
    long_text_max: int = 5000
    depth_max: int = 3


DEFAULT_BOUNDS = Bounds()


def _no_override(_field: FieldDesc) -> st.SearchStrategy[Any] | None:
    return None


def int_values(low: int, high: int, edges: tuple[int, ...]) -> st.SearchStrategy[int]:
    """Integers of a type's range, with its edge values drawn often."""
    inside = tuple(e for e in edges if low <= e <= high)
    return st.one_of(
        st.sampled_from(inside), st.integers(-3, 20).filter(lambda v: low <= v <= high), st.integers(low, high)
    )


def text_values(bounds: Bounds = DEFAULT_BOUNDS) -> st.SearchStrategy[str]:
    """Strings: edge cases, arbitrary valid UTF-8, almost-legal names, very long and numeric ones."""
    return st.one_of(
        st.sampled_from(STRING_EDGES),
        st.text(st.characters(exclude_categories=["Cs"]), max_size=bounds.text_max),
        st.text(NAME_CHARS, min_size=1, max_size=bounds.text_max),
        st.builds(operator.mul, st.sampled_from(LONG_UNITS), st.integers(bounds.text_max, bounds.long_text_max)),
        st.integers().map(str),
    )


def bytes_values(bounds: Bounds = DEFAULT_BOUNDS) -> st.SearchStrategy[bytes]:
    return st.one_of(
        st.sampled_from(BYTES_EDGES),
        st.binary(min_size=16, max_size=16),
        st.binary(max_size=bounds.text_max),
    )


def scalar_values(field: FieldDesc, bounds: Bounds = DEFAULT_BOUNDS) -> st.SearchStrategy[Any]:
    """The generic strategy for one value of a scalar or enum field."""
    t = field.type
    if t in (FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_SINT32, FieldDescriptor.TYPE_SFIXED32):
        return int_values(INT32_MIN, INT32_MAX, INT32_EDGES)
    if t in (FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_SINT64, FieldDescriptor.TYPE_SFIXED64):
        return int_values(INT64_MIN, INT64_MAX, INT64_EDGES)
    if t in (FieldDescriptor.TYPE_UINT32, FieldDescriptor.TYPE_FIXED32):
        return int_values(0, UINT32_MAX, (*INT32_EDGES, UINT32_MAX))
    if t in (FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_FIXED64):
        return int_values(0, UINT64_MAX, (*INT64_EDGES, UINT64_MAX))
    if t == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if t == FieldDescriptor.TYPE_STRING:
        return text_values(bounds)
    if t == FieldDescriptor.TYPE_BYTES:
        return bytes_values(bounds)
    if t in (FieldDescriptor.TYPE_FLOAT, FieldDescriptor.TYPE_DOUBLE):
        return st.floats(width=32 if t == FieldDescriptor.TYPE_FLOAT else 64)
    if t == FieldDescriptor.TYPE_ENUM:
        known = [v.number for v in field.enum_type.values]
        # proto3 enums are open: a number no value has is legal on the wire and must be handled.
        return st.one_of(st.sampled_from(known), int_values(INT32_MIN, INT32_MAX, (*INT32_EDGES, max(known) + 1)))
    raise TypeError(f"{field.full_name}: unsupported field type {t}")


def _is_map(field: FieldDesc) -> bool:
    return field.message_type is not None and field.message_type.GetOptions().map_entry


def _with_duplicates(elements: st.SearchStrategy[Any], max_size: int) -> st.SearchStrategy[list[Any]]:
    """Lists that often repeat one of their own elements (duplicate topics, brokers, partitions)."""

    @st.composite
    def build(draw: st.DrawFn) -> list[Any]:
        items: list[Any] = draw(st.lists(elements, max_size=max_size))
        repeat: bool = draw(st.booleans())
        if items and repeat:
            for copy in draw(st.lists(st.sampled_from(items), min_size=1, max_size=2)):
                items.insert(draw(st.integers(0, len(items))), copy)
        return items

    return build()


def _real_oneof(field: FieldDesc) -> str | None:
    """The oneof ``field`` belongs to, unless it is proto3 ``optional``'s synthetic one."""
    oneof = field.containing_oneof
    if oneof is None or (oneof.name == "_" + field.name and len(oneof.fields) == 1):
        return None
    return str(oneof.name)


class ProtoStrategies:
    """Strategies for the messages of a descriptor tree, built once and cached: hypothesis pays
    for a strategy's first draw, so rebuilding them per example would dominate a fuzz run."""

    def __init__(self, override: Override = _no_override, bounds: Bounds = DEFAULT_BOUNDS) -> None:
        self.override = override
        self.bounds = bounds
        self._values: dict[tuple[str, int], st.SearchStrategy[Any] | None] = {}
        self._messages: dict[tuple[str, int], st.SearchStrategy[Message]] = {}

    def value(self, field: FieldDesc, depth: int) -> st.SearchStrategy[Any] | None:
        """One element of ``field`` (a scalar, an enum number or a message); None past the depth bound."""
        key = (field.full_name, depth)
        if key not in self._values:
            self._values[key] = self._value(field, depth)
        return self._values[key]

    def _value(self, field: FieldDesc, depth: int) -> st.SearchStrategy[Any] | None:
        custom = self.override(field)
        if custom is not None:
            return custom
        if field.message_type is not None:
            if depth >= self.bounds.depth_max:
                return None
            return self.message(field.message_type, depth + 1)
        return scalar_values(field, self.bounds)

    def field(self, field: FieldDesc, depth: int) -> st.SearchStrategy[Any] | None:
        """The whole value of ``field``: a list for repeated fields, a dict for maps."""
        if _is_map(field):
            entry = field.message_type
            key = self.value(entry.fields_by_name["key"], depth)
            value = self.value(entry.fields_by_name["value"], depth)
            if key is None or value is None:
                return None
            return st.dictionaries(key, value, max_size=self.bounds.map_max)
        element = self.value(field, depth)
        if element is None:
            return None
        if field.is_repeated:
            return _with_duplicates(element, self.bounds.list_max)
        return element

    def message(self, descriptor: MessageDesc, depth: int = 0) -> st.SearchStrategy[Message]:
        """Arbitrary messages of ``descriptor``: each field unset or drawn (one member per oneof)."""
        key = (descriptor.full_name, depth)
        if key not in self._messages:
            self._messages[key] = self._message(descriptor, depth)
        return self._messages[key]

    def _message(self, descriptor: MessageDesc, depth: int) -> st.SearchStrategy[Message]:
        cls = message_factory.GetMessageClass(descriptor)
        plain: list[tuple[FieldDesc, st.SearchStrategy[Any]]] = []
        oneofs: dict[str, list[tuple[FieldDesc, st.SearchStrategy[Any]]]] = {}
        for f in descriptor.fields:
            strategy = self.field(f, depth)
            if strategy is None:
                continue
            group = _real_oneof(f)
            if group is None:
                plain.append((f, strategy))
            else:
                oneofs.setdefault(group, []).append((f, strategy))
        choices = [st.sampled_from([None, *members]) for members in oneofs.values()]

        @st.composite
        def build(draw: st.DrawFn) -> Message:
            message: Message = cls()
            for field, strategy in plain:
                if draw(st.booleans()):
                    assign(message, field, draw(strategy))
            for choice in choices:
                picked = draw(choice)
                if picked is not None:
                    assign(message, picked[0], draw(picked[1]))
            return message

        return build()

    def mutated(self, message: Message, max_mutations: int = 3) -> st.SearchStrategy[Message]:
        """Copies of ``message`` with 1..``max_mutations`` fields, elements or entries changed: set
        to a drawn value, cleared, appended to, duplicated, dropped or replaced."""

        @st.composite
        def build(draw: st.DrawFn) -> Message:
            result = _copy(message)
            for _ in range(draw(st.integers(1, max_mutations))):
                slots = list(_slots(result, 0, self.bounds))
                if not slots:
                    break
                _apply(draw, draw(st.sampled_from(slots)), self)
            return result

        return build()


def assign(message: Message, field: FieldDesc, value: Any) -> None:
    """Set ``field`` of ``message`` to ``value`` (a list for repeated fields, a dict for maps)."""
    name = field.name
    if _is_map(field):
        target = getattr(message, name)
        target.clear()
        if field.message_type.fields_by_name["value"].message_type is None:
            target.update(value)
        else:
            for key, item in value.items():
                target[key].CopyFrom(item)
    elif field.is_repeated:
        message.ClearField(name)
        target = getattr(message, name)
        if field.message_type is None:
            target.extend(value)
        else:
            for item in value:
                target.add().CopyFrom(item)
    elif field.message_type is not None:
        getattr(message, name).CopyFrom(value)
    else:
        setattr(message, name, value)


def messages(
    descriptor: MessageDesc, *, override: Override = _no_override, bounds: Bounds = DEFAULT_BOUNDS
) -> st.SearchStrategy[Message]:
    """Arbitrary messages of ``descriptor`` (see :meth:`ProtoStrategies.message`)."""
    return ProtoStrategies(override, bounds).message(descriptor)


def mutated(
    message: Message,
    *,
    override: Override = _no_override,
    bounds: Bounds = DEFAULT_BOUNDS,
    max_mutations: int = 3,
) -> st.SearchStrategy[Message]:
    """Copies of ``message`` with a few changes (see :meth:`ProtoStrategies.mutated`)."""
    return ProtoStrategies(override, bounds).mutated(message, max_mutations)


# ---- mutations -------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Slot:
    """One place a mutation can change: ``kind`` on ``field`` of ``message`` (element ``index``)."""

    kind: str  # set | clear | append | duplicate | drop | replace
    message: Message
    field: FieldDesc
    index: int = -1


def _slots(message: Message, depth: int, bounds: Bounds) -> Iterator[_Slot]:
    for field in message.DESCRIPTOR.fields:
        name = field.name
        if _is_map(field):
            yield _Slot("append", message, field)
            if getattr(message, name):
                yield _Slot("drop", message, field)
                yield _Slot("clear", message, field)
        elif field.is_repeated:
            items = getattr(message, name)
            yield _Slot("append", message, field)
            if len(items):
                yield _Slot("clear", message, field)
            for i in range(len(items)):
                # Weighted: an item twice in one request (two changes built on the same state) is
                # where handlers break most, so duplicates are drawn three times as often.
                for _ in range(DUPLICATE_WEIGHT):
                    yield _Slot("duplicate", message, field, i)
                yield _Slot("drop", message, field, i)
                yield _Slot("replace", message, field, i)
                if field.message_type is not None and depth < bounds.depth_max:
                    yield from _slots(items[i], depth + 1, bounds)
        else:
            yield _Slot("set", message, field)
            if field.message_type is not None and message.HasField(name) and depth < bounds.depth_max:
                yield from _slots(getattr(message, name), depth + 1, bounds)
            if (field.has_presence and message.HasField(name)) or (
                not field.has_presence and getattr(message, name) != field.default_value
            ):
                yield _Slot("clear", message, field)


def _apply(draw: st.DrawFn, slot: _Slot, strategies: ProtoStrategies) -> None:
    message, field, name = slot.message, slot.field, slot.field.name
    if slot.kind == "clear":
        message.ClearField(name)
        return
    if _is_map(field):
        entries = getattr(message, name)
        if slot.kind == "drop":
            del entries[draw(st.sampled_from(sorted(entries)))]
            return
        entry = field.message_type
        key_strategy = strategies.value(entry.fields_by_name["key"], 0)
        value_strategy = strategies.value(entry.fields_by_name["value"], 0)
        if key_strategy is None or value_strategy is None:
            return
        key, value = draw(key_strategy), draw(value_strategy)
        if isinstance(value, Message):
            entries[key].CopyFrom(value)
        else:
            entries[key] = value
        return
    element = strategies.value(field, 0)
    if field.is_repeated:
        values = list(getattr(message, name))
        if slot.kind == "duplicate":
            values.insert(draw(st.integers(0, len(values))), values[slot.index])
        elif slot.kind == "drop":
            del values[slot.index]
        elif element is not None:
            new = draw(element)
            if slot.kind == "append":
                values.insert(draw(st.integers(0, len(values))), new)
            else:
                values[slot.index] = new
        # Copies first: clearing the field would detach the sub-messages the list refers to.
        copies = [_copy(v) for v in values] if field.message_type is not None else values
        assign(message, field, copies)
        return
    if element is not None:
        assign(message, field, draw(element))


def _copy(message: Message) -> Message:
    clone = type(message)()
    clone.CopyFrom(message)
    return clone


__all__ = [
    "DEFAULT_BOUNDS",
    "INT32_EDGES",
    "INT64_EDGES",
    "STRING_EDGES",
    "Bounds",
    "Override",
    "ProtoStrategies",
    "assign",
    "bytes_values",
    "int_values",
    "messages",
    "mutated",
    "scalar_values",
    "text_values",
]
