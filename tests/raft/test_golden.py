"""Golden interaction scripts (etcd-io/raft testdata/*.txt style): a scripted scenario's every
delivered message and role change, compared with a checked-in transcript. Regenerate after an
intended protocol change with ``RAFTMETA_REWRITE_GOLDEN=1 pytest tests/raft/test_golden.py``
and review the diff like code."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from raftmeta.sim.cluster import describe_message

from .harness import Net

TESTDATA = Path(__file__).parent / "testdata"


class Transcript:
    def __init__(self, net: Net) -> None:
        self.net = net
        self.lines: list[str] = []
        self._seen = 0
        self._roles = {n: (c.role, c.epoch, c.leader_id) for n, c in net.cores.items()}

    def note(self, text: str) -> None:
        self.lines.append(f"# {text}")

    def collect(self) -> None:
        for envelope in self.net.delivered[self._seen :]:
            self.lines.append(f"n{envelope.source}->n{envelope.destination} {describe_message(envelope)}")
        self._seen = len(self.net.delivered)
        for node, core in self.net.cores.items():
            now = (core.role, core.epoch, core.leader_id)
            if now != self._roles[node]:
                self._roles[node] = now
                self.lines.append(f"n{node}: {core.role.value} epoch={core.epoch} leader={core.leader_id}")

    def run(self, ms: int) -> None:
        end = self.net.now + ms
        while self.net.now < end:
            self.net.advance(10)
            self.collect()


def election_and_failover(t: Transcript) -> None:
    net = t.net
    t.note("three voters elect a leader")
    t.run(3_000)
    leader = net.leader()
    t.note(f"n{leader} commits one proposal")
    net.cores[leader].propose(net.now, [b"hello"])
    t.run(300)
    t.note(f"n{leader} is cut off; the others elect a new leader")
    net.isolate(leader)
    t.run(6_000)
    t.note("healed: the old leader follows and converges")
    net.heal()
    t.run(3_000)


def transfer(t: Transcript) -> None:
    net = t.net
    t.run(3_000)
    leader = net.leader()
    target = max(n for n in net.cores if n != leader)
    t.note(f"n{leader} transfers leadership to n{target}")
    net.cores[leader].transfer_leadership(net.now, target)
    net.drive(leader)
    t.run(1_000)


SCENARIOS: dict[str, Callable[[Transcript], None]] = {
    "election_and_failover": election_and_failover,
    "transfer": transfer,
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_golden_transcript(name: str) -> None:
    net = Net([1, 2, 3], seed=7)
    transcript = Transcript(net)
    SCENARIOS[name](transcript)
    text = "\n".join(transcript.lines) + "\n"
    path = TESTDATA / f"{name}.txt"
    if os.environ.get("RAFTMETA_REWRITE_GOLDEN") == "1":
        path.write_text(text)
    assert path.exists(), f"no golden file {path}: run with RAFTMETA_REWRITE_GOLDEN=1"
    assert text == path.read_text(), f"transcript of {name} changed; review and regenerate if intended"
