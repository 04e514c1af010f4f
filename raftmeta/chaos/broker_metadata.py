"""Whether every real Kafka broker's metadata converged to what the quorum committed.

After the heal, each broker is asked for Metadata (every topic, answered from that broker's own
metadata image, which it replays from raftmeta's log as an observer) and its answer is compared,
topic by topic and partition by partition, with the active controller's DescribeTopics (a
linearizable read of the committed image): the same topics, the same partition counts, and per
partition the same leader, leader epoch, replicas (in order) and ISR. A broker replays each commit
within a fetch round of the leader's, so it is given a bounded time to catch up -- the node's broker
session timeout, the time within which the controller expects to hear from a live broker at
all -- and the controller's view is read again on every round (an ISR change still committing
moves both sides).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from raftmeta.jobs.checks import Check
from raftmeta.kraft.probe import PartitionView, ProbeError, topic_partitions
from raftmeta.v1 import controller_pb2

Topics = dict[str, tuple[PartitionView, ...]]
PROBE_TIMEOUT_S = 5.0
ROUND_S = 0.25
SHOWN_DIFFERENCES = 8


def committed_topics(described: controller_pb2.DescribeTopicsResponse) -> Topics:
    """The controller's DescribeTopics as the brokers' Metadata answers it (pure)."""
    return {
        t.name: tuple(
            PartitionView(p.leader, p.leader_epoch, tuple(p.replicas), tuple(sorted(p.isr)))
            for p in sorted(t.partitions, key=lambda p: p.partition)
        )
        for t in described.topics
        if t.error_code == 0
    }


def differences(expected: Topics, seen: Topics) -> list[str]:
    """What ``seen`` (a broker's answer) has otherwise than ``expected`` (the committed image), one
    line per topic or partition, in name order (pure)."""
    lines = [f"{name}: missing" for name in sorted(expected.keys() - seen.keys())]
    lines += [f"{name}: not committed" for name in sorted(seen.keys() - expected.keys())]
    for name in sorted(expected.keys() & seen.keys()):
        want, got = expected[name], seen[name]
        if len(want) != len(got):
            lines.append(f"{name}: {len(got)} partitions, committed {len(want)}")
            continue
        for index, (w, g) in enumerate(zip(want, got, strict=True)):
            if w != g:
                lines.append(
                    f"{name}-{index}: leader {g.leader} epoch {g.leader_epoch} replicas {list(g.replicas)} "
                    f"isr {list(g.isr)}; committed leader {w.leader} epoch {w.leader_epoch} replicas "
                    f"{list(w.replicas)} isr {list(w.isr)}"
                )
    return lines


@dataclass(frozen=True, slots=True)
class BrokerVerdict:
    broker_id: int
    converged_ms: int | None  # after the comparison began; None: not within the bound
    topics: int  # topics in its last answer
    partitions: int
    last_differences: tuple[str, ...]

    def check(self, bound_s: float) -> Check:
        if self.converged_ms is not None:
            detail = (
                f"Metadata through broker {self.broker_id} equals the committed image ({self.topics} topics, "
                f"{self.partitions} partitions: leaders, epochs, replicas, ISRs) {self.converged_ms} ms after the "
                "comparison began"
            )
        else:
            detail = (
                f"Metadata through broker {self.broker_id} still differs from the committed image after "
                f"{bound_s:g} s: " + "; ".join(self.last_differences)
            )
        return Check(f"kafka:broker-{self.broker_id}-metadata-converged", self.converged_ms is not None, detail)

    def to_json(self) -> dict[str, Any]:
        return {
            "broker_id": self.broker_id,
            "converged_ms": self.converged_ms,
            "topics": self.topics,
            "partitions": self.partitions,
            "last_differences": list(self.last_differences),
        }


async def wait_converged(
    brokers: Mapping[int, str], committed: Callable[[], Awaitable[Topics | None]], bound_s: float
) -> list[BrokerVerdict]:
    """Ask each broker (id -> its Kafka listener) until its Metadata equals ``committed()`` (read
    again every round; None when the controller did not answer: that round compares nothing) or
    ``bound_s`` passes; one verdict per broker, in id order."""
    began = time.monotonic()
    pending = dict(brokers)
    last: dict[int, tuple[Topics, list[str]]] = {}
    done: dict[int, BrokerVerdict] = {}
    while True:
        expected = await committed()
        for broker_id, address in list(pending.items()):
            if expected is None:
                last[broker_id] = (
                    last.get(broker_id, ({}, []))[0],
                    ["the active controller did not describe its topics"],
                )
                continue
            try:
                seen = await asyncio.to_thread(topic_partitions, address, PROBE_TIMEOUT_S)
            except ProbeError as exc:
                last[broker_id] = ({}, [f"no answer: {exc}"])
                continue
            lines = differences(expected, seen)
            last[broker_id] = (seen, lines)
            if not lines:
                elapsed_ms = int((time.monotonic() - began) * 1000)
                done[broker_id] = _verdict(broker_id, seen, elapsed_ms, [])
                del pending[broker_id]
        if not pending or time.monotonic() - began > bound_s:
            break
        await asyncio.sleep(ROUND_S)
    for broker_id in pending:
        seen, lines = last.get(broker_id, ({}, ["never asked"]))
        done[broker_id] = _verdict(broker_id, seen, None, lines)
    return [done[i] for i in sorted(done)]


def _verdict(broker_id: int, seen: Topics, converged_ms: int | None, lines: list[str]) -> BrokerVerdict:
    return BrokerVerdict(
        broker_id,
        converged_ms,
        len(seen),
        sum(len(p) for p in seen.values()),
        tuple(lines[:SHOWN_DIFFERENCES])
        + ((f"... {len(lines) - SHOWN_DIFFERENCES} more",) if len(lines) > SHOWN_DIFFERENCES else ()),
    )
