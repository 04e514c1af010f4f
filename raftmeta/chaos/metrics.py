"""The nodes' own metrics during a chaos run (docs/metrics.md): each node's /metrics is scraped
once a second, and the report's timeline gains the leader changes the nodes counted and the
commit latency their leaders measured.

A scrape that does not answer (a killed or paused node) is simply missing from that round. The
commit latency of a round merges every node's histogram growth since its previous answer --
only leaders observe it, so this follows leadership across failovers; a node whose counters went
back (it restarted) contributes nothing to that round.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any

from raftmeta.chaos.events import wall_ms
from raftmeta.metrics.scrape import COMMIT_LATENCY, Labels, Scrape, fetch

INTERVAL_S = 1.0
SCRAPE_TIMEOUT_S = 0.5
LEADER_CHANGES = "raftmeta_raft_leader_changes_seen_total"
REPAIRS = "raftmeta_raft_repairs_total"
DAMAGED = "raftmeta_raft_damaged_batches"


@dataclass
class MetricsRecorder:
    """Scrapes ``endpoints`` (node id -> HOST:PORT) until cancelled; never raises."""

    endpoints: dict[int, str]
    rounds: list[dict[str, Any]] = field(default_factory=list)
    _last: dict[int, Scrape] = field(default_factory=dict)

    async def run(self) -> None:
        while True:
            with contextlib.suppress(Exception):  # the run's checks must not depend on the metrics
                await self.sample()
            await asyncio.sleep(INTERVAL_S)

    async def sample(self) -> None:
        nodes = sorted(self.endpoints)
        answers = await asyncio.gather(
            *(asyncio.to_thread(fetch, self.endpoints[n], timeout_s=SCRAPE_TIMEOUT_S) for n in nodes),
            return_exceptions=True,
        )
        scrapes = {n: a for n, a in zip(nodes, answers, strict=True) if isinstance(a, Scrape)}
        self.rounds.append(summarize(wall_ms(), scrapes, self._last))
        self._last.update(scrapes)

    def figures(self) -> dict[str, Any]:
        return {"interval_s": INTERVAL_S, "rounds": self.rounds}


def summarize(t_ms: int, scrapes: dict[int, Scrape], last: dict[int, Scrape]) -> dict[str, Any]:
    """One round: per node its leader, epoch, the leader changes it counted since its previous
    answer and its repair counters; the commit latency (p50/p99 ms) of the leaders' observations since then."""
    nodes: dict[str, dict[str, Any]] = {}
    merged: dict[Labels, float] = {}
    for node_id, scrape in scrapes.items():
        previous = last.get(node_id)
        changes = scrape.get(LEADER_CHANGES) or 0.0
        before = previous.get(LEADER_CHANGES) if previous is not None else None
        nodes[str(node_id)] = {
            "leader": _int(scrape.get("raftmeta_raft_current_leader")),
            "epoch": _int(scrape.get("raftmeta_raft_current_epoch")),
            "leader_changes": int(changes - before) if before is not None and changes >= before else 0,
            # Repair from the quorum (docs/storage.md): batches repaired by this incarnation so far,
            # and found damaged and not repaired yet.
            "repairs": _int(scrape.get(REPAIRS)),
            "damaged_batches": _int(scrape.get(DAMAGED)),
        }
        if previous is None:
            continue
        now = scrape.series(f"{COMMIT_LATENCY}_bucket")
        then = previous.series(f"{COMMIT_LATENCY}_bucket")
        delta = {labels: count - then.get(labels, 0.0) for labels, count in now.items()}
        if any(v < 0 for v in delta.values()):
            continue  # restarted: its counters began again
        for labels, v in delta.items():
            merged[labels] = merged.get(labels, 0.0) + v
    window = Scrape({f"{COMMIT_LATENCY}_bucket": merged})
    p50 = window.histogram_quantile(COMMIT_LATENCY, 0.5)
    p99 = window.histogram_quantile(COMMIT_LATENCY, 0.99)
    return {
        "t_ms": t_ms,
        "nodes": nodes,
        "commit_latency_p50_ms": None if p50 is None else round(p50 * 1000, 3),
        "commit_latency_p99_ms": None if p99 is None else round(p99 * 1000, 3),
    }


def _int(value: float | None) -> int | None:
    return None if value is None else int(value)
