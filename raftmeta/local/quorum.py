"""A local quorum of real node processes on loopback (``raftmeta quorum up|down|kill|...``).

``DIR/quorum.json`` records everything needed to act on the quorum later from another process:
each node's id, pid, address, data dir, log file and exact command line (so ``restart`` starts
the very same node), plus the broker fleet's pid. Processes start in their own sessions so they
outlive a detached ``quorum up``.

With ``tls``, a throwaway CA and certificates are made in ``DIR/tls`` (kept across runs), every
node runs mutual TLS on its listener, the fleet dials with the client certificate, and
``quorum.json`` records the client's files under ``tls`` for the commands that follow.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from raftmeta.api.addresses import parse_host_port
from raftmeta.api.ids import uuid_to_str
from raftmeta.client import ClientError, RetryPolicy, SyncControllerClient
from raftmeta.local.python_command import raftmeta_command
from raftmeta.server.config import format_voters
from raftmeta.tls import TlsConfig

QUORUM_FILE = "quorum.json"
# The Prometheus scrape config `quorum up` writes for its nodes (deploy/prometheus/README.md).
PROMETHEUS_FILE = "prometheus.yml"
TLS_DIR = "tls"
KAFKA_BROKERS_DIR = "kafka-brokers"
# Real Kafka brokers' node ids start here: a Kafka broker's id must be no voter's (its raft client
# would take itself for that voter), and raftmeta's node ids are 1..18.
KAFKA_BROKER_FIRST_ID = 100

if TYPE_CHECKING:
    from raftmeta.kraft.cluster import KraftCluster


@dataclass
class NodeProcess:
    id: int
    pid: int
    address: str
    data_dir: str
    log: str
    argv: list[str]
    # The node's Kafka listener (``quorum up --kafka``); None: not serving Kafka clients.
    kafka_address: str | None = None
    # The node's Prometheus endpoint (``--metrics-listen``); None: no metrics.
    metrics_address: str | None = None


@dataclass
class LocalQuorum:
    data_dir: str
    cluster_id: str
    bootstrap_server: str
    nodes: list[NodeProcess]
    brokers_pid: int | None = None
    brokers_argv: list[str] = field(default_factory=list)
    # The client's TLS files ({"cert", "key", "ca"}) when the quorum runs TLS; None: plaintext.
    tls: dict[str, str | None] | None = None
    # Kafka's bootstrap.servers for the nodes' Kafka listeners (``quorum up --kafka``); None: off.
    kafka_bootstrap_servers: str | None = None
    # Where the real Kafka brokers run (``quorum up --kafka-brokers``: their kraft.json, one
    # folder each, raftmeta/kraft/cluster.py); None: none.
    kafka_brokers_dir: str | None = None

    @property
    def path(self) -> Path:
        return Path(self.data_dir) / QUORUM_FILE

    @property
    def client_tls(self) -> TlsConfig | None:
        """What a client needs to talk to this quorum."""
        if self.tls is None:
            return None
        return TlsConfig.from_flags(self.tls.get("cert"), self.tls.get("key"), self.tls.get("ca"))

    def save(self) -> None:
        self.path.write_text(json.dumps(self.to_json(), indent=2) + "\n")

    def to_json(self) -> dict[str, Any]:
        document = asdict(self)
        document["nodes"] = [
            {
                "id": n.id,
                "pid": n.pid,
                "address": n.address,
                "data_dir": n.data_dir,
                "log": n.log,
                "argv": n.argv,
                "kafka_address": n.kafka_address,
                "metrics_address": n.metrics_address,
            }
            for n in self.nodes
        ]
        return document

    @classmethod
    def load(cls, data_dir: Path) -> LocalQuorum:
        path = data_dir / QUORUM_FILE
        try:
            document = json.loads(path.read_text())
        except FileNotFoundError:
            raise FileNotFoundError(f"{path} not found: no quorum was started in {data_dir}") from None
        nodes = [NodeProcess(**n) for n in document.pop("nodes")]
        return cls(nodes=nodes, **document)

    def node(self, node_id: int) -> NodeProcess:
        for n in self.nodes:
            if n.id == node_id:
                return n
        raise KeyError(f"node {node_id} is not in this quorum (nodes {[n.id for n in self.nodes]})")


def new_cluster_id() -> str:
    """A random cluster id in Kafka's form (22 characters of base64url)."""
    return uuid_to_str(uuid.uuid4().bytes)


def free_ports(count: int) -> list[int]:
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for sock in sockets:
            sock.close()


# Children this process started: kept so they are reaped (poll) rather than left as zombies, and
# so dropping a handle does not warn that a deliberately detached process is still running.
_children: dict[int, subprocess.Popen[bytes]] = {}


def alive(pid: int | None) -> bool:
    if not pid:
        return False
    child = _children.get(pid)
    if child is not None:
        return child.poll() is None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited child not yet reaped) still answers kill(0): check its state.
    with contextlib.suppress(OSError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.split(") ", 1)[1][0] != "Z"
    return True


def exit_code(pid: int) -> int | None:
    """The exit code of a process :func:`spawn` started, None while it runs (or if it is not ours)."""
    child = _children.get(pid)
    return None if child is None else child.poll()


def spawn(argv: list[str], log_path: Path) -> int:
    """Start ``argv`` in a session of its own (a signal to the caller's group does not reach it),
    stdout and stderr appended to ``log_path``; return its pid. The child is remembered, so
    :func:`alive` reaps it like the nodes."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
    _children[process.pid] = process
    return process.pid


def up(
    data_dir: Path,
    *,
    nodes: int = 3,
    observers: int = 0,
    brokers: int = 0,
    racks: int = 0,
    pools: list[str] | None = None,
    node_args: list[str] | None = None,
    heartbeat_interval_ms: int = 1000,
    catch_up_delay_ms: int | None = None,
    tls: bool = False,
    kafka: bool = False,
    metrics: bool = True,
    timeout_s: float = 30.0,
    fleet_args: list[str] | None = None,
    kafka_brokers: int = 0,
    kafka_broker_log_dirs: int = 1,
) -> LocalQuorum:
    """Start ``nodes`` voter processes, ``observers`` more (ids after the voters': they replicate
    and can be made voters with ``quorum add-controller``), a simulated broker fleet (``brokers``)
    or ``kafka_brokers`` real Apache Kafka brokers (ids from :data:`KAFKA_BROKER_FIRST_ID`, in
    ``racks`` racks, on the nodes' Kafka listeners, which ``kafka_brokers`` turns on); return once
    a leader is elected and the brokers have registered (the real ones unfenced), each real one
    with ``kafka_broker_log_dirs`` log directories (JBOD). ``tls``: mutual TLS everywhere, with
    certificates in DIR/tls."""
    if kafka_brokers and brokers:
        raise ValueError("--brokers and --kafka-brokers: a quorum runs simulated or real brokers, not both")
    if kafka_brokers and tls:
        raise ValueError("--kafka-brokers and --tls: the real brokers speak plaintext to the Kafka listeners")
    if kafka_brokers and not 1 <= racks <= kafka_brokers:
        raise ValueError(f"--racks ({racks}) must be between 1 and --kafka-brokers ({kafka_brokers})")
    if kafka_brokers and (data_dir / KAFKA_BROKERS_DIR).exists():
        # Formatting over a broker's storage would lose its data; starting it again is not done here.
        raise RuntimeError(
            f"{data_dir / KAFKA_BROKERS_DIR} exists: Kafka brokers were started in this quorum before; "
            "use a new --data-dir"
        )
    kafka = kafka or bool(kafka_brokers)
    if not 1 <= nodes <= 9:
        raise ValueError(f"--nodes must be between 1 and 9, got {nodes}")
    if not 0 <= observers <= 9:
        raise ValueError(f"--observers must be between 0 and 9, got {observers}")
    data_dir.mkdir(parents=True, exist_ok=True)
    existing = data_dir / QUORUM_FILE
    if existing.exists():
        previous = LocalQuorum.load(data_dir)
        running = [n.id for n in previous.nodes if alive(n.pid)]
        if running:
            raise RuntimeError(
                f"nodes {running} of the quorum in {data_dir} are still running: `raftmeta quorum down` first"
            )
        cluster_id = previous.cluster_id
    else:
        cluster_id = new_cluster_id()
    # One call for every port, so no two listeners are given the same one.
    count = nodes + observers
    ports = free_ports(count * 2 if kafka else count)
    members = {i + 1: f"127.0.0.1:{port}" for i, port in enumerate(ports[:count])}
    # The bootstrap voters (Kafka's controller.quorum.voters); the other nodes start as observers.
    voters = {i: a for i, a in members.items() if i <= nodes}
    # ``kafka``: every node also serves Kafka admin clients, and lists the others as brokers.
    kafka_addresses = {i + 1: f"127.0.0.1:{port}" for i, port in enumerate(ports[count:])}
    # ``metrics``: a Prometheus endpoint per node (ports distinct from the listeners' above).
    metrics_ports = [p for p in free_ports(2 * count + len(ports)) if p not in ports][:count] if metrics else []
    metrics_addresses = {i + 1: f"127.0.0.1:{port}" for i, port in enumerate(metrics_ports)}
    node_tls, client_tls = _make_tls(data_dir.absolute() / TLS_DIR, list(members)) if tls else ({}, None)
    # Kafka's --initial-controllers: every bootstrap voter with its directory id (the one its data
    # dir already has, on a restart), so each voter is its node id and its directory (KIP-853).
    controllers = _initial_controllers(data_dir, voters)
    processes: list[NodeProcess] = []
    for node_id, address in members.items():
        node_dir = data_dir / f"node-{node_id}"
        tls_args = node_tls[node_id].to_args() if tls else []
        argv = [
            *raftmeta_command("--log-format", "json", "--log-level", "info", "node"),
            "--node-id", str(node_id), "--listen", address, "--initial-controllers", controllers,
            "--data-dir", str(node_dir), "--cluster-id", cluster_id, *tls_args, *(node_args or []),
        ]  # fmt: skip
        if kafka:
            peers = format_voters({i: a for i, a in kafka_addresses.items() if i != node_id})
            argv += ["--kafka-listener", kafka_addresses[node_id], *(["--kafka-peers", peers] if peers else [])]
        if metrics:
            argv += ["--metrics-listen", metrics_addresses[node_id]]
        log_path = data_dir / "logs" / f"node-{node_id}.log"
        processes.append(
            NodeProcess(
                node_id,
                spawn(argv, log_path),
                address,
                str(node_dir),
                str(log_path),
                argv,
                kafka_addresses.get(node_id),
            )
        )
    quorum = LocalQuorum(str(data_dir), cluster_id, ",".join(members.values()), processes)
    quorum.kafka_bootstrap_servers = ",".join(kafka_addresses.values()) or None
    quorum.tls = None if client_tls is None else client_tls.to_json()
    for process in processes:
        process.metrics_address = metrics_addresses.get(process.id)
    quorum.save()
    if metrics:
        from raftmeta.metrics.scrape import write_scrape_config

        write_scrape_config(data_dir / PROMETHEUS_FILE, quorum.cluster_id, metrics_addresses)
    wait_for_leader(quorum, timeout_s)
    if kafka:
        wait_for_kafka_listeners(quorum, timeout_s)
    if brokers:
        fleet_argv = [
            *raftmeta_command("--log-format", "json", "--log-level", "info", "brokers", "fleet"),
            "--bootstrap-server", quorum.bootstrap_server, "--brokers", str(brokers), "--racks", str(racks),
            "--heartbeat-interval-ms", str(heartbeat_interval_ms),
            *(arg for pool in (pools or []) for arg in ("--pool", pool)),
            *([] if catch_up_delay_ms is None else ["--catch-up-delay-ms", str(catch_up_delay_ms)]),
            *([] if client_tls is None else client_tls.to_args()),
            *(fleet_args or []),
        ]  # fmt: skip
        quorum.brokers_pid = spawn(fleet_argv, data_dir / "logs" / "brokers.log")
        quorum.brokers_argv = fleet_argv
        quorum.save()
        wait_for_brokers(quorum, brokers, timeout_s)
    if kafka_brokers:
        start_kafka_brokers(
            quorum, kafka_brokers, racks, {i: kafka_addresses[i] for i in voters}, log_dirs=kafka_broker_log_dirs
        )
    return quorum


def start_kafka_brokers(
    quorum: LocalQuorum, count: int, racks: int, voters: dict[int, str], *, log_dirs: int = 1
) -> None:
    """Format and start ``count`` real Kafka brokers on the voters' Kafka listeners (``voters``:
    id -> host:port), in DIR/kafka-brokers, with raftmeta's cluster id and ``log_dirs`` log
    directories each; return once each is registered and unfenced. Every process of the quorum
    is stopped if they cannot start."""
    from raftmeta.kraft.cluster import KraftCluster  # the JVM launcher: only for real brokers

    directory = Path(quorum.data_dir) / KAFKA_BROKERS_DIR
    quorum.kafka_brokers_dir = str(directory.absolute())
    quorum.save()
    try:
        KraftCluster.start_brokers_on(
            directory,
            cluster_id=quorum.cluster_id,
            voters=voters,
            brokers=count,
            racks=racks,
            first_broker_id=KAFKA_BROKER_FIRST_ID,
            log_dirs=log_dirs,
        )
    except BaseException:
        down(quorum)
        raise


def kafka_brokers(quorum: LocalQuorum) -> KraftCluster | None:
    """The real Kafka brokers of the quorum (``quorum up --kafka-brokers``), or None (none asked
    for, or none started: their cluster file is written with the first)."""
    if quorum.kafka_brokers_dir is None:
        return None
    from raftmeta.kraft.cluster import CLUSTER_FILE, KraftCluster

    if not (Path(quorum.kafka_brokers_dir) / CLUSTER_FILE).exists():
        return None
    return KraftCluster.load(Path(quorum.kafka_brokers_dir))


def _initial_controllers(data_dir: Path, voters: dict[int, str]) -> str:
    from raftmeta.raft.voters import format_directory_id
    from raftmeta.storage.meta_properties import new_directory_id, read_meta_properties

    parts = []
    for node_id, address in sorted(voters.items()):
        node_dir = data_dir / f"node-{node_id}"
        meta = read_meta_properties(node_dir) if node_dir.exists() else None
        directory = meta.directory_id if meta is not None and meta.directory_id else new_directory_id()
        parts.append(f"{node_id}@{address}:{format_directory_id(directory)}")
    return ",".join(parts)


def _make_tls(directory: Path, node_ids: list[int]) -> tuple[dict[int, TlsConfig], TlsConfig]:
    """Certificates in ``directory`` (made if missing, kept otherwise): each node's TLS settings
    (mutual: its certificate, and the CA to require and verify peers' certificates) and the
    client's. Absolute paths: the flags printed for the user must work from any directory."""
    from raftmeta.local.certs import make_certs  # cryptography's x509 builder: only for TLS quorums

    made = make_certs(directory, node_ids)
    nodes = {i: TlsConfig(f.cert, f.key, made.ca.cert) for i, f in made.nodes.items()}
    return nodes, TlsConfig(made.client.cert, made.client.key, made.ca.cert)


def _client(quorum: LocalQuorum) -> SyncControllerClient:
    retry = RetryPolicy(deadline_s=2, attempt_timeout_s=1)
    return SyncControllerClient(quorum.bootstrap_server, retry=retry, tls=quorum.client_tls)


def wait_for_leader(quorum: LocalQuorum, timeout_s: float) -> int:
    deadline = time.monotonic() + timeout_s
    with _client(quorum) as client:
        while time.monotonic() < deadline:
            dead = [n.id for n in quorum.nodes if not alive(n.pid)]
            if len(dead) == len(quorum.nodes):
                raise RuntimeError(f"every node exited; see the logs in {Path(quorum.data_dir) / 'logs'}")
            try:
                answer = client.describe_quorum()
                if answer.leader_id >= 0:
                    return answer.leader_id
            except ClientError:
                pass
            time.sleep(0.1)
    raise TimeoutError(f"no leader elected within {timeout_s} s; see the logs in {Path(quorum.data_dir) / 'logs'}")


def wait_for_kafka_listeners(quorum: LocalQuorum, timeout_s: float) -> None:
    """Until every node's Kafka listener accepts connections: a node opens it after its gRPC
    listener, once the Kafka modules are imported (in a thread, 0.5-1.5 s on a loaded machine), so
    a quorum with a leader may not serve Kafka clients yet."""
    deadline = time.monotonic() + timeout_s
    for node in quorum.nodes:
        if node.kafka_address is None:
            continue
        host, port = parse_host_port(node.kafka_address, f"node {node.id}'s Kafka listener")
        while True:
            if not alive(node.pid):
                raise RuntimeError(f"node {node.id} exited; see {node.log}")
            try:
                socket.create_connection((host, port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() >= deadline:
                    raise TimeoutError(
                        f"node {node.id}'s Kafka listener {node.kafka_address} did not accept connections "
                        f"within {timeout_s} s; see {node.log}"
                    ) from None
                time.sleep(0.05)


def wait_for_brokers(quorum: LocalQuorum, count: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    with _client(quorum) as client:
        while time.monotonic() < deadline:
            if not alive(quorum.brokers_pid):
                raise RuntimeError(f"the broker fleet exited; see {Path(quorum.data_dir) / 'logs' / 'brokers.log'}")
            with contextlib.suppress(ClientError):
                cluster = client.describe_cluster()
                if sum(1 for b in cluster.brokers if not b.fenced) >= count:
                    return
            time.sleep(0.2)
    raise TimeoutError(f"{count} brokers did not register and unfence within {timeout_s} s")


def signal_node(quorum: LocalQuorum, node_id: int, sig: signal.Signals) -> int:
    node = quorum.node(node_id)
    if not alive(node.pid):
        raise ProcessLookupError(f"node {node_id} (pid {node.pid}) is not running")
    os.kill(node.pid, sig)
    return node.pid


def restart(quorum: LocalQuorum, node_id: int) -> NodeProcess:
    node = quorum.node(node_id)
    if alive(node.pid):
        raise RuntimeError(f"node {node_id} (pid {node.pid}) is still running: kill it first")
    node.pid = spawn(node.argv, Path(node.log))
    quorum.save()
    return node


def down(quorum: LocalQuorum, timeout_s: float = 10.0) -> list[int]:
    """SIGTERM every process (SIGCONT first, in case it is paused), SIGKILL what is left: the
    real Kafka brokers first, while the controllers can still grant their controlled shutdown."""
    stopped: list[int] = []
    real = kafka_brokers(quorum)
    if real is not None:
        stopped += real.stop()
    candidates = [quorum.brokers_pid, *(n.pid for n in quorum.nodes)]
    return stopped + terminate([p for p in candidates if p is not None], timeout_s)


def terminate(candidates: list[int], timeout_s: float) -> list[int]:
    """SIGCONT then SIGTERM each running pid of ``candidates``, SIGKILL what is left after
    ``timeout_s``; return the pids that were running."""
    pids = [p for p in candidates if alive(p)]
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.1)
    killed = [pid for pid in pids if alive(pid)]
    for pid in killed:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    # SIGKILL cannot be caught, but the kernel still takes a moment to end the process: wait, so
    # that "stopped" means no process is left.
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(alive(p) for p in killed):
        time.sleep(0.05)
    return pids
