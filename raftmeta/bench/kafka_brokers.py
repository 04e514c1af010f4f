"""Simulated brokers for a real KRaft quorum: processes' worth of brokers without their JVMs.

``bench scale --target kraft|both`` measures the controller quorum, not brokers: a million
partitions on real brokers would be three million replica logs on two cores. So, as raftmeta's
simulated fleet does for raftmeta, these brokers do what a broker does towards its controller and
nothing else: each sends BrokerRegistration (api 62) to the active controller over its controller
listener, then BrokerHeartbeat (api 63) every ``HEARTBEAT_INTERVAL_S`` (a broker's
``broker.heartbeat.interval.ms``, 2 s by default; the controller fences a broker it has not heard
from in ``broker.session.timeout.ms``, 9 s), asking to be unfenced. Kafka's
BrokerHeartbeatManager unfences a broker once the heartbeat's ``currentMetadataOffset`` reaches
its RegisterBrokerRecord's offset; these brokers replay no log, so each round of heartbeats
reports the quorum's high watermark (DescribeQuorum, asked just before): where a real broker that
keeps up with the log would be. KRaft's placer then
places replicas on them as on real brokers: same ids, racks and count as raftmeta's fleet.

A broker registers with the features the controller itself supports (ApiVersions), as a broker
of the same release would: the controller refuses a registration that lacks a finalized feature.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from raftmeta.bench.kafka_ops import KafkaError, describe_quorum
from raftmeta.kafka.connection import KafkaConnection
from raftmeta.logs import get_logger

BROKER_REGISTRATION: Final = (62, 4)
BROKER_HEARTBEAT: Final = (63, 1)
API_VERSIONS: Final = (18, 3)
HEARTBEAT_INTERVAL_S: Final = 2.0
CALL_TIMEOUT_S: Final = 30.0
CLIENT_ID: Final = "raftmeta-simulated-broker"
PLAINTEXT: Final = 0  # SecurityProtocol.PLAINTEXT's id
# The port each simulated broker advertises: nothing listens there (no client is sent to them).
ADVERTISED_PORT_BASE: Final = 19_000
log = get_logger("bench.kafka-brokers")


@dataclass(frozen=True, slots=True)
class SimulatedBroker:
    broker_id: int
    rack: str | None
    incarnation_id: uuid.UUID = field(default_factory=uuid.uuid4)
    log_dir: uuid.UUID = field(default_factory=uuid.uuid4)


def registration(broker: SimulatedBroker, cluster_id: str, features: Sequence[tuple[str, int, int]]) -> dict[str, Any]:
    """BrokerRegistration v4's values for ``broker`` (pure): one PLAINTEXT listener, one log
    directory, the features as (name, min, max)."""
    return {
        "broker_id": broker.broker_id,
        "cluster_id": cluster_id,
        "incarnation_id": broker.incarnation_id,
        "listeners": [
            {
                "name": "PLAINTEXT",
                "host": "127.0.0.1",
                "port": ADVERTISED_PORT_BASE + broker.broker_id,
                "security_protocol": PLAINTEXT,
            }
        ],
        "features": [{"name": n, "min_supported_version": lo, "max_supported_version": hi} for n, lo, hi in features],
        "rack": broker.rack,
        "is_migrating_zk_broker": False,
        "log_dirs": [broker.log_dir],
        "previous_broker_epoch": -1,
    }


async def supported_features(connection: KafkaConnection) -> list[tuple[str, int, int]]:
    """The features to declare at registration, from the controller's ApiVersions v3: what it
    supports, and every finalized feature up to its finalized level (the controller refuses a
    broker whose range leaves out a finalized level)."""
    api_key, version = API_VERSIONS
    values = {"client_software_name": "raftmeta-bench", "client_software_version": "1"}
    response = await connection.call(api_key, version, values, CALL_TIMEOUT_S)
    if response.error_code.value != 0:
        raise KafkaError(response.error_code.value, response.error_code.name, None)
    supported = {f.name: (int(f.min_version), int(f.max_version)) for f in response.supported_features}
    # A controller lists only metadata.version as supported; a broker supports every finalized
    # feature from level 0 (features a broker lacks are level 0) up to at least the finalized one.
    for finalized in response.finalized_features:
        supported.setdefault(finalized.name, (0, int(finalized.max_version_level)))
    return [(name, low, high) for name, (low, high) in sorted(supported.items())]


@dataclass
class BrokerFleet:
    """``brokers`` simulated brokers registered with, and heartbeating to, the controller at
    ``controller`` (the active one); :meth:`close` stops the heartbeats (the controller then
    fences them, as brokers that went away)."""

    cluster_id: str
    brokers: list[SimulatedBroker]
    connection: KafkaConnection | None = None
    epochs: dict[int, int] = field(default_factory=dict)
    fenced: set[int] = field(default_factory=set)
    metadata_offset: int = 0
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    async def start(self, controller: str) -> None:
        """Register every broker, start heartbeating, and return once each is unfenced."""
        self.connection = await KafkaConnection.open(controller, CLIENT_ID, CALL_TIMEOUT_S)
        features = await supported_features(self.connection)
        for broker in self.brokers:
            api_key, version = BROKER_REGISTRATION
            answer = await self.connection.call(
                api_key, version, registration(broker, self.cluster_id, features), CALL_TIMEOUT_S
            )
            if answer.error_code.value != 0:
                raise KafkaError(
                    answer.error_code.value, answer.error_code.name, f"registering broker {broker.broker_id}"
                )
            self.epochs[broker.broker_id] = int(answer.broker_epoch)
        self.fenced = {b.broker_id for b in self.brokers}
        self.metadata_offset = (await describe_quorum(self.connection, CALL_TIMEOUT_S)).high_watermark
        # Each broker heartbeats on its own connection, on its own clock, as real brokers do: one
        # slow answer delays that broker's next heartbeat only.
        self._tasks = [asyncio.create_task(self._offsets(controller))]
        self._tasks += [asyncio.create_task(self._heartbeats(controller, b.broker_id)) for b in self.brokers]
        while self.fenced:
            await asyncio.sleep(0.1)
            for task in self._tasks:
                if task.done():
                    task.result()  # a heartbeat loop that failed at start raises here
        log.info("simulated brokers unfenced", brokers=len(self.brokers), controller=controller)

    async def _offsets(self, controller: str) -> None:
        """The quorum's high watermark every heartbeat interval: the offset the brokers report."""
        assert self.connection is not None, "not started"
        while True:
            await asyncio.sleep(HEARTBEAT_INTERVAL_S)
            try:
                self.metadata_offset = (await describe_quorum(self.connection, CALL_TIMEOUT_S)).high_watermark
            except (KafkaError, OSError, TimeoutError) as exc:
                log.warning("simulated brokers' offset refresh failed", error=str(exc))
                if self.connection.broken:
                    with contextlib.suppress(OSError, TimeoutError):
                        self.connection = await KafkaConnection.open(controller, CLIENT_ID, CALL_TIMEOUT_S)

    async def _heartbeats(self, controller: str, broker_id: int) -> None:
        api_key, version = BROKER_HEARTBEAT
        connection: KafkaConnection | None = None
        try:
            while True:
                try:
                    if connection is None or connection.broken:
                        connection = await KafkaConnection.open(controller, CLIENT_ID, CALL_TIMEOUT_S)
                    values = {"broker_id": broker_id, "broker_epoch": self.epochs[broker_id],
                              "current_metadata_offset": self.metadata_offset, "want_fence": False,
                              "want_shut_down": False, "offline_log_dirs": []}  # fmt: skip
                    answer = await connection.call(api_key, version, values, CALL_TIMEOUT_S)
                    if answer.error_code.value != 0:
                        raise KafkaError(answer.error_code.value, answer.error_code.name, f"broker {broker_id}")
                    if answer.is_fenced:
                        self.fenced.add(broker_id)
                    else:
                        self.fenced.discard(broker_id)
                except (KafkaError, OSError, TimeoutError) as exc:
                    # A fenced fleet shows in the run (placement fails, the creation stops); go on.
                    log.warning("simulated broker's heartbeat failed", broker_id=broker_id, error=str(exc))
                await asyncio.sleep(HEARTBEAT_INTERVAL_S)
        finally:
            if connection is not None:
                await connection.close()

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, KafkaError, OSError, TimeoutError):
                await task
        if self.connection is not None:
            await self.connection.close()
