"""What a Kafka API handler may use: the node's admin path and what the listener advertises.

Handlers never talk to the controller directly: :class:`AdminPath` is the gRPC ControllerService's
own path without gRPC (raftmeta.server.services.ControllerServicer.call): the same request limits,
forwarding to the leader and answers, so a request refused there has written nothing -- except a
write whose outcome is unknown (raftmeta.api.rpc_errors.may_have_applied), answered REQUEST_TIMED_OUT."""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import grpc
from google.protobuf.message import Message

from raftmeta.api.catalogue import rpc_row
from raftmeta.api.rpc_errors import may_have_applied, parse_error_metadata
from raftmeta.server.services import AdminCallError
from raftmeta.v1 import errors_pb2

# How long a handler waits for the controller when the request gives no usable timeout.
DEFAULT_TIMEOUT_S = 30.0
# Pauses between attempts while no leader can be reached (an election takes about a fetch timeout).
RETRY_BACKOFF_S = (0.05, 0.1, 0.2, 0.4, 0.8)


class AdminPath(Protocol):
    async def call(self, method: str, request: Message, *, timeout_s: float, forwarded: bool = False) -> Any: ...


class RaftPath(Protocol):
    """The node's raft inbox: an inbound raft request from replica ``source``, answered by the core
    (raftmeta.server.node.Node.submit_raft)."""

    def submit_raft(self, source: int, message: Any) -> Awaitable[Any]: ...

    def voter_ids(self) -> frozenset[int]: ...

    def leader_and_log_start(self) -> tuple[int, int, int]: ...


@dataclass(frozen=True, slots=True)
class KafkaNode:
    """A raftmeta node as Kafka clients see it: a broker id (the node id) and its Kafka listener."""

    node_id: int
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class ApiContext:
    admin: AdminPath
    node_id: int
    cluster_id: str
    # Every node whose Kafka listener this node knows, itself included, by id.
    nodes: Sequence[KafkaNode]
    # Request ids for mutating requests (the Kafka protocol has none): unique per request.
    new_request_id: Callable[[], str] = lambda: f"kafka-{uuid.uuid4().hex}"
    # How long a call waits when its Kafka request carries no timeout (Metadata, configs, ...).
    default_timeout_s: float = DEFAULT_TIMEOUT_S
    # Whether this node leads the quorum now: its committed image then holds every write it
    # acknowledged, so Metadata reads it at once (raftmeta.kafka.topics.broker_read).
    leads: Callable[[], bool] = lambda: False
    # The node's raft inbox, for the raft APIs brokers call as observers (Fetch of the metadata
    # log): raftmeta.kafka.metadata_fetch.RaftPath. None where only admin APIs are served.
    raft: RaftPath | None = None


class CallRefused(Exception):
    """The whole call was refused: the Kafka error code every item of the answer carries."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


# Status → Kafka error when the refusal carries no raftmeta-error-code.
_BY_STATUS: dict[grpc.StatusCode, str] = {
    grpc.StatusCode.INVALID_ARGUMENT: "INVALID_REQUEST",
    grpc.StatusCode.RESOURCE_EXHAUSTED: "POLICY_VIOLATION",
    grpc.StatusCode.UNAVAILABLE: "NOT_CONTROLLER",
    grpc.StatusCode.DEADLINE_EXCEEDED: "REQUEST_TIMED_OUT",
}
REQUEST_TIMED_OUT = "REQUEST_TIMED_OUT"
# Kafka error codes that are not in raftmeta's ErrorCode enum.
_EXTRA = {"THROTTLING_QUOTA_EXCEEDED": 89, "POLICY_VIOLATION": 44, "CLUSTER_AUTHORIZATION_FAILED": 31}


def kafka_error_code(name: str) -> int:
    """A Kafka error name (raftmeta's ErrorCode names are Kafka's) → its number; unknown → -1."""
    if name in _EXTRA:
        return _EXTRA[name]
    try:
        return int(errors_pb2.ErrorCode.Value(name))
    except ValueError:
        return -1


def refusal(status: grpc.StatusCode, message: str, metadata: Sequence[tuple[str, str]]) -> CallRefused:
    """An AdminCallError's parts → the Kafka error code clients know how to handle (NOT_CONTROLLER
    and REQUEST_TIMED_OUT are retried by Kafka clients, POLICY_VIOLATION and INVALID_REQUEST not)."""
    name = parse_error_metadata(metadata).error_code or _BY_STATUS.get(status, "UNKNOWN_SERVER_ERROR")
    return CallRefused(kafka_error_code(name), message)


async def call(ctx: ApiContext, method: str, request: Message, timeout_s: float | None = None) -> Any:
    """``method`` through the node's admin path; a refusal raises :class:`CallRefused`.

    A mutating request gets a request id of its own, and a call that found no reachable leader
    (UNAVAILABLE: none known, or the one known is gone) is retried with that id until
    ``timeout_s``: the gRPC client does this for its callers, but Kafka clients such as librdkafka
    hand NOT_CONTROLLER to the application. The id makes the retry safe: if the first attempt was
    committed after all, the controller answers it again instead of applying it twice."""
    if rpc_row(method).request_id and not getattr(request, "request_id"):  # noqa: B009
        setattr(request, "request_id", ctx.new_request_id())  # noqa: B010
    loop = asyncio.get_running_loop()
    deadline = loop.time() + (ctx.default_timeout_s if timeout_s is None else timeout_s)
    writes = rpc_row(method).reports_unknown_outcome
    maybe_applied = False
    for attempt in itertools.count():
        try:
            return await ctx.admin.call(method, request, timeout_s=max(0.001, deadline - loop.time()))
        except AdminCallError as exc:
            code = parse_error_metadata(exc.metadata).error_code
            maybe_applied = maybe_applied or (writes and may_have_applied(exc.status, exc.message, code))
            backoff = RETRY_BACKOFF_S[min(attempt, len(RETRY_BACKOFF_S) - 1)]
            if exc.status != grpc.StatusCode.UNAVAILABLE or loop.time() + backoff >= deadline:
                if maybe_applied:
                    # Kafka's forwarding answers a request whose outcome it does not know with
                    # REQUEST_TIMED_OUT (ForwardingManager's onTimeout), never with a code that
                    # tells the client nothing was written.
                    raise CallRefused(
                        kafka_error_code(REQUEST_TIMED_OUT),
                        f"{exc.message} (the request may have been applied: its outcome is unknown)",
                    ) from exc
                raise refusal(exc.status, exc.message, exc.metadata) from exc
        await asyncio.sleep(backoff)
    raise AssertionError("unreachable")  # itertools.count() never ends


def timeout_s(timeout: Any) -> float:
    """A Kafka request's timeout (a timedelta) → seconds to wait; <= 0 means the default."""
    seconds = float(timeout.total_seconds()) if timeout is not None else 0.0
    return seconds if seconds > 0 else DEFAULT_TIMEOUT_S
