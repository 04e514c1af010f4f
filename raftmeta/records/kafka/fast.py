"""Fixed-layout encoders and decoders of the two records that dominate a metadata log --
``PartitionRecord`` v2 and ``PartitionChangeRecord`` v2, each as an ``ApiMessageAndVersion``
frame -- and of a metadata batch's record framing, without the generic field-table walk
(:mod:`raftmeta.records.kafka.message`: ~10 us a record in Python, most of it per field).

One rule: these produce and accept exactly the bytes the generic path does (the field tables are
the definition; tests/records/kafka/test_fast.py holds them byte-equal on generated records and
on a real KRaft log). A decoder returns None for anything outside its layout (another version, a
tag it does not know, a malformed value), and the caller reads that record the generic way, so
it never decides what a malformed record means.

Uuids are their 16 raw bytes here (``Uuid.raw``): no object per id.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Final, NamedTuple

from raftmeta.records.kafka.extensions import LEADER_EPOCH_TAG, PARTITION_EPOCH_TAG, UNCLEAN_ELECTION_TAG
from raftmeta.records.wire import varint as _uvarint_slow

PARTITION_RECORD_VERSION: Final = 2
PARTITION_CHANGE_RECORD_VERSION: Final = 2
# The frame before the message: frame version 1, api key, version (each a one-byte varint).
PARTITION_FRAME: Final = bytes((1, 3, PARTITION_RECORD_VERSION))
PARTITION_CHANGE_FRAME: Final = bytes((1, 5, PARTITION_CHANGE_RECORD_VERSION))
NO_LEADER_CHANGE: Final = -2  # PartitionChangeRecord.Leader's default: the leader is unchanged

_SMALL: Final = [_uvarint_slow(i) for i in range(1 << 14)]
_HEAD: Final = struct.Struct(">i16s")  # PartitionId, TopicId
_SCALARS3: Final = struct.Struct(">iii")  # Leader, LeaderEpoch, PartitionEpoch (LRS between is tagged)
_INT32: Final = struct.Struct(">i")
_INT8: Final = struct.Struct(">b")
_ARRAYS: dict[int, struct.Struct] = {}


def _uvarint(value: int) -> bytes:
    return _SMALL[value] if 0 <= value < 16384 else _uvarint_slow(value)


def _ints(values: Sequence[int]) -> bytes:
    """A compact int32 array: its length + 1, then the big-endian ids."""
    count = len(values)
    packer = _ARRAYS.get(count)
    if packer is None:
        packer = _ARRAYS[count] = struct.Struct(f">{count}i")
    return _uvarint(count + 1) + packer.pack(*values)


def _uuids(values: Sequence[bytes]) -> bytes:
    return _uvarint(len(values) + 1) + b"".join(values)


class KafkaPartition(NamedTuple):
    """A PartitionRecord v2's fields (ELR and last known ELR None when absent: null)."""

    topic_id: bytes
    partition_id: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    removing_replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    directories: tuple[bytes, ...] = ()
    leader_recovery_state: int = 0
    eligible_leader_replicas: tuple[int, ...] | None = None
    last_known_elr: tuple[int, ...] | None = None


class KafkaPartitionChange(NamedTuple):
    """A PartitionChangeRecord v2's fields (None: the field is absent, "unchanged"), with
    raftmeta's tagged fields (docs/log-format.md): -1 / False when absent."""

    topic_id: bytes
    partition_id: int
    isr: tuple[int, ...] | None = None
    leader: int = NO_LEADER_CHANGE
    replicas: tuple[int, ...] | None = None
    removing_replicas: tuple[int, ...] | None = None
    adding_replicas: tuple[int, ...] | None = None
    leader_recovery_state: int = -1
    eligible_leader_replicas: tuple[int, ...] | None = None
    last_known_elr: tuple[int, ...] | None = None
    directories: tuple[bytes, ...] | None = None
    raftmeta_leader_epoch: int = -1
    raftmeta_partition_epoch: int = -1
    raftmeta_unclean_election: bool = False


# -- encode ------------------------------------------------------------------------------------


def _tagged(tag: int, body: bytes) -> bytes:
    return _uvarint(tag) + _uvarint(len(body)) + body


# Partitions share few distinct states (a replica list, a leader, small epochs): the encoding of
# everything after PartitionId and TopicId is kept per state, and the state read back per encoding
# -- one dict lookup where packing or reading the fields again cost microseconds. Bounded: a
# cluster with very many distinct states starts over rather than grows.
TAIL_CACHE_MAX: Final = 1 << 16
_ENCODED_TAILS: dict[tuple[object, ...], bytes] = {}
_READ_TAILS: dict[bytes, tuple[object, ...]] = {}
PARTITION_HEAD_END: Final = 3 + _HEAD.size  # the frame, PartitionId and TopicId: 23 bytes


def partition_value(p: KafkaPartition) -> bytes:
    """The record value (frame and message) of a PartitionRecord v2."""
    state = p[2:]
    tail = _ENCODED_TAILS.get(state)
    if tail is None:
        tail = _partition_tail(p)
        if len(_ENCODED_TAILS) >= TAIL_CACHE_MAX:
            _ENCODED_TAILS.clear()
        _ENCODED_TAILS[state] = tail
    return PARTITION_FRAME + _HEAD.pack(p.partition_id, p.topic_id) + tail


def _partition_tail(p: KafkaPartition) -> bytes:
    """The fields of a PartitionRecord v2 after PartitionId and TopicId."""
    tags = []
    if p.leader_recovery_state != 0:
        tags.append(_tagged(0, _INT8.pack(p.leader_recovery_state)))
    if p.eligible_leader_replicas is not None:
        tags.append(_tagged(1, _ints(p.eligible_leader_replicas)))
    if p.last_known_elr is not None:
        tags.append(_tagged(2, _ints(p.last_known_elr)))
    replicas = _ints(p.replicas)
    return b"".join(
        (
            replicas,
            replicas if p.isr == p.replicas else _ints(p.isr),
            _ints(p.removing_replicas),
            _ints(p.adding_replicas),
            _SCALARS3.pack(p.leader, p.leader_epoch, p.partition_epoch),
            _uuids(p.directories),
            _uvarint(len(tags)),
            *tags,
        )
    )


def partition_change_value(c: KafkaPartitionChange) -> bytes:
    """The record value (frame and message) of a PartitionChangeRecord v2; its tagged fields in
    ascending tag order, each only when it differs from its default (as Kafka's writer)."""
    tags = []
    if c.isr is not None:
        tags.append(_tagged(0, _ints(c.isr)))
    if c.leader != NO_LEADER_CHANGE:
        tags.append(_tagged(1, _INT32.pack(c.leader)))
    if c.replicas is not None:
        tags.append(_tagged(2, _ints(c.replicas)))
    if c.removing_replicas is not None:
        tags.append(_tagged(3, _ints(c.removing_replicas)))
    if c.adding_replicas is not None:
        tags.append(_tagged(4, _ints(c.adding_replicas)))
    if c.leader_recovery_state != -1:
        tags.append(_tagged(5, _INT8.pack(c.leader_recovery_state)))
    if c.eligible_leader_replicas is not None:
        tags.append(_tagged(6, _ints(c.eligible_leader_replicas)))
    if c.last_known_elr is not None:
        tags.append(_tagged(7, _ints(c.last_known_elr)))
    if c.directories is not None:
        tags.append(_tagged(8, _uuids(c.directories)))
    if c.raftmeta_leader_epoch != -1:
        tags.append(_tagged(LEADER_EPOCH_TAG, _INT32.pack(c.raftmeta_leader_epoch)))
    if c.raftmeta_partition_epoch != -1:
        tags.append(_tagged(PARTITION_EPOCH_TAG, _INT32.pack(c.raftmeta_partition_epoch)))
    if c.raftmeta_unclean_election:
        tags.append(_tagged(UNCLEAN_ELECTION_TAG, b"\x01"))
    return b"".join((PARTITION_CHANGE_FRAME, _HEAD.pack(c.partition_id, c.topic_id), _uvarint(len(tags)), *tags))


def frame_metadata_values(values: Sequence[bytes]) -> bytes:
    """Metadata records as a batch's records section holds them: each with a null key, offset
    delta its index, timestamp delta 0, no headers (as KRaft writes them; equal to
    :func:`raftmeta.records.kafka.batch.encode_record` of each)."""
    parts = []
    for index, value in enumerate(values):
        # attributes 0, timestampDelta 0, offsetDelta (zigzag), key null (-1), value length (zigzag)
        body_head = _record_head(index) + _zigzag(len(value))
        parts.append(_zigzag(len(body_head) + len(value) + 1) + body_head + value + b"\x00")
    return b"".join(parts)


def _zigzag(value: int) -> bytes:
    if 0 <= value < len(_ZIGZAG):
        return _ZIGZAG[value]
    return _uvarint(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def _record_head(index: int) -> bytes:
    """A KRaft metadata record's bytes from its attributes to its null key."""
    if index < len(_RECORD_HEADS):
        return _RECORD_HEADS[index]
    return b"\x00\x00" + _zigzag(index) + b"\x01"


_ZIGZAG: Final = [_uvarint(value << 1) for value in range(8192)]  # non-negative values: one or two bytes
_RECORD_HEADS: Final = [b"\x00\x00" + _ZIGZAG[index] + b"\x01" for index in range(8192)]


# -- decode ------------------------------------------------------------------------------------


class _Outside(Exception):
    """The bytes are not this layout: the caller reads the record the generic way."""


def _read_uvarint(data: bytes, pos: int) -> tuple[int, int]:
    value = 0
    shift = 0
    while True:
        if pos >= len(data) or shift > 28:
            raise _Outside
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _read_ints(data: bytes, pos: int, end: int) -> tuple[tuple[int, ...], int]:
    count, pos = _read_uvarint(data, pos)
    if count == 0:
        raise _Outside  # null: not in this layout
    count -= 1
    stop = pos + 4 * count
    if stop > end:
        raise _Outside
    packer = _ARRAYS.get(count)
    if packer is None:
        packer = _ARRAYS[count] = struct.Struct(f">{count}i")
    return packer.unpack_from(data, pos), stop


def _read_uuids(data: bytes, pos: int, end: int) -> tuple[tuple[bytes, ...], int]:
    count, pos = _read_uvarint(data, pos)
    if count == 0:
        raise _Outside
    stop = pos + 16 * (count - 1)
    if stop > end:
        raise _Outside
    return tuple(data[i : i + 16] for i in range(pos, stop, 16)), stop


def read_partition(value: bytes) -> KafkaPartition | None:
    """A PartitionRecord v2 value's fields; None outside this layout (the generic path decides)."""
    if value[:3] != PARTITION_FRAME or len(value) < PARTITION_HEAD_END:
        return None
    tail = value[PARTITION_HEAD_END:]
    state = _READ_TAILS.get(tail)
    if state is None:
        state = _read_partition_tail(value)
        if state is None:
            return None
        if len(_READ_TAILS) >= TAIL_CACHE_MAX:
            _READ_TAILS.clear()
        _READ_TAILS[tail] = state
    partition_id, topic_id = _HEAD.unpack_from(value, 3)
    return KafkaPartition(topic_id, partition_id, *state)  # type: ignore[arg-type]


def read_partition_head(value: bytes) -> tuple[int, bytes]:
    """A PartitionRecord v2 value's PartitionId and TopicId (the value checked by
    :func:`read_partition` before)."""
    partition_id, topic_id = _HEAD.unpack_from(value, 3)
    return partition_id, topic_id


def _read_partition_tail(value: bytes) -> tuple[object, ...] | None:
    """The fields of a PartitionRecord v2 value after PartitionId and TopicId, read."""
    end = len(value)
    try:
        replicas, pos = _read_ints(value, PARTITION_HEAD_END, end)
        isr, pos = _read_ints(value, pos, end)
        removing, pos = _read_ints(value, pos, end)
        adding, pos = _read_ints(value, pos, end)
        if pos + 12 > end:
            raise _Outside
        leader, leader_epoch, partition_epoch = _SCALARS3.unpack_from(value, pos)
        directories, pos = _read_uuids(value, pos + 12, end)
        count, pos = _read_uvarint(value, pos)
        recovery = 0
        elr: tuple[int, ...] | None = None
        last_known: tuple[int, ...] | None = None
        previous = -1
        for _ in range(count):
            tag, pos = _read_uvarint(value, pos)
            size, pos = _read_uvarint(value, pos)
            stop = pos + size
            if tag <= previous or stop > end:
                raise _Outside
            previous = tag
            if tag == 0 and size == 1:
                recovery = _INT8.unpack_from(value, pos)[0]
                pos = stop
            elif tag == 1:
                elr, pos = _read_ints(value, pos, stop)
            elif tag == 2:
                last_known, pos = _read_ints(value, pos, stop)
            else:
                raise _Outside
            if pos != stop:
                raise _Outside
        if pos != end:
            raise _Outside
    except (_Outside, struct.error):
        return None
    return (
        replicas,
        isr,
        removing,
        adding,
        leader,
        leader_epoch,
        partition_epoch,
        directories,
        recovery,
        elr,
        last_known,
    )


def read_partition_change(value: bytes) -> KafkaPartitionChange | None:
    """A PartitionChangeRecord v2 value's fields, raftmeta's tagged fields included; None outside
    this layout (the generic path decides)."""
    if value[:3] != PARTITION_CHANGE_FRAME:
        return None
    end = len(value)
    try:
        if end < 23:
            raise _Outside
        partition_id, topic_id = _HEAD.unpack_from(value, 3)
        count, pos = _read_uvarint(value, 23)
        fields: dict[str, object] = {}
        previous = -1
        for _ in range(count):
            tag, pos = _read_uvarint(value, pos)
            size, pos = _read_uvarint(value, pos)
            stop = pos + size
            if tag <= previous or stop > end:
                raise _Outside
            previous = tag
            name = _CHANGE_INTS.get(tag)
            if name is not None:
                fields[name], pos = _read_ints(value, pos, stop)
            elif tag == 1 and size == 4:
                fields["leader"] = _INT32.unpack_from(value, pos)[0]
                pos = stop
            elif tag == 5 and size == 1:
                fields["leader_recovery_state"] = _INT8.unpack_from(value, pos)[0]
                pos = stop
            elif tag == 8:
                fields["directories"], pos = _read_uuids(value, pos, stop)
            elif tag == LEADER_EPOCH_TAG and size == 4:
                fields["raftmeta_leader_epoch"] = _INT32.unpack_from(value, pos)[0]
                pos = stop
            elif tag == PARTITION_EPOCH_TAG and size == 4:
                fields["raftmeta_partition_epoch"] = _INT32.unpack_from(value, pos)[0]
                pos = stop
            elif tag == UNCLEAN_ELECTION_TAG and size == 1 and value[pos] <= 1:
                fields["raftmeta_unclean_election"] = value[pos] == 1
                pos = stop
            else:
                raise _Outside
            if pos != stop:
                raise _Outside
        if pos != end:
            raise _Outside
    except (_Outside, struct.error, IndexError):
        return None
    return KafkaPartitionChange(topic_id, partition_id, **fields)  # type: ignore[arg-type]


_CHANGE_INTS: Final = {
    0: "isr",
    2: "replicas",
    3: "removing_replicas",
    4: "adding_replicas",
    6: "eligible_leader_replicas",
    7: "last_known_elr",
}


def metadata_values(data: bytes, start: int, end: int, count: int) -> list[bytes] | None:
    """The values of ``count`` records framed in ``data[start:end]`` as KRaft frames metadata
    records (:func:`frame_metadata_values`: null key, timestamp delta 0, offset delta its index,
    no headers); None for anything else (the caller reads the batch the generic way)."""
    values = []
    pos = start
    try:
        for index in range(count):
            length = data[pos]
            if length < 0x80:  # most records: a one-byte varint
                pos += 1
            else:
                length, pos = _read_uvarint(data, pos)
            record_end = pos + (length >> 1)
            head = _record_head(index)
            if length & 1 or data[pos : pos + len(head)] != head:
                raise _Outside
            pos += len(head)
            size = data[pos]
            if size < 0x80:
                pos += 1
            else:
                size, pos = _read_uvarint(data, pos)
            if size & 1:
                raise _Outside
            value_end = pos + (size >> 1)
            if value_end + 1 != record_end or record_end > end or data[value_end] != 0:
                raise _Outside
            values.append(data[pos:value_end])
            pos = record_end
    except (_Outside, IndexError):
        return None
    return values if pos == end else None
