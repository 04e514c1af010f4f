"""The run's timeline: every fault, heal and leader change, stamped with the wall clock.

Events are logged as they happen (one compact line each, TigerBeetle's VOPR style) and kept for
the report and the availability figures.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Literal

from raftmeta.logs import get_logger

# "request": one AddRaftVoter / RemoveRaftVoter attempt of a membership fault and its answer.
EventKind = Literal["fault", "heal", "request", "leader", "phase"]
log = get_logger("chaos")


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class Event:
    t_ms: int
    kind: EventKind
    family: str  # kill, pause, partition, torn-write, broker, membership; "" for leader and phase events
    detail: str
    fault_id: int = -1  # pairs a fault with its heal

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class Timeline:
    def __init__(self, echo: Callable[[str], None] | None = None) -> None:
        self.events: list[Event] = []
        self._echo = echo

    def add(self, kind: EventKind, family: str, detail: str, fault_id: int = -1) -> Event:
        event = Event(wall_ms(), kind, family, detail, fault_id)
        self.events.append(event)
        line = f"{kind} {family} {detail}".replace("  ", " ").strip()
        log.info(line, t_ms=event.t_ms, fault_id=fault_id)
        if self._echo is not None:
            self._echo(f"{time.strftime('%H:%M:%S', time.gmtime(event.t_ms / 1000))}.{event.t_ms % 1000:03d} {line}")
        return event

    def fault_windows(self) -> list[tuple[int, int, str, str]]:
        """(start_ms, end_ms, family, detail) of every fault that was healed (or ends at the last event)."""
        starts = {e.fault_id: e for e in self.events if e.kind == "fault"}
        ends = {e.fault_id: e for e in self.events if e.kind == "heal"}
        last = max((e.t_ms for e in self.events), default=0)
        return [
            (start.t_ms, ends[fid].t_ms if fid in ends else last, start.family, start.detail)
            for fid, start in sorted(starts.items())
        ]
