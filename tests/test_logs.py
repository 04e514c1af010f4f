"""The node's logs stay free of tracebacks for routine events (a caller gone before its answer)."""

from __future__ import annotations

import logging
import sys

from raftmeta.logs import UndeliveredReplyFilter


class ExecuteBatchError(Exception):
    """Named like grpc's cygrpc.ExecuteBatchError (the filter matches the class name)."""


def record(error: BaseException) -> logging.LogRecord:
    try:
        raise error
    except BaseException:
        exc_info = sys.exc_info()
    return logging.LogRecord(
        "grpc._cython.cygrpc",
        logging.ERROR,
        __file__,
        1,
        "%s raised in core by servicer method [%s]",
        (type(error).__name__, "/raftmeta.v1.RaftService/Fetch"),
        exc_info,
    )


class Recorder:
    def __init__(self) -> None:
        self.lines: list[tuple[str, dict[str, object]]] = []

    def info(self, event: str, **fields: object) -> None:
        self.lines.append((event, fields))


def test_an_undelivered_reply_becomes_one_line_without_traceback() -> None:
    undelivered = UndeliveredReplyFilter()
    recorder = Recorder()
    undelivered._log = recorder  # type: ignore[assignment]
    assert undelivered.filter(record(ExecuteBatchError("Failed execute_batch"))) is False
    assert recorder.lines == [("reply not delivered: the caller went away", {"rpc": "/raftmeta.v1.RaftService/Fetch"})]


def test_other_grpc_errors_pass_through() -> None:
    assert UndeliveredReplyFilter().filter(record(RuntimeError("a real bug"))) is True
