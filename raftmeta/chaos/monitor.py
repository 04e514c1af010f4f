"""Watches the quorum through DescribeQuorum: leader changes for the timeline, the current leader
for the nemesis, and convergence at the end (every voter's log end offset, and every other node's
as an observer, equals the leader's high watermark)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

from raftmeta.chaos.events import Timeline
from raftmeta.client import ClientError, ControllerClient, RetryPolicy
from raftmeta.v1 import controller_pb2

POLL_INTERVAL_S = 0.25
NO_LEADER_TEXT = "no leader answers"


class QuorumMonitor:
    def __init__(self, bootstrap: str, timeline: Timeline, on_answer: Callable[[int, int], None] | None = None) -> None:
        self.client = ControllerClient(bootstrap, retry=RetryPolicy(deadline_s=1.0, attempt_timeout_s=0.5))
        self.timeline = timeline
        self.leader_id = -1
        self.epoch = -1
        self._task: asyncio.Task[None] | None = None
        self._on_answer = on_answer  # (leader id, high watermark) of every answer
        self.final_voters: list[int] = []  # the voters of the last converged answer

    async def describe(self) -> controller_pb2.DescribeQuorumResponse | None:
        try:
            answer = await self.client.describe_quorum()
        except ClientError:
            answer = None
        if answer is None or answer.leader_id < 0:
            if self.leader_id != -1:
                self.leader_id = -1
                self.timeline.add("leader", "", NO_LEADER_TEXT)
            return answer
        if answer.leader_id >= 0 and self._on_answer is not None:
            self._on_answer(answer.leader_id, answer.high_watermark)
        if answer.leader_id >= 0 and (answer.leader_id, answer.leader_epoch) != (self.leader_id, self.epoch):
            self.leader_id, self.epoch = answer.leader_id, answer.leader_epoch
            self.timeline.add("leader", "", f"node {answer.leader_id} leads epoch {answer.leader_epoch}")
        return answer

    async def current_leader(self) -> int:
        """The leader, from a fresh answer (within a second); -1 when none answers."""
        await self.describe()
        return self.leader_id

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            await self.describe()
            await asyncio.sleep(POLL_INTERVAL_S)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.client.close()

    async def wait_converged(self, nodes: list[int], timeout_s: float) -> tuple[bool, int, str]:
        """Poll until a leader reports every replica's log end offset equal to its high watermark:
        every voter of the set in force, and every other node of ``nodes`` as an observer (the
        voter set changes under the membership faults; a node out of it still replicates).

        Returns (converged, milliseconds waited, the last state seen, for the report)."""
        start = time.monotonic()
        last = "no answer from the quorum"
        while time.monotonic() - start < timeout_s:
            answer = await self.describe()
            if answer is not None and answer.leader_id >= 0:
                ends = {v.replica_id: v.log_end_offset for v in answer.voters}
                observed = {o.replica_id: o.log_end_offset for o in answer.observers}
                last = f"leader {answer.leader_id}, high watermark {answer.high_watermark}, voters' log ends {ends}" + (
                    f", observers' {observed}" if observed else ""
                )
                replicas = observed | ends
                if (
                    ends
                    and set(nodes) <= set(replicas)
                    and all(replicas[i] == answer.high_watermark for i in set(nodes) | set(ends))
                ):
                    self.final_voters = sorted(ends)
                    return True, int((time.monotonic() - start) * 1000), last
            await asyncio.sleep(POLL_INTERVAL_S)
        return False, int((time.monotonic() - start) * 1000), last
