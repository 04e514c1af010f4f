"""The chaos report: ``report.json`` for scripts, ``report.html`` + ``timeline.png`` for people.

The timeline plot has panels sharing the time axis (seconds since the fault phase began):
fault windows as coloured spans with the leader (node id) as a step line on top, and every
operation as a dot at its completion time (green ok, grey fail, red unknown) on a row per kind;
with the nodes' metrics (figures["node_metrics"], raftmeta/chaos/metrics.py) a third panel shows
the commit latency the leaders measured, each second, and the leader changes the nodes counted.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from raftmeta.chaos.monitor import NO_LEADER_TEXT

if TYPE_CHECKING:
    from raftmeta.chaos.runner import ChaosResult

PLOT_DPI = 110
FAMILY_COLOURS = {
    "kill": "#d62728",
    "pause": "#9467bd",
    "partition": "#1f77b4",
    "torn-write": "#8c564b",
    "broker": "#ff7f0e",
    "membership": "#17becf",
    "kafka-broker": "#e377c2",
}
OUTCOME_COLOURS = {"ok": "#2ca02c", "fail": "#7f7f7f", "unknown": "#d62728"}
KIND_ROWS = {
    "create_topic": 4,
    "create_partitions": 3,
    "delete_topic": 2,
    "reassign_partition": 1,
    "cancel_reassignment": 0,
}


def write_report(result: ChaosResult) -> dict[str, Path]:
    out = result.config.report_dir
    out.mkdir(parents=True, exist_ok=True)
    document = result.to_json()
    paths = {"json": out / "report.json", "html": out / "report.html", "timeline_png": out / "timeline.png"}
    paths["json"].write_text(json.dumps(document, indent=2) + "\n")
    _timeline_png(result, paths["timeline_png"])
    paths["html"].write_text(_html(document, paths["timeline_png"].name))
    # Written by the checks (raftmeta.chaos.linearizable) when the history is not linearizable.
    timeline = result.figures.get("linearizability", {}).get("timeline")
    if timeline:
        paths["linearizability_timeline"] = out / timeline
    return paths


def _timeline_png(result: ChaosResult, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t0 = result.started_ms
    rounds = [r for r in result.figures.get("node_metrics", {}).get("rounds", []) if r["t_ms"] >= t0]
    if rounds:
        fig, (top, bottom, latency) = plt.subplots(3, 1, figsize=(12, 7.5), sharex=True, height_ratios=[1, 1.2, 0.9])
        _latency_panel(latency, rounds, t0)
    else:
        fig, (top, bottom) = plt.subplots(2, 1, figsize=(12, 5.5), sharex=True, height_ratios=[1, 1.2])
    seen: set[str] = set()
    for start, end, family, _ in result.timeline.fault_windows():
        top.axvspan(
            (start - t0) / 1000,
            (end - t0) / 1000,
            color=FAMILY_COLOURS.get(family, "#bcbd22"),
            alpha=0.3,
            label=family if family not in seen else None,
        )
        seen.add(family)
    leaders = [e for e in result.timeline.events if e.kind == "leader"]
    if leaders:
        xs = [(e.t_ms - t0) / 1000 for e in leaders] + [(result.ended_ms - t0) / 1000]
        ys = [0 if e.detail == NO_LEADER_TEXT else int(e.detail.split()[1]) for e in leaders]
        top.step(xs, [*ys, ys[-1]], where="post", color="black", linewidth=1.5, label="leader (0: none)")
    top.set_ylabel("leader (node id)")
    # Observers count: the membership faults can make one a voter, and then the leader.
    total = result.config.cluster.total_nodes
    top.set_yticks(range(total + 1), ["none", *map(str, range(1, total + 1))])
    top.set_title(f"raftmeta chaos, seed {result.config.seed}: {'PASSED' if result.passed else 'FAILED'}")
    top.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    for outcome, colour in OUTCOME_COLOURS.items():
        chosen = [o for o in result.ops if o.outcome == outcome]
        bottom.scatter(
            [(o.complete_ms - t0) / 1000 for o in chosen],
            [KIND_ROWS.get(o.kind, 0) + {"ok": 0.0, "fail": -0.2, "unknown": 0.2}[outcome] for o in chosen],
            s=6,
            color=colour,
            label=f"{outcome} ({len(chosen)})",
        )
    bottom.set_yticks(list(KIND_ROWS.values()), list(KIND_ROWS))
    (latency if rounds else bottom).set_xlabel("seconds since the fault phase began (ops at completion time)")
    bottom.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=PLOT_DPI)
    plt.close(fig)


def _latency_panel(axes: Any, rounds: list[dict[str, Any]], t0: int) -> None:
    """Commit latency p50/p99 (ms, log scale) per metrics round, and a tick per leader change a
    node counted in that round (from raftmeta_raft_leader_changes_seen_total)."""
    xs = [(r["t_ms"] - t0) / 1000 for r in rounds]
    plotted = False
    for key, colour in (("commit_latency_p50_ms", "#1f77b4"), ("commit_latency_p99_ms", "#d62728")):
        points = [(x, r[key]) for x, r in zip(xs, rounds, strict=True) if r[key] is not None]
        if points:
            plotted = True
            axes.plot(
                *zip(*points, strict=True), color=colour, linewidth=1, marker=".", label=key[:-3].replace("_", " ")
            )
    changes = [x for x, r in zip(xs, rounds, strict=True) if any(n["leader_changes"] for n in r["nodes"].values())]
    for i, x in enumerate(changes):
        axes.axvline(x, color="black", linewidth=0.6, linestyle=":", label="leader change seen" if i == 0 else None)
    if plotted:
        axes.set_yscale("log")
    axes.set_ylabel("commit ms (nodes)")
    if axes.get_legend_handles_labels()[0]:  # a run with no latency sample and no leader change has none
        axes.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)


def _html(document: dict[str, Any], timeline_png: str) -> str:
    esc = html.escape
    verdict = "PASSED" if document["passed"] else "FAILED"
    rows = "".join(
        f"<tr><td>{'✔' if c['passed'] else '✘'}</td><td>{esc(c['name'])}</td><td>{esc(c['detail'])}</td></tr>"
        for c in document["checks"]
    )
    windows = document["figures"].get("availability", {}).get("windows", [])
    window_rows = "".join(
        f"<tr><td>{w['start_ms'] / 1000:.1f}</td><td>{w['duration_ms'] / 1000:.1f}</td><td>{esc(w['family'])}</td>"
        f"<td>{esc(w['detail'])}</td><td>{w['ok']}/{w['ops']}</td>"
        f"<td>{'-' if w['ok_rate'] is None else w['ok_rate']}</td></tr>"
        for w in windows
    )
    events = "".join(
        f"<tr><td>{e['t_ms']}</td><td>{esc(e['kind'])}</td><td>{esc(e['family'])}</td><td>{esc(e['detail'])}</td></tr>"
        for e in document["events"]
    )
    ops = document["ops"]
    moves = document["reassignments"]
    voters = document.get("voter_changes") or {}
    voter_line = (
        f"<p>Voters: {voters['bootstrap']} at the start, {voters['final']} at the end; "
        f"{voters['acknowledged']} of {voters['requests']} voter change requests acknowledged.</p>"
        if voters
        else ""
    )
    kafka_section = _kafka_section(document.get("kafka"))
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>raftmeta chaos: {verdict}</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:80em}}td,th{{padding:2px 8px;text-align:left;
vertical-align:top}}table{{border-collapse:collapse}}tr:nth-child(even){{background:#f4f4f4}}</style></head>
<body><h1>raftmeta chaos: {verdict}</h1>
<p>seed {document["seed"]}, {document["nodes"]} nodes + {document.get("observers", 0)} observers,
{document["duration_s"]:g} s;
ops ok {ops["ok"]}, fail {ops["fail"]}, unknown {ops["unknown"]};
lost acknowledged {document["lost_acknowledged"]}; longest stretch without an ok op
{document["longest_unavailable_ms"]} ms; converged {document["converged_ms"]} ms after the heal.</p>
<p>Reassignments in the committed log: started {moves["started"]}, completed {moves["completed"]},
cancelled {moves["cancelled"]}, re-targeted {moves["retargeted"]}, dropped with their topic
{moves["dropped_with_topic"]}, in flight at the end {moves["in_flight_at_end"]}.</p>
{voter_line}
<p>Faults: {esc(", ".join(f"{k} {v}" for k, v in document["faults"].items()))}.
Reproduce: <code>{esc(document["reproduce"])}</code></p>
<img src="{esc(timeline_png)}" alt="timeline" style="max-width:100%">
{kafka_section}
<h2>Checks</h2><table><tr><th></th><th>check</th><th>detail</th></tr>{rows}</table>
<h2>Availability per fault window</h2>
<table><tr><th>start s</th><th>length s</th><th>fault</th><th>detail</th><th>ok/ops</th><th>ok rate</th></tr>
{window_rows}</table>
<h2>Timeline</h2><table><tr><th>wall ms</th><th>event</th><th>family</th><th>detail</th></tr>{events}</table>
</body></html>
"""


def _kafka_section(kafka: dict[str, Any] | None) -> str:
    """With real Kafka brokers: the data's figures and each broker's metadata verdict."""
    if not kafka:
        return ""
    esc = html.escape
    data = kafka.get("data") or {}
    data_line = (
        f"<p>Data through the brokers ({esc(str(data['topic']))}): sent {data['sent']}, acknowledged "
        f"{data['acknowledged']}, failed {data['failed']}, in the log {data['in_log']}, received by the consumer "
        f"group {data['group_received']} ({data['group_received_twice']} twice, after rebalances).</p>"
        if data
        else "<p>The data through the brokers could not be read back (see the checks).</p>"
    )
    rows = "".join(
        f"<tr><td>{b['broker_id']}</td><td>{'-' if b['converged_ms'] is None else b['converged_ms']}</td>"
        f"<td>{b['topics']}</td><td>{b['partitions']}</td><td>{esc('; '.join(b['last_differences']))}</td></tr>"
        for b in kafka["brokers"]
    )
    return (
        f"<h2>Kafka brokers</h2>{data_line}<p>Each broker's Metadata against the committed image "
        f"(bound {kafka['metadata_bound_s']:g} s):</p><table><tr><th>broker</th><th>converged ms</th><th>topics</th>"
        f"<th>partitions</th><th>differences left</th></tr>{rows}</table>"
    )
