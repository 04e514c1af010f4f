"""Pieces every ``raftmeta`` subcommand shares: ``--output``, result printing and exit codes.

Exit codes (DESIGN.md §8): 0 ok, 1 a check failed or a request was rejected, 2 usage error.
Click already exits 2 on usage errors; commands raise :class:`CheckFailed` (or return
``EXIT_FAILED``) for 1.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any, Literal, TypeVar

import click

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2

OutputFormat = Literal["text", "json"]
F = TypeVar("F", bound=Callable[..., Any])


def output_option(func: F) -> F:
    """Add ``--output text|json`` to a command; the value arrives as the ``output`` parameter."""
    decorated: F = click.option(
        "--output",
        "-o",
        type=click.Choice(["text", "json"]),
        default="text",
        show_default=True,
        help="Human-readable text, or one JSON document on stdout for scripts.",
    )(func)
    return decorated


def emit_json(document: Any) -> None:
    """Print one JSON document on stdout (sorted keys are not used: field order is the contract's)."""
    sys.stdout.write(json.dumps(document, indent=2, default=_json_default) + "\n")
    sys.stdout.flush()


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


class CheckFailed(click.ClickException):
    """A check failed or a request was rejected: exit code 1 with a message on stderr."""

    exit_code = EXIT_FAILED


def usage_error(message: str, param: str | None = None) -> click.UsageError:
    """A usage error (exit 2) that names the offending argument."""
    if param:
        return click.BadParameter(message, param_hint=param)
    return click.UsageError(message)
