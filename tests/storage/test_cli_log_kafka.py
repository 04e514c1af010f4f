"""``raftmeta log dump`` of a real KRaft node's metadata log directory, unchanged: the format is
recognised, every batch and record is shown line for line as Kafka's own kafka-dump-log shows it
(tests/records/kafka/data), damage is reported by file, byte and offset, and a file in neither
format is refused naming what it holds."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from raftmeta.cli.main import cli
from raftmeta.records.kafka.batch import Record, RecordBatch, encode_batch
from raftmeta.records.kafka.frames import encode_metadata, metadata_record, new_batch
from raftmeta.records.kafka.schema import Uuid

DATA = Path(__file__).parent.parent / "records" / "kafka" / "data"
SEGMENT = "00000000000000000000.log"
SNAPSHOT = "00000000000000000157-0000000001.checkpoint"
BOOTSTRAP_SNAPSHOT = "00000000000000000000-0000000000.checkpoint"
QUORUM_STATE = (
    '{"leaderId":3001,"leaderEpoch":1,"votedId":3001,"votedDirectoryId":"a4zOLZ4tQfy4O7kcAEc_2w","data_version":1}'
)


@pytest.fixture
def kafka_node(tmp_path: Path) -> Path:
    """A KRaft controller's data dir as Kafka leaves it (log.dirs with meta.properties, and the
    metadata log directory with its segment, snapshots and quorum-state)."""
    data_dir = tmp_path / "controller-3001" / "data"
    log_dir = data_dir / "__cluster_metadata-0"
    log_dir.mkdir(parents=True)
    for name in (SEGMENT, SNAPSHOT, BOOTSTRAP_SNAPSHOT):
        shutil.copy(DATA / name, log_dir / name)
    (log_dir / "quorum-state").write_text(QUORUM_STATE)
    (log_dir / "partition.metadata").write_text("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ\n")
    (data_dir / "meta.properties").write_text(
        "node.id=3001\ndirectory.id=a4zOLZ4tQfy4O7kcAEc_2w\nversion=1\ncluster.id=2rOLVLzmSySQ5_IekEi4Rg\n"
    )
    return data_dir


def dump(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["log", "dump", *args])
    return result.exit_code, result.output


def kafka_lines(file_name: str) -> list[str]:
    """The batch and record lines kafka-dump-log printed for one file."""
    lines: list[str] = []
    current = None
    for line in (DATA / "kafka-dump-log.txt").read_text().splitlines():
        if line.startswith("Dumping "):
            current = line.removeprefix("Dumping ")
        elif current == file_name and line.startswith(("baseOffset: ", "| offset: ")):
            lines.append(line)
    return lines


def test_a_kraft_nodes_data_dir_is_dumped_line_for_line_as_kafka_dump_log_shows_it(kafka_node: Path) -> None:
    code, out = dump("--data-dir", str(kafka_node))
    assert code == 0, out
    shown = [line for line in out.splitlines() if line.startswith(("baseOffset: ", "| offset: "))]
    assert shown == kafka_lines(SEGMENT)
    assert f"snapshots: {BOOTSTRAP_SNAPSHOT}, {SNAPSHOT}" in out
    assert out.splitlines()[-1] == "110 batches, 157 records, 12272 bytes, 0 corruptions"

    code, out = dump("--data-dir", str(kafka_node), "--output", "json")
    doc = json.loads(out)
    assert (code, doc["format"], doc["gap"]) == (0, "kafka", None)
    assert doc["meta"] == {"cluster_id": "2rOLVLzmSySQ5_IekEi4Rg", "node_id": 3001}
    assert doc["quorum_state"] == json.loads(QUORUM_STATE)
    first = doc["batches"][0]
    assert (first["base_offset"], first["count"], first["control"], first["crc_ok"]) == (0, 3, True, True)
    assert first["records"][0]["label"] == "LeaderChange"
    assert first["records"][0]["payload"]["leaderId"] == 3001


def test_a_kraft_snapshot_is_dumped_as_kafka_dump_log_shows_it_and_checked_whole(kafka_node: Path) -> None:
    snapshot = kafka_node / "__cluster_metadata-0" / SNAPSHOT
    code, out = dump("--snapshot", str(snapshot))
    assert code == 0, out
    assert [line for line in out.splitlines() if line.startswith(("baseOffset: ", "| offset: "))] == kafka_lines(
        SNAPSHOT
    )
    doc = json.loads(dump("--snapshot", str(snapshot), "--output", "json")[1])
    assert (doc["valid"], doc["image_records"], doc["snapshot_id"]) == (True, 18, {"offset": 157, "epoch": 1})

    # Without its footer batch a snapshot is unfinished: Kafka would not load it either.
    unfinished = snapshot.parent / "00000000000000000160-0000000001.checkpoint"
    unfinished.write_bytes(snapshot.read_bytes()[:-75])
    code, out = dump("--snapshot", str(unfinished), "--output", "json")
    doc = json.loads(out)
    assert (code, doc["valid"]) == (1, False)
    assert doc["error"] == "it does not end with a SnapshotFooter control record (an unfinished snapshot)"


def test_damage_in_a_kraft_log_is_reported_by_file_byte_and_offset(kafka_node: Path) -> None:
    segment = kafka_node / "__cluster_metadata-0" / SEGMENT
    data = bytearray(segment.read_bytes())
    data[292 + 40] ^= 0x01  # the max timestamp of the second batch (bytes 292-621, offsets 3-11)
    segment.write_bytes(bytes(data))
    code, out = dump("--data-dir", str(kafka_node))
    assert code == 1
    assert f"CORRUPT {segment} at byte 292 (offset 3): CRC32C mismatch (stored " in out
    assert "isvalid: false" in out
    assert out.splitlines()[-1] == "110 batches, 157 records, 12272 bytes, 1 corruptions"


def test_a_crc_valid_batch_whose_record_does_not_decode_is_reported_naming_offset_and_field(tmp_path: Path) -> None:
    topic = metadata_record("TopicRecord", Name="orders", TopicId=Uuid(bytes(16)))
    good = encode_batch(new_batch(0, 1, [topic], 1_700_000_000_000))
    # The same record with its TopicId cut short, in a batch whose CRC is right for the bytes.
    cut = RecordBatch(1, 1, 0, 0, 1_700_000_000_000, 1_700_000_000_000, -1, -1, -1,
                      (Record(0, 0, None, encode_metadata(topic)[:-5]),))  # fmt: skip
    segment = tmp_path / SEGMENT
    segment.write_bytes(good + encode_batch(cut))
    code, out = dump("--files", str(segment))
    assert code == 1
    assert (
        f"CORRUPT {segment} at byte {len(good)} (offset 1): record at offset 1: TopicRecord.TopicId: needs 16 "
        "bytes, 12 left (byte 10 of its value)"
    ) in out
    assert "| records unreadable: a record does not decode" in out


def test_a_file_in_neither_format_is_refused_naming_what_it_holds(tmp_path: Path, kafka_node: Path) -> None:
    segment = tmp_path / SEGMENT
    segment.write_bytes(bytes(16) + b"\x07" + bytes(60))
    code, out = dump("--files", str(segment))
    assert code == 2
    assert "its first batch's magic byte (byte 16) is 7: neither raftmeta's log format (magic 1) nor" in out
    assert "refusing to read it" in out
    # A raftmeta segment among Kafka's: refused, never read half one way.
    log_dir = kafka_node / "__cluster_metadata-0"
    raftmeta_segment = bytearray((log_dir / SEGMENT).read_bytes()[:72])
    raftmeta_segment[16] = 1
    (log_dir / "00000000000000000200.log").write_bytes(bytes(raftmeta_segment))
    code, out = dump("--data-dir", str(kafka_node))
    assert code == 2
    assert "the files mix raftmeta's and Kafka's log formats" in out


def test_from_offset_and_no_records_work_on_a_kraft_log_as_on_raftmetas(kafka_node: Path) -> None:
    code, out = dump("--data-dir", str(kafka_node), "--from-offset", "150", "--output", "json")
    doc = json.loads(out)
    assert code == 0
    assert doc["batches"][0]["base_offset"] <= 150 <= doc["batches"][0]["last_offset"]
    assert all(b["last_offset"] >= 150 for b in doc["batches"])
    code, out = dump("--data-dir", str(kafka_node), "--no-records")
    assert code == 0
    assert "| offset:" not in out
    first = next(line for line in out.splitlines() if line.startswith("baseOffset: "))
    assert first == (
        "baseOffset: 0 lastOffset: 2 count: 3 partitionLeaderEpoch: 1 isControl: true position: 0 "
        "CreateTime: 1795946224824 size: 292 crc: 150471233 isvalid: true"
    )
