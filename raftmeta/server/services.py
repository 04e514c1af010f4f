"""gRPC servicers: RaftService feeds the node's inbox; ControllerService runs on the leader and is
forwarded to it from any other node (seed 004).

Both check a call before anything else. RaftService: :func:`raftmeta.server.guards.check_raft_call`
(identity, cluster id, voter set, field sanity); a refused call is aborted with its status and
``raftmeta-error-code``, logged (rate-limited) and never reaches the core. ControllerService:
:func:`raftmeta.api.catalogue.check_controller_request` on the first node a client reaches, before
forwarding, so a request over a limit is refused there and nothing is written.

Forwarding is one hop: a forwarded call carries ``raftmeta-forwarded`` metadata, and a node that
receives one but is not the leader answers UNAVAILABLE/NOT_CONTROLLER instead of forwarding
again (no loops while leadership moves); the client retries with the same request id.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import grpc
import grpc.aio
from google.protobuf.message import Message

from raftmeta.api.catalogue import RPCS, Served, check_controller_request
from raftmeta.api.rpc_errors import INVALID_REQUEST, THROTTLING_QUOTA_EXCEEDED, error_metadata
from raftmeta.controller.errors import ControllerFailedError, NotControllerError, RequestError
from raftmeta.controller.quorum import is_stale_read
from raftmeta.logs import get_logger
from raftmeta.server.guards import Membership, RejectionLogLimiter, check_raft_call, claimed_id, common_names
from raftmeta.server.node import Node, OverloadedError
from raftmeta.tls import material, open_channel
from raftmeta.v1 import controller_pb2, controller_pb2_grpc, raft_pb2, raft_pb2_grpc

FORWARDED_KEY = "raftmeta-forwarded"
DEFAULT_DEADLINE_S = 30.0
Context = grpc.aio.ServicerContext[Any, Any]


def _remaining(context: Context) -> float:
    remaining = context.time_remaining()
    return DEFAULT_DEADLINE_S if remaining is None else max(0.0, remaining)


class AdminCallError(Exception):
    """A ControllerService call refused or failed as a whole: the gRPC status, a message and the
    trailing metadata (``raftmeta-error-code`` and the known leader, see raftmeta.api.rpc_errors)."""

    def __init__(self, status: grpc.StatusCode, message: str, metadata: tuple[tuple[str, str], ...] = ()) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.metadata = metadata


class RaftServicer(raft_pb2_grpc.RaftServiceServicer):
    def __init__(self, node: Node) -> None:
        self.node = node
        config = node.config
        self._static_voters = frozenset(config.voters)
        self._membership = Membership(config.cluster_id, config.node_id, self._static_voters)
        self._log = get_logger("raft-service", node_id=node.node_id)
        self._log_limiter = RejectionLogLimiter()

    def _current_membership(self) -> Membership:
        """The configured voters and the voter set in force now (KIP-853: a voter added or removed
        since start-up keeps its place among the nodes that may vote, lead and resign)."""
        voters = self.node.core.voters
        if self._static_voters.issuperset(voters):
            return self._membership
        return Membership(self._membership.cluster_id, self._membership.node_id, self._static_voters.union(voters))

    async def _admit(
        self, method: str, request: Message, context: Context, names: tuple[str, ...] | None = None
    ) -> None:
        """Abort the call if the guard refuses it, with one structured warning (rate-limited).
        ``names``: the caller's certificate common names, if already read from ``context``."""
        if names is None:
            names = common_names(context.auth_context())
        rejection = check_raft_call(method, request, self._current_membership(), names)
        if rejection is None:
            return
        claimed = claimed_id(method, request)
        peer = context.peer() or "unknown"
        host = peer.rpartition(":")[0] or peer  # a reconnecting caller keeps its kind
        suppressed = self._log_limiter.admit((method, claimed, host, rejection.error_code), time.monotonic())
        if suppressed is not None:
            self._log.warning(
                "raft call refused",
                method=method,
                claimed_id=claimed,
                peer=peer,
                error_code=rejection.error_code,
                reason=rejection.reason,
                suppressed_since_last=suppressed,
            )
        context.set_trailing_metadata(error_metadata(rejection.error_code))
        await context.abort(rejection.status, rejection.reason)

    async def _ask(self, method: str, request: Message, context: Context, names: tuple[str, ...] | None = None) -> Any:
        await self._admit(method, request, context, names)
        future = self.node.submit_raft(claimed_id(method, request), request)
        try:
            return await asyncio.wait_for(future, _remaining(context))
        except TimeoutError:
            await context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, "the node did not answer in time")
        except NotControllerError:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "the node is shutting down")

    async def Vote(self, request: raft_pb2.VoteRequest, context: Context) -> raft_pb2.VoteResponse:
        response: raft_pb2.VoteResponse = await self._ask("Vote", request, context)
        return response

    async def BeginQuorumEpoch(
        self, request: raft_pb2.BeginQuorumEpochRequest, context: Context
    ) -> raft_pb2.BeginQuorumEpochResponse:
        response: raft_pb2.BeginQuorumEpochResponse = await self._ask("BeginQuorumEpoch", request, context)
        return response

    async def EndQuorumEpoch(
        self, request: raft_pb2.EndQuorumEpochRequest, context: Context
    ) -> raft_pb2.EndQuorumEpochResponse:
        response: raft_pb2.EndQuorumEpochResponse = await self._ask("EndQuorumEpoch", request, context)
        return response

    async def Fetch(self, request: raft_pb2.FetchRequest, context: Context) -> raft_pb2.FetchResponse:
        response: raft_pb2.FetchResponse = await self._ask("Fetch", request, context)
        return response

    async def FetchStream(
        self, request_iterator: AsyncIterator[raft_pb2.FetchRequest], context: Context
    ) -> AsyncIterator[raft_pb2.FetchResponse]:
        """Fetch over one long-lived stream: one answer per request, in order.

        Requests are handled one at a time -- a parked Fetch holds the stream until the leader
        answers it -- so the follower can match answers to requests by their order. Each request
        passes the same guard as a unary Fetch; a refused one ends the stream with its status. The
        caller's certificate is the stream's: its names are read once, not per Fetch."""
        names = common_names(context.auth_context())
        async for request in request_iterator:
            response: raft_pb2.FetchResponse = await self._ask("Fetch", request, context, names)
            yield response

    async def FetchSnapshot(
        self, request: raft_pb2.FetchSnapshotRequest, context: Context
    ) -> AsyncIterator[raft_pb2.FetchSnapshotResponse]:
        response: raft_pb2.FetchSnapshotResponse = await self._ask("FetchSnapshot", request, context)
        yield response


class ControllerServicer:
    """ControllerService: one method per catalogue row (set below the class), each served by
    :meth:`call`; register it with :func:`add_controller_service`."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self._stubs: dict[int, controller_pb2_grpc.ControllerServiceStub] = {}
        self._channels: list[grpc.aio.Channel] = []
        self._log = get_logger("controller-service", node_id=node.node_id)

    def _stub(self, leader_id: int) -> controller_pb2_grpc.ControllerServiceStub:
        stub = self._stubs.get(leader_id)
        if stub is None:
            # The leader's raft listener, with our peer certificate when the quorum runs TLS.
            channel = open_channel(self.node.address_book.addresses[leader_id], material(self.node.config.tls))
            self._channels.append(channel)
            stub = controller_pb2_grpc.ControllerServiceStub(channel)
            self._stubs[leader_id] = stub
        return stub

    async def close(self) -> None:
        await asyncio.gather(*(channel.close(grace=None) for channel in self._channels))

    async def _serve(self, method: str, request: Message, context: Context) -> Any:
        forwarded = any(key == FORWARDED_KEY for key, _ in context.invocation_metadata() or ())
        try:
            return await self.call(method, request, timeout_s=_remaining(context), forwarded=forwarded)
        except AdminCallError as exc:
            context.set_trailing_metadata(exc.metadata)
            await context.abort(exc.status, exc.message)

    async def call(self, method: str, request: Message, *, timeout_s: float, forwarded: bool = False) -> Any:
        """One ControllerService call without a gRPC context: the limits check, this node's
        controller if it leads (or the read is stale), else one hop to the leader. The gRPC
        servicer and the Kafka listener (raftmeta.kafka) both come through here, so both get the
        same limits, forwarding and answers. A refusal raises :class:`AdminCallError`."""
        violation = check_controller_request(method, request)
        if violation is not None:
            raise AdminCallError(
                violation.status, f"{method}: {violation.message}", error_metadata(violation.error_code)
            )
        node = self.node
        deadline = time.monotonic() + timeout_s
        wait_until = time.monotonic() + node.config.forward_wait_ms / 1000
        stale = is_stale_read(request)  # answered by this node from its own image: no forwarding
        while True:
            if node.is_leader or stale:
                try:
                    if RPCS[method].served is Served.NODE:
                        return node.describe_quorum()
                    future = node.submit_admin(method, request)
                    return await asyncio.wait_for(future, max(0.0, deadline - time.monotonic()))
                except OverloadedError as exc:
                    raise AdminCallError(
                        grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc), error_metadata(THROTTLING_QUOTA_EXCEEDED)
                    ) from exc
                except RequestError as exc:
                    raise AdminCallError(
                        grpc.StatusCode.INVALID_ARGUMENT, str(exc), error_metadata(INVALID_REQUEST)
                    ) from exc
                except ControllerFailedError as exc:
                    # The error code makes it a definite answer (rpc_errors.may_have_applied): an
                    # INTERNAL without one is a node that died with the call open.
                    raise AdminCallError(
                        grpc.StatusCode.INTERNAL,
                        f"the controller failed on this request and wrote nothing ({exc}); the node logged it",
                        error_metadata("UNKNOWN_SERVER_ERROR"),
                    ) from exc
                except TimeoutError as exc:
                    raise AdminCallError(
                        grpc.StatusCode.DEADLINE_EXCEEDED,
                        f"{method} was not committed before the deadline; its outcome is unknown: "
                        "retry with the same request_id",
                    ) from exc
                except NotControllerError:
                    # Leadership moved while the request waited: look for the new leader below.
                    pass
            leader = node.core.leader_id
            if leader >= 0 and leader != node.node_id and leader in node.address_book.addresses and not forwarded:
                forward = asyncio.ensure_future(self._forward(leader, method, request, deadline))
                if await self._finished_while_leading(forward, leader):
                    return forward.result()
                # The leader we forwarded to lost its leadership before answering (it hangs, or is
                # cut off): ask the next one rather than wait out the deadline on the old one.
                if not safe_to_send_again(method, request):
                    raise AdminCallError(
                        grpc.StatusCode.UNAVAILABLE,
                        f"{method}: leader {leader} lost its leadership before answering the call this node "
                        "forwarded to it; the outcome is unknown (a request_id makes a retry safe)",
                        error_metadata("NOT_CONTROLLER", node.core.leader_id),
                    )
                self._log.info("forwarded call follows the new leadership", method=method, old_leader=leader)
                wait_until = time.monotonic() + node.config.forward_wait_ms / 1000
                continue
            now = time.monotonic()
            if forwarded or now >= min(deadline, wait_until):
                raise AdminCallError(
                    grpc.StatusCode.UNAVAILABLE,
                    f"NOT_CONTROLLER: node {node.node_id} is not the controller and knows no leader to forward to",
                    error_metadata("NOT_CONTROLLER", leader),
                )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(node.leader_changed.wait(), min(deadline, wait_until) - now)

    async def _finished_while_leading(self, forward: asyncio.Future[Any], leader: int) -> bool:
        """Wait for a forwarded call; True once it finished (answered or failed: the caller reads
        its outcome), False -- and the call cancelled -- once this node learns that ``leader`` no
        longer leads."""
        node = self.node
        answered = False
        try:
            while True:
                changed = asyncio.ensure_future(node.leader_changed.wait())
                try:
                    await asyncio.wait((forward, changed), return_when=asyncio.FIRST_COMPLETED)
                finally:
                    changed.cancel()
                if forward.done():
                    answered = True
                    return True
                if node.core.leader_id != leader:
                    return False
        finally:
            # Left behind (a new leader, or our own caller went away -- its deadline, say -- maybe
            # just as the call ended): nobody reads its outcome. A cancelled gRPC call may still end
            # with its own error; the callback takes it, so asyncio does not log it as never retrieved.
            if not answered:
                forward.cancel()
                forward.add_done_callback(_drop_outcome)

    async def _forward(self, leader: int, method: str, request: Message, deadline: float) -> Any:
        rpc = getattr(self._stub(leader), method)
        try:
            return await rpc(request, timeout=max(0.001, deadline - time.monotonic()), metadata=((FORWARDED_KEY, "1"),))
        except grpc.aio.AioRpcError as exc:
            trailing: Any = exc.trailing_metadata() or ()
            raise AdminCallError(
                exc.code(),
                exc.details() or f"forwarding to leader {leader} failed",
                tuple((k, v) for k, v in trailing if isinstance(v, str)),
            ) from exc


def _serving(method: str) -> Callable[[ControllerServicer, Message, Context], Coroutine[Any, Any, Any]]:
    async def serve(self: ControllerServicer, request: Message, context: Context) -> Any:
        return await self._serve(method, request, context)

    serve.__name__ = serve.__qualname__ = method
    return serve


# One servicer method per catalogue row (raftmeta/api/catalogue.py): each serves and forwards alike.
for _name in RPCS:
    setattr(ControllerServicer, _name, _serving(_name))


def add_controller_service(servicer: object, server: grpc.aio.Server) -> None:
    """Register ``servicer`` (a ControllerServicer, or a stand-in with its methods) as
    ControllerService on ``server``: a unary method per catalogue row, with the row's types."""
    handlers = {
        row.name: grpc.unary_unary_rpc_method_handler(
            getattr(servicer, row.name),
            request_deserializer=row.request_type.FromString,
            response_serializer=row.response_type.SerializeToString,
        )
        for row in RPCS.values()
    }
    service = controller_pb2.DESCRIPTOR.services_by_name["ControllerService"].full_name
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, handlers),))


def _drop_outcome(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


def safe_to_send_again(method: str, request: Message) -> bool:
    """Whether a call whose first attempt may have reached a leader can be sent to the next one
    (the catalogue row's retry safety, raftmeta/api/catalogue.py)."""
    row = RPCS.get(method)
    return row is not None and row.safe_to_send_again(request)
