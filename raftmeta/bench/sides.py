"""The two systems a comparison runs, each behind the same small interface: a raftmeta quorum
with its Kafka listeners, and a real KRaft cluster (:mod:`raftmeta.kraft.cluster`).

Both are started fresh in a folder of their own, both serve the Kafka protocol, and the
benchmarks' load (:mod:`raftmeta.bench.kafka_ops`) does not know which one it talks to. What
differs is where Kafka clients send admin requests: a raftmeta node's listener (any node forwards
to the leader; the commit benchmark points its clients at the leader, as its gRPC load does), or
a Kafka broker (which forwards to the active controller: the path Kafka users take).
"""

from __future__ import annotations

import abc
import asyncio
import signal
from collections.abc import Sequence
from pathlib import Path
from typing import Final, Literal

from raftmeta.bench.kafka_ops import KafkaError, QuorumState, describe_quorum
from raftmeta.kafka.connection import KafkaConnection

Fault = Literal["kill", "pause"]
PROBE_TIMEOUT_S: Final = 2.0
CLIENT_ID: Final = "raftmeta-bench"
# The simulated brokers' ISR check, pushed past the run (raftmeta/bench/commit.py says why).
FLEET_ISR_CHECK_INTERVAL_MS: Final = 3_600_000


class Side(abc.ABC):
    """One running system. ``name`` is its key in the results ("raftmeta" or "kraft")."""

    name: str

    @abc.abstractmethod
    def start(self) -> None: ...

    @abc.abstractmethod
    def admin_addresses(self, leader: int) -> list[str]:
        """Where Kafka clients send CreateTopics, best first, given the metadata log's leader."""

    @abc.abstractmethod
    def quorum_addresses(self) -> dict[int, str]:
        """Voter id -> the address that answers DescribeQuorum for it."""

    @abc.abstractmethod
    def voter_pids(self) -> dict[int, int]:
        """Voter id -> process id: raftmeta's nodes, KRaft's controllers."""

    @abc.abstractmethod
    def broker_pids(self) -> list[int]:
        """The processes that stand for brokers: raftmeta's simulated fleet, KRaft's brokers."""

    @abc.abstractmethod
    async def inject(self, fault: Fault, node_id: int) -> None: ...

    @abc.abstractmethod
    async def heal(self, fault: Fault, node_id: int) -> None: ...

    @abc.abstractmethod
    def stop(self) -> None: ...

    async def quorum_state(self) -> QuorumState:
        """The leader's DescribeQuorum: its view of the high watermark and voters' offsets (a
        KRaft controller that is not the leader answers NOT_LEADER_OR_FOLLOWER; a raftmeta
        follower answers from its own view, so the leader named is asked again)."""
        addresses = self.quorum_addresses()
        problems: list[str] = []
        for node_id, address in addresses.items():
            try:
                state = await _describe(address)
            except (OSError, TimeoutError, KafkaError) as exc:
                problems.append(f"{node_id}: {exc}")
                continue
            if state.leader_id == node_id:
                return state
            if state.leader_id in addresses:
                try:
                    leader_state = await _describe(addresses[state.leader_id])
                except (OSError, TimeoutError, KafkaError) as exc:
                    problems.append(f"{state.leader_id}: {exc}")
                    continue
                if leader_state.leader_id == state.leader_id:
                    return leader_state
        raise ConnectionError(f"{self.name}: no voter answered as the leader ({'; '.join(problems) or 'none'})")


async def _describe(address: str) -> QuorumState:
    connection = await KafkaConnection.open(address, CLIENT_ID, PROBE_TIMEOUT_S)
    try:
        return await describe_quorum(connection, PROBE_TIMEOUT_S)
    finally:
        await connection.close()


class RaftmetaSide(Side):
    """A local quorum of ``nodes`` node processes with Kafka listeners, and 3 simulated brokers;
    ``node_args`` are given to every node (``raftmeta node`` arguments, for A/B runs)."""

    name = "raftmeta"

    def __init__(self, work_dir: Path, nodes: int = 3, brokers: int = 3, node_args: Sequence[str] = ()) -> None:
        from raftmeta.local.quorum import LocalQuorum

        self.work_dir = work_dir
        self.nodes = nodes
        self.brokers = brokers
        self.node_args = list(node_args)
        self.quorum: LocalQuorum | None = None

    def start(self) -> None:
        from raftmeta.local import quorum as local_quorum

        self.quorum = local_quorum.up(
            self.work_dir,
            nodes=self.nodes,
            brokers=self.brokers,
            racks=min(3, self.brokers),
            kafka=True,
            metrics=False,
            node_args=self.node_args,
            fleet_args=["--isr-check-interval-ms", str(FLEET_ISR_CHECK_INTERVAL_MS)],
        )

    def admin_addresses(self, leader: int) -> list[str]:
        listeners = self.quorum_addresses()
        return [listeners[leader], *(a for node, a in sorted(listeners.items()) if node != leader)]

    def quorum_addresses(self) -> dict[int, str]:
        assert self.quorum is not None, "not started"
        return {n.id: n.kafka_address for n in self.quorum.nodes if n.kafka_address is not None}

    def voter_pids(self) -> dict[int, int]:
        assert self.quorum is not None, "not started"
        return {n.id: n.pid for n in self.quorum.nodes}

    def broker_pids(self) -> list[int]:
        assert self.quorum is not None, "not started"
        return [] if self.quorum.brokers_pid is None else [self.quorum.brokers_pid]

    async def inject(self, fault: Fault, node_id: int) -> None:
        from raftmeta.local import quorum as local_quorum

        assert self.quorum is not None, "not started"
        local_quorum.signal_node(self.quorum, node_id, signal.SIGKILL if fault == "kill" else signal.SIGSTOP)

    async def heal(self, fault: Fault, node_id: int) -> None:
        from raftmeta.bench.failover import wait_exit
        from raftmeta.local import quorum as local_quorum

        assert self.quorum is not None, "not started"
        if fault == "pause":
            local_quorum.signal_node(self.quorum, node_id, signal.SIGCONT)
            return
        await wait_exit(self.quorum.node(node_id).pid)
        await asyncio.to_thread(local_quorum.restart, self.quorum, node_id)

    def stop(self) -> None:
        from raftmeta.local import quorum as local_quorum

        if self.quorum is not None:
            local_quorum.down(self.quorum)


class KraftSide(Side):
    """A real KRaft cluster: 3 controllers and ``brokers`` brokers (Kafka's JVMs)."""

    name = "kraft"

    def __init__(self, work_dir: Path, controllers: int = 3, brokers: int = 3) -> None:
        from raftmeta.kraft.cluster import KraftCluster

        self.work_dir = work_dir
        self.controllers = controllers
        self.brokers = brokers
        self.cluster: KraftCluster | None = None

    def start(self) -> None:
        """Start the cluster (the launcher starts a node whose port was taken again on a new one)."""
        from raftmeta.kraft.cluster import KraftCluster

        self.cluster = KraftCluster.start(
            self.work_dir, controllers=self.controllers, brokers=self.brokers, racks=min(3, self.brokers)
        )

    def admin_addresses(self, leader: int) -> list[str]:
        assert self.cluster is not None, "not started"
        return [n.address for n in self.cluster.nodes if n.role == "broker"]

    def quorum_addresses(self) -> dict[int, str]:
        assert self.cluster is not None, "not started"
        return {n.node_id: n.address for n in self.cluster.nodes if n.role == "controller"}

    def voter_pids(self) -> dict[int, int]:
        assert self.cluster is not None, "not started"
        return {n.node_id: n.pid for n in self.cluster.nodes if n.role == "controller"}

    def broker_pids(self) -> list[int]:
        assert self.cluster is not None, "not started"
        return [n.pid for n in self.cluster.nodes if n.role == "broker"]

    async def inject(self, fault: Fault, node_id: int) -> None:
        assert self.cluster is not None, "not started"
        cluster = self.cluster
        if fault == "kill":
            # In a thread: kill() waits for the process to be gone, the load's acks keep coming.
            await asyncio.to_thread(cluster.kill, node_id)
        else:
            cluster.pause(node_id)

    async def heal(self, fault: Fault, node_id: int) -> None:
        assert self.cluster is not None, "not started"
        if fault == "pause":
            self.cluster.resume(node_id)
        else:
            await asyncio.to_thread(self.cluster.restart, node_id)

    def stop(self) -> None:
        if self.cluster is not None:
            self.cluster.stop()


def make_side(
    name: str, work_dir: Path, voters: int = 3, brokers: int = 3, raftmeta_node_args: Sequence[str] = ()
) -> Side:
    """A side by its results key, to be started in ``work_dir``: ``voters`` raftmeta nodes or
    KRaft controllers, ``brokers`` simulated or real brokers; ``raftmeta_node_args`` go to
    raftmeta's nodes only (a KRaft side refuses them: they are no Kafka settings)."""
    if name == "raftmeta":
        return RaftmetaSide(work_dir, voters, brokers, raftmeta_node_args)
    if name == "kraft":
        if raftmeta_node_args:
            raise ValueError(f"raftmeta node arguments do not apply to KRaft: {list(raftmeta_node_args)}")
        return KraftSide(work_dir, voters, brokers)
    raise ValueError(f"side must be raftmeta or kraft, got {name!r}")
