"""TLS settings: every mistake is refused before gRPC sees it, naming the flag and the file; a
client whose TLS cannot work gives up at once instead of retrying until its deadline."""

from __future__ import annotations

import asyncio
import datetime
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TypedDict, Unpack

import grpc
import grpc.aio
import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives import serialization

from raftmeta.cli.main import cli
from raftmeta.client import ControllerClient, RetryPolicy, SyncControllerClient, UnavailableError
from raftmeta.local.certs import CertSet, make_certs
from raftmeta.server.config import NodeConfig
from raftmeta.tls import TlsConfig, TlsError, add_port, material


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> CertSet:
    return make_certs(tmp_path_factory.mktemp("tls"), [1, 2])


def test_no_flag_means_plaintext_and_flags_keep_their_prefix(made: CertSet) -> None:
    assert TlsConfig.from_flags(None, None, None) is None
    assert TlsConfig.from_flags("", "", "") is None
    client = TlsConfig.from_flags(None, None, made.ca.cert, flag_prefix="--client-tls")
    assert client is not None and client.to_args() == ["--client-tls-ca", str(made.ca.cert)]
    assert not TlsConfig(made.nodes[1].cert, made.nodes[1].key).mutual
    assert TlsConfig(made.nodes[1].cert, made.nodes[1].key, made.ca.cert).mutual


@pytest.mark.parametrize(
    ("prefix", "given", "missing"),
    [("--tls", "cert", "key"), ("--tls", "key", "cert"), ("--client-tls", "cert", "key")],
)
def test_cert_and_key_go_together(made: CertSet, prefix: str, given: str, missing: str) -> None:
    paths = {"cert": made.nodes[1].cert, "key": made.nodes[1].key}
    with pytest.raises(TlsError, match=f"^{prefix}-{given} needs {prefix}-{missing}"):
        TlsConfig.from_flags(
            paths["cert"] if given == "cert" else None,
            paths["key"] if given == "key" else None,
            None,
            flag_prefix=prefix,
        )


def test_a_listener_needs_a_certificate(made: CertSet) -> None:
    with pytest.raises(TlsError, match="--tls-ca needs --tls-cert and --tls-key"):
        TlsConfig(ca=made.ca.cert).require_server_identity()


def test_unreadable_files_name_the_flag_and_path(made: CertSet, tmp_path: Path) -> None:
    missing = tmp_path / "nope.crt"
    with pytest.raises(TlsError, match=f"--tls-ca {missing}: no such file"):
        TlsConfig(ca=missing).load()
    with pytest.raises(TlsError, match=f"--client-tls-cert {tmp_path}: is a directory"):
        TlsConfig(tmp_path, made.nodes[1].key, flag_prefix="--client-tls").load()
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("hello\n")
    with pytest.raises(TlsError, match=f"--tls-cert {garbage}: not a PEM certificate"):
        TlsConfig(garbage, made.nodes[1].key).load()
    with pytest.raises(TlsError, match=f"--tls-ca {garbage}: not a PEM certificate"):
        TlsConfig(ca=garbage).load()
    with pytest.raises(TlsError, match=f"--tls-key {garbage}: not a PEM private key"):
        TlsConfig(made.nodes[1].cert, garbage).load()


def test_a_key_of_another_certificate_is_refused(made: CertSet) -> None:
    with pytest.raises(TlsError, match=f"--tls-key {made.nodes[2].key}: this key does not belong to .* --tls-cert"):
        TlsConfig(made.nodes[1].cert, made.nodes[2].key).load()


def test_an_encrypted_key_is_refused_with_advice(made: CertSet, tmp_path: Path) -> None:
    encrypted = tmp_path / "encrypted.key"
    key = serialization.load_pem_private_key(made.nodes[1].key.read_bytes(), password=None)
    encrypted.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"secret"),
        )
    )
    with pytest.raises(TlsError, match=r"--tls-key .*encrypted"):
        TlsConfig(made.nodes[1].cert, encrypted).load()


def test_expired_and_future_certificates_are_refused(made: CertSet) -> None:
    config = TlsConfig(made.nodes[1].cert, made.nodes[1].key)
    far_future = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=3650)
    with pytest.raises(TlsError, match=f"--tls-cert {made.nodes[1].cert}: the certificate expired on"):
        config.load(now=far_future)
    with pytest.raises(TlsError, match="is not valid before"):
        config.load(now=datetime.datetime(2000, 1, 1, tzinfo=datetime.UTC))
    loaded = config.load()
    assert loaded.common_name == "node-1" and loaded.ca is None


class _ListenerSettings(TypedDict, total=False):
    tls: TlsConfig
    client_listen: str
    client_tls: TlsConfig


def node_config(**kwargs: Unpack[_ListenerSettings]) -> NodeConfig:
    return NodeConfig(
        node_id=1, listen="127.0.0.1:9093", voters={1: "127.0.0.1:9093"}, data_dir=Path("x"), cluster_id="c", **kwargs
    )


def test_node_config_checks_listener_settings(made: CertSet) -> None:
    assert node_config().tls is None  # plaintext stays the default
    with pytest.raises(TlsError, match="--tls-ca needs --tls-cert"):
        node_config(tls=TlsConfig(ca=made.ca.cert))
    client_tls = TlsConfig(made.nodes[1].cert, made.nodes[1].key, flag_prefix="--client-tls")
    with pytest.raises(ValueError, match="--client-tls-cert needs --client-listen"):
        node_config(client_tls=client_tls)
    with pytest.raises(ValueError, match="--client-listen must differ from --listen"):
        node_config(client_listen="127.0.0.1:9093")
    config = node_config(client_listen="127.0.0.1:9094", client_tls=client_tls)
    assert config.client_tls == client_tls


def invoke(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), env=env)
    return result.exit_code, result.stderr


def test_node_command_refuses_bad_tls_flags_before_starting(made: CertSet, tmp_path: Path) -> None:
    base = ["node", "--node-id", "1", "--listen", "127.0.0.1:1", "--voters", "1@127.0.0.1:1"]
    base += ["--data-dir", str(tmp_path / "d"), "--cluster-id", "c"]
    code, err = invoke(*base, "--tls-cert", str(made.nodes[1].cert))
    assert code == 2 and "--tls-cert needs --tls-key" in err
    code, err = invoke(
        *base,
        "--tls-cert",
        str(made.nodes[1].cert),
        "--tls-key",
        str(made.nodes[1].key),
        "--tls-ca",
        str(tmp_path / "ca.pem"),
    )
    assert code == 2 and f"--tls-ca {tmp_path / 'ca.pem'}: no such file" in err
    code, err = invoke(*base, "--client-tls-ca", str(made.ca.cert))
    assert code == 2 and "--client-tls-ca needs --client-listen" in err
    code, err = invoke(*base, "--client-listen", "127.0.0.1:2", "--client-tls-ca", str(made.ca.cert))
    assert code == 2 and "--client-tls-ca needs --client-tls-cert" in err
    code, err = invoke(*base, "--client-tls-cert", str(made.nodes[1].cert), "--client-tls-key", str(made.nodes[1].key))
    assert code == 2 and "--client-tls-cert needs --client-listen" in err
    assert not (tmp_path / "d").exists()  # nothing was started or written


def test_client_commands_check_tls_flags_and_environment(made: CertSet, tmp_path: Path) -> None:
    missing = tmp_path / "ca.pem"
    code, err = invoke("topics", "describe", "--bootstrap-server", "127.0.0.1:1", "--tls-ca", str(missing))
    assert code == 2 and f"--tls-ca {missing}: no such file" in err
    code, err = invoke(
        "quorum", "status", "--bootstrap-server", "127.0.0.1:1", env={"RAFTMETA_TLS_CERT": str(made.client.cert)}
    )
    assert code == 2 and "--tls-cert needs --tls-key" in err


def test_sync_client_with_a_bad_file_fails_in_the_caller_and_leaves_no_thread(tmp_path: Path) -> None:
    before = {t.ident for t in threading.enumerate() if t.name == "raftmeta-client"}
    with pytest.raises(TlsError, match="--tls-ca"):
        SyncControllerClient("127.0.0.1:1", tls=TlsConfig(ca=tmp_path / "nope"))
    after = {t.ident for t in threading.enumerate() if t.name == "raftmeta-client" and t.is_alive()}
    assert after <= before


@pytest.fixture
def tls_server(made: CertSet) -> Iterator[str]:
    """An in-process listener presenting node 1's certificate (no services needed: the handshake
    is what is tested)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    async def start() -> tuple[grpc.aio.Server, int]:
        server = grpc.aio.server()
        port = add_port(server, "127.0.0.1:0", material(TlsConfig(made.nodes[1].cert, made.nodes[1].key)))
        await server.start()
        return server, port

    server, port = asyncio.run_coroutine_threadsafe(start(), loop).result()
    yield f"127.0.0.1:{port}"
    asyncio.run_coroutine_threadsafe(server.stop(None), loop).result()
    loop.call_soon_threadsafe(loop.stop)
    thread.join()
    loop.close()


def test_a_server_certificate_from_another_ca_is_refused_without_waiting_for_the_deadline(
    tls_server: str, tmp_path: Path
) -> None:
    other = make_certs(tmp_path / "other", [1])
    # A 60 s budget: giving up earlier proves the handshake failure ended the retries.
    retry = RetryPolicy(deadline_s=60, attempt_timeout_s=5)
    with (
        SyncControllerClient(tls_server, retry=retry, tls=TlsConfig(ca=other.ca.cert)) as client,
        pytest.raises(UnavailableError, match=r"(?i)handshake failed.*check the TLS settings"),
    ):
        client.describe_quorum()


def test_channel_factory_and_tls_are_exclusive(made: CertSet) -> None:
    def factory(target: str) -> grpc.aio.Channel:
        raise AssertionError("not called")

    with pytest.raises(ValueError, match="either channel_factory or tls"):
        ControllerClient("127.0.0.1:1", channel_factory=factory, tls=TlsConfig(ca=made.ca.cert))
