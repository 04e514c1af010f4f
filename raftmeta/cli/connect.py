"""Options and error handling shared by the commands that talk to a running quorum."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click

from raftmeta.cli.common import CheckFailed, usage_error
from raftmeta.client import ClientError, OutcomeUnknownError, RetryPolicy, SyncControllerClient, parse_bootstrap

F = TypeVar("F", bound=Callable[..., Any])


def bootstrap_options(func: F) -> F:
    """Add ``--bootstrap-server`` and ``--timeout`` (seconds) to a command."""
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
def connect(bootstrap_server: str, timeout: float) -> Iterator[SyncControllerClient]:
    """A client for the command; client errors become exit code 1 with the server's message."""
    try:
        parse_bootstrap(bootstrap_server)
    except ValueError as exc:
        raise usage_error(str(exc), "--bootstrap-server") from exc
    policy = RetryPolicy(deadline_s=timeout, attempt_timeout_s=min(5.0, timeout))
    client = SyncControllerClient(bootstrap_server, retry=policy)
    try:
        yield client
    except OutcomeUnknownError as exc:
        raise CheckFailed(f"{exc}. Run the same command again to learn the outcome.") from exc
    except ClientError as exc:
        raise CheckFailed(str(exc)) from exc
    finally:
        client.close()
