"""meta.properties, quorum-state and the high-watermark checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from raftmeta.raft import VOTE_UNKNOWN, QuorumStateData
from raftmeta.raft.voters import format_directory_id, parse_directory_id
from raftmeta.storage.checksummed_json import checksum
from raftmeta.storage.errors import DataDirMismatchError, InvalidFileError
from raftmeta.storage.fileio import atomic_write
from raftmeta.storage.high_watermark import HIGH_WATERMARK_CHECKPOINT, HighWatermarkCheckpoint, read_high_watermark
from raftmeta.storage.meta_properties import ensure_meta_properties, read_meta_properties
from raftmeta.storage.quorum_state import QuorumStateFile, VoterSetMismatchError, check_voters


def test_meta_properties_created_then_checked(tmp_path: Path) -> None:
    data_dir = tmp_path / "node-1"
    assert read_meta_properties(data_dir) is None
    meta = ensure_meta_properties(data_dir, "cluster-A", 1)
    assert (meta.cluster_id, meta.node_id) == ("cluster-A", 1)
    text = (data_dir / "meta.properties").read_text()
    assert "cluster.id=cluster-A" in text and "node.id=1" in text and "version=1" in text
    assert ensure_meta_properties(data_dir, "cluster-A", 1) == meta


def test_meta_properties_refuses_another_cluster_or_node(tmp_path: Path) -> None:
    ensure_meta_properties(tmp_path, "cluster-A", 1)
    with pytest.raises(DataDirMismatchError, match=r"belongs to cluster 'cluster-A', not 'cluster-B'"):
        ensure_meta_properties(tmp_path, "cluster-B", 1)
    with pytest.raises(DataDirMismatchError, match="belongs to node 1, not node 2"):
        ensure_meta_properties(tmp_path, "cluster-A", 2)


def test_meta_properties_damage_is_refused(tmp_path: Path) -> None:
    (tmp_path / "meta.properties").write_text("version=1\ncluster.id=x\nnode.id=one\n")
    with pytest.raises(InvalidFileError, match=r"node\.id is not an integer"):
        read_meta_properties(tmp_path)
    (tmp_path / "meta.properties").write_text("version=1\nnode.id=1\n")
    with pytest.raises(InvalidFileError, match=r"missing cluster\.id"):
        read_meta_properties(tmp_path)


def test_each_data_dir_gets_its_own_directory_id_in_kafkas_uuid_form(tmp_path: Path) -> None:
    first = ensure_meta_properties(tmp_path / "a", "cluster-A", 1)
    assert len(first.directory_id) == 16
    text = (tmp_path / "a" / "meta.properties").read_text()
    assert f"directory.id={format_directory_id(first.directory_id)}" in text
    assert ensure_meta_properties(tmp_path / "a", "cluster-A", 1).directory_id == first.directory_id
    # A wiped disk is a new directory: the same node id comes back as another replica.
    assert ensure_meta_properties(tmp_path / "b", "cluster-A", 1).directory_id != first.directory_id
    # Kafka's Uuid.toString: 22 characters of url-safe base64.
    raw = bytes(range(16))
    assert format_directory_id(raw) == "AAECAwQFBgcICQoLDA0ODw"
    assert parse_directory_id("AAECAwQFBgcICQoLDA0ODw") == raw


def test_a_data_dir_without_a_directory_id_gets_one_on_its_next_start(tmp_path: Path) -> None:
    (tmp_path / "meta.properties").write_text("version=1\ncluster.id=x\nnode.id=1\n")
    assert read_meta_properties(tmp_path).directory_id == b""  # type: ignore[union-attr]
    meta = ensure_meta_properties(tmp_path, "x", 1, directory_id=lambda: b"\x07" * 16)
    assert meta.directory_id == b"\x07" * 16
    assert read_meta_properties(tmp_path) == meta


def test_a_damaged_directory_id_is_refused(tmp_path: Path) -> None:
    (tmp_path / "meta.properties").write_text("version=1\ncluster.id=x\nnode.id=1\ndirectory.id=short\n")
    with pytest.raises(InvalidFileError, match="directory id 'short'"):
        read_meta_properties(tmp_path)


def test_quorum_state_round_trip(tmp_path: Path) -> None:
    qs = QuorumStateFile(tmp_path)
    assert qs.read() is None
    state = QuorumStateData(epoch=5, voted_id=2, leader_id=-1, voters=(1, 2, 3))
    qs.write(state)
    assert qs.read() == state
    doc = json.loads((tmp_path / "quorum-state").read_text())
    assert doc == {
        "data_version": 1,
        "epoch": 5,
        "voted_id": 2,
        "leader_id": -1,
        "voters": [1, 2, 3],
        "crc32c": checksum({k: v for k, v in doc.items() if k != "crc32c"}),
    }
    newer = QuorumStateData(epoch=6, leader_id=3, voters=(1, 2, 3))
    qs.write(newer)
    assert QuorumStateFile(tmp_path).read() == newer
    assert not (tmp_path / "quorum-state.tmp").exists()


@pytest.mark.parametrize(
    ("content", "names"),
    [
        ("{not json", "not JSON"),
        ('{"data_version": 0, "epoch": 1, "voted_id": 2, "voters": [1, 2]}', "field 'leader_id' is missing"),
        ('{"data_version": 9, "epoch": 1, "voted_id": 2, "leader_id": 1, "voters": []}', "data_version 9"),
        ('{"data_version": 0, "epoch": -1, "voted_id": 2, "leader_id": 1, "voters": [1, 2]}', "epoch -1"),
        ('{"data_version": 0, "epoch": "1", "voted_id": 2, "leader_id": 1, "voters": []}', "field 'epoch'"),
        ('{"data_version": 0, "epoch": 1, "voted_id": 2, "leader_id": 1, "voters": ["a"]}', "field 'voters'"),
        ('{"data_version": 0, "epoch": 1, "voted_id": 8, "leader_id": -1, "voters": [1, 2, 3]}', "voted_id 8"),
        ('{"data_version": 0, "epoch": 1, "voted_id": -1, "leader_id": 4, "voters": [1, 2, 3]}', "leader_id 4"),
        ('{"data_version": 0, "epoch": 1, "voted_id": -3, "leader_id": -1, "voters": [1, 2, 3]}', "voted_id -3"),
        ('{"data_version": 0, "epoch": 1, "voted_id": -1, "leader_id": -1, "voters": [1, 1]}', "distinct"),
        ('{"data_version": 1, "epoch": 1, "voted_id": 2, "leader_id": 1, "voters": [1, 2]}', "field 'crc32c'"),
        ("[]", "not a JSON object"),
    ],
)
def test_quorum_state_damage_is_refused_naming_the_field(tmp_path: Path, content: str, names: str) -> None:
    (tmp_path / "quorum-state").write_text(content)
    with pytest.raises(InvalidFileError, match="quorum-state") as caught:
        QuorumStateFile(tmp_path).read()
    assert names in caught.value.reason


def test_quorum_state_checksum_catches_a_changed_value(tmp_path: Path) -> None:
    """A flipped digit (a bit flip, a hand edit) is a valid-looking document: only the checksum
    can tell. 5 -> 7 keeps every field legal."""
    qs = QuorumStateFile(tmp_path)
    qs.write(QuorumStateData(epoch=5, voted_id=2, voters=(1, 2, 3)))
    path = tmp_path / "quorum-state"
    path.write_text(path.read_text().replace('"epoch": 5', '"epoch": 7'))
    with pytest.raises(InvalidFileError, match="checksum mismatch"):
        qs.read()


def test_quorum_state_legacy_version_0_is_read(tmp_path: Path) -> None:
    (tmp_path / "quorum-state").write_text(
        '{"data_version": 0, "epoch": 4, "voted_id": 3, "leader_id": 3, "voters": [1, 2, 3]}'
    )
    assert QuorumStateFile(tmp_path).read() == QuorumStateData(4, voted_id=3, leader_id=3, voters=(1, 2, 3))


def test_quorum_state_unknown_vote_round_trips(tmp_path: Path) -> None:
    qs = QuorumStateFile(tmp_path)
    qs.write(QuorumStateData(epoch=3, voted_id=VOTE_UNKNOWN, voters=(1, 2, 3)))
    assert qs.read() == QuorumStateData(epoch=3, voted_id=-2, voters=(1, 2, 3))


def test_configured_voters_must_match_the_file(tmp_path: Path) -> None:
    state = QuorumStateData(epoch=3, voters=(1, 2, 3))
    check_voters(tmp_path / "quorum-state", state, (3, 2, 1))
    with pytest.raises(VoterSetMismatchError, match=r"field 'voters' is \[1, 2, 3\].*voters \[1, 2, 4\]"):
        check_voters(tmp_path / "quorum-state", state, (1, 2, 4))


def test_atomic_write_leaves_old_or_new(tmp_path: Path) -> None:
    target = tmp_path / "f"
    atomic_write(target, b"old")
    # a crash after writing the temp file but before the rename leaves the old content
    (tmp_path / "f.tmp").write_bytes(b"half-writ")
    assert target.read_bytes() == b"old"
    atomic_write(target, b"new")
    assert target.read_bytes() == b"new"
    assert not (tmp_path / "f.tmp").exists()


def test_high_watermark_is_monotonic_and_clamped(tmp_path: Path) -> None:
    hw = HighWatermarkCheckpoint(tmp_path)
    assert hw.checkpointed == 0
    assert hw.write(100, durable_end_offset=40) == 40, "never above what the log can recover"
    assert hw.write(30, durable_end_offset=200) == 40, "never backwards"
    assert hw.write(150, durable_end_offset=200) == 150
    assert read_high_watermark(tmp_path) == 150
    assert HighWatermarkCheckpoint(tmp_path).checkpointed == 150
    hw.reset(20)
    assert read_high_watermark(tmp_path) == 20


def test_high_watermark_is_written_lazily(tmp_path: Path) -> None:
    hw = HighWatermarkCheckpoint(tmp_path, interval_ms=1000)
    assert hw.maybe_write(10, 10, now_ms=0) == 10
    assert hw.maybe_write(20, 20, now_ms=500) == 10, "within the interval: not written"
    assert read_high_watermark(tmp_path) == 10
    assert hw.maybe_write(30, 30, now_ms=1000) == 30
    assert read_high_watermark(tmp_path) == 30


@pytest.mark.parametrize(
    "content", ["", "{}", '{"version": 1, "high_watermark": -4}', '{"version": 2, "high_watermark": 4}']
)
def test_high_watermark_damage_is_refused(tmp_path: Path, content: str) -> None:
    (tmp_path / HIGH_WATERMARK_CHECKPOINT).write_text(content)
    with pytest.raises(InvalidFileError, match=HIGH_WATERMARK_CHECKPOINT):
        read_high_watermark(tmp_path)


def test_a_quorum_state_without_voters_may_name_any_node(tmp_path: Path) -> None:
    # KIP-853: the voter set is the log's and changes; an added voter (7) votes and leads. The file
    # lists no voters then, and nothing checks the ids against --voters.
    state = QuorumStateData(5, voted_id=7, leader_id=7)
    assert state.problem() is None
    quorum_state_file = QuorumStateFile(tmp_path)
    quorum_state_file.write(state)
    assert quorum_state_file.read() == state
    check_voters(quorum_state_file.path, state, (1, 2, 3))
    # A file written with a voter list (before voter changes) is still held to it.
    with pytest.raises(ValueError, match="voted_id 7 is not one of the voters"):
        QuorumStateData(5, voted_id=7, voters=(1, 2, 3))
