"""Shared helpers for benchmarks: medians, percentiles and the JSON result file."""

from __future__ import annotations

import contextlib
import json
import platform
import shutil
import statistics
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def percentile(values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile (fraction in [0, 1]) of a non-empty sequence."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    rank = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return float(ordered[rank])


def median_of_rounds(rounds: Sequence[Mapping[str, Any]], summed: frozenset[str] = frozenset()) -> dict[str, Any]:
    """One document from the same benchmark run several times: each number is its median over
    the rounds that have it (3 decimals), nested documents are followed key by key, the keys in
    ``summed`` (counts, such as errors by kind) are added up instead, and anything else (names,
    flags, lists) is the first round's. One round gives that round back."""
    merged: dict[str, Any] = {}
    for key in dict.fromkeys(k for document in rounds for k in document):
        values = [document[key] for document in rounds if key in document]
        present = [v for v in values if v is not None]
        if key in summed:
            totals: dict[str, int] = {}
            for counts in present:
                for name, count in counts.items():
                    totals[name] = totals.get(name, 0) + count
            merged[key] = totals
        elif present and all(isinstance(v, Mapping) for v in present):
            merged[key] = median_of_rounds(present, summed)
        elif present and all(isinstance(v, int | float) and not isinstance(v, bool) for v in present):
            merged[key] = present[0] if len(present) == 1 else round(median(present), 3)
        else:
            merged[key] = values[0] if not present else present[0]
    return merged


def machine() -> dict[str, Any]:
    """What the numbers were measured on, stored next to them."""
    import os

    return {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()}


def write_result(document: dict[str, Any], path: Path | None) -> None:
    """Write the benchmark's JSON document to ``path`` (if given)."""
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(document, indent=2) + "\n")


@contextmanager
def scratch_dir(work_dir: Path | None, name: str) -> Iterator[Path]:
    """The benchmark's ``--work-dir``, created if missing and kept; without one, a new temp dir
    (``raftmeta-bench-NAME-*``) removed afterwards."""
    scratch = Path(tempfile.mkdtemp(prefix=f"raftmeta-bench-{name}-")) if work_dir is None else work_dir
    scratch.mkdir(parents=True, exist_ok=True)
    try:
        yield scratch
    finally:
        if work_dir is None:
            shutil.rmtree(scratch, ignore_errors=True)


def rss_bytes(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (peak) of a process, in bytes (Linux /proc); zeros if it is gone."""
    figures = {"rss": 0, "hwm": 0}
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                figures["rss" if key == "VmRSS" else "hwm"] = int(value.split()[0]) * 1024
    return figures


def option_given(name: str) -> bool:
    """Whether the user gave the current command's parameter ``name`` (on the command line or in
    the environment) rather than leaving it at its default."""
    from click.core import ParameterSource

    source = click.get_current_context().get_parameter_source(name)
    return source not in (None, ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP)


def refuse_options_given(options: Mapping[str, str], rule: str) -> None:
    """A usage error when the user gave any of ``options`` (parameter name -> its flag, as the help
    spells it), naming those given and ``rule``: an option that does not apply to the run asked
    for is refused rather than silently ignored."""
    given = [flag for name, flag in options.items() if option_given(name)]
    if given:
        raise click.UsageError(f"{', '.join(given)}: {rule}")


# The options every benchmark that needs them shares, spelled once.
work_dir_option = click.option(
    "--work-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Scratch directory (default: a new temp dir, removed after).",
)
result_file_option = click.option(
    "--result-file", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Also write the JSON here."
)
