"""``verify --reader jvm|python`` of a KRaft quorum's logs in Spark SQL (raftmeta/jobs/kraft_spark.py)
gives the checks -- names, verdicts and details -- and the health (its figures, verdict and
unhealthy partitions named) of the driver-side verify
(raftmeta/jobs/kraft_verify.py), through either reader, on the committed real log on three
controllers intact and doctored: a flipped byte, a dropped batch, a state breaking invariant 7, a
batch that differs only in its leader epoch, a torn tail."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from raftmeta.jobs.health import FIGURES
from raftmeta.jobs.kafka_log_jar import reader_jar
from raftmeta.jobs.kraft_spark import verify_kraft_spark
from raftmeta.jobs.kraft_verify import verify_kraft
from raftmeta.records.kafka.batch import batch_size, iter_batches
from tests.jobs.test_kraft_verify import _append_to_every_controller, quorum, segment_of  # noqa: F401 (fixture)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _flip(data_dir: Path) -> None:
    segment = segment_of(data_dir, 3002)
    data = bytearray(segment.read_bytes())
    data[292 + 40] ^= 0x01
    segment.write_bytes(bytes(data))


def _drop(data_dir: Path) -> None:
    segment = segment_of(data_dir, 3003)
    data = segment.read_bytes()
    second = batch_size(data, 0)
    segment.write_bytes(data[:second] + data[second + batch_size(data, second) :])


def _invariant_7(data_dir: Path) -> None:
    _append_to_every_controller(
        data_dir, {"PartitionId": 0, "Leader": 1}, {"PartitionId": 1, "EligibleLeaderReplicas": ()}
    )


def _older_epoch(data_dir: Path) -> None:
    segment = segment_of(data_dir, 3003)
    data = bytearray(segment.read_bytes())
    last = list(iter_batches(bytes(data)))[-1][0]
    data[last + 12 : last + 16] = (0).to_bytes(4, "big")
    segment.write_bytes(bytes(data))


def _torn(data_dir: Path) -> None:
    segment = segment_of(data_dir, 3001)
    data = segment.read_bytes()
    segment.write_bytes(data[: list(iter_batches(data))[-1][0] + 30])


DOCTORING: dict[str, Callable[[Path], None]] = {
    "intact": lambda _: None,
    "flipped byte": _flip,
    "dropped batch": _drop,
    "invariant 7": _invariant_7,
    "older epoch": _older_epoch,
    "torn tail": _torn,
}


def _without_crc_values(detail: str) -> str:
    """The driver's detail less the stored and computed CRCs (the rows carry the verdict only)."""
    return re.sub(r" \(stored 0x[0-9a-f]{8}, computed 0x[0-9a-f]{8}\)", "", detail)


@pytest.mark.parametrize("doctoring", DOCTORING)
def test_the_spark_checks_equal_the_driver_checks(spark: SparkSession, quorum: Path, doctoring: str) -> None:  # noqa: F811
    reader_jar()  # fails naming `make jvm-reader` when the reader is not built
    DOCTORING[doctoring](quorum)
    expected = verify_kraft(quorum)
    want = [(c.name, c.passed, _without_crc_values(c.detail)) for c in expected.checks]
    for reader in ("jvm", "python"):
        result = verify_kraft_spark(spark, quorum, reader)
        assert [(c.name, c.passed, c.detail) for c in result.checks] == want, reader
        same = ("nodes", "controllers", "batches", "records", "states", "topics", "partitions", "brokers")
        assert {k: result.figures[k] for k in same} == {k: expected.figures[k] for k in same}, reader
        health = tuple(FIGURES.values())
        assert {k: result.figures[k] for k in health} == {k: expected.figures[k] for k in health}, reader
        assert result.health == expected.health, reader
    assert expected.passed == (doctoring in ("intact", "torn tail"))


def test_verify_reader_jvm_runs_the_spark_checks(quorum: Path) -> None:  # noqa: F811
    """The CLI's JVM path, in its own process (it starts and stops its own Spark session)."""
    reader_jar()
    _flip(quorum)
    command = [sys.executable, "-m", "raftmeta", "verify", "--reader", "jvm", "--master", "local[1]"]
    arguments = [*command, "--data-dir", str(quorum), "--output", "json"]
    done = subprocess.run(arguments, check=False, capture_output=True, text=True)
    assert done.returncode == 1, done.stderr[-2000:]
    document = json.loads(done.stdout)
    assert document["figures"]["reader"] == "jvm"
    failed = {c["name"]: c["detail"] for c in document["checks"] if not c["passed"]}
    assert set(failed) == {"batch-integrity", "logs-agree"}
    assert failed["logs-agree"] == "offset 3: controller 3002 hold another batch than controller 3001, controller 3003"
