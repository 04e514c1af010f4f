"""A throwaway certificate authority and node/client certificates for trying mutual TLS locally.

``raftmeta certs make`` and ``raftmeta quorum up --tls`` use this. The subjects are a contract
(docs/security.md): node N's certificate has the common name ``node-N`` (the RaftService guard
checks that a caller's CN matches the voter id it claims), the client's has ``client``. Node
certificates serve and dial (serverAuth + clientAuth: a node is a client of its peers); the
client certificate only dials. Keys are EC P-256 and are written readable by the owner only.

Real deployments should use certificates from their own CA with the same CN convention;
nothing here is needed to run raftmeta with TLS.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from raftmeta.tls import node_common_name

CA_NAME = "ca"
CLIENT_NAME = "client"
DEFAULT_HOSTS = ("localhost", "127.0.0.1")
DEFAULT_DAYS = 90
# Certificates start a little in the past so a peer whose clock is slightly behind accepts them.
BACKDATE = datetime.timedelta(minutes=5)
ORGANIZATION = "raftmeta (throwaway, for local testing)"


@dataclass(frozen=True, slots=True)
class CertFiles:
    """A certificate and its private key on disk."""

    cert: Path
    key: Path


@dataclass(frozen=True, slots=True)
class CertSet:
    """Everything ``make_certs`` wrote (or found) in a directory."""

    ca: CertFiles
    nodes: dict[int, CertFiles]
    client: CertFiles

    def to_json(self) -> dict[str, object]:
        return {
            "ca": str(self.ca.cert),
            "ca_key": str(self.ca.key),
            "nodes": [{"id": i, "cert": str(f.cert), "key": str(f.key)} for i, f in sorted(self.nodes.items())],
            "client": {"cert": str(self.client.cert), "key": str(self.client.key)},
        }


def files_for(out: Path, name: str) -> CertFiles:
    return CertFiles(out / f"{name}.crt", out / f"{name}.key")


def planned(out: Path, node_ids: Sequence[int]) -> CertSet:
    """Where ``make_certs`` puts each file."""
    return CertSet(
        ca=files_for(out, CA_NAME),
        nodes={i: files_for(out, node_common_name(i)) for i in node_ids},
        client=files_for(out, CLIENT_NAME),
    )


def existing_files(out: Path, node_ids: Sequence[int]) -> list[Path]:
    """The files ``make_certs`` would write that are already there."""
    target = planned(out, node_ids)
    files = [target.ca, *target.nodes.values(), target.client]
    return [path for f in files for path in (f.cert, f.key) if path.exists()]


def make_certs(
    out: Path,
    node_ids: Sequence[int],
    *,
    hosts: Sequence[str] = (),
    days: int = DEFAULT_DAYS,
    overwrite: bool = False,
) -> CertSet:
    """Write a CA, one certificate per node and a client certificate into ``out``.

    With ``overwrite`` false, files that already exist are kept: an existing CA signs the
    certificates that are missing (so a quorum grown from 3 to 5 nodes keeps trusting its first
    three), and existing node and client certificates are left as they are.
    """
    if days < 1:
        raise ValueError(f"--days must be at least 1, got {days}")
    if not node_ids:
        raise ValueError("--nodes must be at least 1")
    names = _subject_alt_names([*DEFAULT_HOSTS, *hosts])
    out.mkdir(parents=True, exist_ok=True)
    target = planned(out, node_ids)
    now = datetime.datetime.now(datetime.UTC)
    if overwrite or not (target.ca.cert.exists() and target.ca.key.exists()):
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_cert = _ca_certificate(ca_key, now, days)
        _write(target.ca, ca_cert, ca_key)
    else:
        ca_cert, ca_key = _load_ca(target.ca)
    for node_id, files in target.nodes.items():
        if overwrite or not (files.cert.exists() and files.key.exists()):
            key = ec.generate_private_key(ec.SECP256R1())
            cert = _leaf(node_common_name(node_id), key, ca_cert, ca_key, now, days, names, server=True)
            _write(files, cert, key)
    if overwrite or not (target.client.cert.exists() and target.client.key.exists()):
        key = ec.generate_private_key(ec.SECP256R1())
        _write(target.client, _leaf(CLIENT_NAME, key, ca_cert, ca_key, now, days, [], server=False), key)
    return target


def _subject_alt_names(hosts: Sequence[str]) -> list[x509.GeneralName]:
    """DNS names and IP addresses, deduplicated in order; an IP-looking host becomes an IP SAN
    (TLS clients match an address they dialled against IP SANs only)."""
    names: list[x509.GeneralName] = []
    seen: set[str] = set()
    for given in hosts:
        host = given.strip()
        if not host:
            raise ValueError("--host must not be empty")
        if host in seen:
            continue
        seen.add(host)
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return names


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, ORGANIZATION),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _ca_certificate(key: ec.EllipticCurvePrivateKey, now: datetime.datetime, days: int) -> x509.Certificate:
    public = key.public_key()
    return (
        x509.CertificateBuilder()
        .subject_name(_name("raftmeta throwaway CA"))
        .issuer_name(_name("raftmeta throwaway CA"))
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .sign(key, hashes.SHA256())
    )


def _leaf(
    common_name: str,
    key: ec.EllipticCurvePrivateKey,
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    now: datetime.datetime,
    days: int,
    names: list[x509.GeneralName],
    *,
    server: bool,
) -> x509.Certificate:
    usages = (
        [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
        if server
        else [ExtendedKeyUsageOID.CLIENT_AUTH]
    )
    # A leaf never outlives the CA that signed it.
    not_after = min(now + datetime.timedelta(days=days), ca_cert.not_valid_after_utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
    )
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(ca_key, hashes.SHA256())


def _load_ca(files: CertFiles) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    cert = x509.load_pem_x509_certificate(files.cert.read_bytes())
    key = serialization.load_pem_private_key(files.key.read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{files.key} is not an EC private key (expected the CA key written by `certs make`)")
    spki = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    if key.public_key().public_bytes(*spki) != cert.public_key().public_bytes(*spki):
        raise ValueError(f"{files.key} does not belong to the CA certificate {files.cert}")
    return cert, key


def _write(files: CertFiles, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> None:
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    _write_private(files.key, key_pem)
    files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _write_private(path: Path, data: bytes) -> None:
    """Write ``data`` readable by the owner only, from the first byte (no window where it is not)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as file:
        os.fchmod(fd, 0o600)  # an existing file keeps its mode through O_CREAT: narrow it too
        file.write(data)
