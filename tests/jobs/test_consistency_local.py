"""The reference consistency checker on synthetic logs: clean logs pass; each kind of damage
fails the right check with a detail naming the node and offset."""

from __future__ import annotations

from pathlib import Path

from raftmeta.jobs.consistency import facts_to_checks, local_facts
from raftmeta.jobs.layout import discover
from raftmeta.records import codec
from raftmeta.v1 import records_pb2
from tests.jobs.quorum_logs import replace_in_node, rewrite_batch, segment_files, write_quorum


def verdicts(root: Path) -> dict[str, tuple[bool, str]]:
    return {c.name: (c.passed, c.detail) for c in facts_to_checks(local_facts(str(root)))}


def failed(root: Path) -> dict[str, str]:
    return {name: detail for name, (ok, detail) in verdicts(root).items() if not ok}


def test_layout_discovers_nodes_segments_and_high_watermarks(tmp_path: Path) -> None:
    logs = write_quorum(tmp_path)
    nodes = discover(str(tmp_path))
    assert [n.node_id for n in nodes] == [1, 2, 3]
    assert len(nodes[0].segments) > 1, "the fixture rolls segments"
    end = codec.check_batch(logs[1][-1].data).next_offset
    assert [n.high_watermark for n in nodes] == [end, end, codec.check_batch(logs[3][-1].data).next_offset]
    assert discover(str(tmp_path / "node-2"))[0].node_id == 2


def test_clean_logs_with_a_lagging_node_pass(tmp_path: Path) -> None:
    write_quorum(tmp_path)
    assert failed(tmp_path) == {}
    facts = local_facts(str(tmp_path))
    assert facts.committed_offset_by_node[3] < facts.committed_offset_by_node[1]


def test_record_changed_on_one_node_with_crc_recomputed(tmp_path: Path) -> None:
    logs = write_quorum(tmp_path)
    victim = logs[2][3]
    header = codec.check_batch(victim.data)
    records = codec.split_records(victim.data, header)
    forged = records_pb2.MetadataRecord.FromString(records[1])
    forged.partition.leader = 5
    records[1] = forged.SerializeToString()
    replace_in_node(tmp_path, 2, victim.base_offset, rewrite_batch(victim.data, records=records))
    problems = failed(tmp_path)
    assert list(problems) == ["committed-prefixes-agree"], "only the cross-node check can see a re-CRC'd change"
    assert f"offset {victim.base_offset} (" in problems["committed-prefixes-agree"]
    assert "node 2:" in problems["committed-prefixes-agree"]


def test_missing_offset_on_one_node(tmp_path: Path) -> None:
    logs = write_quorum(tmp_path)
    gone = logs[1][5]
    replace_in_node(tmp_path, 1, gone.base_offset, None)
    problems = failed(tmp_path)
    assert f"node 1: batch at offset {codec.check_batch(logs[1][6].data).base_offset}" in problems["offsets-contiguous"]
    assert f"node 1 lacks committed offset {gone.base_offset}" in problems["committed-prefixes-agree"]


def test_epoch_going_backwards(tmp_path: Path) -> None:
    logs = write_quorum(tmp_path)
    last = logs[1][-1]
    for node_id in (1, 2):
        replace_in_node(tmp_path, node_id, last.base_offset, rewrite_batch(last.data, epoch=1))
    problems = failed(tmp_path)
    assert list(problems) == ["epochs-non-decreasing"]
    assert f"offset {last.base_offset} has epoch 1 after epoch 2" in problems["epochs-non-decreasing"]


def test_bit_flip_below_the_high_watermark_fails_and_a_torn_tail_does_not(tmp_path: Path) -> None:
    logs = write_quorum(tmp_path)
    victim = logs[3][2]
    replace_in_node(tmp_path, 3, victim.base_offset, rewrite_batch(victim.data, epoch=1, fix_crc=False)[:-1] + b"\xff")
    problems = failed(tmp_path)
    assert "CRC32C mismatch" in problems["batch-integrity"]
    assert "node 3:" in problems["batch-integrity"]

    clean = tmp_path / "torn"
    write_quorum(clean)
    last_segment = segment_files(clean, 1)[-1]
    last_segment.write_bytes(last_segment.read_bytes() + codec.encode_batch(10_000, 9, [b"x"], 0)[:20])
    verdict = verdicts(clean)["batch-integrity"]
    assert verdict[0], verdict[1]
    assert "torn tail above the high watermark" in verdict[1]


def test_high_watermark_beyond_the_log(tmp_path: Path) -> None:
    write_quorum(tmp_path)
    (tmp_path / "node-3" / "high-watermark-checkpoint").write_text('{"version": 1, "high_watermark": 99999}')
    problems = failed(tmp_path)
    assert "node 3: high watermark 99999 but log ends at" in problems["high-watermark-within-log"]


def test_log_start_rule() -> None:
    from raftmeta.jobs.consistency import log_start_is_legal

    assert log_start_is_legal(0, [])
    assert not log_start_is_legal(5, [])
    # Storage keeps the segment that straddles a snapshot, and two snapshots: the log may start
    # below the older one (seen in a chaos run: segment 1001, snapshots 2754 and 6216).
    assert log_start_is_legal(1001, [2754, 6216])
    assert log_start_is_legal(6216, [2754, 6216])
    assert not log_start_is_legal(6217, [2754, 6216])


def test_log_starting_below_the_oldest_snapshot_passes_and_past_the_newest_fails(tmp_path: Path) -> None:
    logs = write_quorum(tmp_path, lagging=False)
    segments = segment_files(tmp_path, 2)
    kept_from = int(segments[1].name.removesuffix(".log"))
    segments[0].unlink()  # node 2 deleted its first segment below its snapshots
    snapshot_dir = tmp_path / "node-2" / "__cluster_metadata-0"
    later = [b.base_offset for b in logs[2] if b.base_offset > kept_from + 4][:2]
    for end in later:
        (snapshot_dir / f"{end:020d}-{2:010d}.checkpoint").write_bytes(b"")
    assert failed(tmp_path) == {}
    for path in snapshot_dir.glob("*.checkpoint"):
        path.unlink()
    problems = failed(tmp_path)
    assert f"node 2: log starts at offset {kept_from}, past its newest snapshot's end" in problems["offsets-contiguous"]
