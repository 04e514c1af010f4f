"""raftmeta beside a real KRaft cluster in one document: the ratio of each figure, pure.

Every ratio is raftmeta's figure over KRaft's, measured in the same run. Whether a ratio is good
depends on the figure: a throughput is good at 1.0 or more (raftmeta does at least as much), a
latency, a time, a CPU cost or a memory figure at 1.0 or less (raftmeta takes no longer, costs no
more). :data:`BETTER` says which, per figure; a document carries it next to its ratios.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

from raftmeta.bench.results import median_of_rounds

Better = Literal["higher", "lower"]
TARGETS: Final = ("raftmeta", "kraft", "both")
SIDES: Final = ("raftmeta", "kraft")

# Figure (a dotted path into a side's document) -> which way is better for raftmeta.
COMMIT_BETTER: Final[dict[str, Better]] = {
    "ops_per_s": "higher",
    "records_per_s": "higher",
    "latency_ms.mean": "lower",
    "latency_ms.p50": "lower",
    "latency_ms.p99": "lower",
    "node_cpu_ms_per_op": "lower",
    "leader_cpu_ms_per_op": "lower",
}


def failover_better(faults: Sequence[str]) -> dict[str, Better]:
    """Every fault's first-create and every-client times: lower is better."""
    return {
        f"faults.{fault}.{figure}.{stat}": "lower"
        for fault in faults
        for figure in ("failover_ms", "all_clients_ms")
        for stat in ("median", "p99")
    }


def lookup(document: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted path, None where any part is missing."""
    value: Any = document
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def ratios(
    raftmeta: Mapping[str, Any], kraft: Mapping[str, Any], better: Mapping[str, Better]
) -> dict[str, float | None]:
    """raftmeta's figure over KRaft's for each path of ``better`` (3 decimals); None where either
    side has no figure or KRaft's is zero (no ratio can be formed)."""
    result: dict[str, float | None] = {}
    for path in better:
        ours, theirs = lookup(raftmeta, path), lookup(kraft, path)
        numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (ours, theirs))
        result[path] = round(ours / theirs, 3) if numbers and theirs else None
    return result


def meets_target(ratio: Mapping[str, float | None], better: Mapping[str, Better]) -> dict[str, bool | None]:
    """Per figure: does raftmeta at least match KRaft (>= 1.0 for higher-is-better, <= 1.0 for
    lower-is-better)? None where there is no ratio."""
    verdicts: dict[str, bool | None] = {}
    for path, value in ratio.items():
        verdicts[path] = None if value is None else (value >= 1.0 if better[path] == "higher" else value <= 1.0)
    return verdicts


def side_by_side(rounds: Sequence[Mapping[str, Any]], better: Mapping[str, Better]) -> dict[str, Any]:
    """The comparison's part of a document from its rounds (each with the sides it measured and,
    when it measured both, their ``ratio``): each side's medians over the rounds, the median of
    the rounds' ratios (same-round ratios: a machine whose speed drifts over the run moves both
    sides of each), which way each ratio is good, and whether raftmeta meets it."""
    merged = median_of_rounds(rounds, summed=frozenset({"errors"}))
    document: dict[str, Any] = {side: merged[side] for side in SIDES if side in merged}
    if "ratio" in merged:
        ratio = {path: merged["ratio"].get(path) for path in better}
        document["ratio"] = ratio
        document["ratio_better"] = dict(better)
        document["meets_target"] = meets_target(ratio, better)
    return document
