"""One SparkSession for the whole test run (JVM start-up costs ~5-10 s on this machine), with the
JVM reader of Kafka-format logs on its ``spark.jars`` when it is built (``make jvm-reader``; the
tests that use it fail, naming what is missing, when it is not)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

GATEWAY_ATTEMPTS = 3

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    from pyspark.errors import PySparkRuntimeError

    from raftmeta.jobs.kafka_log_jar import reader_built, reader_jars
    from raftmeta.jobs.session import build_session

    local_dir: Path = tmp_path_factory.mktemp("spark-local")
    jars = reader_jars() if reader_built() else []
    for attempt in range(1, GATEWAY_ATTEMPTS + 1):
        try:
            session = build_session(
                "local[2]", app_name="raftmeta-tests", local_dir=str(local_dir), driver_memory="1g", jars=jars
            )
            break
        except PySparkRuntimeError as exc:
            # PySpark forks spark-submit with a preexec_fn; in a worker whose earlier tests left gRPC
            # threads running, that child can die before it execs (gRPC: "skipping fork()
            # handlers"), which PySpark reports as JAVA_GATEWAY_EXITED. Launched again, it starts.
            if exc.getCondition() != "JAVA_GATEWAY_EXITED" or attempt == GATEWAY_ATTEMPTS:
                raise
            warnings.warn(f"the Spark gateway exited at launch (attempt {attempt}); launching it again", stacklevel=1)
    yield session
    session.stop()
