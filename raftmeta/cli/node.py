"""``raftmeta node``: run one quorum node in the foreground until SIGTERM/SIGINT."""

from __future__ import annotations

from pathlib import Path

import click

from raftmeta.api.limits import (
    KAFKA_FRAME_BYTES_MAX,
    KAFKA_FRAME_TIMEOUT_MS_DEFAULT,
    KAFKA_QUEUED_REQUEST_BYTES_DEFAULT,
)
from raftmeta.cli.common import NODE_ID, CheckFailed, check_int, int_range, usage_error
from raftmeta.server.peers import FETCH_RPCS, FetchRpc

# A PEM file (certificate, key or CA bundle); its content is checked by raftmeta.tls.
PEM = click.Path(dir_okay=False, path_type=Path)


@click.command()
@click.option(
    "--node-id",
    type=NODE_ID,
    required=True,
    help="This node's id. Not among --voters: it starts as an observer (add it with quorum add-controller).",
)
@click.option("--listen", required=True, help="host:port for RaftService and ControllerService.")
@click.option("--tls-cert", type=PEM, help="Certificate of --listen, also presented to the other voters.")
@click.option("--tls-key", type=PEM, help="Private key of --tls-cert.")
@click.option("--tls-ca", type=PEM, help="CA bundle: verifies the voters; requires client certificates on --listen.")
@click.option("--client-listen", help="host:port of an optional second listener for clients only.")
@click.option("--client-tls-cert", type=PEM, help="Certificate of --client-listen.")
@click.option("--client-tls-key", type=PEM, help="Private key of --client-tls-cert.")
@click.option("--client-tls-ca", type=PEM, help="CA bundle: requires client certificates on --client-listen.")
@click.option("--initial-controllers", metavar="ID@HOST:PORT:DIRECTORY_ID,...", default=None,
              help="Instead of --voters: the bootstrap voters with their directory ids (Kafka's "
              "--initial-controllers), so each voter is its node id and its directory (KIP-853).")  # fmt: skip
@click.option("--standalone", is_flag=True,
              help="Instead of --voters: this node alone is the bootstrap voter set (grow it with quorum "
              "add-controller).")  # fmt: skip
@click.option(
    "--voters",
    default=None,
    help="The bootstrap voters, Kafka's controller.quorum.voters: 1@host:port,2@host:port,... "
    "(the voter set in force is the latest in the log once voters are added or removed).",
)
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), required=True)
@click.option(
    "--cluster-id", default=None, help="Cluster id; required for a new data dir, checked against an existing one."
)
@click.option(
    "--repair-log",
    is_flag=True,
    help="Truncate corruption below the high watermark instead of refusing to start "
    "(the node refetches from the leader; see docs/storage.md).",
)
@click.option("--snapshot-interval-records", type=int_range(1), default=10_000, show_default=True)
@click.option("--fetch-timeout-ms", type=int_range(10), default=2000, show_default=True)
@click.option("--election-timeout-ms", type=int_range(10), default=1000, show_default=True)
@click.option("--session-timeout-ms", type=int_range(10), default=9000, show_default=True,
              help="broker.session.timeout.ms: a broker silent this long is fenced.")  # fmt: skip
@click.option("--auto-leader-rebalance-enable/--no-auto-leader-rebalance-enable", default=True, show_default=True,
              help="auto.leader.rebalance.enable: move leadership back to preferred replicas.")  # fmt: skip
@click.option("--leader-imbalance-check-interval-seconds", type=int_range(1), default=300, show_default=True,
              help="leader.imbalance.check.interval.seconds: how often to look for leaders to move back.")  # fmt: skip
@click.option("--segment-bytes", type=int_range(1024), default=None, hidden=True,
              help="Log segment size (default 16 MiB); small ones let tests see snapshots delete them.")  # fmt: skip
@click.option("--fetch-hw-linger-ms", type=int_range(0), default=5, show_default=True,
              help="How long the leader holds a Fetch whose only news is the high watermark, for records "
              "to send with it (0: answer at once, as KRaft does).")  # fmt: skip
@click.option("--fetch-rpc", type=click.Choice(FETCH_RPCS), default="stream", show_default=True,
              help="How Fetches reach the leader: one long-lived FetchStream, or a unary call per round.")  # fmt: skip
@click.option("--metrics-listen", metavar="HOST:PORT", default=None,
              help="Serve Prometheus metrics on http://HOST:PORT/metrics (docs/metrics.md).")  # fmt: skip
@click.option("--kafka-listener", metavar="HOST:PORT", default=None,
              help="Serve Kafka admin clients (Kafka protocol) on HOST:PORT (docs/kafka-protocol.md).")  # fmt: skip
@click.option("--kafka-peers", metavar="ID@HOST:PORT,...", default=None,
              help="The other nodes' --kafka-listener, listed as brokers in Metadata answers.")  # fmt: skip
@click.option("--kafka-queued-max-request-bytes", type=int_range(KAFKA_FRAME_BYTES_MAX),
              default=KAFKA_QUEUED_REQUEST_BYTES_DEFAULT, show_default=True,
              help="queued.max.request.bytes: request bytes the Kafka listener buffers across all "
              "connections; past it, connections stop being read. At least the largest frame (1 MiB).")  # fmt: skip
@click.option("--kafka-frame-timeout-ms", type=int_range(1), default=KAFKA_FRAME_TIMEOUT_MS_DEFAULT, show_default=True,
              help="A Kafka request must arrive whole this long after its size: a slower one closes "
              "the connection (connections.max.idle.ms is reset by any byte).")  # fmt: skip
@click.option("--peer-addresses", metavar="ID@HOST:PORT,...", default=None,
              help="Where to reach nodes that are not bootstrap voters (observers that may be added), "
              "instead of the listener the log records for them (e.g. through a proxy).")  # fmt: skip
@click.option("--unsafe-ack-before-commit", is_flag=True, hidden=True, help="TEST ONLY: acknowledge before commit.")
@click.option("--unsafe-skip-fsync", is_flag=True, hidden=True, help="TEST ONLY: never fsync the log.")
def node(
    node_id: int,
    listen: str,
    tls_cert: Path | None,
    tls_key: Path | None,
    tls_ca: Path | None,
    client_listen: str | None,
    client_tls_cert: Path | None,
    client_tls_key: Path | None,
    client_tls_ca: Path | None,
    initial_controllers: str | None,
    standalone: bool,
    voters: str | None,
    data_dir: Path,
    cluster_id: str | None,
    repair_log: bool,
    snapshot_interval_records: int,
    fetch_timeout_ms: int,
    election_timeout_ms: int,
    session_timeout_ms: int,
    auto_leader_rebalance_enable: bool,
    leader_imbalance_check_interval_seconds: int,
    segment_bytes: int | None,
    fetch_hw_linger_ms: int,
    fetch_rpc: FetchRpc,
    metrics_listen: str | None,
    kafka_listener: str | None,
    kafka_peers: str | None,
    kafka_queued_max_request_bytes: int,
    kafka_frame_timeout_ms: int,
    peer_addresses: str | None,
    unsafe_ack_before_commit: bool,
    unsafe_skip_fsync: bool,
) -> None:
    """Run one quorum node (voter) in the foreground."""
    from dataclasses import replace

    from raftmeta.raft import CommittedTruncationError, UnrecoverableStateError, UnrepairableEntryError
    from raftmeta.server.app import run, serve
    from raftmeta.server.config import NodeConfig, parse_initial_controllers, parse_voters
    from raftmeta.storage.errors import StorageError
    from raftmeta.storage.meta_properties import new_directory_id, read_meta_properties
    from raftmeta.tls import TlsConfig, TlsError, material

    if sum((voters is not None, initial_controllers is not None, standalone)) != 1:
        raise usage_error("give exactly one of --voters, --initial-controllers or --standalone", "--voters")
    directory_ids: dict[int, bytes] = {}
    try:
        if initial_controllers is not None:
            voter_map, directory_ids = parse_initial_controllers(initial_controllers)
        elif standalone:
            existing_meta = read_meta_properties(data_dir) if data_dir.exists() else None
            own = existing_meta.directory_id if existing_meta and existing_meta.directory_id else new_directory_id()
            voter_map, directory_ids = {node_id: listen}, {node_id: own}
        else:
            assert voters is not None
            voter_map = parse_voters(voters)
    except ValueError as exc:
        flag = "--initial-controllers" if initial_controllers is not None else "--voters"
        raise usage_error(str(exc), flag) from exc
    for voter in voter_map:
        check_int(voter, NODE_ID.low, NODE_ID.high, "voter id", "--voters")
    try:
        tls = TlsConfig.from_flags(tls_cert, tls_key, tls_ca)
        client_tls = TlsConfig.from_flags(client_tls_cert, client_tls_key, client_tls_ca, flag_prefix="--client-tls")
        # Check the files now: a bad one is a usage error naming its flag, not a failed handshake later.
        material(tls)
        material(client_tls)
    except TlsError as exc:
        raise usage_error(str(exc)) from exc
    from raftmeta.api.addresses import parse_host_port

    try:
        if metrics_listen is not None:
            parse_host_port(metrics_listen, "--metrics-listen", any_port=True)
    except ValueError as exc:
        raise usage_error(str(exc), "--metrics-listen") from exc
    kafka_peer_map: dict[int, str] = {}
    try:
        if kafka_listener is not None:
            parse_host_port(kafka_listener, "--kafka-listener", any_port=True)
    except ValueError as exc:
        raise usage_error(str(exc), "--kafka-listener") from exc
    try:
        kafka_peer_map = parse_voters(kafka_peers) if kafka_peers is not None else {}
    except ValueError as exc:
        raise usage_error(str(exc), "--kafka-peers") from exc
    try:
        peer_address_map = parse_voters(peer_addresses) if peer_addresses is not None else {}
    except ValueError as exc:
        raise usage_error(str(exc), "--peer-addresses") from exc
    existing = read_meta_properties(data_dir) if data_dir.exists() else None
    if cluster_id is None:
        if existing is None:
            raise usage_error("a new data dir needs --cluster-id", "--cluster-id")
        cluster_id = existing.cluster_id
    from raftmeta.controller.result import ControllerConfig

    try:
        config = NodeConfig(
            node_id=node_id,
            listen=listen,
            voters=voter_map,
            data_dir=data_dir,
            cluster_id=cluster_id,
            repair_log=repair_log,
            snapshot_interval_records=snapshot_interval_records,
            fetch_timeout_ms=fetch_timeout_ms,
            election_timeout_ms=election_timeout_ms,
            tls=tls,
            client_listen=client_listen,
            client_tls=client_tls,
            fetch_rpc=fetch_rpc,
            fetch_hw_linger_ms=fetch_hw_linger_ms,
            metrics_listen=metrics_listen,
            kafka_listener=kafka_listener,
            kafka_peers=kafka_peer_map,
            kafka_queued_max_request_bytes=kafka_queued_max_request_bytes,
            kafka_frame_timeout_ms=kafka_frame_timeout_ms,
            peer_addresses=peer_address_map,
            voter_directory_ids=directory_ids,
            unsafe_ack_before_commit=unsafe_ack_before_commit,
            unsafe_skip_fsync=unsafe_skip_fsync,
        )
    except ValueError as exc:  # the messages name the flag (TLS and listener combinations)
        raise usage_error(str(exc)) from exc
    config = replace(
        config,
        controller=ControllerConfig(
            session_timeout_ms=session_timeout_ms,
            auto_leader_rebalance_enable=auto_leader_rebalance_enable,
            leader_imbalance_check_interval_ms=leader_imbalance_check_interval_seconds * 1000,
        ),
    )
    if segment_bytes is not None:
        config = replace(config, segment_bytes=segment_bytes)
    try:
        run(serve(config))
    except (StorageError, CommittedTruncationError, UnrecoverableStateError, UnrepairableEntryError) as exc:
        raise CheckFailed(str(exc)) from exc
    except OSError as exc:
        raise CheckFailed(f"node {node_id}: {exc}") from exc
