"""Snapshots: framing, validation, chunked transfer, pruning, and their effect on the log."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raftmeta.raft import QuorumStateData
from raftmeta.records import codec
from raftmeta.storage.datadir import NodeStorage, log_dir
from raftmeta.storage.errors import DataDirMismatchError, LogCorruptionError, SnapshotError
from raftmeta.storage.high_watermark import read_high_watermark
from raftmeta.storage.snapshot import (
    SnapshotId,
    SnapshotStore,
    decode_snapshot,
    encode_snapshot,
    parse_snapshot_name,
    read_snapshot,
)
from raftmeta.v1 import records_pb2

Records = Callable[[int, int], list[bytes]]


def test_snapshot_name() -> None:
    sid = SnapshotId(1234, 7)
    assert sid.file_name == "00000000000000001234-0000000007.checkpoint"
    assert parse_snapshot_name(sid.file_name) == sid
    assert parse_snapshot_name("00000000000000001234-0000000007.checkpoint.part") is None
    assert parse_snapshot_name("1234-7.checkpoint") is None


def test_write_and_read_back(tmp_path: Path, make_records: Records) -> None:
    store = SnapshotStore(tmp_path)
    records = make_records(0, 2500)
    path = store.write(SnapshotId(9000, 4), records, last_contained_log_timestamp_ms=77, append_timestamp_ms=88)
    snap = read_snapshot(path)
    assert snap.records == records
    assert snap.snapshot_id == SnapshotId(9000, 4)
    assert snap.last_contained_log_timestamp_ms == 77
    batches = list(codec.iter_batches(path.read_bytes()))
    assert batches[0].header.is_control and batches[-1].header.is_control
    assert [b.base_offset for b in batches] == [0, 1, 1001, 2001, 2501]
    assert {b.epoch for b in batches} == {4}
    first = records_pb2.MetadataRecord.FromString(batches[0].records()[0])
    last = records_pb2.MetadataRecord.FromString(batches[-1].records()[0])
    assert first.WhichOneof("record") == "snapshot_header"
    assert last.WhichOneof("record") == "snapshot_footer"


def test_a_snapshot_carries_its_voter_set_after_the_header(tmp_path: Path, make_records: Records) -> None:
    from raftmeta.raft.voters import VoterSet, voters_in_data

    store = SnapshotStore(tmp_path)
    voters = VoterSet.of_ids([1, 3, 4]).to_record()
    records = make_records(0, 10)
    path = store.write(
        SnapshotId(500, 3), records, last_contained_log_timestamp_ms=1, append_timestamp_ms=2, voters=voters
    )
    snap = read_snapshot(path)
    assert snap.voters == voters and snap.records == records
    # The consensus core finds it in the file's bytes (a snapshot fetched from the leader too).
    assert voters_in_data(path.read_bytes()) == VoterSet.of_ids([1, 3, 4])
    batches = list(codec.iter_batches(path.read_bytes()))
    assert [b.header.is_control for b in batches] == [True, True, False, True]
    # Only one control batch may sit between the header and the data, and only a voter set.
    assert store.write(SnapshotId(600, 3), records, last_contained_log_timestamp_ms=1, append_timestamp_ms=2).exists()
    assert read_snapshot(store.path(SnapshotId(600, 3))).voters is None


def test_empty_image_snapshot(tmp_path: Path) -> None:
    store = SnapshotStore(tmp_path)
    store.write(SnapshotId(0, 0), [], last_contained_log_timestamp_ms=0, append_timestamp_ms=0)
    assert store.read(SnapshotId(0, 0)).records == []


def test_every_bit_flip_and_truncation_is_detected(tmp_path: Path, make_records: Records) -> None:
    store = SnapshotStore(tmp_path)
    sid = SnapshotId(10, 2)
    path = store.write(sid, make_records(0, 3), last_contained_log_timestamp_ms=1, append_timestamp_ms=1)
    good = path.read_bytes()
    assert decode_snapshot(path, good, sid).records == make_records(0, 3)
    for cut in range(len(good)):
        with pytest.raises(SnapshotError):
            decode_snapshot(path, good[:cut], sid)
    for byte in range(len(good)):
        for bit in range(8):
            damaged = bytearray(good)
            damaged[byte] ^= 1 << bit
            with pytest.raises(SnapshotError):
                decode_snapshot(path, bytes(damaged), sid)
    path.write_bytes(good[:-1])
    with pytest.raises(SnapshotError, match=r"needs \d+ bytes"):
        read_snapshot(path)


def test_chunked_transfer(tmp_path: Path, make_records: Records) -> None:
    leader = SnapshotStore(tmp_path / "leader")
    sid = SnapshotId(500, 3)
    leader.write(sid, make_records(0, 700), last_contained_log_timestamp_ms=5, append_timestamp_ms=6)
    follower = SnapshotStore(tmp_path / "follower")
    writer = follower.chunk_writer(sid)
    with leader.reader(sid) as reader:
        position = 0
        while chunk := reader.read_chunk(position, 1000):
            position = writer.write_chunk(position, chunk)
        assert position == reader.size_bytes
    with pytest.raises(SnapshotError, match="expected byte"):
        writer.write_chunk(0, b"x")
    snap = writer.finish()
    assert snap.records == make_records(0, 700)
    assert follower.ids() == [sid]
    assert (tmp_path / "follower" / sid.file_name).read_bytes() == (tmp_path / "leader" / sid.file_name).read_bytes()


def test_chunked_transfer_of_damaged_bytes_is_refused(tmp_path: Path, make_records: Records) -> None:
    leader = SnapshotStore(tmp_path / "leader")
    sid = SnapshotId(50, 1)
    leader.write(sid, make_records(0, 10), last_contained_log_timestamp_ms=5, append_timestamp_ms=6)
    data = bytearray((tmp_path / "leader" / sid.file_name).read_bytes())
    data[100] ^= 1
    writer = SnapshotStore(tmp_path / "follower").chunk_writer(sid)
    writer.write_chunk(0, bytes(data[:60]))
    writer.write_chunk(60, bytes(data[60:]))
    with pytest.raises(SnapshotError, match="CRC32C"):
        writer.finish()
    assert list((tmp_path / "follower").iterdir()) == [], "nothing is left behind"


def test_prune_keeps_the_two_newest(tmp_path: Path) -> None:
    store = SnapshotStore(tmp_path)
    for offset in (10, 20, 30, 40):
        store.write(SnapshotId(offset, 1), [b"r"], last_contained_log_timestamp_ms=0, append_timestamp_ms=0)
    assert store.prune() == [SnapshotId(10, 1), SnapshotId(20, 1)]
    assert store.ids() == [SnapshotId(30, 1), SnapshotId(40, 1)]


def open_node(data_dir: Path, **kwargs: object) -> NodeStorage:
    options: dict[str, object] = {"cluster_id": "c1", "node_id": 1, "segment_bytes": 2048}
    options.update(kwargs)
    return NodeStorage.open(data_dir, **options)  # type: ignore[arg-type]


def fill(node: NodeStorage, make_records: Records, batches: int, epoch: int = 1) -> None:
    for _ in range(batches):
        node.log.append_batch(epoch, make_records(node.log.log_end_offset, 3), 0)
    node.log.flush()


def test_node_storage_layout_and_identity(tmp_path: Path, make_records: Records) -> None:
    node = open_node(tmp_path / "node-1")
    node.write_quorum_state(QuorumStateData(epoch=3, voted_id=1, leader_id=1, voters=(1, 2, 3)))
    fill(node, make_records, 5)
    assert node.checkpoint_high_watermark(9) == 9
    node.close()
    names = {p.name for p in (tmp_path / "node-1").iterdir()}
    assert names == {"meta.properties", "quorum-state", "high-watermark-checkpoint", "__cluster_metadata-0"}
    assert (log_dir(tmp_path / "node-1") / "00000000000000000000.log").is_file()
    again = open_node(tmp_path / "node-1")
    assert again.quorum_state == QuorumStateData(epoch=3, voted_id=1, leader_id=1, voters=(1, 2, 3))
    assert again.high_watermark.checkpointed == 9
    assert again.log.log_end_offset == 15
    again.close()
    with pytest.raises(DataDirMismatchError):
        open_node(tmp_path / "node-1", node_id=2)


def test_snapshot_deletes_segments_below_and_restart_loads_it(tmp_path: Path, make_records: Records) -> None:
    node = open_node(tmp_path)
    fill(node, make_records, 60)
    sid = SnapshotId(120, 1)
    node.take_snapshot(sid, make_records(0, 40), last_contained_log_timestamp_ms=0, append_timestamp_ms=0)
    assert node.log.log_start_offset <= 120
    assert node.log.log_start_offset > 0, "segments wholly below the snapshot are gone"
    tail = node.log.read(120, 1 << 20)
    node.close()
    again = open_node(tmp_path)
    assert again.latest_snapshot is not None
    assert again.latest_snapshot.snapshot_id == sid
    assert again.latest_snapshot.records == make_records(0, 40)
    assert again.log.read(120, 1 << 20) == tail
    assert again.log.epoch_end_offset(1) == (1, 180)
    again.close()


def test_follower_installs_a_snapshot_beyond_its_log(tmp_path: Path, make_records: Records) -> None:
    leader = open_node(tmp_path / "leader")
    fill(leader, make_records, 50, epoch=2)
    sid = SnapshotId(150, 2)
    leader.take_snapshot(sid, make_records(0, 10), last_contained_log_timestamp_ms=0, append_timestamp_ms=0)
    fill(leader, make_records, 5, epoch=3)
    follower = open_node(tmp_path / "follower", node_id=2)
    fill(follower, make_records, 3, epoch=1)
    writer = follower.receive_snapshot(sid)
    with leader.snapshots.reader(sid) as reader:
        writer.write_chunk(0, reader.read_chunk(0, reader.size_bytes))
    follower.install_snapshot(writer)
    log = follower.log
    assert (log.log_start_offset, log.log_end_offset, log.last_epoch) == (150, 150, 2)
    assert log.epoch_end_offset(2) == (2, 150)
    log.append(leader.log.read(150, 1 << 20))
    assert log.log_end_offset == 165
    assert log.epoch_end_offset(2) == (2, 150)
    follower.close()
    again = open_node(tmp_path / "follower", node_id=2)
    assert again.log.log_start_offset == 150
    assert again.latest_snapshot is not None and again.latest_snapshot.snapshot_id == sid
    again.close()
    leader.close()


def test_installed_snapshot_replaces_the_whole_log(tmp_path: Path, make_records: Records) -> None:
    leader = open_node(tmp_path / "leader")
    fill(leader, make_records, 10, epoch=1)
    sid = SnapshotId(15, 1)
    leader.take_snapshot(sid, make_records(0, 4), last_contained_log_timestamp_ms=0, append_timestamp_ms=0)
    data = (log_dir(tmp_path / "leader") / sid.file_name).read_bytes()
    follower = open_node(tmp_path / "follower", node_id=2)
    fill(follower, make_records, 10, epoch=1)  # its log reaches past the snapshot
    snap = follower.install_snapshot_data(sid, data)
    assert snap.records == make_records(0, 4)
    log = follower.log
    assert (log.log_start_offset, log.log_end_offset, log.last_epoch) == (15, 15, 1)
    assert follower.latest_snapshot is not None and follower.latest_snapshot.snapshot_id == sid
    with pytest.raises(SnapshotError):
        follower.install_snapshot_data(SnapshotId(30, 1), data[:-1])
    assert not list(log_dir(tmp_path / "follower").glob("*.part"))
    follower.close()
    leader.close()


def test_take_snapshot_refuses_a_wrong_epoch_or_offset(tmp_path: Path, make_records: Records) -> None:
    node = open_node(tmp_path)
    fill(node, make_records, 4, epoch=3)
    with pytest.raises(ValueError, match="has epoch 3"):
        node.take_snapshot(SnapshotId(6, 2), [], last_contained_log_timestamp_ms=0, append_timestamp_ms=0)
    with pytest.raises(ValueError, match="beyond the log end"):
        node.take_snapshot(SnapshotId(99, 3), [], last_contained_log_timestamp_ms=0, append_timestamp_ms=0)
    assert node.snapshots.ids() == []
    node.close()


def test_corrupt_newest_snapshot_is_refused_then_repaired(tmp_path: Path, make_records: Records) -> None:
    node = open_node(tmp_path)
    fill(node, make_records, 20)
    node.take_snapshot(SnapshotId(30, 1), make_records(0, 5), last_contained_log_timestamp_ms=0, append_timestamp_ms=0)
    node.take_snapshot(SnapshotId(60, 1), make_records(0, 9), last_contained_log_timestamp_ms=0, append_timestamp_ms=0)
    node.close()
    path = log_dir(tmp_path) / SnapshotId(60, 1).file_name
    data = bytearray(path.read_bytes())
    data[60] ^= 0x20
    path.write_bytes(data)
    with pytest.raises(SnapshotError, match=r"00000000000000000060-0000000001\.checkpoint"):
        open_node(tmp_path)
    repaired = open_node(tmp_path, repair=True)
    assert repaired.latest_snapshot is not None
    assert repaired.latest_snapshot.snapshot_id == SnapshotId(30, 1)
    assert (path.parent / (path.name + ".corrupt")).is_file(), "kept for inspection"
    repaired.close()


def test_repair_lowers_the_high_watermark_checkpoint(tmp_path: Path, make_records: Records) -> None:
    node = open_node(tmp_path, segment_bytes=1 << 20)
    fill(node, make_records, 10)
    node.checkpoint_high_watermark(30)
    for seg in node.log._segments:  # crash: no clean-close index
        seg.close()
    path = log_dir(tmp_path) / "00000000000000000000.log"
    data = bytearray(path.read_bytes())
    data[-10] ^= 0x01
    path.write_bytes(data)
    with pytest.raises(LogCorruptionError, match="offset 27"):
        open_node(tmp_path)
    repaired = open_node(tmp_path, repair=True)
    assert repaired.log.log_end_offset == 27
    assert read_high_watermark(tmp_path) == 27
    repaired.close()
    open_node(tmp_path).close()


_record = st.binary(min_size=0, max_size=40)


@settings(max_examples=200, deadline=None)
@given(
    items=st.lists(st.one_of(_record, st.lists(_record, min_size=0, max_size=12)), max_size=12),
    batch_records=st.integers(1, 7),
    batch_bytes=st.integers(1, 160),
)
def test_framed_runs_are_written_whole_between_the_records(
    items: list[bytes | list[bytes]], batch_records: int, batch_bytes: int
) -> None:
    """A topic's partition records come to the snapshot writer as one framed run, and go into a
    batch whole: a run that would take the open batch past its bytes bound starts the next batch
    (a topic stays with its TopicRecord whatever the record count). Single records fill batches
    one by one. Either way the snapshot holds the records in order."""
    runs: list[bytes | codec.FramedRecords] = [
        codec.FramedRecords.of(item) if isinstance(item, list) else item for item in items
    ]
    flat = [record for item in items for record in (item if isinstance(item, list) else [item])]
    sid = SnapshotId(len(flat) + 1, 3)
    batches = list(
        encode_snapshot(
            sid,
            runs,
            last_contained_log_timestamp_ms=5,
            append_timestamp_ms=6,
            batch_records=batch_records,
            batch_bytes=batch_bytes,
        )
    )
    snapshot = decode_snapshot(Path("x"), b"".join(batches), sid)
    assert snapshot.records == flat
    data = [codec.split_records(batch, codec.check_batch(batch)) for batch in batches[1:-1]]
    # The rule, written plainly: runs whole, a batch closed by the record or run that reaches a bound.
    expected: list[list[bytes]] = []
    open_batch: list[bytes] = []
    for item in items:
        run = item if isinstance(item, list) else [item]
        framed = sum(len(record) + 4 for record in run)
        open_framed = sum(len(record) + 4 for record in open_batch)
        if len(run) > 1 and open_batch and open_framed + framed > batch_bytes:
            expected.append(open_batch)
            open_batch = []
        open_batch = open_batch + run
        if len(open_batch) >= batch_records or sum(len(record) + 4 for record in open_batch) >= batch_bytes:
            expected.append(open_batch)
            open_batch = []
    if open_batch:
        expected.append(open_batch)
    assert data == expected
