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
run smallest first in the same session. With ``--incremental`` (the default), a full verify
that writes a digest store is timed against ``verify --incremental`` after 1% more records are
appended (and against the plain full verify, for what writing the store costs). ``--repeat``
runs Spark, the baseline and the one-core Spark that many times at ``--records`` (medians
reported, every run listed). Then the same verify runs under ``--one-core-master``
(``local[1]``) in a new session of the same JVM, for ``speedup_local1_to_local2``: how much
the second core gives.
"""

from __future__ import annotations

import os
import resource
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import click

from raftmeta.bench.results import machine, median, rss_bytes, write_result
from raftmeta.cli.common import emit_json, output_option
from raftmeta.records import codec
from raftmeta.records.decode import parse_records
from raftmeta.storage.high_watermark import HIGH_WATERMARK_CHECKPOINT, read_high_watermark, render_high_watermark
from raftmeta.v1 import records_pb2

PARTITIONS_PER_TOPIC = 100
SEGMENT_BYTES = 64 * 1024 * 1024
WARM_UP_RECORDS = 1_000_000
ONE_CORE_WARM_UP_RECORDS = 100_000
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
        (d / HIGH_WATERMARK_CHECKPOINT).write_bytes(render_high_watermark(offset))
    return offset


def broker_restarts(count: int) -> list[bytes]:
    """The records of ``count`` brokers of ``write_synthetic_quorum`` restarting, as a controller
    writes them: each is fenced, registers again (a new incarnation and epoch, fenced) and is
    unfenced."""
    if count > BROKERS:
        raise ValueError(f"broker restarts: at most {BROKERS} brokers, got {count}")
    records = []
    for broker in range(count):
        new_epoch = 1_000_000 + broker  # above write_synthetic_quorum's epochs (broker id + 1)
        again = records_pb2.RegisterBrokerRecord(
            broker_id=broker,
            incarnation_id=(new_epoch + 1).to_bytes(16, "big"),
            broker_epoch=new_epoch,
            rack=f"rack-{broker % RACKS}",
            fenced=True,
        )
        for record in (
            records_pb2.MetadataRecord(
                fence_broker=records_pb2.FenceBrokerRecord(broker_id=broker, broker_epoch=broker + 1)
            ),
            records_pb2.MetadataRecord(register_broker=again),
            records_pb2.MetadataRecord(
                unfence_broker=records_pb2.UnfenceBrokerRecord(broker_id=broker, broker_epoch=new_epoch)
            ),
        ):
            records.append(record.SerializeToString())
    return records


def append_synthetic(root: Path, records: int, *, restarts: int = 0) -> list[Path]:
    """Append about ``records`` more records (new topics) to every node of a synthetic quorum, as
    a new segment, and move the high watermarks to the new end; return the files written.
    ``restarts`` brokers restart first (``broker_restarts``, one batch), as brokers do between
    two verifies of a running cluster."""
    dirs = sorted(p for p in root.iterdir() if (p / "meta.properties").exists())
    offset = start = read_high_watermark(dirs[0])
    batches: list[bytes] = []
    if restarts:
        restart_records = broker_restarts(restarts)
        batches.append(codec.encode_batch(offset, 1, restart_records, 1_700_000_000_000))
        offset += len(restart_records)
    topic = 0
    while offset - start < records:
        # Ids far above write_synthetic_quorum's, so no topic is created twice.
        topic_id = (10**12 + start + topic).to_bytes(16, "big")
        batch = [
            records_pb2.MetadataRecord(
                topic=records_pb2.TopicRecord(name=f"more-{start}-{topic}", topic_id=topic_id)
            ).SerializeToString()
        ]
        for p in range(PARTITIONS_PER_TOPIC):
            replicas = [(topic + p + k) % BROKERS for k in range(3)]
            batch.append(
                records_pb2.MetadataRecord(
                    partition=records_pb2.PartitionRecord(
                        topic_id=topic_id, partition_id=p, replicas=replicas, isr=replicas, leader=replicas[0]
                    )
                ).SerializeToString()
            )
        batches.append(codec.encode_batch(offset, 1, batch, 1_700_000_000_000))
        offset += len(batch)
        topic += 1
    blob = b"".join(batches)
    written = []
    for d in dirs:
        path = d / "__cluster_metadata-0" / f"{start:020d}.log"
        path.write_bytes(blob)
        written.append(path)
        (d / HIGH_WATERMARK_CHECKPOINT).write_bytes(render_high_watermark(offset))
    return written


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
    for segment in node.segments:
        data = Path(segment.uri).read_bytes()
        for batch in codec.iter_batches(data):
            for record in parse_records(batch.records()):
                builder.replay(record)
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
    pid = jvm_pid(spark)
    peak = rss_bytes(pid)["hwm"] if pid is not None else 0
    return peak / (1 << 20) if peak else -1.0


def process_tree_cpu_seconds(root_pid: int) -> tuple[float, float]:
    """(CPU seconds of process ``root_pid`` itself, of its live descendants), from /proc: where
    a verify's CPU goes, the driver JVM (Arrow ingest, shuffles, sorts, windows) or its Python
    workers (reading, framing, hashing and decoding). Descendants that already exited are not
    counted (Spark keeps its Python workers alive between tasks). (-1, -1) off Linux."""
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    stats: dict[int, tuple[int, float]] = {}  # pid -> (parent pid, cpu seconds)
    try:
        entries = [e for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return -1.0, -1.0
    for entry in entries:
        try:
            text = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue  # exited meanwhile
        # The command name (field 2) may hold spaces: the fields after it start past the last ')'.
        fields = text[text.rindex(")") + 2 :].split()
        stats[int(entry)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / ticks)
    if root_pid not in stats:
        return -1.0, -1.0
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    descendants = 0.0
    stack = list(children.get(root_pid, []))
    while stack:
        pid = stack.pop()
        descendants += stats[pid][1]
        stack.extend(children.get(pid, []))
    return stats[root_pid][1], descendants


def jvm_pid(spark: Any) -> int | None:
    # py4j exposes no public handle on the JVM process it started.
    proc = getattr(spark.sparkContext._gateway, "proc", None)
    return None if proc is None else int(proc.pid)


def _timed_verify(
    spark: Any,
    data_dir: Path,
    cpu: list[tuple[float, float]] | None = None,
    digest_store: Path | None = None,
    figures: dict[str, Any] | None = None,
) -> float:
    """Seconds of one verify (which must pass); with ``cpu``, appends its (JVM, Python workers)
    CPU seconds; with ``figures``, updates it with the verify's figures."""
    from raftmeta.jobs.verify import run_verify

    pid = jvm_pid(spark)
    before = process_tree_cpu_seconds(pid) if pid is not None else (-1.0, -1.0)
    started = time.perf_counter()
    # The store only when asked: the same harness then also times a tree from before the digest store.
    if digest_store is None:
        verdict = run_verify(spark, str(data_dir))
    else:
        verdict = run_verify(spark, str(data_dir), digest_store=digest_store)
    seconds = time.perf_counter() - started
    if figures is not None:
        figures.update(verdict.figures)
    if not verdict.passed:
        raise click.ClickException(f"verify failed on synthetic logs: {verdict.checks}")
    if cpu is not None and pid is not None and before[0] >= 0:
        after = process_tree_cpu_seconds(pid)
        cpu.append((after[0] - before[0], after[1] - before[1]))
    return seconds


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
    "--repeat",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Runs of Spark, the baseline and the one-core Spark at --records; medians are reported.",
)
@click.option(
    "--one-core-master",
    default="local[1]",
    show_default=True,
    help="Time the same verify under this master too, for speedup_local1_to_local2 ('' to skip).",
)
@click.option(
    "--incremental/--no-incremental",
    default=True,
    show_default=True,
    help="Also time verify --incremental after appending 1%% more records, against a full verify with the store.",
)
@click.option(
    "--incremental-broker-restarts",
    "broker_restarts",
    type=click.IntRange(0, BROKERS),
    default=0,
    show_default=True,
    help="Brokers that restart (fenced, registered again, unfenced) before the appended records.",
)
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
    repeat: int,
    one_core_master: str,
    incremental: bool,
    broker_restarts: int,
    work_dir: Path | None,
    json_file: Path | None,
    output: str,
) -> None:
    """Spark verify vs a single-process baseline on synthetic logs (records/s, scaling, driver memory)."""
    from raftmeta.jobs.session import build_session

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
                _warm_up(spark, root / "warm-up", warm_up_records, nodes)
            warm_up_s = time.perf_counter() - warm_started
            startup_s = session_s + warm_up_s
            scaling_rows: list[dict[str, Any]] = []
            result: dict[str, Any] = {}
            main_dir = root / f"q-{records}"
            for size in sizes:
                data_dir = root / f"q-{size}"
                per_node = write_synthetic_quorum(data_dir, size, nodes)
                scanned = per_node * nodes
                cpu: list[tuple[float, float]] = []
                runs = [_timed_verify(spark, data_dir, cpu) for _ in range(repeat if size == records else 1)]
                spark_s = median(runs)
                scaling_rows.append({"records": per_node, "spark_records_per_s": round(scanned / spark_s)})
                if size == records:
                    baseline_runs = [baseline_in_child(data_dir, nodes) for _ in range(repeat)]
                    base_s = median([seconds for seconds, _ in baseline_runs])
                    result = {
                        "records": per_node,
                        "nodes": nodes,
                        "repeat": repeat,
                        "spark_seconds": round(spark_s, 3),
                        "spark_seconds_runs": [round(r, 3) for r in runs],
                        # Per run: CPU seconds of the driver JVM and of its Python workers (2 cores
                        # give at most 2 x spark_seconds in all).
                        "spark_cpu_seconds_runs": [{"jvm": round(j, 1), "python": round(p, 1)} for j, p in cpu],
                        "spark_startup_seconds": round(startup_s, 3),
                        "spark_session_seconds": round(session_s, 3),
                        "spark_warm_up_seconds": round(warm_up_s, 3),
                        "spark_records_per_s": round(scanned / spark_s),
                        "spark_records_per_s_with_startup": round(scanned / (spark_s + startup_s)),
                        "baseline_seconds": round(base_s, 3),
                        "baseline_seconds_runs": [round(seconds, 3) for seconds, _ in baseline_runs],
                        "baseline_records_per_s": round(scanned / base_s),
                        "ratio": round(base_s / spark_s, 3),
                        "baseline_peak_rss_mb": round(max(rss for _, rss in baseline_runs), 1),
                    }
                else:
                    shutil.rmtree(data_dir)
            if incremental:
                result.update(
                    _incremental(
                        spark, main_dir, root / "digests", result["records"], result["spark_seconds"], broker_restarts
                    )
                )
            result["scaling"] = scaling_rows
            # The Python driver's peak; the baseline ran in a child process and is not in it.
            result["driver_peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
            result["jvm_peak_rss_mb"] = round(jvm_peak_rss_mb(spark), 1)
        finally:
            spark.stop()
        if one_core_master:
            result.update(
                _one_core(one_core_master, root, main_dir, nodes, repeat, warm_up_records, result["spark_seconds"])
            )
        shutil.rmtree(main_dir, ignore_errors=True)
        # The machine may be shared: the load average says how much of it the run had.
        result["load_average"] = {"start": load_start, "end": round(os.getloadavg()[0], 2)}
        result["master"] = master
        result["machine"] = machine()
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
        if "speedup_local1_to_local2" in result:
            click.echo(f"  {one_core_master} -> {master}: speed-up {result['speedup_local1_to_local2']}")
        for row in result["scaling"]:
            click.echo(f"  {row['records']:>12,} records: Spark {row['spark_records_per_s']:,} rec/s")


def _incremental(
    spark: Any, data_dir: Path, store: Path, records: int, spark_s: float, restarts: int
) -> dict[str, Any]:
    """A full verify that writes the digest store, 1% more records appended (after ``restarts``
    broker restarts), then the incremental verify; the appended records are removed again (the
    one-core runs read the same logs). ``spark_s``: the plain full verify of the same logs in this
    run (no store written), against which the store's cost is measured."""
    checkpoints = {p: p.read_text() for p in data_dir.glob("node-*/high-watermark-checkpoint")}
    full_figures: dict[str, Any] = {}
    incremental_figures: dict[str, Any] = {}
    full_s = _timed_verify(spark, data_dir, digest_store=store, figures=full_figures)
    added = append_synthetic(data_dir, max(1000, records // 100), restarts=restarts)
    try:
        incremental_s = _timed_verify(spark, data_dir, digest_store=store, figures=incremental_figures)
    finally:
        for path in added:
            path.unlink()
        for path, text in checkpoints.items():
            path.write_text(text)
        shutil.rmtree(store, ignore_errors=True)
    how = incremental_figures.get("incremental", {})
    return {
        "full_seconds": round(full_s, 3),
        "incremental_seconds": round(incremental_s, 3),
        "incremental_to_full": round(incremental_s / full_s, 3),
        # What writing the store adds to a full verify (spark_seconds: the same verify without it).
        "full_store_overhead": round(full_s / spark_s - 1, 3),
        "incremental_to_spark_seconds": round(incremental_s / spark_s, 3),
        "incremental_broker_restarts": restarts,
        "incremental_state_replay": how.get("state_replay"),
        "incremental_bytes_read": how.get("bytes_read"),
        "state_stored_at": full_figures.get("incremental", {}).get("state_stored_at"),
    }


def _warm_up(spark: Any, warm_dir: Path, records: int, nodes: int) -> None:
    write_synthetic_quorum(warm_dir, records, nodes)
    _timed_verify(spark, warm_dir)
    shutil.rmtree(warm_dir)


def _one_core(
    one_core_master: str, root: Path, data_dir: Path, nodes: int, repeat: int, warm_up_records: int, spark_s: float
) -> dict[str, Any]:
    """The same verify of the same logs under ``one_core_master`` in a new session (in the same
    JVM, already compiled by the runs before; a small warm-up starts the new session's Python
    workers), and the speed-up of ``master`` over it."""
    from raftmeta.jobs.session import build_session

    spark = build_session(one_core_master, app_name="raftmeta-bench-replay-1", local_dir=str(root / "spark-1"))
    try:
        if warm_up_records:
            _warm_up(spark, root / "warm-up-1", min(warm_up_records, ONE_CORE_WARM_UP_RECORDS), nodes)
        cpu: list[tuple[float, float]] = []
        runs = [_timed_verify(spark, data_dir, cpu) for _ in range(repeat)]
    finally:
        spark.stop()
    one_core_s = median(runs)
    return {
        "one_core_master": one_core_master,
        "one_core_spark_seconds": round(one_core_s, 3),
        "one_core_spark_seconds_runs": [round(r, 3) for r in runs],
        # As spark_cpu_seconds_runs: with one task slot, what the JVM's other threads (compiler,
        # collector) and the Python worker use beside it shows here.
        "one_core_spark_cpu_seconds_runs": [{"jvm": round(j, 1), "python": round(p, 1)} for j, p in cpu],
        # Named for the default masters (local[1] -> local[2]); "one_core_master" and "master" say which ran.
        "speedup_local1_to_local2": round(one_core_s / spark_s, 3),
    }
