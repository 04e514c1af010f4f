"""``raftmeta quorum status`` as kafka-metadata-quorum describe prints it, from a real quorum:
--status and --replication views, wall-clock timestamps, and -1 for a voter the leader has not
heard from in its epoch (it used to show LogEndOffset 0)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from raftmeta.client import SyncControllerClient
from raftmeta.local import quorum as local_quorum

from .test_durable_state import stop
from .test_node import create, leader_of, wait_until

pytestmark = pytest.mark.integration


def status(quorum: local_quorum.LocalQuorum, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "raftmeta", "quorum", "status", "--data-dir", quorum.data_dir, *args],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_status_and_replication_views_with_a_voter_that_is_down(
    quorum: local_quorum.LocalQuorum, client: SyncControllerClient
) -> None:
    create(client, "t")
    before_ms = int(time.time() * 1000)
    document = json.loads(status(quorum, "--output", "json").stdout)
    leader = document["leader_id"]
    assert {v["status"] for v in document["voters"]} == {"Leader", "Follower"}
    assert document["max_follower_lag"] >= 0 and document["max_follower_lag_time_ms"] >= 0
    for voter in document["voters"]:
        assert voter["log_end_offset"] >= 0 and voter["last_fetch_timestamp"] >= before_ms - 10_000

    follower = next(n.id for n in quorum.nodes if n.id != leader)
    local_quorum.signal_node(quorum, follower, signal.SIGKILL)
    stop(quorum, leader)  # the next leader has never heard from the killed follower
    local_quorum.restart(quorum, leader)
    wait_until(lambda: leader_of(client) >= 0, what="a new leader")
    document = json.loads(status(quorum, "--output", "json").stdout)
    [down] = [v for v in document["voters"] if v["id"] == follower]
    assert (down["log_end_offset"], down["lag"], down["last_fetch_timestamp"]) == (-1, -1, -1)
    assert document["max_follower_lag"] == -1

    text = status(quorum, "--status")
    assert text.returncode == 0
    lines = text.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == [
        "ClusterId", "LeaderId", "LeaderEpoch", "HighWatermark", "MaxFollowerLag", "MaxFollowerLagTimeMs",
        "CurrentVoters", "CurrentObservers",
    ]  # fmt: skip
    # Kafka 3.9+'s form: every voter with its directory id and its endpoint from the voter set.
    for node in quorum.nodes:
        assert f'{{"id": {node.id}, "directoryId": "' in lines[6]
        assert f'"endpoints": ["CONTROLLER://{node.address}"]}}' in lines[6], lines[6]
    table = status(quorum, "--replication").stdout.splitlines()
    assert table[0].split() == [
        "NodeId",
        "DirectoryId",
        "LogEndOffset",
        "Lag",
        "LastFetchTimestamp",
        "LastCaughtUpTimestamp",
        "Status",
    ]
    assert [row.split()[2:5] for row in table[1:] if row.split()[0] == str(follower)] == [["-1", "-1", "-1"]]
