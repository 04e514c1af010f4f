"""Partition records in protobuf's wire format, without protobuf's per-field Python: a serialized
``MetadataRecord{partition: PartitionRecord}`` built byte for byte as ``SerializeToString``
produces it (:class:`PartitionEncoder`), and the state a canonically encoded one holds read back
(:func:`read_partition_state`, replay's fast path: raftmeta/controller/delta.py).

Snapshots serialize every partition of the image (or, with the snapshot encoder's cache, every
partition created or changed since the last snapshot): at 1000-partition topics that is most of
the records a node ever writes. Building the message field by field and serializing it costs
about 2 us of Python per partition; encoding its fields as byte strings (:meth:`PartitionEncoder.tail`)
about 1 us; and joining a record from the header, its partition id and the tail of a state
already encoded (:meth:`PartitionEncoder.records`: partitions share few state objects) about
0.2 us. A replica list of broker ids below 128 is its own packed encoding (one byte an id);
longer ids' encodings are cached per list.

Canonical encoding of the proto3 messages in proto/raftmeta/v1/records.proto: fields in number
order, fields at their default value left out, repeated int32 packed, negative int32 as ten-byte
varints. tests/controller/test_wire.py checks it against protobuf for arbitrary partitions.

A partition's state crosses this module as a plain tuple in the order of the controller's
``PartitionRegistration`` (which is one): records stay below the controller.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import add
from typing import TypeAlias

from google.protobuf.message import DecodeError

from raftmeta.v1 import records_pb2

# (replicas, isr, leader, leader_epoch, partition_epoch, removing_replicas, adding_replicas, directories):
# the controller's PartitionRegistration (directories: one 16-byte id per replica, or none)
PartitionState: TypeAlias = tuple[
    tuple[int, ...], tuple[int, ...], int, int, int, tuple[int, ...], tuple[int, ...], tuple[bytes, ...]
]
# (replicas, isr, leader, leader_epoch, partition_epoch) of a partition not being reassigned
NewPartitionState: TypeAlias = tuple[tuple[int, ...], tuple[int, ...], int, int, int]

# Wire tags: (field number << 3) | wire type (0 varint, 2 length-delimited).
_METADATA_PARTITION = b"\x12"  # MetadataRecord.partition = 2
_TOPIC_ID = b"\x0a"  # PartitionRecord.topic_id = 1
_PARTITION_ID = b"\x10"  # = 2
_REPLICAS = 0x1A  # = 3, packed
_ISR = 0x22  # = 4, packed
_ISR_TAG = bytes((_ISR,))
_REMOVING = 0x2A  # = 5, packed
_ADDING = 0x32  # = 6, packed
_LEADER = b"\x38"  # = 7
_LEADER_EPOCH = b"\x40"  # = 8
_PARTITION_EPOCH = b"\x48"  # = 9
_DIRECTORY = b"\x52\x10"  # = 10, one length-delimited 16-byte entry per directory (bytes are never packed)


def varint(value: int) -> bytes:
    """An int32/int64 as a protobuf varint (a negative one as its 64-bit two's complement)."""
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_SMALL = [varint(i) for i in range(1 << 14)]  # every value below 16384 is one or two bytes
PACKED_CACHE_MAX = 1 << 16


def _int(value: int) -> bytes:
    return _SMALL[value] if 0 <= value < 16384 else varint(value)


class PartitionEncoder:
    """Serialized partition records; keeps the encodings of the replica lists it has seen."""

    def __init__(self) -> None:
        self._packed: dict[tuple[int, tuple[int, ...]], bytes] = {}

    def _field(self, tag: int, values: tuple[int, ...]) -> bytes:
        # Ids below 128 are one-byte varints: the packed payload is the ids' own bytes, built in C
        # (a cluster of up to 128 brokers has about as many distinct replica lists as partitions,
        # so the cache below would mostly miss).
        if len(values) < 0x80 and min(values) >= 0 and max(values) < 0x80:
            return bytes((tag, len(values))) + bytes(values)
        key = (tag, values)
        encoded = self._packed.get(key)
        if encoded is None:
            payload = b"".join([_int(v) for v in values])
            encoded = bytes((tag,)) + _int(len(payload)) + payload
            if len(self._packed) >= PACKED_CACHE_MAX:
                self._packed.clear()  # many brokers, many distinct lists: start over rather than grow
            self._packed[key] = encoded
        return encoded

    def topic_prefix(self, topic_id: bytes) -> bytes:
        """The ``topic_id`` field, shared by every partition of the topic."""
        return _TOPIC_ID + _int(len(topic_id)) + topic_id if topic_id else b""

    def tail(self, part: PartitionState) -> bytes:
        """The fields of ``part``'s PartitionRecord after ``partition_id``: everything its state
        says. Partitions in equal states have equal tails."""
        parts = []
        replicas, isr, leader, leader_epoch, partition_epoch, removing, adding, directories = part
        if replicas:
            replicas_field = self._field(_REPLICAS, replicas)
            parts.append(replicas_field)
            if isr is replicas or isr == replicas:  # most partitions: the same payload, another tag
                parts.append(_ISR_TAG + replicas_field[1:])
                isr = ()
        if isr:
            parts.append(self._field(_ISR, isr))
        if removing:
            parts.append(self._field(_REMOVING, removing))
        if adding:
            parts.append(self._field(_ADDING, adding))
        if leader:
            parts.append(_LEADER + _int(leader))
        if leader_epoch:
            parts.append(_LEADER_EPOCH + _int(leader_epoch))
        if partition_epoch:
            parts.append(_PARTITION_EPOCH + _int(partition_epoch))
        for directory in directories:
            parts.append(_DIRECTORY + directory)  # 16 bytes each (the mapping refuses any other size)
        return b"".join(parts)

    def record(self, topic_prefix: bytes, partition_id: int, part: PartitionState) -> bytes:
        """``MetadataRecord(partition=PartitionRecord(...)).SerializeToString()`` for ``part``."""
        body = b"".join((topic_prefix, _partition_id_field(partition_id), self.tail(part)))
        return _METADATA_PARTITION + _int(len(body)) + body

    def records(self, topic_id: bytes, first_partition: int, tails: Sequence[bytes]) -> list[bytes]:
        """:meth:`record` for partitions ``first_partition``, ``first_partition + 1``, ... of a
        topic, given their :meth:`tail`: each record is three byte strings joined -- the header and
        topic id (one per record length), the partition id field, the tail -- ~0.2 us a record,
        where encoding each state again cost ~1.2 us."""
        prefix = self.topic_prefix(topic_id)
        end = first_partition + len(tails)
        if first_partition >= 0 and end <= len(_PARTITION_ID_FIELDS):
            ids = _PARTITION_ID_FIELDS[first_partition:end]
        else:
            ids = [_partition_id_field(pid) for pid in range(first_partition, end)]
        sizes = list(map(add, map(len, ids), map(len, tails)))
        own = len(prefix)
        by_size = {size: _METADATA_PARTITION + _int(own + size) + prefix for size in set(sizes)}
        heads = map(by_size.__getitem__, sizes)
        return [head + pid + tail for head, pid, tail in zip(heads, ids, tails, strict=True)]

    def new_records(self, topic_id: bytes, first_partition: int, partitions: Sequence[PartitionState]) -> list[bytes]:
        """:meth:`record` for each of ``partitions`` (ids from ``first_partition``), each distinct
        state object encoded once: the partitions of a topic share few state objects when the
        cluster has few brokers (with many, the caller's table of states can keep the tails:
        controller/topics.py)."""
        tails: dict[int, bytes] = {}  # id(state) -> its tail; ``partitions`` keeps every state alive
        known = tails.get
        tail = self.tail
        return self.records(
            topic_id,
            first_partition,
            [known(id(part)) or tails.setdefault(id(part), tail(part)) for part in partitions],
        )


def partition_record(topic_prefix: bytes, partition_id: int, tail: bytes) -> bytes:
    """:meth:`PartitionEncoder.record` from the topic's :meth:`~PartitionEncoder.topic_prefix` and
    the state's :meth:`~PartitionEncoder.tail`, both already encoded (a reader that keeps them)."""
    body = topic_prefix + _partition_id_field(partition_id) + tail
    return _METADATA_PARTITION + _int(len(body)) + body


# A partition id's field (its tag and varint; none for 0, left out), for the ids most topics have.
_PARTITION_ID_FIELDS = [b""] + [_PARTITION_ID + _SMALL[pid] for pid in range(1, 1 << 14)]


def _partition_id_field(partition_id: int) -> bytes:
    if 0 <= partition_id < len(_PARTITION_ID_FIELDS):
        return _PARTITION_ID_FIELDS[partition_id]
    return _PARTITION_ID + _int(partition_id)


def read_partition_state(tail: bytes) -> NewPartitionState | None:
    """The state ``tail`` encodes, when ``tail`` is the canonical encoding of a PartitionRecord
    without topic_id and partition_id (so the fields the caller read before it are the record's
    only ones: re-encoding what protobuf parses gives the same bytes) and no reassignment is in
    progress. None for anything else: the caller reads the record the general way.

    The common shape -- replica ids below 128, scalars of at most four varint bytes -- is read
    here byte by byte: a cluster of up to 128 brokers has nearly as many distinct replica lists as
    partitions, so replay meets this on most records of a snapshot, and protobuf's parse and
    re-serialization cost three times as much. Everything else is left to
    :func:`read_partition_state_by_protobuf`, the definition; tests/controller/test_wire.py holds
    the two equal on arbitrary bytes."""
    if len(tail) < 2 or tail[0] != _REPLICAS:
        return read_partition_state_by_protobuf(tail)
    count = tail[1]
    position = 2 + count
    packed = tail[2:position]
    if not 0 < count < 0x80 or len(packed) != count or max(packed) >= 0x80:
        return read_partition_state_by_protobuf(tail)
    replicas = tuple(packed)
    isr: tuple[int, ...] = ()
    if tail[position : position + 1] == _ISR_TAG:
        isr_count = tail[position + 1] if position + 1 < len(tail) else 0
        start = position + 2
        position = start + isr_count
        isr_packed = tail[start:position]
        if isr_packed == packed:
            isr = replicas
        elif 0 < isr_count < 0x80 and len(isr_packed) == isr_count and max(isr_packed) < 0x80:
            isr = tuple(isr_packed)
        else:
            return read_partition_state_by_protobuf(tail)
    rest = tail[position:]
    scalars = _SCALARS.get(rest) if rest else (0, 0, 0)
    if scalars is None:
        scalars = _read_scalars(rest)
        if scalars is None:
            return read_partition_state_by_protobuf(tail)
    return replicas, isr, scalars[0], scalars[1], scalars[2]


# The bytes after the replica lists -> (leader, leader_epoch, partition_epoch): a cluster has few
# distinct values (a leader and small epochs), and one lookup is cheaper than reading them.
_SCALARS: dict[bytes, tuple[int, int, int]] = {}
_SCALARS_MAX = 1 << 16
_SCALAR_TAGS = (0x38, 0x40, 0x48)  # leader, leader_epoch, partition_epoch, in field order


def _read_scalars(rest: bytes) -> tuple[int, int, int] | None:
    """The three scalars ``rest`` encodes canonically, each a varint of one to four bytes (zero is
    left out); None for anything else (a negative leader, a big epoch, another field)."""
    values = [0, 0, 0]
    position = 0
    size = len(rest)
    for index, tag in enumerate(_SCALAR_TAGS):
        if position < size and rest[position] == tag:
            value = 0
            shift = 0
            end = min(position + 5, size)
            position += 1
            while True:
                if position == end:
                    return None
                byte = rest[position]
                position += 1
                value |= (byte & 0x7F) << shift
                if byte < 0x80:
                    break
                shift += 7
            if byte == 0:  # zero, or a last byte of zero: not canonical
                return None
            values[index] = value
    if position != size:
        return None
    scalars = (values[0], values[1], values[2])
    if len(_SCALARS) >= _SCALARS_MAX:
        _SCALARS.clear()
    _SCALARS[rest] = scalars
    return scalars


def read_partition_state_by_protobuf(tail: bytes) -> NewPartitionState | None:
    """:func:`read_partition_state` by protobuf's parser: the definition of what it returns."""
    try:
        parsed = records_pb2.PartitionRecord.FromString(tail)
    except DecodeError:
        return None
    if (
        parsed.topic_id
        or parsed.partition_id
        or parsed.removing_replicas
        or parsed.adding_replicas
        or parsed.directories  # a state this reader does not hold: the general path reads it
        or parsed.SerializeToString() != tail
    ):
        return None
    return tuple(parsed.replicas), tuple(parsed.isr), parsed.leader, parsed.leader_epoch, parsed.partition_epoch
