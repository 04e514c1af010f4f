"""Async and sync gRPC clients for ``ControllerService``, used by the CLI, tests, chaos and benches.

What a client of a replicated controller has to get right, in one place:

- **Bootstrap list.** Any node accepts calls and forwards them to the leader, so the client only
  needs one reachable node; it sticks to the last one that answered and rotates on failure.
- **Retries.** UNAVAILABLE (node down, no leader yet: ``NOT_CONTROLLER``), RESOURCE_EXHAUSTED
  (a full inbox) and per-attempt deadlines are retried with capped, jittered exponential backoff
  until the overall deadline. Anything else (INVALID_ARGUMENT, RESOURCE_EXHAUSTED for a request
  over a limit: ``POLICY_VIOLATION`` or a message too large, ...) is raised at once.
- **Idempotence.** Every mutating call carries a ``request_id`` (generated, on a copy of the
  request, if the caller gave none) that stays the same across retries, so the controller answers
  a retry with the original result: a retried CreateTopics never reports TOPIC_ALREADY_EXISTS for
  the topic its own earlier attempt created. The controller binds an id to its request: the same
  id on a different request is refused (INVALID_ARGUMENT, ``INVALID_REQUEST``).
- **A node that hangs.** A paused or partitioned node accepts calls and never answers. (A follower
  that forwarded a call to a leader that then hangs sends it on to the next leader once it learns
  of the change, if the call is safe to send again; the node the client called is the client's own
  problem.) Waiting out the per-attempt deadline there would add it to every failover, so a call
  outstanding for ``probe_after_s`` has its node watched: a node that does not answer a stale
  DescribeCluster (answered by the node from its own state, never forwarded) is left for the next
  one, and a node whose leader changed since the watch began (DescribeQuorum through it: a newer
  epoch, or an answer where there was none) is asked again -- it now forwards to the new leader.
  The call left behind is cancelled; its request id makes the retry safe.
- **Honest outcomes.** When the overall deadline runs out on a mutating call after an attempt may
  have reached the server, or a node dies with the call open (CANCELLED, INTERNAL or UNKNOWN
  without the quorum's error code), the outcome is unknown, and the client says so
  (:class:`OutcomeUnknownError`, with the request id) rather than calling it a failure. The rule
  is :func:`raftmeta.api.rpc_errors.may_have_applied`, shared with the Kafka listener.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar, overload

import grpc
import grpc.aio
from google.protobuf.message import Message

from raftmeta.api import catalogue
from raftmeta.api.addresses import parse_host_port
from raftmeta.api.catalogue import Rpc, rpc_row
from raftmeta.api.limits import grpc_channel_options
from raftmeta.api.rpc_errors import POLICY_VIOLATION, may_have_applied, parse_error_metadata
from raftmeta.api.topic_pages import describe_every_page
from raftmeta.logs import get_logger
from raftmeta.tls import TlsConfig, material, open_channel
from raftmeta.v1 import controller_pb2, controller_pb2_grpc, errors_pb2

T = TypeVar("T")
M = TypeVar("M", bound=Message)
Req = TypeVar("Req", bound=Message)
Resp = TypeVar("Resp", bound=Message)
Req_contra = TypeVar("Req_contra", bound=Message, contravariant=True)
Resp_co = TypeVar("Resp_co", bound=Message, covariant=True)
log = get_logger("client")


def _already_done(row: Rpc[Any, Any], response: Any) -> bool:
    """Voter changes (KIP-853) have no request id, so a retry of one that went through is refused:
    the row's ``already_done`` answer to a retry means "already so", which an earlier attempt may
    have made."""
    refusal = row.already_done
    return refusal is not None and getattr(response, "error_code", errors_pb2.NONE) == refusal


def with_new_request_id(request: M) -> M:
    """A copy of a mutating request with a fresh request id (a uuid4 string)."""
    copy = type(request)()
    copy.CopyFrom(request)
    setattr(copy, "request_id", str(uuid.uuid4()))  # noqa: B010 (every mutating request has one)
    return copy


RETRYABLE_CODES = frozenset(
    {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.DEADLINE_EXCEEDED}
)


class ClientError(Exception):
    """A call failed with a definite answer (it did not change anything, or it is not retryable)."""

    def __init__(self, method: str, code: grpc.StatusCode, message: str, error_code: str = "") -> None:
        label = f"{code.name}" + (f"/{error_code}" if error_code else "")
        super().__init__(f"{method} failed: {label}: {message}")
        self.method = method
        self.code = code
        self.details = message
        self.error_code = error_code


class UnavailableError(ClientError):
    """No node could serve the call before the deadline, and the call changed nothing (a read)."""


# Why an attempt was abandoned before its deadline (see ControllerClient._watch).
HUNG = "NO_ANSWER_TO_PROBE"
LEADER_CHANGED = "NEW_LEADER"


class AbandonedAttemptError(Exception):
    """An attempt the watch cancelled: its node hangs, or leadership moved while it waited."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class OutcomeUnknownError(ClientError):
    """A mutating call ran out of time after an attempt may have reached the controller: it may or
    may not have been applied. Retrying with the same request id resolves it."""

    def __init__(self, method: str, code: grpc.StatusCode, message: str, request_id: str) -> None:
        named = f"request_id={request_id}" if request_id else "a voter change carries no request id"
        super().__init__(method, code, f"{message} (outcome unknown; {named})")
        self.request_id = request_id


def _answer_text(code: grpc.StatusCode, error_code: str, details: str) -> str:
    """One attempt's outcome for an error message: the quorum's error code or the gRPC status, and
    the first line of what the server (or gRPC) said."""
    first = details.strip().splitlines()[0] if details.strip() else ""
    label = error_code or code.name
    return f"{label} ({first[:120]})" if first else label


def parse_bootstrap(bootstrap: str | Sequence[str]) -> list[str]:
    """``"h:p,h:p"`` or a list of ``"h:p"`` → a validated list of targets."""
    items = bootstrap.split(",") if isinstance(bootstrap, str) else list(bootstrap)
    targets = [item.strip() for item in items if item.strip()]
    if not targets:
        raise ValueError("bootstrap server list is empty: expected host:port[,host:port...]")
    for target in targets:
        parse_host_port(target, "bootstrap server")
    return targets


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How long to keep trying and how to space attempts."""

    deadline_s: float = 15.0
    attempt_timeout_s: float = 5.0
    initial_backoff_s: float = 0.05
    max_backoff_s: float = 1.0
    multiplier: float = 2.0
    # Watch a call's node once the call has been outstanding this long (0: never): see the module
    # docstring. Well under a leader election (the nodes' fetch timeout, 2 s by default), and
    # above the latency of all but the slowest calls under load, which a probe would only slow.
    probe_after_s: float = 1.0
    # Between probes of a watched node, and how long one probe may take before the node counts
    # as hung (a node answers a stale DescribeCluster from its own state, in about a millisecond).
    probe_interval_s: float = 0.25
    probe_timeout_s: float = 0.5

    def backoff_s(self, attempt: int, rng: random.Random) -> float:
        """Full-jitter exponential backoff for the given (0-based) failed attempt."""
        cap = min(self.max_backoff_s, self.initial_backoff_s * self.multiplier**attempt)
        return rng.uniform(0.0, cap)


ChannelFactory = Callable[[str], grpc.aio.Channel]


def insecure_channel(target: str) -> grpc.aio.Channel:
    return grpc.aio.insecure_channel(target, options=grpc_channel_options())


def is_handshake_failure(details: str) -> bool:
    """Whether a failed call's details say the TLS handshake failed on our side (the server's
    certificate did not verify, or it speaks plaintext). A server that refuses *our* certificate
    just closes the connection, which looks like any dropped connection."""
    return "handshake failed" in details.lower()


class AsyncCall(Protocol[Req_contra, Resp_co]):
    def __call__(self, request: Req_contra, *, deadline_s: float | None = None) -> Awaitable[Resp_co]: ...


class SyncCall(Protocol[Req_contra, Resp_co]):
    def __call__(self, request: Req_contra, *, deadline_s: float | None = None) -> Resp_co: ...


class Unary(Generic[Req, Resp]):
    """A typed client method for one catalogue row: ``await client.create_topics(request,
    deadline_s=...)`` is ``client.call("CreateTopics", ...)`` with the row's types."""

    def __init__(self, row: Rpc[Req, Resp]) -> None:
        self.row = row

    @overload
    def __get__(self, client: None, owner: type[Any]) -> Unary[Req, Resp]: ...
    @overload
    def __get__(self, client: ControllerClient, owner: type[Any]) -> AsyncCall[Req, Resp]: ...
    def __get__(self, client: ControllerClient | None, owner: type[Any]) -> Unary[Req, Resp] | AsyncCall[Req, Resp]:
        if client is None:
            return self
        name = self.row.name

        async def call(request: Req, *, deadline_s: float | None = None) -> Resp:
            response: Resp = await client.call(name, request, deadline_s=deadline_s)
            return response

        return call


class SyncUnary(Generic[Req, Resp]):
    """The blocking twin of :class:`Unary`, for :class:`SyncControllerClient`."""

    def __init__(self, row: Rpc[Req, Resp]) -> None:
        self.row = row

    @overload
    def __get__(self, client: None, owner: type[Any]) -> SyncUnary[Req, Resp]: ...
    @overload
    def __get__(self, client: SyncControllerClient, owner: type[Any]) -> SyncCall[Req, Resp]: ...
    def __get__(
        self, client: SyncControllerClient | None, owner: type[Any]
    ) -> SyncUnary[Req, Resp] | SyncCall[Req, Resp]:
        if client is None:
            return self
        name = self.row.name

        def call(request: Req, *, deadline_s: float | None = None) -> Resp:
            response: Resp = client.call(name, request, deadline_s=deadline_s)
            return response

        return call


class ControllerClient:
    """Async client. Use as ``async with ControllerClient("127.0.0.1:9093,...") as client:``.

    ``tls`` turns on TLS (its files are checked here, so a bad path fails at once, naming the
    flag); without it the channels are plaintext.
    """

    def __init__(
        self,
        bootstrap: str | Sequence[str],
        *,
        retry: RetryPolicy | None = None,
        channel_factory: ChannelFactory | None = None,
        rng: random.Random | None = None,
        tls: TlsConfig | None = None,
    ) -> None:
        self.targets = parse_bootstrap(bootstrap)
        self.retry = retry or RetryPolicy()
        if channel_factory is not None and tls is not None:
            raise ValueError("give either channel_factory or tls, not both")
        if channel_factory is None:
            checked = material(tls)
            channel_factory = insecure_channel if checked is None else lambda target: open_channel(target, checked)
        self._channel_factory = channel_factory
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._stubs: dict[str, controller_pb2_grpc.ControllerServiceStub] = {}
        self._current = 0
        self._rng = rng or random.Random()
        # Attempts made by the last call, newest last: (target, status name). For tests and --verbose.
        self.last_attempts: list[tuple[str, str]] = []

    async def __aenter__(self) -> ControllerClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        channels = list(self._channels.values())
        self._channels.clear()
        self._stubs.clear()
        await asyncio.gather(*(channel.close(grace=None) for channel in channels))

    def _stub(self, target: str) -> controller_pb2_grpc.ControllerServiceStub:
        stub = self._stubs.get(target)
        if stub is None:
            channel = self._channel_factory(target)
            self._channels[target] = channel
            stub = controller_pb2_grpc.ControllerServiceStub(channel)
            self._stubs[target] = stub
        return stub

    async def call(self, method: str, request: Any, *, deadline_s: float | None = None) -> Any:
        """Call ``method`` with retries; return its response message."""
        row = rpc_row(method)
        writes_with_id = row.request_id
        if writes_with_id and not request.request_id:
            # On a copy: the caller's message stays as it was, so sending it again (perhaps
            # changed) is a new request, not a retry the controller would refuse or answer with
            # the first one's result (ids are bound to their requests).
            request = with_new_request_id(request)
        budget = self.retry.deadline_s if deadline_s is None else deadline_s
        deadline = time.monotonic() + budget
        self.last_attempts = []
        answers: dict[str, str] = {}  # target -> its last answer, in words
        # The newest Kafka-style refusal any node gave (NOT_CONTROLLER, ...): an attempt cut short
        # by the call's deadline carries none, and must not hide why the earlier ones failed.
        last_refusal = ""
        attempt = 0
        maybe_reached = False
        handshake_failed: set[str] = set()
        index = self._current  # this call's node; self._current is where the next call starts
        while True:
            target = self.targets[index]
            remaining = deadline - time.monotonic()
            timeout = max(0.001, min(self.retry.attempt_timeout_s, remaining))
            rpc: Callable[..., Awaitable[Any]] = getattr(self._stub(target), method)
            try:
                response = await self._attempt(target, rpc, request, timeout, retry=attempt > 0)
            except AbandonedAttemptError as abandoned:
                # The node hangs (next node) or a new leader was elected meanwhile (the same node,
                # which now knows it): no backoff, the watch already waited.
                self.last_attempts.append((target, abandoned.reason))
                answers[target] = abandoned.reason
                maybe_reached = True
                if abandoned.reason == HUNG:
                    index = self._move_off(index)
                if time.monotonic() >= deadline:
                    tried = "; ".join(f"{t}: {a}" for t, a in answers.items())
                    summary = f"no node could serve it within {budget:g} s (tried {tried})"
                    code = grpc.StatusCode.DEADLINE_EXCEEDED
                    if writes_with_id:
                        raise OutcomeUnknownError(
                            method, code, f"{summary}; an attempt may have reached the quorum", request.request_id
                        ) from abandoned
                    raise UnavailableError(method, code, summary, last_refusal) from abandoned
                attempt += 1
                continue
            except grpc.aio.AioRpcError as exc:
                code = exc.code()
                details = parse_error_metadata(exc.trailing_metadata())  # type: ignore[arg-type]
                self.last_attempts.append((target, details.error_code or code.name))
                answers[target] = _answer_text(code, details.error_code, exc.details() or "")
                last_refusal = details.error_code or last_refusal
                if may_have_applied(code, exc.details() or "", details.error_code):
                    maybe_reached = True
                # RESOURCE_EXHAUSTED also means "message larger than the limit" or a request over a
                # limit of raftmeta.api.limits (POLICY_VIOLATION): retrying cannot help.
                too_large = code == grpc.StatusCode.RESOURCE_EXHAUSTED and (
                    "larger than max" in (exc.details() or "") or details.error_code == POLICY_VIOLATION
                )
                if code not in RETRYABLE_CODES or too_large:
                    if writes_with_id and maybe_reached:
                        # E.g. the node died with the call open (a full disk): CANCELLED, not a refusal.
                        answer = _answer_text(code, details.error_code, exc.details() or "")
                        raise OutcomeUnknownError(
                            method,
                            code,
                            f"{target} answered {answer}; an attempt may have reached the quorum",
                            request.request_id,
                        ) from exc
                    raise ClientError(method, code, exc.details() or "", details.error_code) from exc
                message = exc.details() or ""
                # No time left for another attempt after the backoff: give up with this answer. (An
                # attempt squeezed into the last milliseconds could only end DEADLINE_EXCEEDED and
                # hide the real cause, e.g. UNAVAILABLE: nothing listens.)
                pause = self.retry.backoff_s(attempt, self._rng)
                give_up = time.monotonic() + pause >= deadline
                hint = ""
                # A TLS mismatch does not heal by waiting: give up once every node has shown it.
                if is_handshake_failure(message):
                    handshake_failed.add(target)
                    if handshake_failed >= set(self.targets):
                        give_up = True
                        hint = "; every node refused the TLS handshake: check the TLS settings: CA, certificate and key"
                if give_up:
                    # The next call starts at another node: a node that stops answering (paused,
                    # partitioned) must not take every later call's whole budget too.
                    self._move_off(index)
                    tried = "; ".join(f"{t}: {a}" for t, a in answers.items())
                    waited = "" if hint else f" within {budget:g} s"
                    summary = f"no node could serve it{waited} (tried {tried}){hint}"
                    if writes_with_id and maybe_reached:
                        raise OutcomeUnknownError(
                            method, code, f"{summary}; an attempt may have reached the quorum", request.request_id
                        ) from exc
                    if writes_with_id:
                        summary += "; no attempt reached a node, so nothing was applied"
                    raise UnavailableError(method, code, summary, details.error_code or last_refusal) from exc
                log.debug("retrying", method=method, target=target, code=code.name, attempt=attempt)
                index = self._move_off(index)
                await asyncio.sleep(pause)
                attempt += 1
                continue
            self.last_attempts.append((target, "OK"))
            self._current = index  # stick to the node that answered
            if maybe_reached and _already_done(row, response):
                # A voter change carries no request id: an earlier attempt of this very call may
                # have made the change this retry is refused for, so its outcome is unknown.
                raise OutcomeUnknownError(
                    method,
                    grpc.StatusCode.UNKNOWN,  # the answer is a refusal, the call's outcome is not known
                    f"{errors_pb2.ErrorCode.Name(response.error_code)} after an earlier attempt may have reached "
                    "the quorum: that attempt may have made the change; DescribeQuorum shows the voters",
                    "",
                )
            return response

    def _move_off(self, index: int) -> int:
        """The node after ``index``, which failed; later calls start there too unless another call
        already moved them on. Concurrent calls that fail at the same node (a fleet's brokers
        heartbeating through one paused node) must each move off it, not advance a shared index
        once each and bring it round to the paused node again."""
        following = (index + 1) % len(self.targets)
        if self._current == index:
            self._current = following
        return following

    async def _attempt(
        self, target: str, rpc: Callable[..., Any], request: Any, attempt_timeout_s: float, *, retry: bool
    ) -> Any:
        """One attempt; past ``probe_after_s`` its node is watched (:meth:`_watch`), which may
        abandon it (:class:`AbandonedAttemptError`). A quick first attempt costs one timer, no task.

        A retry is watched from its start: the earlier attempt failed, so leadership may be moving,
        and the watch must see the leader the retry was forwarded to -- begun a second later, it
        would take a successor elected meanwhile for the one the retry waits on."""
        call = rpc(request, timeout=attempt_timeout_s)  # a grpc.aio call: awaitable and cancellable
        policy = self.retry
        delay = 0.0 if retry else policy.probe_after_s
        if policy.probe_after_s <= 0 or delay + policy.probe_timeout_s >= attempt_timeout_s:
            return await call  # no probe could end before the attempt's own deadline
        verdict: list[str] = []
        watch: list[asyncio.Task[None]] = []

        def start_watch() -> None:
            if not call.done():
                watch.append(asyncio.create_task(self._watch(target, call, verdict)))

        timer = asyncio.get_running_loop().call_later(delay, start_watch)
        try:
            return await call
        except asyncio.CancelledError:
            if not verdict:
                raise  # our caller was cancelled, not the attempt
            raise AbandonedAttemptError(verdict[0]) from None
        finally:
            timer.cancel()
            for task in watch:
                task.cancel()

    async def _watch(self, target: str, call: Any, verdict: list[str]) -> None:
        """Probe ``target`` until ``call`` ends, and cancel it (the reason in ``verdict``):

        - when the node itself does not answer a stale DescribeCluster (served by the node from its
          own state, never forwarded): it is paused, cut off or gone -- ask the next node;
        - when a DescribeQuorum through it (forwarded to the leader it knows) reports a newer leader
          epoch than the watch first saw, or answers at all after it first did not (its leader
          hung, and now it knows a live one): ask it again, and it forwards to the new leader."""
        policy = self.retry
        stub: Any = self._stub(target)
        alive_probe = controller_pb2.DescribeClusterRequest(consistency=controller_pb2.STALE)
        leader_probe = controller_pb2.DescribeQuorumRequest()
        first_epoch: int | None = None  # -1: the first leader probe went unanswered
        while not call.done():
            try:
                await stub.DescribeCluster(alive_probe, timeout=policy.probe_timeout_s)
            except grpc.aio.AioRpcError as exc:
                code = exc.code()
                silent = code == grpc.StatusCode.DEADLINE_EXCEEDED
                gone = code == grpc.StatusCode.UNAVAILABLE and not may_have_applied(code, exc.details() or "")
                if silent or gone:
                    verdict.append(HUNG)
                    call.cancel()
                    return
                # Answered with an error (overloaded, shutting down): it is alive; keep watching.
            epoch = -1
            try:
                status = await stub.DescribeQuorum(leader_probe, timeout=policy.probe_timeout_s)
                epoch = status.leader_epoch if status.leader_id >= 0 else -1
            except grpc.aio.AioRpcError:
                pass  # its leader does not answer (or none is known yet): no epoch
            if first_epoch is None:
                first_epoch = epoch
            elif epoch > first_epoch:
                verdict.append(LEADER_CHANGED)
                call.cancel()
                return
            await asyncio.sleep(policy.probe_interval_s)

    # One typed method per catalogue row that takes its request as it is (raftmeta/api/catalogue.py);
    # the reads below say what the catalogue cannot: convenience arguments, paging.
    create_topics = Unary(catalogue.CREATE_TOPICS)
    create_partitions = Unary(catalogue.CREATE_PARTITIONS)
    delete_topics = Unary(catalogue.DELETE_TOPICS)
    elect_leaders = Unary(catalogue.ELECT_LEADERS)
    alter_partition_reassignments = Unary(catalogue.ALTER_PARTITION_REASSIGNMENTS)
    incremental_alter_configs = Unary(catalogue.INCREMENTAL_ALTER_CONFIGS)
    register_broker = Unary(catalogue.REGISTER_BROKER)
    broker_heartbeat = Unary(catalogue.BROKER_HEARTBEAT)
    unregister_broker = Unary(catalogue.UNREGISTER_BROKER)
    allocate_producer_ids = Unary(catalogue.ALLOCATE_PRODUCER_IDS)
    alter_partition = Unary(catalogue.ALTER_PARTITION)
    assign_replicas_to_dirs = Unary(catalogue.ASSIGN_REPLICAS_TO_DIRS)
    add_raft_voter = Unary(catalogue.ADD_RAFT_VOTER)
    remove_raft_voter = Unary(catalogue.REMOVE_RAFT_VOTER)
    update_raft_voter = Unary(catalogue.UPDATE_RAFT_VOTER)

    async def describe_topics(
        self,
        topics: Sequence[str] = (),
        *,
        stale: bool = False,
        partition_limit: int = 0,
        exclude_partitions: bool = False,
    ) -> controller_pb2.DescribeTopicsResponse:
        """Every topic named (every topic when none are), in name order, with all their partitions.
        Linearizable by default (the leader answers after a read-index round); ``stale``: the node
        called answers from its own image at once (docs/controller.md, "Reads").

        The answer comes in pages of at most ``partition_limit`` partitions (0: the server's
        maximum), as Kafka's admin client pages DescribeTopicPartitions; a topic cut between pages
        is joined back. Each page is a read of its own: the whole is not one point in time.
        ``exclude_partitions``: the topics without their partitions (listing them), a topic
        counting as one partition against the page's limit."""
        request = controller_pb2.DescribeTopicsRequest(
            topics=list(topics),
            consistency=_consistency(stale),
            response_partition_limit=partition_limit,
            exclude_partitions=exclude_partitions,
        )
        return await describe_every_page(self._describe_page, request)

    async def _describe_page(
        self, request: controller_pb2.DescribeTopicsRequest
    ) -> controller_pb2.DescribeTopicsResponse:
        page: controller_pb2.DescribeTopicsResponse = await self.call("DescribeTopics", request)
        return page

    async def describe_cluster(self, *, stale: bool = False) -> controller_pb2.DescribeClusterResponse:
        response: controller_pb2.DescribeClusterResponse = await self.call(
            "DescribeCluster", controller_pb2.DescribeClusterRequest(consistency=_consistency(stale))
        )
        return response

    async def describe_configs(
        self, topics: Sequence[str] = (), *, include_defaults: bool = False, stale: bool = False
    ) -> controller_pb2.DescribeConfigsResponse:
        request = controller_pb2.DescribeConfigsRequest(
            topics=list(topics), include_defaults=include_defaults, consistency=_consistency(stale)
        )
        response: controller_pb2.DescribeConfigsResponse = await self.call("DescribeConfigs", request)
        return response

    async def describe_quorum(self) -> controller_pb2.DescribeQuorumResponse:
        response: controller_pb2.DescribeQuorumResponse = await self.call(
            "DescribeQuorum", controller_pb2.DescribeQuorumRequest()
        )
        return response

    async def list_partition_reassignments(
        self, request: controller_pb2.ListPartitionReassignmentsRequest | None = None
    ) -> controller_pb2.ListPartitionReassignmentsResponse:
        """Every reassignment under way when ``request`` names none."""
        response: controller_pb2.ListPartitionReassignmentsResponse = await self.call(
            "ListPartitionReassignments", request or controller_pb2.ListPartitionReassignmentsRequest()
        )
        return response


class SyncControllerClient:
    """Blocking twin of :class:`ControllerClient` for scripts and the CLI.

    Runs one private event loop on a daemon thread and the async client on it, so there is one
    retry implementation, and channels are reused across calls.
    """

    def __init__(self, bootstrap: str | Sequence[str], **kwargs: Any) -> None:
        parse_bootstrap(bootstrap)  # fail fast, in the caller's thread, on a bad list
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="raftmeta-client", daemon=True)
        self._thread.start()

        async def make() -> ControllerClient:
            return ControllerClient(bootstrap, **kwargs)

        try:
            self._client = self._run(make())
        except BaseException:
            self._stop_loop()  # e.g. a TLS file that is missing: do not leave the thread behind
            raise

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def __enter__(self) -> SyncControllerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._loop.is_closed():
            return
        self._run(self._client.close())
        self._stop_loop()

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()

    @property
    def last_attempts(self) -> list[tuple[str, str]]:
        return self._client.last_attempts

    def call(self, method: str, request: Any, *, deadline_s: float | None = None) -> Any:
        return self._run(self._client.call(method, request, deadline_s=deadline_s))

    create_topics = SyncUnary(catalogue.CREATE_TOPICS)
    create_partitions = SyncUnary(catalogue.CREATE_PARTITIONS)
    delete_topics = SyncUnary(catalogue.DELETE_TOPICS)
    elect_leaders = SyncUnary(catalogue.ELECT_LEADERS)
    alter_partition_reassignments = SyncUnary(catalogue.ALTER_PARTITION_REASSIGNMENTS)
    incremental_alter_configs = SyncUnary(catalogue.INCREMENTAL_ALTER_CONFIGS)
    register_broker = SyncUnary(catalogue.REGISTER_BROKER)
    broker_heartbeat = SyncUnary(catalogue.BROKER_HEARTBEAT)
    unregister_broker = SyncUnary(catalogue.UNREGISTER_BROKER)
    allocate_producer_ids = SyncUnary(catalogue.ALLOCATE_PRODUCER_IDS)
    alter_partition = SyncUnary(catalogue.ALTER_PARTITION)
    assign_replicas_to_dirs = SyncUnary(catalogue.ASSIGN_REPLICAS_TO_DIRS)
    add_raft_voter = SyncUnary(catalogue.ADD_RAFT_VOTER)
    remove_raft_voter = SyncUnary(catalogue.REMOVE_RAFT_VOTER)
    update_raft_voter = SyncUnary(catalogue.UPDATE_RAFT_VOTER)

    def describe_topics(
        self,
        topics: Sequence[str] = (),
        *,
        stale: bool = False,
        partition_limit: int = 0,
        exclude_partitions: bool = False,
    ) -> controller_pb2.DescribeTopicsResponse:
        return self._run(
            self._client.describe_topics(
                topics, stale=stale, partition_limit=partition_limit, exclude_partitions=exclude_partitions
            )
        )

    def describe_cluster(self, *, stale: bool = False) -> controller_pb2.DescribeClusterResponse:
        return self._run(self._client.describe_cluster(stale=stale))

    def describe_configs(
        self, topics: Sequence[str] = (), *, include_defaults: bool = False, stale: bool = False
    ) -> controller_pb2.DescribeConfigsResponse:
        return self._run(self._client.describe_configs(topics, include_defaults=include_defaults, stale=stale))

    def describe_quorum(self) -> controller_pb2.DescribeQuorumResponse:
        return self._run(self._client.describe_quorum())

    def list_partition_reassignments(
        self, request: controller_pb2.ListPartitionReassignmentsRequest | None = None
    ) -> controller_pb2.ListPartitionReassignmentsResponse:
        return self._run(self._client.list_partition_reassignments(request))


def _consistency(stale: bool) -> controller_pb2.ReadConsistency.ValueType:
    return controller_pb2.STALE if stale else controller_pb2.LINEARIZABLE
