"""Leader changes with real processes: a leader that stops (SIGTERM) resigns, and a leader whose
process dies (SIGKILL) is replaced without waiting out the fetch timeout.

Both run with a 10 s fetch timeout, so that a successor elected within 5 s proves the fast path
(resignation, or the followers' probe of the dead leader) and not the timeout.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from raftmeta.client import RetryPolicy, SyncControllerClient
from raftmeta.local import quorum as local_quorum
from raftmeta.v1 import errors_pb2
from tests.integration.test_node import create, leader_of, wait_until
from tests.integration.test_snapshots import events, start, stop

pytestmark = pytest.mark.integration

SLOW_DETECTION_ARGS = ["--fetch-timeout-ms", "10000", "--election-timeout-ms", "500", "--session-timeout-ms", "30000"]
FAST_PATH_S = 5.0


@pytest.fixture
def slow_failure_detection(tmp_path: Path) -> Iterator[local_quorum.LocalQuorum]:
    started = start(tmp_path / "q", SLOW_DETECTION_ARGS)
    try:
        yield started
    finally:
        stop(tmp_path / "q")


def replace_leader(quorum: local_quorum.LocalQuorum, sig: signal.Signals) -> tuple[local_quorum.NodeProcess, float]:
    """Send ``sig`` to the leader; the seconds until the survivors elect a successor that commits."""
    with SyncControllerClient(quorum.bootstrap_server, retry=RetryPolicy(deadline_s=20)) as client:
        assert create(client, "before").error_code == errors_pb2.NONE
        old = quorum.node(leader_of(client))
    others = ",".join(n.address for n in quorum.nodes if n.id != old.id)
    with SyncControllerClient(others, retry=RetryPolicy(deadline_s=20, attempt_timeout_s=1)) as survivors:
        epoch = survivors.describe_quorum().leader_epoch
        started = time.monotonic()
        local_quorum.signal_node(quorum, old.id, sig)

        def successor() -> bool:
            status = survivors.describe_quorum()
            return status.leader_id not in (-1, old.id) and status.leader_epoch > epoch

        wait_until(successor, timeout_s=FAST_PATH_S, what=f"a successor elected after {sig.name} of the leader")
        elapsed = time.monotonic() - started
        assert create(survivors, "after").error_code == errors_pb2.NONE
    return old, elapsed


def test_sigterm_leader_resigns_and_a_successor_is_elected_at_once(
    slow_failure_detection: local_quorum.LocalQuorum,
) -> None:
    old, elapsed = replace_leader(slow_failure_detection, signal.SIGTERM)
    wait_until(lambda: not local_quorum.alive(old.pid), what="the old leader exiting")
    assert events(old, "resigning leadership before stopping")
    resigned = events(old, "resigned")
    assert resigned and resigned[-1]["unacknowledged"] == [], resigned
    assert elapsed < FAST_PATH_S


def test_killed_leader_is_replaced_before_the_fetch_timeout(slow_failure_detection: local_quorum.LocalQuorum) -> None:
    quorum = slow_failure_detection
    old, elapsed = replace_leader(quorum, signal.SIGKILL)
    assert elapsed < FAST_PATH_S
    # The survivors saw the dead leader's port refuse connections and started the election.
    noticed = [
        n.id for n in quorum.nodes if n.id != old.id and events(n, "leader process gone; electing a successor now")
    ]
    assert noticed, "no follower detected the dead leader"
