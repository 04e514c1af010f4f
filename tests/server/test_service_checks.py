"""Through a real node's gRPC server: refused RaftService calls and ControllerService requests over a
limit get the right status and ``raftmeta-error-code``, leave the node's epoch, log end offset and
high watermark where they were, and (RaftService) log one structured, rate-limited line."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import structlog
from google.protobuf.message import Message

from raftmeta.api import limits
from raftmeta.api.rpc_errors import parse_error_metadata
from raftmeta.client import ClientError, RetryPolicy, SyncControllerClient
from raftmeta.raft import Role
from raftmeta.v1 import controller_pb2 as pb
from raftmeta.v1 import controller_pb2_grpc, raft_pb2, raft_pb2_grpc

from .node_server import NodeServer


@pytest.fixture
def leader(tmp_path: Path) -> Iterator[NodeServer]:
    server = NodeServer(tmp_path / "leader")
    try:
        server.wait_until_leader()
        yield server
    finally:
        server.stop()


@pytest.fixture
def leaderless(tmp_path: Path) -> Iterator[NodeServer]:
    """Node 1 of voters 1, 2, 3 where 2 and 3 never answer: it never leads, knows no leader."""
    server = NodeServer(tmp_path / "alone", voters=(1, 2, 3))
    try:
        yield server
    finally:
        server.stop()


def refusal(call: Callable[..., Any], request: Message) -> tuple[grpc.StatusCode, str, str]:
    """Make a call that must fail: its status, ``raftmeta-error-code`` and details."""
    with pytest.raises(grpc.RpcError) as info:
        call(request, timeout=10)
    error: Any = info.value
    return error.code(), parse_error_metadata(error.trailing_metadata()).error_code, error.details()


# -- RaftService ---------------------------------------------------------------------------------------
def test_raft_calls_the_guard_refuses_change_nothing(leader: NodeServer) -> None:
    before = leader.view()
    assert before.role is Role.LEADER
    foreign_vote = raft_pb2.VoteRequest(
        cluster_id="another", candidate_id=2, candidate_epoch=1000, last_offset_epoch=999, last_offset=10**6
    )
    observer_vote = raft_pb2.VoteRequest(
        cluster_id="c", candidate_id=7, candidate_epoch=1000, last_offset_epoch=999, last_offset=10**6
    )
    non_voter_begin = raft_pb2.BeginQuorumEpochRequest(cluster_id="c", leader_id=7, leader_epoch=1000)
    overflow_fetch = raft_pb2.FetchRequest(cluster_id="c", replica_id=7, replica_epoch=2**31 - 1, max_bytes=100)
    with grpc.insecure_channel(leader.address) as channel, structlog.testing.capture_logs() as logs:
        stub = raft_pb2_grpc.RaftServiceStub(channel)
        code, error_code, details = refusal(stub.Vote, foreign_vote)
        assert (code, error_code) == (grpc.StatusCode.FAILED_PRECONDITION, "INCONSISTENT_CLUSTER_ID")
        assert "'another'" in details and "'c'" in details
        for pre_vote in (False, True):
            observer_vote.pre_vote = pre_vote
            code, error_code, details = refusal(stub.Vote, observer_vote)
            assert (code, error_code) == (grpc.StatusCode.PERMISSION_DENIED, "INCONSISTENT_VOTER_SET")
            assert "node 7" in details and "[1]" in details
        code, error_code, details = refusal(stub.BeginQuorumEpoch, non_voter_begin)
        assert (code, error_code) == (grpc.StatusCode.PERMISSION_DENIED, "INCONSISTENT_VOTER_SET")
        code, error_code, details = refusal(stub.Fetch, overflow_fetch)
        assert (code, error_code) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REQUEST")
        assert "RAFT_EPOCH_MAX" in details
        # The same refusal again is not logged again (rate-limited).
        refusal(stub.Vote, foreign_vote)
    assert leader.view() == before, "a refused call moved the epoch or appended"
    refused = [e for e in logs if e["event"] == "raft call refused"]
    assert [(e["method"], e["claimed_id"], e["error_code"]) for e in refused] == [
        ("Vote", 2, "INCONSISTENT_CLUSTER_ID"),
        ("Vote", 7, "INCONSISTENT_VOTER_SET"),
        ("BeginQuorumEpoch", 7, "INCONSISTENT_VOTER_SET"),
        ("Fetch", 7, "INVALID_REQUEST"),
    ], "pre-vote and vote from node 7 are one kind; the repeated foreign vote is suppressed"
    assert all(e["log_level"] == "warning" and e["peer"].startswith("ipv") and e["reason"] for e in refused)


def test_an_observer_may_fetch(leader: NodeServer) -> None:
    view = leader.view()
    request = raft_pb2.FetchRequest(cluster_id="c", replica_id=7, replica_epoch=view.epoch, max_bytes=1 << 20)
    with grpc.insecure_channel(leader.address) as channel:
        response = raft_pb2_grpc.RaftServiceStub(channel).Fetch(request, timeout=10)
    assert response.error_code == 0 and response.leader_id == 1
    assert response.records, "the observer got the log from offset 0"


def test_fetch_stream_answers_each_request_in_order(leader: NodeServer) -> None:
    """FetchStream is Fetch over one long-lived call: one answer per request, in order, a parked
    one included (the node's followers match answers to requests by position)."""
    view = leader.view()
    end = view.log_end_offset

    def request(offset: int, max_wait_ms: int) -> raft_pb2.FetchRequest:
        return raft_pb2.FetchRequest(
            cluster_id="c",
            replica_id=7,
            replica_epoch=view.epoch,
            fetch_offset=offset,
            last_fetched_epoch=view.epoch if offset else 0,
            max_wait_ms=max_wait_ms,
            max_bytes=1 << 20,
        )

    # From 0 (the whole log), then from the end with a 300 ms long poll (parked, answered empty at
    # its deadline), then from the middle of nowhere (diverging answer) -- three answers, in order.
    requests = [request(0, 0), request(end, 300), request(end + 50, 0)]
    with grpc.insecure_channel(leader.address) as channel:
        answers = list(raft_pb2_grpc.RaftServiceStub(channel).FetchStream(iter(requests), timeout=10))
    assert len(answers) == 3
    assert answers[0].error_code == 0 and answers[0].records
    assert answers[1].error_code == 0 and not answers[1].records
    assert answers[2].HasField("diverging_epoch")
    assert leader.view() == view


def test_fetch_stream_requests_pass_the_guard(leader: NodeServer) -> None:
    overflow = raft_pb2.FetchRequest(cluster_id="c", replica_id=7, replica_epoch=2**31 - 1, max_bytes=100)
    with grpc.insecure_channel(leader.address) as channel:
        stream = raft_pb2_grpc.RaftServiceStub(channel).FetchStream(iter([overflow]), timeout=10)
        with pytest.raises(grpc.RpcError) as info:
            list(stream)
    error: Any = info.value
    assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert parse_error_metadata(error.trailing_metadata()).error_code == "INVALID_REQUEST"


# -- ControllerService limits -----------------------------------------------------------------------------
OVER_LIMIT: list[tuple[str, Message, grpc.StatusCode, str]] = [
    (
        "CreateTopics",
        pb.CreateTopicsRequest(
            topics=[pb.CreatableTopic(name="big", num_partitions=1, configs={f"k{i}": "v" for i in range(129)})]
        ),
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "len(topics[0].configs)=129 exceeds CONFIGS_PER_TOPIC_MAX=128",
    ),
    (
        "CreateTopics",
        pb.CreateTopicsRequest(
            topics=[pb.CreatableTopic(name="t", num_partitions=1, configs={"retention.ms": "9" * 5000})]
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
        "CONFIG_VALUE_CHARS_MAX=4096",
    ),
    (
        "RegisterBroker",
        pb.RegisterBrokerRequest(broker_id=5, incarnation_id=bytes(range(1, 17)), rack="r" * 256),
        grpc.StatusCode.INVALID_ARGUMENT,
        "len(rack)=256 exceeds RACK_CHARS_MAX=255",
    ),
    (
        "DeleteTopics",
        pb.DeleteTopicsRequest(topic_ids=[bytes(2 << 20)]),
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "CONTROLLER_REQUEST_BYTES_MAX=1048576",
    ),
]


def test_requests_over_a_limit_are_refused_and_write_nothing(leader: NodeServer) -> None:
    with grpc.insecure_channel(leader.address) as channel:
        stub = controller_pb2_grpc.ControllerServiceStub(channel)
        # A request within the limits writes (so "nothing written" below means something).
        before = leader.view()
        registered = stub.RegisterBroker(
            pb.RegisterBrokerRequest(broker_id=5, incarnation_id=bytes(range(1, 17)), rack="r" * 255), timeout=10
        )
        assert registered.error_code == 0
        assert leader.view().log_end_offset > before.log_end_offset
        before = leader.view()
        for method, request, status, message in OVER_LIMIT:
            code, error_code, details = refusal(getattr(stub, method), request)
            assert code == status, (method, details)
            assert error_code == (
                "INVALID_REQUEST" if status == grpc.StatusCode.INVALID_ARGUMENT else "POLICY_VIOLATION"
            )
            assert message in details and details.startswith(f"{method}: ")
        assert leader.view() == before, "a refused request was written"
        # A config value the controller's number parsing would have raised on did not reach it:
        # the node still answers.
        assert stub.DescribeQuorum(pb.DescribeQuorumRequest(), timeout=10).leader_id == 1


def test_a_message_over_the_servers_receive_limit_is_refused_by_grpc_unread(leader: NodeServer) -> None:
    """gRPC holds a message whole before a servicer sees it: a node reads at most
    GRPC_SERVER_RECEIVE_BYTES_MAX, far below the 16 MiB its clients accept in answers."""
    request = pb.DeleteTopicsRequest(topic_ids=[bytes(limits.GRPC_SERVER_RECEIVE_BYTES_MAX)])
    options = [("grpc.max_send_message_length", limits.GRPC_MESSAGE_BYTES_MAX)]
    before = leader.view()
    with grpc.insecure_channel(leader.address, options=options) as channel:
        stub = controller_pb2_grpc.ControllerServiceStub(channel)
        with pytest.raises(grpc.RpcError) as info:
            stub.DeleteTopics(request, timeout=10)
    error: Any = info.value
    assert error.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "larger than max" in error.details()  # gRPC's refusal: the servicer never had it
    assert leader.view() == before


def test_limits_are_checked_before_forwarding(leaderless: NodeServer) -> None:
    method, request, status, message = OVER_LIMIT[0]
    with grpc.insecure_channel(leaderless.address) as channel:
        stub = controller_pb2_grpc.ControllerServiceStub(channel)
        # Within the limits, the node looks for a leader to forward to and finds none.
        code, error_code, _ = refusal(stub.DescribeTopics, pb.DescribeTopicsRequest())
        assert (code, error_code) == (grpc.StatusCode.UNAVAILABLE, "NOT_CONTROLLER")
        # Over a limit, the first node refuses it itself.
        code, error_code, details = refusal(getattr(stub, method), request)
        assert (code, error_code) == (status, "POLICY_VIOLATION") and message in details
    assert leaderless.view().log_end_offset == 0


def test_the_client_does_not_retry_a_request_over_a_limit(leader: NodeServer) -> None:
    _, request, _, message = OVER_LIMIT[0]
    assert isinstance(request, pb.CreateTopicsRequest)
    with SyncControllerClient(leader.address, retry=RetryPolicy(deadline_s=30)) as client:
        with pytest.raises(ClientError) as info:
            client.create_topics(request)
        assert info.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert info.value.error_code == "POLICY_VIOLATION" and message in str(info.value)
        assert len(client.last_attempts) == 1


def test_a_controller_bug_is_answered_internal_and_the_node_keeps_serving(
    leader: NodeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No query of death: a handler raising something other than RequestError is answered
    INTERNAL, nothing is written, and the node (and so the next leader, on the client's retry with
    the same request id) keeps serving."""
    controller = leader.node.controller
    real_handle = controller.handle

    def broken_handle(method: str, request: Message, now_ms: int, *args: Any) -> Any:
        if method == "CreateTopics":
            raise ValueError("planted handler bug")
        return real_handle(method, request, now_ms, *args)

    monkeypatch.setattr(controller, "handle", broken_handle)
    before = leader.view()
    with grpc.insecure_channel(leader.address) as channel:
        stub = controller_pb2_grpc.ControllerServiceStub(channel)
        request = pb.CreateTopicsRequest(topics=[pb.CreatableTopic(name="t", num_partitions=1, replication_factor=1)])
        code, _, details = refusal(stub.CreateTopics, request)
        assert code == grpc.StatusCode.INTERNAL
        assert "planted handler bug" in details and "wrote nothing" in details
        assert leader.view() == before
        assert stub.DescribeQuorum(pb.DescribeQuorumRequest(), timeout=10).leader_id == 1
        monkeypatch.setattr(controller, "handle", real_handle)
        registered = stub.RegisterBroker(
            pb.RegisterBrokerRequest(broker_id=5, incarnation_id=bytes(range(1, 17))), timeout=10
        )
        assert registered.error_code == 0


def test_a_request_id_reused_for_other_work_is_refused_with_its_error_code(leader: NodeServer) -> None:
    with grpc.insecure_channel(leader.address) as channel:
        stub = controller_pb2_grpc.ControllerServiceStub(channel)

        def create(name: str) -> pb.CreateTopicsRequest:
            topic = pb.CreatableTopic(name=name, num_partitions=1, replication_factor=1)
            return pb.CreateTopicsRequest(topics=[topic], request_id="copied-id")

        registered = stub.RegisterBroker(
            pb.RegisterBrokerRequest(broker_id=0, incarnation_id=bytes(range(1, 17))), timeout=10
        )
        beat = pb.BrokerHeartbeatRequest(broker_id=0, broker_epoch=registered.broker_epoch)
        assert stub.BrokerHeartbeat(beat, timeout=10).error_code == 0
        assert stub.CreateTopics(create("first"), timeout=10).topics[0].error_code == 0
        before = leader.view()
        code, error_code, details = refusal(stub.CreateTopics, create("second"))
        assert (code, error_code) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REQUEST")
        assert "'copied-id' was already used for a different CreateTopics request" in details
        assert leader.view() == before
        # The retry of the first request still gets its original answer.
        assert stub.CreateTopics(create("first"), timeout=10).topics[0].name == "first"
