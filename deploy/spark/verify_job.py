"""Entry script for ``spark-submit``: the same verify job ``raftmeta verify`` runs, with the
master chosen by spark-submit (never hard-coded here, or it would override ``--master``).

    spark-submit --master spark://HOST:7077 deploy/spark/verify_job.py --data-dir DIR --report-dir OUT

Executors need the raftmeta package and its native dependencies (protobuf, pyarrow,
google-crc32c) installed: see deploy/spark/README.md.

A KRaft quorum's metadata logs (``__cluster_metadata-0`` directories in Kafka's format) are read
by the JVM reader, which spark-submit must be given with ``--jars`` (its jar and the pinned Kafka's
kafka-clients, kafka-metadata and kafka-server-common: deploy/spark/README.md), and checked in
Spark SQL (raftmeta/jobs/kraft_spark.py), as ``raftmeta verify --reader jvm`` does.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from raftmeta.jobs.kraft_verify import find_kraft_logs
from raftmeta.jobs.session import build_session
from raftmeta.jobs.verify import run_verify, write_outputs

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

EXIT_USAGE = 2


def main() -> int:
    parser = argparse.ArgumentParser(description="Replay and verify raftmeta logs with Spark.")
    parser.add_argument(
        "--data-dir", required=True, help="quorum data dir (local path or URI readable by every executor)"
    )
    parser.add_argument("--report-dir", type=Path, default=None)
    parser.add_argument("--history", default=None, help="client history (JSON lines) to check")
    args = parser.parse_args()
    kraft = "://" not in args.data_dir and bool(find_kraft_logs(Path(args.data_dir)))
    if kraft and (args.report_dir is not None or args.history is not None):
        refused = "--report-dir and --history do not read them"
        print(f"{args.data_dir} holds KRaft metadata logs in Kafka's format: {refused}", file=sys.stderr)
        return EXIT_USAGE
    spark = build_session(master=None, app_name="raftmeta-verify")
    try:
        if kraft:
            return _verify_kraft(spark, args.data_dir)
        result = run_verify(
            spark, args.data_dir, progress=lambda step: print(step, file=sys.stderr), history=args.history
        )
    finally:
        spark.stop()
    if args.report_dir is not None:
        write_outputs(result, args.data_dir, args.report_dir)
    print(json.dumps(result.to_json(args.data_dir), indent=2))
    return 0 if result.passed else 1


def _verify_kraft(spark: SparkSession, data_dir: str) -> int:
    """The checks of a KRaft quorum's logs in Spark SQL over the JVM reader's rows."""
    from raftmeta.jobs.kafka_log_jar import SHORT_NAME
    from raftmeta.jobs.kraft_spark import verify_kraft_spark

    try:
        result = verify_kraft_spark(spark, Path(data_dir), "jvm")
    except Exception as exc:  # PySpark hands the JVM's SparkClassNotFoundException on as py4j's error
        if "DATA_SOURCE_NOT_FOUND" not in str(exc):
            raise
        print(
            f"the JVM reader (data source {SHORT_NAME!r}) is not on this job's classpath: give spark-submit --jars "
            "its jar and the Kafka jars (deploy/spark/README.md)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    print(json.dumps({**result.to_json(data_dir), "reader": "jvm"}, indent=2))
    return 0 if result.passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
