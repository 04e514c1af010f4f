"""An HTML timeline of a history's failing window, after Porcupine's visualization: one row per
client, one bar per operation over its [invoke, complete] interval, the operations that cannot be
placed in red, the one whose completion forced them outlined, the longest linearizable prefix in
green. Self-contained (inline SVG and CSS, no script, no network), so it opens anywhere."""

from __future__ import annotations

import html
from collections.abc import Sequence

from raftmeta.lincheck.checker import TopicFailure, failing_window
from raftmeta.lincheck.model import Operation, describe_operation, describe_state

ROW_HEIGHT = 34
BAR_HEIGHT = 22
LABEL_WIDTH = 90
PLOT_WIDTH = 1100
MARGIN = 12
# An open-ended operation's bar runs this far past the window, dashed: it may take effect later.
OPEN_TAIL = 40

STYLE = """
body { font: 13px sans-serif; margin: 16px; color: #222; }
code { background: #f3f3f3; padding: 1px 4px; }
rect.prefix { fill: #cfe8cf; stroke: #5a9a5a; }
rect.other { fill: #e4e4e4; stroke: #999; }
rect.unplaceable { fill: #f4b5b5; stroke: #c0392b; }
rect.blocked { stroke: #7b0000; stroke-width: 3; }
rect.open { stroke-dasharray: 5 3; }
text.op { font-size: 11px; }
table { border-collapse: collapse; margin-top: 12px; }
td, th { border: 1px solid #ccc; padding: 3px 8px; text-align: left; }
tr.unplaceable td { background: #fbe3e3; }
tr.prefix td { background: #eef7ee; }
"""


def render_failure(ops: Sequence[Operation], failure: TopicFailure, *, title: str, replay: str) -> str:
    """The page for ``failure`` (one of ``check_history(ops).failures``); ``replay`` is the
    command that reproduces the history."""
    window = failing_window(ops, failure)
    prefix = set(failure.prefix)
    unplaceable = set(failure.unplaceable)

    def css(op: Operation) -> str:
        kind = "unplaceable" if op.op_id in unplaceable else "prefix" if op.op_id in prefix else "other"
        extra = (" blocked" if op.op_id == failure.blocked else "") + (" open" if op.open_ended else "")
        return kind + extra

    start = min(op.invoke for op in window)
    end = max([op.complete for op in window if op.complete is not None] + [op.invoke for op in window])
    span = max(end - start, 1)

    def x(time: int) -> float:
        return LABEL_WIDTH + (time - start) * PLOT_WIDTH / span

    clients = sorted({op.client for op in window})
    row = {client: i for i, client in enumerate(clients)}
    height = MARGIN * 2 + ROW_HEIGHT * len(clients) + 20
    svg = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{LABEL_WIDTH + PLOT_WIDTH + OPEN_TAIL + MARGIN}" '
        f'height="{height}">'
    ]
    for client, i in row.items():
        y = MARGIN + i * ROW_HEIGHT
        svg.append(f'<text x="4" y="{y + BAR_HEIGHT - 6}">client {client}</text>')
    for op in window:
        y = MARGIN + row[op.client] * ROW_HEIGHT
        left = x(op.invoke)
        right = x(op.complete) if op.complete is not None and not op.open_ended else x(end) + OPEN_TAIL
        width = max(right - left, 3)
        label = html.escape(f"#{op.op_id} {describe_operation(op)}")
        svg.append(
            f"<g><title>{label} [{op.invoke}, {op.complete if op.complete is not None else '∞'}]</title>"
            f'<rect class="{css(op)}" x="{left:.1f}" y="{y}" width="{width:.1f}" height="{BAR_HEIGHT}" rx="3"/>'
            f'<text class="op" x="{left + 3:.1f}" y="{y + BAR_HEIGHT - 7}">{label}</text></g>'
        )
    axis_y = height - 8
    svg.append(f'<text x="{LABEL_WIDTH}" y="{axis_y}">{start}</text>')
    svg.append(f'<text x="{LABEL_WIDTH + PLOT_WIDTH - 40}" y="{axis_y}">{end}</text>')
    svg.append("</svg>")
    rows = "".join(
        f'<tr class="{css(op).split()[0]}"><td>{op.op_id}</td><td>{op.client}</td>'
        f"<td>{html.escape(describe_operation(op))}</td><td>{op.invoke}</td>"
        f"<td>{op.complete if op.complete is not None and not op.open_ended else '∞ (unknown)'}</td>"
        f"<td>{'prefix' if op.op_id in prefix else 'cannot be placed' if op.op_id in unplaceable else ''}</td></tr>"
        for op in window
    )
    prefix_text = " → ".join(f"#{i}" for i in failure.prefix[-8:])
    if len(failure.prefix) > 8:
        prefix_text = f"… ({len(failure.prefix) - 8} earlier) " + prefix_text
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{html.escape(title)}</title><style>{STYLE}</style></head>
<body>
<h1>{html.escape(title)}</h1>
<p>Topic <code>{html.escape(failure.topic)}</code> is not linearizable. After the longest linearizable
prefix the search found ({len(failure.prefix)} operations: {html.escape(prefix_text) or "none"}), the topic is
<b>{describe_state(failure.state)}</b>, and none of the operations in red can take effect next before
operation #{failure.blocked} (outlined) completes.</p>
<p>Replay: <code>{html.escape(replay)}</code></p>
{"".join(svg)}
<table><tr><th>op</th><th>client</th><th>operation</th><th>invoked</th><th>completed</th><th></th></tr>
{rows}</table>
</body></html>
"""
