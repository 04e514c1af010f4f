"""TLS settings for listeners and channels: which files, checked once, turned into gRPC credentials.

TLS is opt-in (plaintext on loopback stays the default). A :class:`TlsConfig` names a certificate,
its key and a CA bundle, and remembers the flag prefix it came from (``--tls`` or
``--client-tls``) so every error names the flag and the file. Files are checked before gRPC sees
them -- gRPC reports a bad key or an expired certificate only as a failed handshake, far from the
cause.

Roles: a listener presents ``cert``/``key`` and, when ``ca`` is given, requires and verifies client
certificates against it (mutual TLS). A channel verifies the server against ``ca`` (the system
roots without one) and presents ``cert``/``key`` when given.
"""

from __future__ import annotations

import datetime
import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
import grpc.aio

from raftmeta.api.limits import grpc_channel_options

if TYPE_CHECKING:
    from cryptography import x509


def node_common_name(node_id: int) -> str:
    """The subject CN a voter's certificate carries (docs/security.md): peers check that a caller of
    RaftService presents ``node-N`` for the voter id N it claims."""
    return f"node-{node_id}"


class TlsError(ValueError):
    """A TLS setting or file is unusable; the message names the flag and the path."""


@dataclass(frozen=True, slots=True)
class TlsMaterial:
    """The checked PEM bytes of a :class:`TlsConfig`, ready for gRPC."""

    cert_chain: bytes | None
    private_key: bytes | None
    ca: bytes | None
    common_name: str | None  # the subject CN of our own certificate, for logs

    def server_credentials(self) -> grpc.ServerCredentials:
        """Credentials for a listener: client certificates are required exactly when a CA is given."""
        if self.cert_chain is None or self.private_key is None:
            raise TlsError("a TLS listener needs a certificate and its key")
        return grpc.ssl_server_credentials(
            [(self.private_key, self.cert_chain)],
            root_certificates=self.ca,
            require_client_auth=self.ca is not None,
        )

    def channel_credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(
            root_certificates=self.ca, private_key=self.private_key, certificate_chain=self.cert_chain
        )


@dataclass(frozen=True, slots=True)
class TlsConfig:
    """Paths of a certificate, its private key and a CA bundle (each optional, cert and key together)."""

    cert: Path | None = None
    key: Path | None = None
    ca: Path | None = None
    # The flags these paths came from, for error messages: "--tls" → --tls-cert, --tls-key, --tls-ca.
    flag_prefix: str = field(default="--tls", compare=False)

    def __post_init__(self) -> None:
        if (self.cert is None) != (self.key is None):
            given, missing = ("cert", "key") if self.key is None else ("key", "cert")
            raise TlsError(f"{self.flag(given)} needs {self.flag(missing)}: a certificate is used with its private key")

    @classmethod
    def from_flags(
        cls,
        cert: str | Path | None,
        key: str | Path | None,
        ca: str | Path | None,
        *,
        flag_prefix: str = "--tls",
    ) -> TlsConfig | None:
        """The config for three flag values; None (plaintext) when none is given."""
        if not (cert or key or ca):
            return None
        return cls(
            Path(cert) if cert else None, Path(key) if key else None, Path(ca) if ca else None, flag_prefix=flag_prefix
        )

    def flag(self, part: str) -> str:
        return f"{self.flag_prefix}-{part}"

    @property
    def mutual(self) -> bool:
        """On a listener: whether client certificates are required (a CA is given)."""
        return self.ca is not None

    def require_server_identity(self) -> TlsConfig:
        """Check that a listener can use this config (it must present a certificate)."""
        if self.cert is None:
            raise TlsError(
                f"{self.flag('ca')} needs {self.flag('cert')} and {self.flag('key')}: "
                "a TLS listener presents its own certificate"
            )
        return self

    def to_args(self) -> list[str]:
        """These settings as command-line flags (to start a process with them)."""
        return [arg for part, path in self._parts() if path is not None for arg in (self.flag(part), str(path))]

    def to_json(self) -> dict[str, str | None]:
        return {part: None if path is None else str(path) for part, path in self._parts()}

    def _parts(self) -> tuple[tuple[str, Path | None], ...]:
        return (("cert", self.cert), ("key", self.key), ("ca", self.ca))

    def load(self, *, now: datetime.datetime | None = None) -> TlsMaterial:
        """Read and check every file: PEM, key matches certificate, certificate currently valid."""
        from cryptography.x509.oid import NameOID  # only TLS users pay for the import

        moment = now or datetime.datetime.now(datetime.UTC)
        cert_chain = private_key = ca = None
        common_name = None
        if self.cert is not None and self.key is not None:
            cert_chain = self._read("cert", self.cert)
            leaf = self._certificates("cert", self.cert, cert_chain)[0]
            private_key = self._read("key", self.key)
            self._check_key(leaf, private_key)
            self._check_validity(leaf, moment)
            names = leaf.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
            common_name = str(names[0].value) if names else None
        if self.ca is not None:
            ca = self._read("ca", self.ca)
            self._certificates("ca", self.ca, ca)
        return TlsMaterial(cert_chain, private_key, ca, common_name)

    def _read(self, part: str, path: Path) -> bytes:
        try:
            return path.read_bytes()
        except FileNotFoundError:
            raise TlsError(f"{self.flag(part)} {path}: no such file") from None
        except IsADirectoryError:
            raise TlsError(f"{self.flag(part)} {path}: is a directory, expected a PEM file") from None
        except PermissionError:
            raise TlsError(f"{self.flag(part)} {path}: not readable by this user (permission denied)") from None
        except OSError as exc:
            raise TlsError(f"{self.flag(part)} {path}: cannot be read: {exc.strerror}") from None

    def _certificates(self, part: str, path: Path, data: bytes) -> list[x509.Certificate]:
        from cryptography import x509

        try:
            certificates = x509.load_pem_x509_certificates(data)
        except ValueError:
            raise TlsError(
                f"{self.flag(part)} {path}: not a PEM certificate (expected -----BEGIN CERTIFICATE-----)"
            ) from None
        return certificates

    def _check_key(self, leaf: x509.Certificate, data: bytes) -> None:
        from cryptography.exceptions import UnsupportedAlgorithm
        from cryptography.hazmat.primitives import serialization

        flag, path = self.flag("key"), self.key
        try:
            key = serialization.load_pem_private_key(data, password=None)
        except TypeError:
            raise TlsError(
                f"{flag} {path}: the key is encrypted; give an unencrypted key and protect it with file permissions"
            ) from None
        except (ValueError, UnsupportedAlgorithm):
            raise TlsError(f"{flag} {path}: not a PEM private key (expected -----BEGIN PRIVATE KEY-----)") from None
        spki = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        if key.public_key().public_bytes(*spki) != leaf.public_key().public_bytes(*spki):
            raise TlsError(
                f"{flag} {path}: this key does not belong to the certificate in {self.flag('cert')} {self.cert}"
            )

    def _check_validity(self, leaf: x509.Certificate, now: datetime.datetime) -> None:
        flag, path = self.flag("cert"), self.cert
        if now > leaf.not_valid_after_utc:
            raise TlsError(f"{flag} {path}: the certificate expired on {leaf.not_valid_after_utc.isoformat()}")
        if now < leaf.not_valid_before_utc:
            raise TlsError(
                f"{flag} {path}: the certificate is not valid before {leaf.not_valid_before_utc.isoformat()}"
            )


@functools.lru_cache(maxsize=16)
def _load_cached(config: TlsConfig) -> TlsMaterial:
    return config.load()


def material(config: TlsConfig | None) -> TlsMaterial | None:
    """``config``'s checked files, read once per process (a node reads its certificate at start
    and uses it for every channel it opens later; new certificates take a restart)."""
    return None if config is None else _load_cached(config)


def open_channel(target: str, tls: TlsMaterial | None) -> grpc.aio.Channel:
    """A grpc.aio channel to ``target``: TLS with ``tls``, plaintext without."""
    if tls is None:
        return grpc.aio.insecure_channel(target, options=grpc_channel_options())
    return grpc.aio.secure_channel(target, tls.channel_credentials(), options=grpc_channel_options())


def add_port(server: grpc.aio.Server, address: str, tls: TlsMaterial | None) -> int:
    """Bind ``server`` to ``address`` (TLS with ``tls``); the bound port, 0 when binding failed."""
    if tls is None:
        return server.add_insecure_port(address)
    return server.add_secure_port(address, tls.server_credentials())
