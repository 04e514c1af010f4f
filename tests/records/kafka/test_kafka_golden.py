"""raftmeta's codec of Kafka's metadata log against a real KRaft log of the pinned release and
what Kafka's own decoder printed for it (data/README.md): every batch and record encodes back to
its very bytes, and shows every field as kafka-dump-log shows it."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from raftmeta.kraft.dump_log import differences, parse_dump
from raftmeta.records.kafka.batch import batch_size, encode_batch, iter_batches
from raftmeta.records.kafka.frames import ControlRecord, batch_records, encode_control, encode_metadata
from raftmeta.records.kafka.json_view import file_view

DATA = Path(__file__).parent / "data"
FILES = sorted(p.name for p in DATA.iterdir() if p.suffix in (".log", ".checkpoint"))


@pytest.mark.parametrize("name", FILES)
def test_every_batch_and_record_of_a_real_log_encodes_back_to_its_bytes(name: str) -> None:
    data = (DATA / name).read_bytes()
    batches = 0
    for position, batch in iter_batches(data):
        assert encode_batch(batch) == data[position : position + batch_size(data, position)]
        for (offset, record), stored in zip(batch_records(batch), batch.records, strict=True):
            assert offset == batch.base_offset + stored.offset_delta
            assert record.known, f"{name} offset {offset}: {record.name} left undecoded"
            if isinstance(record, ControlRecord):
                assert encode_control(record) == (stored.key, stored.value)
            else:
                assert encode_metadata(record) == stored.value
        batches += 1
    assert batches > 0


def test_the_codec_shows_every_field_as_kafka_dump_log_shows_it() -> None:
    dumped = parse_dump((DATA / "kafka-dump-log.txt").read_text())
    assert sorted(f.path for f in dumped) == FILES
    seen: Counter[str] = Counter()
    for kafka_file in dumped:
        ours = file_view((DATA / kafka_file.path).read_bytes())
        assert differences(ours, kafka_file.batches, where=kafka_file.path) == []
        for batch in ours:
            seen.update(str(r.payload["type"]) if r.label == "payload" else r.label for r in batch.records)
    # The comparison covered what a KRaft log holds (data/README.md).
    expected = {
        "LeaderChange", "KRaftVersion", "KRaftVoters", "SnapshotHeader", "SnapshotFooter",
        "BEGIN_TRANSACTION_RECORD", "END_TRANSACTION_RECORD", "FEATURE_LEVEL_RECORD",
        "REGISTER_CONTROLLER_RECORD", "REGISTER_BROKER_RECORD", "BROKER_REGISTRATION_CHANGE_RECORD",
        "TOPIC_RECORD", "PARTITION_RECORD", "PARTITION_CHANGE_RECORD", "CONFIG_RECORD",
        "REMOVE_TOPIC_RECORD", "NO_OP_RECORD",
    }  # fmt: skip
    assert expected <= set(seen), expected - set(seen)
