"""``raftmeta log dump``: batches and decoded records, snapshots, and damage reported not raised."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from raftmeta.api.ids import uuid_to_str
from raftmeta.cli.main import cli
from raftmeta.raft import QuorumStateData
from raftmeta.records import codec
from raftmeta.storage.datadir import NodeStorage, log_dir
from raftmeta.storage.snapshot import SnapshotId
from raftmeta.v1 import records_pb2 as r

TOPIC_ID = bytes(range(16))


def leader_change(epoch: int) -> bytes:
    return r.MetadataRecord(
        leader_change=r.LeaderChangeRecord(leader_id=1, leader_epoch=epoch, voters=[r.Voter(voter_id=1)])
    ).SerializeToString()


def topic(i: int) -> list[bytes]:
    return [
        r.MetadataRecord(topic=r.TopicRecord(name=f"t{i}", topic_id=TOPIC_ID)).SerializeToString(),
        r.MetadataRecord(
            partition=r.PartitionRecord(topic_id=TOPIC_ID, partition_id=0, replicas=[1, 2], isr=[1, 2], leader=1)
        ).SerializeToString(),
    ]


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    node = NodeStorage.open(tmp_path / "node-1", cluster_id="c1", node_id=1, segment_bytes=2048)
    node.write_quorum_state(QuorumStateData(epoch=2, voted_id=1, leader_id=1, voters=(1, 2, 3)))
    node.log.append_batch(2, [leader_change(2)], 1_700_000_000_000, control=True)
    for i in range(40):
        node.log.append_batch(2, topic(i), 1_700_000_000_000 + i)
    node.log.flush()
    node.checkpoint_high_watermark(81)
    node.take_snapshot(
        SnapshotId(41, 2), [b"".join(topic(0)[:1])], last_contained_log_timestamp_ms=7, append_timestamp_ms=8
    )
    node.close()
    return tmp_path / "node-1"


def dump(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["log", "dump", *args])
    return result.exit_code, result.stdout


def test_dump_json_lists_every_batch_and_record(data_dir: Path) -> None:
    code, out = dump("--data-dir", str(data_dir), "--output", "json")
    assert code == 0
    doc = json.loads(out)
    assert doc["meta"] == {"cluster_id": "c1", "node_id": 1}
    assert doc["quorum_state"] == {"epoch": 2, "voted_id": 1, "leader_id": 1, "voters": [1, 2, 3]}
    assert doc["high_watermark"] == 81
    assert doc["snapshots"] == ["00000000000000000041-0000000002.checkpoint"]
    batches = doc["batches"]
    first_base = batches[0]["base_offset"]
    assert first_base <= 41, "segments wholly below the snapshot are gone, the rest is dumped"
    assert batches[-1]["last_offset"] == 80
    assert all(b["crc_ok"] for b in batches)
    assert doc["summary"]["records"] == 81 - first_base
    assert doc["corruptions"] == []
    some = next(b for b in batches if b["base_offset"] == 41)
    assert (some["count"], some["epoch"], some["control"]) == (2, 2, False)
    assert some["records"][0] == {
        "offset": 41,
        "type": "topic",
        "fields": {"name": "t20", "topic_id": uuid_to_str(bytes(range(16)))},
    }
    partition = some["records"][1]["fields"]
    assert partition["replicas"] == [1, 2] and partition["leader"] == 1 and partition["leader_epoch"] == 0


def test_dump_text_and_from_offset(data_dir: Path) -> None:
    code, out = dump("--data-dir", str(data_dir), "--from-offset", "75")
    assert code == 0
    assert "base_offset: 75 last_offset: 76 count: 2 epoch: 2" in out
    assert "base_offset: 73 " not in out
    assert "| offset: 77 topic: " in out
    assert "crc_ok: true" in out


def test_dump_snapshot(data_dir: Path) -> None:
    snapshot = log_dir(data_dir) / "00000000000000000041-0000000002.checkpoint"
    code, out = dump("--snapshot", str(snapshot), "-o", "json")
    assert code == 0
    doc = json.loads(out)
    assert doc["valid"] is True
    assert doc["snapshot_id"] == {"offset": 41, "epoch": 2}
    assert [b["records"][0]["type"] for b in doc["batches"]] == ["snapshot_header", "topic", "snapshot_footer"]
    assert doc["batches"][0]["records"][0]["fields"]["last_contained_log_timestamp_ms"] == 7


def test_dump_reports_corruption_where_found(data_dir: Path) -> None:
    segment = sorted(log_dir(data_dir).glob("*.log"))[-1]
    data = bytearray(segment.read_bytes())
    data[150] ^= 0x01  # inside the second batch of the segment: a CRC failure
    data += b"\x00\x00\x00"  # and a torn tail
    segment.write_bytes(data)
    code, out = dump("--data-dir", str(data_dir), "-o", "json")
    assert code == 1
    doc = json.loads(out)
    reasons = [c["reason"] for c in doc["corruptions"]]
    assert len(reasons) == 2
    assert "CRC32C mismatch" in reasons[0]
    assert doc["corruptions"][0]["file"] == str(segment)
    assert doc["corruptions"][1]["position"] == len(data) - 3
    assert [c["torn_tail"] for c in doc["corruptions"]] == [False, True]
    bad = [b for b in doc["batches"] if not b["crc_ok"]]
    assert len(bad) == 1 and bad[0]["file"] == str(segment)
    code, text = dump("--data-dir", str(data_dir))
    assert code == 1
    assert f"CORRUPT {segment} at byte " in text


def test_a_torn_tail_alone_is_reported_but_does_not_fail(data_dir: Path) -> None:
    node = NodeStorage.open(data_dir, cluster_id="c1", node_id=1, segment_bytes=2048)
    for i in range(40):
        node.log.append_batch(2, topic(100 + i), 0)
    end = node.log.log_end_offset
    node.close()
    segment = sorted(log_dir(data_dir).glob("*.log"))[-1]
    size = segment.stat().st_size
    partial = codec.encode_batch(end, 2, topic(99), 0)[:20]
    with segment.open("ab") as f:
        f.write(partial)  # a write in progress
    code, out = dump("--data-dir", str(data_dir))
    assert code == 0
    assert f"TORN TAIL {segment} at byte {size}" in out
    first = sorted(log_dir(data_dir).glob("*.log"))[0]
    assert first != segment
    with first.open("ab") as f:  # the same bytes at the end of a sealed segment are damage
        f.write(partial)
    code, out = dump("--data-dir", str(data_dir))
    assert code == 1
    assert f"CORRUPT {first}" in out


def test_dump_damaged_snapshot(data_dir: Path) -> None:
    snapshot = log_dir(data_dir) / "00000000000000000041-0000000002.checkpoint"
    snapshot.write_bytes(snapshot.read_bytes()[:-5])
    code, out = dump("--snapshot", str(snapshot))
    assert code == 1
    assert "INVALID snapshot" in out
    assert "CORRUPT" in out


def test_dump_usage_errors(tmp_path: Path) -> None:
    assert dump()[0] == 2
    assert dump("--data-dir", str(tmp_path))[0] == 2
    assert dump("--data-dir", str(tmp_path / "missing"))[0] == 2


def test_dump_files_reads_one_segment_as_kafka_dump_log_does(data_dir: Path) -> None:
    segments = sorted((data_dir / "__cluster_metadata-0").glob("*.log"))
    code, out = dump("--files", str(segments[-1]), "--output", "json")
    assert code == 0
    doc = json.loads(out)
    assert doc["files"] == [str(segments[-1])]
    base = int(segments[-1].name.split(".")[0])
    assert doc["batches"] and doc["batches"][0]["base_offset"] == base
    assert "quorum_state" not in doc, "a file alone has no node state"


def test_dump_data_dir_given_a_file_points_to_files(data_dir: Path) -> None:
    segment = next((data_dir / "__cluster_metadata-0").glob("*.log"))
    result = CliRunner().invoke(cli, ["log", "dump", "--data-dir", str(segment)])
    assert result.exit_code == 2
    assert f"--files {segment}" in result.output
