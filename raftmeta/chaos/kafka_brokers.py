"""Real Apache Kafka brokers in a chaos run (``raftmeta chaos --kafka-brokers N``): started by
the KRaft launcher on the nodes' Kafka listeners, broken on purpose by the nemesis (SIGKILL,
SIGSTOP, a restart through controlled shutdown) and healed at the end.

Every JVM call here blocks (the launcher polls the brokers), so the chaos process runs them in a
thread. A broker down or paused on purpose is remembered until it runs again, so that a broker
that exits on its own is reported as a crash, as a node is.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from raftmeta.kraft.cluster import KraftCluster, KraftNodeError
from raftmeta.local import quorum as local_quorum


@dataclass
class RealBrokers:
    cluster: KraftCluster
    killed: set[int] = field(default_factory=set)  # down on purpose (SIGKILL or stopped), until started
    paused: set[int] = field(default_factory=set)

    @classmethod
    async def start(
        cls,
        directory: Path,
        *,
        cluster_id: str,
        voters: Mapping[int, str],
        count: int,
        racks: int,
        heartbeat_interval_ms: int,
    ) -> RealBrokers:
        """Format and start ``count`` brokers (ids from ``KAFKA_BROKER_FIRST_ID``) on the voters'
        Kafka listeners; return once each is registered and unfenced (the launcher's ready
        timeout bounds it). They heartbeat as often as the simulated fleet would, so that the
        run's short broker session does not fence a live broker on a loaded machine."""
        cluster = await asyncio.to_thread(
            KraftCluster.start_brokers_on,
            directory,
            cluster_id=cluster_id,
            voters=voters,
            brokers=count,
            racks=racks,
            first_broker_id=local_quorum.KAFKA_BROKER_FIRST_ID,
            broker_config={"broker.heartbeat.interval.ms": str(heartbeat_interval_ms)},
        )
        return cls(cluster)

    @property
    def ids(self) -> list[int]:
        return [n.node_id for n in self.cluster.brokers]

    @property
    def addresses(self) -> dict[int, str]:
        """Each broker's PLAINTEXT listener (its Kafka clients' address)."""
        return {n.node_id: n.address for n in self.cluster.brokers}

    @property
    def bootstrap_servers(self) -> str:
        return self.cluster.bootstrap_servers

    @property
    def ready_timeout_s(self) -> float:
        return self.cluster.ready_timeout_s

    def running(self, broker_id: int) -> bool:
        return local_quorum.alive(self.cluster.node(broker_id).pid)

    async def kill(self, broker_id: int) -> None:
        """SIGKILL (a crash), returning once the process is gone."""
        self.killed.add(broker_id)
        self.paused.discard(broker_id)
        if self.running(broker_id):
            await asyncio.to_thread(self.cluster.kill, broker_id)

    async def stop(self, broker_id: int) -> None:
        """SIGTERM, as kafka-server-stop sends it: the broker asks for its controlled shutdown and
        exits once granted (SIGKILL after the launcher's stop timeout)."""
        self.killed.add(broker_id)
        await asyncio.to_thread(self.cluster.stop_node, broker_id)

    def pause(self, broker_id: int) -> None:
        if self.running(broker_id):
            self.cluster.pause(broker_id)
            self.paused.add(broker_id)

    def resume(self, broker_id: int) -> None:
        if broker_id in self.paused and self.running(broker_id):
            self.cluster.resume(broker_id)
        self.paused.discard(broker_id)

    async def start_and_wait(self, broker_id: int) -> None:
        """Start a broker that is down with its storage and config; return once it sees itself
        registered and unfenced (KraftNodeError when it exits first or the ready timeout passes)."""
        if not self.running(broker_id):
            await asyncio.to_thread(self.cluster.start_node, broker_id)
        self.killed.discard(broker_id)
        await asyncio.to_thread(self.cluster.wait_ready, [broker_id])

    async def wait_ready(self, broker_id: int) -> None:
        await asyncio.to_thread(self.cluster.wait_ready, [broker_id])

    async def heal(self) -> str | None:
        """Every paused broker resumed, every broker that is down started; return once each of
        them is registered and unfenced again (None), or what went wrong (a broker that exited or
        was not ready within the launcher's ready timeout, with its log's tail): the run's checks
        report it, and go on with the brokers that came back."""
        touched = sorted(self.paused | {i for i in self.ids if not self.running(i)})
        for broker_id in touched:
            self.resume(broker_id)
            if not self.running(broker_id):
                await asyncio.to_thread(self.cluster.start_node, broker_id)
            self.killed.discard(broker_id)
        if not touched:
            return None
        try:
            await asyncio.to_thread(self.cluster.wait_ready, touched)
        except KraftNodeError as exc:
            return str(exc)
        return None

    def unexpected_exits(self) -> list[str]:
        return [f"Kafka broker {i}" for i in self.ids if i not in self.killed and not self.running(i)]
