"""Shared helpers for benchmarks: medians, percentiles and the JSON result file."""

from __future__ import annotations

import json
import platform
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def percentile(values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile (fraction in [0, 1]) of a non-empty sequence."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    rank = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return float(ordered[rank])


def machine() -> dict[str, Any]:
    """What the numbers were measured on, stored next to them."""
    import os

    return {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()}


def write_result(document: dict[str, Any], path: Path | None) -> None:
    """Write the benchmark's JSON document to ``path`` (if given)."""
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(document, indent=2) + "\n")
