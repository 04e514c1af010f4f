"""Entry script for ``spark-submit``: the same verify job ``raftmeta verify`` runs, with the
master chosen by spark-submit (never hard-coded here, or it would override ``--master``).

    spark-submit --master spark://HOST:7077 deploy/spark/verify_job.py --data-dir DIR --report-dir OUT

Executors need the raftmeta package and its native dependencies (protobuf, pyarrow,
google-crc32c) installed: see deploy/spark/README.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from raftmeta.jobs.session import build_session
from raftmeta.jobs.verify import run_verify, write_outputs


def main() -> int:
    parser = argparse.ArgumentParser(description="Replay and verify raftmeta logs with Spark.")
    parser.add_argument(
        "--data-dir", required=True, help="quorum data dir (local path or URI readable by every executor)"
    )
    parser.add_argument("--report-dir", type=Path, default=None)
    parser.add_argument("--history", default=None, help="client history (JSON lines) to check")
    args = parser.parse_args()
    spark = build_session(master=None, app_name="raftmeta-verify")
    try:
        result = run_verify(
            spark, args.data_dir, progress=lambda step: print(step, file=sys.stderr), history=args.history
        )
    finally:
        spark.stop()
    if args.report_dir is not None:
        write_outputs(result, args.data_dir, args.report_dir)
    print(json.dumps(result.to_json(args.data_dir), indent=2))
    return 0 if result.passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
