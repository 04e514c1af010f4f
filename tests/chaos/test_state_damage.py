"""The chaos storage fault's state-file variants (raftmeta/chaos/state_damage.py): each damage is
one the node's start notices and sets aside; and the checks that read the nodes' logs for that
and for two votes in one epoch."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from raftmeta.chaos.state_damage import (
    DAMAGE_KINDS,
    NOTICED_EVENTS,
    STATE_FILES,
    StateFileDamage,
    behind_vote_fence,
    damage_state_file,
    double_votes,
    unnoticed,
)
from raftmeta.raft.types import VOTE_FENCED, VOTE_UNKNOWN, QuorumStateData
from raftmeta.server.log_events import VOTE_RECORDED_EVENT
from raftmeta.storage.datadir import NodeStorage
from raftmeta.storage.high_watermark import HIGH_WATERMARK_CHECKPOINT
from raftmeta.storage.quorum_state import QUORUM_STATE


def stopped_node(node_dir: Path) -> None:
    node = NodeStorage.open(node_dir, cluster_id="c1", node_id=1)
    node.log.append_batch(3, [b"x" * 40] * 3, 0)
    node.log.flush()
    node.checkpoint_high_watermark(3)
    node.write_quorum_state(QuorumStateData(3, leader_id=2, voted_id=2))
    node.close()


@pytest.mark.parametrize("kind", DAMAGE_KINDS)
@pytest.mark.parametrize("file", STATE_FILES)
@pytest.mark.parametrize("seed", range(8))
def test_each_damage_is_noticed_and_set_aside_by_the_nodes_start(
    tmp_path: Path, file: str, kind: str, seed: int
) -> None:
    stopped_node(tmp_path)
    original = (tmp_path / file).read_bytes()
    damage = damage_state_file(1, tmp_path, file, kind, random.Random(seed))
    assert damage is not None and (damage.file, damage.kind, damage.size) == (file, kind, len(original))
    damaged = (tmp_path / file).read_bytes()
    assert damaged != original
    node = NodeStorage.open(tmp_path, cluster_id="c1", node_id=1, report_damage=True)
    if file == QUORUM_STATE:
        assert node.quorum_state is None and (node.quorum_state_problem or "").startswith("unreadable")
        assert (tmp_path / "quorum-state.unreadable").read_bytes() == damaged
    else:
        assert node.high_watermark.checkpointed == 0
        assert (tmp_path / "high-watermark-checkpoint.corrupt").read_bytes() == damaged
    assert node.log.log_end_offset == 3, "the log is untouched"
    node.close()


def test_a_file_not_written_yet_is_left_alone(tmp_path: Path) -> None:
    NodeStorage.open(tmp_path, cluster_id="c1", node_id=1).close()
    for file in STATE_FILES:
        assert damage_state_file(1, tmp_path, file, "bit-flip", random.Random(0)) is None
        assert not (tmp_path / file).exists()


def line(event: str, **fields: object) -> str:
    return json.dumps({"event": event, "node_id": 1, **fields})


def test_two_candidates_in_one_epoch_are_a_double_vote() -> None:
    logs = {
        1: "\n".join([line(VOTE_RECORDED_EVENT, epoch=4, voted_id=2), line(VOTE_RECORDED_EVENT, epoch=4, voted_id=2),
                      line(VOTE_RECORDED_EVENT, epoch=5, voted_id=3), "not json " + VOTE_RECORDED_EVENT]),
        2: "\n".join([line(VOTE_RECORDED_EVENT, epoch=4, voted_id=2), line(VOTE_RECORDED_EVENT, epoch=4, voted_id=3)]),
    }  # fmt: skip
    assert double_votes(logs) == ["node 2 voted for [2, 3] in epoch 4"]


def test_a_damage_is_noticed_only_by_as_many_starts_that_set_the_file_aside() -> None:
    damages = [
        StateFileDamage(1, QUORUM_STATE, "zeroed", 90, 0),
        StateFileDamage(1, QUORUM_STATE, "truncated", 90, 12),
        StateFileDamage(2, HIGH_WATERMARK_CHECKPOINT, "bit-flip", 60, 7),
    ]
    logs = {1: line(NOTICED_EVENTS[QUORUM_STATE]), 2: line(NOTICED_EVENTS[HIGH_WATERMARK_CHECKPOINT])}
    assert unnoticed(damages, logs) == ["truncated to 12 of 90 bytes: node 1's quorum-state"]


def test_a_voter_is_behind_its_vote_fence_while_its_quorum_state_is_lost_damaged_or_says_so(tmp_path: Path) -> None:
    """What the quorum-state fault waits on before it damages another voter's file (two fenced
    voters of three never elect again): the other voters' own quorum-state files."""
    node_dir = tmp_path / "node-1"
    stopped_node(node_dir)
    assert not behind_vote_fence(node_dir), "a vote recorded: no fence"
    assert damage_state_file(1, node_dir, QUORUM_STATE, "truncated", random.Random(3)) is not None
    assert behind_vote_fence(node_dir), "damaged: the node opens its fence when it starts"
    (node_dir / QUORUM_STATE).unlink()
    assert behind_vote_fence(node_dir), "set aside, not written again yet"
    node = NodeStorage.open(node_dir, cluster_id="c1", node_id=1)
    node.write_quorum_state(QuorumStateData(3, leader_id=2, voted_id=VOTE_FENCED))
    node.close()
    assert behind_vote_fence(node_dir), "the open fence, as the core persists it"
    node = NodeStorage.open(node_dir, cluster_id="c1", node_id=1)
    node.write_quorum_state(QuorumStateData(4, leader_id=-1, voted_id=VOTE_UNKNOWN))
    node.close()
    assert not behind_vote_fence(node_dir), "closed: the vote withheld in epoch 4, votes again above"
