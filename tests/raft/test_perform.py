"""The perform policy (raftmeta/raft/perform.py): the order in which a driver carries out a Ready."""

from __future__ import annotations

from raftmeta.raft import Entry, Envelope, QuorumStateData, Ready, Role, SnapshotImage, SoftState
from raftmeta.raft.perform import ANSWER_FIRST_MAX_WAITING, Step, plan
from raftmeta.v1 import raft_pb2

BATCH = Entry(0, 1, 1, b"x")
FETCH_ANSWER = Envelope(1, 2, -1, raft_pb2.FetchResponse())


def commit_ready(**fields: object) -> Ready:
    """A Ready that commits a batch and answers a Fetch (the commit round of a leader)."""
    return Ready(seq=1, committed=[BATCH], messages=[FETCH_ANSWER], **fields)  # type: ignore[arg-type]


def test_a_lightly_loaded_leader_answers_before_it_sends() -> None:
    steps = plan(commit_ready(), leader=True, waiting=ANSWER_FIRST_MAX_WAITING, inline_flush_allowed=False)
    assert steps == (Step.APPLY_COMMITTED, Step.SEND)


def test_a_busy_leader_feeds_its_followers_first() -> None:
    steps = plan(commit_ready(), leader=True, waiting=ANSWER_FIRST_MAX_WAITING + 1, inline_flush_allowed=False)
    assert steps == (Step.SEND, Step.APPLY_COMMITTED)


def test_a_follower_sends_its_fetch_before_it_replays() -> None:
    steps = plan(commit_ready(), leader=False, waiting=0, inline_flush_allowed=False)
    assert steps == (Step.SEND, Step.APPLY_COMMITTED)


def test_a_follower_flushing_inline_defers_the_replay_past_the_fetch_the_flush_releases() -> None:
    ready = commit_ready(append=[Entry(1, 1, 2, b"y")], flush=True)
    steps = plan(ready, leader=False, waiting=0, inline_flush_allowed=True)
    assert steps == (Step.WRITE_AND_FLUSH_LOG, Step.SEND, Step.DEFER_COMMITTED, Step.REPORT_FLUSH)


def test_a_leader_never_flushes_inline() -> None:
    ready = Ready(seq=1, append=[BATCH], flush=True)
    steps = plan(ready, leader=True, waiting=0, inline_flush_allowed=True)
    assert steps == (Step.WRITE_LOG, Step.SEND, Step.REQUEST_FLUSH)


def test_no_inline_flush_without_an_append() -> None:
    steps = plan(Ready(seq=1, flush=True), leader=False, waiting=0, inline_flush_allowed=True)
    assert steps == (Step.SEND, Step.REQUEST_FLUSH)


def test_the_quorum_state_is_durable_before_anything_else() -> None:
    ready = Ready(
        seq=1,
        quorum_state=QuorumStateData(2, 1, -1),
        soft_state=SoftState(Role.FOLLOWER, 2, 1),
        install_snapshot=SnapshotImage(5, 1, b""),
        truncate_to=5,
        append=[BATCH],
        messages=[FETCH_ANSWER],
        flush=True,
        committed=[BATCH],
    )
    steps = plan(ready, leader=False, waiting=0, inline_flush_allowed=False)
    assert steps == (
        Step.PERSIST_QUORUM_STATE,
        Step.ANNOUNCE_ROLE,
        Step.INSTALL_SNAPSHOT,
        Step.WRITE_LOG,
        Step.SEND,
        Step.REQUEST_FLUSH,
        Step.APPLY_COMMITTED,
    )


def test_a_repair_is_fsynced_before_the_rest_and_takes_the_truncation_with_it() -> None:
    ready = Ready(seq=1, truncate_to=3, repair=[BATCH], append=[Entry(1, 1, 2, b"y")], flush=True)
    steps = plan(ready, leader=False, waiting=0, inline_flush_allowed=False)
    assert steps == (Step.REPAIR_LOG, Step.WRITE_LOG, Step.SEND, Step.REQUEST_FLUSH)
    only_repair = Ready(seq=1, truncate_to=3, repair=[BATCH])
    assert plan(only_repair, leader=False, waiting=0, inline_flush_allowed=True) == (Step.REPAIR_LOG, Step.SEND)
