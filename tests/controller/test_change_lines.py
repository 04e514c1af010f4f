"""Controller change lines ("broker fenced", "partition leader elected", ...) are facts: a leader logs
them when their batch commits, with the epoch and offset of the batch, and a deposed leader whose
batch was truncated away logs that it was dropped, never the change (issue 46, item 4)."""

from __future__ import annotations

from collections import deque
from typing import Any

from raftmeta.controller.quorum import QuorumController
from raftmeta.raft import Envelope, RaftConfig, RaftCore, Role
from raftmeta.v1 import controller_pb2

from ..raft.harness import SeededSource
from .test_quorum_controller import make_controller, register

VOTERS = (1, 2, 3)
SESSION_EXPIRED_MS = 60_000  # past any broker session


class Plane:
    """Three QuorumControllers wired by an in-memory network, driven as the node drives one."""

    def __init__(self) -> None:
        self.now = 0
        self.qcs = {
            n: QuorumController(
                RaftCore(RaftConfig(node_id=n, voters=VOTERS, cluster_id="t"), SeededSource(n), 0),
                make_controller([], -1),
                make_controller,
            )
            for n in VOTERS
        }
        self.network: deque[Envelope] = deque()
        self.blocked: set[int] = set()
        self.events: dict[int, list[tuple[str, dict[str, Any]]]] = {n: [] for n in VOTERS}
        self.answers: dict[int, list[Any]] = {n: [] for n in VOTERS}

    def drive(self, node: int) -> None:
        qc = self.qcs[node]
        qc.poll(self.now)
        for _ in range(1000):
            ready = qc.take_ready()
            if ready.is_empty():
                break
            self.network.extend(ready.messages)
            if ready.flush:
                qc.on_log_flushed(self.now, qc.core.log_end_offset, ready.seq)
            if ready.committed:
                qc.apply_committed(self.now, ready.committed)
            qc.poll(self.now)
        self.events[node].extend(qc.take_events())
        self.answers[node].extend(qc.take_answers())

    def advance(self, ms: int) -> None:
        end = self.now + ms
        while self.now < end:
            self.now += 10
            for node in VOTERS:
                self.drive(node)
            while self.network:
                envelope = self.network.popleft()
                if envelope.source in self.blocked or envelope.destination in self.blocked:
                    continue
                self.qcs[envelope.destination].step(self.now, envelope)
                self.drive(envelope.destination)

    def leader(self, among: tuple[int, ...] = VOTERS) -> int:
        for _ in range(2000):
            leaders = [n for n in among if self.qcs[n].core.role is Role.LEADER and self.qcs[n].active]
            if leaders:
                return leaders[0]
            self.advance(50)
        raise AssertionError("no leader was elected")

    def fence_through_a_session_timeout(self, leader: int) -> tuple[int, int]:
        """Register broker 1 through ``leader`` (committed), then let its session run out there:
        the leader proposes the fence. Returns (the leader's epoch, the fence batch's last offset)."""
        qc = self.qcs[leader]
        qc.submit(self.now, 1, "RegisterBroker", register(1))
        self.advance(100)
        assert 1 in qc.controller.committed_image.brokers
        epoch = qc.controller.image.brokers[1].epoch
        beat = controller_pb2.BrokerHeartbeatRequest(broker_id=1, broker_epoch=epoch)
        qc.submit(self.now, 2, "BrokerHeartbeat", beat)
        self.advance(100)
        assert not qc.controller.committed_image.brokers[1].fenced
        self.events[leader].clear()
        qc.controller.last_contact_ms[1] = self.now - SESSION_EXPIRED_MS  # its session ran out
        qc.tick(self.now)
        assert qc.controller.image.brokers[1].fenced, "the fence is proposed"
        return qc.core.epoch, qc.core.log_end_offset - 1


def changes(events: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    return [(m, f) for m, f in events if m.startswith(("broker", "partition", "controller changes"))]


def test_a_change_is_logged_when_its_batch_commits_with_its_epoch_and_offset() -> None:
    plane = Plane()
    leader = plane.leader()
    epoch, offset = plane.fence_through_a_session_timeout(leader)
    plane.events[leader].extend(plane.qcs[leader].take_events())
    assert changes(plane.events[leader]) == [], "proposed, not committed: not a fact yet"
    plane.advance(100)
    [(message, fields)] = changes(plane.events[leader])
    assert message == "broker fenced"
    assert (fields["broker_id"], fields["epoch"], fields["offset"]) == (1, epoch, offset)
    assert fields["cause"] == "broker session expired" and fields["commit_ms"] >= 0


def test_a_deposed_leader_logs_its_truncated_change_as_dropped_not_as_a_fact() -> None:
    plane = Plane()
    old = plane.leader()
    plane.blocked = {old}  # cut off: what it proposes now can never commit in its epoch
    qc = plane.qcs[old]
    qc.submit(plane.now, 1, "RegisterBroker", register(1))
    plane.advance(10)
    assert changes(plane.events[old]) == [], "the registration did not commit while cut off"
    proposed_epoch, proposed_offset = qc.core.epoch, qc.core.log_end_offset - 1
    others = tuple(n for n in VOTERS if n != old)
    new = plane.leader(among=others)
    assert plane.qcs[new].core.epoch > proposed_epoch
    plane.blocked = set()
    for _ in range(100):
        plane.advance(50)
        if plane.qcs[old].controller.committed_offset >= proposed_offset:
            break
    assert "broker registered" not in [m for m, _ in changes(plane.events[old])], "never logged as a fact"
    [(message, fields)] = changes(plane.events[old])
    assert message == "controller changes dropped: their batch was not committed"
    assert (fields["epoch"], fields["offset"], fields["changes"]) == (proposed_epoch, proposed_offset, 1)
    assert fields["first_change"] == "broker registered"
    assert 1 not in plane.qcs[old].controller.committed_image.brokers
