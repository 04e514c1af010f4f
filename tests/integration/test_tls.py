"""TLS and mutual TLS with real node processes (docs/security.md): a quorum elects, replicates,
forwards and fails over over mutual TLS; peers and clients without an acceptable certificate, or
without TLS at all, are refused; a separate client listener can run server-only TLS."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import grpc.aio
import pytest
from click.testing import CliRunner
from grpc_health.v1 import health_pb2, health_pb2_grpc

from raftmeta.cli.main import cli
from raftmeta.client import RetryPolicy, SyncControllerClient, UnavailableError
from raftmeta.local import quorum as local_quorum
from raftmeta.local.certs import CertSet, make_certs, planned
from raftmeta.server.config import format_voters
from raftmeta.tls import TlsConfig, material, open_channel
from raftmeta.v1 import controller_pb2, errors_pb2, raft_pb2, raft_pb2_grpc
from tests.integration.conftest import FAST_NODE_ARGS
from tests.integration.test_node import create, leader_of, wait_until

pytestmark = pytest.mark.integration

# Refusals look like a closed connection to the client, which retries until its deadline; an
# UnavailableError says that no attempt got an answer (the last one may have hit its own timeout
# on a loaded machine, so the status code is not checked).
REFUSED = RetryPolicy(deadline_s=1.5, attempt_timeout_s=0.5)


@pytest.fixture(scope="module")
def tls_quorum(tmp_path_factory: pytest.TempPathFactory) -> Iterator[local_quorum.LocalQuorum]:
    data_dir = tmp_path_factory.mktemp("tls") / "q"
    started = local_quorum.up(
        data_dir, nodes=3, brokers=3, racks=3, tls=True, node_args=FAST_NODE_ARGS, heartbeat_interval_ms=200
    )
    try:
        yield started
    finally:
        local_quorum.down(local_quorum.LocalQuorum.load(data_dir))
        for node in started.nodes:
            text = Path(node.log).read_text()
            assert "Traceback" not in text, f"node {node.id} crashed:\n{text[-4000:]}"


@pytest.fixture(scope="module")
def certs(tls_quorum: local_quorum.LocalQuorum) -> CertSet:
    """The files ``quorum up --tls`` made."""
    return planned(Path(tls_quorum.data_dir) / "tls", [n.id for n in tls_quorum.nodes])


@pytest.fixture(scope="module")
def other_ca(tmp_path_factory: pytest.TempPathFactory) -> CertSet:
    """Certificates with the right names from a CA the quorum does not trust."""
    return make_certs(tmp_path_factory.mktemp("other-ca"), [1, 2, 3])


def tls_flags(quorum: local_quorum.LocalQuorum) -> list[str]:
    tls = quorum.client_tls
    assert tls is not None
    return tls.to_args()


def invoke(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env=env)
    return result.exit_code, result.stdout, result.stderr


def test_quorum_up_tls_runs_every_process_over_mutual_tls(tls_quorum: local_quorum.LocalQuorum) -> None:
    recorded = json.loads((Path(tls_quorum.data_dir) / "quorum.json").read_text())["tls"]
    assert set(recorded) == {"cert", "key", "ca"}
    assert all(Path(path).is_file() for path in recorded.values())
    for node in tls_quorum.nodes:
        assert node.argv[node.argv.index("--tls-cert") + 1].endswith(f"node-{node.id}.crt")
        assert "--tls-ca" in node.argv
    assert "--tls-cert" in tls_quorum.brokers_argv  # the fleet registered (up() waited) over TLS
    with SyncControllerClient(tls_quorum.bootstrap_server, tls=tls_quorum.client_tls) as client:
        leader = leader_of(client)
        assert leader in (1, 2, 3)
        assert sum(1 for b in client.describe_cluster().brokers if not b.fenced) == 3
    # Through a follower: it forwards to the leader's listener with its node certificate.
    follower = next(n for n in tls_quorum.nodes if n.id != leader)
    with SyncControllerClient(follower.address, tls=tls_quorum.client_tls) as client:
        result = create(client, "orders", partitions=3, rf=3)
        assert result.error_code == errors_pb2.NONE, result.error_message


def test_cli_commands_take_tls_flags_and_environment(tls_quorum: local_quorum.LocalQuorum) -> None:
    bootstrap = ["--bootstrap-server", tls_quorum.bootstrap_server]
    code, out, err = invoke("topics", "create", *bootstrap, *tls_flags(tls_quorum), "--topic", "payments",
                            "--partitions", "2", "--replication-factor", "3", "--output", "json")  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["topics"][0]["error_code"] == "NONE"
    tls = tls_quorum.client_tls
    assert tls is not None and tls.ca is not None and tls.cert is not None and tls.key is not None
    env = {"RAFTMETA_TLS_CA": str(tls.ca), "RAFTMETA_TLS_CERT": str(tls.cert), "RAFTMETA_TLS_KEY": str(tls.key)}
    code, out, err = invoke("topics", "describe", *bootstrap, "--topic", "payments", "--output", "json", env=env)
    assert code == 0, err
    assert len(json.loads(out)["topics"][0]["partitions"]) == 2
    code, out, err = invoke("quorum", "status", *bootstrap, "--output", "json", env=env)
    assert code == 0, err
    assert json.loads(out)["leader_id"] in (1, 2, 3)
    code, out, err = invoke("brokers", "list", *bootstrap, "--output", "json", env=env)
    assert code == 0, err
    assert [b["id"] for b in json.loads(out)["brokers"]] == [0, 1, 2]


async def health_check(address: str, tls: TlsConfig | None) -> grpc.StatusCode:
    channel = open_channel(address, material(tls))
    try:
        await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
        return grpc.StatusCode.OK
    except grpc.aio.AioRpcError as exc:
        return exc.code()
    finally:
        await channel.close(grace=None)


async def pre_vote(address: str, tls: TlsConfig, cluster_id: str) -> grpc.StatusCode:
    """A harmless RaftService call (a pre-vote for epoch 0 changes nothing even if answered)."""
    channel = open_channel(address, material(tls))
    request = raft_pb2.VoteRequest(cluster_id=cluster_id, candidate_id=2, candidate_epoch=0, pre_vote=True, voter_id=1)
    try:
        await raft_pb2_grpc.RaftServiceStub(channel).Vote(request, timeout=10)
        return grpc.StatusCode.OK
    except grpc.aio.AioRpcError as exc:
        return exc.code()
    finally:
        await channel.close(grace=None)


def test_a_peer_with_a_certificate_from_another_ca_is_refused(
    tls_quorum: local_quorum.LocalQuorum, certs: CertSet, other_ca: CertSet
) -> None:
    node_1 = tls_quorum.nodes[0].address
    # Trusts the quorum's CA (so the node's certificate verifies) but presents node-2 of another CA.
    impostor = TlsConfig(other_ca.nodes[2].cert, other_ca.nodes[2].key, certs.ca.cert)
    assert asyncio.run(pre_vote(node_1, impostor, tls_quorum.cluster_id)) == grpc.StatusCode.UNAVAILABLE
    assert asyncio.run(health_check(node_1, impostor)) == grpc.StatusCode.UNAVAILABLE
    # The same call with the quorum's own node-2 certificate gets through the handshake.
    genuine = TlsConfig(certs.nodes[2].cert, certs.nodes[2].key, certs.ca.cert)
    assert asyncio.run(health_check(node_1, genuine)) == grpc.StatusCode.OK
    # A client of another CA is refused too.
    other_client = TlsConfig(other_ca.client.cert, other_ca.client.key, certs.ca.cert)
    with (
        SyncControllerClient(node_1, retry=REFUSED, tls=other_client) as client,
        pytest.raises(UnavailableError),
    ):
        client.describe_quorum()


def test_a_plaintext_client_is_refused_by_a_tls_listener(tls_quorum: local_quorum.LocalQuorum) -> None:
    with (
        SyncControllerClient(tls_quorum.bootstrap_server, retry=REFUSED) as client,
        pytest.raises(UnavailableError),
    ):
        client.describe_quorum()
    code, _, err = invoke("quorum", "status", "--bootstrap-server", tls_quorum.bootstrap_server, "--timeout", "1")
    assert code == 1
    assert "if the quorum runs TLS, give --tls-ca" in err


def test_a_client_without_a_certificate_is_refused_when_the_listener_has_a_ca(
    tls_quorum: local_quorum.LocalQuorum, certs: CertSet
) -> None:
    ca_only = TlsConfig(ca=certs.ca.cert)
    with (
        SyncControllerClient(tls_quorum.bootstrap_server, retry=REFUSED, tls=ca_only) as client,
        pytest.raises(UnavailableError),
    ):
        client.describe_quorum()
    assert asyncio.run(health_check(tls_quorum.nodes[0].address, ca_only)) == grpc.StatusCode.UNAVAILABLE


def test_failover_and_restart_over_mutual_tls(tls_quorum: local_quorum.LocalQuorum) -> None:
    """Elections (Vote, BeginQuorumEpoch) and catch-up (Fetch) between nodes over mutual TLS; the
    restarted node gets its TLS flags back from quorum.json."""
    data_dir = ["--data-dir", tls_quorum.data_dir]
    with SyncControllerClient(
        tls_quorum.bootstrap_server, retry=RetryPolicy(deadline_s=20), tls=tls_quorum.client_tls
    ) as client:
        old_leader = leader_of(client)
        code, _, err = invoke("quorum", "kill", *data_dir, "--node", str(old_leader))
        assert code == 0, err
        wait_until(lambda: leader_of(client) not in (-1, old_leader), what="a new leader")
        assert create(client, "after-failover", partitions=1, rf=3).error_code == errors_pb2.NONE
        code, _, err = invoke("quorum", "restart", *data_dir, "--node", str(old_leader))
        assert code == 0, err

        def caught_up() -> bool:
            status = client.describe_quorum()
            mine = next(v for v in status.voters if v.replica_id == old_leader)
            return mine.log_end_offset >= status.high_watermark and mine.lag == 0

        wait_until(caught_up, what=f"node {old_leader} to catch up")


def spawn_split_quorum(
    tmp_path: Path, certs: CertSet
) -> tuple[dict[int, str], dict[int, str], list[subprocess.Popen[bytes]]]:
    """Three nodes with mutual TLS on their raft listeners and server-only TLS on a second, client
    listener."""
    ports = local_quorum.free_ports(6)
    raft = {i: f"127.0.0.1:{ports[i - 1]}" for i in (1, 2, 3)}
    clients = {i: f"127.0.0.1:{ports[i + 2]}" for i in (1, 2, 3)}
    processes = []
    for i in (1, 2, 3):
        node = certs.nodes[i]
        argv = [
            sys.executable, "-m", "raftmeta", "--log-format", "json", "--log-level", "info", "node",
            "--node-id", str(i), "--listen", raft[i], "--voters", format_voters(raft),
            "--data-dir", str(tmp_path / f"node-{i}"), "--cluster-id", "split-listeners", *FAST_NODE_ARGS,
            "--tls-cert", str(node.cert), "--tls-key", str(node.key), "--tls-ca", str(certs.ca.cert),
            "--client-listen", clients[i], "--client-tls-cert", str(node.cert), "--client-tls-key", str(node.key),
        ]  # fmt: skip
        with open(tmp_path / f"node-{i}.log", "wb") as log:
            processes.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))
    return raft, clients, processes


def test_a_client_listener_with_server_only_tls(tmp_path: Path) -> None:
    certs = make_certs(tmp_path / "tls", [1, 2, 3])
    raft, clients, processes = spawn_split_quorum(tmp_path, certs)
    ca_only = TlsConfig(ca=certs.ca.cert)  # verifies the node, presents no certificate
    try:
        with SyncControllerClient(list(clients.values()), retry=RetryPolicy(deadline_s=20), tls=ca_only) as client:
            wait_until(lambda: leader_of(client) >= 0, what="a leader")
            leader = leader_of(client)
        follower = next(i for i in clients if i != leader)
        # Through a follower's client listener; it forwards over the mutual-TLS raft listener.
        with SyncControllerClient(clients[follower], retry=RetryPolicy(deadline_s=20), tls=ca_only) as client:
            registered = client.register_broker(
                controller_pb2.RegisterBrokerRequest(broker_id=0, incarnation_id=uuid.uuid4().bytes)
            )
            assert registered.error_code == errors_pb2.NONE, registered.error_message
        # RaftService is not served on the client listener; the raft listener wants a certificate.
        node_tls = TlsConfig(certs.nodes[2].cert, certs.nodes[2].key, certs.ca.cert)
        assert asyncio.run(pre_vote(clients[1], node_tls, "split-listeners")) == grpc.StatusCode.UNIMPLEMENTED
        assert asyncio.run(health_check(clients[1], ca_only)) == grpc.StatusCode.OK
        with (
            SyncControllerClient(raft[1], retry=REFUSED, tls=ca_only) as client,
            pytest.raises(UnavailableError),
        ):
            client.describe_quorum()
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(timeout=15)
    for i in (1, 2, 3):
        text = (tmp_path / f"node-{i}.log").read_text()
        assert "Traceback" not in text, f"node {i} crashed:\n{text[-4000:]}"
        assert '"transport": "mutual-tls"' in text and '"transport": "tls"' in text
