"""``raftmeta quorum top``: a live view of a quorum, refreshing like ``top``.

Per node: role, epoch, high watermark, log end offset, lag, last fetch age and commit latency;
then the controller's broker and partition health. The leader's DescribeQuorum (what ``quorum
status`` prints) gives the replication columns and DescribeCluster the brokers; each node's
/metrics endpoint (docs/metrics.md) gives its own role, epoch and high watermark, the commit
latency and the partition health. Without metrics endpoints (a plain ``--bootstrap-server`` and no
``--metrics-server``) those columns stay empty.

Commit latency is the leader's ``raftmeta_raft_commit_latency_seconds`` histogram: over the last
refresh interval while live, over the node's lifetime with ``--once``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from raftmeta.cli.common import emit_json, int_range, output_option, usage_error
from raftmeta.cli.connect import connect, tls_options
from raftmeta.client import ClientError
from raftmeta.metrics.scrape import COMMIT_LATENCY, Scrape, fetch, window
from raftmeta.v1 import controller_pb2

ROLE_GAUGE = "raftmeta_raft_current_state"


def role_of(scrape: Scrape) -> str | None:
    for labels, value in scrape.series(ROLE_GAUGE).items():
        if value == 1:
            return dict(labels).get("state")
    return None


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 3)


def _int(value: float | None) -> int | None:
    return None if value is None else int(value)


def unscraped_role(node_id: int, leader_id: int, voter: bool, fetching: bool, metrics: str) -> str:
    """A node's role from the leader's DescribeQuorum alone (no metrics scrape): a voter is only
    called a follower while it fetches; one whose metrics endpoint does not answer is ``down``,
    one the leader has no fetch from in this epoch ``not fetching``."""
    if node_id == leader_id:
        return "leader"
    if metrics == "down":
        return "down"
    if not fetching:
        return "not fetching"
    return "follower" if voter else "observer"


def top_document(
    quorum: controller_pb2.DescribeQuorumResponse,
    cluster: controller_pb2.DescribeClusterResponse | None,
    scrapes: Mapping[int, Scrape | None],
    previous: Mapping[int, Scrape] | None = None,
) -> dict[str, Any]:
    """The view as one JSON document (``--output json``); ``scrapes`` maps node id -> its metrics
    (None: the endpoint did not answer), ``previous`` the scrapes of the last refresh."""
    replicas = {r.replica_id: r for r in quorum.voters}
    observers = {r.replica_id: r for r in quorum.observers}
    ids = sorted(set(replicas) | {n for n in scrapes if n not in observers})

    def row(node_id: int, replica: controller_pb2.QuorumReplicaState | None, voter: bool) -> dict[str, Any]:
        scrape = scrapes.get(node_id)
        known = replica is not None and replica.log_end_offset >= 0
        entry: dict[str, Any] = {
            "id": node_id,
            "voter": voter,
            "role": None,
            "epoch": None,
            "high_watermark": None,
            "log_end_offset": replica.log_end_offset if known and replica is not None else None,
            "lag": replica.lag if known and replica is not None else None,
            "last_fetch_ms_ago": replica.last_fetch_ms_ago if known and replica is not None else None,
            "commit_latency_p50_ms": None,
            "commit_latency_p99_ms": None,
            "metrics": "none" if node_id not in scrapes else ("up" if scrape is not None else "down"),
        }
        if scrape is not None:
            entry["role"] = role_of(scrape)
            entry["epoch"] = _int(scrape.get("raftmeta_raft_current_epoch"))
            entry["high_watermark"] = _int(scrape.get("raftmeta_raft_high_watermark"))
            if entry["log_end_offset"] is None:
                entry["log_end_offset"] = _int(scrape.get("raftmeta_raft_log_end_offset"))
            if entry["role"] == "leader":
                latency = window(scrape, (previous or {}).get(node_id), COMMIT_LATENCY)
                entry["commit_latency_p50_ms"] = _ms(latency.histogram_quantile(COMMIT_LATENCY, 0.5))
                entry["commit_latency_p99_ms"] = _ms(latency.histogram_quantile(COMMIT_LATENCY, 0.99))
        elif replica is not None:
            entry["role"] = unscraped_role(node_id, quorum.leader_id, voter, known, entry["metrics"])
            entry["epoch"] = quorum.leader_epoch if known else None
        return entry

    brokers: dict[str, int | None] | None = None
    if cluster is not None:
        fenced = sum(1 for b in cluster.brokers if b.fenced)
        brokers = {"active": len(cluster.brokers) - fenced, "fenced": fenced}
    partitions = None
    active = [
        s for s in scrapes.values() if s is not None and s.get("raftmeta_controller_active_controller_count") == 1
    ]
    if active:
        s = active[0]
        partitions = {
            "topics": _int(s.get("raftmeta_controller_global_topic_count")),
            "partitions": _int(s.get("raftmeta_controller_global_partition_count")),
            "offline": _int(s.get("raftmeta_controller_offline_partitions_count")),
            "under_replicated": _int(s.get("raftmeta_controller_under_replicated_partitions")),
            "preferred_replica_imbalance": _int(s.get("raftmeta_controller_preferred_replica_imbalance_count")),
        }
        if brokers is None:
            brokers = {
                "active": _int(s.get("raftmeta_controller_active_broker_count")),
                "fenced": _int(s.get("raftmeta_controller_fenced_broker_count")),
            }
    return {
        "cluster_id": quorum.cluster_id,
        "leader_id": quorum.leader_id,
        "leader_epoch": quorum.leader_epoch,
        "high_watermark": quorum.high_watermark,
        "voters": [row(n, replicas.get(n), True) for n in ids],
        "observers": [row(n, o, False) for n, o in sorted(observers.items())],
        "brokers": brokers,
        "partitions": partitions,
    }


def render(document: dict[str, Any]) -> Any:
    """The document as rich renderables (a header line and two tables)."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    def cell(value: Any) -> str:
        return "-" if value is None else str(value)

    error = document.get("error")
    header = Text.assemble(
        ("raftmeta quorum ", "bold"),
        f"{document['cluster_id']}  leader ",
        (cell(document["leader_id"]), "bold green" if document["leader_id"] >= 0 else "bold red"),
        f"  epoch {document['leader_epoch']}  high watermark {document['high_watermark']}  ",
        (time.strftime("%H:%M:%S"), "dim"),
        (f"  no answer, showing the last view: {error}" if error else "", "bold red"),
    )
    nodes = Table(box=None, header_style="bold", pad_edge=False)
    columns = ("NODE", "ROLE", "EPOCH", "HW", "LEO", "LAG", "FETCH AGO ms", "COMMIT p50 ms", "p99 ms", "METRICS")
    for i, name in enumerate(columns):
        nodes.add_column(name, justify="left" if i in (1, 9) else "right")
    for entry in (*document["voters"], *document["observers"]):
        # A non-voter in another state than observer says so once (never "observer (observer)").
        role = cell(entry["role"])
        if not entry["voter"] and entry["role"] not in ("observer", "down", "not fetching"):
            role += " (observer)"
        style = "green" if entry["role"] == "leader" else ("red" if entry["metrics"] == "down" else None)
        nodes.add_row(
            str(entry["id"]),
            role,
            cell(entry["epoch"]),
            cell(entry["high_watermark"]),
            cell(entry["log_end_offset"]),
            cell(entry["lag"]),
            cell(entry["last_fetch_ms_ago"]),
            cell(entry["commit_latency_p50_ms"]),
            cell(entry["commit_latency_p99_ms"]),
            entry["metrics"],
            style=style,
        )
    health = Table(box=None, header_style="bold", pad_edge=False)
    for name in ("BROKERS", "FENCED", "TOPICS", "PARTITIONS", "OFFLINE", "UNDER-REPLICATED", "IMBALANCED"):
        health.add_column(name, justify="right")
    brokers = document["brokers"] or {}
    partitions = document["partitions"] or {}
    active, fenced = brokers.get("active"), brokers.get("fenced")
    health.add_row(
        # Every registered broker, fenced ones included (8 active + 1 fenced is BROKERS 9, FENCED 1).
        cell(None if active is None else active + (fenced or 0)),
        Text(cell(brokers.get("fenced")), style="red" if brokers.get("fenced") else ""),
        cell(partitions.get("topics")),
        cell(partitions.get("partitions")),
        Text(cell(partitions.get("offline")), style="red" if partitions.get("offline") else ""),
        Text(cell(partitions.get("under_replicated")), style="yellow" if partitions.get("under_replicated") else ""),
        cell(partitions.get("preferred_replica_imbalance")),
    )
    return Group(header, Text(""), nodes, Text(""), health)


def parse_metrics_servers(text: str) -> dict[int, str]:
    """``1@host:port,2@host:port`` (the voters' format) -> {node id: address}."""
    from raftmeta.server.config import parse_voters

    return parse_voters(text)


@click.command("top")
@click.option("--bootstrap-server", envvar="RAFTMETA_BOOTSTRAP_SERVER", default=None,
              help="host:port[,host:port...] of any quorum nodes (env RAFTMETA_BOOTSTRAP_SERVER); "
              "or --data-dir.")  # fmt: skip
@click.option("--data-dir", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="A quorum started by `raftmeta quorum up`: its servers and metrics endpoints "
              "from quorum.json.")  # fmt: skip
@click.option("--metrics-server", "metrics_servers", default=None, metavar="ID@HOST:PORT,...",
              help="The nodes' --metrics-listen addresses (with --bootstrap-server).")  # fmt: skip
@click.option("--interval", type=click.FloatRange(min=0.2), default=2.0, show_default=True,
              help="Seconds between refreshes.")  # fmt: skip
@click.option("--once", is_flag=True, help="Print one view and exit (implied by --output json).")
@click.option("--iterations", type=int_range(1), default=None, hidden=True,
              help="Stop after this many refreshes (tests).")  # fmt: skip
@click.option("--timeout", type=click.FloatRange(min=0.1), default=15.0, show_default=True,
              help="Seconds to keep trying each request.")  # fmt: skip
@tls_options
@output_option
def top(
    bootstrap_server: str | None,
    data_dir: Path | None,
    metrics_servers: str | None,
    interval: float,
    once: bool,
    iterations: int | None,
    timeout: float,
    output: str,
) -> None:
    """A live view of the quorum, refreshing like top: per node role, epoch, HW, LEO, lag, last fetch
    age and commit latency, then brokers and partition health. Ctrl-C stops it."""
    if (bootstrap_server is None) == (data_dir is None):
        raise usage_error("give exactly one of --bootstrap-server or --data-dir", "--bootstrap-server")
    tls = None
    endpoints: dict[int, str] = {}
    if data_dir is not None:
        from raftmeta.local import quorum as local_quorum

        try:
            started = local_quorum.LocalQuorum.load(data_dir)
        except FileNotFoundError as exc:
            raise usage_error(str(exc), "--data-dir") from exc
        bootstrap_server, tls = started.bootstrap_server, started.client_tls
        endpoints = {n.id: n.metrics_address for n in started.nodes if n.metrics_address}
    if metrics_servers is not None:
        try:
            endpoints = parse_metrics_servers(metrics_servers)
        except ValueError as exc:
            raise usage_error(str(exc), "--metrics-server") from exc
    assert bootstrap_server is not None
    scrape_timeout = min(2.0, interval)

    def scrape_all() -> dict[int, Scrape | None]:
        scrapes: dict[int, Scrape | None] = {}
        for node_id, address in endpoints.items():
            try:
                scrapes[node_id] = fetch(address, timeout_s=scrape_timeout)
            except (OSError, ValueError):
                scrapes[node_id] = None
        return scrapes

    with connect(bootstrap_server, timeout, tls) as client:

        def sample(previous: Mapping[int, Scrape] | None) -> tuple[dict[str, Any], dict[int, Scrape]]:
            scrapes = scrape_all()
            document = top_document(client.describe_quorum(), client.describe_cluster(), scrapes, previous)
            return document, {n: s for n, s in scrapes.items() if s is not None}

        if once or output == "json":
            document, _ = sample(None)
            if output == "json":
                emit_json(document)
            else:
                from rich.console import Console

                Console().print(render(document))
            return
        from rich.live import Live

        document, previous = sample(None)
        refreshes = 1
        try:
            with Live(render(document), auto_refresh=False, screen=False) as live:
                while iterations is None or refreshes < iterations:
                    time.sleep(interval)
                    refreshes += 1
                    try:
                        document, previous = sample(previous)
                    except ClientError as exc:  # a leader change or a node down: keep the last view up
                        document = {**document, "error": str(exc)}
                    live.update(render(document), refresh=True)
        except KeyboardInterrupt:
            pass
