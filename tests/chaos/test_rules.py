"""The controller's rules on a chaos run's committed tape (raftmeta.chaos.rules): a log the
controller wrote passes; a doctored record is refused by its rule; a gap bridged by a snapshot
starts the oracle over from the snapshot's image."""

from __future__ import annotations

from raftmeta.chaos.rules import CHECK, check_rules
from raftmeta.v1 import records_pb2
from tests.chaos.test_moves import LoggedController, moved_and_cancelled


def test_a_controller_written_log_with_moves_passes() -> None:
    log = LoggedController()
    moved_and_cancelled(log)
    check = check_rules(log.batches, {})
    assert check.name == CHECK
    assert check.passed, check.detail
    assert "committed records judged by the controller's rules" in check.detail


def test_a_fenced_broker_elected_is_refused() -> None:
    log = LoggedController()
    topic_id = log.create("k1", [0, 1, 2])
    epoch = log.controller.image.brokers[1].epoch
    log.append(
        [records_pb2.MetadataRecord(fence_broker=records_pb2.FenceBrokerRecord(broker_id=1, broker_epoch=epoch))]
    )
    log.append(log.change(topic_id, 0, leader=1))  # the controller's replay allows it: 1 is in the ISR
    check = check_rules(log.batches, {})
    assert not check.passed
    assert check.detail.startswith("rule-leader-election: offset ")
    assert "new leader: broker 1" in check.detail and "fenced" in check.detail


def test_a_gap_bridged_by_a_snapshot_starts_over_from_its_image() -> None:
    log = LoggedController()
    moved_and_cancelled(log)
    bases = sorted(log.batches)
    gap, resume = bases[len(bases) // 2], bases[len(bases) // 2 + 2]
    del log.batches[gap]
    snapshot_id, data = log.snapshot(resume)
    check = check_rules(log.batches, {snapshot_id: data})
    assert check.passed, check.detail
    assert "started over from 1 snapshot(s)" in check.detail
