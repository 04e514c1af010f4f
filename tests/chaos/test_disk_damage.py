"""The chaos storage fault (raftmeta/chaos/disk_damage.py): it damages a committed batch with
intact neighbours, which the node's storage then reports with its exact slot; and the check that
reads the nodes' logs for the repairs."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest

from raftmeta.chaos.disk_damage import KINDS, SECTOR_BYTES, DiskDamage, damage_committed_batch, judge_repairs
from raftmeta.records import codec
from raftmeta.storage.datadir import NodeStorage
from raftmeta.storage.snapshot import SnapshotId
from tests.storage.conftest import simulate_crash


def build(node_dir: Path) -> list[codec.Batch]:
    """A stopped node's data dir: 30 batches of 1..3 records of 300 bytes (some batches hold a
    whole 512-byte sector), all below the checkpointed high watermark."""
    node = NodeStorage.open(node_dir, cluster_id="c1", node_id=1)
    for i in range(30):
        node.log.append_batch(1 + i // 10, [bytes([i]) * 300] * (1 + i % 3), 1_700_000_000_000 + i)
    node.log.flush()
    node.checkpoint_high_watermark(node.log.log_end_offset)
    batches = list(node.log.iter_batches(0))
    simulate_crash(node.log)
    return batches


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", range(5))
def test_the_damaged_batch_is_committed_and_the_node_reports_its_slot(tmp_path: Path, kind: str, seed: int) -> None:
    node_dir = tmp_path / "node-1"
    batches = build(node_dir)
    avoid = {batches[4].base_offset}
    damage = damage_committed_batch(1, node_dir, kind, random.Random(seed), avoid)
    assert damage is not None and damage.kind == kind
    assert damage.base_offset not in avoid
    assert 0 < [b.base_offset for b in batches].index(damage.base_offset) < len(batches) - 1, "intact neighbours"
    storage = NodeStorage.open(node_dir, cluster_id="c1", node_id=1, report_damage=True)
    (slot,) = storage.log.damaged_batches()
    assert (slot.base_offset, slot.next_offset) == (damage.base_offset, damage.next_offset)
    if kind == "zeroed-range":
        # One slot over 2-3 whole batches: every one of them is repaired, front first.
        inside = [b for b in batches if damage.base_offset <= b.base_offset < damage.next_offset]
        assert damage.bases == tuple(b.base_offset for b in inside) and len(inside) in (2, 3)
        assert not avoid & set(damage.bases)
        assert (slot.position, slot.size) == (damage.position, sum(len(b.data) for b in inside))
        before, after = batches[batches.index(inside[0]) - 1], batches[batches.index(inside[-1]) + 1]
        assert slot.max_epoch == (None if before.epoch == after.epoch else after.epoch), "across an epoch change"
        return
    assert slot.position + codec.HEADER_SIZE <= damage.position < slot.position + slot.size
    if kind == "zeroed-sector":
        assert damage.position % SECTOR_BYTES == 0 and damage.position + SECTOR_BYTES <= slot.position + slot.size


def test_a_young_log_has_nothing_to_damage(tmp_path: Path) -> None:
    node = NodeStorage.open(tmp_path / "node-1", cluster_id="c1", node_id=1)
    node.log.append_batch(1, [b"x"], 0)
    node.log.flush()
    node.checkpoint_high_watermark(1)
    simulate_crash(node.log)
    assert damage_committed_batch(1, tmp_path / "node-1", "bit-flip", random.Random(0), set()) is None


def test_a_damage_counts_as_repaired_only_by_its_nodes_repair_event_or_a_later_snapshot() -> None:
    damages = [DiskDamage(1, "bit-flip", "s.log", 100, 10, 12), DiskDamage(2, "zeroed-sector", "s.log", 512, 20, 23)]

    def line(event: str, **fields: int) -> str:
        return json.dumps({"event": event, "node_id": 0, **fields})

    logs = {
        1: line("repaired a damaged batch from the quorum", offset=10),
        2: line("repaired a damaged batch from the quorum", offset=10) + "\nnot json\n",
    }
    verdict = judge_repairs(damages, logs)
    assert (verdict.repaired, verdict.replaced, verdict.missing) == (1, 0, [damages[1].describe()])
    logs[2] += "\n" + line("installed snapshot from the leader", end_offset=23)
    verdict = judge_repairs(damages, logs)
    assert (verdict.repaired, verdict.replaced, verdict.missing) == (1, 1, [])


def test_batches_below_the_newest_snapshot_are_never_chosen(tmp_path: Path) -> None:
    """The node no longer reads them (its log starts at the snapshot): damaging them tests nothing."""
    node_dir = tmp_path / "node-1"
    batches = build(node_dir)
    snapshot_end = batches[20].base_offset
    (node_dir / "__cluster_metadata-0" / SnapshotId(snapshot_end, 2).file_name).write_bytes(b"")
    for seed in range(10):
        copy = tmp_path / f"copy{seed}"
        shutil.copytree(node_dir, copy)
        damage = damage_committed_batch(1, copy, "bit-flip", random.Random(seed), set())
        assert damage is not None and damage.base_offset >= snapshot_end


def test_a_zeroed_range_counts_as_repaired_only_when_every_batch_of_it_is() -> None:
    damage = DiskDamage(1, "zeroed-range", "s.log", 100, 10, 16, (10, 12, 13))

    def repaired(*offsets: int) -> str:
        return "\n".join(
            json.dumps({"event": "repaired a damaged batch from the quorum", "offset": o}) for o in offsets
        )

    assert judge_repairs([damage], {1: repaired(10, 12)}).missing == [damage.describe()]
    assert judge_repairs([damage], {1: repaired(10, 12, 13)}).repaired == 1
    assert "3 committed batches zeroed" in damage.describe()
