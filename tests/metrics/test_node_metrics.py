"""A real node in this process (tests/server/node_server.py): its registry shows the single
voter's election, and a committed request moves the committed/applied counters and the
histograms; the wrapped servicer counts calls and errors by status and raftmeta-error-code."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from raftmeta.api.rpc_errors import error_metadata
from raftmeta.metrics.grpc import GrpcMetrics, instrument
from raftmeta.metrics.http import serve_metrics
from raftmeta.v1 import controller_pb2 as pb
from raftmeta.v1 import controller_pb2_grpc, raft_pb2, raft_pb2_grpc
from tests.server.node_server import NodeServer

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(registry: CollectorRegistry) -> Samples:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(generate_latest(registry).decode())
        for s in family.samples
    }


def get(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


@pytest.fixture
def leader(tmp_path: Path) -> Iterator[NodeServer]:
    server = NodeServer(tmp_path / "leader")
    try:
        server.wait_until_leader()
        yield server
    finally:
        server.stop()


def test_a_single_voter_leader_and_a_committed_request(leader: NodeServer) -> None:
    registry = leader.node.metrics.registry
    before = scrape(registry)
    assert get(before, "raftmeta_raft_current_state", state="leader") == 1
    assert get(before, "raftmeta_raft_is_leader") == 1
    assert get(before, "raftmeta_raft_current_leader") == 1
    assert get(before, "raftmeta_raft_current_epoch") >= 1
    assert get(before, "raftmeta_raft_leader_changes_seen_total") == 1
    assert get(before, "raftmeta_raft_election_latency_seconds_count") == 1
    assert get(before, "raftmeta_controller_active_controller_count") == 1
    with grpc.insecure_channel(leader.address) as channel:
        stub = controller_pb2_grpc.ControllerServiceStub(channel)
        answer = stub.RegisterBroker(
            pb.RegisterBrokerRequest(broker_id=5, incarnation_id=bytes(range(1, 17))), timeout=10
        )
        assert answer.error_code == 0
    after = scrape(registry)
    for counter in (
        "raftmeta_raft_proposals_committed_total",
        "raftmeta_raft_proposals_applied_total",
        "raftmeta_raft_append_records_total",
        "raftmeta_raft_commit_latency_seconds_count",
        "raftmeta_raft_fsync_duration_seconds_count",
        "raftmeta_controller_event_queue_time_seconds_count",
        "raftmeta_controller_event_queue_processing_time_seconds_count",
        "raftmeta_raft_high_watermark",
        "raftmeta_controller_last_applied_record_offset",
    ):
        assert get(after, counter) > get(before, counter), counter
    assert (
        get(after, "raftmeta_controller_fenced_broker_count") + get(after, "raftmeta_controller_active_broker_count")
        == 1
    )
    assert get(after, "raftmeta_raft_fetch_records_total") == 0  # a leader fetches nothing


class FakeRaft(raft_pb2_grpc.RaftServiceServicer):
    """A RaftService whose Vote refuses epoch 0 (as a guard would) and whose streams answer at once."""

    async def Vote(self, request: raft_pb2.VoteRequest, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        if request.candidate_epoch == 0:
            context.set_trailing_metadata(error_metadata("INVALID_REQUEST"))
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "epoch 0")
        return raft_pb2.VoteResponse()

    async def BeginQuorumEpoch(self, request: Any, context: Any) -> Any:
        return raft_pb2.BeginQuorumEpochResponse()

    async def EndQuorumEpoch(self, request: Any, context: Any) -> Any:
        return raft_pb2.EndQuorumEpochResponse()

    async def Fetch(self, request: Any, context: Any) -> Any:
        return raft_pb2.FetchResponse()

    async def FetchStream(self, requests: Any, context: Any) -> AsyncIterator[raft_pb2.FetchResponse]:
        async for _ in requests:
            yield raft_pb2.FetchResponse()

    async def FetchSnapshot(self, request: Any, context: Any) -> AsyncIterator[raft_pb2.FetchSnapshotResponse]:
        for _ in range(3):
            yield raft_pb2.FetchSnapshotResponse()


def test_instrumented_servicer_counts_calls_errors_and_latency() -> None:
    registry = CollectorRegistry(auto_describe=False)
    metrics = GrpcMetrics(registry)
    service = raft_pb2.DESCRIPTOR.services_by_name["RaftService"]

    async def run() -> None:
        server = grpc.aio.server()
        raft_pb2_grpc.add_RaftServiceServicer_to_server(instrument(FakeRaft(), service, metrics), server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                stub = raft_pb2_grpc.RaftServiceStub(channel)
                await stub.Vote(raft_pb2.VoteRequest(candidate_epoch=1), timeout=10)
                await stub.Vote(raft_pb2.VoteRequest(candidate_epoch=2), timeout=10)
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await stub.Vote(raft_pb2.VoteRequest(candidate_epoch=0), timeout=10)
                assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
                answers = [r async for r in stub.FetchSnapshot(raft_pb2.FetchSnapshotRequest(), timeout=10)]
                assert len(answers) == 3

                async def two() -> AsyncIterator[raft_pb2.FetchRequest]:
                    for _ in range(2):
                        yield raft_pb2.FetchRequest()

                assert len([r async for r in stub.FetchStream(two(), timeout=10)]) == 2
        finally:
            await server.stop(grace=None)

    asyncio.run(run())
    samples = scrape(registry)
    raft = "raftmeta.v1.RaftService"
    assert get(samples, "raftmeta_grpc_requests_total", service=raft, method="Vote") == 3
    assert get(samples, "raftmeta_grpc_requests_total", service=raft, method="FetchSnapshot") == 1
    assert get(samples, "raftmeta_grpc_requests_total", service=raft, method="FetchStream") == 1
    errors = {"service": raft, "method": "Vote", "code": "INVALID_ARGUMENT", "error_code": "INVALID_REQUEST"}
    assert get(samples, "raftmeta_grpc_errors_total", **errors) == 1
    assert get(samples, "raftmeta_grpc_request_duration_seconds_count", service=raft, method="Vote") == 3
    timed = {
        dict(labels)["method"] for name, labels in samples if name == "raftmeta_grpc_request_duration_seconds_count"
    }
    assert "FetchStream" not in timed and "FetchSnapshot" not in timed


class AbortingContext:
    """What a handler sees of grpc.aio's context, far enough to abort: like grpc.aio, ``abort``
    sends the status (here: notes what a scrape would show at that moment) and then raises."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.metadata: tuple[tuple[str, str], ...] = ()
        self.seen_when_sent: Samples | None = None

    def set_trailing_metadata(self, metadata: tuple[tuple[str, str], ...]) -> None:
        self.metadata = metadata

    def trailing_metadata(self) -> tuple[tuple[str, str], ...]:
        return self.metadata

    def code(self) -> None:
        return None

    async def abort(self, code: grpc.StatusCode, details: str = "", trailing_metadata: Any = ()) -> None:
        self.seen_when_sent = scrape(self.registry)
        raise RuntimeError(f"aborted: {code.name} {details}")


def test_an_aborted_call_is_counted_before_its_status_leaves() -> None:
    # A caller that scrapes as soon as it has its refusal must see it counted (a quorum test
    # once did not, now and then: the count came after grpc.aio had sent the status).
    registry = CollectorRegistry(auto_describe=False)
    metrics = GrpcMetrics(registry)
    proxy: Any = instrument(FakeRaft(), raft_pb2.DESCRIPTOR.services_by_name["RaftService"], metrics)
    context = AbortingContext(registry)
    with pytest.raises(RuntimeError, match="aborted: INVALID_ARGUMENT"):
        asyncio.run(proxy.Vote(raft_pb2.VoteRequest(candidate_epoch=0), context))
    assert context.seen_when_sent is not None
    labels = {"service": "raftmeta.v1.RaftService", "method": "Vote", "code": "INVALID_ARGUMENT"}
    assert get(context.seen_when_sent, "raftmeta_grpc_errors_total", **labels, error_code="INVALID_REQUEST") == 1
    # ... and counted once, though the abort's exception then passes through the wrapper.
    assert get(scrape(registry), "raftmeta_grpc_errors_total", **labels, error_code="INVALID_REQUEST") == 1


def test_the_endpoint_serves_the_registry() -> None:
    import urllib.request

    registry = CollectorRegistry(auto_describe=False)
    GrpcMetrics(registry).requests.labels("s", "m").inc()
    server = serve_metrics("127.0.0.1:0", registry)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=10) as answer:
            text = answer.read().decode()
    finally:
        server.close()
    assert 'raftmeta_grpc_requests_total{method="m",service="s"} 1.0' in text


def test_node_refuses_a_bad_metrics_address(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from raftmeta.cli.main import cli

    args = ["node", "--node-id", "1", "--listen", "127.0.0.1:0", "--voters", "1@127.0.0.1:1"]
    args += ["--data-dir", str(tmp_path / "n"), "--cluster-id", "c", "--metrics-listen", "no-port"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2
    assert "--metrics-listen" in result.output


def test_node_stops_when_its_metrics_port_is_taken(tmp_path: Path) -> None:
    import socket

    from click.testing import CliRunner

    from raftmeta.cli.main import cli

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        args = ["node", "--node-id", "1", "--listen", "127.0.0.1:0", "--voters", "1@127.0.0.1:1"]
        args += ["--data-dir", str(tmp_path / "n"), "--cluster-id", "c", "--metrics-listen", f"127.0.0.1:{port}"]
        result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1, result.output
    assert not (tmp_path / "n").exists(), "the node opened its data dir before binding its metrics port"
