"""Metadata's and DescribeTopicPartitions' partition entries, encoded without kio objects.

kio writes a response from a frozen dataclass per entity and a Python call per field: a
1000-partition topic is ~30,000 objects and calls, ~10 ms of the listener's time per answer
(docs/performance.md), where a Kafka broker writes its cached bytes. The partition entries are
the part that grows with the topic, and each is a fixed layout of int16/int32 fields and int32
arrays, so they are written here with ``struct`` straight from the controller's
``PartitionDescription`` s; everything else in the answer is still kio's.

One rule, two writers: the layout of each version's entry is read from kio's own generated class
(its fields, in order, and whether the version is flexible), and tests/kafka/test_partition_encoding
checks the bytes equal kio's for every version served. A field this module does not know, or a
tagged field, is refused when the layout is first read rather than written wrongly.
"""

from __future__ import annotations

import dataclasses
import io
import struct
import typing
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Final

from kio.index import load_response_schema
from kio.serial import entity_writer
from kio.serial._introspect import get_field_tag
from kio.serial._serialize import get_field_writer
from kio.serial.writers import Writable

from raftmeta.v1 import controller_pb2, errors_pb2

LEADER_NOT_AVAILABLE: Final = errors_pb2.LEADER_NOT_AVAILABLE
PARTITIONS_FIELD: Final = "partitions"
TOPICS_FIELD: Final = "topics"
BROKERS_FIELD: Final = "brokers"
# A partition entry's fields: its scalars first (int16/int32), then its int32 arrays (asserted
# when a layout is read), each array one of the partition's lists or always empty.
_SCALARS: Final[dict[str, str]] = {"error_code": "h", "partition_index": "i", "leader_id": "i", "leader_epoch": "i"}
REPLICAS: Final = "replica_nodes"
ISR: Final = "isr_nodes"
# raftmeta's simulated brokers are never offline, and it has no eligible leader replicas
# (KIP-966): Kafka's brokers answer empty lists there (kafka-topics --describe fails on null).
_EMPTY_ARRAYS: Final = frozenset({"offline_replicas", "eligible_leader_replicas", "last_known_elr"})
# Topics' encoded partitions kept, by content, at most this many bytes of them.
CACHE_BYTES_MAX: Final = 32 << 20


@dataclass(frozen=True, slots=True)
class EncodedArray:
    """An array of a response as bytes (a topic's partitions, Metadata's brokers): its length
    prefix and every entry."""

    data: bytes
    count: int


@dataclass(frozen=True, slots=True)
class _Layout:
    flexible: bool
    has_leader_epoch: bool
    # The arrays in the entry's order: REPLICAS, ISR, or the name of one always empty.
    arrays: tuple[str, ...]
    # The scalars' struct codes, in order.
    scalar_codes: str

    @cache  # noqa: B019 (layouts are few and live as long as the process)
    def entry(self, replicas: int, isr: int) -> struct.Struct:
        """The struct of an entry with ``replicas`` replicas and ``isr`` ISR members."""
        codes = [">", self.scalar_codes]
        for array in self.arrays:
            count = replicas if array == REPLICAS else isr if array == ISR else 0
            codes.append("B" if self.flexible else "i")  # flexible: uvarint(count + 1), one byte
            codes.append(f"{count}i")
        if self.flexible:
            codes.append("B")  # the number of tagged fields: none
        return struct.Struct("".join(codes))


def _tuple_entity(tp: Any) -> type[Any] | None:
    """The entity class of a ``tuple[Entity, ...]`` field type, if it is one."""
    if typing.get_origin(tp) is tuple:
        (inner, *_) = typing.get_args(tp)
        if dataclasses.is_dataclass(inner) and isinstance(inner, type):
            return inner
    return None


def partition_class(api_key: int, api_version: int) -> type[Any]:
    """kio's partition entry class of (api_key, api_version)'s response: topics[].partitions[]."""
    response = load_response_schema(api_key, api_version)
    topic = _tuple_entity(_field(response, TOPICS_FIELD).type)
    assert topic is not None, f"api {api_key} v{api_version}: topics is not an array of entities"
    partition = _tuple_entity(_field(topic, PARTITIONS_FIELD).type)
    assert partition is not None, f"api {api_key} v{api_version}: partitions is not an array of entities"
    return partition


def _field(cls: type[Any], name: str) -> dataclasses.Field[Any]:
    return next(f for f in dataclasses.fields(cls) if f.name == name)


@cache
def _layout(api_key: int, api_version: int) -> _Layout:
    cls = partition_class(api_key, api_version)
    scalars: list[str] = []
    arrays: list[str] = []
    for field in dataclasses.fields(cls):
        if get_field_tag(field) is not None:
            raise TypeError(f"{cls.__qualname__}.{field.name} is a tagged field: not a fixed layout")
        if field.name in _SCALARS and not arrays:
            scalars.append(field.name)
        elif field.name in (REPLICAS, ISR) or field.name in _EMPTY_ARRAYS:
            arrays.append(field.name)
        else:
            raise TypeError(f"{cls.__qualname__}.{field.name}: not a partition field this encoder writes there")
    if scalars[:3] != ["error_code", "partition_index", "leader_id"] or scalars[3:] not in ([], ["leader_epoch"]):
        raise TypeError(f"{cls.__qualname__}: scalars {scalars} are not a layout this encoder writes")
    codes = "".join(_SCALARS[name] for name in scalars)
    return _Layout(bool(cls.__flexible__), len(scalars) == 4, tuple(arrays), codes)


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _array_length(flexible: bool, length: int) -> bytes:
    """A non-null array's length prefix: int32 (legacy) or uvarint length + 1 (compact)."""
    return _uvarint(length + 1) if flexible else struct.pack(">i", length)


# Replica lists longer than this do not fit the one-byte compact length of _Layout.entry
# (_encode_long writes those).
_ONE_BYTE_COUNT_MAX: Final = 126


def _encode(layout: _Layout, partitions: Sequence[controller_pb2.PartitionDescription]) -> bytes:
    flexible = layout.flexible
    offset = 1 if flexible else 0  # compact arrays count length + 1
    empty = offset
    entries = [_array_length(flexible, len(partitions))]
    for p in partitions:
        replicas, isr = p.replicas, p.isr
        if flexible and max(len(replicas), len(isr)) > _ONE_BYTE_COUNT_MAX:
            entries.append(_encode_long(layout, p))
            continue
        leader = p.leader
        values: list[int] = [LEADER_NOT_AVAILABLE if leader < 0 else 0, p.partition, leader]
        if layout.has_leader_epoch:
            values.append(p.leader_epoch)
        for array in layout.arrays:
            if array == REPLICAS:
                values.append(len(replicas) + offset)
                values.extend(replicas)
            elif array == ISR:
                values.append(len(isr) + offset)
                values.extend(isr)
            else:
                values.append(empty)
        if flexible:
            values.append(0)
        entries.append(layout.entry(len(replicas), len(isr)).pack(*values))
    return b"".join(entries)


def _encode_long(layout: _Layout, p: controller_pb2.PartitionDescription) -> bytes:
    """A flexible entry whose replica list needs a longer length than one byte: piece by piece."""
    scalars = [LEADER_NOT_AVAILABLE if p.leader < 0 else 0, p.partition, p.leader]
    if layout.has_leader_epoch:
        scalars.append(p.leader_epoch)
    pieces = [struct.pack(">" + layout.scalar_codes, *scalars)]
    for array in layout.arrays:
        items = p.replicas if array == REPLICAS else p.isr if array == ISR else ()
        pieces.append(_uvarint(len(items) + 1) + struct.pack(f">{len(items)}i", *items))
    pieces.append(b"\0")
    return b"".join(pieces)


class _Cache:
    """Topics' encoded partitions by (version layout, the topic's serialized description): a
    changed topic is a new key, so an entry is never stale; the oldest go past ``max_bytes``."""

    def __init__(self, max_bytes: int) -> None:
        self._max_bytes = max_bytes
        self._bytes = 0
        self._entries: OrderedDict[tuple[_Layout, bytes], bytes] = OrderedDict()

    def get(self, layout: _Layout, partitions: Sequence[controller_pb2.PartitionDescription], key: bytes) -> bytes:
        found = self._entries.get((layout, key))
        if found is not None:
            self._entries.move_to_end((layout, key))
            return found
        encoded = _encode(layout, partitions)
        size = len(encoded) + len(key)
        if size <= self._max_bytes:
            self._entries[(layout, key)] = encoded
            self._bytes += size
            while self._bytes > self._max_bytes:
                (_, old_key), old = self._entries.popitem(last=False)
                self._bytes -= len(old) + len(old_key)
        return encoded


_CACHE = _Cache(CACHE_BYTES_MAX)


def encode_partitions(api_key: int, api_version: int, topic: controller_pb2.TopicDescription) -> EncodedArray:
    """``topic``'s partitions array in (api_key, api_version)'s response, as kio would write it.
    Clients ask for the same topics again and again (metadata refreshes), so a topic's bytes are
    kept by its content: the controller's description serialized (~0.1 ms for 1000 partitions,
    where encoding them costs a few ms)."""
    layout = _layout(api_key, api_version)
    data = _CACHE.get(layout, topic.partitions, topic.SerializeToString(deterministic=True))
    return EncodedArray(data, len(topic.partitions))


# -- writing a response that holds EncodedArray --------------------------------------------
Writer = Callable[[Writable, Any], None]


@cache
def _plan(cls: type[Any]) -> tuple[tuple[str, Writer, type[Any] | None], ...]:
    """Each field of a response or topic entity: its name, kio's writer, and for the topics
    array the topic class (written here, so its partitions can be bytes)."""
    if cls.__flexible__ and any(get_field_tag(f) is not None for f in dataclasses.fields(cls)):
        raise TypeError(f"{cls.__qualname__} has tagged fields: its entries are kio's to write")
    plan = []
    for field in dataclasses.fields(cls):
        nested = _tuple_entity(field.type) if field.name == TOPICS_FIELD else None
        writer = get_field_writer(field, flexible=cls.__flexible__, is_request_header=False, is_tag=False)
        plan.append((field.name, writer, nested))
    return tuple(plan)


# Brokers arrays kept, by (api key, version, the brokers' values); a fleet changes seldom.
_BROKERS_MAX: Final = 64
_brokers: OrderedDict[tuple[int, int, Hashable], EncodedArray] = OrderedDict()


def encode_brokers(
    api_key: int, api_version: int, key: Hashable, values: Callable[[], list[dict[str, Any]]]
) -> EncodedArray:
    """The response's ``brokers`` array written by kio's own writer for the field, kept by
    ``key`` (the brokers as advertised: a hashable value that changes with any of them), so
    Metadata answers do not build and write an entity per broker each time."""
    cache_key = (api_key, api_version, key)
    found = _brokers.get(cache_key)
    if found is not None:
        _brokers.move_to_end(cache_key)
        return found
    cls: Any = load_response_schema(api_key, api_version)
    field = _field(cls, BROKERS_FIELD)
    entity = _tuple_entity(field.type)
    assert entity is not None, f"api {api_key} v{api_version}: brokers is not an array of entities"
    from raftmeta.kafka.build import build  # build imports this module (EncodedArray)

    brokers = values()
    out = io.BytesIO()
    writer = get_field_writer(field, flexible=cls.__flexible__, is_request_header=False, is_tag=False)
    writer(out, tuple(build(entity, b) for b in brokers))
    encoded = EncodedArray(out.getvalue(), len(brokers))
    _brokers[cache_key] = encoded
    if len(_brokers) > _BROKERS_MAX:
        _brokers.popitem(last=False)
    return encoded


def _write(buffer: Writable, entity: Any) -> None:
    cls: Any = type(entity)
    for name, writer, topic_class in _plan(cls):
        value = getattr(entity, name)
        if isinstance(value, EncodedArray):
            buffer.write(value.data)
        elif topic_class is not None:
            buffer.write(_array_length(cls.__flexible__, len(value)))
            for topic in value:
                _write(buffer, topic)
        else:
            writer(buffer, value)
    if cls.__flexible__:
        buffer.write(b"\0")  # no tagged fields (_plan refuses an entity that has any)


def holds_encoded(entity: Any) -> bool:
    """Whether ``entity`` or its topics carry an :class:`EncodedArray` (kio cannot write those)."""
    return isinstance(getattr(entity, BROKERS_FIELD, None), EncodedArray) or any(
        isinstance(getattr(t, PARTITIONS_FIELD, None), EncodedArray) for t in getattr(entity, TOPICS_FIELD, ())
    )


def write_body(buffer: Writable, response: Any) -> None:
    """Write a response entity: kio's writer, or :func:`_write` where partitions are bytes."""
    if holds_encoded(response):
        _write(buffer, response)
    else:
        entity_writer(type(response))(buffer, response)
