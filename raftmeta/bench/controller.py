"""``raftmeta bench controller``: CreateTopics throughput against images of growing size, and replay.

For each image size (``--sizes``, in partitions) a controller is filled with topics of
``--fill-topic-partitions`` partitions each on 9 brokers in 3 racks; then CreateTopics requests for
a 1-partition and a 1,000-partition topic (RF 3) go through ``Controller.handle`` + ``commit`` --
the full path of the leader's controller, working-image update included -- and
the median handled/s over ``--runs`` runs is reported; ``--request-ids`` gives each a request id,
as the project's clients do (the request digest and the RequestRecord come with it). A flat curve
means creation cost does not grow with the image (the image is a persistent structure, nothing is
copied per request).

Replay: the log that built the largest image is replayed from its bytes, from empty, through ``ImageBuilder``
(the path of followers, ``log dump`` and the Spark job), and a slice of it record by record
through ``MetadataImage.replay`` (one new image per record). A floor measured in the same
process -- reading every field of every PartitionRecord, no replay logic -- shows what reading
the records field by field would cost on this (shared, noisy) machine. Replay can beat it
(``share_of_floor`` above 1): a new partition's state is taken from the record's serialized
bytes, one C call, instead of from its fields (``raftmeta/controller/delta.py``).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click

from placement.rng import JavaRandom
from raftmeta.bench.results import machine, median, result_file_option, write_result
from raftmeta.cli.common import emit_json, output_option, usage_error
from raftmeta.controller import Controller, ImageBuilder, MetadataImage
from raftmeta.records.decode import LazyRecords, parse_records, serialized
from raftmeta.v1 import controller_pb2, records_pb2

BROKERS = 9
RACKS = 3


class _Ids:
    def __init__(self) -> None:
        self.next = 1

    def __call__(self) -> bytes:
        value = self.next
        self.next += 1
        return value.to_bytes(16, "big")


class _Leader:
    """The controller with a trivial driver: every batch is appended and committed at once."""

    def __init__(self, *, request_ids: bool = False) -> None:
        self.controller = Controller()
        self.ids = _Ids()
        # As the project's clients send them: a request id, so a digest and a RequestRecord more.
        self.request_ids = request_ids
        self.random = JavaRandom(0)
        self.offset = -1
        self.log: list[bytes] = []  # serialized, as the node's log holds them
        self.names = 0

    def send(self, method: str, request: Any) -> Any:
        handled = self.controller.handle(method, request, 0, self.ids, self.random)
        if handled.records:
            self.offset += len(handled.records)
            self.log.extend(serialized(handled.records))
            self.controller.commit(1, self.offset)
        return handled.response

    def add_brokers(self) -> None:
        for broker in range(BROKERS):
            incarnation = bytes([0xBB]) + broker.to_bytes(15, "big")
            self.send(
                "RegisterBroker",
                controller_pb2.RegisterBrokerRequest(
                    broker_id=broker, incarnation_id=incarnation, rack=f"r{broker % RACKS}"
                ),
            )
            epoch = self.controller.image.brokers[broker].epoch
            self.send("BrokerHeartbeat", controller_pb2.BrokerHeartbeatRequest(broker_id=broker, broker_epoch=epoch))

    def create(self, partitions: int) -> None:
        self.names += 1
        request = controller_pb2.CreateTopicsRequest(
            topics=[
                controller_pb2.CreatableTopic(
                    name=f"topic-{self.names}", num_partitions=partitions, replication_factor=3
                )
            ],
            request_id=f"request-{self.names}" if self.request_ids else "",
        )
        response = self.send("CreateTopics", request)
        if response.topics[0].error_code != 0:
            raise RuntimeError(f"benchmark topic was refused: {response.topics[0].error_message}")


# Rates are per second of this process's CPU time (time.process_time): on a shared 2-core machine
# wall-clock rates mostly measure the neighbours; CPU time measures the code.
_clock = time.process_time


def _rate(action: Callable[[], None], count: int) -> float:
    started = _clock()
    for _ in range(count):
        action()
    return count / max(_clock() - started, 1e-9)


def _floor(records: list[records_pb2.MetadataRecord]) -> float:
    """Records/s of merely reading every field of every record (the protobuf floor)."""
    started = _clock()
    for record in records:
        kind = record.WhichOneof("record")
        if kind == "partition":
            p = record.partition
            (
                p.topic_id,
                p.partition_id,
                tuple(p.replicas[:]),
                tuple(p.isr[:]),
                p.leader,
                p.leader_epoch,
                p.partition_epoch,
                p.removing_replicas,
                p.adding_replicas,
            )
    return len(records) / max(_clock() - started, 1e-9)


def _replay(records: Sequence[records_pb2.MetadataRecord], gc_mode: str) -> tuple[float, MetadataImage]:
    """Records/s of replaying ``records`` from empty through one ImageBuilder.

    ``gc_mode``: "plain" (the cyclic GC as it is), "frozen" (objects that exist before the replay
    -- the decoded log this benchmark holds, the leader's images -- are moved out of the GC's
    reach with gc.freeze(), so its full passes scan only what replay allocates; a node replays
    batch by batch and does not hold a decoded log), "paused" (GC disabled during the replay).
    """
    gc.collect()
    if gc_mode == "frozen":
        gc.freeze()
    elif gc_mode == "paused":
        gc.disable()
    try:
        started = _clock()
        builder = ImageBuilder(MetadataImage.empty())
        builder.replay_all(records)
        image = builder.build()
        return len(records) / max(_clock() - started, 1e-9), image
    finally:
        gc.enable()
        gc.unfreeze()


def benchmark(
    sizes: list[int],
    fill_topic_partitions: int,
    runs: int,
    creates_small: int,
    creates_large: int,
    request_ids: bool = False,
) -> dict[str, Any]:
    leader = _Leader(request_ids=request_ids)
    leader.add_brokers()
    # Warm-up (imports, caches, the placer's first calls) so the first size is not penalised.
    for _ in range(max(1, creates_small // 10)):
        leader.create(1)
    leader.create(1000)
    curve: list[dict[str, Any]] = []
    for size in sorted(sizes):
        while leader.controller.image.partition_count < size:
            leader.create(min(fill_topic_partitions, size - leader.controller.image.partition_count))
        at_start = leader.controller.image.partition_count
        small = [_rate(lambda: leader.create(1), creates_small) for _ in range(runs)]
        large = [_rate(lambda: leader.create(1000), creates_large) for _ in range(runs)]
        curve.append(
            {
                "image_partitions": size,
                "image_partitions_at_start": at_start,
                "image_topics": len(leader.controller.image.topics),
                "create_1_partition_per_s": round(median(small)),
                "create_1000_partitions_per_s": round(median(large), 1),
                "runs_1_partition_per_s": [round(r) for r in small],
                "runs_1000_partitions_per_s": [round(r, 1) for r in large],
            }
        )
    # Followers replay committed batches from their bytes; the floor and the per-record path read
    # messages.
    raw = LazyRecords(leader.log)
    log = parse_records(leader.log)
    plain: list[float] = []
    frozen: list[float] = []
    paused: list[float] = []
    floor: list[float] = []
    for _ in range(runs):
        rate, final = _replay(raw, "frozen")
        if final != leader.controller.committed_image:
            raise RuntimeError("replaying the log did not rebuild the controller's image")
        frozen.append(rate)
        plain.append(_replay(raw, "plain")[0])
        paused.append(_replay(raw, "paused")[0])
        floor.append(_floor(log))
    sample = log[: min(len(log), 20_000)]
    started = _clock()
    image = MetadataImage.empty()
    for record in sample:
        image = image.replay(record)
    per_record = len(sample) / max(_clock() - started, 1e-9)
    first, last = curve[0], curve[-1]
    return {
        "benchmark": "controller",
        "config": {
            "brokers": BROKERS,
            "racks": RACKS,
            "replication_factor": 3,
            "clock": "process CPU time",
            "fill_topic_partitions": fill_topic_partitions,
            "runs": runs,
            "creates_per_run": {"1_partition": creates_small, "1000_partitions": creates_large},
            "request_ids": request_ids,
        },
        "machine": machine(),
        "create_topics": curve,
        "creation_growth": {
            "1_partition": round(first["create_1_partition_per_s"] / last["create_1_partition_per_s"], 2),
            "1000_partitions": round(first["create_1000_partitions_per_s"] / last["create_1000_partitions_per_s"], 2),
            "note": "rate at the smallest image / rate at the largest (1.0 = no growth)",
        },
        "replay": {
            "records": len(log),
            "records_per_s": round(median(frozen)),
            "runs_records_per_s": [round(r) for r in frozen],
            "records_per_s_gc_plain": round(median(plain)),
            "records_per_s_gc_paused": round(median(paused)),
            "gc_note": "records_per_s: pre-existing heap frozen (gc.freeze); _gc_plain: GC as is, re-scanning "
            "the benchmark's decoded log; _gc_paused: GC disabled",
            "per_record_image_replay_per_s": round(per_record),
            "floor_field_reads_per_s": round(median(floor)),
            "share_of_floor": round(median(frozen) / median(floor), 3),
        },
    }


@click.command()
@click.option(
    "--sizes",
    default="0,10000,100000",
    show_default=True,
    help="Image sizes (partitions) to measure at, comma-separated.",
)
@click.option("--fill-topic-partitions", type=click.IntRange(min=1), default=10, show_default=True)
@click.option("--runs", type=click.IntRange(min=1), default=3, show_default=True, help="Runs per figure (median).")
@click.option("--creates-small", type=click.IntRange(min=1), default=300, show_default=True)
@click.option("--creates-large", type=click.IntRange(min=1), default=5, show_default=True)
@click.option(
    "--request-ids/--no-request-ids",
    default=False,
    show_default=True,
    help="Give every create a request id, as the project's clients do (its digest and RequestRecord).",
)
@result_file_option
@output_option
def command(
    sizes: str,
    fill_topic_partitions: int,
    runs: int,
    creates_small: int,
    creates_large: int,
    request_ids: bool,
    result_file: Path | None,
    output: str,
) -> None:
    """CreateTopics handled/s (1- and 1,000-partition topics) against growing images, and replay records/s.

    Targets: replay >= 300,000 records/s; creation rate flat as the image grows to 100,000 partitions.
    """
    try:
        parsed = [int(s) for s in sizes.split(",") if s.strip()]
    except ValueError:
        raise usage_error(f"sizes must be comma-separated integers, got {sizes!r}", "--sizes") from None
    if not parsed or min(parsed) < 0:
        raise usage_error("give at least one non-negative size", "--sizes")
    document = benchmark(parsed, fill_topic_partitions, runs, creates_small, creates_large, request_ids)
    write_result(document, result_file)
    if output == "json":
        emit_json(document)
        return
    click.echo(f"CreateTopics through Controller.handle (RF 3, {BROKERS} brokers), median of {runs} runs")
    for point in document["create_topics"]:
        click.echo(
            f"  image {point['image_partitions']:>7} partitions: "
            f"{point['create_1_partition_per_s']:>6} creates/s (1 partition)  "
            f"{point['create_1000_partitions_per_s']:>6} creates/s (1000 partitions)"
        )
    replay = document["replay"]
    click.echo(
        f"replay {replay['records']} records: {replay['records_per_s']} records/s "
        f"({replay['records_per_s_gc_plain']}/s with the GC re-scanning the held log, "
        f"{replay['records_per_s_gc_paused']}/s with the GC paused) "
        f"({replay['share_of_floor']:.0%} of the protobuf field-read floor {replay['floor_field_reads_per_s']}/s); "
        f"record-by-record image.replay {replay['per_record_image_replay_per_s']}/s"
    )
