"""``report.html`` of ``raftmeta verify``: where the problem is, at a glance.

Top to bottom: the two verdicts (consistency: the logs agree; health: the cluster they describe),
the unhealthy partitions named, the brokers grouped and coloured by rack, the topic x broker heat
map (the most skewed topics first), the checks, the figures with human labels, and the plots.
Plain HTML and inline CSS: one file a person opens from disk, nothing fetched.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

from raftmeta.jobs.racks import BrokerFacts, rack_of
from raftmeta.jobs.unhealthy import FAILED, HEALTHY, REASONS

GREEN, AMBER, RED = "#1a7f37", "#9a6700", "#cf222e"
VERDICT_COLORS = {"PASSED": GREEN, HEALTHY: GREEN, "WARN": AMBER, FAILED: RED}
# The scalar figures, in sections, with the labels a Kafka engineer reads; a figure not named
# here still shows, under "Other", its key made readable.
FIGURE_SECTIONS: dict[str, dict[str, str]] = {
    "Log": {
        "records": "Records replayed",
        "batches": "Batches",
        "nodes": "Nodes",
        "replayed_node": "Node replayed (longest committed log)",
        "replay_base_offset": "Replay starts at offset (newest snapshot)",
    },
    "Cluster": {
        "topics": "Topics",
        "partitions": "Partitions",
        "brokers": "Registered brokers",
        "fenced_brokers": "Fenced brokers",
    },
    "Placement": {
        "replica_skew": "Replica skew (busiest broker / mean)",
        "leader_skew": "Preferred-leader skew (busiest broker / mean)",
        "current_leader_skew": "Current-leader skew (busiest broker / mean)",
        "rack_spread_violations": "Partitions on fewer racks than they could span",
        "leaderless_partitions": "Partitions without a leader",
    },
    "Health": {
        "offline_partitions": "Offline partitions (no leader)",
        "unavailable_partitions": "Unavailable partitions (leader not live)",
        "under_min_isr_partitions": "Under min ISR",
        "at_min_isr_partitions": "At min ISR",
        "under_replicated_partitions": "Under-replicated",
        "under_replicated_with_live_replicas": "Under-replicated with every replica live",
        "preferred_leader_away_partitions": "Leader not the preferred replica",
    },
}
SKEW_DIGITS = 2


def label(key: str) -> str:
    """The human label of a figure key (a known one's, else the key with spaces)."""
    for section in FIGURE_SECTIONS.values():
        if key in section:
            return section[key]
    return key.replace("_", " ").capitalize()


def number(value: Any) -> str:
    """Counts with thousands separators, ratios with two decimals, flags as yes/no."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.{SKEW_DIGITS}f}"
    return str(value)


def render_html(
    document: dict[str, Any], images: Mapping[str, str], brokers: BrokerFacts, ids: list[int], colors: dict[str, str]
) -> str:
    """The page; ``ids``: every broker to show, in rack order; ``colors``: rack -> colour."""
    consistency = "PASSED" if document["passed"] else "FAILED"
    health = document.get("health") or {}
    verdict = health.get("verdict", HEALTHY)
    figures = document["figures"]
    parts = [
        _verdicts(consistency, health),
        _unhealthy(health.get("unhealthy_partitions") or {}, brokers, colors),
        _brokers(figures, brokers, ids, colors, images),
        _topic_brokers(figures.get("topic_broker"), brokers, colors),
        _checks(document["checks"]),
        _figures(figures),
        _pictures(images),
    ]
    body = "\n".join(p for p in parts if p)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>raftmeta verify: consistency {consistency}, health {html.escape(verdict)}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; max-width: 80em; color: #1f2328; }}
table {{ border-collapse: collapse; margin: 0.6em 0 1.2em; }}
td, th {{ border: 1px solid #d0d7de; padding: 0.25em 0.55em; vertical-align: top; text-align: left; }}
th {{ background: #f6f8fa; }}
td.n {{ text-align: right; font-variant-numeric: tabular-nums; }}
.verdicts {{ display: flex; gap: 1em; margin: 1em 0; }}
.verdict {{ border: 2px solid; border-radius: 6px; padding: 0.6em 1em; min-width: 16em; }}
.verdict b {{ font-size: 1.4em; }}
.verdict ul {{ margin: 0.3em 0 0; padding-left: 1.2em; }}
.rack {{ display: inline-block; width: 0.8em; height: 0.8em; border-radius: 2px; margin-right: 0.3em; }}
.b {{ display: inline-block; padding: 0 0.3em; margin: 0 0.1em; border-radius: 3px; }}
.out {{ text-decoration: line-through; color: {RED}; }}
.why {{ color: {RED}; }}
table.heat td {{ text-align: center; min-width: 2.6em; }}
table.heat td.over {{ color: {RED}; font-weight: bold; }}
.note {{ color: #59636e; font-size: 0.9em; }}
</style></head><body>
<h1>raftmeta verify</h1>
<p class="note">Data: {html.escape(str(document.get("data_dir", "")))}</p>
{body}
</body></html>
"""


def _verdicts(consistency: str, health: Mapping[str, Any]) -> str:
    verdict = health.get("verdict", HEALTHY)
    reasons = health.get("reasons") or ["every partition fully replicated, at or above min ISR, spread over racks"]
    items = "".join(f"<li>{html.escape(r)}</li>" for r in reasons)
    logs = "the nodes' logs agree" if consistency == "PASSED" else "a check failed: see Checks below"
    return (
        '<div class="verdicts">'
        f'<div class="verdict" style="border-color:{VERDICT_COLORS[consistency]}">Consistency '
        f'<b id="consistency" style="color:{VERDICT_COLORS[consistency]}">{consistency}</b>'
        f"<ul><li>{logs}</li></ul></div>"
        f'<div class="verdict" style="border-color:{VERDICT_COLORS.get(verdict, RED)}">Health '
        f'<b id="health" style="color:{VERDICT_COLORS.get(verdict, RED)}">{html.escape(verdict)}</b>'
        f"<ul>{items}</ul></div></div>"
    )


def _broker_chip(broker: int, brokers: BrokerFacts, colors: dict[str, str], out: bool = False) -> str:
    rack = rack_of(broker, brokers)
    style = f"background:{colors.get(rack, '#eee')}33; border-left:3px solid {colors.get(rack, '#999')}"
    return f'<span class="b{" out" if out else ""}" style="{style}" title="rack {html.escape(rack)}">{broker}</span>'


def _unhealthy(unhealthy: Mapping[str, Any], brokers: BrokerFacts, colors: dict[str, str]) -> str:
    listed = unhealthy.get("listed") or []
    if not listed:
        return ""
    total = int(unhealthy.get("total", len(listed)))
    rows = []
    for p in listed:
        isr = set(p["isr"])
        replicas = "".join(_broker_chip(b, brokers, colors, out=b not in isr) for b in p["replicas"])
        leader = "none" if p["leader"] is None or p["leader"] < 0 else _broker_chip(p["leader"], brokers, colors)
        rows.append(
            f"<tr><td>{html.escape(p['topic'])}</td><td class='n'>{p['partition']}</td><td>{leader}</td>"
            f"<td>{replicas}</td><td>{', '.join(str(b) for b in p['isr']) or '(empty)'}</td>"
            f"<td class='n'>{p['min_isr']}</td>"
            f"<td class='why'>{html.escape(', '.join(REASONS.get(w, w) for w in p['why']))}</td></tr>"
        )
    more = f" (the first {len(listed):,}: the worst first)" if total > len(listed) else ""
    return (
        f"<h2>Unhealthy partitions: {total:,}{more}</h2>"
        '<p class="note">Replicas out of the ISR are struck through; each broker is tinted by its rack.</p>'
        '<table id="unhealthy"><tr><th>topic</th><th>partition</th><th>leader</th><th>replicas</th><th>ISR</th>'
        "<th>min ISR</th><th>why</th></tr>" + "".join(rows) + "</table>"
    )


def _brokers(
    figures: Mapping[str, Any], brokers: BrokerFacts, ids: list[int], colors: dict[str, str], images: Mapping[str, str]
) -> str:
    if not ids:
        return ""
    replicas, preferred, current = (
        figures.get(k, {}) for k in ("replicas_per_broker", "preferred_leaders_per_broker", "leaders_per_broker")
    )
    rows = []
    for i, broker in enumerate(ids):
        rack = rack_of(broker, brokers)
        first = i == 0 or rack_of(ids[i - 1], brokers) != rack
        span = sum(1 for b in ids if rack_of(b, brokers) == rack)
        rack_cell = (
            f'<td rowspan="{span}"><span class="rack" style="background:{colors[rack]}"></span>{html.escape(rack)}</td>'
            if first
            else ""
        )
        state = "not registered" if broker not in brokers else ("fenced" if brokers[broker][2] else "unfenced")
        style = f' style="color:{RED}"' if state != "unfenced" else ""
        rows.append(
            f"<tr>{rack_cell}<td class='n broker'>{broker}</td><td{style}>{state}</td>"
            f"<td class='n'>{number(replicas.get(str(broker), 0))}</td>"
            f"<td class='n'>{number(preferred.get(str(broker), 0))}</td>"
            f"<td class='n'>{number(current.get(str(broker), 0))}</td></tr>"
        )
    picture = images.get("per_broker_png")
    img = f'<p><img src="{html.escape(picture)}" alt="replicas and leaders per broker"></p>' if picture else ""
    return (
        "<h2>Brokers by rack</h2>"
        '<table id="brokers-by-rack"><tr><th>rack</th><th>broker</th><th>state</th><th>replicas</th>'
        "<th>preferred leaders</th><th>current leaders</th></tr>" + "".join(rows) + "</table>" + img
    )


def _topic_brokers(view: Mapping[str, Any] | None, brokers: BrokerFacts, colors: dict[str, str]) -> str:
    if not view or not view.get("topics"):
        return ""
    ids = sorted(view["brokers"], key=lambda b: (rack_of(b, brokers), b))
    racks: list[tuple[str, int]] = []
    for b in ids:
        rack = rack_of(b, brokers)
        if racks and racks[-1][0] == rack:
            racks[-1] = (rack, racks[-1][1] + 1)
        else:
            racks.append((rack, 1))
    rack_row = "".join(
        f'<th colspan="{n}" style="background:{colors.get(r, "#eee")}33">{html.escape(r)}</th>' for r, n in racks
    )
    broker_row = "".join(f"<th>{b}</th>" for b in ids)
    rows = []
    for t in view["topics"]:
        replicas, leaders = t["replicas"], t["leaders"]
        total = sum(replicas.values())
        share = -(-total // len(ids)) if ids else 0
        peak = max(replicas.values(), default=0) or 1
        cells = []
        for b in ids:
            n, lead = replicas.get(str(b), 0), leaders.get(str(b), 0)
            # Heat: pale blue up to an even share (darker with more), red above it (redder the
            # further): the skewed cells stand out of an evenly spread row.
            if n > share:
                heat = f"background:rgba(207,34,46,{0.2 + 0.4 * (n - share) / max(1, peak - share):.2f})"
            else:
                heat = f"background:rgba(78,121,167,{0.05 + 0.25 * n / peak:.2f})" if n else ""
            over = " class='over'" if n > share else ""
            lead_text = f"<br><small>{lead} L</small>" if lead else ""
            cells.append(f'<td{over} style="{heat}">{n or ""}{lead_text}</td>')
        skew = max(t["excess_replicas"], t["excess_leaders"])
        rows.append(
            f"<tr><th>{html.escape(t['topic'])}</th><td class='n'>{number(t['partitions'])}</td>"
            f"<td class='n'>{'+' + str(skew) if skew else '0'}</td>" + "".join(cells) + "</tr>"
        )
    shown = len(view["topics"])
    total_topics = int(view.get("topics_total", shown))
    which = f"the {shown:,} most skewed of {total_topics:,} topics" if total_topics > shown else f"all {shown:,} topics"
    return (
        "<h2>Topics &times; brokers</h2>"
        f'<p class="note">Replicas of each topic on each broker ("L": leaders among them), {which}, the most '
        "skewed first. Blue: up to an even share (darker: more); red: more than an even share "
        "(ceil(replicas / brokers)). Excess: how many replicas or leaders the topic's busiest broker holds "
        "above an even share.</p>"
        '<table class="heat" id="topic-broker"><tr><th rowspan="2">topic</th><th rowspan="2">partitions</th>'
        f'<th rowspan="2">excess</th>{rack_row}</tr><tr>{broker_row}</tr>' + "".join(rows) + "</table>"
    )


def _checks(checks: list[Mapping[str, Any]]) -> str:
    rows = "".join(
        f"<tr><td style='color:{GREEN if c['passed'] else RED}'>{'&#10004;' if c['passed'] else '&#10008;'}</td>"
        f"<td>{html.escape(c['name'])}</td><td>{html.escape(c['detail'])}</td></tr>"
        for c in checks
    )
    return f"<h2>Checks</h2><table><tr><th></th><th>check</th><th>detail</th></tr>{rows}</table>"


def _figures(figures: Mapping[str, Any]) -> str:
    known = {k for section in FIGURE_SECTIONS.values() for k in section}
    sections = {name: [k for k in keys if k in figures] for name, keys in FIGURE_SECTIONS.items()}
    sections["Other"] = [k for k, v in figures.items() if k not in known and not isinstance(v, dict | list)]
    incremental = figures.get("incremental")
    rows = []
    for name, keys in sections.items():
        if keys:
            rows.append(f'<tr><th colspan="2">{name}</th></tr>')
            rows.extend(f"<tr><td>{label(k)}</td><td class='n'>{number(figures[k])}</td></tr>" for k in keys)
    if isinstance(incremental, dict) and incremental:
        rows.append('<tr><th colspan="2">Incremental</th></tr>')
        rows.extend(
            f"<tr><td>{label(k)}</td><td>{html.escape(number(v))}</td></tr>"
            for k, v in incremental.items()
            if not isinstance(v, dict | list)
        )
    nodes = _node_offsets(figures)
    return f"<h2>Figures</h2><table>{''.join(rows)}</table>{nodes}"


def _node_offsets(figures: Mapping[str, Any]) -> str:
    committed, log_end = figures.get("committed_offset_by_node", {}), figures.get("log_end_offset_by_node", {})
    if not committed:
        return ""
    rows = "".join(
        f"<tr><td class='n'>{node}</td><td class='n'>{number(committed[node])}</td>"
        f"<td class='n'>{number(log_end.get(node, ''))}</td></tr>"
        for node in sorted(committed, key=int)
    )
    return (
        f"<table><tr><th>node</th><th>committed offset (high watermark)</th><th>log end offset</th></tr>{rows}</table>"
    )


def _pictures(images: Mapping[str, str]) -> str:
    shown = {k: v for k, v in images.items() if k != "per_broker_png"}
    return "\n".join(f'<p><img src="{html.escape(name)}" alt="{label(key)}"></p>' for key, name in shown.items())
