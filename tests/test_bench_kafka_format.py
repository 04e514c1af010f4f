"""``raftmeta bench kafka-format`` runs end to end at a tiny size and reports every figure."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from raftmeta.bench.kafka_format import kafka_log, mapped_log, raftmeta_log
from raftmeta.cli.main import cli
from raftmeta.records import codec
from raftmeta.records.decode import decode_records
from raftmeta.records.kafka.batch import iter_batches
from raftmeta.records.kafka.frames import batch_records
from raftmeta.records.kafka.mapping import from_kafka_batches, to_kafka_log
from raftmeta.records.kafka.message import Struct


def test_the_two_logs_hold_the_same_partitions() -> None:
    kafka_data, count = kafka_log(2, 5, 4)
    ours = [r for batch in codec.iter_batches(raftmeta_log(2, 5, 4)) for r in decode_records(batch.data)]
    theirs = [r for _, batch in iter_batches(kafka_data) for _, r in batch_records(batch)]
    assert count == len(ours) == len(theirs) == 12
    for mine, kafkas in zip(ours, theirs, strict=True):
        assert isinstance(kafkas.data, Struct)
        if mine.WhichOneof("record") == "topic":
            assert (kafkas.name, kafkas.data["Name"]) == ("TopicRecord", mine.topic.name)
            continue
        assert kafkas.name == "PartitionRecord"
        assert (mine.partition.partition_id, list(mine.partition.replicas), mine.partition.leader) == (
            kafkas.data["PartitionId"], list(kafkas.data["Replicas"]), kafkas.data["Leader"],  # type: ignore[call-overload]
        )  # fmt: skip


def test_bench_kafka_format_small(tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    args = ["bench", "kafka-format", "--topics", "2", "--partitions", "10", "--repeats", "1", "--out", str(out)]
    result = CliRunner().invoke(cli, [*args, "--output", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert json.loads(out.read_text()) == doc
    assert doc["records"] == 22
    for side in ("kafka", "mapped", "raftmeta"):
        assert doc[side]["encode_us"] > 0 and doc[side]["decode_us"] > 0 and doc[side]["bytes_per_record"] > 0
    assert doc["mapped"]["read_us"] > 0 and doc["mapped"]["export_us"] > 0
    assert set(doc["ratio"]) == {"encode", "decode", "mapped_encode", "mapped_decode"}


def test_the_mapped_log_is_the_generic_writers_and_maps_back_to_raftmetas() -> None:
    """The fast path's log is byte for byte the field tables' (kafka_log without directories), and
    it maps back to raftmeta's own log of the same partitions, record for record."""
    mapped = mapped_log(2, 5, 4)
    ours = [r for batch in codec.iter_batches(raftmeta_log(2, 5, 4)) for r in batch.records()]
    back = [r for batch in codec.iter_batches(from_kafka_batches(mapped)) for r in batch.records()]
    assert back == ours
    assert to_kafka_log(raftmeta_log(2, 5, 4)) == mapped
