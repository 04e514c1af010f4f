"""``raftmeta bench replay``: Spark's verify against a single-process baseline on synthetic logs.

The logs are written with the project's own codec in the real layout: 60 brokers in 6 racks,
then one batch per topic (a TopicRecord, 100 PartitionRecords, RF 3), identical on every node
(followers store the leader's bytes), split into 64 MiB segments, each node with a high-watermark
checkpoint at its log end.

Spark runs ``raftmeta verify``'s jobs (consistency across nodes, partition-state replay with
invariant 7 on every state, balance); the baseline, in a child process started after Spark's
run, runs the same consistency checks single-process (``local_facts``) and replays the
committed log of one node through the controller's ``ImageBuilder`` (which refuses impossible
records). Figures are records scanned per second: every node's records for the consistency
part, as Spark reads them all. Start-up is the session's creation plus a warm-up verify
(``--warm-up-records``: the JVM compiles its hot paths during its first jobs); the sizes then
run smallest first in the same session.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import click

from raftmeta.bench.results import machine, write_result
from raftmeta.cli.common import emit_json, output_option
from raftmeta.records import codec
from raftmeta.v1 import records_pb2

PARTITIONS_PER_TOPIC = 100
SEGMENT_BYTES = 64 * 1024 * 1024
WARM_UP_RECORDS = 1_000_000
BROKERS = 60
RACKS = 6


def write_synthetic_quorum(root: Path, records: int, nodes: int) -> int:
    """Write ``nodes`` identical logs of about ``records`` records; return the exact count per node."""
    dirs = [root / f"node-{n}" for n in range(1, nodes + 1)]
    for n, d in enumerate(dirs, start=1):
        (d / "__cluster_metadata-0").mkdir(parents=True)
        (d / "meta.properties").write_text(f"version=1\ncluster.id=bench\nnode.id={n}\n")
    segment: list[bytes] = []
    segment_bytes = 0
    segment_base = 0
    offset = 0

    def flush() -> None:
        nonlocal segment, segment_bytes
        if segment:
            blob = b"".join(segment)
            for d in dirs:
                (d / "__cluster_metadata-0" / f"{segment_base:020d}.log").write_bytes(blob)
        segment, segment_bytes = [], 0

    def append(batch_records: list[bytes]) -> None:
        nonlocal offset, segment_bytes, segment_base
        data = codec.encode_batch(offset, 1, batch_records, 1_700_000_000_000)
        if segment_bytes + len(data) > SEGMENT_BYTES:
            flush()
            segment_base = offset
        segment.append(data)
        segment_bytes += len(data)
        offset += len(batch_records)

    append(
        [
            records_pb2.MetadataRecord(
                register_broker=records_pb2.RegisterBrokerRecord(
                    broker_id=b,
                    incarnation_id=(b + 1).to_bytes(16, "big"),
                    broker_epoch=b + 1,
                    rack=f"rack-{b % RACKS}",
                )
            ).SerializeToString()
            for b in range(BROKERS)
        ]
    )
    topic = 0
    while offset < records:
        topic_id = (topic + 1).to_bytes(16, "big")
        batch = [
            records_pb2.MetadataRecord(
                topic=records_pb2.TopicRecord(name=f"t{topic}", topic_id=topic_id)
            ).SerializeToString()
        ]
        for p in range(PARTITIONS_PER_TOPIC):
            first = (topic * 7 + p) % BROKERS
            replicas = [first, (first + 1) % BROKERS, (first + 2) % BROKERS]
            batch.append(
                records_pb2.MetadataRecord(
                    partition=records_pb2.PartitionRecord(
                        topic_id=topic_id, partition_id=p, replicas=replicas, isr=replicas, leader=first
                    )
                ).SerializeToString()
            )
        append(batch)
        topic += 1
    flush()
    for d in dirs:
        (d / "high-watermark-checkpoint").write_text(json.dumps({"version": 1, "high_watermark": offset}))
    return offset


def baseline(data_dir: Path, nodes: int) -> float:
    """Seconds for the single-process reference: consistency of all nodes + one node's replay."""
    from raftmeta.controller import MetadataImage
    from raftmeta.controller.delta import ImageBuilder
    from raftmeta.jobs.consistency import facts_to_checks, local_facts
    from raftmeta.jobs.layout import discover

    started = time.perf_counter()
    checks = facts_to_checks(local_facts(str(data_dir)))
    assert all(c.passed for c in checks), checks
    node = discover(str(data_dir))[0]
    builder = ImageBuilder(MetadataImage.empty())
    parse = records_pb2.MetadataRecord.FromString
    for segment in node.segments:
        data = Path(segment.uri).read_bytes()
        for batch in codec.iter_batches(data):
            for raw in batch.records():
                builder.replay(parse(raw))
    builder.build()
    return time.perf_counter() - started


def _baseline_child(data_dir: str, nodes: int, out: Any) -> None:
    seconds = baseline(Path(data_dir), nodes)
    out.send((seconds, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))


def baseline_in_child(data_dir: Path, nodes: int) -> tuple[float, float]:
    """(seconds, peak RSS in MB) of the baseline run in a fresh process: its in-memory image of
    every partition must not count as the Spark driver's memory, which is what the benchmark
    reports on."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_baseline_child, args=(str(data_dir), nodes, send))
    child.start()
    send.close()
    try:
        seconds, rss_mb = receive.recv()
    except EOFError:
        raise click.ClickException(f"the single-process baseline failed (exit code {child.exitcode})") from None
    finally:
        child.join()
    return float(seconds), float(rss_mb)


def jvm_peak_rss_mb(spark: Any) -> float:
    """Peak resident memory of the Spark driver JVM (VmHWM), from /proc."""
    # py4j exposes no public handle on the JVM process it started.
    proc = getattr(spark.sparkContext._gateway, "proc", None)
    if proc is None:
        return -1.0
    for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return -1.0


@click.command()
@click.option(
    "--records", type=click.IntRange(min=1000), default=10_000_000, show_default=True, help="Records per node."
)
@click.option("--nodes", type=click.IntRange(1, 5), default=3, show_default=True)
@click.option(
    "--scaling", default="1000000", show_default=True, help="Smaller sizes to time Spark at as well (comma-separated)."
)
@click.option(
    "--warm-up-records",
    type=click.IntRange(min=0),
    default=WARM_UP_RECORDS,
    show_default=True,
    help="Records per node of the warm-up verify counted as start-up (0: none).",
)
@click.option("--master", default="local[2]", show_default=True)
@click.option(
    "--work-dir", type=click.Path(file_okay=False, path_type=Path), default=None, help="Where to write the logs."
)
@click.option(
    "--json-file", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Also write the result here."
)
@output_option
def command(
    records: int,
    nodes: int,
    scaling: str,
    warm_up_records: int,
    master: str,
    work_dir: Path | None,
    json_file: Path | None,
    output: str,
) -> None:
    """Spark verify vs a single-process baseline on synthetic logs (records/s, scaling, driver memory)."""
    from raftmeta.jobs.session import build_session
    from raftmeta.jobs.verify import run_verify

    sizes = sorted({int(s) for s in scaling.split(",") if s.strip()} | {records})
    load_start = round(os.getloadavg()[0], 2)
    root = Path(tempfile.mkdtemp(prefix="raftmeta-bench-replay-", dir=work_dir))
    try:
        started = time.perf_counter()
        spark = build_session(
            master, app_name="raftmeta-bench-replay", local_dir=str(root / "spark"), driver_memory="4g"
        )
        session_s = time.perf_counter() - started
        try:
            # The JVM's first jobs run interpreted code and compile it: the first 1 M-record verify
            # took 11.9 s after a 100 k-record warm-up, and ~8.5 s once warm. The warm-up verify
            # counts as start-up, not as replay.
            warm_started = time.perf_counter()
            if warm_up_records:
                warm_dir = root / "warm-up"
                write_synthetic_quorum(warm_dir, warm_up_records, nodes)
                if not run_verify(spark, str(warm_dir)).passed:
                    raise click.ClickException("verify failed on the warm-up's synthetic logs")
                shutil.rmtree(warm_dir)
            warm_up_s = time.perf_counter() - warm_started
            startup_s = session_s + warm_up_s
            scaling_rows: list[dict[str, Any]] = []
            result: dict[str, Any] = {}
            for size in sizes:
                data_dir = root / f"q-{size}"
                per_node = write_synthetic_quorum(data_dir, size, nodes)
                scanned = per_node * nodes
                t0 = time.perf_counter()
                verdict = run_verify(spark, str(data_dir))
                spark_s = time.perf_counter() - t0
                if not verdict.passed:
                    raise click.ClickException(f"verify failed on synthetic logs: {verdict.checks}")
                scaling_rows.append({"records": per_node, "spark_records_per_s": round(scanned / spark_s)})
                if size == records:
                    base_s, base_rss_mb = baseline_in_child(data_dir, nodes)
                    result = {
                        "records": per_node,
                        "nodes": nodes,
                        "spark_seconds": round(spark_s, 3),
                        "spark_startup_seconds": round(startup_s, 3),
                        "spark_session_seconds": round(session_s, 3),
                        "spark_warm_up_seconds": round(warm_up_s, 3),
                        "spark_records_per_s": round(scanned / spark_s),
                        "spark_records_per_s_with_startup": round(scanned / (spark_s + startup_s)),
                        "baseline_seconds": round(base_s, 3),
                        "baseline_records_per_s": round(scanned / base_s),
                        "ratio": round(base_s / spark_s, 3),
                        "baseline_peak_rss_mb": round(base_rss_mb, 1),
                    }
                shutil.rmtree(data_dir)
            result["scaling"] = scaling_rows
            # The Python driver's peak; the baseline ran in a child process and is not in it.
            result["driver_peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
            result["jvm_peak_rss_mb"] = round(jvm_peak_rss_mb(spark), 1)
            # The machine may be shared: the load average says how much of it the run had.
            result["load_average"] = {"start": load_start, "end": round(os.getloadavg()[0], 2)}
            result["master"] = master
            result["machine"] = machine()
        finally:
            spark.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    write_result(result, json_file)
    if output == "json":
        emit_json(result)
    else:
        click.echo(
            f"{result['records']} records x {nodes} nodes: Spark {result['spark_records_per_s']:,} rec/s "
            f"({result['spark_records_per_s_with_startup']:,} with JVM start-up), single process "
            f"{result['baseline_records_per_s']:,} rec/s, ratio {result['ratio']}"
        )
        for row in result["scaling"]:
            click.echo(f"  {row['records']:>12,} records: Spark {row['spark_records_per_s']:,} rec/s")
