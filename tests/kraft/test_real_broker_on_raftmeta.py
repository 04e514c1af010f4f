"""A real Apache Kafka broker of the pinned release (``process.roles=broker``) whose
``controller.quorum.bootstrap.servers`` are a raftmeta quorum's Kafka listeners: its raft client
finds the leader, fetches the metadata log from offset 0 as an observer (the quorum has taken no
snapshot: the metadata.version its loader waits for is the FeatureLevelRecord the first leader
wrote), registers, is unfenced, and leaves by controlled shutdown when stopped.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from raftmeta.client import RetryPolicy, SyncControllerClient
from raftmeta.kraft.classpath import java_executable, kafka_classpath
from raftmeta.kraft.node_config import JvmSettings, broker_properties, jvm_argv, log4j2_properties, render_properties
from raftmeta.kraft.storage_tool import FormatJob, format_all
from raftmeta.local import quorum as local_quorum
from raftmeta.storage.snapshot import SNAPSHOT_SUFFIX
from tests.integration.conftest import FAST_NODE_ARGS

pytestmark = [pytest.mark.kraft, pytest.mark.timeout(300)]
BROKER_ID = 10
NODE_ARGS = FAST_NODE_ARGS
# Kafka's initial.broker.registration.timeout.ms: past it the broker gives up and exits.
REGISTRATION_TIMEOUT_S = 60.0
# A stopped broker asks for a controlled shutdown and exits once it is granted; this bounds a hang.
SHUTDOWN_TIMEOUT_S = 60.0


def _until(
    what: str, condition: Callable[[], bool], timeout_s: float, broker: subprocess.Popen[bytes], log: Path
) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if broker.poll() is not None:
            raise AssertionError(f"the broker exited ({broker.returncode}) before {what}:\n{log.read_text()[-4000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"not {what} within {timeout_s:.0f} s:\n{log.read_text()[-4000:]}")
        time.sleep(0.2)


def test_a_real_kafka_broker_registers_and_is_unfenced_on_a_raftmeta_quorum(tmp_path: Path) -> None:
    quorum = local_quorum.up(tmp_path / "q", nodes=3, brokers=3, node_args=NODE_ARGS, kafka=True)
    broker: subprocess.Popen[bytes] | None = None
    try:
        node_dir = tmp_path / "broker"
        node_dir.mkdir()
        (port,) = local_quorum.free_ports(1)
        voters = {n.id: str(n.kafka_address) for n in quorum.nodes}
        properties = broker_properties(
            BROKER_ID, f"127.0.0.1:{port}", "r1", [], node_dir / "data", 1, static_voters=voters
        )
        (node_dir / "server.properties").write_text(render_properties(properties))
        (node_dir / "log4j2.properties").write_text(log4j2_properties(node_dir / "server.log"))
        format_all(quorum.cluster_id, [FormatJob(BROKER_ID, node_dir / "server.properties", None)])
        argv = jvm_argv(java_executable(), kafka_classpath(), JvmSettings(), node_dir / "log4j2.properties", node_dir)
        log = node_dir / "server.log"
        with (node_dir / "stdout").open("wb") as out:
            broker = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)

        with SyncControllerClient(quorum.bootstrap_server, retry=RetryPolicy(deadline_s=20)) as client:

            def fenced() -> bool | None:
                found = [b.fenced for b in client.describe_cluster().brokers if b.broker_id == BROKER_ID]
                return found[0] if found else None

            _until("registered and unfenced", lambda: fenced() is False, REGISTRATION_TIMEOUT_S, broker, log)
            snapshots = sorted(p.name for p in (tmp_path / "q").rglob(f"*{SNAPSHOT_SUFFIX}"))
            assert snapshots == [], "the broker read the log from offset 0, with no snapshot to start from"
            observers = {o.replica_id for o in client.describe_quorum().observers}
            assert BROKER_ID in observers, "the broker fetches the metadata log as an observer"
            # The broker logs its start once it has seen itself unfenced, a moment after the controller.
            _until("started", lambda: "Kafka Server started" in log.read_text(), REGISTRATION_TIMEOUT_S, broker, log)

            broker.send_signal(signal.SIGTERM)  # as kafka-server-stop does: a controlled shutdown
            # The JVM exits 128 + SIGTERM once its shutdown hook (the broker's shutdown) has run.
            assert broker.wait(SHUTDOWN_TIMEOUT_S) == 128 + signal.SIGTERM, log.read_text()[-4000:]
            assert "shut down completed" in log.read_text()
            assert fenced() is True
            assert "The controller has asked us to exit controlled shutdown" in log.read_text()
    finally:
        if broker is not None and broker.poll() is None:
            broker.kill()
            broker.wait()
        local_quorum.down(local_quorum.LocalQuorum.load(tmp_path / "q"))
