"""Structured logging, configured once per process.

Console rendering on a terminal, JSON lines otherwise (so logs of node processes and CI runs
are machine-readable). Logs go to stderr: stdout is reserved for command output, which scripts
parse with ``--output json``. Drivers bind ``node_id``, ``epoch`` and offsets to their loggers.
"""

from __future__ import annotations

import logging
import sys
from typing import Literal

import structlog

LogFormat = Literal["auto", "console", "json"]
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


def configure_logging(level: str = "info", fmt: LogFormat = "auto") -> None:
    """Configure structlog and the stdlib root logger. Safe to call more than once."""
    numeric = logging.getLevelNamesMapping()[level.upper()]
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
    # Libraries that use stdlib logging (grpc, py4j) follow the same level and stream.
    logging.basicConfig(level=numeric, stream=sys.stderr, force=True, format="%(name)s %(levelname)s %(message)s")


def get_logger(name: str, **bound: object) -> structlog.stdlib.BoundLogger:
    """A logger with ``component=name`` and any extra context bound."""
    logger: structlog.stdlib.BoundLogger = structlog.get_logger(component=name, **bound)
    return logger
