"""A wiped voter's phases from its own log (raftmeta.bench.comeback): raftmeta's JSON lines and
KRaft's server.log lines, as the two write them."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from raftmeta.bench.comeback import FOLLOWING, SNAPSHOT_LOADED, kraft_marks, phases, raftmeta_marks

STARTED = datetime(2026, 11, 29, 13, 0, 0).timestamp()  # local time, as log4j writes it


def raftmeta_line(event: str, at: float, **fields: object) -> str:
    stamp = datetime.fromtimestamp(at).astimezone().isoformat().replace("+00:00", "Z")
    return json.dumps({"component": "node", "node_id": 3, **fields, "event": event, "timestamp": stamp})


def test_raftmeta_marks_are_the_first_after_the_start(tmp_path: Path) -> None:
    log = tmp_path / "node-3.log"
    log.write_text(
        "\n".join([
            # The incarnation before the wipe: ignored.
            raftmeta_line("role changed", STARTED - 60, role="follower", leader_id=1),
            raftmeta_line("installed snapshot from the leader", STARTED - 50, end_offset=10),
            "Traceback (a line that is not an event)",
            raftmeta_line("node started", STARTED + 0.4),
            raftmeta_line("role changed", STARTED + 1.25, role="unattached", leader_id=-1),
            raftmeta_line("role changed", STARTED + 1.5, role="follower", leader_id=1),
            raftmeta_line("installed snapshot from the leader", STARTED + 4.0, end_offset=900),
            raftmeta_line("role changed", STARTED + 9.0, role="follower", leader_id=2),
        ])
        + "\n"
    )  # fmt: skip
    marks = raftmeta_marks(log, STARTED)
    assert marks == pytest.approx({FOLLOWING: STARTED + 1.5, SNAPSHOT_LOADED: STARTED + 4.0})


def test_kraft_marks_read_its_log4j_lines(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(
        "[2026-11-29 12:59:00,000] INFO [RaftManager id=3002] Completed transition to "
        "FollowerState(fetchTimeoutMs=2000, epoch=1, leader=3001, leaderEndpoints=..., "
        "voters=[3001, 3002, 3003], highWatermark=..., "
        "fetchingSnapshot=Optional.empty) from Unattached (org.apache.kafka.raft.QuorumState)\n"
        "[2026-11-29 13:00:02,250] INFO [RaftManager id=3002] Completed transition to "
        "FollowerState(fetchTimeoutMs=2000, epoch=1, leader=3001, leaderEndpoints=..., "
        "voters=[3001, 3003], highWatermark=Optional.empty, "
        "fetchingSnapshot=Optional.empty) from UnattachedState(epoch=1) (org.apache.kafka.raft.QuorumState)\n"
        "[2026-11-29 13:00:02,300] INFO [RaftManager id=3002] Fetching snapshot OffsetAndEpoch[offset=1234, "
        "epoch=1] from Fetch response from leader 3001 (org.apache.kafka.raft.KafkaRaftClient)\n"
        "[2026-11-29 13:00:06,500] INFO [RaftManager id=3002] Fully truncated the log at (LogOffsetMetadata("
        "offset=1234, metadata=Optional[(segmentBaseOffset=1234,relativePositionInSegment=0)]), 1) after downloading "
        "snapshot OffsetAndEpoch[offset=1234, epoch=1] from leader 3001 (org.apache.kafka.raft.KafkaRaftClient)\n"
        "[2026-11-29 13:00:07,000] INFO [MetadataLoader id=3002] handleLoadSnapshot(00000000000000001234-0000000001): "
        "generated a metadata delta between offset -1 and this snapshot in 1200000 us. "
        "(org.apache.kafka.image.loader.MetadataLoader)\n"
        "    at a stack trace line\n"
    )
    assert kraft_marks(log, STARTED) == pytest.approx({FOLLOWING: STARTED + 2.25, SNAPSHOT_LOADED: STARTED + 6.5})


def test_phases_add_up_to_the_seconds_after_the_format() -> None:
    marks = {FOLLOWING: STARTED + 2.25, SNAPSHOT_LOADED: STARTED + 6.5}
    result = phases(STARTED, marks, caught_up_s=8.0, seconds=11.0, format_s=1.5)
    assert result["phases_s"] == {
        "format": 1.5,
        "start_to_following": 2.25,
        "snapshot": 4.25,
        "log_catch_up": 1.5,
        "readmission": 3.0,
    }
    assert sum(v for k, v in result["phases_s"].items() if k != "format") == pytest.approx(11.0)
    assert result["marks"] == {FOLLOWING: 2.25, SNAPSHOT_LOADED: 6.5}


def test_a_missing_or_impossible_mark_leaves_its_phase_none_and_the_sum_whole() -> None:
    # No snapshot (the voter fetched the log), and a "following" after the catch-up (clock step).
    result = phases(STARTED, {FOLLOWING: STARTED + 1.0}, caught_up_s=5.0, seconds=5.0)
    assert result["phases_s"] == {
        "format": 0.0, "start_to_following": 1.0, "snapshot": None, "log_catch_up": 4.0, "readmission": 0.0,
    }  # fmt: skip
    late = phases(STARTED, {FOLLOWING: STARTED + 7.0, SNAPSHOT_LOADED: STARTED + 2.0}, caught_up_s=5.0, seconds=5.0)
    assert late["phases_s"]["start_to_following"] is None and late["phases_s"]["snapshot"] == 2.0
    assert late["phases_s"]["log_catch_up"] == 3.0


def test_a_mark_within_the_leaders_millisecond_of_the_catch_up_is_at_it() -> None:
    # Seen in CI: the snapshot loaded 0.4 ms after the leader's whole-millisecond caught-up time.
    marks = {FOLLOWING: STARTED + 1.288, SNAPSHOT_LOADED: STARTED + 1.2964}
    result = phases(STARTED, marks, caught_up_s=1.296, seconds=1.296)
    assert result["phases_s"] == {
        "format": 0.0, "start_to_following": 1.288, "snapshot": 0.008, "log_catch_up": 0.0, "readmission": 0.0,
    }  # fmt: skip
    # Well after it, the mark is out of order (a clock step) and its phase stays None.
    late = phases(
        STARTED, {FOLLOWING: STARTED + 1.0, SNAPSHOT_LOADED: STARTED + 1.31}, caught_up_s=1.296, seconds=1.296
    )
    assert late["phases_s"]["snapshot"] is None and late["phases_s"]["log_catch_up"] == 0.296
