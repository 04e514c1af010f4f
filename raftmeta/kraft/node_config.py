"""What a launched Kafka node is told: its server.properties, its log4j2 config and its JVM flags.

Pure text building (no IO), so the rules are in one place and can be read in a test.

The quorum is dynamic (KIP-853), as a 3-controller deployment is set up today: controllers are
found through ``controller.quorum.bootstrap.servers`` and the voter set is written into the
metadata log by ``kafka-storage format --initial-controllers`` (each voter is its node id *and*
its log directory's id), not fixed in every node's config by ``controller.quorum.voters``.
Kafka 4's own docs and quickstart format this way; it is what lets ``kafka-metadata-quorum
add-controller/remove-controller`` change the quorum later, and what raftmeta's ``quorum up``
does too.

Isolated mode: ``process.roles`` is ``controller`` or ``broker``, never both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

Role = Literal["controller", "broker"]

HOST: Final = "127.0.0.1"
CONTROLLER_LISTENER: Final = "CONTROLLER"
BROKER_LISTENER: Final = "PLAINTEXT"
# Kafka's own test kit (KafkaClusterTestKit) numbers controllers from 3000 up; KRaft node ids are
# distinct across roles, and brokers keep 0..B-1 as raftmeta's simulated fleet numbers them.
CONTROLLER_ID_BASE: Final = 3000


def controller_id(index: int) -> int:
    """The node id of controller ``index`` (0-based): 3001, 3002, ..."""
    return CONTROLLER_ID_BASE + 1 + index


@dataclass(frozen=True, slots=True)
class JvmSettings:
    """Heap and collector of every launched JVM, sized for a small shared machine (2 cores).

    SerialGC: one GC thread, no concurrent marking threads competing with the six JVMs and the
    workload for two cores, and the smallest footprint; at heaps of a few hundred MB its pauses
    are a few milliseconds. The initial heap is small so RSS shows what a node uses, not what it
    reserved. No ``-XX:TieredStopAtLevel=1``: it starts a little faster but leaves the JIT at C1,
    which would make every benchmark against this cluster slower than Kafka really is.
    Benchmarks with millions of partitions raise ``heap_max_mb`` (and may pick G1).
    """

    heap_initial_mb: int = 64
    heap_max_mb: int = 512
    gc: str = "UseSerialGC"
    extra: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not 16 <= self.heap_initial_mb <= self.heap_max_mb:
            raise ValueError(
                f"heap_initial_mb ({self.heap_initial_mb}) must be at least 16 and at most heap_max_mb "
                f"({self.heap_max_mb})"
            )

    def flags(self) -> list[str]:
        return [
            f"-Xms{self.heap_initial_mb}m",
            f"-Xmx{self.heap_max_mb}m",
            f"-XX:+{self.gc}",
            # Kafka's kafka-run-class.sh defaults that do not depend on the collector.
            "-XX:MaxInlineLevel=15",
            "-Djava.awt.headless=true",
            # A JVM that runs out of heap should die (and be seen dead), not limp on.
            "-XX:+ExitOnOutOfMemoryError",
            *self.extra,
        ]


def jvm_argv(java: str, classpath: str, settings: JvmSettings, log4j_config: Path, node_dir: Path) -> list[str]:
    """``java ... kafka.Kafka server.properties``: the command kafka-server-start.sh runs."""
    return [
        java,
        *settings.flags(),
        f"-Dlog4j2.configurationFile={log4j_config}",
        f"-Dkafka.logs.dir={node_dir}",
        "-cp",
        classpath,
        "kafka.Kafka",
        str(node_dir / "server.properties"),
    ]


def controller_properties(
    node_id: int,
    address: str,
    bootstrap_controllers: Sequence[str],
    log_dir: Path,
    overrides: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """A controller of the dynamic quorum, listening on ``address``."""
    properties = {
        "process.roles": "controller",
        "node.id": str(node_id),
        "controller.quorum.bootstrap.servers": ",".join(bootstrap_controllers),
        "listeners": f"{CONTROLLER_LISTENER}://{address}",
        "advertised.listeners": f"{CONTROLLER_LISTENER}://{address}",
        "controller.listener.names": CONTROLLER_LISTENER,
        "listener.security.protocol.map": f"{CONTROLLER_LISTENER}:PLAINTEXT",
        "log.dirs": str(log_dir),
    }
    return {**properties, **(overrides or {})}


def broker_properties(
    node_id: int,
    address: str,
    rack: str,
    bootstrap_controllers: Sequence[str],
    log_dir: Path | Sequence[Path],
    brokers: int,
    overrides: Mapping[str, str] | None = None,
    *,
    static_voters: Mapping[int, str] | None = None,
) -> dict[str, str]:
    """A broker in ``rack`` with one PLAINTEXT listener on ``address``; the internal topics'
    replication is capped at the number of brokers, so a 1-broker cluster can serve groups.
    ``static_voters`` (voter id -> Kafka listener): the controllers as Kafka's static voters
    (``controller.quorum.voters``) instead of bootstrap servers -- a raftmeta quorum's log holds
    no voter set until its voters change, so a broker reading it from offset 0 learns where the
    controllers are from its configuration, as with a KRaft quorum of static voters."""
    replicas = str(min(3, brokers))
    min_isr = str(min(2, brokers))
    if static_voters is not None:
        if bootstrap_controllers:
            raise ValueError("a broker takes static voters or bootstrap controllers, not both")
        quorum = {"controller.quorum.voters": ",".join(f"{i}@{a}" for i, a in sorted(static_voters.items()))}
    else:
        quorum = {"controller.quorum.bootstrap.servers": ",".join(bootstrap_controllers)}
    properties = {
        "process.roles": "broker",
        "node.id": str(node_id),
        "broker.rack": rack,
        **quorum,
        "listeners": f"{BROKER_LISTENER}://{address}",
        "advertised.listeners": f"{BROKER_LISTENER}://{address}",
        "inter.broker.listener.name": BROKER_LISTENER,
        "controller.listener.names": CONTROLLER_LISTENER,
        "listener.security.protocol.map": f"{CONTROLLER_LISTENER}:PLAINTEXT,{BROKER_LISTENER}:PLAINTEXT",
        # Several (JBOD, KIP-858): each replica in one of them, the metadata log in the first.
        "log.dirs": str(log_dir) if isinstance(log_dir, Path) else ",".join(str(d) for d in log_dir),
        "offsets.topic.replication.factor": replicas,
        "transaction.state.log.replication.factor": replicas,
        "transaction.state.log.min.isr": min_isr,
        "share.coordinator.state.topic.replication.factor": replicas,
        "share.coordinator.state.topic.min.isr": min_isr,
        # No 3 s wait before the first consumer group rebalances (Kafka's quickstart sets 0 too).
        "group.initial.rebalance.delay.ms": "0",
    }
    return {**properties, **(overrides or {})}


def render_properties(properties: Mapping[str, str]) -> str:
    """A Java properties file; values here never hold the characters properties files escape."""
    for key, value in properties.items():
        if "\n" in key or "\n" in value or "=" in key:
            raise ValueError(f"property {key!r}: keys must not hold '=' or newlines, values no newlines")
    return "".join(f"{key}={value}\n" for key, value in properties.items())


def log4j2_properties(log_file: Path) -> str:
    """Every logger of the node into ``log_file`` (Kafka's layout), INFO and up, as the node's
    own record of what it did; the request logger stays at WARN, as Kafka ships it."""
    return "".join(
        f"{line}\n"
        for line in (
            "status = warn",
            "name = raftmeta-kraft-node",
            "appender.file.type = File",
            "appender.file.name = FILE",
            f"appender.file.fileName = {log_file}",
            "appender.file.append = true",
            "appender.file.layout.type = PatternLayout",
            "appender.file.layout.pattern = [%d] %p %m (%c)%n",
            "rootLogger.level = INFO",
            "rootLogger.appenderRef.file.ref = FILE",
            "logger.request.name = kafka.request.logger",
            "logger.request.level = WARN",
        )
    )
