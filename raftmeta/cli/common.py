"""Pieces every ``raftmeta`` subcommand shares: ``--output``, result printing, exit codes, the
integer flag type and the JSON error object.

Exit codes (DESIGN.md §8): 0 ok, 1 a check failed or a request was rejected, 2 usage error.
Click already exits 2 on usage errors; commands raise :class:`CheckFailed` (or return
``EXIT_FAILED``) for 1. With ``--output json`` an error that ends the command before it printed
its document (a usage error, a limit or transport error from the quorum, a failed check) is also
printed on stdout as ``{"error": {"code", "message", "exit_code", ...}}`` (:func:`error_document`;
the root group in ``raftmeta.cli.main`` does it for every command), so a script always reads JSON.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, TypeVar

import click

from raftmeta.api import limits

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2

OutputFormat = Literal["text", "json"]
F = TypeVar("F", bound=Callable[..., Any])

# ---- integers ------------------------------------------------------------------------------------
# Protobuf int32/int64 fields raise ValueError on anything wider, so every integer a command reads
# (a flag, or a field inside a flag's value or a file) is checked against a range with both ends.
INT32_MIN: int = -(2**31)
INT32_MAX: int = 2**31 - 1
INT64_MIN: int = -(2**63)
INT64_MAX: int = 2**63 - 1
# kafka-topics.sh: "The replication factor must be between 1 and 32767 inclusive" (a Java short).
REPLICATION_FACTOR_MAX: int = 2**15 - 1


def range_text(low: int, high: int) -> str:
    """How ranges are written in messages and help: ``1..2147483647``."""
    return f"{low}..{high}"


class BoundedInt(click.IntRange):
    """The type of every integer flag: an integer in ``low..high``, both ends given.

    Anything else is a usage error (exit 2) naming the flag and the range, e.g. ``Invalid value
    for '--partitions': 99999999999 is not in the range 1..2147483647.`` Integers inside a flag's
    value (broker ids of ``--replica-assignment``, ``--pool`` ids, plan files) are checked with
    :func:`check_int`, which words its message the same way.
    """

    name = "integer"

    def __init__(self, low: int, high: int) -> None:
        if low > high:
            raise ValueError(f"empty range {range_text(low, high)}")
        super().__init__(min=low, max=high)
        self.low = low
        self.high = high

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, bool):
            self.fail(f"{value!r} is not an integer", param, ctx)
        if isinstance(value, int):
            number = value
        else:
            text = str(value).strip()
            try:
                number = int(text, 10)
            except ValueError:
                self.fail(f"{value!r} is not an integer in the range {range_text(self.low, self.high)}", param, ctx)
        if not self.low <= number <= self.high:
            self.fail(f"{number} is not in the range {range_text(self.low, self.high)}", param, ctx)
        return number

    def _describe_range(self) -> str:  # shown in --help as [low..high]
        return range_text(self.low, self.high)

    def __repr__(self) -> str:
        return f"BoundedInt({self.low}, {self.high})"


def check_int(value: int, low: int, high: int, what: str, param: str) -> int:
    """An integer read from inside a flag's value (or a file a flag names), checked like a flag:
    out of ``low..high`` is a usage error naming the flag, the field and the range."""
    if not low <= value <= high:
        raise usage_error(f"{what} {value} is not in the range {range_text(low, high)}", param)
    return value


# The ranges commands share. Ids and counts are Kafka's Java ints (non-negative where Kafka's are);
# seeds are java.util.Random's long.
# A topic's partitions and replicas on the quorum: the server's caps (raftmeta.api.limits), so a flag
# never advertises a range the server refuses. Offline tools (placement preview) keep Kafka's.
TOPIC_PARTITION_COUNT = BoundedInt(1, limits.PARTITIONS_PER_TOPIC_MAX)
TOPIC_REPLICATION_FACTOR = BoundedInt(1, limits.REPLICAS_PER_PARTITION_MAX)
REPLICATION_FACTOR = BoundedInt(1, REPLICATION_FACTOR_MAX)
BROKER_ID = BoundedInt(0, INT32_MAX)
NODE_ID = BoundedInt(0, INT32_MAX)
SEED = BoundedInt(INT64_MIN, INT64_MAX)


def int_range(low: int, high: int = INT32_MAX) -> BoundedInt:
    """A count, a size or a duration in ms: ``low..high`` (by default up to the int32 maximum)."""
    return BoundedInt(low, high)


# ---- output --------------------------------------------------------------------------------------
# Whether this invocation already printed its JSON document (the error object is not added then).
_EMITTED = "raftmeta.emitted"


def request_id_option(func: F) -> F:
    """Add ``--request-id`` to a command that writes: the id its request carries. The quorum answers
    a repeated id with the first request's answer, so running a command again with the id an
    "outcome unknown" error printed learns what happened instead of doing it twice."""
    decorated: F = click.option(
        "--request-id",
        default=None,
        callback=_check_request_id,
        help="Send the request under this id (1-64 characters); repeat it to learn an unknown outcome. "
        "Default: a new one.",
    )(func)
    return decorated


def _check_request_id(ctx: click.Context, param: click.Parameter, value: str | None) -> str:
    import uuid

    from raftmeta.api.limits import REQUEST_ID_CHARS_MAX

    if value is None:
        return str(uuid.uuid4())
    if not 1 <= len(value) <= REQUEST_ID_CHARS_MAX:
        raise click.BadParameter(f"must be 1..{REQUEST_ID_CHARS_MAX} characters, got {len(value)}", ctx, param)
    return value


def output_option(func: F) -> F:
    """Add ``--output text|json`` to a command; the value arrives as the ``output`` parameter."""
    decorated: F = click.option(
        "--output",
        "-o",
        type=click.Choice(["text", "json"]),
        default="text",
        show_default=True,
        help='Human-readable text, or one JSON document on stdout for scripts (errors too: {"error": {...}}).',
    )(func)
    return decorated


def emit_json(document: Any) -> None:
    """Print one JSON document on stdout (sorted keys are not used: field order is the contract's)."""
    sys.stdout.write(json.dumps(document, indent=2, default=_json_default) + "\n")
    sys.stdout.flush()
    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        ctx.meta[_EMITTED] = True


def emitted(ctx: click.Context) -> bool:
    """Whether a JSON document was printed during this invocation (``ctx``: any of its contexts)."""
    return bool(ctx.meta.get(_EMITTED))


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


def json_requested(args: Sequence[str]) -> bool:
    """Whether a command line asks for ``--output json`` (``--output json``, ``--output=json``,
    ``-o json``, ``-ojson``). Read from the raw arguments because a usage error may stop click
    before it has parsed ``--output``."""
    items = list(args)
    for index, item in enumerate(items):
        if item == "--":
            break
        following = items[index + 1] if index + 1 < len(items) else None
        if item in ("--output", "-o") and following == "json":
            return True
        if item in ("--output=json", "-ojson", "-o=json"):
            return True
    return False


# ---- errors --------------------------------------------------------------------------------------
class CheckFailed(click.ClickException):
    """A check failed or a request was rejected: exit code 1 with a message on stderr.

    ``code`` names the failure for scripts (``--output json`` prints it in the error object):
    ``CHECK_FAILED`` unless the cause has a better name (the quorum's error code, a gRPC status);
    ``details`` are further keys of the error object.
    """

    exit_code = EXIT_FAILED

    def __init__(self, message: str, *, code: str = "CHECK_FAILED", details: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.details: dict[str, Any] = dict(details or {})


def usage_error(message: str, param: str | None = None) -> click.UsageError:
    """A usage error (exit 2) that names the offending argument."""
    if param:
        return click.BadParameter(message, param_hint=param)
    return click.UsageError(message)


class FlagConflict(click.UsageError):
    """Flags that cannot be given together (exit 2), as kafka-topics.sh words it: ``--a can't be
    used with --b``, with the reason. ``--output json`` lists them as ``params``."""

    def __init__(self, flag: str, other: str, reason: str) -> None:
        super().__init__(f"{flag} can't be used with {other} ({reason})")
        self.params = [flag, other]


def error_document(exc: click.ClickException) -> dict[str, Any]:
    """The JSON error object of an error that ends a command: ``{"error": {"code", "message",
    "exit_code", ...}}``. ``code`` is ``USAGE_ERROR`` for usage errors (with ``param`` naming the
    argument when click knows it, ``params`` the flags of a :class:`FlagConflict`), else
    :attr:`CheckFailed.code` and its details; ``message`` is what stderr says."""
    error: dict[str, Any] = {"code": "USAGE_ERROR", "message": exc.format_message(), "exit_code": exc.exit_code}
    if isinstance(exc, click.BadParameter):
        hint = _param_hint(exc)
        if hint:
            error["param"] = hint
    elif isinstance(exc, FlagConflict):
        error["params"] = list(exc.params)
    elif isinstance(exc, click.UsageError):
        return {"error": error}  # USAGE_ERROR, with no single argument to name
    elif isinstance(exc, CheckFailed):
        error["code"] = exc.code
        error.update({k: v for k, v in exc.details.items() if k not in error})
    else:
        error["code"] = "CHECK_FAILED" if exc.exit_code == EXIT_FAILED else "ERROR"
    return {"error": error}


def _param_hint(exc: click.BadParameter) -> str | None:
    if exc.param_hint is not None:
        hint = exc.param_hint
        return " / ".join(hint) if not isinstance(hint, str) else hint
    if exc.param is not None:
        names = [*exc.param.opts] if exc.param.opts else []
        if isinstance(exc.param, click.Argument) or not names:
            return (exc.param.name or "").upper() or None
        return max(names, key=len)
    return None
