"""`raftmeta kraft up|status|down` round trip on a throwaway cluster of its own (3 controllers so
that a new leader can be elected, 2 brokers), and what the launcher does to its nodes: kill and
restart a broker (also while the other is paused), kill and pause the active controller (another
is elected) and bring it back. Tests run in file order; the last one takes the cluster down."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from raftmeta.kraft.cluster import KraftCluster
from raftmeta.kraft.probe import unfenced_brokers
from raftmeta.local.quorum import alive

pytestmark = pytest.mark.kraft


def raftmeta(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "raftmeta", *args, "--output", "json"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.fixture(scope="module")
def started(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, Any]]]:
    data_dir = tmp_path_factory.mktemp("kraft-cli")
    done = raftmeta("kraft", "up", "--data-dir", str(data_dir), "--controllers", "3", "--brokers", "2", "--racks", "2")
    try:
        assert done.returncode == 0, done.stdout + done.stderr
        yield data_dir, json.loads(done.stdout)
    finally:
        if (data_dir / "kraft.json").exists():
            KraftCluster.load(data_dir).stop()  # whatever the tests left running


def status(data_dir: Path) -> tuple[int, dict[str, Any]]:
    done = raftmeta("kraft", "status", "--data-dir", str(data_dir))
    return done.returncode, json.loads(done.stdout)


def test_up_returns_a_ready_cluster_and_status_reports_it(started: tuple[Path, dict[str, Any]]) -> None:
    data_dir, document = started
    assert [(n["node_id"], n["role"], n["rack"]) for n in document["nodes"]] == [
        (3001, "controller", None), (3002, "controller", None), (3003, "controller", None), (0, "broker", "rack-a"),
        (1, "broker", "rack-b"),
    ]  # fmt: skip
    assert document["bootstrap_servers"] == ",".join(n["address"] for n in document["nodes"][3:])
    assert document["controller_bootstrap_servers"] == ",".join(n["address"] for n in document["nodes"][:3])
    # `up` has returned, and the JVMs it started keep running.
    assert all(alive(n["pid"]) for n in document["nodes"])
    code, now = status(data_dir)
    assert code == 0, now
    assert now["cluster_id"] == document["cluster_id"]
    assert all(n["running"] for n in now["nodes"])
    assert now["active_controller"] in (3001, 3002, 3003)


def test_a_killed_broker_is_reported_and_restarts_with_its_storage(started: tuple[Path, dict[str, Any]]) -> None:
    data_dir, _ = started
    cluster = KraftCluster.load(data_dir)
    killed = cluster.kill(0)
    assert not alive(killed)
    code, now = status(data_dir)
    assert code == 1 and now["nodes"][3]["running"] is False
    restarted = cluster.restart(0)  # returns once broker 0 is registered and unfenced again
    assert restarted.pid != killed and alive(restarted.pid)
    assert KraftCluster.load(data_dir).node(0).pid == restarted.pid  # kraft.json follows
    assert status(data_dir)[0] == 0


def test_a_broker_restarts_while_another_is_paused_and_fenced(started: tuple[Path, dict[str, Any]]) -> None:
    data_dir, _ = started
    cluster = KraftCluster.load(data_dir)
    cluster.pause(1)
    # Broker 1's session times out (broker.session.timeout.ms) and the controller fences it.
    fenced = poll(lambda: 1 not in unfenced_brokers(cluster.node(0).address, 5.0), cluster.ready_timeout_s)
    assert fenced, "broker 1 was never fenced while paused"
    cluster.kill(0)
    restarted = cluster.restart(0)  # ready once it sees itself unfenced: broker 1 is not waited for
    assert unfenced_brokers(restarted.address, 5.0) == {0}
    cluster.resume(1)  # it heartbeats again and is unfenced
    assert poll(lambda: unfenced_brokers(restarted.address, 5.0) == {0, 1}, cluster.ready_timeout_s)


def poll(condition: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def test_killing_the_active_controller_elects_another(started: tuple[Path, dict[str, Any]]) -> None:
    data_dir, _ = started
    cluster = KraftCluster.load(data_dir)
    leader = cluster.active_controller()
    cluster.kill(leader)
    successor = cluster.wait_for_leader(other_than=leader)
    assert successor != leader and cluster.active_controller() == successor
    cluster.restart(leader)  # returns once the leader has seen it caught up
    assert cluster.active_controller() in (3001, 3002, 3003)
    assert status(data_dir)[0] == 0


def test_a_paused_controller_is_resumed(started: tuple[Path, dict[str, Any]]) -> None:
    data_dir, _ = started
    cluster = KraftCluster.load(data_dir)
    leader = cluster.active_controller()
    cluster.pause(leader)
    assert cluster.wait_for_leader(other_than=leader) != leader
    resumed_at_ms = int(time.time() * 1000)
    cluster.resume(leader)
    cluster.wait_ready([leader], caught_up_since_ms=resumed_at_ms)  # it follows the new leader


def test_down_stops_every_process(started: tuple[Path, dict[str, Any]]) -> None:
    data_dir, _ = started
    pids = {n.pid for n in KraftCluster.load(data_dir).nodes}
    done = raftmeta("kraft", "down", "--data-dir", str(data_dir))
    assert done.returncode == 0, done.stderr
    assert set(json.loads(done.stdout)["stopped_pids"]) == pids
    assert not any(alive(pid) for pid in pids)
    code, now = status(data_dir)
    assert code == 1 and not any(n["running"] for n in now["nodes"])
