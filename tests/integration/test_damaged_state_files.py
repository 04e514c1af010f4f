"""Damaged state files on a real node (docs/storage.md, "Damaged disk"; issue 45).

A stopped follower's ``quorum-state`` or high-watermark checkpoint is damaged as chaos's storage
fault damages it (raftmeta/chaos/state_damage.py). The node comes back without an operator: it
sets the file aside (kept, never deleted), rejoins, and loses nothing; with its vote erased it
votes at most once in any epoch, read from every incarnation's ``vote recorded`` events.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from raftmeta.chaos.state_damage import NOTICED_EVENTS, damage_state_file, double_votes
from raftmeta.client import SyncControllerClient
from raftmeta.local import quorum as local_quorum
from raftmeta.server.log_events import VOTE_RECORDED_EVENT
from raftmeta.storage.high_watermark import HIGH_WATERMARK_CHECKPOINT, read_high_watermark
from raftmeta.storage.quorum_state import QUORUM_STATE
from raftmeta.v1 import errors_pb2
from tests.integration.test_damaged_log import (
    all_acknowledged_and_identical,
    create_checkpointed,
    kill,
    node_events,
    restart_and_catch_up,
    stop,
)
from tests.integration.test_node import create, leader_of, wait_until

pytestmark = pytest.mark.integration


def logs_of(quorum: local_quorum.LocalQuorum) -> dict[int, str]:
    return {node.id: Path(node.log).read_text() for node in quorum.nodes}


def damaged_and_restarted(
    quorum: local_quorum.LocalQuorum, client: SyncControllerClient, file: str, kind: str
) -> tuple[int, bytes]:
    """Stop a follower, damage its ``file`` with ``kind``, restart it and wait until it caught up;
    check that its start noticed the damage and kept the damaged bytes. Returns the follower."""
    follower = next(n for n in quorum.nodes if n.id != leader_of(client))
    stop(quorum, follower.id)
    data_dir = Path(follower.data_dir)
    damage = damage_state_file(follower.id, data_dir, file, kind, random.Random(7))
    assert damage is not None, f"node {follower.id} has a {file} to damage"
    damaged = (data_dir / file).read_bytes()
    restart_and_catch_up(quorum, client, follower.id, f"after-{file}")
    assert any(e["event"] == NOTICED_EVENTS[file] for e in node_events(follower))
    return follower.id, damaged


def test_a_damaged_quorum_state_is_set_aside_and_the_node_never_votes_twice_in_an_epoch(
    quorum: local_quorum.LocalQuorum, client: SyncControllerClient
) -> None:
    acknowledged = create_checkpointed(quorum, client)
    follower, damaged = damaged_and_restarted(quorum, client, QUORUM_STATE, "bit-flip")
    acknowledged.append(f"after-{QUORUM_STATE}")
    data_dir = Path(quorum.node(follower).data_dir)
    assert (data_dir / "quorum-state.unreadable").read_bytes() == damaged, "kept, never deleted"
    events = node_events(quorum.node(follower))
    assert any(e["event"] == "election state recovered from the log" for e in events)

    # An election with the erased vote: the leader is killed and comes back, a leader of a later
    # epoch is elected, and no node (the fenced one included) recorded two candidates in an epoch.
    before = client.describe_quorum().leader_epoch
    old_leader = leader_of(client)
    kill(quorum, old_leader)
    local_quorum.restart(quorum, old_leader)
    wait_until(lambda: client.describe_quorum().leader_epoch > before, timeout_s=60, what="a leader of a later epoch")
    assert create(client, "after-election", partitions=1).error_code == errors_pb2.NONE
    acknowledged.append("after-election")
    epoch = client.describe_quorum().leader_epoch
    assert double_votes(logs_of(quorum)) == []
    voters_in_epoch = {
        node.id
        for node in quorum.nodes
        for e in node_events(node)
        if e["event"] == VOTE_RECORDED_EVENT and e["epoch"] == epoch
    }
    assert len(voters_in_epoch) >= 2, f"the electing majority's votes in epoch {epoch} are recorded"
    all_acknowledged_and_identical(quorum, acknowledged)


# A flipped bit (its checksum fails) and a truncated file: every kind of file of a single replica
# gets a flipped bit on real processes (segments: test_damaged_log.py; snapshots:
# test_damaged_snapshot.py; quorum-state: above).
@pytest.mark.parametrize("kind", ["truncated", "bit-flip"])
def test_a_damaged_high_watermark_checkpoint_is_set_aside_and_rewritten(
    quorum: local_quorum.LocalQuorum, client: SyncControllerClient, kind: str
) -> None:
    acknowledged = create_checkpointed(quorum, client)
    follower, damaged = damaged_and_restarted(quorum, client, HIGH_WATERMARK_CHECKPOINT, kind)
    acknowledged.append(f"after-{HIGH_WATERMARK_CHECKPOINT}")
    data_dir = Path(quorum.node(follower).data_dir)
    assert (data_dir / "high-watermark-checkpoint.corrupt").read_bytes() == damaged, "kept, never deleted"
    target = client.describe_quorum().high_watermark

    def rewritten() -> bool:
        # Written at most once a second, by a commit: one more create each time.
        acknowledged.append(f"filler-{len(acknowledged)}")
        assert create(client, acknowledged[-1], partitions=1).error_code == errors_pb2.NONE
        return read_high_watermark(data_dir) >= target

    wait_until(rewritten, timeout_s=60, what=f"node {follower}'s new checkpoint reaching {target}")
    all_acknowledged_and_identical(quorum, acknowledged)
