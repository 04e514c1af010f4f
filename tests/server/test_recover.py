"""A node's state on start (raftmeta/server/recover.py)."""

from __future__ import annotations

import gc
from collections.abc import Sequence
from pathlib import Path

import pytest
import structlog

from raftmeta.controller import Controller
from raftmeta.controller.quorum import ControllerFactory
from raftmeta.raft import QuorumStateData
from raftmeta.raft.types import Role
from raftmeta.server import recover
from raftmeta.server.config import NodeConfig
from raftmeta.server.seams import DurableState
from raftmeta.v1 import records_pb2

FETCH_TIMEOUT_MS = 2000


def test_a_follower_whose_image_takes_long_to_build_still_follows_its_leader(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Building the image of a big snapshot takes seconds (10M partitions: tens). The core's
    timers start when it is made, so it is made after the image: a restarted follower of a live
    leader starts following it, where it used to find its fetch timeout passed at its first poll
    and give up on the leader (prospective) until the leader's next BeginQuorumEpoch."""
    clock = [1_000_000]
    collector_on: list[bool] = []
    monkeypatch.setattr(recover, "now_ms", lambda: clock[0])
    real_factory = recover.controller_factory

    def slow_factory(config: NodeConfig) -> ControllerFactory:
        make = real_factory(config)

        def slow_make(records: Sequence[records_pb2.MetadataRecord], offset: int) -> Controller:
            clock[0] += 5 * FETCH_TIMEOUT_MS  # the image of a big snapshot
            collector_on.append(gc.isenabled())
            return make(records, offset)

        return slow_make

    monkeypatch.setattr(recover, "controller_factory", slow_factory)
    config = NodeConfig(
        node_id=1,
        listen="127.0.0.1:1",
        voters={1: "127.0.0.1:1", 2: "127.0.0.1:2", 3: "127.0.0.1:3"},
        data_dir=Path("unused"),
        cluster_id="c",
        fetch_timeout_ms=FETCH_TIMEOUT_MS,
    )
    durable = DurableState(
        quorum_state=QuorumStateData(epoch=3, leader_id=2, voted_id=2),
        quorum_state_problem=None,
        entries=[],
        snapshot=None,
        snapshot_records=[],
        high_watermark=0,
        log_start_offset=0,
        log_end_offset=0,
    )
    qc = recover.recover_quorum_controller(config, durable, recover.SystemRandom(), structlog.get_logger())
    assert clock[0] == 1_000_000 + 5 * FETCH_TIMEOUT_MS  # the image was built
    assert collector_on == [False]  # with the cyclic collector off (raftmeta/server/heap.py)
    assert gc.isenabled()
    qc.poll(clock[0])
    assert (qc.core.role, qc.core.epoch, qc.core.leader_id) == (Role.FOLLOWER, 3, 2)
