"""``raftmeta certs make``: the files, names and permissions docs/security.md promises, and a chain
that verifies against the CA the way a TLS peer checks it."""

from __future__ import annotations

import ipaddress
import json
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from cryptography.x509.verification import PolicyBuilder, Store

from raftmeta.cli.main import cli
from raftmeta.local.certs import existing_files, make_certs
from raftmeta.tls import TlsConfig


def load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def common_name(cert: x509.Certificate) -> str:
    return str(cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value)


def alt_names(cert: x509.Certificate) -> tuple[list[str], list[str]]:
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return san.get_values_for_type(x509.DNSName), [str(ip) for ip in san.get_values_for_type(x509.IPAddress)]


def test_make_writes_ca_nodes_and_client_with_the_promised_names(tmp_path: Path) -> None:
    made = make_certs(tmp_path / "tls", [1, 2, 3], hosts=["raftmeta-0.raftmeta", "10.1.2.3"])
    names = sorted(p.name for p in (tmp_path / "tls").iterdir())
    assert names == sorted(
        ["ca.crt", "ca.key", "client.crt", "client.key"]
        + [f"node-{i}.{ext}" for i in (1, 2, 3) for ext in ("crt", "key")]
    )
    for node_id, files in made.nodes.items():
        cert = load(files.cert)
        assert common_name(cert) == f"node-{node_id}"
        dns, ips = alt_names(cert)
        assert dns == ["localhost", "raftmeta-0.raftmeta"]
        assert ips == ["127.0.0.1", "10.1.2.3"]
        usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        assert set(usages) == {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}
    client = load(made.client.cert)
    assert common_name(client) == "client"
    assert list(client.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == [
        ExtendedKeyUsageOID.CLIENT_AUTH
    ]
    ca = load(made.ca.cert)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca


def test_private_keys_are_readable_by_the_owner_only(tmp_path: Path) -> None:
    out = tmp_path / "tls"
    out.mkdir()
    (out / "node-1.key").write_text("old")
    (out / "node-1.key").chmod(0o644)  # an existing, too-open file is narrowed when replaced
    make_certs(out, [1, 2], overwrite=True)
    keys = sorted(out.glob("*.key"))
    assert [k.name for k in keys] == ["ca.key", "client.key", "node-1.key", "node-2.key"]
    for key in keys:
        assert stat.S_IMODE(key.stat().st_mode) == 0o600, key


def test_node_chains_verify_against_the_ca_for_every_name_and_keys_match(tmp_path: Path) -> None:
    made = make_certs(tmp_path, [1, 2, 3], hosts=["node.example"])
    store = Store([load(made.ca.cert)])
    for files in made.nodes.values():
        leaf = load(files.cert)
        for name in (
            x509.DNSName("localhost"),
            x509.DNSName("node.example"),
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        ):
            chain = PolicyBuilder().store(store).build_server_verifier(name).verify(leaf, [])
            assert chain[-1] == load(made.ca.cert)
        # Files as a node loads them: PEM, the key belongs to the certificate, valid now.
        assert TlsConfig(files.cert, files.key, made.ca.cert).load().common_name == common_name(leaf)
    # The client certificate has no SAN (it names no host), which the web-PKI client verifier of
    # cryptography insists on; TLS libraries don't. Check its signature and issuer directly.
    load(made.client.cert).verify_directly_issued_by(load(made.ca.cert))


def test_another_ca_does_not_verify(tmp_path: Path) -> None:
    ours = make_certs(tmp_path / "a", [1])
    theirs = make_certs(tmp_path / "b", [1])
    store = Store([load(ours.ca.cert)])
    with pytest.raises(x509.verification.VerificationError):
        PolicyBuilder().store(store).build_server_verifier(x509.DNSName("localhost")).verify(
            load(theirs.nodes[1].cert), []
        )


def test_an_existing_ca_signs_missing_certificates_and_keeps_the_others(tmp_path: Path) -> None:
    first = make_certs(tmp_path, [1, 2, 3])
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    grown = make_certs(tmp_path, [1, 2, 3, 4, 5])
    for name, data in before.items():
        assert (tmp_path / name).read_bytes() == data, f"{name} was rewritten"
    new_leaf = load(grown.nodes[5].cert)
    new_leaf.verify_directly_issued_by(load(first.ca.cert))
    assert common_name(new_leaf) == "node-5"


def test_validity_is_days_from_now_and_never_past_the_ca(tmp_path: Path) -> None:
    made = make_certs(tmp_path, [1], days=2)
    leaf, ca = load(made.nodes[1].cert), load(made.ca.cert)
    assert (leaf.not_valid_after_utc - leaf.not_valid_before_utc).days == 2  # 2 days + the 5-minute backdate
    assert leaf.not_valid_after_utc <= ca.not_valid_after_utc


def test_bad_arguments_name_the_option(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="--days"):
        make_certs(tmp_path, [1], days=0)
    with pytest.raises(ValueError, match="--host"):
        make_certs(tmp_path, [1], hosts=[" "])
    assert existing_files(tmp_path, [1]) == []


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_cli_prints_what_it_wrote_and_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    out = tmp_path / "certs"
    code, stdout, _ = invoke("certs", "make", "--nodes", "2", "--out", str(out), "--host", "db1", "--output", "json")
    assert code == 0
    document = json.loads(stdout)
    assert document["ca"] == str(out / "ca.crt")
    assert document["nodes"] == [
        {"id": 1, "cert": str(out / "node-1.crt"), "key": str(out / "node-1.key")},
        {"id": 2, "cert": str(out / "node-2.crt"), "key": str(out / "node-2.key")},
    ]
    assert document["client"] == {"cert": str(out / "client.crt"), "key": str(out / "client.key")}
    assert alt_names(load(out / "node-2.crt"))[0] == ["localhost", "db1"]
    ca_before = (out / "ca.crt").read_bytes()

    code, _, stderr = invoke("certs", "make", "--nodes", "2", "--out", str(out))
    assert code == 2
    assert "--out" in stderr and "--force" in stderr
    assert (out / "ca.crt").read_bytes() == ca_before

    code, stdout, _ = invoke("certs", "make", "--nodes", "2", "--out", str(out), "--force")
    assert code == 0
    assert "node 2:" in stdout
    assert (out / "ca.crt").read_bytes() != ca_before


def test_keys_written_are_unencrypted_pem(tmp_path: Path) -> None:
    made = make_certs(tmp_path, [1])
    key = serialization.load_pem_private_key(made.nodes[1].key.read_bytes(), password=None)
    assert key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    ) == load(made.nodes[1].cert).public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def test_keys_are_ec_p256(tmp_path: Path) -> None:
    made = make_certs(tmp_path, [1])
    key = serialization.load_pem_private_key(made.nodes[1].key.read_bytes(), password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey) and key.curve.name == "secp256r1"
