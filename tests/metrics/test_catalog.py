"""The catalogue of metric names: Prometheus' naming rules, and docs/metrics.md lists every one."""

from __future__ import annotations

import re
from pathlib import Path

from raftmeta.metrics import catalog

DOCS = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"


def test_names_follow_prometheus_conventions() -> None:
    names = [spec.name for spec in catalog.ALL]
    assert len(names) == len(set(names))
    for spec in catalog.ALL:
        assert re.fullmatch(r"raftmeta_(raft|controller|grpc)_[a-z0-9_]+", spec.name), spec.name
        assert spec.name.endswith("_total") == (spec.type == "counter"), spec.name
        base = spec.name.removesuffix("_total")
        if spec.unit in ("seconds", "bytes"):
            assert base.endswith(f"_{spec.unit}"), f"{spec.name}: the unit goes last"
        assert not re.search(r"_(ms|millis|milliseconds|kb|mb)\b", base), f"{spec.name}: use base units"
        assert spec.help.endswith("."), spec.name


def test_docs_list_every_metric_with_its_unit_and_no_other() -> None:
    text = DOCS.read_text()
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| `(raftmeta_[a-z0-9_]+)` \|.*$", text, re.MULTILINE)}
    assert set(rows) == {spec.name for spec in catalog.ALL}
    for spec in catalog.ALL:
        cells = [cell.strip() for cell in rows[spec.name].strip("|").split("|")]
        assert cells[1] == spec.type and cells[2] == (spec.unit or "–"), cells
        assert cells[4] == spec.help, f"{spec.name}: docs/metrics.md says {cells[4]!r}, the catalogue {spec.help!r}"
        for label in spec.labels:
            assert f"`{label}`" in cells[3], (spec.name, label)
