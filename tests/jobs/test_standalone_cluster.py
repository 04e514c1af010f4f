"""The verify job on a real standalone Spark cluster (master + worker processes started from the
installed pyspark, on loopback) gives the same verdict and figures as local mode; on a KRaft
quorum's Kafka-format logs, the JVM reader (Kafka's own decoder) on the cluster -- through the CLI
and through deploy/spark/README.md's ``spark-submit --jars`` command -- gives the checks and
figures of the in-process Python path."""

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

from raftmeta.bench.kafka_verify import kafka_quorum
from raftmeta.jobs.kafka_log_jar import reader_jars
from raftmeta.jobs.kraft_verify import verify_kraft
from tests.jobs.quorum_logs import append_everywhere, fence_broker, partition_change, write_quorum

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def spark_bin(name: str) -> str:
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / name)


def spark_class() -> str:
    return spark_bin("spark-class")


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


def _without_reader(document: dict[str, object]) -> dict[str, object]:
    figures = document["figures"]
    assert isinstance(figures, dict)
    return {"checks": document["checks"], "figures": {k: v for k, v in figures.items() if k != "reader"}}


def test_the_jvm_reader_on_the_cluster_gives_the_python_paths_result(standalone_master: str, tmp_path: Path) -> None:
    jars = reader_jars()  # fails naming `make jvm-reader` (or `make kafka`) when they are missing
    data = tmp_path / "kraft"
    # Segments of 1,000 records, and split into byte ranges by the job (each under 4 MiB: one range).
    kafka_quorum(data, records=3_000, nodes=3, brokers=6, segment_records=1_000)
    expected = verify_kraft(data).to_json(str(data))
    assert expected["passed"] is True

    on_cluster = run_cli_verify(data, standalone_master, "--reader", "jvm")
    assert on_cluster["reader"] == "jvm"
    assert _without_reader(on_cluster) == _without_reader(expected)

    # deploy/spark/README.md's command: spark-submit with the reader and the Kafka jars on --jars.
    submitted = subprocess.run(
        [spark_bin("spark-submit"), "--master", standalone_master, "--jars", ",".join(str(j) for j in jars),
         str(Path(__file__).parents[2] / "deploy" / "spark" / "verify_job.py"), "--data-dir", str(data)],
        capture_output=True, text=True, timeout=600, check=False,
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
             "PYSPARK_DRIVER_PYTHON": sys.executable},
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stderr[-3000:]
    document = json.loads(submitted.stdout)
    assert document["reader"] == "jvm"
    assert _without_reader(document) == _without_reader(expected)

    # Without the jars the job says what is missing instead of a Spark stack trace.
    bare = subprocess.run(
        [spark_bin("spark-submit"), "--master", "local[1]",
         str(Path(__file__).parents[2] / "deploy" / "spark" / "verify_job.py"), "--data-dir", str(data)],
        capture_output=True, text=True, timeout=600, check=False,
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
             "PYSPARK_DRIVER_PYTHON": sys.executable},
    )  # fmt: skip
    assert bare.returncode == 2, bare.stderr[-3000:]
    # spark-submit's PythonRunner merges the job's stderr into its stdout.
    assert "give spark-submit --jars its jar and the Kafka jars" in bare.stdout
