"""``raftmeta bench scale --target kraft|both``: what a big image costs raftmeta's quorum and a
real KRaft quorum, measured in one run with the same Kafka-protocol client code.

Scale is about the controller quorum, so each side runs 3 voters and brokers that cost nothing
but their part in the quorum's work: raftmeta its simulated fleet (``--brokers`` in ``--racks``),
KRaft the same number of simulated brokers (:mod:`raftmeta.bench.kafka_brokers`: registered and
heartbeating to the active controller over the Kafka protocol, so KRaft's own placer places on
them) and ONE real broker whose metadata cache holds the image, to answer Metadata. That broker's
log directory is cordoned (``cordoned.log.dirs=*``, KIP-1066), so the controller places no replica
on it: it costs the run a JVM, not a million replica logs. Each side, one after the other (KRaft
first, while the machine is freshest for the slower side to start), from one client:

1. **creation**: a probe topic, then ``--partitions`` as topics of ``--topic-partitions`` (RF 3),
   one CreateTopics each, ``--pipeline`` workers with a connection each (one create in flight on
   each, sent again after a retriable error: :class:`Creator`) to where the metadata log's
   leader takes them (raftmeta: the leader's listener; KRaft: the active controller's listener,
   which ControllerApis serves for CREATE_TOPICS); a progress line on stderr every 10 s; stopped,
   and reported as far as it got, past ``--max-node-rss-mib``, ``--create-budget-s`` or when a
   voter dies (a JVM out of heap exits);
2. **RSS per voter** (VmRSS, VmHWM of /proc) once every voter has the whole log, with KRaft's
   ``-Xmx``;
3. **one-topic describe p50**: Metadata v12 of the probe topic, ``--samples`` calls one at a time,
   to raftmeta's leader listener and to KRaft's broker;
4. **snapshot**: raftmeta's nodes run with ``--snapshot-interval-records`` just above the
   creation's records, and filler topics cross it: one snapshot of the whole image, timed by the
   node (``raftmeta_raft_snapshot_duration_seconds``). KRaft's controllers keep Kafka's byte
   policy (a snapshot per 20 MB of records, ``metadata.log.max.record.bytes.between.snapshots``)
   with ``metadata.log.max.snapshot.interval.ms`` lowered to ``KRAFT_SNAPSHOT_INTERVAL_MS`` so the
   remainder of the image is snapshotted soon after the creation; the first snapshot at or past
   the creation's high watermark is reported, its time from the controller's own log lines
   ("Creating new KRaft snapshot file X" to "Successfully wrote X"). Size: the file's, each voter;
5. **restart**: a follower is stopped (SIGTERM) and started again: the time from its start to the
   leader's ``last_caught_up_timestamp`` for it (DescribeQuorum v2), at the high watermark;
6. **wiped follower**: the other follower's metadata log directory is deleted and it is brought
   back as each system's operator does it (``operator_steps``): raftmeta restarts it with the same
   command line; KRaft's dynamic quorum needs ``kafka-storage format --no-initial-controllers``
   (a new directory id), the controller started as an observer, then RemoveRaftVoter of the old
   directory and AddRaftVoter of the new one (what ``kafka-metadata-quorum remove-controller`` and
   ``add-controller`` send) once it has caught up. Timed from the operator's first step on the
   replaced disk (KRaft: the format; raftmeta: the start) to the leader seeing it caught up as a
   voter again (``seconds``: what the user waits for), from the process start alone
   (``from_start_s``), with the observer catch-up alone for KRaft, and
   split into phases (``phases_s``: format, start to following the leader, snapshot, log
   catch-up, readmission as a voter) from the voter's own log (:mod:`raftmeta.bench.comeback`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar, Final

import click

from raftmeta.api.addresses import parse_host_port
from raftmeta.bench.comeback import kraft_marks, phases, raftmeta_marks
from raftmeta.bench.compare import SIDES, Better, meets_target, ratios
from raftmeta.bench.kafka_ops import KafkaError, QuorumState, create_topic, describe_quorum, describe_topic
from raftmeta.bench.results import machine, median, rss_bytes
from raftmeta.bench.scale import ScaleSize
from raftmeta.kafka.connection import KafkaConnection
from raftmeta.logs import get_logger

MIB: Final = 1 << 20
GIB: Final = 1 << 30
REPLICATION_FACTOR: Final = 3
CLIENT_ID: Final = "raftmeta-bench-scale"
CALL_TIMEOUT_S: Final = 120.0
PROGRESS_INTERVAL_S: Final = 10.0
CATCH_UP_TIMEOUT_S: Final = 900.0
POLL_S: Final = 0.05
PROBE_TOPIC: Final = "scale-probe"
# KRaft's time-based snapshot interval for the run (Kafka's default is an hour): the part of the
# image the byte policy has not snapshotted yet is snapshotted this long after the last one.
KRAFT_SNAPSHOT_INTERVAL_MS: Final = 60_000
KRAFT_DEFAULT_HEAP_MB: Final = 4096
KRAFT_BROKER_SESSION_TIMEOUT_MS: Final = 60_000
# The real broker: its one log directory cordoned (KIP-1066), no replica is placed on it.
KRAFT_BROKER_CONFIG: Final = {"cordoned.log.dirs": "*"}
SNAPSHOT_CREATED = re.compile(r"^\[([0-9-]+ [0-9:,]+)\] .*Creating new KRaft snapshot file (?:snapshot )?(\S+) because")
SNAPSHOT_WRITTEN = re.compile(r"^\[([0-9-]+ [0-9:,]+)\] .*Successfully wrote (?:snapshot )?(\S+)")
LOG_TIME_FORMAT: Final = "%Y-%m-%d %H:%M:%S,%f"
log = get_logger("bench.kafka-scale")

# Figure -> which way is better for raftmeta (raftmeta's over KRaft's, same run).
SCALE_BETTER: Final[dict[str, Better]] = {
    "memory.max_rss_bytes": "lower",
    "memory.max_hwm_bytes": "lower",
    "snapshot.max_s": "lower",
    "snapshot.max_bytes": "lower",
    "restart.seconds": "lower",
    "wiped_follower.seconds": "lower",
    "describe_p50_ms": "lower",
    "creation.partitions_per_s": "higher",
}


@dataclass(frozen=True)
class KafkaScaleParams(ScaleSize):
    kraft_heap_mb: int = KRAFT_DEFAULT_HEAP_MB
    kraft_snapshot_interval_ms: int = KRAFT_SNAPSHOT_INTERVAL_MS


def progress(side: str, event: str, **fields: object) -> None:
    details = " ".join(f"{key}={value}" for key, value in fields.items())
    click.echo(f"{time.strftime('%H:%M:%S')} bench scale [{side}]: {event} {details}".rstrip(), err=True)


def raftmeta_only_options(target: str, growth: float | None, snapshots: str) -> list[str]:
    """The options ``--target kraft|both`` does not take (pure): each with why, empty when fine."""
    if target == "raftmeta":
        return []
    problems = []
    if growth is not None:
        problems.append("--growth is measured on raftmeta alone: run it with --target raftmeta")
    if snapshots != "final":
        problems.append("--snapshots node is raftmeta alone: --target kraft|both uses each side's policy above")
    return problems


# -- the two sides --------------------------------------------------------------------------------
class ScaleSide(ABC):
    """One system under the scale load: where creates and describes go, its voters, and how a
    follower is restarted, wiped and brought back."""

    name = ""
    operator_steps: ClassVar[tuple[str, ...]] = ()

    @abstractmethod
    def start(self) -> None: ...

    @abstractmethod
    def stop(self) -> None: ...

    async def ready(self) -> None:  # noqa: B027 (a hook: nothing to do unless a side needs it)
        """Anything the side needs once its processes run (KRaft: its simulated brokers)."""

    async def close(self) -> None:  # noqa: B027
        """Undo :meth:`ready`."""

    @abstractmethod
    def quorum_addresses(self) -> dict[int, str]: ...

    @abstractmethod
    def admin_address(self, leader: int) -> str: ...

    @abstractmethod
    def describe_address(self, leader: int) -> str: ...

    @abstractmethod
    def voter_pids(self) -> dict[int, int]: ...

    @abstractmethod
    def settings(self) -> dict[str, Any]:
        """What the side runs, for the document."""

    @abstractmethod
    async def snapshot(self, state: QuorumState, create: Callable[[str], Awaitable[None]]) -> dict[str, Any]: ...

    @abstractmethod
    def stop_voter(self, node_id: int) -> None: ...

    @abstractmethod
    def start_voter(self, node_id: int) -> None: ...


class RaftmetaScale(ScaleSide):
    name = "raftmeta"

    def __init__(self, work_dir: Path, params: KafkaScaleParams) -> None:
        self.work_dir = work_dir
        self.params = params
        self.quorum: Any = None
        self.interval = 0

    def start(self) -> None:
        from raftmeta.bench.scale import FLEET_ISR_CHECK_INTERVAL_MS, ScaleParams
        from raftmeta.local import quorum as local_quorum

        p = self.params
        # The bound `bench scale` computes for its own steps bounds these (fewer) too.
        self.interval = ScaleParams(
            p.partitions, p.topic_partitions, p.brokers, samples=p.samples
        ).records_before_snapshot()
        self.quorum = local_quorum.up(
            self.work_dir,
            nodes=3,
            brokers=p.brokers,
            racks=p.racks,
            kafka=True,
            node_args=["--snapshot-interval-records", str(self.interval)],
            fleet_args=["--isr-check-interval-ms", str(FLEET_ISR_CHECK_INTERVAL_MS)],
            timeout_s=120.0,
        )

    def stop(self) -> None:
        from raftmeta.local import quorum as local_quorum

        if self.quorum is not None:
            local_quorum.down(self.quorum, timeout_s=60.0)

    def quorum_addresses(self) -> dict[int, str]:
        return {n.id: n.kafka_address for n in self.quorum.nodes}

    def admin_address(self, leader: int) -> str:
        return str(self.quorum_addresses()[leader])

    def describe_address(self, leader: int) -> str:
        return self.admin_address(leader)

    def voter_pids(self) -> dict[int, int]:
        return {n.id: n.pid for n in self.quorum.nodes}

    def settings(self) -> dict[str, Any]:
        return {
            "voters": 3,
            "brokers": f"{self.params.brokers} simulated (racks {self.params.racks})",
            "snapshot_interval_records": self.interval,
            "creates_to": "the leader's Kafka listener",
            "describes_to": "the leader's Kafka listener",
        }

    async def snapshot(self, state: QuorumState, create: Callable[[str], Awaitable[None]]) -> dict[str, Any]:
        """Fillers until the interval is crossed, then the one snapshot each node takes of the whole
        image: the node's own duration (its metric), the file's size."""
        from raftmeta.bench.scale import SNAPSHOT_TIMEOUT_S, checkpoints, snapshot_seconds

        nodes = self.quorum.nodes
        before_files = {str(n.id): len(checkpoints(n.data_dir)) for n in nodes}
        if any(before_files.values()):
            raise click.ClickException(f"raftmeta took a snapshot before the image was complete ({before_files})")
        before = await snapshot_seconds(self.quorum)
        fillers = 0
        high_watermark = state.high_watermark
        while high_watermark < self.interval:
            await create(f"filler-{fillers}")
            fillers += 1
            high_watermark = (await self._leader_state()).high_watermark
        deadline = time.monotonic() + SNAPSHOT_TIMEOUT_S
        while True:
            after = await snapshot_seconds(self.quorum)
            if all(after[n][1] > before[n][1] for n in after) and all(checkpoints(n.data_dir) for n in nodes):
                break
            if time.monotonic() > deadline:
                raise click.ClickException(f"raftmeta: no snapshot on every node within {SNAPSHOT_TIMEOUT_S} s")
            await asyncio.sleep(0.1)
        seconds = {node: round(after[node][0] - before[node][0], 3) for node in after}
        sizes = {str(n.id): checkpoints(n.data_dir)[-1].stat().st_size for n in nodes}
        return {
            "seconds": seconds,
            "max_s": max(seconds.values()),
            "bytes": sizes,
            "max_bytes": max(sizes.values()),
            "file": checkpoints(nodes[0].data_dir)[-1].name,
            "filler_topics": fillers,
            "policy": f"one snapshot of the whole image: --snapshot-interval-records {self.interval}",
        }

    async def _leader_state(self) -> QuorumState:
        return await leader_state(self.quorum_addresses())

    def stop_voter(self, node_id: int) -> None:
        from raftmeta.local import quorum as local_quorum
        from raftmeta.local.quorum import terminate

        terminate([self.quorum.node(node_id).pid], 60.0)
        if local_quorum.alive(self.quorum.node(node_id).pid):
            raise click.ClickException(f"raftmeta node {node_id} did not stop")

    def start_voter(self, node_id: int) -> None:
        from raftmeta.local import quorum as local_quorum

        local_quorum.restart(self.quorum, node_id)

    def wipe(self, node_id: int) -> None:
        shutil.rmtree(self.quorum.node(node_id).data_dir)

    operator_steps: ClassVar[tuple[str, ...]] = (
        "stop the node",
        "delete its data directory (the replaced disk)",
        "start it with the same command line: --initial-controllers gives it its directory id again, "
        "it rejoins as the same voter and the leader sends it the snapshot",
    )


class KraftScale(ScaleSide):
    name = "kraft"

    def __init__(self, work_dir: Path, params: KafkaScaleParams) -> None:
        self.work_dir = work_dir
        self.params = params
        self.cluster: Any = None
        self.fleet: Any = None

    def start(self) -> None:
        from raftmeta.kraft.cluster import KraftCluster
        from raftmeta.kraft.node_config import JvmSettings

        # G1, as kafka-run-class.sh starts Kafka: a multi-GiB heap under SerialGC pauses for seconds.
        jvm = JvmSettings(heap_initial_mb=64, heap_max_mb=self.params.kraft_heap_mb, gc="UseG1GC",
                          extra=("-XX:MaxGCPauseMillis=20",))  # fmt: skip
        self.cluster = KraftCluster.start(
            self.work_dir,
            controllers=3,
            brokers=1,
            racks=1,
            broker_config=KRAFT_BROKER_CONFIG,
            controller_config=self.controller_config(),
            jvm=jvm,
        )

    def controller_config(self) -> dict[str, str]:
        return {
            "metadata.log.max.snapshot.interval.ms": str(self.params.kraft_snapshot_interval_ms),
            # Kafka's default is 9 s: on this shared 2-core machine the active controller's event
            # queue held the simulated brokers' heartbeats longer than that during 1000-partition
            # creates and fenced the whole fleet (then placement fails); the run measures the
            # image, not fencing.
            "broker.session.timeout.ms": str(KRAFT_BROKER_SESSION_TIMEOUT_MS),
        }

    async def ready(self) -> None:
        from raftmeta.bench.kafka_brokers import BrokerFleet, SimulatedBroker
        from raftmeta.local.fleet import rack_name

        # Ids 1..B: the real broker is 0. Racks as raftmeta's fleet names them.
        brokers = [
            SimulatedBroker(i, rack_name((i - 1) % self.params.racks) if self.params.racks else None)
            for i in range(1, self.params.brokers + 1)
        ]
        self.fleet = BrokerFleet(self.cluster.cluster_id, brokers)
        leader = (await leader_state(self.quorum_addresses())).leader_id
        await self.fleet.start(self.quorum_addresses()[leader])

    async def close(self) -> None:
        if self.fleet is not None:
            await self.fleet.close()

    def stop(self) -> None:
        if self.cluster is not None:
            self.cluster.stop()

    def quorum_addresses(self) -> dict[int, str]:
        return {n.node_id: n.address for n in self.cluster.controllers}

    def admin_address(self, leader: int) -> str:
        return str(self.quorum_addresses()[leader])

    def describe_address(self, leader: int) -> str:
        return str(self.cluster.brokers[0].address)

    def voter_pids(self) -> dict[int, int]:
        return {n.node_id: n.pid for n in self.cluster.controllers}

    def settings(self) -> dict[str, Any]:
        from raftmeta.kraft.classpath import kafka_version

        return {
            "kafka_version": kafka_version(),
            "voters": 3,
            "controller_heap": f"-Xms64m -Xmx{self.params.kraft_heap_mb}m, G1",
            "brokers": f"{self.params.brokers} simulated (racks {self.params.racks}), registered and heartbeating "
            "over the Kafka protocol; 1 real broker (cordoned.log.dirs=*: no replica placed on it) for Metadata",
            "controller_config": self.controller_config(),
            "creates_to": "the active controller's listener",
            "describes_to": "the real broker",
            "broker_rss": rss_bytes(self.cluster.brokers[0].pid),
        }

    def log_dir(self, node_id: int) -> Path:
        return Path(self.cluster.log_dirs()[node_id])

    async def snapshot(self, state: QuorumState, create: Callable[[str], Awaitable[None]]) -> dict[str, Any]:
        """The first snapshot each controller writes at or past ``state``'s high watermark (the
        whole image), by Kafka's policy: its time from the controller's log, its file's size."""
        from raftmeta.bench.scale import SNAPSHOT_TIMEOUT_S

        wanted = state.high_watermark
        deadline = time.monotonic() + SNAPSHOT_TIMEOUT_S
        found: dict[int, dict[str, Any]] = {}
        while len(found) < len(self.cluster.controllers):
            for controller in self.cluster.controllers:
                if controller.node_id not in found:
                    taken = kraft_snapshot(controller.log, self.log_dir(controller.node_id), wanted)
                    if taken is not None:
                        found[controller.node_id] = taken
            if time.monotonic() > deadline:
                raise click.ClickException(
                    f"kraft: no snapshot at or past offset {wanted} on every controller within {SNAPSHOT_TIMEOUT_S} s"
                )
            await asyncio.sleep(0.5)
        seconds = {str(node): taken["seconds"] for node, taken in found.items()}
        sizes = {str(node): taken["bytes"] for node, taken in found.items()}
        earlier = {str(node): taken["earlier_snapshots"] for node, taken in found.items()}
        return {
            "seconds": seconds,
            "max_s": max(seconds.values()),
            "bytes": sizes,
            "max_bytes": max(sizes.values()),
            "file": next(iter(found.values()))["file"],
            "earlier_snapshots": earlier,
            "policy": "Kafka's: every 20 MB of records, and "
            f"metadata.log.max.snapshot.interval.ms={self.params.kraft_snapshot_interval_ms}",
        }

    def stop_voter(self, node_id: int) -> None:
        self.cluster.stop_node(node_id)

    def start_voter(self, node_id: int) -> None:
        self.cluster.start_node(node_id)

    operator_steps: ClassVar[tuple[str, ...]] = (
        "stop the controller",
        "delete its metadata log directory (the replaced disk)",
        "kafka-storage format --cluster-id C --config controller.properties --no-initial-controllers "
        "(a new directory id)",
        "start it: it joins as an observer and fetches the snapshot and the log",
        "once it has caught up (kafka-metadata-quorum describe --replication): kafka-metadata-quorum "
        "remove-controller --controller-id N --controller-directory-id OLD",
        "kafka-metadata-quorum --command-config controller.properties add-controller",
    )


def kraft_snapshot(server_log: Path, log_dir: Path, wanted: int) -> dict[str, Any] | None:
    """The first snapshot a KRaft controller finished writing whose end offset is at least
    ``wanted``: its file, bytes, generation seconds (its log's "Creating new KRaft snapshot file"
    to "Successfully wrote" lines) and how many it wrote before; None until there is one."""
    if not server_log.exists():
        return None
    created: dict[str, datetime] = {}
    earlier = 0
    with open(server_log, encoding="utf-8", errors="replace") as lines:
        for line in lines:
            start = SNAPSHOT_CREATED.match(line)
            if start is not None:
                created[start.group(2)] = datetime.strptime(start.group(1), LOG_TIME_FORMAT)
                continue
            done = SNAPSHOT_WRITTEN.match(line)
            if done is None or done.group(2) not in created:
                continue
            name = done.group(2)
            offset = snapshot_end_offset(name)
            if offset is None or offset < wanted:
                earlier += 1
                continue
            path = log_dir / f"{name}.checkpoint"
            if not path.exists():
                return None
            seconds = (datetime.strptime(done.group(1), LOG_TIME_FORMAT) - created[name]).total_seconds()
            return {"file": path.name, "bytes": path.stat().st_size, "seconds": round(seconds, 3),
                    "earlier_snapshots": earlier}  # fmt: skip
    return None


def snapshot_end_offset(name: str) -> int | None:
    """A KRaft snapshot's end offset from its name, ``<offset>-<epoch>`` (zero-padded)."""
    match = re.fullmatch(r"(\d{20})-(\d{10})", name)
    return int(match.group(1)) if match else None


# -- the quorum's state over the Kafka protocol ---------------------------------------------------
async def leader_state(addresses: dict[int, str]) -> QuorumState:
    """DescribeQuorum from the leader (KRaft's followers refuse it; raftmeta's answer from their
    view, so the leader they name is asked)."""
    problems = []
    for node_id, address in addresses.items():
        try:
            state = await describe_at(address)
            if state.leader_id != node_id and state.leader_id in addresses:
                state = await describe_at(addresses[state.leader_id])
            if state.leader_id in addresses:
                return state
        except (OSError, TimeoutError, KafkaError) as exc:
            problems.append(f"{node_id}: {exc}")
    raise ConnectionError(f"no voter answered as the leader ({'; '.join(problems) or 'none'})")


async def describe_at(address: str) -> QuorumState:
    connection = await KafkaConnection.open(address, CLIENT_ID, 5.0)
    try:
        return await describe_quorum(connection, 10.0)
    finally:
        await connection.close()


async def all_caught_up(addresses: dict[int, str]) -> QuorumState:
    deadline = time.monotonic() + CATCH_UP_TIMEOUT_S
    while time.monotonic() < deadline:
        with contextlib.suppress(ConnectionError):
            state = await leader_state(addresses)
            if all(v.log_end_offset >= state.high_watermark for v in state.voters):
                return state
        await asyncio.sleep(0.2)
    raise click.ClickException(f"the voters did not reach the high watermark within {CATCH_UP_TIMEOUT_S} s")


async def caught_up_since(
    addresses: dict[int, str], node_id: int, started_ms: int, *, observer: bool = False
) -> tuple[float, QuorumState]:
    """Seconds from ``started_ms`` to the leader's ``last_caught_up_timestamp`` of ``node_id`` (as
    a voter, or an observer), once that is after the start and its log end is at the high
    watermark: the leader's own clock, not this poll's."""
    deadline = time.monotonic() + CATCH_UP_TIMEOUT_S
    while time.monotonic() < deadline:
        with contextlib.suppress(ConnectionError):
            state = await leader_state(addresses)
            for replica in state.observers if observer else state.voters:
                if (
                    replica.replica_id == node_id
                    and replica.last_caught_up_timestamp >= started_ms
                    and replica.log_end_offset >= state.high_watermark
                ):
                    return (replica.last_caught_up_timestamp - started_ms) / 1000, state
        await asyncio.sleep(POLL_S)
    role = "observer" if observer else "voter"
    raise click.ClickException(f"{role} {node_id} did not catch up within {CATCH_UP_TIMEOUT_S} s of its start")


# -- the steps ------------------------------------------------------------------------------------
# Errors after which a create is sent again (to the leader of now): the request may not have been
# applied (a timeout, a leader that lost its leadership). Kafka's AdminClient retries these too.
REQUEST_TIMED_OUT: Final = 7
RETRIABLE: Final = frozenset({REQUEST_TIMED_OUT, 41})  # and NOT_CONTROLLER
TOPIC_ALREADY_EXISTS: Final = 36
CREATE_ATTEMPTS: Final = 5


class Creator:
    """Creates over one connection to where the leader takes them, sent again after a retriable
    error or a broken connection (to the leader found then); TOPIC_ALREADY_EXISTS on a retry means
    the first attempt was applied. ``retries`` counts the attempts sent again."""

    def __init__(self, side: ScaleSide) -> None:
        self.side = side
        self.connection: KafkaConnection | None = None
        self.retries = 0

    async def create(self, name: str, partitions: int) -> None:
        for attempt in range(1, CREATE_ATTEMPTS + 1):
            try:
                if self.connection is None or self.connection.broken:
                    leader = (await leader_state(self.side.quorum_addresses())).leader_id
                    self.connection = await KafkaConnection.open(self.side.admin_address(leader), CLIENT_ID, 10.0)
                await create_topic(self.connection, name, partitions, REPLICATION_FACTOR, CALL_TIMEOUT_S)
                return
            except KafkaError as exc:
                if attempt > 1 and exc.code == TOPIC_ALREADY_EXISTS:
                    return
                if exc.code not in RETRIABLE or attempt == CREATE_ATTEMPTS:
                    raise
                await self._reconnect()
            except (OSError, TimeoutError):
                if attempt == CREATE_ATTEMPTS:
                    raise
                await self._reconnect()
            self.retries += 1
            log.warning("create sent again", side=self.side.name, topic=name, attempt=attempt + 1)

    async def _reconnect(self) -> None:
        await self.close()
        await asyncio.sleep(0.5)

    async def close(self) -> None:
        if self.connection is not None:
            await self.connection.close()
            self.connection = None


@dataclass
class Creation:
    partitions: int = 0
    topics: int = 0
    seconds: float = 0.0
    stopped: str | None = None
    peak_rss: dict[str, int] = field(default_factory=dict)


def voter_memory(side: ScaleSide) -> dict[str, dict[str, int]]:
    return {str(node): rss_bytes(pid) for node, pid in side.voter_pids().items()}


def memory_figures(side: ScaleSide) -> dict[str, Any]:
    memory = voter_memory(side)
    return {
        "voters": memory,
        "max_rss_bytes": max(f["rss"] for f in memory.values()),
        "max_hwm_bytes": max(f["hwm"] for f in memory.values()),
        "max_rss_gib": round(max(f["rss"] for f in memory.values()) / GIB, 3),
    }


async def create_all(side: ScaleSide, params: KafkaScaleParams) -> Creation:
    """``params.topics`` topics, ``params.pipeline`` workers each with its own connection to where
    the leader takes creates, one create in flight each; until done or stopped (a stop reason)."""
    from raftmeta.local.quorum import alive

    outcome = Creation()
    names = iter(range(params.topics))
    stop = asyncio.Event()
    limit = params.max_node_rss_mib * MIB
    started = time.perf_counter()

    async def worker() -> None:
        creator = Creator(side)
        try:
            for index in names:
                if stop.is_set():
                    return
                try:
                    await creator.create(f"scale-{index}", params.topic_partitions)
                except (KafkaError, OSError, TimeoutError) as exc:
                    outcome.stopped = outcome.stopped or f"a create failed: {exc}"
                    stop.set()
                    return
                outcome.topics += 1
                outcome.partitions += params.topic_partitions
        finally:
            await creator.close()

    async def watch() -> None:
        last = time.perf_counter()
        while not stop.is_set():
            await asyncio.sleep(1.0)
            memory = voter_memory(side)
            for node, figures in memory.items():
                outcome.peak_rss[node] = max(outcome.peak_rss.get(node, 0), figures["rss"])
            dead = [node for node, pid in side.voter_pids().items() if not alive(pid)]
            elapsed = time.perf_counter() - started
            if dead:
                outcome.stopped = f"voter(s) {dead} exited during the creation (see their logs)"
            elif max(f["rss"] for f in memory.values()) > limit:
                outcome.stopped = f"a voter's RSS passed --max-node-rss-mib {params.max_node_rss_mib}"
            elif params.create_budget_s is not None and elapsed > params.create_budget_s:
                outcome.stopped = f"--create-budget-s {params.create_budget_s:g} s passed"
            if outcome.stopped is not None:
                progress(side.name, "stopping", reason=outcome.stopped, partitions=outcome.partitions)
                stop.set()
            elif time.perf_counter() - last >= PROGRESS_INTERVAL_S:
                last = time.perf_counter()
                progress(side.name, "creating", partitions=outcome.partitions, of=params.partitions,
                         per_s=round(outcome.partitions / elapsed),
                         voter_rss_mib={n: f["rss"] // MIB for n, f in memory.items()})  # fmt: skip

    watcher = asyncio.create_task(watch())
    try:
        await asyncio.gather(*(worker() for _ in range(params.pipeline)))
    finally:
        outcome.seconds = time.perf_counter() - started
        stop.set()
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
    return outcome


async def describe_p50_ms(address: str, topic: str, partitions: int, samples: int) -> float:
    """p50 of ``samples`` Metadata calls of one topic, one at a time, once the answer has the
    topic whole (a broker's image may trail the controller by a moment)."""
    connection = await KafkaConnection.open(address, CLIENT_ID, 10.0)
    try:
        deadline = time.monotonic() + CATCH_UP_TIMEOUT_S
        while True:
            with contextlib.suppress(KafkaError):
                if await describe_topic(connection, topic, CALL_TIMEOUT_S) == partitions:
                    break
            if time.monotonic() > deadline:
                raise click.ClickException(f"{address} does not describe {topic} whole")
            await asyncio.sleep(0.2)
        latencies = []
        for _ in range(samples):
            began = time.perf_counter()
            answered = await describe_topic(connection, topic, CALL_TIMEOUT_S)
            latencies.append(time.perf_counter() - began)
            if answered != partitions:
                raise click.ClickException(f"Metadata of {topic} answered {answered} partitions, not {partitions}")
        return round(median(latencies) * 1000, 3)
    finally:
        await connection.close()


async def restart_voter(side: ScaleSide, node_id: int) -> dict[str, Any]:
    await asyncio.to_thread(side.stop_voter, node_id)
    started_ms = int(time.time() * 1000)
    await asyncio.to_thread(side.start_voter, node_id)
    seconds, _ = await caught_up_since(side.quorum_addresses(), node_id, started_ms)
    return {"node": node_id, "seconds": round(seconds, 3), "rss": rss_bytes(side.voter_pids()[node_id])}


async def wipe_voter(side: ScaleSide, node_id: int) -> dict[str, Any]:
    await asyncio.to_thread(side.stop_voter, node_id)
    if isinstance(side, RaftmetaScale):
        side.wipe(node_id)
        started_ms = int(time.time() * 1000)
        await asyncio.to_thread(side.start_voter, node_id)
        seconds, _ = await caught_up_since(side.quorum_addresses(), node_id, started_ms)
        # No operator step comes before the start: from the wiped disk is from the start.
        result: dict[str, Any] = {"node": node_id, "seconds": round(seconds, 3), "from_start_s": round(seconds, 3)}
        # Its voter never left the voter set: caught up is caught up as a voter.
        marks = raftmeta_marks(Path(side.quorum.node(node_id).log), started_ms / 1000)
        result.update(phases(started_ms / 1000, marks, seconds, seconds))
    else:
        assert isinstance(side, KraftScale)
        result = await wiped_kraft_voter(side, node_id)
    result["operator_steps"] = list(side.operator_steps)
    result["rss"] = rss_bytes(side.voter_pids()[node_id])
    return result


async def wiped_kraft_voter(side: KraftScale, node_id: int) -> dict[str, Any]:
    """The stopped controller's log directory deleted and formatted anew (a new directory id), the
    controller started as an observer, then the old voter removed and the new one added."""
    from raftmeta.kraft.storage_tool import FormatJob, format_all
    from raftmeta.storage.meta_properties import read_meta_properties

    cluster = side.cluster
    node = cluster.node(node_id)
    addresses = side.quorum_addresses()
    state = await leader_state(addresses)
    old_directory = next(v.directory_id for v in state.voters if v.replica_id == node_id)
    data = Path(node.node_dir) / "data"
    shutil.rmtree(data)
    procedure_ms = int(time.time() * 1000)  # the operator's first step on the replaced disk
    formatting = time.monotonic()
    await asyncio.to_thread(
        format_all, cluster.cluster_id, [FormatJob(node_id, Path(node.node_dir) / "server.properties", None)]
    )
    format_s = time.monotonic() - formatting
    identity = read_meta_properties(data)
    if identity is None or not identity.directory_id:
        raise click.ClickException(f"kafka-storage format left no directory id in {data}")
    new_directory = uuid.UUID(bytes=identity.directory_id)
    started_ms = int(time.time() * 1000)
    await asyncio.to_thread(side.start_voter, node_id)
    observer_s, state = await caught_up_since(addresses, node_id, started_ms, observer=True)
    leader = addresses[state.leader_id]
    host, port = parse_host_port(node.address, f"controller {node_id}'s address")
    connection = await KafkaConnection.open(leader, CLIENT_ID, 10.0)
    try:
        removed = await connection.call(81, 0, {"cluster_id": cluster.cluster_id, "voter_id": node_id,
                                                "voter_directory_id": old_directory}, CALL_TIMEOUT_S)  # fmt: skip
        if removed.error_code.value != 0:
            raise KafkaError(removed.error_code.value, removed.error_code.name, removed.error_message)
        add_attempts = await add_voter_when_ready(connection, {
            "cluster_id": cluster.cluster_id, "timeout": 60_000, "voter_id": node_id,
            "voter_directory_id": new_directory,
            "listeners": [{"name": "CONTROLLER", "host": host, "port": port}]})  # fmt: skip
    finally:
        await connection.close()
    seconds, _ = await caught_up_since(addresses, node_id, started_ms)
    marks = kraft_marks(node.log, started_ms / 1000)
    return {
        "node": node_id,
        "seconds": round(seconds + (started_ms - procedure_ms) / 1000, 3),
        "from_start_s": round(seconds, 3),
        **phases(started_ms / 1000, marks, observer_s, seconds, format_s),
        "observer_caught_up_s": round(observer_s, 3),
        "format_s": round(format_s, 3),
        "add_voter_attempts": add_attempts,
        "old_directory_id": str(old_directory),
        "new_directory_id": str(new_directory),
    }


# KRaft's leader answers AddRaftVoter with REQUEST_TIMED_OUT ("New voter ... is not ready to
# receive requests") while its connection to the new voter's listener is still being made (it asks
# the new voter for ApiVersions first); an operator running ``add-controller`` runs it again, so
# does the bench, for as long as this.
ADD_VOTER_READY_S: Final = 60.0


async def add_voter_when_ready(connection: KafkaConnection, request: dict[str, Any]) -> int:
    """AddRaftVoter, sent again while KRaft's leader says the new voter is not ready yet; the
    number of attempts it took."""
    deadline = time.monotonic() + ADD_VOTER_READY_S
    attempts = 0
    while True:
        attempts += 1
        added = await connection.call(80, 0, request, CALL_TIMEOUT_S)
        code = added.error_code.value
        if code == 0:
            return attempts
        if code != REQUEST_TIMED_OUT or time.monotonic() > deadline:
            raise KafkaError(code, added.error_code.name, added.error_message)
        log.info("add voter sent again", attempt=attempts + 1, reason=added.error_message)
        await asyncio.sleep(1.0)


async def measure_side(side: ScaleSide, params: KafkaScaleParams) -> dict[str, Any]:
    """Every step on a started side; the document of its figures (as far as it got)."""
    document: dict[str, Any] = {}
    await side.ready()
    try:
        state = await leader_state(side.quorum_addresses())
        leader = state.leader_id
        connection = await KafkaConnection.open(side.admin_address(leader), CLIENT_ID, 10.0)
        try:
            await create_topic(connection, PROBE_TOPIC, params.topic_partitions, REPLICATION_FACTOR, CALL_TIMEOUT_S)
            document["empty_memory"] = memory_figures(side)
            progress(side.name, "creating", partitions=params.partitions, leader=leader)
            creation = await create_all(side, params)
            document["creation"] = {
                "partitions": creation.partitions,
                "topics": creation.topics,
                "seconds": round(creation.seconds, 3),
                "partitions_per_s": round(creation.partitions / creation.seconds, 1) if creation.seconds else 0.0,
                "complete": creation.partitions == params.topics * params.topic_partitions,
                "peak_rss": creation.peak_rss,
            }
            progress(side.name, "created", **{k: v for k, v in document["creation"].items() if k != "peak_rss"})
            if creation.stopped is not None:
                document["stopped"] = creation.stopped
                document["memory"] = memory_figures(side)
                return document
            state = await all_caught_up(side.quorum_addresses())
            document["image_partitions"] = creation.partitions + params.topic_partitions
            document["memory"] = memory_figures(side)
            progress(
                side.name, "memory", max_rss_gib=document["memory"]["max_rss_gib"], high_watermark=state.high_watermark
            )
            document["describe_p50_ms"] = await describe_p50_ms(
                side.describe_address(state.leader_id), PROBE_TOPIC, params.topic_partitions, params.samples
            )
            progress(side.name, "described", p50_ms=document["describe_p50_ms"])

            async def filler(name: str) -> None:
                await create_topic(connection, name, params.topic_partitions, REPLICATION_FACTOR, CALL_TIMEOUT_S)

            document["snapshot"] = await side.snapshot(state, filler)
            progress(
                side.name, "snapshot", seconds=document["snapshot"]["max_s"], bytes=document["snapshot"]["max_bytes"]
            )
            # Again once the image is in a snapshot (raftmeta freezes its heap then): a diagnostic.
            document["describe_after_snapshot_p50_ms"] = await describe_p50_ms(
                side.describe_address(state.leader_id), PROBE_TOPIC, params.topic_partitions, params.samples
            )
        finally:
            await connection.close()
        await all_caught_up(side.quorum_addresses())
        document["memory_after_snapshot"] = memory_figures(side)
        leader = (await leader_state(side.quorum_addresses())).leader_id
        followers = sorted(node for node in side.voter_pids() if node != leader)
        document["restart"] = await restart_voter(side, followers[0])
        progress(side.name, "follower restarted", seconds=document["restart"]["seconds"])
        document["wiped_follower"] = await wipe_voter(side, followers[-1])
        progress(side.name, "wiped follower caught up", seconds=document["wiped_follower"]["seconds"])
        final = await leader_state(side.quorum_addresses())
        document["leader"] = {"before": leader, "after": final.leader_id, "epoch": final.leader_epoch}
    finally:
        await side.close()
    return document


def run_side(side: ScaleSide, params: KafkaScaleParams) -> dict[str, Any]:
    from raftmeta.server.app import run

    started = time.monotonic()
    progress(side.name, "starting")
    try:
        side.start()
        startup_s = round(time.monotonic() - started, 1)
        document = run(measure_side(side, params))
        return {"settings": side.settings(), "startup_s": startup_s, **document}
    finally:
        side.stop()


def make_scale_side(name: str, work_dir: Path, params: KafkaScaleParams) -> ScaleSide:
    if name == "raftmeta":
        return RaftmetaScale(work_dir, params)
    if name == "kraft":
        return KraftScale(work_dir, params)
    raise ValueError(f"side must be raftmeta or kraft, got {name!r}")


def assemble(target: str, per_side: dict[str, dict[str, Any]], params: KafkaScaleParams) -> dict[str, Any]:
    """The document (pure but for the load average and machine added by the caller): each side
    under its name, and with both, the ratio of every row (raftmeta's over KRaft's), which way
    is good and whether raftmeta meets it."""
    document: dict[str, Any] = {
        "benchmark": "scale",
        "target": target,
        "protocol": "kafka",
        "partitions": params.partitions,
        "params": {
            "partitions": params.partitions,
            "topic_partitions": params.topic_partitions,
            "replication_factor": REPLICATION_FACTOR,
            "brokers": params.brokers,
            "racks": params.racks,
            "pipeline": params.pipeline,
            "samples": params.samples,
            "max_node_rss_mib": params.max_node_rss_mib,
            "kraft_heap_mb": params.kraft_heap_mb,
        },
    }
    for name in SIDES:
        if name in per_side:
            document[name] = per_side[name]
    if all(name in per_side for name in SIDES):
        ratio = ratios(per_side["raftmeta"], per_side["kraft"], SCALE_BETTER)
        stopped = {name: per_side[name]["stopped"] for name in SIDES if "stopped" in per_side[name]}
        if stopped:
            # The two images differ in size: no row compares like with like.
            ratio = dict.fromkeys(ratio)
            document["ratio_withheld"] = f"a side stopped before its image was whole: {stopped}"
        document["ratio"] = ratio
        document["ratio_better"] = dict(SCALE_BETTER)
        document["meets_target"] = meets_target(ratio, SCALE_BETTER)
    return document


def run_comparison(target: str, params: KafkaScaleParams, work_dir: Path) -> dict[str, Any]:
    """``--target kraft|both``: KRaft first, then raftmeta, each on fresh processes."""
    load_before = os.getloadavg()
    names = ("kraft", "raftmeta") if target == "both" else (target,)
    per_side: dict[str, dict[str, Any]] = {}
    for name in names:
        per_side[name] = run_side(make_scale_side(name, work_dir / name, params), params)
    document = assemble(target, per_side, params)
    document["order"] = list(names)
    document["load_average"] = {"before": [round(x, 2) for x in load_before],
                                "after": [round(x, 2) for x in os.getloadavg()]}  # fmt: skip
    document["machine"] = machine()
    return document


def summary_lines(document: dict[str, Any]) -> list[str]:
    lines = []
    for name in SIDES:
        side = document.get(name)
        if side is None:
            continue
        creation = side.get("creation", {})
        lines.append(
            f"{name}: {creation.get('partitions', 0):,} partitions at {creation.get('partitions_per_s')}/s; "
            f"max voter RSS {side.get('memory', {}).get('max_rss_gib')} GiB"
            + (f"; stopped: {side['stopped']}" if "stopped" in side else "")
        )
        if "wiped_follower" in side:
            lines.append(
                f"  describe p50 {side['describe_p50_ms']} ms; snapshot {side['snapshot']['max_s']} s, "
                f"{side['snapshot']['max_bytes']:,} bytes; restart {side['restart']['seconds']} s; "
                f"wiped follower {side['wiped_follower']['seconds']} s"
            )
            wiped_phases = side["wiped_follower"].get("phases_s", {})
            lines.append("  wiped follower phases: " + ", ".join(f"{k} {v} s" for k, v in wiped_phases.items()))
    for path, value in document.get("ratio", {}).items():
        lines.append(f"ratio {path}: {value} (good when {document['ratio_better'][path]})")
    return lines
