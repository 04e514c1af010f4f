"""Options and error handling shared by the commands that talk to a running quorum."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click

from raftmeta.cli.common import CheckFailed, usage_error
from raftmeta.client import (
    ClientError,
    OutcomeUnknownError,
    RetryPolicy,
    SyncControllerClient,
    UnavailableError,
    parse_bootstrap,
)
from raftmeta.tls import TlsConfig, TlsError, material

F = TypeVar("F", bound=Callable[..., Any])

# The --tls-* values of the running command, kept in the click context so that every command
# gets them through ``bootstrap_options`` and ``connect`` without a parameter of its own.
_TLS_META = "raftmeta.tls"
_TLS_FLAGS = (
    ("cert", "Client certificate (PEM), for listeners that require one (mutual TLS)."),
    ("key", "Private key (PEM) of --tls-cert."),
    ("ca", "CA bundle (PEM) that signed the nodes' certificates; turns on TLS."),
)


def _remember_tls(ctx: click.Context, param: click.Parameter, value: Path | None) -> None:
    ctx.meta.setdefault(_TLS_META, {})[param.name] = value


def tls_options(func: F) -> F:
    """Add ``--tls-cert/--tls-key/--tls-ca`` (env RAFTMETA_TLS_CERT/KEY/CA); read them with
    :func:`tls_from_context`. Any of them turns on TLS; none means plaintext."""
    for part, text in reversed(_TLS_FLAGS):
        env = f"RAFTMETA_TLS_{part.upper()}"
        func = click.option(
            f"--tls-{part}",
            f"tls_{part}",
            type=click.Path(dir_okay=False, path_type=Path),
            envvar=env,
            expose_value=False,
            callback=_remember_tls,
            help=f"{text} (env {env})",
        )(func)
    return func


def tls_from_context() -> TlsConfig | None:
    """The current command's TLS settings, with their files checked (a bad one is a usage error)."""
    ctx = click.get_current_context(silent=True)
    values: dict[str, Path | None] = {} if ctx is None else ctx.meta.get(_TLS_META, {})
    try:
        tls = TlsConfig.from_flags(values.get("tls_cert"), values.get("tls_key"), values.get("tls_ca"))
        material(tls)
    except TlsError as exc:
        raise usage_error(str(exc)) from exc
    return tls


def bootstrap_options(func: F) -> F:
    """Add ``--bootstrap-server``, ``--timeout`` (seconds) and the ``--tls-*`` flags to a command."""
    func = tls_options(func)
    func = click.option(
        "--timeout",
        type=click.FloatRange(min=0.1),
        default=15.0,
        show_default=True,
        help="Seconds to keep trying (retries across nodes, waiting for a leader).",
    )(func)
    decorated: F = click.option(
        "--bootstrap-server",
        "bootstrap_server",
        required=True,
        envvar="RAFTMETA_BOOTSTRAP_SERVER",
        help="host:port[,host:port...] of any quorum nodes (env RAFTMETA_BOOTSTRAP_SERVER).",
    )(func)
    return decorated


@contextmanager
def connect(bootstrap_server: str, timeout: float, tls: TlsConfig | None = None) -> Iterator[SyncControllerClient]:
    """A client for the command; client errors become exit code 1 with the server's message
    (:class:`CheckFailed` named by the quorum's error code or the gRPC status, which
    ``--output json`` prints as the error object: transport, limit and rejection errors alike).

    ``tls`` defaults to the command's ``--tls-*`` flags (see :func:`bootstrap_options`).
    """
    try:
        parse_bootstrap(bootstrap_server)
    except ValueError as exc:
        raise usage_error(str(exc), "--bootstrap-server") from exc
    if tls is None:
        tls = tls_from_context()
    _require_a_grpc_peer(parse_bootstrap(bootstrap_server), timeout, tls)
    policy = RetryPolicy(deadline_s=timeout, attempt_timeout_s=min(5.0, timeout))
    client = SyncControllerClient(bootstrap_server, retry=policy, tls=tls)
    try:
        yield client
    except OutcomeUnknownError as exc:
        if not exc.request_id:  # a voter change: nothing to repeat it by
            raise CheckFailed(
                f"{exc}. `raftmeta quorum status` shows the voters as they are now.",
                code="OUTCOME_UNKNOWN",
                details=_error_details(exc),
            ) from exc
        raise CheckFailed(
            f"{exc}. The request may or may not have been applied: run the same command again with "
            f"--request-id {exc.request_id} to learn its outcome (the quorum answers a repeated request id "
            "with the first request's answer, and never applies it twice).",
            code="OUTCOME_UNKNOWN",
            details={**_error_details(exc), "request_id": exc.request_id},
        ) from exc
    except ClientError as exc:
        raise CheckFailed(
            str(exc) + _tls_hint(exc, tls), code=exc.error_code or exc.code.name, details=_error_details(exc)
        ) from exc
    finally:
        client.close()


# How long each exchange of the peer probe may take: a slower peer is left to the client's retries.
PEER_PROBE_TIMEOUT_S = 2.0


def _require_a_grpc_peer(targets: list[str], timeout: float, tls: TlsConfig | None) -> None:
    """Fail at once, saying what is there, when no bootstrap address can be a gRPC listener
    (connection refused, an HTTP/1 server, a Kafka listener, TLS without --tls-ca); the first
    one that may be lets the command go ahead."""
    from raftmeta.cli.peer_probe import probe

    peers = []
    for target in targets:
        peer = probe(target, min(PEER_PROBE_TIMEOUT_S, timeout), tls=tls is not None)
        if peer.usable:
            return
        peers.append(peer)
    raise CheckFailed(
        "no raftmeta node at --bootstrap-server: "
        + "; ".join(p.describe() for p in peers)
        + ". Give a node's --listen or --client-listen address (`raftmeta quorum bootstrap` prints them "
        "for a local quorum).",
        code="UNAVAILABLE",
        details={"peers": {p.address: p.kind.value for p in peers}},
    )


def _error_details(exc: ClientError) -> dict[str, str]:
    """The keys a failed call adds to the ``--output json`` error object (common.error_document)."""
    details = {"method": exc.method, "grpc_status": exc.code.name}
    if exc.error_code:
        details["error_code"] = exc.error_code
    return details


def _tls_hint(exc: ClientError, tls: TlsConfig | None) -> str:
    """A node that refuses a connection's TLS (or its absence) just closes it: say what may be missing."""
    if not isinstance(exc, UnavailableError) or "socket closed" not in exc.details.lower():
        return ""
    if tls is None:
        return " (if the quorum runs TLS, give --tls-ca, and --tls-cert/--tls-key when it requires client certificates)"
    if tls.cert is None:
        return " (if the node requires client certificates, give --tls-cert and --tls-key)"
    return " (the node may not accept this client certificate: check that its CA is the node's --tls-ca)"
