"""A batch's bytes -> its ``MetadataRecord`` messages: the one decoding loop every reader uses
(the node's replay, snapshot loading, the chaos tape and replay, ``log dump``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import overload

from google.protobuf.message import DecodeError

from raftmeta.records.codec import check_batch, split_records
from raftmeta.v1 import records_pb2


class UnreadableRecordError(RuntimeError):
    """A batch passed its CRC check but holds bytes that are not a MetadataRecord."""


class NotARecordError(ValueError):
    """Bytes that are not a serialized MetadataRecord; ``detail`` is the parser's reason."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"not a MetadataRecord: {detail}")
        self.detail = detail


def parse_record(raw: bytes) -> records_pb2.MetadataRecord:
    """One serialized record: the one rule of what a record is, for every reader that takes a
    record at a time (``log dump``, ``records decode``, the fuzz log check). Raises
    :class:`NotARecordError` (the caller names the offset) instead of protobuf's DecodeError."""
    try:
        return records_pb2.MetadataRecord.FromString(raw)
    except DecodeError as exc:
        raise NotARecordError(str(exc)) from exc


def decode_records(batch: bytes | memoryview) -> list[records_pb2.MetadataRecord]:
    """The records of one whole batch. A CRC-valid batch whose record does not parse was
    written that way -- by a bug, or by another program writing into the data directory -- so no
    repair is safe: the reader refuses it loudly, naming the batch and the record's offset,
    instead of protobuf's bare "Error parsing message" from deep inside a replay."""
    header = check_batch(batch)
    records = []
    for index, raw in enumerate(split_records(batch, header)):
        try:
            records.append(parse_record(raw))
        except NotARecordError as exc:
            raise UnreadableRecordError(
                f"the log batch at offset {header.base_offset} (epoch {header.epoch}, {header.record_count} records) "
                f"passed its CRC check, but its record at offset {header.base_offset + index} is not a "
                f"MetadataRecord ({exc.detail}); refusing to apply it: see `raftmeta log dump`"
            ) from exc
    return records


def record_bytes(batch: bytes | memoryview) -> list[bytes]:
    """The records of one whole batch, CRC-checked and still serialized: for a reader that parses
    them itself (replay's fast path reads most partition records from their bytes; a record that
    does not parse is refused there, by name)."""
    return split_records(batch, check_batch(batch))


def parse_records(raws: Iterable[bytes]) -> list[records_pb2.MetadataRecord]:
    """Records given as serialized messages (a snapshot's payload)."""
    parse = records_pb2.MetadataRecord.FromString
    return [parse(raw) for raw in raws]


class LazyRecords(Sequence[records_pb2.MetadataRecord]):
    """Serialized records (a snapshot's, a follower's committed batches, the records of a create
    the controller encoded itself), each parsed when it is read; replay and the log writer read
    them as bytes (``serialized``). An image is built from a snapshot in one pass, so one message
    at a time is alive: all of them parsed at once (~490 bytes each) would more than double a
    node's memory while it loads or installs a big snapshot."""

    def __init__(self, raws: Sequence[bytes]) -> None:
        self._raws = raws

    @property
    def serialized(self) -> Sequence[bytes]:
        """The records as they were given, serialized (for a reader that takes bytes)."""
        return self._raws

    def __len__(self) -> int:
        return len(self._raws)

    @overload
    def __getitem__(self, index: int) -> records_pb2.MetadataRecord: ...

    @overload
    def __getitem__(self, index: slice) -> LazyRecords: ...

    def __getitem__(self, index: int | slice) -> records_pb2.MetadataRecord | LazyRecords:
        if isinstance(index, slice):
            return LazyRecords(self._raws[index])
        return records_pb2.MetadataRecord.FromString(self._raws[index])

    def __iter__(self) -> Iterator[records_pb2.MetadataRecord]:
        parse = records_pb2.MetadataRecord.FromString
        return (parse(raw) for raw in self._raws)


def serialized(records: Sequence[records_pb2.MetadataRecord]) -> list[bytes]:
    """``records`` as a log batch holds them. :class:`LazyRecords` give their bytes as they are:
    a create's partition records are encoded once by the controller and never parsed on the
    leader (parsing and serializing again cost ~1.2 us a record, a third of the leader's work per
    partition)."""
    if isinstance(records, LazyRecords):
        return list(records.serialized)
    return [record.SerializeToString() for record in records]


def with_record(
    records: Sequence[records_pb2.MetadataRecord], record: records_pb2.MetadataRecord
) -> Sequence[records_pb2.MetadataRecord]:
    """``records`` and then ``record``, keeping serialized records serialized."""
    if isinstance(records, LazyRecords):
        return LazyRecords([*records.serialized, record.SerializeToString()])
    return (*records, record)
