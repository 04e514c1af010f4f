"""What a fuzz target reports: examples run, outcomes counted, failures with their inputs."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

# Distinct failures kept per target (with the input that reproduces each); the rest are counted.
FAILURES_MAX = 25
_NUMBERS = re.compile(r"\b\d+\b")


@dataclass
class TargetReport:
    name: str
    examples: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    failures: list[dict[str, Any]] = field(default_factory=list)
    failures_total: int = 0
    notes: list[str] = field(default_factory=list)
    _seen: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict, repr=False)

    @property
    def passed(self) -> bool:
        return self.failures_total == 0

    def count(self, label: str, n: int = 1) -> None:
        self.outcomes[label] += n

    def fail(self, kind: str, message: str, details: dict[str, Any] | None = None) -> None:
        """Record a failure. Repeats of one failure (the same message up to its numbers) are
        counted on the first, which keeps its reproducing input."""
        self.failures_total += 1
        key = (kind, _NUMBERS.sub("N", message))
        seen = self._seen.get(key)
        if seen is not None:
            seen["count"] += 1
            return
        if len(self.failures) >= FAILURES_MAX:
            return
        entry: dict[str, Any] = {"kind": kind, "message": message, "count": 1, **(details or {})}
        self._seen[key] = entry
        self.failures.append(entry)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "passed": self.passed,
            "examples": self.examples,
            "outcomes": dict(sorted(self.outcomes.items())),
            "failures": self.failures,
            "failures_total": self.failures_total,
            "notes": self.notes,
        }


__all__ = ["FAILURES_MAX", "TargetReport"]
