"""``raftmeta bench storage``: what the segment log costs, next to what the disk costs.

Measured in one run, in a scratch directory (``--work-dir``, default a temp dir on the same
filesystem as /tmp), each figure the median of ``--runs`` runs:

* the floor: raw ``os.write`` of 100 bytes to an O_APPEND file + ``os.fsync``, p50/p99 and
  syncs/s (notes/floors-on-this-machine.md measured ~120 µs p50 here);
* appends with one fsync per batch (``append_batch`` + ``flush``) at 1, 100 and 1000 records
  per batch: batches/s, records/s, MB/s and the p50/p99 latency of one append + flush, with a
  floor sample interleaved before each one (fsync latency on a shared VM swings within seconds);
* a full scan of a ``--records``-record log (batches of 1000): MB/s of raw CRC-checked reads
  (what Fetch serves), then records/s and MB/s for the framing decode (batches split into
  records), and with every record parsed as a MetadataRecord;
* restart of that log, after a crash (the active segment is rescanned) and after a clean
  close: without a snapshot (open + replay of every record) and with a recent snapshot (open +
  load and parse the snapshot + replay the log after it); and the worst case of crash
  recovery, a rescan of a full active segment of one-record batches.

Targets: the full scan decodes >= 500,000 records/s; restart with a recent snapshot < 2 s.
The workload is 1000 topics x 10 partitions: the log cycles through PartitionChangeRecords of
those partitions, so the image (the snapshot) is 11,000 records however long the log is.
"""

from __future__ import annotations

import functools
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from raftmeta.bench.results import (
    machine,
    median,
    percentile,
    result_file_option,
    scratch_dir,
    work_dir_option,
    write_result,
)
from raftmeta.cli.common import emit_json, output_option
from raftmeta.records.walk import next_offset_after
from raftmeta.storage.datadir import NodeStorage, log_dir
from raftmeta.storage.log import DEFAULT_SEGMENT_BYTES, SegmentLog
from raftmeta.storage.segment import INDEX_SUFFIX
from raftmeta.storage.snapshot import SnapshotId
from raftmeta.v1 import records_pb2 as r

TOPICS = 1000
PARTITIONS_PER_TOPIC = 10
SCAN_BATCH_RECORDS = 1000
SNAPSHOT_TAIL_RECORDS = 10_000  # "recent": the snapshot sits this many records below the log end
SCAN_TARGET_RECORDS_PER_S = 500_000
RESTART_TARGET_S = 2.0
CLUSTER_ID = "bench-storage"


def topic_id(t: int) -> bytes:
    return t.to_bytes(16, "big")


def image_records() -> list[bytes]:
    """The metadata image of the workload: every topic and partition."""
    out: list[bytes] = []
    for t in range(TOPICS):
        out.append(r.MetadataRecord(topic=r.TopicRecord(name=f"topic-{t}", topic_id=topic_id(t))).SerializeToString())
        for p in range(PARTITIONS_PER_TOPIC):
            partition = r.PartitionRecord(
                topic_id=topic_id(t), partition_id=p, replicas=[1, 2, 3], isr=[1, 2, 3], leader=1 + p % 3
            )
            out.append(r.MetadataRecord(partition=partition).SerializeToString())
    return out


def change_records() -> list[bytes]:
    """A pool of distinct PartitionChangeRecords (~50 bytes each) that the log cycles through."""
    out: list[bytes] = []
    for t in range(TOPICS):
        for p in range(PARTITIONS_PER_TOPIC):
            change = r.PartitionChangeRecord(
                topic_id=topic_id(t),
                partition_id=p,
                leader=1 + (t + p) % 3,
                isr=r.BrokerIdList(ids=[1, 2, 3]),
                leader_epoch=t % 7,
                partition_epoch=t % 11,
            )
            out.append(r.MetadataRecord(partition_change=change).SerializeToString())
    return out


def records_slice(pool: list[bytes], start: int, count: int) -> list[bytes]:
    start %= len(pool)
    chunk = pool[start : start + count]
    while len(chunk) < count:
        chunk += pool[: count - len(chunk)]
    return chunk


def fsync_floor(directory: Path, samples: int) -> dict[str, Any]:
    """Raw append of 100 bytes + fsync: the floor any durable append pays."""
    path = directory / "fsync-floor"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    payload = b"x" * 100
    latencies: list[float] = []
    try:
        started = time.perf_counter()
        for _ in range(samples):
            t0 = time.perf_counter()
            os.write(fd, payload)
            os.fsync(fd)
            latencies.append(time.perf_counter() - t0)
        elapsed = time.perf_counter() - started
    finally:
        os.close(fd)
        path.unlink()
    return {
        "samples": samples,
        "p50_us": round(percentile(latencies, 0.5) * 1e6, 1),
        "p99_us": round(percentile(latencies, 0.99) * 1e6, 1),
        "syncs_per_s": round(samples / elapsed),
    }


def append_run(directory: Path, pool: list[bytes], per_batch: int, batches: int) -> dict[str, float]:
    """``batches`` × (append_batch of ``per_batch`` records, flush) on a fresh log.

    Each append + flush is preceded by one floor sample (100 B append + fsync of a side file):
    fsync latency on a shared VM swings by 10x within seconds, so only interleaved samples
    compare the log with the disk fairly.
    """
    shutil.rmtree(directory, ignore_errors=True)
    log = SegmentLog.open(directory)
    floor_path = directory / "fsync-floor"
    floor_fd = os.open(floor_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    payload = b"x" * 100
    latencies: list[float] = []
    floor: list[float] = []
    data_bytes = 0
    busy = 0.0
    try:
        for i in range(batches):
            records = records_slice(pool, i * per_batch, per_batch)
            t0 = time.perf_counter()
            os.write(floor_fd, payload)
            os.fsync(floor_fd)
            t1 = time.perf_counter()
            header = log.append_batch(1, records, 0)
            log.flush()
            t2 = time.perf_counter()
            floor.append(t1 - t0)
            latencies.append(t2 - t1)
            busy += t2 - t1
            data_bytes += header.size_bytes
    finally:
        os.close(floor_fd)
        log.close()
        shutil.rmtree(directory, ignore_errors=True)
    return {
        "batches_per_s": batches / busy,
        "records_per_s": batches * per_batch / busy,
        "mb_per_s": data_bytes / busy / 1e6,
        "p50_us": percentile(latencies, 0.5) * 1e6,
        "p99_us": percentile(latencies, 0.99) * 1e6,
        "interleaved_fsync_floor_p50_us": percentile(floor, 0.5) * 1e6,
    }


def build_log(data_dir: Path, pool: list[bytes], records: int) -> int:
    """A node data dir holding ``records`` records in batches of 1000; returns the log bytes."""
    node = NodeStorage.open(data_dir, cluster_id=CLUSTER_ID, node_id=1)
    written = 0
    try:
        while written < records:
            count = min(SCAN_BATCH_RECORDS, records - written)
            node.log.append_batch(1, records_slice(pool, written, count), 0)
            written += count
        node.log.flush()
        node.checkpoint_high_watermark(written)
    finally:
        node.close()
    return sum(p.stat().st_size for p in log_dir(data_dir).glob("*.log"))


def read_all(data_dir: Path) -> tuple[float, int]:
    """Seconds to read the whole log as raw, CRC-checked batch bytes (what Fetch serves); bytes read."""
    log = SegmentLog.open(log_dir(data_dir))
    total = 0
    try:
        started = time.perf_counter()
        offset = log.log_start_offset
        end = log.log_end_offset
        while offset < end:
            data = log.read(offset, 1 << 20)
            total += len(data)
            offset = next_offset_after(data)
        elapsed = time.perf_counter() - started
    finally:
        log.close()
    return elapsed, total


def scan(data_dir: Path, *, parse: bool) -> tuple[float, int]:
    """Seconds to read every batch (CRC-checked) and split its records, optionally parsing each."""
    log = SegmentLog.open(log_dir(data_dir))
    count = 0
    parse_record = r.MetadataRecord.FromString
    try:
        started = time.perf_counter()
        for batch in log.iter_batches(log.log_start_offset):
            records = batch.records()
            if parse:
                for raw in records:
                    parse_record(raw)
            count += len(records)
        elapsed = time.perf_counter() - started
    finally:
        log.close()
    return elapsed, count


def forget_clean_close(data_dir: Path) -> None:
    """Make the next open behave as after a crash: drop the active segment's clean-close index."""
    segments = sorted(log_dir(data_dir).glob("*.log"))
    segments[-1].with_suffix(INDEX_SUFFIX).unlink(missing_ok=True)


def restart(data_dir: Path, *, crashed: bool) -> dict[str, float]:
    """Open the node's storage and replay it: the snapshot's image, then the log after it."""
    if crashed:
        forget_clean_close(data_dir)
    parse_record = r.MetadataRecord.FromString
    started = time.perf_counter()
    node = NodeStorage.open(data_dir, cluster_id=CLUSTER_ID, node_id=1)
    opened = time.perf_counter()
    replayed = 0
    start = 0
    if node.latest_snapshot is not None:
        for raw in node.latest_snapshot.records:
            parse_record(raw)
        replayed += len(node.latest_snapshot.records)
        start = node.latest_snapshot.snapshot_id.offset
    for batch in node.log.iter_batches(start):
        for raw in batch.records():
            parse_record(raw)
        replayed += batch.header.record_count
    finished = time.perf_counter()
    node.close()
    return {
        "open_ms": (opened - started) * 1000,
        "replay_ms": (finished - opened) * 1000,
        "total_ms": (finished - started) * 1000,
        "records_replayed": replayed,
    }


def active_segment_rescan(directory: Path, pool: list[bytes], runs: int, segment_bytes: int) -> dict[str, Any]:
    """Worst case of crash recovery: a full active segment of one-record batches, rescanned."""
    shutil.rmtree(directory, ignore_errors=True)
    log = SegmentLog.open(directory, segment_bytes=segment_bytes)
    i = 0
    while len(log.segment_files()) == 1:
        log.append_batch(1, [pool[i % len(pool)]], 0)
        i += 1
    log.truncate_to(i - 1)  # undo the append that rolled: one full active segment remains
    log.close()
    files = sorted(directory.glob("*.log"))
    size = files[-1].stat().st_size
    seconds: list[float] = []
    for _ in range(runs):
        files[-1].with_suffix(INDEX_SUFFIX).unlink(missing_ok=True)  # as after a crash
        started = time.perf_counter()
        reopened = SegmentLog.open(directory, segment_bytes=segment_bytes)
        seconds.append(time.perf_counter() - started)
        batches = reopened.log_end_offset - reopened.log_start_offset
        reopened.close()
    shutil.rmtree(directory, ignore_errors=True)
    took = median(seconds)
    return {
        "segment_bytes": size,
        "batches": batches,
        "open_ms": round(took * 1000, 1),
        "batches_per_s": round(batches / took),
        "mb_per_s": round(size / took / 1e6, 1),
    }


def medians(runs: list[dict[str, float]], digits: int = 1) -> dict[str, float]:
    return {key: round(median([run[key] for run in runs]), digits) for key in runs[0]}


def timed_runs(runs: int, fn: Callable[[], dict[str, float]]) -> dict[str, float]:
    return medians([fn() for _ in range(runs)])


def benchmark(
    work_dir: Path, *, records: int, runs: int, fsync_samples: int, append_batches: int, segment_bytes: int
) -> dict[str, Any]:
    pool = change_records()
    document: dict[str, Any] = {
        "benchmark": "storage",
        "machine": machine(),
        "parameters": {
            "records": records,
            "runs": runs,
            "fsync_samples": fsync_samples,
            "append_batches": append_batches,
            "segment_bytes": DEFAULT_SEGMENT_BYTES,
            "rescan_segment_bytes": segment_bytes,
            "record_bytes_mean": round(sum(map(len, pool)) / len(pool), 1),
            "work_dir": str(work_dir),
        },
    }
    floor = [fsync_floor(work_dir, fsync_samples) for _ in range(runs)]
    document["fsync_floor"] = {
        "samples": fsync_samples,
        "p50_us": median([f["p50_us"] for f in floor]),
        "p99_us": median([f["p99_us"] for f in floor]),
        "syncs_per_s": round(median([f["syncs_per_s"] for f in floor])),
    }
    appends = []
    for per_batch in (1, 100, 1000):
        batches = append_batches if per_batch < 1000 else max(1, append_batches // 4)
        figures = timed_runs(runs, functools.partial(append_run, work_dir / "append", pool, per_batch, batches))
        ratio = figures["p50_us"] / figures["interleaved_fsync_floor_p50_us"]
        appends.append(
            {"records_per_batch": per_batch, "batches": batches, **figures, "p50_over_floor_p50": round(ratio, 2)}
        )
    document["append_fsync_per_batch"] = appends

    data_dir = work_dir / "node"
    log_bytes = build_log(data_dir, pool, records)
    raw = [read_all(data_dir) for _ in range(runs)]
    split = [scan(data_dir, parse=False) for _ in range(runs)]
    parsed = [scan(data_dir, parse=True) for _ in range(runs)]
    split_s = median([s for s, _ in split])
    parsed_s = median([s for s, _ in parsed])
    document["full_scan"] = {
        "records": split[0][1],
        "log_bytes": log_bytes,
        "read_mb_per_s": round(log_bytes / median([t for t, _ in raw]) / 1e6, 1),
        "framing_records_per_s": round(records / split_s),
        "framing_mb_per_s": round(log_bytes / split_s / 1e6, 1),
        "decode_records_per_s": round(records / parsed_s),
        "decode_mb_per_s": round(log_bytes / parsed_s / 1e6, 1),
    }
    restart_doc: dict[str, Any] = {"records": records}
    restart_doc["without_snapshot"] = {
        "after_crash": timed_runs(runs, lambda: restart(data_dir, crashed=True)),
        "after_clean_close": timed_runs(runs, lambda: restart(data_dir, crashed=False)),
    }
    node = NodeStorage.open(data_dir, cluster_id=CLUSTER_ID, node_id=1)
    snapshot_offset = max(0, records - SNAPSHOT_TAIL_RECORDS)
    snapshot_offset -= snapshot_offset % SCAN_BATCH_RECORDS  # a batch boundary, as a controller would take
    image = image_records()
    started = time.perf_counter()
    node.take_snapshot(SnapshotId(snapshot_offset, 1), image, last_contained_log_timestamp_ms=0, append_timestamp_ms=0)
    snapshot_ms = (time.perf_counter() - started) * 1000
    node.close()
    restart_doc["with_snapshot"] = {
        "snapshot_offset": snapshot_offset,
        "snapshot_records": len(image),
        "take_snapshot_ms": round(snapshot_ms, 1),
        "after_crash": timed_runs(runs, lambda: restart(data_dir, crashed=True)),
        "after_clean_close": timed_runs(runs, lambda: restart(data_dir, crashed=False)),
    }
    restart_doc["active_segment_rescan"] = active_segment_rescan(work_dir / "rescan", pool, runs, segment_bytes)
    document["restart"] = restart_doc
    floor_p50 = document["fsync_floor"]["p50_us"]
    with_snapshot_s = restart_doc["with_snapshot"]["after_crash"]["total_ms"] / 1000
    document["ratios"] = {
        "append_1_p50_over_fsync_p50": round(appends[0]["p50_us"] / floor_p50, 2) if floor_p50 else None,
        "append_1_p50_over_interleaved_floor_p50": appends[0]["p50_over_floor_p50"],
    }
    document["targets"] = {
        "scan_decode_records_per_s_min": SCAN_TARGET_RECORDS_PER_S,
        "scan_decode_met": document["full_scan"]["decode_records_per_s"] >= SCAN_TARGET_RECORDS_PER_S,
        "restart_with_snapshot_s_max": RESTART_TARGET_S,
        "restart_with_snapshot_met": with_snapshot_s < RESTART_TARGET_S,
    }
    return document


@click.command()
@click.option(
    "--records",
    type=click.IntRange(min=SCAN_BATCH_RECORDS),
    default=1_000_000,
    show_default=True,
    help="Records in the scan/restart log.",
)
@click.option("--runs", type=click.IntRange(min=1), default=3, show_default=True, help="Runs per measurement (median).")
@click.option(
    "--fsync-samples", type=click.IntRange(min=10), default=2000, show_default=True, help="fsyncs per floor run."
)
@click.option(
    "--append-batches",
    type=click.IntRange(min=4),
    default=1000,
    show_default=True,
    help="Batches per append run (a quarter of it at 1000 records per batch).",
)
@click.option(
    "--rescan-segment-bytes",
    type=click.IntRange(min=4096),
    default=DEFAULT_SEGMENT_BYTES,
    show_default=True,
    help="Size of the active segment rescanned in the crash-recovery worst case.",
)
@work_dir_option
@result_file_option
@output_option
def command(
    records: int,
    runs: int,
    fsync_samples: int,
    append_batches: int,
    rescan_segment_bytes: int,
    work_dir: Path | None,
    result_file: Path | None,
    output: str,
) -> None:
    """Measure the segment log: fsync floor, appends with an fsync per batch, full-scan decode
    and restart time with and without a snapshot.

    Targets on a 2-core machine: a full scan decodes >= 500,000 records/s; a 1,000,000-record
    log with a recent snapshot restarts in < 2 s.
    """
    with scratch_dir(work_dir, "storage") as scratch:
        document = benchmark(
            scratch,
            records=records,
            runs=runs,
            fsync_samples=fsync_samples,
            append_batches=append_batches,
            segment_bytes=rescan_segment_bytes,
        )
    write_result(document, result_file)
    if output == "json":
        emit_json(document)
        return
    _print_text(document)


def _print_text(doc: dict[str, Any]) -> None:
    floor = doc["fsync_floor"]
    click.echo(
        f"fsync floor (100 B append + fsync): p50 {floor['p50_us']} µs, p99 {floor['p99_us']} µs, "
        f"{floor['syncs_per_s']} syncs/s"
    )
    for a in doc["append_fsync_per_batch"]:
        click.echo(
            f"append + fsync, {a['records_per_batch']:>4} rec/batch: {a['batches_per_s']:>9.0f} batches/s "
            f"{a['records_per_s']:>10.0f} rec/s {a['mb_per_s']:>7.1f} MB/s  p50 {a['p50_us']} µs p99 {a['p99_us']} µs "
            f"(interleaved fsync floor p50 {a['interleaved_fsync_floor_p50_us']} µs)"
        )
    scan_doc = doc["full_scan"]
    click.echo(
        f"full scan of {scan_doc['records']} records ({scan_doc['log_bytes'] / 1e6:.1f} MB): raw read "
        f"{scan_doc['read_mb_per_s']} MB/s, framing "
        f"{scan_doc['framing_records_per_s']} rec/s ({scan_doc['framing_mb_per_s']} MB/s), with protobuf decode "
        f"{scan_doc['decode_records_per_s']} rec/s ({scan_doc['decode_mb_per_s']} MB/s)"
    )
    for kind in ("without_snapshot", "with_snapshot"):
        for when in ("after_crash", "after_clean_close"):
            figures = doc["restart"][kind][when]
            click.echo(
                f"restart {kind.replace('_', ' ')}, {when.replace('_', ' ')}: {figures['total_ms']} ms "
                f"(open {figures['open_ms']} ms, replay {figures['replay_ms']} ms "
                f"of {figures['records_replayed']:.0f} records)"
            )
    rescan = doc["restart"]["active_segment_rescan"]
    click.echo(
        f"crash recovery of a full active segment of one-record batches ({rescan['batches']} batches, "
        f"{rescan['segment_bytes'] / 1e6:.1f} MB): {rescan['open_ms']} ms ({rescan['mb_per_s']} MB/s)"
    )
    click.echo(f"targets: {doc['targets']}")
