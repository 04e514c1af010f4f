"""The Grafana dashboard and the Prometheus config in deploy/: the dashboard parses, queries only
catalogued metrics (a running node serving them is checked in test_quorum_metrics.py), and the
scrape config `quorum up` writes names every node."""

from __future__ import annotations

import json
import re
from pathlib import Path

from raftmeta.metrics import catalog
from raftmeta.metrics.scrape import scrape_config

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "raftmeta-quorum.json"
METRIC = re.compile(r"\braftmeta_[a-z0-9_]+")
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def dashboard_exprs() -> list[str]:
    document = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in document["panels"] for t in p.get("targets", [])]
    exprs += [v["definition"] for v in document["templating"]["list"] if "definition" in v]
    return exprs


def dashboard_metrics() -> set[str]:
    """Every sample name the dashboard's queries read."""
    return {name for expr in dashboard_exprs() for name in METRIC.findall(expr)}


def catalogued_samples() -> set[str]:
    names: set[str] = set()
    for spec in catalog.ALL:
        if spec.type == "histogram":
            names.update(spec.name + suffix for suffix in HISTOGRAM_SUFFIXES)
        else:
            names.add(spec.name)
    return names


def test_the_dashboard_queries_only_catalogued_metrics() -> None:
    used = dashboard_metrics()
    assert used, "no queries found"
    assert used <= catalogued_samples(), used - catalogued_samples()


def test_the_dashboard_shows_what_the_issue_asks_for() -> None:
    used = dashboard_metrics()
    for name in (
        "raftmeta_raft_current_leader",
        "raftmeta_raft_current_epoch",
        "raftmeta_raft_commit_latency_seconds_bucket",
        "raftmeta_raft_high_watermark",
        "raftmeta_controller_last_applied_record_lag_records",
        "raftmeta_raft_fsync_duration_seconds_bucket",
        "raftmeta_controller_fenced_broker_count",
        "raftmeta_controller_offline_partitions_count",
        "raftmeta_controller_under_replicated_partitions",
    ):
        assert name in used, name


def test_dashboard_panels_have_unique_ids_and_a_datasource() -> None:
    document = json.loads(DASHBOARD.read_text())
    ids = [p["id"] for p in document["panels"]]
    assert len(ids) == len(set(ids))
    for panel in document["panels"]:
        assert panel["datasource"]["uid"] == "${datasource}"
        assert panel["targets"], panel["title"]


def test_scrape_config_names_every_node() -> None:
    text = scrape_config("abc", {2: "127.0.0.1:9102", 1: "127.0.0.1:9101"})
    assert text.index('"127.0.0.1:9101"') < text.index('"127.0.0.1:9102"')
    assert 'labels: {node_id: "1", cluster_id: "abc"}' in text
    assert "job_name:" in text and "static_configs:" in text
