"""``raftmeta quorum add-controller``, ``remove-controller`` and ``update-controller``: change the
voters of a running quorum (KIP-853), as ``kafka-metadata-quorum.sh add-controller /
remove-controller`` do, and record a voter's new listener (KIP-853's UpdateRaftVoter, which a
Kafka controller sends by itself when its listeners change; raftmeta leaves it to the operator).

add-controller makes a running observer a voter. It needs the node's id, its directory id (from
its ``meta.properties``) and where it listens; ``--controller-data-dir`` reads the first two from
the node's data dir, and with ``--data-dir`` (a quorum started by ``raftmeta quorum up``) the
node's address comes from ``quorum.json``. The leader refuses with REQUEST_TIMED_OUT while the
node has not caught up or the previous change is not committed yet: run it again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from raftmeta.api.addresses import parse_host_port
from raftmeta.cli.common import NODE_ID, CheckFailed, emit_json, output_option, usage_error
from raftmeta.cli.connect import connect, tls_options
from raftmeta.raft.voters import format_directory_id, parse_directory_id
from raftmeta.server.addresses import CONTROLLER_LISTENER
from raftmeta.storage.meta_properties import read_meta_properties
from raftmeta.tls import TlsConfig
from raftmeta.v1 import controller_pb2, errors_pb2

BOOTSTRAP = click.option(
    "--bootstrap-server",
    envvar="RAFTMETA_BOOTSTRAP_SERVER",
    default=None,
    help="host:port[,host:port...] of any quorum nodes (env RAFTMETA_BOOTSTRAP_SERVER); or --data-dir.",
)
QUORUM_DIR = click.option(
    "--data-dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="A quorum started by `raftmeta quorum up`: its bootstrap server, TLS files and node addresses.",
)
TIMEOUT = click.option(
    "--timeout", type=click.FloatRange(min=0.1), default=30.0, show_default=True, help="Seconds to keep trying."
)
DIRECTORY_ID = click.option(
    "--controller-directory-id",
    default=None,
    help="The node's directory id, as its meta.properties prints it (22 characters).",
)


def _quorum(bootstrap_server: str | None, data_dir: Path | None) -> tuple[str, TlsConfig | None, Any]:
    if (bootstrap_server is None) == (data_dir is None):
        raise usage_error("give exactly one of --bootstrap-server or --data-dir", "--bootstrap-server")
    if data_dir is None:
        assert bootstrap_server is not None
        return bootstrap_server, None, None
    from raftmeta.local import quorum as local_quorum

    try:
        started = local_quorum.LocalQuorum.load(data_dir)
    except FileNotFoundError as exc:
        raise usage_error(str(exc), "--data-dir") from exc
    return started.bootstrap_server, started.client_tls, started


def _directory_id(text: str | None) -> bytes:
    if text is None:
        return b""
    try:
        return parse_directory_id(text)
    except ValueError as exc:
        raise usage_error(str(exc), "--controller-directory-id") from exc


def _listener(text: str) -> tuple[str, int]:
    try:
        return parse_host_port(text.strip(), "--controller-listener")
    except ValueError as exc:
        raise usage_error(str(exc), "--controller-listener") from exc


def _answer(kind: str, voter_id: int, response: Any, output: str, done: str | None = None) -> None:
    """Refusals fail with the code; success is ``done`` (Kafka's line where its tool has one) or
    a line of ours, committed on a majority of the new voter set either way."""
    code = errors_pb2.ErrorCode.Name(response.error_code)
    document = {"controller_id": voter_id, "error_code": code, "error_message": response.error_message}
    if response.error_code != errors_pb2.NONE:
        hint = " (not now: run it again)" if response.error_code == errors_pb2.REQUEST_TIMED_OUT else ""
        raise CheckFailed(f"{kind} {voter_id} refused: {code}: {response.error_message}{hint}", code=code)
    if output == "json":
        emit_json(document)
    else:
        click.echo(done or f"{kind} {voter_id}: done (committed on a majority of the new voter set)")


@click.command("add-controller")
@BOOTSTRAP
@QUORUM_DIR
@click.option("--controller-id", type=NODE_ID, default=None, help="The node to make a voter (else from its data dir).")
@DIRECTORY_ID
@click.option(
    "--controller-data-dir",
    type=click.Path(path_type=Path, file_okay=False, exists=True),
    default=None,
    help="The node's data dir: its id and directory id from meta.properties.",
)
@click.option("--controller-listener", metavar="HOST:PORT", default=None,
              help="Where the node listens for the quorum (else from quorum.json with --data-dir).")  # fmt: skip
@TIMEOUT
@tls_options
@output_option
def add_controller(
    bootstrap_server: str | None,
    data_dir: Path | None,
    controller_id: int | None,
    controller_directory_id: str | None,
    controller_data_dir: Path | None,
    controller_listener: str | None,
    timeout: float,
    output: str,
) -> None:
    """Make a running observer a voter (AddRaftVoter). Example with a local quorum started with
    `raftmeta quorum up --observers 1`: raftmeta quorum add-controller --data-dir Q --controller-id 4"""
    bootstrap, tls, started = _quorum(bootstrap_server, data_dir)
    directory_id = _directory_id(controller_directory_id)
    if controller_data_dir is None and started is not None and controller_id is not None:
        node = next((n for n in started.nodes if n.id == controller_id), None)
        if node is not None:
            controller_data_dir = Path(node.data_dir)
    if controller_data_dir is not None:
        meta = read_meta_properties(controller_data_dir)
        if meta is None:
            raise usage_error(f"{controller_data_dir} has no meta.properties", "--controller-data-dir")
        if controller_id is not None and controller_id != meta.node_id:
            raise usage_error(
                f"--controller-id {controller_id}, but {controller_data_dir} belongs to node {meta.node_id}",
                "--controller-id",
            )
        controller_id = meta.node_id
        directory_id = directory_id or meta.directory_id
    if controller_id is None:
        raise usage_error("give --controller-id or --controller-data-dir", "--controller-id")
    if controller_listener is None and started is not None:
        node = next((n for n in started.nodes if n.id == controller_id), None)
        controller_listener = node.address if node is not None else None
    if controller_listener is None:
        raise usage_error(
            "give --controller-listener HOST:PORT (or --data-dir of a local quorum)", "--controller-listener"
        )
    host, port = _listener(controller_listener)
    request = controller_pb2.AddRaftVoterRequest(
        voter_id=controller_id,
        voter_directory_id=directory_id,
        listeners=[controller_pb2.RaftVoterListener(name=CONTROLLER_LISTENER, host=host, port=port)],
    )
    with connect(bootstrap, timeout, tls) as client:
        response = client.add_raft_voter(request)
    # kafka-metadata-quorum add-controller's line (an IPv6 host in brackets, as Kafka writes it).
    bare = host.strip("[]")
    endpoint = f"{CONTROLLER_LISTENER}://{f'[{bare}]' if ':' in bare else bare}:{port}"
    done = (
        f"Added controller {controller_id} with directory id {format_directory_id(directory_id)} "
        f"and endpoints: {endpoint}"
    )
    _answer("add-controller", controller_id, response, output, done)


@click.command("remove-controller")
@BOOTSTRAP
@QUORUM_DIR
@click.option("--controller-id", type=NODE_ID, required=True, help="The voter to remove.")
@DIRECTORY_ID
@TIMEOUT
@tls_options
@output_option
def remove_controller(
    bootstrap_server: str | None,
    data_dir: Path | None,
    controller_id: int,
    controller_directory_id: str | None,
    timeout: float,
    output: str,
) -> None:
    """Remove a voter (RemoveRaftVoter); it keeps replicating as an observer until stopped. A
    leader that removes itself hands over once the change commits."""
    bootstrap, tls, _ = _quorum(bootstrap_server, data_dir)
    request = controller_pb2.RemoveRaftVoterRequest(
        voter_id=controller_id, voter_directory_id=_directory_id(controller_directory_id)
    )
    with connect(bootstrap, timeout, tls) as client:
        response = client.remove_raft_voter(request)
    # kafka-metadata-quorum remove-controller's line (which always names a directory id: ours may be
    # left out, matching any).
    directory = f" with directory id {controller_directory_id}" if controller_directory_id else ""
    _answer(
        "remove-controller", controller_id, response, output, f"Removed KRaft controller {controller_id}{directory}"
    )


@click.command("update-controller")
@BOOTSTRAP
@QUORUM_DIR
@click.option("--controller-id", type=NODE_ID, required=True, help="The voter that moved.")
@DIRECTORY_ID
@click.option("--controller-listener", metavar="HOST:PORT", required=True, help="Where it listens now.")
@TIMEOUT
@tls_options
@output_option
def update_controller(
    bootstrap_server: str | None,
    data_dir: Path | None,
    controller_id: int,
    controller_directory_id: str | None,
    controller_listener: str,
    timeout: float,
    output: str,
) -> None:
    """Record a voter's new listener (UpdateRaftVoter): the quorum reaches it there from the commit
    on. Run it after restarting the voter at its new address."""
    bootstrap, tls, _ = _quorum(bootstrap_server, data_dir)
    host, port = _listener(controller_listener)
    request = controller_pb2.UpdateRaftVoterRequest(
        voter_id=controller_id,
        voter_directory_id=_directory_id(controller_directory_id),
        listeners=[controller_pb2.RaftVoterListener(name=CONTROLLER_LISTENER, host=host, port=port)],
    )
    with connect(bootstrap, timeout, tls) as client:
        response = client.update_raft_voter(request)
    _answer("update-controller", controller_id, response, output)
