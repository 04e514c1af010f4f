"""The cluster under test: N real node processes whose every peer link runs through a proxy of
the chaos process, plus a simulated broker fleet.

Processes are started and recorded with :mod:`raftmeta.local.quorum` (``DIR/quorum.json`` has
each node's exact command line, so ``raftmeta quorum down --data-dir DIR`` cleans up a run that
was itself killed). Node ``i`` gets its own ``--voters`` view (:meth:`ProxyMesh.voters_for`):
Raft traffic and ControllerService forwarding both use those addresses, so both cross the
proxies. Extra *observer* nodes (``observers``; the membership faults make them voters) are started
the same way: every node reaches every node that is not a bootstrap voter through the proxy of
that link too (``--peer-addresses``, which wins over the listener a ``VotersRecord`` names), so
partitions cut the links to and from a node whatever role it has by then. Clients and the broker
fleet talk to the nodes' real addresses.

With ``kafka_brokers`` the brokers are real Apache Kafka brokers instead of the simulated fleet
(:mod:`raftmeta.chaos.kafka_brokers`): every node serves a Kafka listener, the brokers take the
bootstrap voters' listeners as their controllers (directly, not through the proxies, as the
fleet's gRPC calls), and ``DIR/kafka-brokers`` holds them, so ``raftmeta quorum down --data-dir
DIR`` stops them too.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import grpc.aio

from raftmeta.api.limits import grpc_channel_options
from raftmeta.chaos.kafka_brokers import RealBrokers
from raftmeta.chaos.proxy import Network, ProxyMesh
from raftmeta.local import quorum as local_quorum
from raftmeta.local.python_command import raftmeta_command
from raftmeta.server.config import format_voters
from raftmeta.v1 import fleet_pb2, fleet_pb2_grpc


@dataclass(frozen=True)
class ClusterConfig:
    nodes: int = 3  # the bootstrap voters (ids 1..nodes)
    observers: int = 0  # more nodes (ids after the voters') that start as observers
    brokers: int = 6
    racks: int = 3
    # Real Apache Kafka brokers instead of the simulated fleet (0: the fleet's ``brokers``).
    kafka_brokers: int = 0
    # Quick failure detection keeps runs short (as the integration tests); the broker session stays
    # well above an election so a controller failover alone fences nobody.
    fetch_timeout_ms: int = 1000
    election_timeout_ms: int = 500
    session_timeout_ms: int = 4500
    heartbeat_interval_ms: int = 500
    # How long a simulated broker takes to "copy" a partition it is told to add: short enough that
    # a move completes within a couple of seconds (delay + one or two heartbeats), so a run sees
    # many moves complete, and long enough that cancels and faults still catch some in flight.
    catch_up_delay_ms: int = 1000
    # Small, so snapshots are taken (a few per minute of workload), segments deleted, and nodes
    # that were down fetch a snapshot.
    snapshot_interval_records: int = 1000
    unsafe_ack_before_commit: bool = False
    unsafe_skip_fsync: bool = False
    start_timeout_s: float = 30.0

    @property
    def total_nodes(self) -> int:
        return self.nodes + self.observers

    @property
    def broker_count(self) -> int:
        """The brokers placements can use: the real ones, or the simulated fleet's."""
        return self.kafka_brokers or self.brokers

    @property
    def first_broker_id(self) -> int:
        return local_quorum.KAFKA_BROKER_FIRST_ID if self.kafka_brokers else 0

    @property
    def unsafe(self) -> bool:
        return self.unsafe_ack_before_commit or self.unsafe_skip_fsync

    def node_args(self, *, unsafe: bool) -> list[str]:
        args = [
            "--fetch-timeout-ms", str(self.fetch_timeout_ms),
            "--election-timeout-ms", str(self.election_timeout_ms),
            "--session-timeout-ms", str(self.session_timeout_ms),
            "--snapshot-interval-records", str(self.snapshot_interval_records),
        ]  # fmt: skip
        if unsafe and self.unsafe_ack_before_commit:
            args.append("--unsafe-ack-before-commit")
        if unsafe and self.unsafe_skip_fsync:
            args.append("--unsafe-skip-fsync")
        return args


@dataclass
class ChaosCluster:
    config: ClusterConfig
    data_dir: Path
    network: Network = field(default_factory=Network)
    quorum: local_quorum.LocalQuorum | None = None
    mesh: ProxyMesh | None = None
    # Each node's Prometheus endpoint (scraped directly, not through the proxies): the report's
    # leader changes and commit latency as the nodes measured them (raftmeta/chaos/metrics.py).
    metrics_addresses: dict[int, str] = field(default_factory=dict)
    fleet_address: str = ""
    kafka: RealBrokers | None = None  # the real brokers (ClusterConfig.kafka_brokers), once started
    kafka_heal_error: str | None = None  # a real broker that did not come back at the heal
    paused: set[int] = field(default_factory=set)
    killed: set[int] = field(default_factory=set)  # down on purpose, until restarted
    _fleet_channel: grpc.aio.Channel | None = None

    @property
    def node_ids(self) -> list[int]:
        """Every node process, bootstrap voters and observers alike."""
        return list(range(1, self.config.total_nodes + 1))

    @property
    def bootstrap_voters(self) -> list[int]:
        return list(range(1, self.config.nodes + 1))

    @property
    def bootstrap(self) -> str:
        assert self.quorum is not None
        return self.quorum.bootstrap_server

    def address(self, node_id: int) -> str:
        assert self.quorum is not None
        return self.quorum.node(node_id).address

    def node_dir(self, node_id: int) -> Path:
        return self.data_dir / f"node-{node_id}"

    async def start(self) -> None:
        cfg = self.config
        if cfg.nodes not in (3, 5):
            raise ValueError(f"chaos runs use 3 or 5 nodes, got {cfg.nodes}")
        if not 0 <= cfg.observers <= 4:
            raise ValueError(f"chaos runs use 0 to 4 observers, got {cfg.observers}")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        ids = self.node_ids
        links = [(i, j) for i in ids for j in ids if i != j]
        kafka_ports = len(ids) if cfg.kafka_brokers else 0
        ports = local_quorum.free_ports(len(ids) + len(links) + kafka_ports)
        addresses = {i: f"127.0.0.1:{ports[k]}" for k, i in enumerate(ids)}
        link_ports = dict(zip(links, ports[len(ids) : len(ids) + len(links)], strict=True))
        kafka_addresses = {i: f"127.0.0.1:{port}" for i, port in zip(ids, ports[len(ids) + len(links) :], strict=False)}
        metrics_ports = [p for p in local_quorum.free_ports(2 * len(ids) + len(ports)) if p not in ports]
        self.metrics_addresses = {i: f"127.0.0.1:{metrics_ports[k]}" for k, i in enumerate(ids)}
        self.mesh = ProxyMesh(addresses, link_ports, self.network)
        await self.mesh.start()
        cluster_id = local_quorum.new_cluster_id()
        nodes = []
        for i in ids:
            voters = self.mesh.voters_for(i, addresses, self.bootstrap_voters)
            peers = self.mesh.peers_for(i, self.bootstrap_voters)
            kafka_peers = format_voters({j: a for j, a in kafka_addresses.items() if j != i})
            kafka_args = (
                ["--kafka-listener", kafka_addresses[i], *(["--kafka-peers", kafka_peers] if kafka_peers else [])]
                if kafka_addresses
                else []
            )
            # The node arguments come last: _arm_unsafe_flags replaces that tail.
            argv = [
                *raftmeta_command("--log-format", "json", "--log-level", "info", "node"),
                "--node-id", str(i), "--listen", addresses[i], "--voters", format_voters(voters),
                *(["--peer-addresses", format_voters(peers)] if peers else []),
                "--data-dir", str(self.node_dir(i)), "--cluster-id", cluster_id,
                "--metrics-listen", self.metrics_addresses[i], *kafka_args, *cfg.node_args(unsafe=False),
            ]  # fmt: skip
            log = self.data_dir / "logs" / f"node-{i}.log"
            nodes.append(
                local_quorum.NodeProcess(
                    i, 0, addresses[i], str(self.node_dir(i)), str(log), argv, kafka_addresses.get(i)
                )
            )
            nodes[-1].metrics_address = self.metrics_addresses[i]
        self.quorum = local_quorum.LocalQuorum(str(self.data_dir), cluster_id, ",".join(addresses.values()), nodes)
        for i in ids:
            self.restart(i)  # pid 0 is "not running": restart spawns from the recorded argv
        await asyncio.to_thread(local_quorum.wait_for_leader, self.quorum, cfg.start_timeout_s)
        if cfg.kafka_brokers:
            await self._start_kafka_brokers()
        else:
            await self._start_fleet()
        if cfg.unsafe:
            await self._arm_unsafe_flags()

    async def _arm_unsafe_flags(self) -> None:
        """Restart every node with the test-only flags, once the brokers are registered.

        Work-around: with --unsafe-ack-before-commit, a node answers a request that writes records
        but carries no request id (RegisterBroker, an unfencing BrokerHeartbeat) by raising inside
        its task, which kills it. So brokers register against safe nodes first, and the session
        timeout is kept long enough that no broker is fenced (and unfenced) during the run."""
        assert self.quorum is not None
        safe_args = self.config.node_args(unsafe=False)
        unsafe_args = self.config.node_args(unsafe=True)
        for node in self.quorum.nodes:
            local_quorum.signal_node(self.quorum, node.id, signal.SIGTERM)
            await self.wait_dead(node.id, timeout_s=15.0)
            self.kill(node.id)  # in case SIGTERM was not enough
            await self.wait_dead(node.id)
            node.argv = node.argv[: len(node.argv) - len(safe_args)] + unsafe_args
            self.restart(node.id)
        await asyncio.to_thread(local_quorum.wait_for_leader, self.quorum, self.config.start_timeout_s)

    async def _start_kafka_brokers(self) -> None:
        assert self.quorum is not None
        cfg = self.config
        if cfg.unsafe:
            raise ValueError("the test-only unsafe flags are for the simulated fleet, not real Kafka brokers")
        await asyncio.to_thread(local_quorum.wait_for_kafka_listeners, self.quorum, cfg.start_timeout_s)
        directory = self.data_dir / local_quorum.KAFKA_BROKERS_DIR
        self.quorum.kafka_brokers_dir = str(directory.absolute())
        self.quorum.save()  # before the JVMs start: `quorum down` then stops them, whatever happens here
        voters = {i: self.quorum.node(i).kafka_address or "" for i in self.bootstrap_voters}
        self.kafka = await RealBrokers.start(
            directory,
            cluster_id=self.quorum.cluster_id,
            voters=voters,
            count=cfg.kafka_brokers,
            racks=cfg.racks,
            heartbeat_interval_ms=cfg.heartbeat_interval_ms,
        )

    async def _start_fleet(self) -> None:
        assert self.quorum is not None
        cfg = self.config
        ready = self.data_dir / "fleet-ready.json"
        ready.unlink(missing_ok=True)
        argv = [
            *raftmeta_command("--log-format", "json", "--log-level", "info", "brokers", "fleet"),
            "--bootstrap-server", self.quorum.bootstrap_server, "--brokers", str(cfg.brokers),
            "--racks", str(cfg.racks), "--heartbeat-interval-ms", str(cfg.heartbeat_interval_ms),
            "--catch-up-delay-ms", str(cfg.catch_up_delay_ms), "--ready-file", str(ready),
        ]  # fmt: skip
        # local_quorum's spawner: the fleet is then recorded, reaped and stopped like the nodes.
        self.quorum.brokers_pid = local_quorum.spawn(argv, self.data_dir / "logs" / "brokers.log")
        self.quorum.brokers_argv = argv
        self.quorum.save()
        deadline = time.monotonic() + cfg.start_timeout_s
        while not ready.exists():
            if time.monotonic() > deadline or not local_quorum.alive(self.quorum.brokers_pid):
                raise RuntimeError(f"the broker fleet did not start; see {self.data_dir / 'logs' / 'brokers.log'}")
            await asyncio.sleep(0.1)
        self.fleet_address = json.loads(ready.read_text())["address"]
        self._fleet_channel = grpc.aio.insecure_channel(self.fleet_address, options=grpc_channel_options())
        await asyncio.to_thread(local_quorum.wait_for_brokers, self.quorum, cfg.brokers, cfg.start_timeout_s)

    # -- process faults ---------------------------------------------------------------------------
    def running(self, node_id: int) -> bool:
        assert self.quorum is not None
        return local_quorum.alive(self.quorum.node(node_id).pid)

    def kill(self, node_id: int) -> None:
        assert self.quorum is not None
        if self.running(node_id):
            local_quorum.signal_node(self.quorum, node_id, signal.SIGKILL)
            self.paused.discard(node_id)
        self.killed.add(node_id)

    async def wait_dead(self, node_id: int, timeout_s: float = 5.0) -> None:
        deadline = time.monotonic() + timeout_s
        # A process exit has no event to await here (the Popen lives in local_quorum): poll it.
        while self.running(node_id) and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.02)

    def restart(self, node_id: int) -> None:
        assert self.quorum is not None
        if not self.running(node_id):
            local_quorum.restart(self.quorum, node_id)
        self.killed.discard(node_id)

    def pause(self, node_id: int) -> None:
        assert self.quorum is not None
        if self.running(node_id):
            local_quorum.signal_node(self.quorum, node_id, signal.SIGSTOP)
            self.paused.add(node_id)

    def resume(self, node_id: int) -> None:
        assert self.quorum is not None
        if self.running(node_id):
            local_quorum.signal_node(self.quorum, node_id, signal.SIGCONT)
        self.paused.discard(node_id)

    def unexpected_exits(self) -> list[str]:
        """Processes that are not running although nothing stopped them: crashes."""
        assert self.quorum is not None
        gone = [f"node {i}" for i in self.node_ids if i not in self.killed and not self.running(i)]
        if self.quorum.brokers_pid is not None and not local_quorum.alive(self.quorum.brokers_pid):
            gone.append("broker fleet")
        if self.kafka is not None:
            gone += self.kafka.unexpected_exits()
        return gone

    # -- broker faults (the fleet's control service) ------------------------------------------------
    async def fleet_call(self, method: str, broker_ids: list[int]) -> fleet_pb2.FleetStatus:
        assert self._fleet_channel is not None
        stub = fleet_pb2_grpc.BrokerFleetServiceStub(self._fleet_channel)
        status: fleet_pb2.FleetStatus = await getattr(stub, method)(
            fleet_pb2.FleetBrokerIds(broker_ids=broker_ids), timeout=5
        )
        return status

    # -- healing and teardown --------------------------------------------------------------------
    async def heal(self) -> None:
        """Every link passes, every paused node runs, every dead node restarts, every broker heartbeats
        (a real broker that was down or paused is registered and unfenced again when this returns)."""
        self.network.heal()
        for i in self.node_ids:
            self.resume(i)
            self.restart(i)
        if self._fleet_channel is not None:
            await self.fleet_call("RecoverBrokers", list(range(self.config.brokers)))
        if self.kafka is not None:
            self.kafka_heal_error = await self.kafka.heal()

    async def close(self) -> None:
        """Stop every process this run started (SIGCONT, SIGTERM, then SIGKILL) and the proxies."""
        if self._fleet_channel is not None:
            await self._fleet_channel.close(grace=None)
            self._fleet_channel = None
        if self.quorum is not None:
            await asyncio.to_thread(local_quorum.down, self.quorum)
        if self.mesh is not None:
            await self.mesh.close()
