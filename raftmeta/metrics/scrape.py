"""Reading nodes' metrics back: the Prometheus scrape config ``quorum up`` writes, and a small
scraper (prometheus_client's own text parser) for ``quorum top``, ``bench`` and the tests."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

SCRAPE_INTERVAL_S = 5
JOB = "raftmeta"
COMMIT_LATENCY = "raftmeta_raft_commit_latency_seconds"
EVENT_PROCESSING_TIME = "raftmeta_controller_event_queue_processing_time_seconds"
EVENT_QUEUE_TIME = "raftmeta_controller_event_queue_time_seconds"

Labels = tuple[tuple[str, str], ...]


def scrape_config(cluster_id: str, targets: Mapping[int, str], *, interval_s: int = SCRAPE_INTERVAL_S) -> str:
    """A Prometheus config (YAML) scraping ``targets`` (node id -> HOST:PORT), each labelled with
    its ``node_id`` and the ``cluster_id`` -- the labels the Grafana dashboard groups by. Strings
    are written as JSON, which YAML reads as the same strings."""
    lines = [
        "# Prometheus scrape config for a raftmeta quorum (written by `raftmeta quorum up`).",
        "# Run: prometheus --config.file=prometheus.yml   (dashboard: deploy/grafana/)",
        "global:",
        f"  scrape_interval: {interval_s}s",
        f"  evaluation_interval: {interval_s}s",
        "scrape_configs:",
        f"  - job_name: {json.dumps(JOB)}",
        "    static_configs:",
    ]
    for node_id, address in sorted(targets.items()):
        lines += [
            f"      - targets: [{json.dumps(address)}]",
            f"        labels: {{node_id: {json.dumps(str(node_id))}, cluster_id: {json.dumps(cluster_id)}}}",
        ]
    return "\n".join(lines) + "\n"


def write_scrape_config(path: Path, cluster_id: str, targets: Mapping[int, str]) -> None:
    path.write_text(scrape_config(cluster_id, targets))


@dataclass
class Scrape:
    """One node's samples: name -> {labels -> value}."""

    samples: dict[str, dict[Labels, float]] = field(default_factory=dict)

    def get(self, name: str, /, **labels: str) -> float | None:
        """The sample ``name`` with exactly ``labels``; None if the node does not expose it."""
        return self.samples.get(name, {}).get(tuple(sorted(labels.items())))

    def series(self, name: str) -> dict[Labels, float]:
        return self.samples.get(name, {})

    def histogram_quantile(self, name: str, quantile: float) -> float | None:
        """Prometheus' histogram_quantile over the whole life of an unlabelled histogram (the
        bucket holding the quantile, interpolated linearly); None without observations."""
        buckets = sorted((float(dict(labels)["le"]), count) for labels, count in self.series(f"{name}_bucket").items())
        if not buckets or buckets[-1][1] <= 0:
            return None
        rank = quantile * buckets[-1][1]
        lower_bound, lower_count = 0.0, 0.0
        for bound, count in buckets:
            if count >= rank:
                if bound == float("inf"):
                    return lower_bound
                if count == lower_count:
                    return bound
                return lower_bound + (bound - lower_bound) * (rank - lower_count) / (count - lower_count)
            lower_bound, lower_count = bound, count
        return lower_bound


def window(current: Scrape, previous: Scrape | None, name: str) -> Scrape:
    """A histogram's buckets over the interval between two scrapes (all of ``current`` without a
    previous one, or if the node restarted and its counters went back)."""
    buckets = current.series(f"{name}_bucket")
    if previous is None:
        return Scrape({f"{name}_bucket": dict(buckets)})
    before = previous.series(f"{name}_bucket")
    delta = {labels: count - before.get(labels, 0.0) for labels, count in buckets.items()}
    if any(v < 0 for v in delta.values()):
        return Scrape({f"{name}_bucket": dict(buckets)})
    return Scrape({f"{name}_bucket": delta})


def histogram_growth(before: Scrape, after: Scrape, name: str) -> tuple[float | None, float | None]:
    """How much a histogram's sum and count grew between two scrapes of one node (None where the
    node does not expose it)."""
    grown: list[float | None] = []
    for sample in (f"{name}_sum", f"{name}_count"):
        start, end = before.get(sample), after.get(sample)
        grown.append(None if start is None or end is None else end - start)
    return grown[0], grown[1]


def histogram_mean_ms(before: Scrape, after: Scrape, name: str) -> float | None:
    """The mean of a histogram's observations between two scrapes, in ms."""
    total, count = histogram_growth(before, after, name)
    return round(total * 1000 / count, 3) if total is not None and count else None


def parse(text: str) -> Scrape:
    scrape = Scrape()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            scrape.samples.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return scrape


def fetch(address: str, *, timeout_s: float = 2.0) -> Scrape:
    """GET http://ADDRESS/metrics and parse it; OSError (URLError) if the node does not answer."""
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=timeout_s) as answer:
        return parse(answer.read().decode())
