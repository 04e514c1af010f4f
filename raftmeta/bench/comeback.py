"""A wiped voter's way back, phase by phase: where ``bench scale``'s wiped-follower seconds go.

Both systems bring a voter with an empty log back the same way -- start it, it finds the leader
and fetches, the leader sends its snapshot, the voter loads it and fetches the log after it --
and KRaft adds what its dynamic quorum needs: ``kafka-storage format`` first, and once the new
directory has caught up as an observer, the old voter removed and the new one added. The marks
come from the voter's own log (its clock; the bench runs on the same machine), read once the
voter is back; the ends are the leader's DescribeQuorum timestamps the bench already takes:

* **format**: ``kafka-storage format`` (KRaft); raftmeta has no such step (0);
* **start to following**: the process started until it follows the leader -- raftmeta's
  ``role changed`` to follower, KRaft's ``Completed transition to FollowerState`` (its first
  Fetch goes out at once): interpreter or JVM start, opening the empty log, finding the leader;
* **snapshot**: from following until the snapshot is fetched and the log starts at it --
  raftmeta's ``installed snapshot from the leader`` (its image is built from it by then),
  KafkaRaftClient's ``Fully truncated the log at (...) after downloading snapshot`` (KRaft's
  controller loads it into its image beside the fetching that goes on);
* **log catch-up**: from the loaded snapshot until the leader saw the voter caught up (KRaft: as
  an observer);
* **readmission**: KRaft: from the observer caught up until the new directory is a voter caught
  up (RemoveRaftVoter, AddRaftVoter, a retry while the leader says it is not ready); raftmeta's
  voter never left the voter set (0).

A mark that is not in the log (a voter that fetched the log rather than a snapshot) leaves its
phase None, and the next phase runs from the mark before it; the phases after the format always
add up to the wiped follower's ``seconds``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import Any, Final

FOLLOWING: Final = "following"
# The leader's caught-up time is whole milliseconds, and raftmeta's is its whole-millisecond clock
# minus a whole number of milliseconds ago: up to 2 ms before the finer-grained marks it follows.
END_RESOLUTION_S: Final = 0.002
SNAPSHOT_LOADED: Final = "snapshot_loaded"
KRAFT_LINE: Final = re.compile(r"^\[([0-9-]+ [0-9:,]+)\] (.*)$")
KRAFT_TIME_FORMAT: Final = "%Y-%m-%d %H:%M:%S,%f"
KRAFT_MARKS: Final = {
    FOLLOWING: re.compile(r"Completed transition to FollowerState"),
    SNAPSHOT_LOADED: re.compile(r"Fully truncated the log at .* after downloading snapshot"),
}
RAFTMETA_MARKS: Final[dict[str, Callable[[dict[str, Any]], bool]]] = {
    FOLLOWING: lambda event: event.get("event") == "role changed" and event.get("role") == "follower",
    SNAPSHOT_LOADED: lambda event: event.get("event") == "installed snapshot from the leader",
}


def _first_after(marks: Iterable[tuple[str, float]], since_s: float) -> dict[str, float]:
    found: dict[str, float] = {}
    for name, at in marks:
        if at >= since_s and name not in found:
            found[name] = at
    return found


def raftmeta_marks(log: Path, since_s: float) -> dict[str, float]:
    """The first time (Unix seconds) of each mark at or after ``since_s`` in a node's JSON log."""

    def marks() -> Iterable[tuple[str, float]]:
        with open(log, encoding="utf-8", errors="replace") as lines:
            for line in lines:
                if not line.startswith("{"):
                    continue
                try:
                    event = json.loads(line)
                    at = datetime.fromisoformat(str(event["timestamp"]).replace("Z", "+00:00")).timestamp()
                except (ValueError, KeyError):
                    continue  # a line of some other writer (stderr), not a log event
                for name, matches in RAFTMETA_MARKS.items():
                    if matches(event):
                        yield name, at

    return _first_after(marks(), since_s)


def kraft_marks(server_log: Path, since_s: float) -> dict[str, float]:
    """The first time of each mark at or after ``since_s`` in a KRaft controller's server.log
    (log4j's local time, as the JVM on this machine writes it)."""

    def marks() -> Iterable[tuple[str, float]]:
        with open(server_log, encoding="utf-8", errors="replace") as lines:
            for line in lines:
                parsed = KRAFT_LINE.match(line)
                if parsed is None:
                    continue
                for name, pattern in KRAFT_MARKS.items():
                    if pattern.search(parsed.group(2)):
                        yield name, datetime.strptime(parsed.group(1), KRAFT_TIME_FORMAT).timestamp()

    return _first_after(marks(), since_s)


def phases(
    started_s: float,
    marks: dict[str, float],
    caught_up_s: float,
    seconds: float,
    format_s: float = 0.0,
) -> dict[str, Any]:
    """The phases (seconds, rounded to ms) from the marks and the run's own figures: ``caught_up_s``
    and ``seconds`` are from the start to the log caught up (KRaft: as an observer) and to the
    voter caught up. A mark out of order (clock steps) is ignored like a missing one.

    The ends are whole milliseconds (``END_RESOLUTION_S``) and the marks are finer, so a mark
    just after the caught-up time is in order: it is taken as at it."""
    result: dict[str, float | None] = {"format": round(format_s, 3)}
    previous = 0.0
    for name, mark in (("start_to_following", FOLLOWING), ("snapshot", SNAPSHOT_LOADED)):
        at = marks.get(mark)
        offset = None if at is None else at - started_s
        if offset is not None and caught_up_s < offset < caught_up_s + END_RESOLUTION_S:
            offset = caught_up_s
        if offset is None or not previous <= offset <= caught_up_s:
            result[name] = None
            continue
        result[name] = round(offset - previous, 3)
        previous = offset
    result["log_catch_up"] = round(caught_up_s - previous, 3)
    result["readmission"] = round(seconds - caught_up_s, 3)
    return {"phases_s": result, "marks": {name: round(at - started_s, 3) for name, at in sorted(marks.items())}}
