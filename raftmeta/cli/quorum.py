"""``raftmeta quorum up|down|bootstrap|status|top|add-controller|remove-controller|kill|restart|pause|resume``:
a local quorum of real processes, and its voters."""

from __future__ import annotations

import shlex
import signal
import time
from pathlib import Path
from typing import Any

import click

from raftmeta.cli.brokers import FLEET_BROKERS_MAX, parse_pools
from raftmeta.cli.common import NODE_ID, CheckFailed, FlagConflict, emit_json, int_range, output_option, usage_error
from raftmeta.cli.connect import connect, tls_options
from raftmeta.raft.voters import format_directory_id
from raftmeta.v1 import controller_pb2

DATA_DIR = click.option(
    "--data-dir", type=click.Path(file_okay=False, path_type=Path), required=True, help="The quorum's directory."
)
NODE = click.option("--node", "node_id", type=NODE_ID, required=True, help="Node id.")


@click.group()
def quorum() -> None:
    """Run a local quorum of node processes on loopback and act on its nodes."""


@quorum.command("up")
@DATA_DIR
@click.option("--nodes", type=int_range(1, 9), default=3, show_default=True, help="Number of voters.")
@click.option(
    "--observers",
    type=int_range(0, 9),
    default=0,
    show_default=True,
    help="Extra nodes that start as observers (make them voters with quorum add-controller).",
)
@click.option("--brokers", type=int_range(0, FLEET_BROKERS_MAX), default=0, show_default=True,
              help="Simulated brokers to run.")  # fmt: skip
@click.option("--racks", type=int_range(0, FLEET_BROKERS_MAX), default=3, show_default=True,
              help="Racks of the brokers.")  # fmt: skip
@click.option("--pool", "pools", multiple=True, help="Broker pool NAME=IDS for the fleet, e.g. fast=0-2.")
@click.option("--snapshot-interval-records", type=int_range(1), default=None, help="Passed to every node.")
@click.option("--session-timeout-ms", type=int_range(10), default=None, help="Broker session timeout.")
@click.option("--leader-imbalance-check-interval-seconds", type=int_range(1), default=None,
              help="Passed to every node: how often leaders move back to preferred replicas "
              "(default 300, Kafka's leader.imbalance.check.interval.seconds).")  # fmt: skip
@click.option("--replica-lag-time-max-ms", type=int_range(1), default=None,
              help="Passed to the fleet: a follower down this long leaves its ISRs (default 30000).")  # fmt: skip
@click.option("--heartbeat-interval-ms", type=int_range(10), default=1000, show_default=True)
@click.option("--catch-up-delay-ms", type=int_range(0), default=None,
              help="How long a simulated broker takes to copy a partition it is told to add "
              "(reassignment); the fleet's default is 2000.")  # fmt: skip
@click.option("--tls", is_flag=True,
              help="Mutual TLS between all processes, with throwaway certificates made in DATA_DIR/tls.")  # fmt: skip
@click.option("--kafka", is_flag=True,
              help="Every node also serves Kafka admin clients (docs/kafka-protocol.md).")  # fmt: skip
@click.option(
    "--kafka-brokers",
    type=int_range(0, 99),
    default=0,
    show_default=True,
    help="Real Apache Kafka brokers (ids from 100, in --racks racks) on the nodes' Kafka listeners "
    "(turns --kafka on; needs Java and `make kafka`). Not with --brokers.",
)
@click.option(
    "--kafka-broker-log-dirs",
    type=int_range(1, 16),
    default=1,
    show_default=True,
    help="Log directories of each real Kafka broker (JBOD): with several, each new replica waits for "
    "its broker to say which holds it (AssignReplicasToDirs, KIP-858).",
)
@click.option("--detach", is_flag=True, help="Return once a leader is elected (and brokers registered).")
@click.option("--print-bootstrap-server", is_flag=True,
              help="Print only the bootstrap server on stdout (the rest goes to stderr), for B=$(raftmeta quorum up "
              "... --detach --print-bootstrap-server).")  # fmt: skip
@output_option
def up(
    data_dir: Path,
    nodes: int,
    observers: int,
    brokers: int,
    racks: int,
    pools: tuple[str, ...],
    snapshot_interval_records: int | None,
    session_timeout_ms: int | None,
    leader_imbalance_check_interval_seconds: int | None,
    replica_lag_time_max_ms: int | None,
    heartbeat_interval_ms: int,
    catch_up_delay_ms: int | None,
    tls: bool,
    kafka: bool,
    kafka_brokers: int,
    kafka_broker_log_dirs: int,
    detach: bool,
    print_bootstrap_server: bool,
    output: str,
) -> None:
    """Start the quorum; in the foreground unless --detach (Ctrl-C stops it)."""
    from raftmeta.local import quorum as local_quorum

    if print_bootstrap_server and output == "json":
        raise FlagConflict("--print-bootstrap-server", "--output json", "the JSON document has bootstrap_server")
    if brokers and racks > brokers:
        raise usage_error(f"--racks ({racks}) cannot exceed --brokers ({brokers})", "--racks")
    if kafka_brokers and brokers:
        raise FlagConflict("--brokers", "--kafka-brokers", "a quorum runs simulated or real brokers, not both")
    if kafka_brokers and tls:
        raise FlagConflict("--tls", "--kafka-brokers", "the real brokers speak plaintext to the Kafka listeners")
    if kafka_broker_log_dirs != 1 and not kafka_brokers:
        raise usage_error("--kafka-broker-log-dirs needs --kafka-brokers", "--kafka-broker-log-dirs")
    if kafka_brokers and not 1 <= racks <= kafka_brokers:
        raise usage_error(f"--racks ({racks}) must be between 1 and --kafka-brokers ({kafka_brokers})", "--racks")
    parse_pools(pools)  # the fleet process parses them again; a bad one is a usage error here, not there
    node_args: list[str] = []
    if snapshot_interval_records is not None:
        node_args += ["--snapshot-interval-records", str(snapshot_interval_records)]
    if session_timeout_ms is not None:
        node_args += ["--session-timeout-ms", str(session_timeout_ms)]
    if leader_imbalance_check_interval_seconds is not None:
        node_args += ["--leader-imbalance-check-interval-seconds", str(leader_imbalance_check_interval_seconds)]
    fleet_args = [] if replica_lag_time_max_ms is None else ["--replica-lag-time-max-ms", str(replica_lag_time_max_ms)]
    try:
        started = local_quorum.up(
            data_dir,
            nodes=nodes,
            observers=observers,
            brokers=brokers,
            racks=racks if brokers or kafka_brokers else 0,
            pools=list(pools),
            node_args=node_args,
            heartbeat_interval_ms=heartbeat_interval_ms,
            catch_up_delay_ms=catch_up_delay_ms,
            tls=tls,
            kafka=kafka,
            fleet_args=fleet_args,
            kafka_brokers=kafka_brokers,
            kafka_broker_log_dirs=kafka_broker_log_dirs,
        )
    except (RuntimeError, TimeoutError, ValueError) as exc:
        raise CheckFailed(str(exc)) from exc
    real = local_quorum.kafka_brokers(started)
    document: dict[str, Any] = {
        "bootstrap_server": started.bootstrap_server,
        "cluster_id": started.cluster_id,
        "nodes": [{"id": n.id, "pid": n.pid, "address": n.address, "data_dir": n.data_dir} for n in started.nodes],
        "brokers_pid": started.brokers_pid,
        "tls": started.tls,
        "kafka_bootstrap_servers": started.kafka_bootstrap_servers,
        "kafka_brokers": [
            {"id": b.node_id, "pid": b.pid, "address": b.address, "rack": b.rack}
            for b in (real.brokers if real else [])
        ],
        "kafka_brokers_bootstrap": real.bootstrap_servers if real else None,
    }
    for row, n in zip(document["nodes"], started.nodes, strict=True):
        row["kafka_address"] = n.kafka_address
    # Each node's Prometheus endpoint and the scrape config naming them (docs/metrics.md).
    for row, n in zip(document["nodes"], started.nodes, strict=True):
        row["metrics_address"] = n.metrics_address
    with_metrics = any(n.metrics_address for n in started.nodes)
    document["prometheus_config"] = str(Path(started.data_dir) / local_quorum.PROMETHEUS_FILE) if with_metrics else None
    if output == "json":
        emit_json(document)
    else:
        if print_bootstrap_server:
            click.echo(started.bootstrap_server)
        to_stderr = print_bootstrap_server  # stdout holds the bootstrap server alone
        watching = f" and {observers} observers" if observers else ""
        click.echo(f"quorum of {nodes} nodes{watching} up; bootstrap server {started.bootstrap_server}", err=to_stderr)
        for n in started.nodes:
            click.echo(f"  node {n.id}: pid {n.pid} at {n.address}, data {n.data_dir}, log {n.log}", err=to_stderr)
            if n.metrics_address:
                click.echo(f"    metrics http://{n.metrics_address}/metrics", err=to_stderr)
        if with_metrics:
            click.echo(f"  Prometheus scrape config: {document['prometheus_config']}", err=to_stderr)
        if started.kafka_bootstrap_servers:
            click.echo(f"  Kafka admin clients: bootstrap.servers={started.kafka_bootstrap_servers}", err=to_stderr)
        if started.brokers_pid:
            click.echo(f"  {brokers} simulated brokers in {racks} racks: pid {started.brokers_pid}", err=to_stderr)
        if real is not None:
            click.echo(f"  {kafka_brokers} Kafka brokers in {racks} racks:", err=to_stderr)
            for b in real.brokers:
                click.echo(f"    broker {b.node_id} ({b.rack}): pid {b.pid} at {b.address}, log {b.log}", err=to_stderr)
            click.echo(f"  Kafka clients: bootstrap.servers={real.bootstrap_servers}", err=to_stderr)
        client_tls = started.client_tls
        if client_tls is not None:
            click.echo(
                "  mutual TLS on every node; other commands need these flags (or the environment):", err=to_stderr
            )
            click.echo(f"    {shlex.join(client_tls.to_args())}", err=to_stderr)
            for part, path in client_tls.to_json().items():
                click.echo(f"    export RAFTMETA_TLS_{part.upper()}={shlex.quote(str(path))}", err=to_stderr)
    if detach:
        return
    click.echo("running; Ctrl-C stops the quorum", err=True)
    try:
        while any(local_quorum.alive(n.pid) for n in started.nodes):
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    local_quorum.down(local_quorum.LocalQuorum.load(data_dir))


@quorum.command("down")
@DATA_DIR
@output_option
def down(data_dir: Path, output: str) -> None:
    """Stop every process of the quorum (SIGTERM, then SIGKILL after 10 s)."""
    from raftmeta.local import quorum as local_quorum

    try:
        stopped = local_quorum.down(local_quorum.LocalQuorum.load(data_dir))
    except FileNotFoundError as exc:
        raise usage_error(str(exc), "--data-dir") from exc
    if output == "json":
        emit_json({"stopped_pids": stopped})
    else:
        click.echo(f"stopped {len(stopped)} processes")


@quorum.command("bootstrap")
@DATA_DIR
@output_option
def bootstrap(data_dir: Path, output: str) -> None:
    """Print the bootstrap server of the quorum started in --data-dir, alone on a line:
    B=$(raftmeta quorum bootstrap --data-dir DIR)."""
    from raftmeta.local import quorum as local_quorum

    try:
        started = local_quorum.LocalQuorum.load(data_dir)
    except FileNotFoundError as exc:
        raise usage_error(str(exc), "--data-dir") from exc
    if output == "json":
        emit_json({"bootstrap_server": started.bootstrap_server, "cluster_id": started.cluster_id})
    else:
        click.echo(started.bootstrap_server)


def _act(data_dir: Path, node_id: int, sig: signal.Signals, verb: str, output: str) -> None:
    from raftmeta.local import quorum as local_quorum

    try:
        q = local_quorum.LocalQuorum.load(data_dir)
        pid = local_quorum.signal_node(q, node_id, sig)
    except FileNotFoundError as exc:
        raise usage_error(str(exc), "--data-dir") from exc
    except KeyError as exc:
        raise usage_error(str(exc.args[0]), "--node") from exc
    except ProcessLookupError as exc:
        raise CheckFailed(str(exc)) from exc
    if output == "json":
        emit_json({"node": node_id, "pid": pid, "action": verb})
    else:
        click.echo(f"node {node_id} (pid {pid}) {verb}")


@quorum.command("kill")
@DATA_DIR
@NODE
@output_option
def kill(data_dir: Path, node_id: int, output: str) -> None:
    """SIGKILL a node: a crash, losing whatever it had not fsynced."""
    _act(data_dir, node_id, signal.SIGKILL, "killed", output)


@quorum.command("pause")
@DATA_DIR
@NODE
@output_option
def pause(data_dir: Path, node_id: int, output: str) -> None:
    """SIGSTOP a node: it stops answering, as a long GC pause or a hung disk would."""
    _act(data_dir, node_id, signal.SIGSTOP, "paused", output)


@quorum.command("resume")
@DATA_DIR
@NODE
@output_option
def resume(data_dir: Path, node_id: int, output: str) -> None:
    """SIGCONT a paused node."""
    _act(data_dir, node_id, signal.SIGCONT, "resumed", output)


@quorum.command("restart")
@DATA_DIR
@NODE
@output_option
def restart(data_dir: Path, node_id: int, output: str) -> None:
    """Start a stopped or killed node again, with the same command line and data dir."""
    from raftmeta.local import quorum as local_quorum

    try:
        node = local_quorum.restart(local_quorum.LocalQuorum.load(data_dir), node_id)
    except FileNotFoundError as exc:
        raise usage_error(str(exc), "--data-dir") from exc
    except KeyError as exc:
        raise usage_error(str(exc.args[0]), "--node") from exc
    except RuntimeError as exc:
        raise CheckFailed(str(exc)) from exc
    if output == "json":
        emit_json({"node": node_id, "pid": node.pid, "action": "restarted"})
    else:
        click.echo(f"node {node_id} restarted (pid {node.pid})")


@quorum.command("status")
@click.option(
    "--bootstrap-server",
    envvar="RAFTMETA_BOOTSTRAP_SERVER",
    default=None,
    help="host:port[,host:port...] of any quorum nodes (env RAFTMETA_BOOTSTRAP_SERVER); or --data-dir.",
)
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="A quorum started by `raftmeta quorum up`: its bootstrap server (and TLS files) from quorum.json.",
)
@click.option(
    "--timeout", type=click.FloatRange(min=0.1), default=15.0, show_default=True, help="Seconds to keep trying."
)
@click.option(
    "--status", "show_status", is_flag=True, help="Only the summary (kafka-metadata-quorum describe --status)."
)
@click.option(
    "--replication", "show_replication", is_flag=True, help="Only the per-replica table (describe --replication)."
)
@tls_options
@output_option
def status(
    bootstrap_server: str | None,
    data_dir: Path | None,
    timeout: float,
    show_status: bool,
    show_replication: bool,
    output: str,
) -> None:
    """The quorum as its leader sees it, as kafka-metadata-quorum describe --status and --replication
    print it (both without a flag). -1 where a value is unknown: a voter that has not fetched from
    this leader (down, or not reached yet) has no known log end offset, lag or timestamps."""
    if (bootstrap_server is None) == (data_dir is None):
        raise usage_error("give exactly one of --bootstrap-server or --data-dir", "--bootstrap-server")
    tls = None
    if data_dir is not None:
        from raftmeta.local import quorum as local_quorum

        try:
            started = local_quorum.LocalQuorum.load(data_dir)
        except FileNotFoundError as exc:
            raise usage_error(str(exc), "--data-dir") from exc
        bootstrap_server, tls = started.bootstrap_server, started.client_tls
    assert bootstrap_server is not None
    with connect(bootstrap_server, timeout, tls) as client:
        answer = client.describe_quorum()
    document = status_document(answer, int(time.time() * 1000))
    if output == "json":
        emit_json(document)
        return
    both = show_status == show_replication
    if show_status or both:
        _print_status(document)
    if both:
        click.echo("")
    if show_replication or both:
        _print_replication(document)


def status_document(answer: controller_pb2.DescribeQuorumResponse, now_ms: int) -> dict[str, Any]:
    """DESIGN.md §8's ``quorum status`` shape, plus Kafka's figures: MaxFollowerLag and
    MaxFollowerLagTimeMs (-1 while any follower is unknown), and per replica its wall-clock
    LastFetchTimestamp and LastCaughtUpTimestamp and its Status."""
    voters = [
        _replica_row(v, now_ms, "Leader" if v.replica_id == answer.leader_id else "Follower") for v in answer.voters
    ]
    observers = [_replica_row(o, now_ms, "Observer") for o in answer.observers]
    followers = [v for v in voters if v["status"] == "Follower"]
    unknown = any(f["lag"] < 0 or f["last_caught_up_ms_ago"] < 0 for f in followers)
    return {
        "cluster_id": answer.cluster_id,
        "leader_id": answer.leader_id,
        "leader_epoch": answer.leader_epoch,
        "high_watermark": answer.high_watermark,
        "max_follower_lag": -1 if unknown else max((f["lag"] for f in followers), default=0),
        "max_follower_lag_time_ms": -1 if unknown else max((f["last_caught_up_ms_ago"] for f in followers), default=0),
        "voters": voters,
        "observers": observers,
    }


def _replica_row(replica: controller_pb2.QuorumReplicaState, now_ms: int, status: str) -> dict[str, Any]:
    """One voter or observer: DESIGN.md §8's keys, Kafka's timestamps (ms since the Unix epoch)."""
    fetch_ago, caught_up_ago = replica.last_fetch_ms_ago, replica.last_caught_up_ms_ago
    return {
        "id": replica.replica_id,
        "directory_id": format_directory_id(replica.directory_id) or None,
        "log_end_offset": replica.log_end_offset,
        "lag": replica.lag,
        "last_fetch_ms_ago": fetch_ago,
        "last_caught_up_ms_ago": caught_up_ago,
        "last_fetch_timestamp": now_ms - fetch_ago if fetch_ago >= 0 else -1,
        "last_caught_up_timestamp": now_ms - caught_up_ago if caught_up_ago >= 0 else -1,
        "status": status,
        "endpoints": [_endpoint(e) for e in replica.endpoints],
    }


def _endpoint(listener: controller_pb2.RaftVoterListener) -> str:
    """``NAME://host:port``, an IPv6 host in brackets (Kafka's RaftVoterEndpoint.toString)."""
    host = f"[{listener.host}]" if ":" in listener.host else listener.host
    return f"{listener.name}://{host}:{listener.port}"


def kafka_node(replica: dict[str, Any]) -> str:
    """One voter or observer as kafka-metadata-quorum describe --status prints it since Kafka 3.9
    (MetadataQuorumCommand's Node): ``{"id": 1, "directoryId": "...", "endpoints": ["..."]}``,
    leaving out an unknown directory id and an empty endpoint list, as it does."""
    text = f'{{"id": {replica["id"]}'
    if replica["directory_id"]:
        text += f', "directoryId": "{replica["directory_id"]}"'
    if replica["endpoints"]:
        text += ', "endpoints": [' + ", ".join(f'"{e}"' for e in replica["endpoints"]) + "]"
    return text + "}"


def _print_status(document: dict[str, Any]) -> None:
    rows = [
        ("ClusterId", document["cluster_id"]),
        ("LeaderId", document["leader_id"]),
        ("LeaderEpoch", document["leader_epoch"]),
        ("HighWatermark", document["high_watermark"]),
        ("MaxFollowerLag", document["max_follower_lag"]),
        ("MaxFollowerLagTimeMs", document["max_follower_lag_time_ms"]),
        ("CurrentVoters", f"[{','.join(kafka_node(v) for v in document['voters'])}]"),
        ("CurrentObservers", f"[{','.join(kafka_node(o) for o in document['observers'])}]"),
    ]
    for name, value in rows:
        click.echo(f"{name + ':':<24}{value}")


def _print_replication(document: dict[str, Any]) -> None:
    columns = ("NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp", "Status")
    keys = ("id", "directory_id", "log_end_offset", "lag", "last_fetch_timestamp", "last_caught_up_timestamp", "status")
    rows = [
        [str(r[k] or "-") if k == "directory_id" else str(r[k]) for k in keys]
        for r in (*document["voters"], *document["observers"])
    ]
    widths = [max(len(c), *(len(row[i]) for row in rows)) if rows else len(c) for i, c in enumerate(columns)]
    for line in (list(columns), *rows):
        click.echo("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip())


def _add_top() -> None:
    """``quorum top`` lives in its own module (raftmeta/cli/top.py: the live view and its document),
    and so do ``quorum add-controller`` / ``remove-controller`` (raftmeta/cli/controllers.py)."""
    from raftmeta.cli.controllers import add_controller, remove_controller, update_controller
    from raftmeta.cli.top import top

    quorum.add_command(top)
    quorum.add_command(add_controller)
    quorum.add_command(remove_controller)
    quorum.add_command(update_controller)


_add_top()
