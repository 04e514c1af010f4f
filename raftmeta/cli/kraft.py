"""``raftmeta kraft up|down|status``: a real Apache Kafka KRaft cluster beside raftmeta
(docs/kafka-peer.md). The JVMs outlive ``up``; ``down`` and ``status`` find them through
DATA_DIR/kraft.json."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from raftmeta.cli.common import CheckFailed, FlagConflict, emit_json, int_range, output_option, usage_error

if TYPE_CHECKING:
    from raftmeta.kraft.cluster import KraftCluster

DATA_DIR = click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="The cluster's directory (kraft.json, and one folder per node).",
)
# As many brokers as raftmeta's simulated fleet has ids for racks to mean the same on both sides.
BROKERS_MAX = 99


@click.group()
def kraft() -> None:
    """Run a real Apache Kafka KRaft cluster (the pinned release's JVMs) on loopback."""


def _parse_config(pairs: tuple[str, ...], flag: str) -> dict[str, str]:
    config = {}
    for pair in pairs:
        key, separator, value = pair.partition("=")
        if not separator or not key.strip():
            raise usage_error(f"{pair!r} is not KEY=VALUE", flag)
        config[key.strip()] = value
    return config


@kraft.command("up")
@DATA_DIR
@click.option("--controllers", type=int_range(1, 9), default=3, show_default=True, help="KRaft controllers (voters).")
@click.option("--brokers", type=int_range(1, BROKERS_MAX), default=3, show_default=True, help="Kafka brokers.")
@click.option(
    "--racks",
    type=int_range(1, BROKERS_MAX),
    default=3,
    show_default=True,
    help="Racks of the brokers: broker i is in rack i mod racks (rack-a, ...), as in raftmeta's fleet.",
)
@click.option(
    "--cluster-id", default=None, help="Kafka cluster id (default: a new one from kafka-storage random-uuid)."
)
@click.option("--broker-config", "broker_config", multiple=True, metavar="KEY=VALUE",
              help="A server.properties setting for every broker (repeatable).")  # fmt: skip
@click.option("--controller-config", "controller_config", multiple=True, metavar="KEY=VALUE",
              help="A server.properties setting for every controller (repeatable).")  # fmt: skip
@click.option("--heap-max-mb", type=int_range(64, 65536), default=512, show_default=True, help="-Xmx of every JVM.")
@click.option("--timeout", type=click.FloatRange(min=1), default=180.0, show_default=True,
              help="Seconds each node may take to become ready.")  # fmt: skip
@click.option("--print-bootstrap-server", is_flag=True,
              help="Print only the brokers' bootstrap servers on stdout (the rest goes to stderr), for "
              "B=$(raftmeta kraft up ... --print-bootstrap-server).")  # fmt: skip
@output_option
def up(
    data_dir: Path,
    controllers: int,
    brokers: int,
    racks: int,
    cluster_id: str | None,
    broker_config: tuple[str, ...],
    controller_config: tuple[str, ...],
    heap_max_mb: int,
    timeout: float,
    print_bootstrap_server: bool,
    output: str,
) -> None:
    """Format storage with Kafka's storage tool and start the controllers and brokers; return once
    the quorum has a leader and every broker is registered and unfenced (the JVMs keep running)."""
    from raftmeta.kraft.classpath import KafkaNotResolved
    from raftmeta.kraft.cluster import KraftCluster
    from raftmeta.kraft.node_config import JvmSettings
    from raftmeta.kraft.storage_tool import StorageToolError

    if print_bootstrap_server and output == "json":
        raise FlagConflict("--print-bootstrap-server", "--output json", "the JSON document has bootstrap_servers")
    if racks > brokers:
        raise usage_error(f"--racks ({racks}) cannot exceed --brokers ({brokers})", "--racks")
    brokers_config = _parse_config(broker_config, "--broker-config")
    controllers_config = _parse_config(controller_config, "--controller-config")
    began = time.monotonic()
    try:
        cluster = KraftCluster.start(
            data_dir,
            controllers=controllers,
            brokers=brokers,
            racks=racks,
            cluster_id=cluster_id,
            broker_config=brokers_config,
            controller_config=controllers_config,
            jvm=JvmSettings(heap_max_mb=heap_max_mb),
            ready_timeout_s=timeout,
        )
    except (KafkaNotResolved, StorageToolError, RuntimeError, OSError, ValueError) as exc:
        raise CheckFailed(str(exc)) from exc
    document = {**cluster_document(cluster), "ready_s": round(time.monotonic() - began, 3)}
    if output == "json":
        emit_json(document)
        return
    if print_bootstrap_server:
        click.echo(cluster.bootstrap_servers)
    to_stderr = print_bootstrap_server  # stdout holds the bootstrap servers alone
    click.echo(
        f"KRaft cluster {cluster.cluster_id} up in {document['ready_s']} s: "
        f"{controllers} controllers, {brokers} brokers in {racks} racks",
        err=to_stderr,
    )
    click.echo(f"  bootstrap.servers={cluster.bootstrap_servers}", err=to_stderr)
    click.echo(f"  --bootstrap-controller {cluster.controller_bootstrap_servers}", err=to_stderr)
    for node in cluster.nodes:
        rack = f" {node.rack}" if node.rack else ""
        click.echo(
            f"  {node.role} {node.node_id}{rack}: pid {node.pid} at {node.address}, log {node.log}", err=to_stderr
        )


@kraft.command("down")
@DATA_DIR
@click.option("--timeout", type=click.FloatRange(min=0.1), default=60.0, show_default=True,
              help="Seconds to wait after SIGTERM (brokers, then controllers) before SIGKILL.")  # fmt: skip
@output_option
def down(data_dir: Path, timeout: float, output: str) -> None:
    """Stop every node of the cluster: brokers, then controllers (SIGTERM, then SIGKILL)."""
    cluster = _load(data_dir)
    stopped = cluster.stop(timeout)
    if output == "json":
        emit_json({"stopped_pids": stopped})
    else:
        click.echo(f"stopped {len(stopped)} processes")


@kraft.command("status")
@DATA_DIR
@output_option
def status(data_dir: Path, output: str) -> None:
    """Each node (running or not) and the quorum's leader. Exit 1 when a node is not running or
    no controller answers as the leader."""
    from raftmeta.kraft.cluster import KraftNodeError
    from raftmeta.local.quorum import alive

    cluster = _load(data_dir)
    try:
        leader: int | None = cluster.active_controller()
    except KraftNodeError:
        leader = None
    document = cluster_document(cluster)
    for row, node in zip(document["nodes"], cluster.nodes, strict=True):
        row["running"] = alive(node.pid)
    document["active_controller"] = leader
    stopped = [row["node_id"] for row in document["nodes"] if not row["running"]]
    if output == "json":
        emit_json(document)
    else:
        click.echo(f"KRaft cluster {cluster.cluster_id}: active controller {leader if leader is not None else 'none'}")
        for row in document["nodes"]:
            state = "running" if row["running"] else "not running"
            click.echo(f"  {row['role']} {row['node_id']}: {state} (pid {row['pid']}) at {row['address']}")
    if stopped or leader is None:
        problems = [f"nodes {stopped} are not running"] if stopped else []
        problems += [] if leader is not None else ["no controller answers as the quorum's leader"]
        raise CheckFailed("; ".join(problems), code="KRAFT_UNHEALTHY")


def cluster_document(cluster: KraftCluster) -> dict[str, Any]:
    """The cluster as ``--output json`` prints it (kraft.json without the command lines)."""
    return {
        "cluster_id": cluster.cluster_id,
        "data_dir": str(cluster.data_dir),
        "bootstrap_servers": cluster.bootstrap_servers,
        "controller_bootstrap_servers": cluster.controller_bootstrap_servers,
        "nodes": [
            {
                "node_id": n.node_id,
                "role": n.role,
                "pid": n.pid,
                "address": n.address,
                "rack": n.rack,
                "log": str(n.log),
            }
            for n in cluster.nodes
        ],
    }


def _load(data_dir: Path) -> KraftCluster:
    from raftmeta.kraft.cluster import KraftCluster

    try:
        return KraftCluster.load(data_dir)
    except FileNotFoundError as exc:
        raise usage_error(str(exc), "--data-dir") from exc
    except ValueError as exc:
        raise CheckFailed(str(exc)) from exc
