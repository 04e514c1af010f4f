"""The verdict vocabulary of the verify jobs: named checks that pass or fail with a detail that
names the node, offset, topic or partition involved."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# How many offending items a detail lists before it says "and N more".
EXAMPLES_MAX = 10


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    passed: bool
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "passed": self.passed, "detail": self.detail}


def listed(items: list[str], total: int | None = None) -> str:
    """``a; b; c`` with at most EXAMPLES_MAX items and a count of the rest."""
    count = len(items) if total is None else total
    shown = "; ".join(items[:EXAMPLES_MAX])
    rest = count - min(len(items), EXAMPLES_MAX)
    return shown + (f"; and {rest} more" if rest > 0 else "")
