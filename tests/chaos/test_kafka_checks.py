"""The checks a chaos run with real Kafka brokers adds (raftmeta/chaos/broker_metadata.py,
raftmeta/chaos/kafka_data.py), on answers made by hand: each must fail on what it is there to catch."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

from raftmeta.chaos.broker_metadata import Topics, committed_topics, differences, wait_converged
from raftmeta.chaos.kafka_data import KafkaDataWorkload
from raftmeta.chaos.workload import Workload, WorkloadConfig
from raftmeta.kraft.probe import PartitionView
from raftmeta.v1 import controller_pb2


def _described() -> controller_pb2.DescribeTopicsResponse:
    return controller_pb2.DescribeTopicsResponse(
        topics=[
            controller_pb2.TopicDescription(
                name="orders",
                partitions=[
                    # Out of order on purpose, ISR unsorted: the comparison is by partition, ISR as a set.
                    controller_pb2.PartitionDescription(
                        partition=1, leader=101, leader_epoch=3, replicas=[101, 102, 100], isr=[102, 101]
                    ),
                    controller_pb2.PartitionDescription(
                        partition=0, leader=100, leader_epoch=0, replicas=[100, 101, 102], isr=[100, 101, 102]
                    ),
                ],
            )
        ]
    )


def test_the_committed_image_is_what_a_brokers_metadata_answers() -> None:
    assert committed_topics(_described()) == {
        "orders": (
            PartitionView(100, 0, (100, 101, 102), (100, 101, 102)),
            PartitionView(101, 3, (101, 102, 100), (101, 102)),
        )
    }


def test_every_kind_of_difference_is_named() -> None:
    expected = committed_topics(_described())
    assert differences(expected, dict(expected)) == []
    stale_leader: Topics = {"orders": (expected["orders"][0], PartitionView(102, 2, (101, 102, 100), (101, 102)))}
    (line,) = differences(expected, stale_leader)
    assert line.startswith("orders-1: leader 102 epoch 2") and "committed leader 101 epoch 3" in line
    assert differences(expected, {"orders": expected["orders"][:1]}) == ["orders: 1 partitions, committed 2"]
    assert differences(expected, {}) == ["orders: missing"]
    assert differences(expected, {**expected, "gone": ()}) == ["gone: not committed"]


def test_a_broker_that_never_catches_up_fails_its_check_within_the_bound() -> None:
    expected = committed_topics(_described())

    async def committed() -> Topics:
        return expected

    # Nothing listens at port 9 on loopback (discard): every probe fails, so no broker converges.
    (verdict,) = asyncio.run(wait_converged({100: "127.0.0.1:9"}, committed, bound_s=0.5))
    check = verdict.check(0.5)
    assert not check.passed and verdict.converged_ms is None
    assert "broker 100" in check.detail and "no answer" in check.detail
    assert check.name == "kafka:broker-100-metadata-converged"


def test_a_round_without_the_controllers_answer_compares_nothing() -> None:
    async def unanswered() -> Topics | None:
        return None

    (verdict,) = asyncio.run(wait_converged({100: "127.0.0.1:9"}, unanswered, bound_s=0.3))
    assert verdict.converged_ms is None
    assert verdict.last_differences == ("the active controller did not describe its topics",)


def _judged(
    tmp_path: Path, acknowledged: dict[str, tuple[int, int]], group: Counter[str], log: dict[tuple[int, int], str]
) -> dict[str, bool]:
    workload = KafkaDataWorkload(
        "127.0.0.1:9", tmp_path / "history.jsonl", client_timeout_s=1, client_log=tmp_path / "clients.log"
    )
    workload.history.close()
    workload.group_seen = group
    checks, _ = workload._judge(acknowledged, 0, Counter(log.values()), log, 0.0)
    return {c.name: c.passed for c in checks}


def test_the_data_checks_pass_on_a_whole_log_and_fail_on_a_lost_a_moved_or_a_doubled_message(tmp_path: Path) -> None:
    acknowledged = {"0": (0, 0), "1": (1, 0), "2": (0, 1)}
    whole = {(0, 0): "0", (1, 0): "1", (0, 1): "2"}
    assert all(_judged(tmp_path, acknowledged, Counter(acknowledged.keys()), whole).values())
    # A group that missed one; a log that lost one (truncated away); one written twice.
    assert not _judged(tmp_path, acknowledged, Counter(["0", "1"]), whole)["kafka:acknowledged-consumed"]
    truncated = {(0, 0): "0", (1, 0): "1"}
    assert not _judged(tmp_path, acknowledged, Counter(acknowledged.keys()), truncated)["kafka:acknowledged-in-log"]
    doubled = {**whole, (1, 1): "1"}
    assert not _judged(tmp_path, acknowledged, Counter(acknowledged.keys()), doubled)["kafka:no-duplicates"]


def test_the_admin_workload_places_replicas_on_the_real_brokers_ids(tmp_path: Path) -> None:
    from raftmeta.chaos.history import HistoryWriter

    history = HistoryWriter(tmp_path / "history.jsonl")
    try:
        workload = Workload(["127.0.0.1:9"], WorkloadConfig(brokers=3, first_broker_id=100), 7, history)
        assert list(workload._broker_ids) == [100, 101, 102]
        import random

        rng = random.Random(1)
        placed = {b for _ in range(200) for a in workload._topic(rng).assignments for b in a.broker_ids}
        assert placed and placed <= {100, 101, 102}
    finally:
        history.close()


def test_the_html_report_has_a_row_per_broker_and_the_datas_figures() -> None:
    from raftmeta.chaos.report import _kafka_section

    assert _kafka_section(None) == ""
    verdicts = [
        {"broker_id": 100, "converged_ms": 20, "topics": 3, "partitions": 9, "last_differences": []},
        {"broker_id": 101, "converged_ms": None, "topics": 2, "partitions": 6, "last_differences": ["t: missing"]},
    ]
    data = {"topic": "chaos-data", "sent": 5, "acknowledged": 4, "failed": 1, "in_log": 4, "group_received": 4,
            "group_received_twice": 0}  # fmt: skip
    page = _kafka_section({"brokers": verdicts, "data": data, "metadata_bound_s": 4.5})
    assert "<td>100</td><td>20</td>" in page and "<td>101</td><td>-</td>" in page and "t: missing" in page
    assert "acknowledged 4" in page and "bound 4.5 s" in page
