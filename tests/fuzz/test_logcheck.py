"""The log check: a log of records that replay cleanly passes; each kind of bad record is named."""

from __future__ import annotations

from pathlib import Path

from raftmeta.controller import MetadataImage
from raftmeta.fuzz.logcheck import check_batches, check_node_log
from raftmeta.records import codec
from raftmeta.storage.datadir import LOG_DIR_NAME
from raftmeta.storage.log import SegmentLog
from raftmeta.v1 import records_pb2

TOPIC_ID = bytes(range(1, 17))


def _broker(broker_id: int, pool: str | None = None) -> records_pb2.MetadataRecord:
    return records_pb2.MetadataRecord(
        register_broker=records_pb2.RegisterBrokerRecord(
            broker_id=broker_id, incarnation_id=bytes([broker_id + 1]) * 16, broker_epoch=broker_id + 1, pool=pool
        )
    )


def _topic(pool: str | None = None) -> records_pb2.MetadataRecord:
    return records_pb2.MetadataRecord(topic=records_pb2.TopicRecord(name="t", topic_id=TOPIC_ID, broker_pool=pool))


def _partition(replicas: list[int], isr: list[int] | None = None) -> records_pb2.MetadataRecord:
    isr = replicas if isr is None else isr
    return records_pb2.MetadataRecord(
        partition=records_pb2.PartitionRecord(
            topic_id=TOPIC_ID, partition_id=0, replicas=replicas, isr=isr, leader=isr[0] if isr else -1
        )
    )


def _batches(*batches: list[records_pb2.MetadataRecord]) -> dict[int, bytes]:
    out, offset = {}, 0
    for records in batches:
        out[offset] = codec.encode_batch(offset, 1, [r.SerializeToString() for r in records], 0)
        offset += len(records)
    return out


GOOD = [[_broker(1), _broker(2)], [_topic(), _partition([1, 2])]]


def test_a_clean_log_replays() -> None:
    report = check_batches(_batches(*GOOD))
    assert report.problems == [] and report.batches == 2 and report.records == 4
    assert report.image is not None and report.image.topic_by_name("t") is not None


def test_records_that_do_not_replay_are_named_with_their_offset() -> None:
    twice = records_pb2.MetadataRecord(topic=records_pb2.TopicRecord(name="t", topic_id=bytes(range(2, 18))))
    report = check_batches(_batches(*GOOD, [twice]))
    assert report.problems == ["tape: batch at offset 4 does not replay: TopicRecord: a topic named 't' already exists"]


def test_invariant_7_beyond_what_replay_refuses() -> None:
    unregistered = check_batches(_batches([_broker(1)], [_topic(), _partition([1, 9])]))
    assert unregistered.problems == ["tape: after the batch at offset 1: t-0: replicas [9] are not registered brokers"]
    empty_isr = check_batches(_batches(*GOOD[:1], [_topic(), _partition([1, 2], isr=[])]))
    assert empty_isr.problems == [
        "tape: after the batch at offset 2: t-0: empty ISR (the partition lost its last in-sync replica)"
    ]
    outside = check_batches(_batches([_broker(1, "gold"), _broker(2)], [_topic("gold"), _partition([1, 2])]))
    assert outside.problems == [
        "tape: after the batch at offset 2: t-0: replicas [2] outside the topic's broker pool 'gold'"
    ]


def test_a_gap_in_the_tape_is_noted_not_failed() -> None:
    batches = _batches(*GOOD, [_broker(3)])
    del batches[2]
    report = check_batches(batches)
    assert report.problems == [] and report.notes == ["offsets 2..3 were not copied: replayed up to offset 2"]


def test_a_node_log_on_disk(tmp_path: Path) -> None:
    with SegmentLog.open(tmp_path / LOG_DIR_NAME) as log:
        for records in GOOD:
            log.append_batch(1, [r.SerializeToString() for r in records], 0)
        log.append_batch(1, [b"\xff\xff not a record"], 0)
    report = check_node_log(tmp_path)
    assert report.batches == 3 and report.log_end_offset == 5
    assert len(report.problems) == 1
    assert report.problems[0].startswith(f"{tmp_path.name}: offset 4: not a MetadataRecord")
    assert report.image is None, "a log that stops replaying gives no final image"
    clean = check_batches(_batches(*GOOD))
    assert isinstance(clean.image, MetadataImage)
