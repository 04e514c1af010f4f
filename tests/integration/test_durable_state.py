"""Damaged durable state with real node processes (docs/storage.md, "Damaged disk"): a deleted or
unreadable quorum-state file, and a divergence answer below the high watermark."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest

from raftmeta.client import RetryPolicy, SyncControllerClient
from raftmeta.local import quorum as local_quorum
from raftmeta.raft import VOTE_FENCED, QuorumStateData
from raftmeta.records.codec import encode_batch, iter_batches
from raftmeta.storage.datadir import NodeStorage, log_dir
from raftmeta.storage.errors import InvalidFileError
from raftmeta.storage.quorum_state import QuorumStateFile
from raftmeta.v1 import errors_pb2, raft_pb2, records_pb2

from .conftest import FAST_NODE_ARGS
from .test_node import create, wait_until

pytestmark = pytest.mark.integration
NO_OP = records_pb2.MetadataRecord(no_op=records_pb2.NoOpRecord()).SerializeToString()


def stop(quorum: local_quorum.LocalQuorum, node_id: int) -> None:
    pid = local_quorum.signal_node(quorum, node_id, signal.SIGTERM)
    deadline = time.monotonic() + 20
    while local_quorum.alive(pid):
        assert time.monotonic() < deadline, f"node {node_id} did not stop"
        time.sleep(0.05)


def log_events(quorum: local_quorum.LocalQuorum, node_id: int, event: str) -> list[dict[str, object]]:
    lines = Path(quorum.node(node_id).log).read_text().splitlines()
    docs = [json.loads(line) for line in lines if line.startswith("{")]
    return [d for d in docs if d.get("event") == event]


def test_a_follower_that_lost_or_damaged_its_quorum_state_rejoins_without_a_second_vote(
    quorum: local_quorum.LocalQuorum,
) -> None:
    with SyncControllerClient(quorum.bootstrap_server, retry=RetryPolicy(deadline_s=20)) as client:
        assert create(client, "before").error_code == errors_pb2.NONE
        status = client.describe_quorum()
        leader, epoch = status.leader_id, status.leader_epoch
        followers = [n.id for n in quorum.nodes if n.id != leader]
        damage = {
            followers[0]: None,  # deleted
            followers[1]: '{"data_version": 0, "epoch": 3, "voted_id": 8, "leader_id": -1, "voters": [1, 2, 3]}',
        }
        for node_id, content in damage.items():
            stop(quorum, node_id)
            path = Path(quorum.node(node_id).data_dir) / "quorum-state"
            if content is None:
                path.unlink()
            else:
                path.write_text(content)
            local_quorum.restart(quorum, node_id)
            data_dir = Path(quorum.node(node_id).data_dir)

            def following(directory: Path = data_dir) -> bool:
                try:
                    stored = QuorumStateFile(directory).read()
                except InvalidFileError:
                    return False  # the damaged file, before the restarted node set it aside
                # Following, and past the vote fence: every other voter has told it its epoch (it
                # follows the leader before its probes of the other voter are answered).
                return stored is not None and stored.leader_id == leader and stored.voted_id != VOTE_FENCED

            wait_until(following, what=f"node {node_id} following leader {leader} again, past the vote fence")
            [warning] = log_events(quorum, node_id, "election state recovered from the log")
            assert warning["level"] == "warning"
            assert f"starting unattached in epoch {epoch} and granting no vote in it" in str(warning["detail"])
            assert "put it back" in str(warning["what_to_do"])
            stored = QuorumStateFile(data_dir).read()
            assert stored == QuorumStateData(epoch, voted_id=-2, leader_id=leader)  # no voter list: the log has it
        assert "voted_id 8" in str(log_events(quorum, followers[1], "election state recovered from the log"))
        assert (Path(quorum.node(followers[1]).data_dir) / "quorum-state.unreadable").exists()
        assert create(client, "after").error_code == errors_pb2.NONE
        assert client.describe_quorum().leader_id == leader, "no election was needed"


def test_a_single_voter_that_lost_its_quorum_state_leads_the_next_epoch(tmp_path: Path) -> None:
    """Before: every start died with 'AssertionError: epoch 1 after 2'."""
    quorum = local_quorum.up(
        tmp_path / "q", nodes=1, brokers=1, racks=1, node_args=FAST_NODE_ARGS, heartbeat_interval_ms=200
    )
    try:
        with SyncControllerClient(quorum.bootstrap_server, retry=RetryPolicy(deadline_s=20)) as client:
            assert create(client, "one", rf=1).error_code == errors_pb2.NONE
            for round_ in range(2):  # the second restart reads back the fence it wrote
                epoch = client.describe_quorum().leader_epoch
                stop(quorum, 1)
                (Path(quorum.node(1).data_dir) / "quorum-state").unlink(missing_ok=round_ == 1)
                local_quorum.restart(quorum, 1)
                wait_until(lambda e=epoch: client.describe_quorum().leader_epoch > e, what="a new leader epoch")
                assert create(client, f"again-{round_}", rf=1).error_code == errors_pb2.NONE
            assert {t.name for t in client.describe_topics().topics} == {"one", "again-0", "again-1"}
    finally:
        local_quorum.down(quorum)
    assert "Traceback" not in Path(quorum.node(1).log).read_text()


class ForgingLeader:
    """A leader of epoch 2 that answers every Fetch with a divergence at offset 1 -- below the
    follower's high watermark 3. A bug or an attacker; the follower must not obey. Only the two
    Fetch methods are served (a generic handler: the other RaftService calls are UNIMPLEMENTED)."""

    def __init__(self) -> None:
        self.fetches = 0

    def answer(self) -> raft_pb2.FetchResponse:
        self.fetches += 1
        response = raft_pb2.FetchResponse(leader_id=2, leader_epoch=2, high_watermark=4)
        response.diverging_epoch.epoch = 1
        response.diverging_epoch.end_offset = 1
        return response

    def Fetch(self, request: raft_pb2.FetchRequest, context: grpc.ServicerContext) -> raft_pb2.FetchResponse:
        return self.answer()

    def FetchStream(
        self, request_iterator: Iterator[raft_pb2.FetchRequest], context: grpc.ServicerContext
    ) -> Iterator[raft_pb2.FetchResponse]:
        for _ in request_iterator:
            yield self.answer()

    def handler(self) -> grpc.GenericRpcHandler[Any, Any]:
        fetch = grpc.unary_unary_rpc_method_handler(
            self.Fetch,
            request_deserializer=raft_pb2.FetchRequest.FromString,
            response_serializer=raft_pb2.FetchResponse.SerializeToString,
        )
        stream = grpc.stream_stream_rpc_method_handler(
            self.FetchStream,
            request_deserializer=raft_pb2.FetchRequest.FromString,
            response_serializer=raft_pb2.FetchResponse.SerializeToString,
        )
        return grpc.method_handlers_generic_handler("raftmeta.v1.RaftService", {"Fetch": fetch, "FetchStream": stream})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_a_diverging_answer_below_the_high_watermark_stops_the_node(tmp_path: Path) -> None:
    data_dir = tmp_path / "node-1"
    storage = NodeStorage.open(data_dir, cluster_id="forge", node_id=1)
    for offset, epoch in enumerate([1, 1, 2, 2]):
        storage.log.append(encode_batch(offset, epoch, [NO_OP], 0))
    storage.log.flush()
    storage.checkpoint_high_watermark(3)
    storage.write_quorum_state(QuorumStateData(2, voted_id=2, leader_id=2, voters=(1, 2)))
    storage.close()
    forger = ForgingLeader()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((forger.handler(),))
    fake_port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    port = free_port()
    try:
        result = subprocess.run(
            [sys.executable, "-m", "raftmeta", "--log-format", "json", "node", "--node-id", "1",
             "--listen", f"127.0.0.1:{port}", "--voters", f"1@127.0.0.1:{port},2@127.0.0.1:{fake_port}",
             "--data-dir", str(data_dir), "--cluster-id", "forge"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
    finally:
        server.stop(grace=None)
    assert forger.fetches >= 1
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    [refusal] = [
        json.loads(line)
        for line in result.stderr.splitlines()
        if line.startswith("{") and "refused to truncate committed offsets" in line
    ]
    assert (refusal["level"], refusal["offset"], refusal["high_watermark"]) == ("error", 1, 3)
    assert "offsets [1, 3) are below the high watermark 3" in str(refusal["reason"])
    segment = next(log_dir(data_dir).glob("*.log"))
    assert [b.base_offset for b in iter_batches(segment.read_bytes())] == [0, 1, 2, 3], "nothing truncated"
