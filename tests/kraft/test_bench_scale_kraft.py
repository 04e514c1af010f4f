"""``raftmeta bench scale --target both`` at 2,000 partitions: one run against a raftmeta quorum
and a real KRaft quorum (their own: the run restarts and wipes followers), checked for every row
on both sides with sane values and their ratios -- never for speeds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from raftmeta.bench.compare import lookup
from raftmeta.bench.kafka_scale import SCALE_BETTER
from raftmeta.cli.main import cli

pytestmark = [pytest.mark.kraft, pytest.mark.timeout(900)]

PARTITIONS = 2000
TOPIC_PARTITIONS = 100


def test_scale_rows_on_both_sides_in_one_run(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["bench", "scale", "--target", "both", "--partitions", str(PARTITIONS),
              "--topic-partitions", str(TOPIC_PARTITIONS), "--brokers", "6", "--racks", "3", "--samples", "5",
              "--kraft-heap-mb", "512", "--kraft-snapshot-interval-ms", "5000", "--work-dir", str(tmp_path),
              "--output", "json"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    document: dict[str, Any] = json.loads(result.stdout)
    assert document["target"] == "both" and document["order"] == ["kraft", "raftmeta"]
    assert document["kraft"]["settings"]["kafka_version"].startswith("4.")
    for name in ("raftmeta", "kraft"):
        side = document[name]
        assert "stopped" not in side, (name, side.get("stopped"))
        assert side["creation"]["complete"] and side["creation"]["partitions"] == PARTITIONS
        memory = side["memory"]
        assert len(memory["voters"]) == 3
        for figures in memory["voters"].values():
            assert 0 < figures["rss"] <= figures["hwm"], (name, figures)
        assert 0 < side["describe_p50_ms"] < 10_000
        snapshot = side["snapshot"]
        assert len(snapshot["bytes"]) == 3 and all(size > 0 for size in snapshot["bytes"].values())
        assert 0 <= snapshot["max_s"] < 600
        restart, wiped = side["restart"], side["wiped_follower"]
        assert restart["node"] != wiped["node"] and 0 < restart["seconds"] < 600 and 0 < wiped["seconds"] < 600
        assert wiped["operator_steps"], name
        # Its seconds split into phases from the voter's own log (raftmeta.bench.comeback): each
        # mark found in the real logs, and the phases after the format add up to the seconds.
        wiped_phases = wiped["phases_s"]
        assert wiped_phases["start_to_following"] is not None and wiped_phases["snapshot"] is not None, (name, wiped)
        after_format = sum(v for k, v in wiped_phases.items() if k != "format")
        assert after_format == pytest.approx(wiped["from_start_s"], abs=0.01), (name, wiped_phases)
        # The row is what the user waits for: from the replaced disk, the operator's steps included.
        assert wiped["seconds"] >= wiped["from_start_s"] + wiped_phases["format"] - 0.01, (name, wiped)
        assert side["leader"]["before"] not in (restart["node"], wiped["node"])
    # KRaft's wiped controller came back under a new directory id, through remove and add voter.
    kraft_wiped = document["kraft"]["wiped_follower"]
    assert kraft_wiped["new_directory_id"] != kraft_wiped["old_directory_id"]
    assert 0 < kraft_wiped["observer_caught_up_s"] <= kraft_wiped["seconds"]
    assert kraft_wiped["phases_s"]["format"] == kraft_wiped["format_s"] > 0
    assert document["raftmeta"]["wiped_follower"]["phases_s"]["readmission"] == 0.0  # never left the voters
    assert document["ratio_better"] == SCALE_BETTER
    for path, direction in SCALE_BETTER.items():
        ours, theirs = lookup(document["raftmeta"], path), lookup(document["kraft"], path)
        assert document["ratio"][path] == pytest.approx(ours / theirs, abs=0.002), path
        ratio = document["ratio"][path]
        assert document["meets_target"][path] == (ratio >= 1.0 if direction == "higher" else ratio <= 1.0)
