"""A real Apache Kafka KRaft cluster on loopback: controllers and brokers as JVM processes.

``KraftCluster.start`` formats each node's storage with Kafka's own storage tool (one cluster id,
the controllers as the initial voters of a dynamic quorum) and starts ``kafka.Kafka`` once per
node, controllers (ids 3001..) and brokers (ids 0..B-1, racks as raftmeta's simulated fleet names
them) in isolated mode, each in its own folder under ``data_dir``:

    data_dir/kraft.json                    the cluster, for `raftmeta kraft down|status` and others
    data_dir/controller-3001/server.properties, log4j2.properties
    data_dir/controller-3001/server.log    the node's own log (log4j2)
    data_dir/controller-3001/console.log   the JVM's stdout and stderr (start-up failures land here)
    data_dir/controller-3001/data/         its log.dirs (the metadata log in __cluster_metadata-0)

Processes start in sessions of their own, so they outlive the command that started them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from raftmeta.kraft.classpath import java_executable, kafka_classpath
from raftmeta.kraft.node_config import (
    HOST,
    JvmSettings,
    Role,
    broker_properties,
    controller_id,
    controller_properties,
    jvm_argv,
    log4j2_properties,
    render_properties,
)
from raftmeta.kraft.probe import ProbeError, QuorumView, describe_quorum, unfenced_brokers
from raftmeta.kraft.storage_tool import FormatJob, format_all, random_uuid
from raftmeta.local.fleet import rack_name
from raftmeta.local.quorum import alive, free_ports, spawn, terminate
from raftmeta.logs import get_logger
from raftmeta.raft.voters import format_directory_id
from raftmeta.storage.meta_properties import new_directory_id

CLUSTER_FILE: Final = "kraft.json"
SERVER_LOG: Final = "server.log"
CONSOLE_LOG: Final = "console.log"
METADATA_PARTITION: Final = "__cluster_metadata-0"
# A JVM on a loaded two-core machine can take tens of seconds to load Kafka and join the quorum.
DEFAULT_READY_TIMEOUT_S: Final = 180.0
# SIGTERM starts a broker's controlled shutdown (its leaderships move away first); bounded.
DEFAULT_STOP_TIMEOUT_S: Final = 60.0
PROBE_TIMEOUT_S: Final = 2.0
POLL_INTERVAL_S: Final = 0.2
LOG_TAIL_LINES: Final = 25
MAX_NODES: Final = 99
# A JVM that could not bind its listener (the port was picked free, then taken by another process
# before the JVM bound it) logs Java's BindException message; see port_taken.
PORT_TAKEN: Final = "Address already in use"
# How many times the nodes that lost their ports are started again on new ones.
BIND_ATTEMPTS: Final = 3


_log = get_logger("kraft-launcher")


class KraftNodeError(RuntimeError):
    """A node died or did not become ready; the message names it and quotes its logs' tails."""


@dataclass(frozen=True, slots=True)
class KraftNode:
    node_id: int
    role: Role
    pid: int
    address: str  # host:port of its listener (CONTROLLER for a controller, PLAINTEXT for a broker)
    rack: str | None  # broker.rack; None for a controller
    node_dir: str = ""
    argv: tuple[str, ...] = field(default=(), repr=False)
    # When this incarnation was started (ms since the Unix epoch): a controller is ready once the
    # leader has seen it caught up after this moment.
    started_at_ms: int = 0

    @property
    def log(self) -> Path:
        return Path(self.node_dir) / SERVER_LOG

    @property
    def console_log(self) -> Path:
        return Path(self.node_dir) / CONSOLE_LOG


@dataclass
class KraftCluster:
    cluster_id: str
    data_dir: Path
    nodes: list[KraftNode]
    ready_timeout_s: float = DEFAULT_READY_TIMEOUT_S

    # -- start --------------------------------------------------------------------------------

    @classmethod
    def start(
        cls,
        data_dir: Path,
        *,
        controllers: int = 3,
        brokers: int = 3,
        racks: int = 3,
        cluster_id: str | None = None,
        broker_config: Mapping[str, str] | None = None,
        controller_config: Mapping[str, str] | None = None,
        jvm: JvmSettings | None = None,
        ready_timeout_s: float = DEFAULT_READY_TIMEOUT_S,
    ) -> KraftCluster:
        """Format and start the cluster; return once the quorum has a leader and every broker is
        registered and unfenced. On a failure every JVM it started is stopped and
        :class:`KraftNodeError` names the node and quotes its logs."""
        check_shape(controllers, brokers, racks)
        data_dir = data_dir.absolute()
        data_dir.mkdir(parents=True, exist_ok=True)
        if (data_dir / CLUSTER_FILE).exists():
            previous = cls.load(data_dir)
            running = [n.node_id for n in previous.nodes if alive(n.pid)]
            state = f"nodes {running} are still running" if running else "it holds a stopped cluster's storage"
            raise RuntimeError(
                f"{data_dir / CLUSTER_FILE} exists and {state}: stop it (`raftmeta kraft down`) and "
                "use an empty --data-dir"
            )
        leftovers = sorted(entry.name for entry in data_dir.iterdir())
        if leftovers:
            # Never format over, or mix nodes into, files the launcher did not write this time.
            raise RuntimeError(
                f"{data_dir} is not empty (it holds {', '.join(leftovers[:5])}): use an empty --data-dir"
            )
        cluster = cls(cluster_id or random_uuid(), data_dir, [], ready_timeout_s)
        settings = jvm or JvmSettings()
        try:
            # Controllers first, brokers once the quorum is ready: a broker that cannot register
            # within initial.broker.registration.timeout.ms (60 s) exits, and six JVMs loading at
            # once on a loaded two-core machine made one do so. Real deployments order it so too.
            controller_addresses = cluster._start_controllers(controllers, controller_config, settings)
            cluster._start_brokers(brokers, racks, controller_addresses, broker_config, settings)
        except BaseException:
            cluster.stop()
            raise
        leader = cluster._leader_view()
        _log.info(
            "kraft cluster ready",
            cluster_id=cluster.cluster_id,
            leader_id=None if leader is None else leader.leader_id,
            epoch=None if leader is None else leader.leader_epoch,
            high_watermark=None if leader is None else leader.high_watermark,
        )
        return cluster

    def _start_controllers(self, count: int, config: Mapping[str, str] | None, settings: JvmSettings) -> list[str]:
        """Format and start the controllers on free ports; their addresses once all are ready.

        Ports are picked free before the JVMs bind them, and another process may take one
        meanwhile. The voters' addresses are written into every controller's storage when it is
        formatted (the quorum's bootstrap voter set, Kafka's --initial-controllers), so one
        controller cannot move alone: when one could not bind its port, every controller is
        stopped, their folders are set aside (kept for their logs) and all are formatted and
        started again on new ports, at most ``BIND_ATTEMPTS`` times (unless ``config`` sets the
        listener: then the port is the caller's). No broker runs yet."""
        for attempt in range(1, BIND_ATTEMPTS + 1):
            addresses = [f"{HOST}:{port}" for port in free_ports(count)]
            # Kafka's --initial-controllers: id@host:port:directory-id of every voter, the same
            # string for every controller (KIP-853: a voter is its node id and its log directory).
            initial = ",".join(
                f"{controller_id(i)}@{address}:{format_directory_id(new_directory_id())}"
                for i, address in enumerate(addresses)
            )
            jobs: list[FormatJob] = []
            planned: list[KraftNode] = []
            for i, address in enumerate(addresses):
                node_id = controller_id(i)
                node_dir = self.data_dir / f"controller-{node_id}"
                properties = controller_properties(node_id, address, addresses, node_dir / "data", config)
                planned.append(_write_node(node_id, "controller", address, None, node_dir, properties, settings))
                jobs.append(FormatJob(node_id, node_dir / "server.properties", initial))
            format_all(self.cluster_id, jobs)
            for node in planned:
                self.nodes.append(_spawn(node))
                self.save()
            try:
                self.wait_ready([n.node_id for n in planned])
                return addresses
            except KraftNodeError:
                taken = [n.node_id for n in self.controllers if port_taken(n)]
                if not taken or attempt == BIND_ATTEMPTS or _pins_listener(config):
                    raise
                _log.warning("kraft controllers' ports taken; starting them on new ports", nodes=taken, attempt=attempt)
                terminate([n.pid for n in self.controllers], DEFAULT_STOP_TIMEOUT_S)
                for node in self.controllers:
                    _set_aside(Path(node.node_dir), attempt)
                self.nodes = []
                self.save()
        raise AssertionError("unreachable")  # the last attempt returns or raises

    @classmethod
    def start_brokers_on(
        cls,
        data_dir: Path,
        *,
        cluster_id: str,
        voters: Mapping[int, str],
        brokers: int,
        racks: int,
        first_broker_id: int,
        broker_config: Mapping[str, str] | None = None,
        jvm: JvmSettings | None = None,
        ready_timeout_s: float = DEFAULT_READY_TIMEOUT_S,
        log_dirs: int = 1,
    ) -> KraftCluster:
        """Brokers alone, on a controller quorum that is not Kafka's (raftmeta's, whose voters'
        Kafka listeners are ``voters``: id -> host:port): ids from ``first_broker_id``, racks named
        as raftmeta's fleet names them, storage formatted for ``cluster_id``; the brokers take the
        voters as ``controller.quorum.voters`` (node_config.broker_properties says why). Returns
        once every broker is registered and unfenced; on a failure stops what it started and
        raises :class:`KraftNodeError`. ``log_dirs``: each broker's log directories (JBOD,
        KIP-858; :func:`broker_log_dirs`)."""
        check_shape(1, brokers, racks)
        data_dir = data_dir.absolute()
        data_dir.mkdir(parents=True, exist_ok=True)
        leftovers = sorted(entry.name for entry in data_dir.iterdir())
        if leftovers:
            raise RuntimeError(
                f"{data_dir} is not empty (it holds {', '.join(leftovers[:5])}): brokers start in an empty directory"
            )
        cluster = cls(cluster_id, data_dir, [], ready_timeout_s)
        try:
            cluster._start_brokers(
                brokers,
                racks,
                [],
                broker_config,
                jvm or JvmSettings(),
                first_id=first_broker_id,
                voters=voters,
                log_dirs=log_dirs,
            )
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def _start_brokers(
        self,
        count: int,
        racks: int,
        controller_addresses: list[str],
        config: Mapping[str, str] | None,
        settings: JvmSettings,
        *,
        first_id: int = 0,
        voters: Mapping[int, str] | None = None,
        log_dirs: int = 1,
    ) -> None:
        """Format and start the brokers (ids from ``first_id``) on free ports; return once all
        are ready. They find the quorum through ``controller_addresses`` (its bootstrap servers)
        or, given, ``voters`` (its static voters). A broker's address is only in its own config,
        so one that could not bind its port (taken meanwhile) is started again alone on a new
        port, its failed run's logs set aside, at most ``BIND_ATTEMPTS`` times in all (unless
        ``config`` sets the listener)."""

        def plan(broker_id: int, port: int) -> KraftNode:
            address = f"{HOST}:{port}"
            rack = rack_name((broker_id - first_id) % racks)
            node_dir = self.data_dir / f"broker-{broker_id}"
            directories = broker_log_dirs(node_dir, log_dirs)
            properties = broker_properties(
                broker_id, address, rack, controller_addresses, directories, count, config, static_voters=voters
            )
            return _write_node(broker_id, "broker", address, rack, node_dir, properties, settings)

        planned = [plan(first_id + index, port) for index, port in enumerate(free_ports(count))]
        format_all(
            self.cluster_id, [FormatJob(n.node_id, Path(n.node_dir) / "server.properties", None) for n in planned]
        )
        for node in planned:
            self.nodes.append(_spawn(node))
            self.save()
        for attempt in range(1, BIND_ATTEMPTS + 1):
            try:
                self.wait_ready([n.node_id for n in self.brokers])
                return
            except KraftNodeError:
                taken = [n for n in self.brokers if port_taken(n)]
                if not taken or attempt == BIND_ATTEMPTS or _pins_listener(config):
                    raise
                _log.warning(
                    "kraft brokers' ports taken; starting them on new ports",
                    nodes=[n.node_id for n in taken],
                    attempt=attempt,
                )
                for node, port in zip(taken, free_ports(len(taken)), strict=True):
                    _set_aside_logs(node, attempt)
                    self._replace(_spawn(plan(node.node_id, port)))

    # -- the cluster file ---------------------------------------------------------------------

    @property
    def path(self) -> Path:
        return self.data_dir / CLUSTER_FILE

    @property
    def controllers(self) -> list[KraftNode]:
        return [n for n in self.nodes if n.role == "controller"]

    @property
    def brokers(self) -> list[KraftNode]:
        return [n for n in self.nodes if n.role == "broker"]

    @property
    def bootstrap_servers(self) -> str:
        """The brokers' PLAINTEXT listeners: Kafka clients' ``bootstrap.servers``."""
        return ",".join(n.address for n in self.brokers)

    @property
    def controller_bootstrap_servers(self) -> str:
        """The controllers' listeners: the tools' ``--bootstrap-controller``."""
        return ",".join(n.address for n in self.controllers)

    def to_json(self) -> dict[str, Any]:
        return {
            "cluster_id": self.cluster_id,
            "data_dir": str(self.data_dir),
            "bootstrap_servers": self.bootstrap_servers,
            "controller_bootstrap_servers": self.controller_bootstrap_servers,
            "nodes": [{**dataclasses.asdict(n), "argv": list(n.argv)} for n in self.nodes],
        }

    def save(self) -> None:
        temporary = self.path.with_suffix(".json.tmp")
        temporary.write_text(json.dumps(self.to_json(), indent=2) + "\n")
        os.replace(temporary, self.path)

    @classmethod
    def load(cls, data_dir: Path) -> KraftCluster:
        """The cluster a launcher started in ``data_dir``, from its kraft.json."""
        path = data_dir.absolute() / CLUSTER_FILE
        try:
            document = json.loads(path.read_text())
        except FileNotFoundError:
            raise FileNotFoundError(f"{path} not found: no KRaft cluster was started in {data_dir}") from None
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path} is not valid JSON ({exc}): refusing to act on a damaged cluster file") from exc
        try:
            nodes = [KraftNode(**{**n, "argv": tuple(n["argv"])}) for n in document["nodes"]]
            return cls(document["cluster_id"], Path(document["data_dir"]), nodes)
        except (KeyError, TypeError) as exc:
            raise ValueError(f"{path} does not describe a KRaft cluster ({type(exc).__name__}: {exc})") from exc

    def node(self, node_id: int) -> KraftNode:
        for n in self.nodes:
            if n.node_id == node_id:
                return n
        raise KeyError(f"node {node_id} is not in this cluster (nodes {[n.node_id for n in self.nodes]})")

    def _replace(self, node: KraftNode) -> None:
        self.nodes = [node if n.node_id == node.node_id else n for n in self.nodes]
        self.save()

    # -- readiness ----------------------------------------------------------------------------

    def wait_ready(self, node_ids: Iterable[int], *, caught_up_since_ms: int | None = None) -> None:
        """Wait until each node is ready: the leader has seen a controller caught up since it
        started (or since ``caught_up_since_ms``, e.g. when it was resumed), a broker sees itself
        and every other running broker unfenced. Raises :class:`KraftNodeError` when one of
        them exits or the timeout passes."""
        waiting = {node_id: self.node(node_id) for node_id in node_ids}
        # Brokers started together must each see all of them; a broker restarted alone, itself
        # (another one may be paused or down on purpose, and fenced).
        brokers_started = frozenset(i for i, n in waiting.items() if n.role == "broker")
        if caught_up_since_ms is not None:
            waiting = {i: dataclasses.replace(n, started_at_ms=caught_up_since_ms) for i, n in waiting.items()}
        deadline = time.monotonic() + self.ready_timeout_s
        last_seen: dict[int, str] = {}
        while waiting:
            for node_id, node in list(waiting.items()):
                if not alive(node.pid):
                    raise KraftNodeError(self._failure(node, "exited before it was ready"))
                ready, seen = self._is_ready(node, brokers_started)
                last_seen[node_id] = seen
                if ready:
                    del waiting[node_id]
                    _log.info("kraft node ready", node_id=node_id, role=node.role, pid=node.pid, seen=seen)
            if not waiting:
                return
            if time.monotonic() > deadline:
                raise KraftNodeError(
                    "; ".join(
                        self._failure(n, f"not ready within {self.ready_timeout_s:.0f} s ({last_seen.get(i)})")
                        for i, n in waiting.items()
                    )
                )
            time.sleep(POLL_INTERVAL_S)

    def _is_ready(self, node: KraftNode, brokers_started: frozenset[int]) -> tuple[bool, str]:
        if node.role == "controller":
            view = self._leader_view()
            if view is None:
                return False, "no controller answers as the quorum's leader"
            replica = view.voter(node.node_id)
            if replica is None:
                return False, f"not a voter of leader {view.leader_id}"
            caught_up = replica.last_caught_up_timestamp >= node.started_at_ms
            return caught_up, (
                f"leader {view.leader_id} in epoch {view.leader_epoch}, high watermark {view.high_watermark}, "
                f"its log end offset {replica.log_end_offset}, last caught up at {replica.last_caught_up_timestamp}"
            )
        expected = brokers_started | {node.node_id}
        try:
            seen = unfenced_brokers(node.address, PROBE_TIMEOUT_S)
        except ProbeError as exc:
            return False, str(exc)
        return expected <= seen, f"unfenced brokers {sorted(seen)} of {sorted(expected)}"

    def _leader_view(self) -> QuorumView | None:
        """DescribeQuorum from the leader: each running controller is asked (only the leader
        answers); a deposed leader paused in the past cannot answer, the newest epoch wins."""
        views = []
        for controller in self.controllers:
            if alive(controller.pid):
                with contextlib.suppress(ProbeError):
                    views.append(describe_quorum(controller.address, PROBE_TIMEOUT_S))
        return max(views, key=lambda v: v.leader_epoch, default=None)

    def _failure(self, node: KraftNode, what: str) -> str:
        return (
            f"{node.role} {node.node_id} (pid {node.pid}, {node.address}) {what}; "
            f"tail of {node.log}:\n{tail(node.log)}\ntail of {node.console_log}:\n{tail(node.console_log)}"
        )

    # -- acting on nodes ----------------------------------------------------------------------

    def active_controller(self) -> int:
        """The quorum's leader: the controller that answers DescribeQuorum (KraftNodeError while
        none does, e.g. during an election)."""
        view = self._leader_view()
        if view is None:
            raise KraftNodeError("no running controller answers as the quorum's leader")
        return view.leader_id

    def wait_for_leader(self, *, other_than: int | None = None) -> int:
        """Wait until a controller answers as the leader (one other than ``other_than``, e.g.
        the one just killed or paused), within the ready timeout; its node id."""
        deadline = time.monotonic() + self.ready_timeout_s
        while True:
            view = self._leader_view()
            if view is not None and view.leader_id != other_than:
                return view.leader_id
            if time.monotonic() > deadline:
                seen = "none" if view is None else str(view.leader_id)
                raise KraftNodeError(
                    f"no new leader within {self.ready_timeout_s:.0f} s (the leader answering: {seen})"
                )
            time.sleep(POLL_INTERVAL_S)

    def log_dirs(self) -> dict[int, Path]:
        """Each node's KRaft metadata log directory (``__cluster_metadata-0`` in its log.dirs)."""
        return {n.node_id: Path(n.node_dir) / "data" / METADATA_PARTITION for n in self.nodes}

    def kill(self, node_id: int) -> int:
        """SIGKILL the node (a crash) and wait until it is gone; its pid."""
        node = self._running(node_id)
        os.kill(node.pid, signal.SIGKILL)
        _wait(lambda: not alive(node.pid))
        _log.info("kraft node killed", node_id=node_id, role=node.role, pid=node.pid)
        return node.pid

    def pause(self, node_id: int) -> int:
        """SIGSTOP the node: it stops answering, as in a long GC pause."""
        node = self._running(node_id)
        os.kill(node.pid, signal.SIGSTOP)
        _log.info("kraft node paused", node_id=node_id, role=node.role, pid=node.pid)
        return node.pid

    def resume(self, node_id: int) -> int:
        """SIGCONT a paused node."""
        node = self._running(node_id)
        os.kill(node.pid, signal.SIGCONT)
        _log.info("kraft node resumed", node_id=node_id, role=node.role, pid=node.pid)
        return node.pid

    def restart(self, node_id: int, *, stop_timeout_s: float = DEFAULT_STOP_TIMEOUT_S) -> KraftNode:
        """Start the node again with the same command line, config and storage (stopping it
        first, SIGTERM then SIGKILL, if it runs); return once it is ready again."""
        self.stop_node(node_id, stop_timeout_s)
        restarted = self.start_node(node_id)
        self.wait_ready([node_id])
        return restarted

    def stop_node(self, node_id: int, timeout_s: float = DEFAULT_STOP_TIMEOUT_S) -> None:
        """Stop one node (SIGTERM, then SIGKILL after ``timeout_s``), as an operator stops it."""
        terminate([self.node(node_id).pid], timeout_s)

    def start_node(self, node_id: int) -> KraftNode:
        """Start a stopped node with its command line, config and storage; return at once (the
        caller waits for what it needs, e.g. times its catch-up)."""
        node = self.node(node_id)
        if alive(node.pid):
            raise RuntimeError(f"{node.role} {node_id} (pid {node.pid}) is still running: stop it first")
        started = _spawn(node)
        self._replace(started)
        return started

    def stop(self, timeout_s: float = DEFAULT_STOP_TIMEOUT_S) -> list[int]:
        """Stop every node: brokers first (their controlled shutdown needs the controllers),
        then the controllers; SIGTERM, and SIGKILL whatever is left after ``timeout_s`` each.
        Returns the pids that were running."""
        stopped = terminate([n.pid for n in self.brokers], timeout_s)
        stopped += terminate([n.pid for n in self.controllers], timeout_s)
        _log.info("kraft cluster stopped", cluster_id=self.cluster_id, pids=stopped)
        return stopped

    def _running(self, node_id: int) -> KraftNode:
        node = self.node(node_id)
        if not alive(node.pid):
            raise ProcessLookupError(f"{node.role} {node_id} (pid {node.pid}) is not running")
        return node


def broker_log_dirs(node_dir: Path, count: int) -> list[Path]:
    """A broker's ``count`` log directories: ``data`` (which also holds the metadata log), then
    ``data-1``, ``data-2`` ... Kafka's storage tool formats each one (its own directory id)."""
    if count < 1:
        raise ValueError(f"a broker needs at least one log directory, got {count}")
    return [node_dir / "data", *(node_dir / f"data-{i}" for i in range(1, count))]


def check_shape(controllers: int, brokers: int, racks: int) -> None:
    """The counts a launcher accepts, each error naming the argument and its rule."""
    if not 1 <= controllers <= 9:
        raise ValueError(f"controllers must be between 1 and 9, got {controllers}")
    if not 1 <= brokers <= MAX_NODES:
        raise ValueError(f"brokers must be between 1 and {MAX_NODES}, got {brokers}")
    if not 1 <= racks <= brokers:
        raise ValueError(f"racks must be between 1 and the number of brokers ({brokers}), got {racks}")


def port_taken(node: KraftNode) -> bool:
    """Whether the node's JVM exited because its listener's port was taken: Kafka's SocketServer
    fails with a BindException ("Socket server failed to bind to host:port: Address already in
    use") and the server exits; the message is in its server.log or console.log."""
    if alive(node.pid):
        return False
    for path in (node.log, node.console_log):
        with contextlib.suppress(FileNotFoundError):
            if PORT_TAKEN in path.read_text(errors="replace"):
                return True
    return False


def _pins_listener(config: Mapping[str, str] | None) -> bool:
    """Whether the caller's config sets the listener itself: its port is the caller's choice, and
    a node that cannot bind it is a failure to report, not a pick to make again."""
    return "listeners" in (config or {})


def _set_aside(path: Path, attempt: int) -> Path:
    """Move a failed attempt's file or folder out of the way, kept for reading: PATH.port-taken-N."""
    aside = path.with_name(f"{path.name}.port-taken-{attempt}")
    path.rename(aside)
    return aside


def _set_aside_logs(node: KraftNode, attempt: int) -> None:
    """A node started again in its folder: its failed run's logs kept beside the new ones."""
    for path in (node.log, node.console_log):
        if path.exists():
            _set_aside(path, attempt)


def tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no such file)"


def _write_node(
    node_id: int,
    role: Role,
    address: str,
    rack: str | None,
    node_dir: Path,
    properties: Mapping[str, str],
    settings: JvmSettings,
) -> KraftNode:
    """The node's folder with its server.properties and log4j2 config; the node, not started. The
    folder may exist: a broker started again on a new port is written over in its own folder
    (start() refuses a data dir that holds anything it did not write this time)."""
    node_dir.mkdir(parents=True, exist_ok=True)
    (node_dir / "server.properties").write_text(render_properties(properties))
    log4j = node_dir / "log4j2.properties"
    log4j.write_text(log4j2_properties(node_dir / SERVER_LOG))
    argv = jvm_argv(java_executable(), kafka_classpath(), settings, log4j, node_dir)
    return KraftNode(node_id, role, 0, address, rack, str(node_dir), tuple(argv))


def _spawn(node: KraftNode) -> KraftNode:
    """Start the node's JVM (stdout and stderr to its console.log); the node with its new pid."""
    started_at_ms = int(time.time() * 1000)
    started = dataclasses.replace(node, pid=spawn(list(node.argv), node.console_log), started_at_ms=started_at_ms)
    _log.info("kraft node started", node_id=node.node_id, role=node.role, pid=started.pid, address=node.address)
    return started


def _wait(condition: Callable[[], bool], timeout_s: float = DEFAULT_STOP_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"condition not met within {timeout_s} s")
        time.sleep(0.05)
