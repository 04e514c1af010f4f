"""Partition records in protobuf's wire format, without protobuf's per-field Python: a serialized
``MetadataRecord{partition: PartitionRecord}`` built byte for byte as ``SerializeToString``
produces it (:class:`PartitionEncoder`), and the state a canonically encoded one holds read back
(:func:`read_partition_state`, replay's fast path: raftmeta/controller/delta.py).

Snapshots serialize every partition of the image (or, with the snapshot encoder's cache, every
partition created or changed since the last snapshot): at 1000-partition topics that is most of
the records a node ever writes. Building the message field by field and serializing it costs
about 2 us of Python per partition; joining a few cached byte strings costs about a third of
that. The replica lists of a cluster have few distinct values (the image interns them), so
their encodings are cached per list.

Canonical encoding of the proto3 messages in proto/raftmeta/v1/records.proto: fields in number
order, fields at their default value left out, repeated int32 packed, negative int32 as ten-byte
varints. tests/controller/test_wire.py checks it against protobuf for arbitrary partitions.

A partition's state crosses this module as a plain tuple in the order of the controller's
``PartitionRegistration`` (which is one): records stay below the controller.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

from google.protobuf.message import DecodeError

from raftmeta.v1 import records_pb2

# (replicas, isr, leader, leader_epoch, partition_epoch, removing_replicas, adding_replicas)
PartitionState: TypeAlias = tuple[tuple[int, ...], tuple[int, ...], int, int, int, tuple[int, ...], tuple[int, ...]]
# (replicas, isr, leader, leader_epoch, partition_epoch) of a partition not being reassigned
NewPartitionState: TypeAlias = tuple[tuple[int, ...], tuple[int, ...], int, int, int]

# Wire tags: (field number << 3) | wire type (0 varint, 2 length-delimited).
_METADATA_PARTITION = b"\x12"  # MetadataRecord.partition = 2
_TOPIC_ID = b"\x0a"  # PartitionRecord.topic_id = 1
_PARTITION_ID = b"\x10"  # = 2
_REPLICAS = 0x1A  # = 3, packed
_ISR = 0x22  # = 4, packed
_REMOVING = 0x2A  # = 5, packed
_ADDING = 0x32  # = 6, packed
_LEADER = b"\x38"  # = 7
_LEADER_EPOCH = b"\x40"  # = 8
_PARTITION_EPOCH = b"\x48"  # = 9


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

    def record(self, topic_prefix: bytes, partition_id: int, part: PartitionState) -> bytes:
        """``MetadataRecord(partition=PartitionRecord(...)).SerializeToString()`` for ``part``."""
        parts = [topic_prefix]
        if partition_id:
            parts.append(_PARTITION_ID + _int(partition_id))
        replicas, isr, leader, leader_epoch, partition_epoch, removing, adding = part
        if replicas:
            parts.append(self._field(_REPLICAS, replicas))
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
        body = b"".join(parts)
        return _METADATA_PARTITION + _int(len(body)) + body

    def new_records(self, topic_id: bytes, first_partition: int, partitions: Sequence[PartitionState]) -> list[bytes]:
        """``record`` for each of the partitions a create adds (ids from ``first_partition``).

        Everything after the partition id (replicas, ISR, leader, epochs) depends only on the
        partition's state, and a create's partitions share a few state values (epochs 0, one per
        replica order): it is encoded once per value and joined -- about 0.3 us a record against
        ~1 us for ``record``. Snapshots keep ``record``: their partitions' epochs vary."""
        prefix = self.topic_prefix(topic_id)
        tails: dict[int, bytes] = {}  # id(state) -> its encoding; `partitions` holds the states
        small = _SMALL
        out: list[bytes] = []
        append = out.append
        for pid, part in enumerate(partitions, first_partition):
            tail = tails.get(id(part))
            if tail is None:
                tail = _body(self.record(b"", 0, part))
                tails[id(part)] = tail
            if not pid:
                body = prefix + tail
            elif 0 < pid < 16384:
                body = prefix + _PARTITION_ID + small[pid] + tail
            else:
                body = prefix + _PARTITION_ID + varint(pid) + tail
            size = len(body)
            append(_METADATA_PARTITION + (small[size] if size < 16384 else varint(size)) + body)
        return out


def _body(record: bytes) -> bytes:
    """The PartitionRecord inside a serialized ``MetadataRecord{partition}`` (tag, length varint)."""
    position = 1
    while record[position] & 0x80:
        position += 1
    return record[position + 1 :]


def read_partition_state(tail: bytes) -> NewPartitionState | None:
    """The state ``tail`` encodes, when ``tail`` is the canonical encoding of a PartitionRecord
    without topic_id and partition_id (so the fields the caller read before it are the record's
    only ones: re-encoding what protobuf parses gives the same bytes) and no reassignment is in
    progress. None for anything else: the caller reads the record the general way."""
    try:
        parsed = records_pb2.PartitionRecord.FromString(tail)
    except DecodeError:
        return None
    if (
        parsed.topic_id
        or parsed.partition_id
        or parsed.removing_replicas
        or parsed.adding_replicas
        or parsed.SerializeToString() != tail
    ):
        return None
    return tuple(parsed.replicas), tuple(parsed.isr), parsed.leader, parsed.leader_epoch, parsed.partition_epoch
