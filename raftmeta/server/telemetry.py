"""What the node task reports about each Ready and each failed answer (docs/metrics.md): counters
are plain ints on the metrics' ``stats``, histograms observed once per Ready or request."""

from __future__ import annotations

import time
from typing import Any

from raftmeta.controller.errors import ControllerFailedError, NotControllerError
from raftmeta.metrics.node import NodeMetrics
from raftmeta.raft import Ready


def observe_ready(metrics: NodeMetrics, ready: Ready, leader: bool) -> None:
    """A Ready's appends and commits, before the node performs them."""
    appended = ready.append
    if appended:
        records = appended[-1].next_offset - appended[0].base_offset
        if leader:
            metrics.stats.append_records += records
            metrics.leader_appended(appended[-1].next_offset, time.perf_counter())
        else:
            metrics.stats.fetch_records += records
    if ready.committed:
        metrics.committed(ready.committed[-1].next_offset, len(ready.committed), time.perf_counter())


def observe_failed_answer(metrics: NodeMetrics, error: Exception, log: Any) -> None:
    """A request answered with an error: NOT_CONTROLLER counts as a failed proposal; a controller
    bug is counted and logged with its cause."""
    if isinstance(error, NotControllerError):
        metrics.stats.proposals_failed += 1
    elif isinstance(error, ControllerFailedError):
        metrics.stats.metadata_errors += 1
        log.error("controller failed on a request", error=str(error), exc_info=error.__cause__)
