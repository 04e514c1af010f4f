"""A small run of ``raftmeta bench scale``: the JSON contract and that every step happened --
never a speed (figures and targets live in docs/performance.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

pytestmark = pytest.mark.integration

TARGETS = {
    "bytes_per_partition",
    "partitions_per_s",
    "snapshot_s",
    "restart_s",
    "wiped_catch_up_s",
    "describe_p50_ms",
    "create_p50_vs_empty",
}


def bench_scale(*args: str) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, "-m", "raftmeta", "bench", "scale", *args, "--output", "json"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]
    # Progress goes to stderr, one line per step.
    assert "bench scale: created" in result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def test_bench_scale_reports_every_step_of_a_small_image() -> None:
    document = bench_scale("--partitions", "3000", "--brokers", "6", "--racks", "3", "--samples", "10")
    assert document["benchmark"] == "scale" and document["partitions"] == 3000
    assert "stopped" not in document
    creation = document["creation"]
    assert creation["complete"] and creation["partitions"] == 3000 and creation["topics"] == 3
    assert creation["seconds"] > 0 and creation["partitions_per_s"] > 0
    # The probe topic and the 1-partition creates of the empty image are in the image too.
    assert document["image_partitions"] == 3000 + 1000 + 10
    memory = document["memory"]
    assert set(memory["nodes"]) == {"1", "2", "3"}
    assert all(n["rss"] > 0 and n["hwm"] >= n["rss"] for n in memory["nodes"].values())
    assert memory["max_rss_bytes"] > 0 and memory["bytes_per_partition"] > 0
    assert document["memory_after_snapshot"]["max_rss_bytes"] > 0
    for image in ("empty_image", "full_image"):
        assert document[image]["describe_p50_ms"] > 0 and document[image]["create_p50_ms"] > 0
        assert document[image]["describe_every_topic_page_p50_ms"] > 0
    assert document["create_p50_vs_empty"] > 0
    every = document["describe_every_topic"]
    # 4,020 partitions (the probe, the creation, two rounds of 10 one-partition creates): three pages.
    assert every["partitions"] >= document["image_partitions"] and every["pages"] == 3 and every["seconds"] > 0
    snapshot = document["snapshot"]
    # One snapshot of the whole image, the same file on every node.
    assert set(snapshot["seconds"]) == {"1", "2", "3"} and all(s > 0 for s in snapshot["seconds"].values())
    assert all(size > 0 for size in snapshot["bytes"].values()) and len(set(snapshot["bytes"].values())) == 1
    assert snapshot["max_s"] > 0 and snapshot["file"].endswith(".checkpoint") and snapshot["filler_topics"] >= 0
    restart, wiped = document["restart"], document["wiped_follower"]
    assert restart["caught_up"] and restart["seconds"] > 0 and restart["rss"]["rss"] > 0
    assert wiped["caught_up"] and wiped["seconds"] > 0 and wiped["node"] != restart["node"]
    # The wiped follower's directory holds the leader's snapshot again: it came by FetchSnapshot.
    assert wiped["installed_snapshot"] == snapshot["file"]
    # A broker leaves: its partition changes (3,000 of ~4,000 partitions' replicas on 6 brokers
    # put ~2,000 on each) are committed by the same leader.
    leaves = document["broker_leaves"]
    assert leaves["error"] is None and leaves["seconds"] > 0 and leaves["elections"] == 0
    assert leaves["records_committed"] > 1000 and document["leaders"]["broker leaves"]["leader"] >= 1
    assert set(document["targets"]) == TARGETS
    assert all(t["measured"] is not None and isinstance(t["met"], bool) for t in document["targets"].values())
    assert document["growth"] == [] and document["params"]["brokers"] == 6
