"""A node's state on start: the data dir read back into a QuorumController (the consensus core with
the log, snapshot, election state and high-watermark checkpoint; the controller with the snapshot's
image), the driver's clock offset and randomness injected. The node replays the log above the
snapshot through the QuorumController's first Ready."""

from __future__ import annotations

import os
import random
import time
import uuid
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from placement import JavaRandom
from raftmeta.controller import Controller
from raftmeta.controller.quorum import ControllerFactory, QuorumController, QuorumControllerConfig
from raftmeta.raft import Entry, QuorumStateData, RaftConfig, RaftCore, SnapshotImage
from raftmeta.records.decode import parse_records
from raftmeta.server.config import NodeConfig
from raftmeta.storage.datadir import NodeStorage
from raftmeta.storage.quorum_state import check_voters
from raftmeta.v1 import records_pb2

LOST_ELECTION_STATE_HINT = (
    "if a copy of this node's quorum-state file exists (a backup), stop the node and put it back; otherwise "
    "nothing is needed: the node rejoins when a leader of a later epoch reaches it, and votes again from the "
    "next epoch on (docs/storage.md, 'Damaged disk')"
)


class SystemRandom:
    """The core's and placers' injected randomness, from the OS (drivers may use real randomness)."""

    def __init__(self) -> None:
        self._rng = random.Random(os.urandom(16))

    def next_int(self, bound: int) -> int:
        return self._rng.randrange(bound)


def now_ms() -> int:
    """The driver's clock for the core's timers: monotonic milliseconds."""
    return time.monotonic_ns() // 1_000_000


def controller_factory(config: NodeConfig) -> ControllerFactory:
    """Controllers with a snapshot's committed image (or an empty one), the driver's topic ids and
    placement randomness."""
    controller_config = replace(config.controller, cluster_id=config.cluster_id, node_id=config.node_id)

    def make(records: Sequence[records_pb2.MetadataRecord], offset: int) -> Controller:
        if records:
            controller = Controller.from_snapshot(records, offset, config=controller_config)
        else:
            controller = Controller(config=controller_config, committed_offset=offset)
        controller.ids = lambda: uuid.uuid4().bytes
        controller.random = JavaRandom(int.from_bytes(os.urandom(6), "big"))
        return controller

    return make


def raft_config(config: NodeConfig) -> RaftConfig:
    return RaftConfig(
        node_id=config.node_id,
        voters=tuple(sorted(config.voters)),
        cluster_id=config.cluster_id,
        fetch_timeout_ms=config.fetch_timeout_ms,
        election_timeout_ms=config.election_timeout_ms,
        election_backoff_max_ms=config.election_backoff_max_ms,
        fetch_max_wait_ms=config.fetch_max_wait_ms,
        fetch_hw_linger_ms=config.fetch_hw_linger_ms,
        request_timeout_ms=config.request_timeout_ms,
        # Append timestamps are wall-clock time (docs/log-format.md); timers stay monotonic.
        wall_clock_offset_ms=time.time_ns() // 1_000_000 - now_ms(),
    )


def recover_quorum_controller(
    config: NodeConfig, storage: NodeStorage, snapshot_bytes: bytes, rng: SystemRandom, log: Any
) -> QuorumController:
    """The QuorumController of an opened data dir (``snapshot_bytes``: the newest snapshot file's
    content, which the core serves to followers). A quorum-state written for another voter set is
    refused; a lost one is recovered from the log (logged at WARN with what to do)."""
    snapshot = storage.latest_snapshot
    start_offset = snapshot.snapshot_id.offset if snapshot is not None else 0
    entries = [Entry.from_batch(b) for b in storage.log.iter_batches(max(start_offset, storage.log.log_start_offset))]
    image = (
        SnapshotImage(snapshot.snapshot_id.offset, snapshot.snapshot_id.epoch, snapshot_bytes)
        if snapshot is not None
        else None
    )
    stored = storage.quorum_state
    if stored is not None:
        check_voters(storage.quorum_state_file.path, stored, tuple(config.voters))
    core = RaftCore(
        raft_config(config),
        rng,
        now_ms(),
        quorum_state=QuorumStateData(stored.epoch, stored.leader_id, stored.voted_id) if stored else None,
        entries=entries,
        snapshot=image,
        high_watermark=storage.high_watermark.checkpointed,
        # Answers meant for a previous incarnation's requests can never match a new one.
        first_correlation_id=time.time_ns() << 8,
    )
    if core.start_note is not None:
        log.warning(
            "election state recovered from the log",
            quorum_state=storage.quorum_state_problem or "older than the log",
            detail=core.start_note,
            epoch=core.epoch,
            what_to_do=LOST_ELECTION_STATE_HINT,
        )
    make = controller_factory(config)
    records = parse_records(snapshot.records) if snapshot is not None else []
    return QuorumController(
        core,
        make(records, start_offset - 1),
        make,
        config=QuorumControllerConfig(
            snapshot_interval_records=config.snapshot_interval_records,
            unsafe_ack_before_commit=config.unsafe_ack_before_commit,
        ),
        snapshot_records=len(records),
    )
