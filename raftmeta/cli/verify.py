"""``raftmeta verify``: replay and verify every node's log with Spark (DESIGN.md §8, §9)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from raftmeta.cli.common import EXIT_FAILED, emit_json, output_option, usage_error

MIB = 1 << 20
# Where ``--reader auto`` takes the JVM path: Spark's fixed cost (about 17 jobs) loses to the
# in-process checks on a KRaft quorum's usual few MB of log, and the JVM path was 3.2x faster on
# 3 x 100,000 records (about 30 MB; docs/verify.md, `bench kafka-verify`).
JVM_READER_FROM_BYTES = 32 * MIB


def kafka_log_bytes(data_dir: str | Path) -> int:
    """The bytes of every segment and snapshot under ``data_dir`` (what a verify reads)."""
    return sum(path.stat().st_size for pattern in ("*.log", "*.checkpoint") for path in Path(data_dir).rglob(pattern))


if TYPE_CHECKING:
    from rich.console import Console


@click.command()
@click.option("--data-dir", required=True, help="A quorum's data dir (node-N subdirs) or one node's, local or a URI.")
@click.option("--report-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write report.json, report.html and plots here.")  # fmt: skip
@click.option(
    "--master", default="local[*]", show_default=True, help="Spark master, e.g. local[2] or spark://host:7077."
)
@click.option(
    "--history",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="A client history (JSON lines) to check against the committed log.",
)
@click.option("--spark-log-level", default="ERROR", show_default=True, help="Spark's own log level.")
@click.option(
    "--incremental",
    is_flag=True,
    help="Read only the segments not verified before (kept in --digest-store), check that the verified "
    "ones did not change, and check only the records after the stored state's point.",
)
@click.option(
    "--digest-store",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="The digest store of --incremental [default: REPORT_DIR/digests].",
)
@click.option(
    "--reader",
    type=click.Choice(["auto", "jvm", "python"]),
    default="auto",
    help="For KRaft logs in Kafka's format: decode in Spark's JVM with Kafka's own code and check in Spark SQL "
    "(jvm), or decode and check in this process (python); auto takes jvm for logs of "
    f"{JVM_READER_FROM_BYTES // MIB} MiB or more when its jar is built (make jvm-reader), python below "
    "(Spark's fixed cost; docs/verify.md).",
)
@output_option
def verify(
    data_dir: str,
    report_dir: Path | None,
    history: str | None,
    master: str,
    spark_log_level: str,
    incremental: bool,
    digest_store: Path | None,
    reader: str,
    output: str,
) -> None:
    """Replay every node's committed log with Spark and check that the quorum agreed.

    Exits 0 when every check passes and 1 when any fails, naming the node, offset, topic or
    partition involved.
    """
    from rich.console import Console

    from raftmeta.jobs.kraft_verify import find_kraft_logs
    from raftmeta.jobs.layout import LayoutError, discover

    if "://" not in data_dir and find_kraft_logs(Path(data_dir)):
        _verify_kraft(
            Path(data_dir),
            report_dir=report_dir,
            history=history,
            incremental=incremental,
            output=output,
            reader=reader,
            master=master,
            spark_log_level=spark_log_level,
        )
        return
    if reader != "auto":
        raise usage_error(
            "--reader chooses how KRaft logs in Kafka's format are read; this data dir is raftmeta's", "--reader"
        )
    try:
        discover(data_dir)
    except (LayoutError, FileNotFoundError, OSError) as exc:
        raise usage_error(str(exc), "--data-dir") from exc
    if digest_store is not None and not incremental:
        raise usage_error("--digest-store goes with --incremental", "--digest-store")
    if incremental and digest_store is None:
        if report_dir is None:
            raise usage_error(
                "--incremental needs --digest-store or --report-dir (the store goes there)", "--incremental"
            )
        digest_store = report_dir / "digests"
    console = Console(stderr=True)
    with console.status("starting Spark", spinner="dots") as status:
        from raftmeta.jobs.session import build_session
        from raftmeta.jobs.verify import run_verify, write_outputs

        spark = build_session(master, log_level=spark_log_level)
        try:
            result = run_verify(
                spark,
                data_dir,
                progress=status.update,
                history=history,
                digest_store=digest_store,
                topic_view=report_dir is not None,
            )
        finally:
            spark.stop()
    paths = write_outputs(result, data_dir, report_dir) if report_dir is not None else {}
    if output == "json":
        document = result.to_json(data_dir)
        document["report"] = {name: str(path) for name, path in paths.items()}
        emit_json(document)
    else:
        _print_summary(result, paths)
    if not result.passed:
        raise SystemExit(EXIT_FAILED)


def _verify_kraft(
    data_dir: Path,
    *,
    report_dir: Path | None,
    history: str | None,
    incremental: bool,
    output: str,
    reader: str,
    master: str,
    spark_log_level: str,
) -> None:
    """The checks of a real KRaft quorum's metadata logs (Kafka's format): in Spark SQL over the JVM
    reader's rows (raftmeta/jobs/kraft_spark.py), or in this process (raftmeta/jobs/kraft_verify.py)."""

    from raftmeta.jobs.kafka_log_jar import ReaderNotBuilt, reader_built, reader_jars
    from raftmeta.jobs.kraft_verify import KraftVerifyResult, verify_kraft
    from raftmeta.kraft.classpath import KafkaNotResolved

    for given, flag in ((report_dir, "--report-dir"), (history, "--history"), (incremental or None, "--incremental")):
        if given is not None:
            raise usage_error(
                f"{data_dir} holds KRaft metadata logs in Kafka's format, which {flag} does not read", flag
            )
    if reader == "auto":
        reader = "jvm" if reader_built() and kafka_log_bytes(data_dir) >= JVM_READER_FROM_BYTES else "python"
    result: KraftVerifyResult
    if reader == "jvm":
        from raftmeta.jobs.kraft_spark import verify_kraft_spark
        from raftmeta.jobs.session import build_session

        try:
            jars = reader_jars()
        except (ReaderNotBuilt, KafkaNotResolved) as exc:
            raise usage_error(f"--reader jvm: {exc}", "--reader") from exc
        spark = build_session(master, log_level=spark_log_level, jars=jars)
        try:
            result = verify_kraft_spark(spark, data_dir, "jvm")
        finally:
            spark.stop()
    else:
        result = verify_kraft(data_dir)
    if output == "json":
        emit_json({**result.to_json(str(data_dir)), "reader": reader})
    else:
        console = _print_checks("raftmeta verify (Kafka's format)", result.passed, result.checks)
        f = result.figures
        console.print(
            f"nodes {f['nodes']}  controllers {f['controllers']}  batches {f['batches']}  records {f['records']}  "
            f"topics {f['topics']}  partitions {f['partitions']}  brokers {f['brokers']}"
        )
        console.print(
            f"replica skew {f['replica_skew']}  leader skew {f['leader_skew']}  rack spread violations "
            f"{f['rack_spread_violations']}  under-replicated {f['under_replicated_partitions']}  leaderless "
            f"{f['leaderless_partitions']}  fenced brokers {f['fenced_brokers']}"
        )
        _print_health(console, result.health)
    if not result.passed:
        raise SystemExit(EXIT_FAILED)


def _print_checks(title: str, passed: bool, checks: Iterable[Any]) -> Console:
    """The checks' table (one row a check: passed or not, its name and detail) on a new console."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{title}: consistency {'PASSED' if passed else 'FAILED'}")
    table.add_column("", width=2)
    table.add_column("check")
    table.add_column("detail", overflow="fold")
    for check in checks:
        table.add_row("[green]✔[/]" if check.passed else "[red]✘[/]", check.name, check.detail)
    console = Console()
    console.print(table)
    return console


def _print_summary(result: object, paths: dict[str, Path]) -> None:
    from raftmeta.jobs.verify import VerifyResult

    assert isinstance(result, VerifyResult)
    console = _print_checks("raftmeta verify", result.passed, result.checks)
    f = result.figures
    console.print(
        f"records {f['records']}  nodes {f['nodes']}  topics {f['topics']}  partitions {f['partitions']}  "
        f"brokers {f['brokers']}  replica skew {f['replica_skew']}  leader skew {f['leader_skew']}"
    )
    _print_health(console, result.health)
    if "html" in paths:
        console.print(f"report: {paths['html']}")


def _print_health(console: Console, health: dict[str, Any]) -> None:
    """The health verdict with its reasons, and the first unhealthy partitions named."""
    from raftmeta.jobs.checks import EXAMPLES_MAX
    from raftmeta.jobs.unhealthy import REASONS

    color = {"HEALTHY": "green", "WARN": "yellow"}.get(health["verdict"], "red")
    console.print(f"health [{color}]{health['verdict']}[/]" + "".join(f"; {r}" for r in health["reasons"]))
    for p in health["unhealthy_partitions"]["listed"][:EXAMPLES_MAX]:
        console.print(
            f"  {p['topic']}-{p['partition']}  leader {p['leader']}  replicas {p['replicas']}  isr {p['isr']}  "
            f"{', '.join(REASONS[w] for w in p['why'])}",
            highlight=False,
        )
    shown = min(EXAMPLES_MAX, len(health["unhealthy_partitions"]["listed"]))
    if health["unhealthy_partitions"]["total"] > shown:
        console.print(f"  and {health['unhealthy_partitions']['total'] - shown:,} more")
