"""``raftmeta bench kafka-verify``: ``raftmeta verify`` of Kafka-format metadata logs, the JVM path
(Kafka's own decoder in Spark's JVM, the checks in Spark SQL: raftmeta/jobs/kraft_spark.py) against
the Python path (raftmeta's decoder and the checks in one process: raftmeta/jobs/kraft_verify.py).

The quorum is ``--nodes`` controllers holding the same log of ``--records`` records: broker
registrations, then per topic a TopicRecord and its PartitionRecords (what a create writes,
:func:`raftmeta.bench.kafka_format.kafka_log`), in segments of about ``--segment-records`` records
(Kafka names each by its base offset), so the JVM reader has a split per segment. Every run must
pass. Per path, the median over ``--repeats`` runs of the wall time and of the records read per
second (every node's records: each path reads every node's log); the Spark session is started
before the timed runs and its start-up reported apart (``spark_start_s``). Per master, ``profile``
says where the JVM path's CPU goes once warm: one more verify and the JVM reader alone (every row
into Spark's no-op sink), each with the driver JVM's CPU seconds from /proc; ``read_share_of_cpu``
is the reader's share. The load average at the start and end says how much of the machine the run had.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import click

from raftmeta.bench.kafka_format import REPLICATION_FACTOR, TIMESTAMP_MS, _replicas, _topic_id
from raftmeta.bench.replay import jvm_pid, process_tree_cpu_seconds
from raftmeta.bench.results import machine, median, scratch_dir, write_result
from raftmeta.cli.common import emit_json, output_option
from raftmeta.records.kafka.batch import encode_batch
from raftmeta.records.kafka.frames import LogRecord, metadata_record, new_batch
from raftmeta.records.kafka.schema import Uuid

PARTITIONS_PER_TOPIC = 100


def kafka_quorum(root: Path, records: int, nodes: int, brokers: int, segment_records: int) -> int:
    """``nodes`` controllers' metadata log dirs under ``root``, each the same log; its record count."""
    directories = [Uuid(bytes([b + 1]) * 16) for b in range(brokers)]
    batches: list[list[LogRecord]] = [
        [metadata_record("RegisterBrokerRecord", 3, BrokerId=b, BrokerEpoch=1, Fenced=False) for b in range(brokers)]
    ]
    count = brokers
    topic = 0
    while count < records:
        topic_id = Uuid(_topic_id(topic))
        batch: list[LogRecord] = [metadata_record("TopicRecord", Name=f"topic-{topic}", TopicId=topic_id)]
        for partition in range(min(PARTITIONS_PER_TOPIC, records - count - 1)):
            replicas = _replicas(partition, brokers)
            batch.append(
                metadata_record(
                    "PartitionRecord", 2, PartitionId=partition, TopicId=topic_id, Replicas=replicas, Isr=replicas,
                    Leader=replicas[0], LeaderEpoch=0, PartitionEpoch=0,
                    Directories=tuple(directories[b] for b in replicas),
                )
            )  # fmt: skip
        batches.append(batch)
        count += len(batch)
        topic += 1
    segments: list[tuple[int, list[bytes]]] = []
    offset = 0
    for batch in batches:
        if not segments or offset - segments[-1][0] >= segment_records:
            segments.append((offset, []))
        segments[-1][1].append(encode_batch(new_batch(offset, 1, batch, TIMESTAMP_MS)))
        offset += len(batch)
    for node in range(nodes):
        log_dir = root / f"controller-{node}" / "data" / "__cluster_metadata-0"
        log_dir.mkdir(parents=True, exist_ok=True)
        (log_dir.parent / "meta.properties").write_text(f"node.id={node}\nversion=1\ncluster.id=bench\n")
        for base, data in segments:
            (log_dir / f"{base:020d}.log").write_bytes(b"".join(data))
    return offset


def _read_only(spark: Any, quorum: Path) -> None:
    """Every row of every node's log through the JVM reader, cut as the verify cuts it, and dropped."""
    from raftmeta.jobs.kafka_log_rows import read_log_rows
    from raftmeta.jobs.kraft_spark import log_bytes
    from raftmeta.jobs.kraft_verify import find_kraft_logs
    from raftmeta.jobs.verify import split_bytes_for

    log_dirs = [str(p) for p in find_kraft_logs(quorum)]
    rows = read_log_rows(spark, log_dirs, "jvm", split_bytes=split_bytes_for(spark, log_bytes(log_dirs)))
    rows.write.format("noop").mode("overwrite").save()


def _timed(action: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    result = action()
    return time.perf_counter() - started, result


@click.command("kafka-verify")
@click.option("--records", type=click.IntRange(min=100), default=300_000, show_default=True, help="Per node.")
@click.option("--nodes", type=click.IntRange(min=1, max=9), default=3, show_default=True)
@click.option("--brokers", type=click.IntRange(min=REPLICATION_FACTOR), default=6, show_default=True)
@click.option("--segment-records", type=click.IntRange(min=1), default=50_000, show_default=True)
@click.option("--repeats", type=click.IntRange(min=1), default=3, show_default=True, help="Runs per path (median).")
@click.option("--masters", default="local[1],local[2]", show_default=True, help="Spark masters of the JVM path.")
@click.option("--work-dir", type=click.Path(file_okay=False, path_type=Path), default=None)
@click.option(
    "--out", "out_path", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Also write here."
)
@output_option
def command(
    records: int,
    nodes: int,
    brokers: int,
    segment_records: int,
    repeats: int,
    masters: str,
    work_dir: Path | None,
    out_path: Path | None,
    output: str,
) -> None:
    """Verify of Kafka-format logs: the JVM path (Spark) against the Python path, in records/s."""
    from raftmeta.jobs.kafka_log_jar import reader_jars
    from raftmeta.jobs.kraft_spark import verify_kraft_spark
    from raftmeta.jobs.kraft_verify import verify_kraft
    from raftmeta.jobs.session import build_session

    jars = reader_jars()  # fails naming `make jvm-reader` before any work
    paths: dict[str, Any] = {}
    load_start = round(os.getloadavg()[0], 2)
    with scratch_dir(work_dir, "kafka-verify") as root:
        quorum = root / "quorum"
        per_node = kafka_quorum(quorum, records, nodes, brokers, segment_records)
        total = per_node * nodes

        def runs(verify: Any) -> dict[str, Any]:
            seconds = []
            for _ in range(repeats):
                took, result = _timed(verify)
                if not result.passed:
                    raise click.ClickException(f"the generated quorum failed verify: {result.checks}")
                seconds.append(took)
            return {"seconds": round(median(seconds), 2), "records_per_s": round(total / median(seconds))}

        def jvm_cpu(spark: Any, action: Any) -> tuple[float, float]:
            """(seconds, CPU seconds of the driver JVM) of one run of ``action``."""
            pid = jvm_pid(spark)
            before = process_tree_cpu_seconds(pid)[0] if pid is not None else -1.0
            took, _ = _timed(action)
            after = process_tree_cpu_seconds(pid)[0] if pid is not None else -1.0
            return took, (after - before if before >= 0 and after >= 0 else -1.0)

        paths["python"] = runs(lambda: verify_kraft(quorum))
        for master in masters.split(","):
            started = time.perf_counter()
            spark = build_session(
                master, app_name="raftmeta-bench-kafka-verify", local_dir=str(root / "spark"), jars=jars
            )
            spark_start = time.perf_counter() - started
            try:
                timed = runs(lambda spark=spark: verify_kraft_spark(spark, quorum, "jvm"))
                # Where the JVM path's CPU goes, once warm: one more verify, then the JVM reader alone
                # (every node's rows, every column, into Spark's no-op sink: reading, Kafka's decoding
                # and the rows, without the checks).
                verify_s, verify_cpu = jvm_cpu(spark, lambda spark=spark: verify_kraft_spark(spark, quorum, "jvm"))
                read_s, read_cpu = jvm_cpu(spark, lambda spark=spark: _read_only(spark, quorum))
                paths[f"jvm {master}"] = {
                    **timed,
                    "spark_start_s": round(spark_start, 1),
                    "profile": {
                        "verify_s": round(verify_s, 2),
                        "verify_jvm_cpu_s": round(verify_cpu, 1),
                        "read_only_s": round(read_s, 2),
                        "read_only_jvm_cpu_s": round(read_cpu, 1),
                        "read_share_of_cpu": round(read_cpu / verify_cpu, 3) if verify_cpu > 0 else None,
                    },
                }
            finally:
                spark.stop()
    baseline = paths["python"]["records_per_s"]
    document: dict[str, Any] = {
        "records_per_node": per_node,
        "records_read": total,
        "paths": paths,
        "ratio_to_python": {name: round(p["records_per_s"] / baseline, 2) for name, p in paths.items()},
        "params": {"nodes": nodes, "brokers": brokers, "segment_records": segment_records, "repeats": repeats},
        # The machine may be shared: how much of it the run had.
        "load_average": {"start": load_start, "end": round(os.getloadavg()[0], 2)},
        "machine": machine(),
    }
    write_result(document, out_path)
    if output == "json":
        emit_json(document)
    else:
        click.echo(f"{total:,} records read ({nodes} nodes x {per_node:,}), median of {repeats} runs")
        for name, p in paths.items():
            click.echo(
                f"{name:>16}: {p['seconds']} s  {p['records_per_s']:,} rec/s  {document['ratio_to_python'][name]}x"
            )
