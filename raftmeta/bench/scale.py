"""``raftmeta bench scale``: what a big image costs a real local quorum.

One run starts a 3-node quorum (fsync on, default timeouts) and a fleet of ``--brokers``
simulated brokers in ``--racks`` racks (their ISR check pushed past the run, as ``bench commit``
does: otherwise they read every topic of the image once a second), then, from ONE client in this
process:

1. **empty image**: creates a probe topic of ``--topic-partitions`` partitions, then measures the
   p50 of a DescribeTopics of that one topic (linearizable, the default), of the first page of a
   DescribeTopics of every topic (at most the node's 2000 partitions) and of a create of one
   more 1-partition topic, ``--samples`` calls each, one at a time;
2. **creation**: ``--partitions`` partitions as ``partitions / topic-partitions`` topics (RF 3),
   one topic per CreateTopics, ``--pipeline`` requests in flight on one channel; the rate is
   partitions/s over the whole creation; the nodes' RSS is watched (``--max-node-rss-mib``) and
   the creation stops, reporting how far it got, past it or past ``--create-budget-s``;
3. **full image**: each node's RSS (``VmRSS``, ``VmHWM`` of /proc) once every voter has the
   whole log, the same three p50s as on the empty image (``create_p50_vs_empty``), and a
   DescribeTopics of every topic, page after page (``describe_every_topic``: seconds, pages);
4. **snapshot**: the nodes run with ``--snapshot-interval-records`` just above the records the
   steps before commit, so none is taken while the image grows and exactly one of the whole
   image is taken when ``filler`` creates (topics of ``--topic-partitions``) cross it; its time
   is each node's own (``raftmeta_raft_snapshot_duration_seconds``, docs/metrics.md: encode,
   write, fsync and read back) and its size is the checkpoint file's; RSS again after it (the
   log below the snapshot is dropped). ``--snapshots node`` leaves the nodes their own policy
   instead (a snapshot every 10,000 records, then each time the image has doubled): the newest
   one taken while the image grew is reported (its time from the node's log), and the restarts
   below load it and replay the log above it, as a node in service would;
5. **restart**: a follower is stopped (SIGTERM) and started again; the time from its start to
   the leader seeing it caught up since then, at the high watermark (DescribeQuorum: its
   ``last_caught_up_ms_ago`` and log end offset) -- it loads the snapshot and replays the log
   above it;
6. **wiped follower**: the other follower is stopped, its data directory deleted (a replaced
   disk), and it is started with the same command line: ``--initial-controllers`` gives it its
   directory id again (docs/operations.md), so it rejoins as the same voter with an empty log and
   the leader sends it the snapshot (FetchSnapshot) and the log above it; timed the same way.
7. **a broker leaves**: one UnregisterBroker of the first broker (the fleet registers it again):
   the controller moves every leadership and ISR membership it holds in one request, in
   proportion to the partitions it is in. Timed from the client (``--leave-deadline-s`` at most:
   a leader that stalls past the followers' fetch timeout loses its leadership, and each next
   one handles the retry), with the records it committed and the elections it cost.

``--growth F`` first runs the same steps at ``F x --partitions`` on a quorum of its own, for a
growth curve. ``targets`` compares the figures with issue 25's targets. Times on this shared
2-core machine include whatever else runs (``load_average``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from raftmeta.bench.results import (
    machine,
    median,
    result_file_option,
    rss_bytes,
    scratch_dir,
    work_dir_option,
    write_result,
)
from raftmeta.cli.common import CheckFailed, emit_json, output_option
from raftmeta.v1 import controller_pb2

GIB = 1 << 30
MIB = 1 << 20
REPLICATION_FACTOR = 3
# As `bench commit`: the fleet's partition leaders would otherwise read every topic, page by page,
# once per check: node CPU in proportion to the image.
FLEET_ISR_CHECK_INTERVAL_MS = 86_400_000
# A create of a topic commits its TopicRecord, one PartitionRecord per partition and its RequestRecord.
RECORDS_PER_TOPIC = 2
# Records committed before the creation besides the probe writes: LeaderChange and voters records,
# each broker's registration and unfencing (with their request records); a bound, not a count.
RECORDS_PER_BROKER_BOUND = 6
RECORDS_BASE_BOUND = 200
PROGRESS_INTERVAL_S = 10.0
CATCH_UP_TIMEOUT_S = 600.0
SNAPSHOT_TIMEOUT_S = 900.0
SNAPSHOT_METRIC = "raftmeta_raft_snapshot_duration_seconds"
LOG_DIR = "__cluster_metadata-0"
TARGETS = {
    "bytes_per_partition": 400.0,  # <= 4 GiB per node at 10M partitions
    "partitions_per_s": 100_000.0,
    "snapshot_s": 30.0,
    "restart_s": 30.0,
    "wiped_catch_up_s": 60.0,
    "describe_p50_ms": 5.0,
    "create_p50_vs_empty": 1.5,
}


@dataclass(frozen=True)
class ScaleSize:
    """What a scale run builds and how it measures it, the same on every side (raftmeta's gRPC
    run, and ``--target kraft|both`` in raftmeta/bench/kafka_scale.py)."""

    partitions: int
    topic_partitions: int = 1000
    brokers: int = 100
    racks: int = 5
    pipeline: int = 4
    samples: int = 100
    max_node_rss_mib: int = 5120
    create_budget_s: float | None = None

    @property
    def topics(self) -> int:
        return self.partitions // self.topic_partitions


@dataclass(frozen=True)
class ScaleParams(ScaleSize):
    # "final": one snapshot of the whole image after the creation; "node": the nodes' own policy
    # (every 10,000 records, then as the image doubles) while it grows, the last one reported.
    snapshots: str = "final"
    # The broker-leaves step's deadline: a quorum that keeps losing its leader ends it here.
    leave_deadline_s: float = 60.0

    def records_before_snapshot(self) -> int:
        """A bound on the records committed before the snapshot is due: the start, the probe
        topic and the 1-partition creates on both images, the creation."""
        start = RECORDS_BASE_BOUND + RECORDS_PER_BROKER_BOUND * self.brokers
        probes = 2 * self.samples * (1 + RECORDS_PER_TOPIC) + self.topic_partitions + RECORDS_PER_TOPIC
        return start + probes + self.topics * (self.topic_partitions + RECORDS_PER_TOPIC)


def progress(event: str, **fields: object) -> None:
    """One line on stderr per step (stdout carries the result): a run at millions of partitions
    takes minutes."""
    details = " ".join(f"{key}={value}" for key, value in fields.items())
    click.echo(f"{time.strftime('%H:%M:%S')} bench scale: {event} {details}".rstrip(), err=True)


# -- processes ------------------------------------------------------------------------------------
def node_memory(quorum: Any) -> dict[str, dict[str, int]]:
    return {str(n.id): rss_bytes(n.pid) for n in quorum.nodes}


async def wait_exit(pid: int, timeout_s: float = 60.0) -> None:
    from raftmeta.local import quorum as local_quorum

    deadline = time.monotonic() + timeout_s
    while local_quorum.alive(pid):
        if time.monotonic() > deadline:
            raise CheckFailed(f"process {pid} did not exit within {timeout_s} s")
        await asyncio.sleep(0.02)


def checkpoints(data_dir: str) -> list[Path]:
    """A node's snapshot files, oldest first (names are zero-padded offsets)."""
    directory = Path(data_dir) / LOG_DIR
    return sorted(directory.glob("*.checkpoint")) if directory.is_dir() else []


# -- client calls ---------------------------------------------------------------------------------
async def timed_p50_ms(call: Callable[[int], Awaitable[None]], samples: int) -> float:
    """p50 of ``samples`` calls made one at a time (milliseconds)."""
    latencies: list[float] = []
    for index in range(samples):
        started = time.perf_counter()
        await call(index)
        latencies.append(time.perf_counter() - started)
    return round(median(latencies) * 1000, 3)


async def create_topic(client: Any, name: str, partitions: int) -> None:
    topic = controller_pb2.CreatableTopic(name=name, num_partitions=partitions, replication_factor=REPLICATION_FACTOR)
    response = await client.create_topics(controller_pb2.CreateTopicsRequest(topics=[topic]))
    result = response.topics[0]
    if result.error_code != 0:
        raise CheckFailed(f"creating {name} failed: {result.error_message}")


async def latencies(client: Any, probe_topic: str, label: str, samples: int) -> dict[str, float]:
    """The p50s of a one-topic DescribeTopics, of the first page of a DescribeTopics of every topic
    (at most the node's maximum of partitions, however big the image) and of a 1-partition create
    on the image as it is."""

    async def describe(_: int) -> None:
        answer = await client.describe_topics([probe_topic])
        if len(answer.topics) != 1:
            raise CheckFailed(f"DescribeTopics of {probe_topic} answered {len(answer.topics)} topics")

    async def describe_page(_: int) -> None:
        answer = await client.call("DescribeTopics", controller_pb2.DescribeTopicsRequest())
        if not answer.topics:
            raise CheckFailed("a DescribeTopics of every topic answered no topic")

    async def create(index: int) -> None:
        await create_topic(client, f"one-{label}-{index}", 1)

    return {
        "describe_p50_ms": await timed_p50_ms(describe, samples),
        "describe_every_topic_page_p50_ms": await timed_p50_ms(describe_page, samples),
        "create_p50_ms": await timed_p50_ms(create, samples),
    }


async def describe_every_topic(client: Any, image_partitions: int) -> dict[str, Any]:
    """A linearizable DescribeTopics of every topic, page after page as the client reads it (each
    page is dropped once counted: the bench keeps no 10M-partition answer), timed whole."""
    request = controller_pb2.DescribeTopicsRequest()
    pages = partitions = 0
    started = time.perf_counter()
    while True:
        page = await client.call("DescribeTopics", request)
        pages += 1
        partitions += sum(len(topic.partitions) for topic in page.topics)
        if not page.HasField("next_cursor"):
            break
        request.cursor.CopyFrom(page.next_cursor)
    seconds = time.perf_counter() - started
    # The image holds a few more: the 1-partition creates measured on the full image.
    if partitions < image_partitions:
        raise CheckFailed(f"a DescribeTopics of every topic gave {partitions} partitions, the image has more")
    figures = {"seconds": round(seconds, 2), "pages": pages, "partitions": partitions}
    progress("every topic described", **figures)
    return {**figures, "page_ms": round(seconds / pages * 1000, 2)}


@dataclass
class Watch:
    """The nodes' memory, watched every second for the whole run: past ``limit_bytes`` the
    creation stops (its figures kept) or, in a later step, the run stops (the machine must not run
    out of memory); the peak each node reached in each step is kept."""

    limit_bytes: int
    phase: str = "start"
    stopped: str | None = None
    stop_creation: asyncio.Event = field(default_factory=asyncio.Event)
    peaks: dict[str, dict[str, int]] = field(default_factory=dict)

    def enter(self, phase: str) -> None:
        self.phase = phase

    def sample(self, quorum: Any) -> str | None:
        """Read every node's RSS; the reason to stop, if one passed the limit."""
        peaks = self.peaks.setdefault(self.phase, {})
        for node, figures in node_memory(quorum).items():
            peaks[node] = max(peaks.get(node, 0), figures["rss"])
            if figures["rss"] > self.limit_bytes:
                return (
                    f"node {node}'s RSS ({figures['rss'] // MIB} MiB) passed --max-node-rss-mib "
                    f"({self.limit_bytes // MIB}) during {self.phase}"
                )
        return None


async def guard(quorum: Any, watch: Watch, steps: asyncio.Task[None]) -> None:
    while not steps.done():
        reason = watch.sample(quorum)
        if reason is not None and watch.stopped is None:
            watch.stopped = reason
            progress("stopping", reason=reason)
            if watch.phase == "creation":
                watch.stop_creation.set()  # the creation ends and reports how far it got
            else:
                steps.cancel()
                return
        await asyncio.sleep(1.0)


# -- creation -------------------------------------------------------------------------------------
@dataclass
class Creation:
    created_partitions: int = 0
    created_topics: int = 0
    seconds: float = 0.0
    stopped: str | None = None  # why the creation stopped before the end
    peak_rss: dict[str, int] = field(default_factory=dict)
    # CPU seconds of every node and of the leader over the creation, and how busy the machine was:
    # with 2 cores and 3 nodes, CPU per partition is what bounds the rate.
    node_cpu_s: float | None = None
    leader_cpu_s: float | None = None
    machine_busy_percent: float | None = None


async def create_all(client: Any, quorum: Any, leader: int, params: ScaleParams, watch: Watch) -> Creation:
    """``params.topics`` topics from one client with ``params.pipeline`` requests in flight,
    until done, the memory watch stops it, or the time budget is spent (a stop reason)."""
    from raftmeta.bench.commit import cpu_seconds, machine_ticks

    outcome = Creation()
    names = iter(range(params.topics))
    stop = watch.stop_creation
    pids = [n.pid for n in quorum.nodes]
    leader_pid = [quorum.node(leader).pid]
    cpu_before, leader_before, ticks_before = cpu_seconds(pids), cpu_seconds(leader_pid), machine_ticks()
    started = time.perf_counter()

    async def worker() -> None:
        for index in names:
            if stop.is_set():
                return
            await create_topic(client, f"scale-{index}", params.topic_partitions)
            outcome.created_topics += 1
            outcome.created_partitions += params.topic_partitions

    async def report() -> None:
        while not stop.is_set():
            await asyncio.sleep(PROGRESS_INTERVAL_S)
            elapsed = time.perf_counter() - started
            memory = node_memory(quorum)
            progress(
                "creating",
                partitions=outcome.created_partitions,
                of=params.partitions,
                per_s=round(outcome.created_partitions / elapsed),
                node_rss_mib={node: f["rss"] // MIB for node, f in memory.items()},
                free_mib=available_memory_mib(),
            )
            if params.create_budget_s is not None and elapsed > params.create_budget_s:
                outcome.stopped = f"--create-budget-s {params.create_budget_s:g} s passed"
                stop.set()

    reporter = asyncio.create_task(report())
    try:
        await asyncio.gather(*(worker() for _ in range(params.pipeline)))
    finally:
        outcome.seconds = time.perf_counter() - started
        stop.set()
        reporter.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reporter
    cpu_after, leader_after, ticks_after = cpu_seconds(pids), cpu_seconds(leader_pid), machine_ticks()
    if cpu_before is not None and cpu_after is not None and leader_before is not None and leader_after is not None:
        outcome.node_cpu_s, outcome.leader_cpu_s = cpu_after - cpu_before, leader_after - leader_before
    if ticks_before is not None and ticks_after is not None and ticks_after[1] > ticks_before[1]:
        busy = (ticks_after[0] - ticks_before[0]) / (ticks_after[1] - ticks_before[1])
        outcome.machine_busy_percent = round(100 * busy, 1)
    outcome.stopped = outcome.stopped or watch.stopped
    outcome.peak_rss = dict(watch.peaks.get("creation", {}))
    return outcome


def available_memory_mib() -> int | None:
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) // 1024
    return None


# -- the quorum's state ---------------------------------------------------------------------------
async def all_caught_up(client: Any, timeout_s: float = CATCH_UP_TIMEOUT_S) -> int:
    """Wait until every voter's log end offset is the leader's high watermark; return it."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = await client.describe_quorum()
        if status.leader_id >= 0 and all(v.log_end_offset >= status.high_watermark for v in status.voters):
            return int(status.high_watermark)
        await asyncio.sleep(0.1)
    raise CheckFailed(f"the voters did not reach the leader's high watermark within {timeout_s} s")


async def caught_up_after(client: Any, node_id: int, started: float) -> float:
    """Seconds from ``started`` (monotonic) until the leader has seen ``node_id`` caught up (a
    Fetch at its log end) since then, at the high watermark. The leader remembers a stopped
    follower's last offset, and a Fetch below its log start (a wiped follower's, answered with the
    snapshot to fetch) changes neither that offset nor the caught-up time: only a caught-up time
    after the start proves the node has the log up to the high watermark again."""
    deadline = started + CATCH_UP_TIMEOUT_S
    while time.monotonic() < deadline:
        status = await client.describe_quorum()
        now = time.monotonic()
        for voter in status.voters:
            if voter.replica_id != node_id or voter.last_caught_up_ms_ago < 0:
                continue
            caught_up_at: float = now - voter.last_caught_up_ms_ago / 1000
            if caught_up_at > started and voter.log_end_offset >= status.high_watermark:
                return caught_up_at - started
        await asyncio.sleep(0.05)
    raise CheckFailed(f"node {node_id} did not catch up within {CATCH_UP_TIMEOUT_S} s")


async def snapshot_seconds(quorum: Any) -> dict[str, tuple[float, float]]:
    """Each node's snapshot-duration histogram so far: (sum of seconds, count)."""
    from raftmeta.metrics.scrape import fetch

    figures: dict[str, tuple[float, float]] = {}
    for node in quorum.nodes:
        scrape = await asyncio.to_thread(fetch, node.metrics_address, timeout_s=30.0)
        figures[str(node.id)] = (
            scrape.get(f"{SNAPSHOT_METRIC}_sum") or 0.0,
            scrape.get(f"{SNAPSHOT_METRIC}_count") or 0.0,
        )
    return figures


async def take_snapshot(client: Any, quorum: Any, params: ScaleParams) -> dict[str, Any]:
    """Create filler topics until every node has written a snapshot (the interval is crossed),
    then wait for the files; the nodes' own durations from their metrics."""
    before_files = {str(n.id): len(checkpoints(n.data_dir)) for n in quorum.nodes}
    if any(before_files.values()):
        # More was committed before than the interval allowed for: a snapshot of part of the
        # image exists already, and the policy takes the next one only at twice its size.
        raise CheckFailed(
            f"a snapshot was taken before the image was complete ({before_files}): the records "
            f"committed before it exceeded the bound {params.records_before_snapshot()}"
        )
    before = await snapshot_seconds(quorum)
    fillers = 0
    started = time.monotonic()

    def written() -> bool:
        return all(len(checkpoints(n.data_dir)) > before_files[str(n.id)] for n in quorum.nodes)

    # Fillers until the high watermark passes the interval: the commit that crosses it makes each
    # node take its snapshot (which takes a while: the files, not the fillers, are waited for).
    interval = params.records_before_snapshot()
    while (await client.describe_quorum()).high_watermark < interval:
        await create_topic(client, f"filler-{fillers}", params.topic_partitions)
        fillers += 1
    progress("snapshot due", fillers=fillers, high_watermark=(await client.describe_quorum()).high_watermark)
    while not written():
        if time.monotonic() - started > SNAPSHOT_TIMEOUT_S:
            raise CheckFailed(f"no snapshot on every node within {SNAPSHOT_TIMEOUT_S} s")
        await asyncio.sleep(0.05)
    wall = time.monotonic() - started
    after = before
    while True:  # the histogram is observed just after the file is in place
        after = await snapshot_seconds(quorum)
        if all(after[n][1] > before[n][1] for n in after) or time.monotonic() - started > SNAPSHOT_TIMEOUT_S:
            break
        await asyncio.sleep(0.1)
    durations = {
        node: round((after[node][0] - before[node][0]) / max(1.0, after[node][1] - before[node][1]), 3)
        for node in after
    }
    sizes = {str(n.id): checkpoints(n.data_dir)[-1].stat().st_size for n in quorum.nodes}
    return {
        "seconds": durations,
        "max_s": max(durations.values()),
        "wall_s": round(wall, 3),
        "bytes": sizes,
        "file": checkpoints(quorum.nodes[0].data_dir)[-1].name,
        "filler_topics": fillers,
    }


def last_snapshots(quorum: Any, high_watermark: int) -> dict[str, Any]:
    """The newest snapshot each node took by its own policy, from its log ("snapshot taken": end
    offset, bytes, records, seconds)."""
    taken: dict[str, dict[str, Any]] = {}
    for node in quorum.nodes:
        with open(node.log, encoding="utf-8", errors="replace") as lines:
            for line in lines:
                if '"snapshot taken"' not in line:
                    continue
                with contextlib.suppress(ValueError):
                    event = json.loads(line)
                    if event.get("event") == "snapshot taken":  # not "heap frozen" for that reason
                        taken[str(node.id)] = event
    if len(taken) != len(quorum.nodes):
        raise CheckFailed(f"not every node took a snapshot (nodes with one: {sorted(taken)})")
    end_offset = min(int(event["end_offset"]) for event in taken.values())
    seconds = {node: float(event.get("seconds", 0.0)) for node, event in taken.items()}
    return {
        "seconds": seconds,
        "max_s": max(seconds.values()),
        "bytes": {node: int(event["bytes"]) for node, event in taken.items()},
        "records": {node: int(event["records"]) for node, event in taken.items()},
        "file": checkpoints(quorum.nodes[0].data_dir)[-1].name,
        # How much of the log (so of the image) the newest snapshot covers.
        "end_offset": end_offset,
        "log_fraction": round(end_offset / high_watermark, 3),
    }


async def restart_follower(client: Any, quorum: Any, node_id: int, *, wipe: bool) -> dict[str, Any]:
    """Stop a follower (SIGTERM), optionally delete its data directory, start it with the same
    command line and time its catch-up."""
    from raftmeta.local import quorum as local_quorum

    node = quorum.node(node_id)
    os.kill(node.pid, signal.SIGTERM)
    await wait_exit(node.pid)
    if wipe:
        shutil.rmtree(node.data_dir)
    started = time.monotonic()
    local_quorum.restart(quorum, node_id)
    seconds = await caught_up_after(client, node_id, started)
    files = checkpoints(node.data_dir)
    result: dict[str, Any] = {"node": node_id, "seconds": round(seconds, 3), "caught_up": True}
    if wipe:
        # A snapshot file in the emptied directory came from the leader (FetchSnapshot).
        result["installed_snapshot"] = files[-1].name if files else None
        result["rejoined_as"] = "voter (same node id and directory id, from --initial-controllers)"
    result["rss"] = rss_bytes(quorum.node(node_id).pid)
    return result


async def broker_leaves(client: Any, deadline_s: float) -> dict[str, Any]:
    """UnregisterBroker of the first broker: its seconds (or the error that ended it), the records
    committed meanwhile (its partition changes, nearly all) and the elections it cost."""
    from raftmeta.client import ClientError
    from raftmeta.v1 import controller_pb2

    broker = min(b.broker_id for b in (await client.describe_cluster()).brokers)
    before = await client.describe_quorum()
    started = time.monotonic()
    error = None
    try:
        response = await client.unregister_broker(
            controller_pb2.UnregisterBrokerRequest(broker_id=broker), deadline_s=deadline_s
        )
        if response.error_code:
            error = f"{response.error_code}: {response.error_message}"
    except ClientError as exc:  # the deadline passed (OutcomeUnknownError), or a refusal
        error = str(exc)
    seconds = time.monotonic() - started
    after = await client.describe_quorum()
    return {
        "broker": broker,
        "seconds": round(seconds, 3),
        "error": error,
        "records_committed": after.high_watermark - before.high_watermark,
        "elections": after.leader_epoch - before.leader_epoch,
    }


# -- one size -------------------------------------------------------------------------------------
async def measure(quorum: Any, params: ScaleParams) -> dict[str, Any]:
    """Every step, under the memory watch; a watch that stops the run leaves the steps done."""
    document: dict[str, Any] = {}
    watch = Watch(params.max_node_rss_mib * MIB)
    steps = asyncio.create_task(measure_steps(quorum, params, document, watch))
    guarding = asyncio.create_task(guard(quorum, watch, steps))
    try:
        await steps
    except asyncio.CancelledError:
        if watch.stopped is None:
            raise
    finally:
        guarding.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await guarding
    if watch.stopped is not None:
        document["stopped"] = watch.stopped
    document["peak_rss"] = watch.peaks
    return document


async def leader_first(quorum: Any, retry: Any) -> tuple[int, Any]:
    """The leader now, and a client that calls it first: another node would forward every request
    to it (one more hop), and the leader may have changed since the last step."""
    from raftmeta.client import ControllerClient

    addresses = {n.id: n.address for n in quorum.nodes}
    async with ControllerClient(list(addresses.values()), retry=retry) as probe:
        leader = int((await probe.describe_quorum()).leader_id)
    ordered = [addresses[leader], *(a for i, a in sorted(addresses.items()) if i != leader)]
    return leader, ControllerClient(ordered, retry=retry)


async def note_leader(client: Any, document: dict[str, Any], step: str) -> None:
    """The leader and epoch after each step: an election during the run shows here."""
    status = await client.describe_quorum()
    document.setdefault("leaders", {})[step] = {"leader": status.leader_id, "epoch": status.leader_epoch}


async def measure_steps(quorum: Any, params: ScaleParams, document: dict[str, Any], watch: Watch) -> None:
    from raftmeta.client import RetryPolicy

    retry = RetryPolicy(deadline_s=600, attempt_timeout_s=300, probe_after_s=0)
    leader, client = await leader_first(quorum, retry)
    document["leader"] = leader
    async with client:
        watch.enter("empty image")
        probe_topic = "scale-probe"
        await create_topic(client, probe_topic, params.topic_partitions)
        empty_memory = node_memory(quorum)
        empty = await latencies(client, probe_topic, "empty", params.samples)
        document["empty_image"] = {**empty, "rss": empty_memory}
        start_records = (await client.describe_quorum()).high_watermark
        await note_leader(client, document, "empty image")
        progress("empty image measured", **empty, high_watermark=start_records)

        watch.enter("creation")
        creation = await create_all(client, quorum, leader, params, watch)
        document["creation"] = creation_figures(creation, params)
        watch.enter("after creation")
        high_watermark = await all_caught_up(client)
        await note_leader(client, document, "creation")
        memory = node_memory(quorum)
        image_partitions = creation.created_partitions + params.topic_partitions + params.samples
        document["image_partitions"] = image_partitions
        document["memory"] = memory_figures(memory, empty_memory, image_partitions)
        progress("created", **document["creation"], high_watermark=high_watermark)
        if creation.stopped is not None:
            document["stopped"] = creation.stopped
            return

    leader, client = await leader_first(quorum, retry)
    async with client:
        watch.enter("full image")
        full = await latencies(client, probe_topic, "full", params.samples)
        document["full_image"] = full
        document["describe_every_topic"] = await describe_every_topic(client, image_partitions)
        document["create_p50_vs_empty"] = round(full["create_p50_ms"] / empty["create_p50_ms"], 3)
        await note_leader(client, document, "full image")
        progress("full image measured", **full, leader=leader)

        watch.enter("snapshot")
        if params.snapshots == "final":
            snapshot = await take_snapshot(client, quorum, params)
            # The image the snapshot holds: the 1-partition creates on the full image and the fillers too.
            filler_partitions = snapshot["filler_topics"] * params.topic_partitions
            snapshot["image_partitions"] = image_partitions + params.samples + filler_partitions
            await all_caught_up(client)
            after = memory_figures(node_memory(quorum), empty_memory, snapshot["image_partitions"])
            document["memory_after_snapshot"] = after
            # The target's figure: the bigger of the two (the log is dropped, the snapshot's bytes kept).
            bigger = max(document["memory"]["bytes_per_partition"], after["bytes_per_partition"])
            document["bytes_per_partition"] = bigger
        else:
            # The nodes snapshot as the image grows: their RSS after creation includes it.
            snapshot = last_snapshots(quorum, high_watermark)
            document["bytes_per_partition"] = document["memory"]["bytes_per_partition"]
        document["snapshot"] = snapshot
        await note_leader(client, document, "snapshot")
        progress("snapshot taken", seconds=snapshot["seconds"], bytes=snapshot["bytes"])

        leader = (await client.describe_quorum()).leader_id
        followers = [n.id for n in quorum.nodes if n.id != leader]
        watch.enter("restart")
        document["restart"] = await restart_follower(client, quorum, followers[0], wipe=False)
        progress("follower restarted", seconds=document["restart"]["seconds"])
        watch.enter("wiped follower")
        document["wiped_follower"] = await restart_follower(client, quorum, followers[-1], wipe=True)
        await note_leader(client, document, "wiped follower")
        progress("wiped follower caught up", seconds=document["wiped_follower"]["seconds"])

        watch.enter("broker leaves")
        document["broker_leaves"] = await broker_leaves(client, params.leave_deadline_s)
        await note_leader(client, document, "broker leaves")
        progress("broker left", **document["broker_leaves"])


def creation_figures(creation: Creation, params: ScaleParams) -> dict[str, Any]:
    return {
        "partitions": creation.created_partitions,
        "topics": creation.created_topics,
        "seconds": round(creation.seconds, 3),
        "partitions_per_s": round(creation.created_partitions / creation.seconds, 1) if creation.seconds else 0.0,
        "pipeline": params.pipeline,
        "complete": creation.created_partitions == params.topics * params.topic_partitions,
        "peak_rss_seen": creation.peak_rss,
        "node_cpu_us_per_partition": per_partition_us(creation.node_cpu_s, creation.created_partitions),
        "leader_cpu_us_per_partition": per_partition_us(creation.leader_cpu_s, creation.created_partitions),
        "machine_busy_percent": creation.machine_busy_percent,
    }


def per_partition_us(cpu_s: float | None, partitions: int) -> float | None:
    return round(cpu_s * 1e6 / partitions, 2) if cpu_s is not None and partitions else None


def memory_figures(
    memory: dict[str, dict[str, int]], empty: dict[str, dict[str, int]], partitions: int
) -> dict[str, Any]:
    """RSS per node, its bytes per partition (all of it, and above the empty image's)."""
    biggest = max(f["rss"] for f in memory.values())
    above_empty = max(memory[n]["rss"] - empty[n]["rss"] for n in memory)
    return {
        "nodes": memory,
        "max_rss_bytes": biggest,
        "max_rss_gib": round(biggest / GIB, 3),
        "bytes_per_partition": round(biggest / partitions, 1),
        "bytes_per_partition_above_empty": round(above_empty / partitions, 1),
        # What a node would hold at 10M partitions at this marginal cost (the target's size).
        "projected_rss_gib_at_10m": round(
            (max(f["rss"] for f in empty.values()) + above_empty / partitions * 1e7) / GIB, 2
        ),
    }


def targets(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Issue 25's targets, each with what was measured and whether it was met (None: not measured)."""

    def figure(*path: str) -> float | None:
        value: Any = document
        for key in path:
            if not isinstance(value, dict) or key not in value:
                return None
            value = value[key]
        return float(value) if isinstance(value, int | float) else None

    measured = {
        "bytes_per_partition": figure("bytes_per_partition") or figure("memory", "bytes_per_partition"),
        "partitions_per_s": figure("creation", "partitions_per_s"),
        "snapshot_s": figure("snapshot", "max_s"),
        "restart_s": figure("restart", "seconds"),
        "wiped_catch_up_s": figure("wiped_follower", "seconds"),
        "describe_p50_ms": figure("full_image", "describe_p50_ms"),
        "create_p50_vs_empty": figure("create_p50_vs_empty"),
    }
    result = {}
    for name, limit in TARGETS.items():
        value = measured[name]
        at_least = name == "partitions_per_s"
        met = None if value is None else (value >= limit if at_least else value <= limit)
        result[name] = {"target": (">= " if at_least else "<= ") + f"{limit:g}", "measured": value, "met": met}
    fraction = figure("snapshot", "log_fraction")
    if fraction is not None:
        result["snapshot_s"]["note"] = f"the nodes' newest snapshot, taken by their policy: {fraction:.0%} of the log"
    return result


def run_size(params: ScaleParams, work_dir: Path) -> dict[str, Any]:
    """One size on a quorum of its own."""
    from raftmeta.local import quorum as local_quorum
    from raftmeta.server.app import run

    progress("starting quorum", partitions=params.partitions, brokers=params.brokers, racks=params.racks)
    interval = ["--snapshot-interval-records", str(params.records_before_snapshot())]
    quorum = local_quorum.up(
        work_dir,
        nodes=3,
        brokers=params.brokers,
        racks=params.racks,
        node_args=interval if params.snapshots == "final" else [],
        fleet_args=["--isr-check-interval-ms", str(FLEET_ISR_CHECK_INTERVAL_MS)],
        timeout_s=120.0,
    )
    try:
        document = run(measure(quorum, params))
    finally:
        local_quorum.down(quorum, timeout_s=60.0)
    document = {"partitions": params.partitions, **document}
    document["targets"] = targets(document)
    return document


def run_benchmark(params: ScaleParams, work_dir: Path, growth: float | None) -> dict[str, Any]:
    from dataclasses import replace

    from raftmeta.server.app import event_loop_name

    load_before = os.getloadavg()
    curve = []
    if growth is not None:
        smaller = max(
            params.topic_partitions,
            round(params.partitions * growth / params.topic_partitions) * params.topic_partitions,
        )
        curve.append(run_size(replace(params, partitions=smaller), work_dir / f"quorum-{smaller}"))
    document = run_size(params, work_dir / f"quorum-{params.partitions}")
    return {
        "benchmark": "scale",
        **document,
        "growth": curve,
        "params": {
            "partitions": params.partitions,
            "topic_partitions": params.topic_partitions,
            "replication_factor": REPLICATION_FACTOR,
            "brokers": params.brokers,
            "racks": params.racks,
            "pipeline": params.pipeline,
            "samples": params.samples,
            "snapshots": params.snapshots,
            "snapshot_interval_records": params.records_before_snapshot() if params.snapshots == "final" else None,
        },
        "event_loop": event_loop_name(),
        "load_average": {"before": [round(x, 2) for x in load_before], "after": [round(x, 2) for x in os.getloadavg()]},
        "machine": machine(),
    }


def summary_lines(document: dict[str, Any]) -> list[str]:
    if "creation" not in document or "memory" not in document:
        return [f"stopped: {document.get('stopped')}"]
    creation, memory = document["creation"], document["memory"]
    lines = [
        f"{creation['partitions']:,} partitions in {creation['seconds']} s: {creation['partitions_per_s']:,} "
        f"partitions/s; max node RSS {memory['max_rss_gib']} GiB ({memory['bytes_per_partition']} bytes/partition)"
    ]
    if "stopped" in document:
        lines.append(f"stopped: {document['stopped']}")
    if "wiped_follower" not in document:
        return lines
    snapshot, full, empty = document["snapshot"], document["full_image"], document["empty_image"]
    lines += [
        f"snapshot: {snapshot['max_s']} s (slowest node), {max(snapshot['bytes'].values()):,} bytes",
        f"restart: {document['restart']['seconds']} s; wiped follower: {document['wiped_follower']['seconds']} s",
        f"describe p50 {full['describe_p50_ms']} ms (empty {empty['describe_p50_ms']}); a page of every topic "
        f"p50 {full['describe_every_topic_page_p50_ms']} ms (empty {empty['describe_every_topic_page_p50_ms']}); "
        f"create p50 {full['create_p50_ms']} ms (empty {empty['create_p50_ms']}, x{document['create_p50_vs_empty']})",
        f"every topic described in {document['describe_every_topic']['seconds']} s "
        f"({document['describe_every_topic']['pages']} pages)",
    ]
    leaves = document.get("broker_leaves")
    if leaves is not None:
        lines.append(
            f"broker {leaves['broker']} unregistered in {leaves['seconds']} s "
            f"({leaves['records_committed']:,} records, {leaves['elections']} elections"
            + (f"; {leaves['error']}" if leaves["error"] else "")
            + ")"
        )
    lines += [f"target {name} {t['target']}: {t['measured']} -> {t['met']}" for name, t in document["targets"].items()]
    return lines


@click.command()
@click.option(
    "--partitions",
    type=click.IntRange(min=1),
    required=True,
    help="Partitions to create (rounded down to whole topics).",
)
@click.option(
    "--topic-partitions", type=click.IntRange(1, 100_000), default=1000, show_default=True, help="Partitions per topic."
)
@click.option(
    "--brokers", type=click.IntRange(min=REPLICATION_FACTOR), default=100, show_default=True, help="Simulated brokers."
)
@click.option("--racks", type=click.IntRange(min=0), default=5, show_default=True)
@click.option(
    "--pipeline", type=click.IntRange(1, 64), default=4, show_default=True, help="Creates in flight (one client)."
)
@click.option("--samples", type=click.IntRange(1, 10_000), default=100, show_default=True, help="Calls per p50.")
@click.option("--growth", type=click.FloatRange(0.0, 1.0, min_open=True, max_open=True), default=None,
              help="Also measure at this fraction of --partitions first (e.g. 0.1), on its own quorum.")  # fmt: skip
@click.option("--max-node-rss-mib", type=click.IntRange(min=64), default=5120, show_default=True,
              help="Stop creating (and report how far it got) once a node's RSS passes this.")  # fmt: skip
@click.option("--snapshots", type=click.Choice(["final", "node"]), default="final", show_default=True,
              help="final: no snapshot while the image grows, then one of all of it; node: the nodes' own "
              "policy while it grows (the newest is reported).")  # fmt: skip
@click.option("--create-budget-s", type=click.FloatRange(min=1), default=None,
              help="Stop creating (and report how far it got) after this long.")  # fmt: skip
@click.option("--leave-deadline-s", type=click.FloatRange(min=1), default=60.0, show_default=True,
              help="Deadline of the last step's UnregisterBroker.")  # fmt: skip
@click.option("--target", type=click.Choice(["raftmeta", "kraft", "both"]), default="raftmeta", show_default=True,
              help="raftmeta: the steps above over gRPC; kraft|both: the scale rows over the Kafka protocol on a "
              "real KRaft quorum, raftmeta or both in one run (raftmeta/bench/kafka_scale.py).")  # fmt: skip
@click.option("--kraft-heap-mb", type=click.IntRange(min=256), default=4096, show_default=True,
              help="-Xmx of KRaft's controllers and broker (--target kraft|both).")  # fmt: skip
@click.option("--kraft-snapshot-interval-ms", type=click.IntRange(min=1000), default=60_000, show_default=True,
              help="KRaft's metadata.log.max.snapshot.interval.ms for the run (--target kraft|both): how soon "
              "after the creation its controllers snapshot the rest of the image.")  # fmt: skip
@work_dir_option
@result_file_option
@output_option
def command(
    partitions: int,
    topic_partitions: int,
    brokers: int,
    racks: int,
    pipeline: int,
    samples: int,
    growth: float | None,
    max_node_rss_mib: int,
    snapshots: str,
    create_budget_s: float | None,
    leave_deadline_s: float,
    target: str,
    kraft_heap_mb: int,
    kraft_snapshot_interval_ms: int,
    work_dir: Path | None,
    result_file: Path | None,
    output: str,
) -> None:
    """Create --partitions partitions from one client and measure memory, snapshot, restart,
    wiped-follower catch-up and latencies on the full image."""
    if partitions < topic_partitions:
        raise click.UsageError(f"--partitions must be at least --topic-partitions ({topic_partitions})")
    if target != "raftmeta":
        run_kafka_target(
            target,
            kafka_scale_params(
                partitions,
                topic_partitions,
                brokers,
                racks,
                pipeline,
                samples,
                max_node_rss_mib,
                create_budget_s,
                kraft_heap_mb,
                kraft_snapshot_interval_ms,
                growth,
                snapshots,
                target,
            ),
            work_dir,
            result_file,
            output,
        )
        return
    params = ScaleParams(
        partitions,
        topic_partitions=topic_partitions,
        brokers=brokers,
        racks=racks,
        pipeline=pipeline,
        samples=samples,
        max_node_rss_mib=max_node_rss_mib,
        create_budget_s=create_budget_s,
        snapshots=snapshots,
        leave_deadline_s=leave_deadline_s,
    )
    with scratch_dir(work_dir, "scale") as scratch:
        document = run_benchmark(params, scratch, growth)
    write_result(document, result_file)
    if output == "json":
        emit_json(document)
        return
    for line in summary_lines(document):
        click.echo(line)


def kafka_scale_params(
    partitions: int,
    topic_partitions: int,
    brokers: int,
    racks: int,
    pipeline: int,
    samples: int,
    max_node_rss_mib: int,
    create_budget_s: float | None,
    kraft_heap_mb: int,
    kraft_snapshot_interval_ms: int,
    growth: float | None,
    snapshots: str,
    target: str,
) -> Any:
    """The parameters of ``--target kraft|both``; a usage error naming each raftmeta-only option."""
    from raftmeta.bench.kafka_scale import KafkaScaleParams, raftmeta_only_options

    problems = raftmeta_only_options(target, growth, snapshots)
    if problems:
        raise click.UsageError("; ".join(problems))
    if racks > brokers:
        raise click.UsageError(f"--racks ({racks}) must be at most --brokers ({brokers})")
    return KafkaScaleParams(partitions, topic_partitions, brokers, racks, pipeline, samples, max_node_rss_mib,
                            create_budget_s, kraft_heap_mb, kraft_snapshot_interval_ms)  # fmt: skip


def run_kafka_target(target: str, params: Any, work_dir: Path | None, result_file: Path | None, output: str) -> None:
    from raftmeta.bench.kafka_scale import run_comparison
    from raftmeta.bench.kafka_scale import summary_lines as kafka_summary_lines

    with scratch_dir(work_dir, "scale") as scratch:
        document = run_comparison(target, params, scratch)
    write_result(document, result_file)
    if output == "json":
        emit_json(document)
        return
    for line in kafka_summary_lines(document):
        click.echo(line)
