"""A tiny in-process driver for protocol tests: cores joined by a FIFO network that the test
controls (deliver everything, block links, advance time), performing each Ready exactly as the
driver contract says, with an immediate fsync unless a node's disk is told to stall."""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from raftmeta.raft import Entry, Envelope, Faults, QuorumStateData, RaftConfig, RaftCore, Ready, Role
from raftmeta.records.codec import encode_batch


class SeededSource:
    """The injected RandomSource, seeded."""

    def __init__(self, seed: int = 0) -> None:
        self._random = random.Random(seed)

    def next_int(self, bound: int) -> int:
        return self._random.randrange(bound)


def make_log(epochs: Sequence[int], start: int = 0) -> list[Entry]:
    """One single-record batch per epoch in ``epochs`` (the Raft paper's figures, 0-based)."""
    entries = []
    for i, epoch in enumerate(epochs):
        offset = start + i
        data = encode_batch(offset, epoch, [b"r%d-%d" % (offset, epoch)], 0)
        entries.append(Entry(offset, epoch, offset + 1, data))
    return entries


class Net:
    def __init__(
        self,
        voters: Iterable[int],
        observers: Iterable[int] = (),
        *,
        logs: dict[int, list[Entry]] | None = None,
        quorum_states: dict[int, QuorumStateData] | None = None,
        damaged: dict[int, list[int]] | None = None,
        damaged_epochs: dict[int, dict[int, int]] | None = None,
        seed: int = 0,
        faults: Faults | None = None,
        **config: Any,
    ) -> None:
        self.voters = tuple(voters)
        self.observers = tuple(observers)
        self.now = 0
        self.network: deque[Envelope] = deque()
        self.blocked: set[tuple[int, int]] = set()
        self.stalled_disks: set[int] = set()
        self.down: set[int] = set()
        self.drop: Callable[[Envelope], bool] | None = None
        self.committed: dict[int, list[Entry]] = {}
        self.persisted: dict[int, QuorumStateData] = {}
        self.readies: dict[int, list[Ready]] = {}
        self.delivered: list[Envelope] = []
        self.config = config
        self.faults = faults or Faults()
        self.cores: dict[int, RaftCore] = {}
        for node in self.voters + self.observers:
            self.cores[node] = RaftCore(
                RaftConfig(node_id=node, voters=self.voters, cluster_id="t", faults=self.faults, **config),
                SeededSource(seed * 100 + node),
                self.now,
                quorum_state=(quorum_states or {}).get(node),
                entries=(logs or {}).get(node, []),
                damaged=(damaged or {}).get(node, []),
                damaged_epochs=(damaged_epochs or {}).get(node),
            )
            self.committed[node] = []
            self.readies[node] = []
            self.drive(node)

    # -- the driver --------------------------------------------------------------------------------
    def drive(self, node: int) -> int:
        core = self.cores[node]
        deadline = core.poll(self.now)
        while True:
            ready = core.take_ready()
            if ready.is_empty():
                return deadline
            self.readies[node].append(ready)
            if ready.quorum_state is not None:
                self.persisted[node] = ready.quorum_state
            self.network.extend(ready.messages)
            if ready.install_snapshot is not None:
                self.committed[node] = []  # as the node: the install first, then the Ready's commits
            self.committed[node].extend(ready.committed)
            if ready.flush and node not in self.stalled_disks:
                core.on_log_flushed(self.now, core.log_end_offset, ready.seq)
            deadline = core.poll(self.now)

    def flush(self, node: int) -> None:
        core = self.cores[node]
        self.stalled_disks.discard(node)
        core.on_log_flushed(self.now, core.log_end_offset, 1 << 62)
        self.drive(node)

    def deliver_all(self, limit: int = 100_000) -> None:
        for _ in range(limit):
            if not self.network:
                return
            self.deliver_one()
        raise AssertionError("the network did not go quiet")

    def deliver_one(self) -> Envelope:
        envelope = self.network.popleft()
        if (
            (envelope.source, envelope.destination) in self.blocked
            or envelope.destination in self.down
            or (self.drop is not None and self.drop(envelope))
        ):
            return envelope
        self.delivered.append(envelope)
        self.cores[envelope.destination].step(self.now, envelope)
        self.drive(envelope.destination)
        return envelope

    def advance(self, ms: int, step_ms: int = 10) -> None:
        """Let time pass in steps, firing timers and delivering everything at each step."""
        end = self.now + ms
        while self.now < end:
            self.now = min(end, self.now + step_ms)
            for node in self.cores:
                if node not in self.down:
                    self.drive(node)
            self.deliver_all()

    # -- helpers -----------------------------------------------------------------------------------
    def isolate(self, node: int) -> None:
        for other in self.cores:
            if other != node:
                self.blocked |= {(node, other), (other, node)}

    def heal(self) -> None:
        self.blocked.clear()

    def leaders(self) -> list[int]:
        return [n for n, c in self.cores.items() if c.role is Role.LEADER and n not in self.down]

    def leader(self) -> int:
        leaders = self.leaders()
        assert len(leaders) == 1, f"expected one leader, found {leaders}"
        return leaders[0]

    def elect(self, max_ms: int = 20_000) -> int:
        waited = 0
        while not self.leaders() and waited < max_ms:
            self.advance(50)
            waited += 50
        return self.leader()

    def elect_and_commit(self, creates: int) -> int:
        """Elect a leader and commit ``creates`` batches of one record each, one at a time, on every
        voter (the high watermark reaches the followers too); returns the leader."""
        leader = self.elect()
        for i in range(creates):
            self.cores[leader].propose(self.now, [b"create-%d" % i])
            self.drive(leader)
            self.deliver_all()
        self.advance(200)
        return leader

    def epochs_of(self, node: int) -> list[int]:
        return [e.epoch for e in self.cores[node].log.entries()]
