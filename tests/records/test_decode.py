"""A committed batch the CRC vouches for but whose record does not parse is refused by name."""

from __future__ import annotations

import pytest

from raftmeta.records.codec import encode_batch
from raftmeta.records.decode import NotARecordError, UnreadableRecordError, decode_records, parse_record
from raftmeta.v1 import records_pb2


def test_records_of_a_good_batch_decode_in_order() -> None:
    records = [records_pb2.MetadataRecord(no_op=records_pb2.NoOpRecord()), records_pb2.MetadataRecord()]
    batch = encode_batch(5, 2, [r.SerializeToString() for r in records], 0)
    assert decode_records(batch) == records


def test_a_crc_valid_batch_with_a_record_that_is_not_a_metadata_record_is_refused_by_offset() -> None:
    good = records_pb2.MetadataRecord(no_op=records_pb2.NoOpRecord()).SerializeToString()
    batch = encode_batch(5, 2, [good, b"\xff\xff\xff\xff"], 0)  # a truncated varint field: not a record
    with pytest.raises(UnreadableRecordError, match=r"batch at offset 5 \(epoch 2, 2 records\).*offset 6 is not"):
        decode_records(batch)


def test_one_record_is_parsed_or_refused_with_the_parsers_reason() -> None:
    record = records_pb2.MetadataRecord(no_op=records_pb2.NoOpRecord())
    assert parse_record(record.SerializeToString()) == record
    with pytest.raises(NotARecordError, match=r"^not a MetadataRecord: \S") as refused:
        parse_record(b"\xff\xff\xff\xff")
    assert refused.value.detail
    assert str(refused.value) == f"not a MetadataRecord: {refused.value.detail}"
