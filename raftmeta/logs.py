"""Structured logging, configured once per process.

Console rendering on a terminal, JSON lines otherwise (so logs of node processes and CI runs
are machine-readable). Logs go to stderr: stdout is reserved for command output, which scripts
parse with ``--output json``. Drivers bind ``node_id``, ``epoch`` and offsets to their loggers.
"""

from __future__ import annotations

import logging
import sys
from types import ModuleType
from typing import TYPE_CHECKING, Literal, cast

if TYPE_CHECKING:
    import structlog

LogFormat = Literal["auto", "console", "json"]

# structlog imports rich when it is installed: ~0.1-0.4 s that a CLI command which logs nothing
# should not pay. So structlog is imported, and configured, when a logger is first used; a
# configuration asked for before that waits here.
_pending: list[tuple[str, LogFormat]] = []  # at most one: the latest asked for


def configure_logging(level: str = "info", fmt: LogFormat = "auto") -> None:
    """Configure structlog and the stdlib root logger. Safe to call more than once."""
    numeric = logging.getLevelNamesMapping()[level.upper()]
    # Libraries that use stdlib logging (grpc, py4j) follow the same level and stream.
    logging.basicConfig(level=numeric, stream=sys.stderr, force=True, format="%(name)s %(levelname)s %(message)s")
    _pending.clear()
    if "structlog" in sys.modules:
        _configure_structlog(numeric, fmt)
    else:
        _pending.append((level, fmt))


def configured_structlog() -> ModuleType:
    """The structlog module, with the configuration :func:`configure_logging` asked for applied
    (unless something configured structlog itself since: the later configuration wins)."""
    import structlog

    if _pending:
        level, fmt = _pending.pop()
        if structlog.is_configured():
            return structlog
        _configure_structlog(logging.getLevelNamesMapping()[level.upper()], fmt)
    return structlog


def _configure_structlog(numeric: int, fmt: LogFormat) -> None:
    import structlog

    render_json = fmt == "json" or (fmt == "auto" and not sys.stderr.isatty())
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer()
        if render_json
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    processors: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
        structlog.processors.format_exc_info,
        renderer,
    ]
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )


class _DeferredLogger:
    """Stands for ``structlog.get_logger(**bound)`` until first used, then delegates to it."""

    __slots__ = ("_bound", "_logger")

    def __init__(self, bound: dict[str, object]) -> None:
        self._bound = bound
        self._logger: object | None = None

    def __getattr__(self, name: str) -> object:
        if self._logger is None:
            self._logger = configured_structlog().get_logger(**self._bound)
        return getattr(self._logger, name)


def get_logger(name: str, **bound: object) -> structlog.stdlib.BoundLogger:
    """A logger with ``component=name`` and any extra context bound (structlog is imported when
    it first logs)."""
    return cast("structlog.stdlib.BoundLogger", _DeferredLogger({"component": name, **bound}))


class UndeliveredReplyFilter(logging.Filter):
    """grpc.aio logs ``ExecuteBatchError`` with a full traceback when a servicer's answer cannot be
    sent because its caller is gone (deadline passed, connection cut, process killed or paused).
    In a quorum whose peers are killed and paused on purpose that is routine, not a crash, so the
    traceback becomes one structured line (the RPC named) and real errors still pass through."""

    def __init__(self) -> None:
        super().__init__()
        self._log = get_logger("grpc")

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if error is None or type(error).__name__ != "ExecuteBatchError":
            return True
        message = record.getMessage()
        rpc = message[message.find("[") + 1 : message.rfind("]")] if "[" in message else ""
        self._log.info("reply not delivered: the caller went away", rpc=rpc)
        return False


def quiet_undelivered_replies() -> None:
    """Install :class:`UndeliveredReplyFilter` on grpc's logger (once; servers call this)."""
    logger = logging.getLogger("grpc._cython.cygrpc")
    if not any(isinstance(f, UndeliveredReplyFilter) for f in logger.filters):
        logger.addFilter(UndeliveredReplyFilter())
