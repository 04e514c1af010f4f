"""A node's data dir with damaged or missing election state, and the storage's own refusal to
truncate committed offsets (docs/storage.md, "Damaged disk")."""

from __future__ import annotations

from pathlib import Path

import pytest

from raftmeta.raft import QuorumStateData
from raftmeta.records.codec import encode_batch
from raftmeta.storage.datadir import NodeStorage
from raftmeta.storage.high_watermark import CommittedTruncationRefusedError

from .conftest import records_for


def filled(data_dir: Path, batches: int = 4) -> NodeStorage:
    node = NodeStorage.open(data_dir, cluster_id="c1", node_id=1)
    for i in range(batches):
        node.log.append(encode_batch(i, 1 + i // 2, records_for(i, 1), 0))
    node.log.flush()
    return node


def test_a_missing_file_is_reported_as_missing(tmp_path: Path) -> None:
    node = NodeStorage.open(tmp_path, cluster_id="c1", node_id=1)
    assert (node.quorum_state, node.quorum_state_problem) == (None, "missing")
    node.write_quorum_state(QuorumStateData(2, voted_id=1, voters=(1, 2, 3)))
    node.close()
    again = NodeStorage.open(tmp_path, cluster_id="c1", node_id=1)
    assert again.quorum_state == QuorumStateData(2, voted_id=1, voters=(1, 2, 3))
    assert again.quorum_state_problem is None
    again.close()


def test_an_unreadable_file_is_set_aside_and_reported(tmp_path: Path) -> None:
    filled(tmp_path).close()
    (tmp_path / "quorum-state").write_text(
        '{"data_version": 0, "epoch": 3, "voted_id": 8, "leader_id": -1, "voters": [1, 2, 3]}'
    )
    node = NodeStorage.open(tmp_path, cluster_id="c1", node_id=1)
    assert node.quorum_state is None
    assert node.quorum_state_problem is not None and "voted_id 8" in node.quorum_state_problem
    assert not (tmp_path / "quorum-state").exists()
    assert "voted_id" in (tmp_path / "quorum-state.unreadable").read_text(), "kept for the operator"
    assert node.log.log_end_offset == 4, "the log is untouched"
    node.close()


def test_the_storage_refuses_to_truncate_below_the_checkpointed_high_watermark(tmp_path: Path) -> None:
    node = filled(tmp_path)
    node.checkpoint_high_watermark(3)
    with pytest.raises(CommittedTruncationRefusedError, match=r"offset 1: offsets \[1, 3\) are below"):
        node.truncate_log(1)
    assert node.log.log_end_offset == 4, "nothing removed"
    assert node.truncate_log(3) == 3
    node.close()


def test_a_second_unreadable_file_is_set_aside_beside_the_first(tmp_path: Path) -> None:
    """Damage on two starts: both damaged files are kept, the first never overwritten."""
    filled(tmp_path).close()
    for content in ("first damage", "second damage"):
        (tmp_path / "quorum-state").write_text(content)
        NodeStorage.open(tmp_path, cluster_id="c1", node_id=1).close()
    assert (tmp_path / "quorum-state.unreadable").read_text() == "first damage"
    assert (tmp_path / "quorum-state.unreadable.1").read_text() == "second damage"
