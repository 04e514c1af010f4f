"""The verify job on a real standalone Spark cluster (master + worker processes started from the
installed pyspark, on loopback) gives the same verdict and figures as local mode."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.jobs.quorum_logs import append_everywhere, fence_broker, partition_change, write_quorum

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def spark_class() -> str:
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / "spark-class")


def wait_for_port(port: int, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.3)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout_s} s")


@pytest.fixture(scope="module")
def standalone_master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    work = tmp_path_factory.mktemp("spark-standalone")
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOG_DIR": str(work), "SPARK_WORKER_DIR": str(work)}
    port, ui_master, ui_worker = free_port(), free_port(), free_port()
    master_url = f"spark://127.0.0.1:{port}"
    logs = [open(work / name, "wb") for name in ("master.log", "worker.log")]  # noqa: SIM115 - closed below
    procs = [
        subprocess.Popen(
            [spark_class(), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
             "--webui-port", str(ui_master)],
            env=env, stdout=logs[0], stderr=subprocess.STDOUT, start_new_session=True,
        ),
    ]  # fmt: skip
    try:
        wait_for_port(port)
        procs.append(
            subprocess.Popen(
                [spark_class(), "org.apache.spark.deploy.worker.Worker", master_url, "--host", "127.0.0.1",
                 "--cores", "2", "--memory", "1g", "--webui-port", str(ui_worker), "--work-dir", str(work)],
                env=env, stdout=logs[1], stderr=subprocess.STDOUT, start_new_session=True,
            )
        )  # fmt: skip
        yield master_url
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        for log in logs:
            log.close()


def run_cli_verify(data: Path, master: str, *extra: str) -> dict[str, object]:
    result = subprocess.run(
        [sys.executable, "-m", "raftmeta", "verify", "--data-dir", str(data), "--master", master, "-o", "json", *extra],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode in (0, 1), result.stderr[-3000:]
    assert result.stdout.strip(), f"verify printed nothing (exit {result.returncode}):\n{result.stderr[-3000:]}"
    document: dict[str, object] = json.loads(result.stdout)
    document.pop("report", None)
    return document


def test_cluster_and_local_mode_agree(standalone_master: str, tmp_path: Path) -> None:
    data = tmp_path / "quorum"
    logs = write_quorum(data, topics=9)
    # Broker 3 is fenced: topic-2-1 (replicas [3, 4, 5]) moves its leadership to 4.
    change = partition_change(2, 1, leader=4, isr=[4, 5], leader_epoch=1, partition_epoch=1)
    append_everywhere(data, logs, [change, fence_broker(3)])
    on_cluster = run_cli_verify(data, standalone_master)
    local = run_cli_verify(data, "local[2]")
    for mine, theirs in zip(on_cluster["checks"], local["checks"], strict=True):  # type: ignore[call-overload]
        assert mine == theirs
    assert on_cluster == local
    assert on_cluster["passed"] is True
    # The incremental path on the cluster: the store is written by executors and read back by them.
    store = tmp_path / "digests"
    for run in (1, 2):
        incremental = run_cli_verify(data, standalone_master, "--incremental", "--digest-store", str(store))
        figures = incremental["figures"]
        assert isinstance(figures, dict)
        reused = figures.pop("incremental")
        assert (reused["segments_reused"] > 0) == (run == 2), reused
        checks = incremental["checks"]
        assert isinstance(checks, list)
        assert [c for c in checks if c["name"] != "verified-segments-unchanged"] == local["checks"]
        assert figures == local["figures"]
    shutil.rmtree(data)
