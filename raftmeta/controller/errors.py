"""The controller's two kinds of failure.

- :class:`ApiError` is an answer: a Kafka error code plus a message naming the field and the rule.
  Handlers put it in the per-item result of a response; it never escapes a handler.
- :class:`ReplayError` is a programmer or corruption error: a record that cannot follow the image
  it is replayed onto (a partition of an unknown topic, a duplicate topic id, a change to a removed
  topic, an epoch that does not follow). Replay raises it and changes nothing -- a node must stop
  rather than build an image that differs from its peers'.
- :class:`RequestError` is a malformed request as a whole (the driver answers INVALID_ARGUMENT).
- :class:`NotControllerError` and :class:`ControllerFailedError` are a request's outcome when this
  node cannot answer it (not the active controller) or a handler failed (a bug, INTERNAL).
"""

from __future__ import annotations

from dataclasses import dataclass

from raftmeta.v1 import errors_pb2


@dataclass(frozen=True, slots=True)
class ApiError:
    code: int
    message: str = ""

    @property
    def name(self) -> str:
        return errors_pb2.ErrorCode.Name(self.code)  # type: ignore[arg-type]


NONE = ApiError(errors_pb2.NONE, "")


class ReplayError(ValueError):
    """A record that cannot be applied to the image: the log or the caller is wrong."""


class RequestError(ValueError):
    """A request that is malformed as a whole (driver: gRPC INVALID_ARGUMENT); nothing is written."""


class NotControllerError(Exception):
    """This node is not (or no longer) the active controller; ``leader_id`` is -1 if unknown."""

    def __init__(self, leader_id: int) -> None:
        super().__init__(f"NOT_CONTROLLER: this node is not the controller (leader {leader_id})")
        self.leader_id = leader_id


class ControllerFailedError(Exception):
    """The controller raised something other than a RequestError on one request: a bug. The
    request is answered INTERNAL and dropped; the node keeps serving (``__cause__`` is the bug)."""
