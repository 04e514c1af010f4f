"""``raftmeta log export --format kafka``: a raftmeta node's log and snapshots written as a Kafka
``__cluster_metadata-0`` directory -- the same offsets, names and records (``raftmeta log dump``
shows the exported dir's records as the native one's), Kafka's bootstrap snapshot first -- and
every refusal named with nothing left written. Kafka's own tools read the export in
tests/kraft/test_export_kafka_tools.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from raftmeta.cli.main import cli
from raftmeta.raft.types import QuorumStateData
from raftmeta.records import codec
from raftmeta.records.kafka.batch import iter_batches
from raftmeta.records.kafka.frames import batch_records
from raftmeta.records.kafka.mapping import METADATA_VERSION
from raftmeta.records.kafka.message import Struct
from raftmeta.storage.quorum_state import QuorumStateFile
from raftmeta.storage.snapshot import SnapshotId, encode_snapshot
from raftmeta.v1 import records_pb2 as r

TOPIC_ID = bytes(range(1, 17))
VOTERS = r.VotersRecord(
    voters=[
        r.VoterEntry(
            voter_id=i,
            directory_id=bytes([i]) * 16,
            endpoints=[r.VoterEndpoint(name="CONTROLLER", host="127.0.0.1", port=9000 + i)],
            max_supported_version=1,
        )
        for i in (1, 2, 3)
    ]
)
# (records, control) of each batch: what a node's log holds after registrations, a create, a
# partition change, a fence and an idle leader's no-op.
BATCHES: list[tuple[list[r.MetadataRecord], bool]] = [
    (
        [
            r.MetadataRecord(
                leader_change=r.LeaderChangeRecord(
                    leader_id=1, leader_epoch=1, voters=[r.Voter(voter_id=i) for i in (1, 2, 3)]
                )
            ),
            r.MetadataRecord(voters=VOTERS),
        ],
        True,
    ),
    (
        [
            r.MetadataRecord(
                register_broker=r.RegisterBrokerRecord(
                    broker_id=b,
                    incarnation_id=bytes([b + 50]) * 16,
                    broker_epoch=b + 1,
                    rack=f"rack-{b}",
                    pool="blue",
                    endpoints=[r.BrokerEndpoint(name="PLAINTEXT", host="127.0.0.1", port=9100 + b)],
                    fenced=True,
                )
            )
            for b in (0, 1, 2)
        ],
        False,
    ),
    (
        [r.MetadataRecord(unfence_broker=r.UnfenceBrokerRecord(broker_id=b, broker_epoch=b + 1)) for b in (0, 1, 2)],
        False,
    ),
    (
        [r.MetadataRecord(topic=r.TopicRecord(name="t1", topic_id=TOPIC_ID))]
        + [
            r.MetadataRecord(
                partition=r.PartitionRecord(
                    topic_id=TOPIC_ID, partition_id=p, replicas=[p, (p + 1) % 3], isr=[p, (p + 1) % 3], leader=p
                )
            )
            for p in range(3)
        ]
        + [
            r.MetadataRecord(
                config=r.ConfigRecord(
                    resource_type=r.CONFIG_RESOURCE_TYPE_TOPIC, resource_name="t1", name="retention.ms", value="1"
                )
            ),
            r.MetadataRecord(request=r.RequestRecord(request_id="req-1", method="CreateTopics", response=b"\x01")),
        ],
        False,
    ),
    (
        [
            r.MetadataRecord(
                partition_change=r.PartitionChangeRecord(
                    topic_id=TOPIC_ID, partition_id=0, isr=r.BrokerIdList(ids=[0]), leader_epoch=0, partition_epoch=1
                )
            )
        ],
        False,
    ),
    ([r.MetadataRecord(fence_broker=r.FenceBrokerRecord(broker_id=2, broker_epoch=3))], False),
    ([r.MetadataRecord(no_op=r.NoOpRecord())], False),
]
END_OFFSET = sum(len(records) for records, _ in BATCHES)
SNAPSHOT = SnapshotId(END_OFFSET, 1)


@pytest.fixture
def node_dir(tmp_path: Path) -> Path:
    """A raftmeta node's data dir: meta.properties, quorum-state, one segment and one snapshot."""
    data_dir = tmp_path / "node-1"
    log_dir = data_dir / "__cluster_metadata-0"
    log_dir.mkdir(parents=True)
    (data_dir / "meta.properties").write_text("version=1\ncluster.id=abc\nnode.id=1\n")
    QuorumStateFile(data_dir).write(QuorumStateData(epoch=1, leader_id=1, voted_id=1))
    offset = 0
    data = []
    for records, control in BATCHES:
        raw = [record.SerializeToString() for record in records]
        data.append(codec.encode_batch(offset, 1, raw, 1_700_000_000_000 + offset, control=control))
        offset += len(records)
    (log_dir / f"{0:020d}.log").write_bytes(b"".join(data))
    image = [
        record.SerializeToString()
        for records, control in BATCHES
        if not control
        for record in records
        if record.WhichOneof("record") in ("register_broker", "topic", "partition", "config")
    ]
    snapshot = encode_snapshot(
        SNAPSHOT,
        image,
        last_contained_log_timestamp_ms=1_700_000_000_000,
        append_timestamp_ms=1_700_000_001_000,
        voters=VOTERS,
    )
    (log_dir / SNAPSHOT.file_name).write_bytes(b"".join(snapshot))
    return data_dir


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["log", *args])
    return result.exit_code, result.output


def dump_json(data_dir: Path) -> dict[str, Any]:
    code, output = run("dump", "--data-dir", str(data_dir), "--output", "json")
    assert code == 0, output
    document: dict[str, Any] = json.loads(output)
    return document


def test_the_export_keeps_names_offsets_and_records_and_adds_kafkas_bootstrap_snapshot(
    node_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "kafka"
    code, output = run("export", "--format", "kafka", str(node_dir), str(out), "--output", "json")
    assert code == 0, output
    document = json.loads(output)
    assert (document["batches"], document["records"]) == (len(BATCHES), END_OFFSET)
    log_dir = out / "__cluster_metadata-0"
    assert sorted(p.name for p in log_dir.iterdir()) == sorted(
        [
            f"{0:020d}.log",
            SNAPSHOT.file_name,
            "00000000000000000000-0000000000.checkpoint",
            "quorum-state",
            "partition.metadata",
        ]
    )
    assert (out / "meta.properties").read_text() == (node_dir / "meta.properties").read_text()
    assert json.loads((log_dir / "quorum-state").read_text()) == {
        "leaderId": 1, "leaderEpoch": 1, "votedId": 1, "votedDirectoryId": "AAAAAAAAAAAAAAAAAAAAAA", "data_version": 1,
    }  # fmt: skip
    # Every batch of the segment in Kafka's format, control runs as control batches, the same offsets.
    batches = [b for _, b in iter_batches((log_dir / f"{0:020d}.log").read_bytes())]
    assert [(b.base_offset, b.is_control) for b in batches] == [
        (sum(len(x) for x, _ in BATCHES[:i]), control) for i, (_, control) in enumerate(BATCHES)
    ]
    # The bootstrap snapshot holds metadata.version.
    boot = [
        rec
        for _, b in iter_batches((log_dir / "00000000000000000000-0000000000.checkpoint").read_bytes())
        for _, rec in batch_records(b)
    ]
    feature = next(rec for rec in boot if rec.name == "FeatureLevelRecord")
    assert isinstance(feature.data, Struct)
    assert feature.data["FeatureLevel"] == METADATA_VERSION
    # raftmeta's log dump shows the exported dir's records as the native dir's, offset for offset.
    native = dump_json(node_dir)
    exported = dump_json(out)
    assert exported["format"] == "kafka"
    native_records = {
        rec["offset"]: {"type": rec["type"], "fields": rec["fields"]} for b in native["batches"] for rec in b["records"]
    }
    exported_records = {rec["offset"]: rec.get("raftmeta") for b in exported["batches"] for rec in b["records"]}
    assert exported_records == native_records


def test_the_exported_snapshot_is_whole_for_raftmetas_kafka_reader(node_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "kafka"
    assert run("export", "--format", "kafka", str(node_dir), str(out))[0] == 0
    code, output = run("dump", "--snapshot", str(out / "__cluster_metadata-0" / SNAPSHOT.file_name), "--output", "json")
    assert code == 0, output
    document = json.loads(output)
    assert document["valid"] is True
    image = [
        rec["raftmeta"]["type"]
        for b in document["batches"]
        if not b["control"]
        for rec in b["records"]
        if "raftmeta" in rec
    ]
    # metadata.version first: the node's snapshot holds none, so the export adds Kafka's bootstrap one.
    assert image == ["feature_level"] + ["register_broker"] * 3 + ["topic"] + ["partition"] * 3 + ["config"]


def test_an_output_dir_that_holds_anything_is_refused_and_left_alone(node_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "kafka"
    out.mkdir()
    (out / "mine.txt").write_text("keep me")
    code, output = run("export", "--format", "kafka", str(node_dir), str(out))
    assert code == 1
    assert "is not an empty directory" in output
    assert [p.name for p in out.iterdir()] == ["mine.txt"]


def test_a_damaged_log_is_refused_naming_file_byte_and_offset_and_nothing_is_written(
    node_dir: Path, tmp_path: Path
) -> None:
    segment = node_dir / "__cluster_metadata-0" / f"{0:020d}.log"
    data = bytearray(segment.read_bytes())
    second = codec.decode_header(bytes(data)).size_bytes  # the second batch starts here
    data[second + 40] ^= 0xFF
    segment.write_bytes(bytes(data))
    out = tmp_path / "kafka"
    code, output = run("export", "--format", "kafka", str(node_dir), str(out))
    assert code == 1
    assert f"at byte {second} (offset 2)" in output and "CRC32C mismatch" in output
    assert not out.exists()


def test_a_kafka_format_dir_is_refused_by_name(node_dir: Path, tmp_path: Path) -> None:
    first = tmp_path / "first"
    assert run("export", "--format", "kafka", str(node_dir), str(first))[0] == 0
    code, output = run("export", "--format", "kafka", str(first), str(tmp_path / "second"))
    assert code == 1
    assert "in Kafka's format already" in output
    assert not (tmp_path / "second").exists()


def test_a_record_kafka_cannot_hold_is_refused_naming_file_and_offset(node_dir: Path, tmp_path: Path) -> None:
    log_dir = node_dir / "__cluster_metadata-0"
    shutil.rmtree(log_dir)
    log_dir.mkdir()
    bad = r.MetadataRecord(topic=r.TopicRecord(name="t", topic_id=b"not-16"))
    (log_dir / f"{0:020d}.log").write_bytes(codec.encode_batch(0, 1, [bad.SerializeToString()], 0))
    out = tmp_path / "kafka"
    code, output = run("export", "--format", "kafka", str(node_dir), str(out))
    assert code == 1
    assert "record at offset 0: TopicRecord.topic_id: a Kafka Uuid is 16 bytes, this one 6" in output
    assert not out.exists()
