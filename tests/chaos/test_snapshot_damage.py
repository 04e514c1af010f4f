"""The chaos storage fault's snapshot variant (raftmeta/chaos/snapshot_damage.py): the newest
snapshot of a stopped node gets a flipped bit its reader refuses, the node's next start sets it
aside, and the check reads that from the node's log."""

from __future__ import annotations

import json
import random
from pathlib import Path

from raftmeta.chaos.snapshot_damage import (
    SET_ASIDE_EVENTS,
    damage_newest_snapshot,
    unnoticed_snapshots,
)
from raftmeta.storage.datadir import NodeStorage, log_dir
from raftmeta.storage.snapshot import SnapshotId
from tests.storage.conftest import topic_record


def stopped_node_with_snapshots(node_dir: Path) -> list[Path]:
    node = NodeStorage.open(node_dir, cluster_id="c1", node_id=1)
    for _ in range(6):
        node.log.append_batch(1, [topic_record(f"t{node.log.log_end_offset}")], 0)
    node.log.flush()
    node.checkpoint_high_watermark(6)
    for end in (3, 6):
        node.take_snapshot(
            SnapshotId(end, 1), [topic_record(f"s{end}")], last_contained_log_timestamp_ms=0, append_timestamp_ms=0
        )
    node.close()
    return sorted(log_dir(node_dir).glob("*.checkpoint"))


def test_the_newest_snapshot_gets_a_flipped_bit_its_node_sets_aside_on_start(tmp_path: Path) -> None:
    node_dir = tmp_path / "node-1"
    older, newest = stopped_node_with_snapshots(node_dir)
    before = older.read_bytes(), newest.read_bytes()
    damage = damage_newest_snapshot(1, node_dir, random.Random(3))
    assert damage is not None and damage.file == newest.name
    after = newest.read_bytes()
    assert older.read_bytes() == before[0], "only the newest"
    assert [i for i in range(len(after)) if after[i] != before[1][i]] == [damage.position]
    node = NodeStorage.open(node_dir, cluster_id="c1", node_id=1, report_damage=True)
    assert newest.with_name(newest.name + ".corrupt").read_bytes() == after, "set aside, kept"
    node.close()


def test_a_node_without_a_snapshot_is_left_alone(tmp_path: Path) -> None:
    node = NodeStorage.open(tmp_path / "node-1", cluster_id="c1", node_id=1)
    node.close()
    assert damage_newest_snapshot(1, tmp_path / "node-1", random.Random(0)) is None


def test_the_check_wants_the_set_aside_event_naming_the_file(tmp_path: Path) -> None:
    node_dir = tmp_path / "node-1"
    stopped_node_with_snapshots(node_dir)
    damage = damage_newest_snapshot(1, node_dir, random.Random(5))
    assert damage is not None
    other = json.dumps({"event": SET_ASIDE_EVENTS[0], "file": f"dir/{damage.file}.other"})
    assert unnoticed_snapshots([damage], {1: other}) == [f"node 1: {damage.file} never set aside"]
    for event in SET_ASIDE_EVENTS:
        line = json.dumps({"event": event, "file": f"dir/__cluster_metadata-0/{damage.file}"})
        assert unnoticed_snapshots([damage], {1: "[info] started\n" + line}) == []
