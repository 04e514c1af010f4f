"""The verify report: ``report.json`` for scripts and ``report.html`` with PNG plots for people.

Plots: replicas and leaders per broker (placement's preferred leaders and the current ones),
the brokers grouped by rack on tinted bands, replicas and leaders per rack (with more than one
rack), the ISR size of every partition
(under-replicated ones in red), partition health at the end of the log (under-replicated, also
with every replica live, under min ISR, offline, leader away from the preferred replica), and the
committed and end offsets of every node when they differ. The page itself (verdicts, the
unhealthy partitions, brokers by rack, the topic x broker view): ``raftmeta.jobs.report_html``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from raftmeta.jobs.racks import by_rack, rack_colors, rack_of
from raftmeta.jobs.report_html import render_html

PLOT_DPI = 110
# Greys for the per-broker series: the colour of that plot is the racks' (its bands).
BROKER_SERIES_COLORS = ("#57606a", "#afb8c1", "#24292f")
# The health figures (raftmeta.jobs.health) drawn as bars, with their labels.
HEALTH_BARS = {
    "under_replicated_partitions": "under-replicated",
    "under_replicated_with_live_replicas": "under-replicated,\nevery replica live",
    "under_min_isr_partitions": "under min ISR",
    "offline_partitions": "offline\n(no leader)",
    "preferred_leader_away_partitions": "leader not the\npreferred replica",
}


def write_report(
    report_dir: Path, document: dict[str, Any], brokers: dict[int, tuple[str | None, str | None, bool]]
) -> dict[str, Path]:
    """Write report.json, the plots and report.html; return the paths written by name."""
    report_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": report_dir / "report.json", "html": report_dir / "report.html"}
    paths["json"].write_text(json.dumps(document, indent=2) + "\n")
    figures = document["figures"]
    paths.update(_plots(report_dir, figures, brokers))
    images = {k: v.name for k, v in paths.items() if v.suffix == ".png"}
    ids = by_rack(set(brokers) | {int(b) for b in figures.get("replicas_per_broker", {})}, brokers)
    paths["html"].write_text(render_html(document, images, brokers, ids, rack_colors(ids, brokers)))
    return paths


def _plots(
    report_dir: Path, figures: dict[str, Any], brokers: dict[int, tuple[str | None, str | None, bool]]
) -> dict[str, Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    out: dict[str, Path] = {}
    replicas = {int(k): v for k, v in figures.get("replicas_per_broker", {}).items()}
    preferred = {int(k): v for k, v in figures.get("preferred_leaders_per_broker", {}).items()}
    current = {int(k): v for k, v in figures.get("leaders_per_broker", {}).items()}
    ids = by_rack(set(replicas) | set(current) | set(brokers), brokers)
    if ids:
        fig, ax = plt.subplots(figsize=(max(6, 0.6 * len(ids) + 2), 3.8))
        _grouped_bars(
            ax,
            [f"{i}{'*' if brokers.get(i, (None, None, False))[2] else ''}" for i in ids],
            {
                "replicas": [replicas.get(i, 0) for i in ids],
                "preferred leaders": [preferred.get(i, 0) for i in ids],
                "current leaders": [current.get(i, 0) for i in ids],
            },
            colors=BROKER_SERIES_COLORS,
        )
        _rack_bands(ax, ids, brokers)
        ax.set_xlabel("broker, grouped by rack (* = fenced)")
        ax.set_title("Replicas and leaders per broker", pad=16)
        out["per_broker_png"] = _save(fig, report_dir / "per-broker.png")

    per_rack = figures.get("replicas_per_rack", {})
    leaders_rack = figures.get("leaders_per_rack", {})
    if len(per_rack) > 1:
        racks = sorted(per_rack)
        fig, ax = plt.subplots(figsize=(max(5, 0.9 * len(racks) + 2), 3.2))
        _grouped_bars(
            ax,
            racks,
            {"replicas": [per_rack[r] for r in racks], "leaders": [leaders_rack.get(r, 0) for r in racks]},
        )
        ax.set_xlabel("rack")
        ax.set_title("Replicas and leaders per rack")
        out["per_rack_png"] = _save(fig, report_dir / "per-rack.png")

    isr_sizes = figures.get("isr_size_counts", {})
    if isr_sizes:
        keys = sorted(isr_sizes, key=lambda k: (int(k.split("/")[1]), int(k.split("/")[0])))
        colors = ["#cf222e" if int(k.split("/")[0]) < int(k.split("/")[1]) else "#1a7f37" for k in keys]
        fig, ax = plt.subplots(figsize=(max(5, 0.7 * len(keys) + 2), 3.2))
        ax.bar(keys, [isr_sizes[k] for k in keys], color=colors)
        ax.set_xlabel("in-sync replicas / replicas (red: under-replicated)")
        ax.set_ylabel("partitions")
        ax.set_title("ISR size of every partition")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        out["isr_sizes_png"] = _save(fig, report_dir / "isr-sizes.png")

    health = {label: figures[key] for key, label in HEALTH_BARS.items() if key in figures}
    if health:
        fig, ax = plt.subplots(figsize=(7, 3.4))
        _grouped_bars(ax, list(health), {"partitions at the end of the log": list(health.values())})
        ax.set_title(f"Partition health ({figures.get('partitions', 0):,} partitions)")
        ax.tick_params(axis="x", labelsize=8)
        out["health_png"] = _save(fig, report_dir / "partition-health.png")

    committed = {int(k): v for k, v in figures.get("committed_offset_by_node", {}).items()}
    log_end = {int(k): v for k, v in figures.get("log_end_offset_by_node", {}).items()}
    # Only worth a picture when the nodes differ (equal bars say nothing the table does not).
    if committed and (len(set(committed.values())) > 1 or len({log_end.get(n, 0) for n in committed}) > 1):
        nodes = sorted(committed)
        fig, ax = plt.subplots(figsize=(5, 3.2))
        ax.bar([str(n) for n in nodes], [log_end.get(n, 0) for n in nodes], color="lightgray", label="log end offset")
        ax.bar([str(n) for n in nodes], [committed[n] for n in nodes], label="committed (high watermark)")
        ax.set_xlabel("node")
        ax.set_ylabel("offset")
        ax.set_title("Committed offset per node")
        _legend_below(ax, 2)
        out["offsets_png"] = _save(fig, report_dir / "committed-offsets.png")
    return out


def _rack_bands(ax: Any, ids: list[int], brokers: dict[int, tuple[str | None, str | None, bool]]) -> None:
    """A tinted band behind each rack's brokers, named above the bars."""
    colors = rack_colors(ids, brokers)
    start = 0
    for i in range(1, len(ids) + 1):
        if i == len(ids) or rack_of(ids[i], brokers) != rack_of(ids[start], brokers):
            rack = rack_of(ids[start], brokers)
            ax.axvspan(start - 0.5, i - 0.5, color=colors[rack], alpha=0.18, linewidth=0, zorder=0)
            ax.text((start + i - 1) / 2, 1.01, rack, transform=ax.get_xaxis_transform(), ha="center", va="bottom",
                    fontsize=8, color=colors[rack], fontweight="bold")  # fmt: skip
            start = i
    ax.set_xlim(-0.5, len(ids) - 0.5)


def _grouped_bars(
    ax: Any, labels: list[str], series: dict[str, list[int]], colors: tuple[str, ...] | None = None
) -> None:
    """One group of bars per label, one bar per series side by side, integer counts, the legend
    below the plot."""
    from matplotlib.ticker import MaxNLocator

    width = 0.8 / len(series)
    xs = range(len(labels))
    for k, (name, values) in enumerate(series.items()):
        offset = (k - (len(series) - 1) / 2) * width
        ax.bar([x + offset for x in xs], values, width, label=name, color=None if colors is None else colors[k])
    ax.set_xticks(list(xs), labels)
    ax.set_ylabel("count")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    _legend_below(ax, len(series))


def _legend_below(ax: Any, columns: int) -> None:
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=columns, frameon=False)


def _save(fig: Any, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=PLOT_DPI)
    plt.close(fig)
    return path
