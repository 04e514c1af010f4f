"""A node's state on start: its disk's durable state read back into a QuorumController (the
consensus core with the log, snapshot, election state and high-watermark checkpoint; the
controller with the snapshot's image), the driver's clock offset and randomness injected. The
node replays the log above the snapshot through the QuorumController's first Ready."""

from __future__ import annotations

import os
import random
import time
import uuid
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from placement import JavaRandom
from raftmeta.api.addresses import parse_host_port
from raftmeta.controller import Controller
from raftmeta.controller.quorum import ControllerFactory, QuorumController, QuorumControllerConfig
from raftmeta.raft import RaftConfig, RaftCore
from raftmeta.raft.voters import Endpoint, VoterNode, VoterSet
from raftmeta.records.decode import LazyRecords
from raftmeta.server.addresses import CONTROLLER_LISTENER
from raftmeta.server.config import NodeConfig
from raftmeta.server.heap import collector_paused
from raftmeta.server.seams import DurableState
from raftmeta.v1 import records_pb2

LOST_ELECTION_STATE_HINT = (
    "if a copy of this node's quorum-state file exists (a backup), stop the node and put it back; otherwise "
    "nothing is needed: the node follows a leader as soon as one reaches it, and votes again once every other "
    "voter has told it its epoch, above the highest of them (docs/consensus.md, 'Lost election state')"
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


def bootstrap_voters(config: NodeConfig) -> VoterSet | None:
    """The bootstrap voter set with directory ids and listeners (--initial-controllers); None
    without directory ids (--voters: the set in force carries none until voters are added)."""
    if not config.voter_directory_ids:
        return None
    nodes = []
    for voter_id, address in sorted(config.voters.items()):
        host, port = parse_host_port(address, f"voter {voter_id}'s address")
        endpoint = Endpoint(CONTROLLER_LISTENER, host, port)
        nodes.append(VoterNode(voter_id, config.voter_directory_ids.get(voter_id, b""), (endpoint,)))
    return VoterSet(tuple(nodes))


def raft_config(config: NodeConfig, directory_id: bytes = b"") -> RaftConfig:
    return RaftConfig(
        node_id=config.node_id,
        directory_id=directory_id,
        bootstrap_voters=bootstrap_voters(config),
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
    config: NodeConfig, durable: DurableState, rng: SystemRandom, log: Any
) -> QuorumController:
    """The QuorumController of a disk's durable state. A lost quorum-state is recovered from the
    log (logged at WARN with what to do)."""
    snapshot = durable.snapshot
    start_offset = snapshot.end_offset if snapshot is not None else 0
    # The image first, the core after it: the core's timers start when it is made, and building
    # the image of a big snapshot takes seconds (3M partitions: ~9 s). Made the other way round,
    # a restarted follower's fetch timeout had passed before its first poll, so it gave up on its
    # leader at once (prospective) and waited for the leader's next BeginQuorumEpoch to follow
    # it again: 6.7 s of a 17 s restart at 3M partitions.
    make = controller_factory(config)
    records = LazyRecords(durable.snapshot_records)  # parsed one at a time as the image is built
    with collector_paused():
        controller = make(records, start_offset - 1)
    core = RaftCore(
        raft_config(config, durable.directory_id),
        rng,
        now_ms(),
        quorum_state=durable.quorum_state,
        entries=durable.entries,
        snapshot=snapshot,
        high_watermark=durable.high_watermark,
        # Answers meant for a previous incarnation's requests can never match a new one.
        first_correlation_id=time.time_ns() << 8,
        # A damaged file (set aside) is a lost vote even next to an empty log: not a new node's.
        election_state_lost=(durable.quorum_state_problem or "").startswith("unreadable"),
        # Batches whose bytes are damaged (their slot is known): repaired from the quorum.
        damaged=durable.damaged,
        damaged_epochs=durable.damaged_epochs,
        # A damaged snapshot with no fallback: the leader's is fetched before anything is applied.
        missing_snapshot=durable.missing_snapshot,
    )
    if core.start_note is not None:
        log.warning(
            "election state recovered from the log",
            quorum_state=durable.quorum_state_problem or "older than the log",
            detail=core.start_note,
            epoch=core.epoch,
            what_to_do=LOST_ELECTION_STATE_HINT,
        )
    return QuorumController(
        core,
        controller,
        make,
        config=QuorumControllerConfig(
            snapshot_interval_records=config.snapshot_interval_records,
            unsafe_ack_before_commit=config.unsafe_ack_before_commit,
        ),
        snapshot_records=len(records),
    )
