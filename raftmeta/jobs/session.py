"""A SparkSession set up for this project: quiet, loopback-only, and using this interpreter.

Settings come from measurements on the 2-core machine (shared notes on Spark): bind everything
to 127.0.0.1 (the hostname resolves there and Spark would otherwise pick another interface),
run Python workers with ``sys.executable`` (or they pick the first python3 on PATH, without our
packages), no UI, few shuffle partitions, a log4j2 config that keeps start-up noise out.
The master comes only from the caller (default ``local[*]``): a hard-coded master would silently
override ``spark-submit --master``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def build_session(
    master: str | None = "local[*]",
    *,
    app_name: str = "raftmeta-verify",
    log_level: str = "ERROR",
    local_dir: str | None = None,
    driver_memory: str = "2g",
    shuffle_partitions: int = 8,
    jars: Sequence[Path] = (),
) -> SparkSession:
    """Create (or reuse) the session and register the ``raftmeta`` data source on it.

    ``master=None`` leaves the master to ``spark-submit``. ``jars`` go on ``spark.jars`` (the JVM
    reader of Kafka-format logs: :func:`raftmeta.jobs.kafka_log_jar.reader_jars`); a reused
    session keeps the jars it was created with.
    """
    from pyspark.sql import SparkSession

    from raftmeta.jobs.datasource import RaftmetaDataSource

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    log4j = resources.files("raftmeta.jobs").joinpath("log4j2.properties")
    builder = (
        SparkSession.builder.appName(app_name)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.pyspark.python", sys.executable)
        .config("spark.pyspark.driver.python", sys.executable)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.driver.memory", driver_memory)
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={log4j}")
    )
    if master is not None:
        builder = builder.master(master)
    if local_dir is not None:
        builder = builder.config("spark.local.dir", local_dir)
    if jars:
        builder = builder.config("spark.jars", ",".join(str(jar) for jar in jars))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    spark.dataSource.register(RaftmetaDataSource)
    return spark
