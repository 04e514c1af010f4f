"""The gRPC client against fake ControllerService nodes on loopback: rotation past dead nodes and
nodes without a leader, stable request ids across retries, deadlines and honest outcomes."""

from __future__ import annotations

import asyncio
import random
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from typing import cast

import grpc
import grpc.aio
import pytest
import pytest_asyncio

from raftmeta.api.rpc_errors import error_metadata, may_have_applied
from raftmeta.client import (
    ClientError,
    ControllerClient,
    OutcomeUnknownError,
    RetryPolicy,
    SyncControllerClient,
    UnavailableError,
    parse_bootstrap,
)
from raftmeta.v1 import controller_pb2, controller_pb2_grpc, errors_pb2
from tests.fakes import serve_controller

FAST = RetryPolicy(deadline_s=3.0, attempt_timeout_s=0.5, initial_backoff_s=0.01, max_backoff_s=0.05)


class FakeNode(controller_pb2_grpc.ControllerServiceServicer):
    """mode: "leader" answers; "no-leader" aborts UNAVAILABLE/NOT_CONTROLLER; "invalid" aborts INVALID_ARGUMENT;
    "slow-first": the first CreateTopics hangs past the attempt timeout (but is applied), later ones answer;
    "slow": every CreateTopics hangs past the attempt timeout; "cancelled", "internal" and "raises" end
    CreateTopics as a dying server does (CANCELLED, INTERNAL, UNKNOWN); "controller-failed" is the
    controller's definite INTERNAL (with UNKNOWN_SERVER_ERROR)."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.request_ids: list[str] = []
        self.applied: dict[str, bytes] = {}
        self.voter_adds = 0
        self.describes = 0

    async def CreateTopics(
        self,
        request: controller_pb2.CreateTopicsRequest,
        context: grpc.aio.ServicerContext[controller_pb2.CreateTopicsRequest, controller_pb2.CreateTopicsResponse],
    ) -> controller_pb2.CreateTopicsResponse:
        self.request_ids.append(request.request_id)
        if self.mode == "no-leader":
            context.set_trailing_metadata(error_metadata("NOT_CONTROLLER"))
            await context.abort(grpc.StatusCode.UNAVAILABLE, "NOT_CONTROLLER: no leader known")
        if self.mode == "invalid":
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "topics: at most 100 topics per request")
        if self.mode == "cancelled":
            await context.abort(grpc.StatusCode.CANCELLED, "CANCELLED")
        if self.mode == "internal":
            await context.abort(grpc.StatusCode.INTERNAL, "Received RST_STREAM with error code 2")
        if self.mode == "raises":
            raise OSError(28, "No space left on device")  # gRPC answers UNKNOWN
        if self.mode == "controller-failed":
            context.set_trailing_metadata(error_metadata("UNKNOWN_SERVER_ERROR"))
            await context.abort(grpc.StatusCode.INTERNAL, "the controller failed on this request and wrote nothing")
        topic_id = self.applied.setdefault(request.request_id, bytes([len(self.applied) + 1]) * 16)
        if (self.mode == "slow-first" and len(self.request_ids) == 1) or self.mode == "slow":
            await asyncio.sleep(2)
        return controller_pb2.CreateTopicsResponse(
            topics=[controller_pb2.CreatableTopicResult(name=t.name, topic_id=topic_id) for t in request.topics]
        )

    async def AddRaftVoter(
        self,
        request: controller_pb2.AddRaftVoterRequest,
        context: grpc.aio.ServicerContext[controller_pb2.AddRaftVoterRequest, controller_pb2.AddRaftVoterResponse],
    ) -> controller_pb2.AddRaftVoterResponse:
        """Applies the first attempt (then hangs in "slow-first"); a later one is refused as the
        leader refuses a voter already in the set."""
        self.voter_adds += 1
        if self.voter_adds > 1 or self.mode == "already-voter":
            return controller_pb2.AddRaftVoterResponse(error_code=errors_pb2.DUPLICATE_VOTER)
        if self.mode == "slow-first":
            await asyncio.sleep(2)
        return controller_pb2.AddRaftVoterResponse()

    async def DescribeQuorum(
        self,
        request: controller_pb2.DescribeQuorumRequest,
        context: grpc.aio.ServicerContext[controller_pb2.DescribeQuorumRequest, controller_pb2.DescribeQuorumResponse],
    ) -> controller_pb2.DescribeQuorumResponse:
        self.describes += 1
        if self.mode == "no-leader" or (self.mode == "no-leader-then-hang" and self.describes == 1):
            context.set_trailing_metadata(error_metadata("NOT_CONTROLLER"))
            await context.abort(grpc.StatusCode.UNAVAILABLE, "NOT_CONTROLLER: no leader known")
        if self.mode == "no-leader-then-hang":
            await asyncio.sleep(2)
        return controller_pb2.DescribeQuorumResponse(leader_id=1, leader_epoch=3)


@pytest_asyncio.fixture
async def start_node() -> AsyncIterator[object]:
    servers: list[grpc.aio.Server] = []

    async def start(mode: str) -> tuple[str, FakeNode]:
        # cast: the generated base answers UNIMPLEMENTED for the methods left out; only its stub makes them abstract
        node = cast("Callable[[str], FakeNode]", FakeNode)(mode)
        return await serve_controller(node, servers), node

    yield start
    for server in servers:
        await server.stop(grace=None)


def dead_address() -> str:
    """An address on loopback where nothing listens."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


def create_request(name: str = "orders") -> controller_pb2.CreateTopicsRequest:
    return controller_pb2.CreateTopicsRequest(topics=[controller_pb2.CreatableTopic(name=name, num_partitions=3)])


def test_parse_bootstrap_validates_each_target() -> None:
    assert parse_bootstrap("127.0.0.1:1,localhost:2") == ["127.0.0.1:1", "localhost:2"]
    with pytest.raises(ValueError, match="empty"):
        parse_bootstrap(" , ")
    with pytest.raises(ValueError, match="bootstrap server 'nohost' is not HOST:PORT"):
        parse_bootstrap("127.0.0.1:1,nohost")
    with pytest.raises(ValueError, match=r"port in 1\.\.65535"):
        parse_bootstrap("h:70000")


@pytest.mark.asyncio
async def test_rotates_past_dead_and_leaderless_nodes_keeping_the_request_id(start_node) -> None:  # type: ignore[no-untyped-def]
    leaderless_address, leaderless = await start_node("no-leader")
    leader_address, leader = await start_node("leader")
    async with ControllerClient([dead_address(), leaderless_address, leader_address], retry=FAST) as client:
        response = await client.create_topics(create_request())
        assert response.topics[0].name == "orders"
        statuses = [status for _, status in client.last_attempts]
        assert statuses == ["UNAVAILABLE", "NOT_CONTROLLER", "OK"]
        # One request id, generated by the client, seen by both nodes.
        assert len(leaderless.request_ids) == 1
        assert leaderless.request_ids == leader.request_ids
        assert len(leader.request_ids[0]) == 36
        # The next call starts at the node that answered.
        await client.describe_quorum()
        assert client.last_attempts == [(leader_address, "OK")]


@pytest.mark.asyncio
async def test_a_generated_request_id_goes_on_a_copy_so_each_send_is_a_new_request(start_node) -> None:  # type: ignore[no-untyped-def]
    address, node = await start_node("leader")
    async with ControllerClient([address], retry=FAST) as client:
        request = create_request()
        await client.create_topics(request)
        assert request.request_id == ""  # the caller's message is left as it was
        request.topics[0].name = "payments"
        await client.create_topics(request)
    first, second = node.request_ids
    assert first != second and len(second) == 36


@pytest.mark.asyncio
async def test_retry_after_attempt_timeout_gets_the_original_answer(start_node) -> None:  # type: ignore[no-untyped-def]
    address, node = await start_node("slow-first")
    async with ControllerClient([address], retry=FAST) as client:
        request = create_request()
        request.request_id = "req-1"
        response = await client.create_topics(request)
    assert [status for _, status in client.last_attempts] == ["DEADLINE_EXCEEDED", "OK"]
    assert node.request_ids == ["req-1", "req-1"]
    assert response.topics[0].topic_id == node.applied["req-1"]
    assert len(node.applied) == 1


@pytest.mark.asyncio
async def test_mutating_call_out_of_time_is_unknown_not_failed(start_node) -> None:  # type: ignore[no-untyped-def]
    address, _ = await start_node("slow")
    policy = RetryPolicy(deadline_s=0.4, attempt_timeout_s=0.3, initial_backoff_s=0.01, max_backoff_s=0.02)
    async with ControllerClient([address], retry=policy) as client:
        with pytest.raises(OutcomeUnknownError) as info:
            await client.create_topics(create_request())
    assert info.value.request_id
    assert "outcome unknown" in str(info.value)


@pytest.mark.asyncio
async def test_read_with_no_leader_is_unavailable(start_node) -> None:  # type: ignore[no-untyped-def]
    address, _ = await start_node("no-leader")
    policy = RetryPolicy(deadline_s=0.8, attempt_timeout_s=0.3, initial_backoff_s=0.01, max_backoff_s=0.02)
    async with ControllerClient([address], retry=policy) as client:
        with pytest.raises(UnavailableError) as info:
            await client.describe_quorum()
    assert info.value.error_code == "NOT_CONTROLLER"


@pytest.mark.asyncio
async def test_an_attempt_cut_by_the_deadline_keeps_the_earlier_refusal(start_node) -> None:  # type: ignore[no-untyped-def]
    # On a loaded machine the last attempt of a read with no leader can be cut short by the call's
    # deadline and so carry no answer; the caller must still learn why the call failed.
    address, node = await start_node("no-leader-then-hang")
    policy = RetryPolicy(deadline_s=0.6, attempt_timeout_s=0.25, initial_backoff_s=0.01, max_backoff_s=0.02)
    async with ControllerClient([address], retry=policy) as client:
        with pytest.raises(UnavailableError) as info:
            await client.describe_quorum()
    assert node.describes >= 2
    assert info.value.error_code == "NOT_CONTROLLER"
    assert "NOT_CONTROLLER" in str(info.value)


@pytest.mark.asyncio
async def test_invalid_argument_is_not_retried(start_node) -> None:  # type: ignore[no-untyped-def]
    address, node = await start_node("invalid")
    async with ControllerClient([address], retry=FAST) as client:
        with pytest.raises(ClientError) as info:
            await client.create_topics(create_request())
    assert info.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "at most 100 topics" in str(info.value)
    assert len(node.request_ids) == 1


@pytest.mark.asyncio
async def test_concurrent_calls_that_fail_at_one_node_all_move_off_it(start_node) -> None:  # type: ignore[no-untyped-def]
    # A fleet's three brokers heartbeat through one client; when the node they use hangs, each
    # call gives up there. Each must move the client off that node, not advance a shared index
    # once per call and so bring it round to the hung node again (3 calls, 3 nodes).
    hung_address, _ = await start_node("slow")
    addresses = [hung_address, (await start_node("leader"))[0], (await start_node("leader"))[0]]
    policy = RetryPolicy(deadline_s=0.3, attempt_timeout_s=0.3, initial_backoff_s=0.01, max_backoff_s=0.02)
    async with ControllerClient(addresses, retry=policy) as client:
        outcomes = await asyncio.gather(
            *(client.create_topics(create_request()) for _ in range(3)), return_exceptions=True
        )
        assert all(isinstance(outcome, OutcomeUnknownError) for outcome in outcomes)
        await client.create_topics(create_request())
        assert client.last_attempts == [(addresses[1], "OK")]


def test_backoff_is_capped_and_jittered() -> None:
    policy = RetryPolicy(initial_backoff_s=0.1, max_backoff_s=0.4)
    rng = random.Random(1)
    pauses = [policy.backoff_s(attempt, rng) for attempt in range(10)]
    assert all(0 <= p <= 0.4 for p in pauses)
    assert len(set(pauses)) == len(pauses)


def test_sync_client_against_a_real_server() -> None:
    async def scenario() -> tuple[str, grpc.aio.Server]:
        server = grpc.aio.server()
        # cast: the generated base answers UNIMPLEMENTED for the methods left out; only its stub makes them abstract
        node = cast("Callable[[str], FakeNode]", FakeNode)("leader")
        controller_pb2_grpc.add_ControllerServiceServicer_to_server(node, server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        return f"127.0.0.1:{port}", server

    loop = asyncio.new_event_loop()
    import threading

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    address, server = asyncio.run_coroutine_threadsafe(scenario(), loop).result()
    try:
        with SyncControllerClient(address, retry=FAST) as client:
            response = client.create_topics(create_request("payments"))
            assert response.topics[0].name == "payments"
            assert response.topics[0].error_code == errors_pb2.NONE
            assert client.describe_quorum().leader_epoch == 3
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(grace=None), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()


@pytest.mark.parametrize(
    ("code", "details", "reached"),
    [
        (grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded", True),
        (grpc.StatusCode.UNAVAILABLE, "Socket closed", True),
        (grpc.StatusCode.UNAVAILABLE, "failed to connect to all addresses; last error: Connection refused", False),
        (grpc.StatusCode.UNAVAILABLE, "errors resolving nosuchhost.invalid:9092: address lookup failed", False),
        (grpc.StatusCode.UNAVAILABLE, "DNS resolution failed for nosuchhost:1", False),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, "overloaded", False),
        # A server that dies with the call open gives no definite answer (issue 46, item 3).
        (grpc.StatusCode.CANCELLED, "CANCELLED", True),
        (grpc.StatusCode.INTERNAL, "Received RST_STREAM with error code 2", True),
        (grpc.StatusCode.UNKNOWN, "Unexpected <class 'OSError'>: [Errno 28] No space left on device", True),
        (grpc.StatusCode.INVALID_ARGUMENT, "topics: at most 100 topics per request", False),
    ],
)
def test_which_failures_may_have_reached_a_node(code: grpc.StatusCode, details: str, reached: bool) -> None:
    assert may_have_applied(code, details) is reached


def test_a_definite_failure_carries_the_quorums_error_code() -> None:
    """The controller's "failed and wrote nothing" is INTERNAL with UNKNOWN_SERVER_ERROR: definite."""
    assert may_have_applied(grpc.StatusCode.INTERNAL, "the controller failed", "UNKNOWN_SERVER_ERROR") is False
    assert may_have_applied(grpc.StatusCode.INTERNAL, "the controller failed") is True


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", ["cancelled", "internal", "raises"])
async def test_a_write_the_server_dropped_without_an_answer_is_unknown(start_node, mode: str) -> None:  # type: ignore[no-untyped-def]
    """Before: CANCELLED, INTERNAL and UNKNOWN were plain failures (ClientError), though the write
    may have been applied."""
    address, node = await start_node(mode)
    async with ControllerClient([address], retry=FAST) as client:
        with pytest.raises(OutcomeUnknownError) as info:
            await client.create_topics(create_request())
    assert info.value.request_id == node.request_ids[0] and len(node.request_ids) == 1
    assert "outcome unknown" in str(info.value) and f"request_id={info.value.request_id}" in str(info.value)


@pytest.mark.asyncio
async def test_the_controllers_definite_internal_error_stays_a_failure(start_node) -> None:  # type: ignore[no-untyped-def]
    address, _ = await start_node("controller-failed")
    async with ControllerClient([address], retry=FAST) as client:
        with pytest.raises(ClientError) as info:
            await client.create_topics(create_request())
    assert not isinstance(info.value, OutcomeUnknownError)
    assert (info.value.code, info.value.error_code) == (grpc.StatusCode.INTERNAL, "UNKNOWN_SERVER_ERROR")


def test_a_write_in_flight_when_the_server_process_dies_is_outcome_unknown() -> None:
    """A real process dying with the call open, as a node on a full disk does: the client gets
    CANCELLED from gRPC, and reports the write's outcome as unknown with its request id."""
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.dying_controller"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        assert server.stdout is not None
        address = server.stdout.readline().strip()
        client = SyncControllerClient(address, retry=RetryPolicy(deadline_s=60.0, attempt_timeout_s=60.0))
        try:
            request = create_request()
            request.request_id = "r-full-disk"
            with pytest.raises(OutcomeUnknownError) as info:
                client.create_topics(request)
        finally:
            client.close()
    finally:
        server.kill()
        server.wait()
        if server.stdout is not None:
            server.stdout.close()
    assert info.value.code == grpc.StatusCode.CANCELLED
    assert info.value.request_id == "r-full-disk"


def test_a_write_no_node_received_says_so_and_names_every_address() -> None:
    """Before: a name that does not resolve was an "outcome unknown", with no word on what was tried."""
    client = SyncControllerClient("127.0.0.1:1,nosuchhost.invalid:9092", retry=RetryPolicy(deadline_s=0.5))
    try:
        with pytest.raises(UnavailableError) as caught:
            client.create_topics(controller_pb2.CreateTopicsRequest(topics=[controller_pb2.CreatableTopic(name="t")]))
    finally:
        client.close()
    message = str(caught.value)
    assert "127.0.0.1:1: UNAVAILABLE" in message and "nosuchhost.invalid:9092: UNAVAILABLE" in message
    assert "no attempt reached a node, so nothing was applied" in message


@pytest.mark.asyncio
async def test_a_voter_change_refused_on_its_retry_has_an_unknown_outcome(start_node) -> None:  # type: ignore[no-untyped-def]
    """A voter change has no request id: when an attempt that may have reached the quorum is
    followed by a retry refused as DUPLICATE_VOTER, the first attempt may have added the voter,
    so the call's outcome is unknown -- not a refusal (the chaos checker found such a "refused"
    add committed). The same answer to a first attempt is the plain refusal."""
    address, node = await start_node("slow-first")
    request = controller_pb2.AddRaftVoterRequest(voter_id=4, voter_directory_id=bytes(range(16)))
    async with ControllerClient([address], retry=FAST) as client:
        with pytest.raises(OutcomeUnknownError) as info:
            await client.add_raft_voter(request)
    assert [status for _, status in client.last_attempts] == ["DEADLINE_EXCEEDED", "OK"]
    assert node.voter_adds == 2
    assert info.value.request_id == ""
    assert info.value.code == grpc.StatusCode.UNKNOWN
    assert "DUPLICATE_VOTER" in str(info.value) and "outcome unknown" in str(info.value)
    address, _ = await start_node("already-voter")
    async with ControllerClient([address], retry=FAST) as client:
        refused = await client.add_raft_voter(request)
    assert refused.error_code == errors_pb2.DUPLICATE_VOTER
