"""The column-wise record decoder against a plain one (parse each record, read every field into a
row): same rows for every record kind, damaged and undecodable records, whatever byte ranges a
file is split into, whichever columns and record kinds are asked for."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from raftmeta.api.ids import uuid_to_str
from raftmeta.jobs import columns
from raftmeta.jobs.datasource import read_options
from raftmeta.records import codec
from raftmeta.v1 import records_pb2 as pb

TOPIC_ID = b"\x01" * 16


def every_kind() -> list[bytes]:
    change = pb.PartitionChangeRecord(
        topic_id=TOPIC_ID, partition_id=0, leader=-1, leader_epoch=4, partition_epoch=5, unclean_election=True
    )
    change.isr.SetInParent()  # present and empty: not the same as absent
    change.replicas.ids.extend([5, 6])
    records = [
        pb.MetadataRecord(
            register_broker=pb.RegisterBrokerRecord(
                broker_id=1, incarnation_id=b"x" * 16, broker_epoch=3, rack="r", pool="gold", fenced=True
            )
        ),
        pb.MetadataRecord(register_broker=pb.RegisterBrokerRecord(broker_id=2, incarnation_id=b"y" * 16)),
        pb.MetadataRecord(topic=pb.TopicRecord(name="a", topic_id=TOPIC_ID, broker_pool="gold")),
        pb.MetadataRecord(topic=pb.TopicRecord(name="b" * 200, topic_id=b"\x02" * 16)),  # a 2-byte length
        pb.MetadataRecord(
            partition=pb.PartitionRecord(
                topic_id=TOPIC_ID,
                partition_id=0,
                replicas=[1, 2],
                isr=[1],
                removing_replicas=[2],
                adding_replicas=[3],
                leader=1,
                leader_epoch=2,
                partition_epoch=3,
            )
        ),
        pb.MetadataRecord(partition_change=change),
        pb.MetadataRecord(partition_change=pb.PartitionChangeRecord(topic_id=TOPIC_ID, partition_id=1)),
        pb.MetadataRecord(remove_topic=pb.RemoveTopicRecord(topic_id=b"\x02" * 16)),
        pb.MetadataRecord(fence_broker=pb.FenceBrokerRecord(broker_id=1, broker_epoch=3)),
        pb.MetadataRecord(unfence_broker=pb.UnfenceBrokerRecord(broker_id=1, broker_epoch=3)),
        pb.MetadataRecord(unregister_broker=pb.UnregisterBrokerRecord(broker_id=2, broker_epoch=4)),
        pb.MetadataRecord(
            broker_log_dirs_change=pb.BrokerLogDirsChangeRecord(broker_id=1, broker_epoch=3, log_dirs=[b"\x07" * 16])
        ),
        pb.MetadataRecord(config=pb.ConfigRecord(resource_name="t", name="k", value="v")),
        pb.MetadataRecord(config=pb.ConfigRecord(resource_name="t", name="k")),
        pb.MetadataRecord(
            leader_change=pb.LeaderChangeRecord(leader_id=2, leader_epoch=7, voters=[pb.Voter(voter_id=2)])
        ),
        pb.MetadataRecord(voters=pb.VotersRecord(voters=[pb.VoterEntry(voter_id=2), pb.VoterEntry(voter_id=5)])),
        pb.MetadataRecord(request=pb.RequestRecord(request_id="r1", method="X")),
        pb.MetadataRecord(no_op=pb.NoOpRecord()),
    ]
    topic = pb.MetadataRecord(topic=pb.TopicRecord(name="c", topic_id=TOPIC_ID)).SerializeToString()
    partition = records[4].SerializeToString()
    return [
        *[r.SerializeToString() for r in records],
        b"",  # no field set: a row with a null record_type
        b"\xff\xff\xff",  # does not parse: an "undecodable" row
        # Two oneof fields (the last one wins when parsed): its first byte says "topic", but it is a
        # partition record, and a reader asked for partitions must not skip it.
        topic + partition,
    ]


def reference_rows(node_id: int, segment: str, data: bytes) -> list[dict[str, Any]]:
    """Rows the plain way: one dict per record, every field read from the parsed message."""
    rows: list[dict[str, Any]] = []
    for raw in columns.scan_batches(data, segment):
        h = raw.header
        base: dict[str, Any] = dict.fromkeys(columns.RECORD_SCHEMA.names)
        base.update(node_id=node_id, segment=segment, position=raw.position, crc_ok=raw.crc_ok, error=raw.error)
        if h is not None:
            base.update(
                epoch=h.epoch, batch_base_offset=h.base_offset, append_timestamp_ms=h.append_timestamp_ms,
                control=h.is_control,
            )  # fmt: skip
        if h is None or not raw.crc_ok:
            rows.append({**base, "record_type": "corrupt_batch", "offset": h.base_offset if h else None})
            continue
        for index, payload in enumerate(codec.split_records(raw.data, h)):
            row = {**base, "offset": h.base_offset + index, "record": payload}
            try:
                record = pb.MetadataRecord.FromString(payload)
            except Exception as exc:
                rows.append({**row, "record_type": "undecodable", "error": f"{segment}: offset {row['offset']}: {exc}"})
                continue
            kind = record.WhichOneof("record")
            row["record_type"] = kind
            if kind is not None:
                row.update(fields_of(kind, getattr(record, kind)))
            rows.append(row)
    return rows


def fields_of(kind: str, m: Any) -> dict[str, Any]:
    def present(name: str) -> Any:
        return getattr(m, name) if m.HasField(name) else None

    if kind == "topic":
        return {"topic_id": uuid_to_str(m.topic_id), "topic_name": m.name, "pool": present("broker_pool")}
    if kind in ("partition", "partition_change"):
        out = {
            "topic_id": uuid_to_str(m.topic_id), "partition_id": m.partition_id, "leader_epoch": m.leader_epoch,
            "partition_epoch": m.partition_epoch,
        }  # fmt: skip
        lists = ("replicas", "isr", "adding_replicas", "removing_replicas")
        if kind == "partition":
            return {**out, "leader": m.leader, **{n: list(getattr(m, n)) for n in lists}}
        lists_of = {n: list(getattr(m, n).ids) if m.HasField(n) else None for n in lists}
        return {**out, "leader": present("leader"), "unclean_election": m.unclean_election, **lists_of}
    if kind == "remove_topic":
        return {"topic_id": uuid_to_str(m.topic_id)}
    if kind == "register_broker":
        return {
            "broker_id": m.broker_id, "broker_epoch": m.broker_epoch, "rack": present("rack"), "pool": present("pool"),
            "fenced": m.fenced,
        }  # fmt: skip
    if kind in ("unregister_broker", "fence_broker", "unfence_broker", "broker_log_dirs_change"):
        return {"broker_id": m.broker_id, "broker_epoch": m.broker_epoch}
    if kind == "config":
        return {"config_resource": m.resource_name, "config_name": m.name, "config_value": present("value")}
    if kind == "leader_change":
        return {"leader": m.leader_id, "leader_epoch": m.leader_epoch, "voters": [v.voter_id for v in m.voters]}
    if kind == "voters":
        return {"voters": [v.voter_id for v in m.voters]}
    if kind == "request":
        return {"request_id": m.request_id}
    return {}


def decoded(data: bytes, **options: Any) -> list[dict[str, Any]]:
    return [row for batch in columns.record_rows(3, "seg", data, **options) for row in batch.to_pylist()]


def log_bytes(damaged: bool) -> bytes:
    payloads = every_kind()
    batches = [codec.encode_batch(o * 40, 1 + o // 3, payloads, 1_700_000_000_000 + o) for o in range(8)]
    if damaged:
        flipped = bytearray(batches[2])
        flipped[-1] ^= 0x40  # a CRC mismatch: one row, then the next batch
        batches[2] = bytes(flipped)
        batches.append(batches[5][:30])  # a torn tail
    return b"".join(batches)


@pytest.mark.parametrize("damaged", [False, True])
def test_rows_equal_the_plain_decoding(damaged: bool) -> None:
    data = log_bytes(damaged)
    expected = reference_rows(3, "seg", data)
    assert decoded(data) == expected
    kinds = {row["record_type"] for row in expected}
    assert {"partition", "partition_change", "undecodable", None} <= kinds
    assert ("corrupt_batch" in kinds) == damaged


def test_many_rows_span_several_arrow_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(columns, "ROWS_PER_ARROW_BATCH", 7)
    data = log_bytes(True)
    assert decoded(data) == reference_rows(3, "seg", data)


def test_any_split_into_byte_ranges_gives_the_same_rows() -> None:
    data = log_bytes(True)
    whole = decoded(data)
    for cuts in ([0, 1, len(data)], [0, len(data) // 3, len(data) // 2, len(data)], list(range(0, len(data), 97))):
        bounds = [*cuts, len(data)] if cuts[-1] != len(data) else cuts
        parts = [row for start, end in itertools.pairwise(bounds) for row in decoded(data, start=start, end=end)]
        assert parts == whole


def test_columns_and_kinds_narrow_the_rows() -> None:
    data = log_bytes(True)
    whole = decoded(data)
    wanted = ["offset", "record_type", "topic_id", "replicas", "crc_ok", "error", "broker_id"]
    assert decoded(data, columns=wanted) == [
        {k: row[k] for k in columns.RECORD_SCHEMA.names if k in wanted} for row in whole
    ]
    kinds = {"register_broker", "partition"}
    selected = decoded(data, kinds=kinds)
    assert selected == [r for r in whole if r["record_type"] in kinds | {"corrupt_batch", "undecodable"}]
    # The two-field record (the last of each batch: a partition record, protobuf's last field wins) is among them.
    last = len(every_kind()) - 1
    assert [r["record_type"] for r in selected if r["crc_ok"] and r["offset"] % 40 == last] == ["partition"] * 7


def test_below_keeps_only_earlier_offsets() -> None:
    data = log_bytes(True)
    whole = decoded(data)
    for below in (0, 1, 45, 100, 1000):
        assert decoded(data, below=below) == [r for r in whole if r["offset"] is not None and r["offset"] < below]


def test_peek_reads_the_kind_only_from_a_single_field_payload() -> None:
    topic = pb.MetadataRecord(topic=pb.TopicRecord(name="b" * 200, topic_id=TOPIC_ID)).SerializeToString()
    assert columns.peek_kind(topic) == "topic"
    assert columns.peek_kind(topic + b"\x12\x00") is None
    assert columns.peek_kind(topic[:-1]) is None
    assert columns.peek_kind(b"") is None
    assert columns.peek_kind(b"\x08\x01") is None  # field 1 as a varint: not a record kind


def test_bad_options_name_the_option_and_the_allowed_values() -> None:
    with pytest.raises(ValueError, match=r"option 'columns': unknown names \['replica'\]"):
        read_options({"columns": "offset,replica"})
    with pytest.raises(ValueError, match=r"option 'record_types': unknown names \['partitions'\]; allowed: topic"):
        read_options({"record_types": "partitions"})
    with pytest.raises(ValueError, match="apply to level=records only"):
        read_options({"level": "batches", "columns": "offset"})
    assert read_options({"columns": " offset , crc_ok ", "record_types": "topic"}).columns == ("offset", "crc_ok")


def test_batch_rows_carry_the_header_and_a_hash_of_the_bytes() -> None:
    data = codec.encode_batch(7, 3, every_kind(), 1_700_000_000_000)
    (row,) = next(columns.batch_rows(1, "seg.log", data)).to_pylist()
    header = codec.check_batch(data)
    assert (row["base_offset"], row["last_offset"], row["next_offset"]) == (
        7,
        header.next_offset - 1,
        header.next_offset,
    )
    assert (row["epoch"], row["crc"], row["size_bytes"], row["crc_ok"]) == (3, header.crc, len(data), True)
    assert row["hash"] == columns.batch_hash(data)
    # One byte of one record changed, the CRC recomputed to match: the hash still tells them apart.
    records = codec.split_records(data, header)
    records[0] = records[0][:-1] + bytes([records[0][-1] ^ 1])
    (other,) = next(columns.batch_rows(1, "seg.log", codec.encode_batch(7, 3, records, 1_700_000_000_000))).to_pylist()
    assert other["crc_ok"] and other["hash"] != row["hash"]


def test_the_segments_option_names_node_and_file() -> None:
    from raftmeta.jobs.datasource import _segments, segments_option

    pairs = frozenset({(2, "00000000000000004711.log"), (1, "00000000000000000000.log")})
    assert _segments({"segments": segments_option(pairs)}) == dict.fromkeys(pairs, 0)
    # A file may be read from a byte position on (what a digest store has not verified of it).
    starts = {(2, "00000000000000004711.log"): 4096}
    assert _segments({"segments": segments_option(pairs, starts)}) == {**dict.fromkeys(pairs, 0), **starts}
    assert _segments({}) is None
    with pytest.raises(ValueError, match="NODE:FILE_NAME"):
        _segments({"segments": "00000000000000000000.log"})
