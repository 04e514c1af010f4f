"""The pure parts of ``bench scale --target kraft|both``: option checks, the document's assembly
and ratios, reading KRaft's snapshot from its log, and the simulated brokers' registration."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from raftmeta.bench.kafka_brokers import SimulatedBroker, registration
from raftmeta.bench.kafka_scale import (
    SCALE_BETTER,
    KafkaScaleParams,
    assemble,
    kraft_snapshot,
    raftmeta_only_options,
    snapshot_end_offset,
)
from raftmeta.cli.main import cli

PARAMS = KafkaScaleParams(2000, topic_partitions=100, brokers=6, racks=3)


def side(rss: int, snapshot_s: float, restart_s: float, describe_ms: float) -> dict[str, object]:
    return {
        "memory": {"max_rss_bytes": rss, "max_hwm_bytes": rss + 10},
        "snapshot": {"max_s": snapshot_s, "max_bytes": 1000},
        "restart": {"seconds": restart_s},
        "wiped_follower": {"seconds": 2 * restart_s},
        "describe_p50_ms": describe_ms,
        "creation": {"partitions_per_s": 1000.0},
    }


def test_raftmeta_target_takes_every_option() -> None:
    assert raftmeta_only_options("raftmeta", 0.1, "node") == []


@pytest.mark.parametrize("target", ["kraft", "both"])
def test_kraft_targets_refuse_raftmeta_only_options_naming_each(target: str) -> None:
    problems = raftmeta_only_options(target, 0.1, "node")
    assert len(problems) == 2
    assert "--growth" in problems[0] and "--snapshots node" in problems[1]
    assert raftmeta_only_options(target, None, "final") == []


def test_cli_refuses_growth_with_target_both_before_starting_anything(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["bench", "scale", "--target", "both", "--partitions", "2000", "--growth", "0.1",
              "--work-dir", str(tmp_path)],
    )  # fmt: skip
    assert result.exit_code == 2
    assert "--growth is measured on raftmeta alone" in result.output
    assert list(tmp_path.iterdir()) == []


def test_cli_refuses_more_racks_than_brokers(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["bench", "scale", "--target", "kraft", "--partitions", "2000", "--brokers", "3", "--racks", "4",
              "--work-dir", str(tmp_path)],
    )  # fmt: skip
    assert result.exit_code == 2
    assert "--racks (4) must be at most --brokers (3)" in result.output


def test_both_sides_give_every_ratio_with_its_direction_and_verdict() -> None:
    document = assemble("both", {"raftmeta": side(100, 1.0, 2.0, 1.0), "kraft": side(400, 4.0, 1.0, 2.0)}, PARAMS)
    assert document["target"] == "both" and document["protocol"] == "kafka"
    assert set(document["ratio"]) == set(SCALE_BETTER) == set(document["meets_target"])
    assert document["ratio"]["memory.max_rss_bytes"] == 0.25
    assert document["ratio"]["restart.seconds"] == 2.0
    assert document["meets_target"]["memory.max_rss_bytes"] is True
    assert document["meets_target"]["restart.seconds"] is False  # a time: lower is better
    assert document["meets_target"]["creation.partitions_per_s"] is True  # equal throughput meets it
    assert document["params"]["brokers"] == 6 and document["params"]["replication_factor"] == 3


def test_one_side_has_no_ratio() -> None:
    document = assemble("kraft", {"kraft": side(400, 4.0, 1.0, 2.0)}, PARAMS)
    assert "kraft" in document and "raftmeta" not in document and "ratio" not in document


def test_a_side_that_stopped_early_gets_no_ratio_at_all() -> None:
    # Its image is smaller: even its memory is not comparable with the other side's.
    stopped = {"memory": {"max_rss_bytes": 400, "max_hwm_bytes": 500}, "stopped": "voter(s) [3001] exited"}
    document = assemble("both", {"raftmeta": side(100, 1.0, 2.0, 1.0), "kraft": stopped}, PARAMS)
    assert set(document["ratio"]) == set(SCALE_BETTER)
    assert all(value is None for value in document["ratio"].values())
    assert all(verdict is None for verdict in document["meets_target"].values())
    assert "voter(s) [3001] exited" in document["ratio_withheld"]


def test_snapshot_end_offset_reads_kafkas_file_name() -> None:
    assert snapshot_end_offset("00000000000000002201-0000000001") == 2201
    assert snapshot_end_offset("snapshot") is None


def write_snapshot_log(path: Path, names: list[tuple[str, str, str]]) -> None:
    lines = []
    for name, created, written in names:
        generator = "[SnapshotGenerator id=3001] Creating new KRaft snapshot file snapshot"
        lines.append(f"[{created}] INFO {generator} {name} because we have waited at least 1 minute(s). (x.Generator)")
        lines.append(f"[{written}] INFO [SnapshotEmitter id=3001] Successfully wrote snapshot {name} (x.Emitter)")
    path.write_text("\n".join(lines) + "\n")


def test_kraft_snapshot_is_the_first_written_at_or_past_the_offset(tmp_path: Path) -> None:
    log_dir = tmp_path / "__cluster_metadata-0"
    log_dir.mkdir()
    early, full = "00000000000000000900-0000000001", "00000000000000002201-0000000001"
    (log_dir / f"{full}.checkpoint").write_bytes(b"x" * 1234)
    server_log = tmp_path / "server.log"
    write_snapshot_log(server_log, [
        (early, "2026-11-29 10:00:00,000", "2026-11-29 10:00:00,100"),
        (full, "2026-11-29 10:01:00,250", "2026-11-29 10:01:02,750"),
    ])  # fmt: skip
    taken = kraft_snapshot(server_log, log_dir, 2000)
    assert taken == {"file": f"{full}.checkpoint", "bytes": 1234, "seconds": 2.5, "earlier_snapshots": 1}
    assert kraft_snapshot(server_log, log_dir, 3000) is None  # not written yet


def test_kraft_snapshot_waits_for_the_written_line(tmp_path: Path) -> None:
    server_log = tmp_path / "server.log"
    server_log.write_text(
        "[2026-11-29 10:01:00,250] INFO [SnapshotGenerator id=3001] Creating new KRaft snapshot file snapshot "
        "00000000000000002201-0000000001 because x. (org.apache.kafka.image.publisher.SnapshotGenerator)\n"
    )
    assert kraft_snapshot(server_log, tmp_path, 2000) is None
    assert kraft_snapshot(tmp_path / "absent.log", tmp_path, 0) is None


def test_simulated_broker_registers_as_a_broker_of_its_rack() -> None:
    broker = SimulatedBroker(7, "rack-b")
    values = registration(broker, "cluster-x", [("metadata.version", 7, 33), ("kraft.version", 0, 1)])
    assert values["broker_id"] == 7 and values["cluster_id"] == "cluster-x" and values["rack"] == "rack-b"
    assert isinstance(values["incarnation_id"], uuid.UUID)
    assert values["log_dirs"] == [broker.log_dir]  # the controller refuses a registration without one
    assert values["features"][0] == {"name": "metadata.version", "min_supported_version": 7,
                                     "max_supported_version": 33}  # fmt: skip
    assert values["listeners"][0]["security_protocol"] == 0
