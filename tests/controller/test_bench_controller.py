"""``raftmeta bench controller`` runs end to end and reports every figure it promises."""

from __future__ import annotations

import json

from click.testing import CliRunner

from raftmeta.bench.controller import command


def test_bench_controller_json() -> None:
    result = CliRunner().invoke(
        command,
        ["--sizes", "0,300", "--runs", "1", "--creates-small", "3", "--creates-large", "1", "--output", "json"],
    )
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert document["benchmark"] == "controller"
    assert [p["image_partitions"] for p in document["create_topics"]] == [0, 300]
    for point in document["create_topics"]:
        assert point["create_1_partition_per_s"] > 0
        assert point["create_1000_partitions_per_s"] > 0
    replay = document["replay"]
    # 9 brokers x (register + unfence), a warm-up of 1 small and 1 large topic, then per size
    # 3 x (topic + 1 partition) + (topic + 1000 partitions); the 300-partition image needs no filler.
    assert replay["records"] == 9 * 2 + (2 + 1001) + 2 * (3 * 2 + 1001)
    assert replay["records_per_s"] > 0 and replay["floor_field_reads_per_s"] > 0


def test_bench_controller_rejects_bad_sizes() -> None:
    result = CliRunner().invoke(command, ["--sizes", "x"])
    assert result.exit_code == 2


def test_bench_controller_with_request_ids_logs_a_request_record_per_create() -> None:
    result = CliRunner().invoke(
        command,
        ["--sizes", "0", "--runs", "1", "--creates-small", "3", "--creates-large", "1", "--request-ids", "-o", "json"],
    )
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert document["config"]["request_ids"] is True
    # As above, with a RequestRecord after each create's records (the replay rebuilt the same image).
    creates = 2 + 3 + 1
    assert document["replay"]["records"] == 9 * 2 + (2 + 1001) + (3 * 2 + 1001) + creates
