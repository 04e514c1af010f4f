"""A Kafka request to a follower while the leader dies: the follower retries until a new leader
is elected and forwards to it (same request id, so at most one write), and the client sees success.

The request is sent on a raw connection to that follower, encoded as a client would (kio), because
a real client may have picked the dying leader as its controller: Metadata names the node asked,
and librdkafka asks whichever node it likes."""

from __future__ import annotations

import signal
import socket
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from raftmeta.api.addresses import parse_host_port
from raftmeta.client import RetryPolicy, SyncControllerClient
from raftmeta.local import quorum as local_quorum
from tests.kafka.helpers import decode_response, framed, request_bytes

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]
FAST_NODE_ARGS = ["--fetch-timeout-ms", "1000", "--election-timeout-ms", "500", "--session-timeout-ms", "4500"]


def receive_frame(sock: socket.socket) -> bytes:
    data = b""
    while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "big"):
        chunk = sock.recv(65536)
        assert chunk, "the node closed the connection"
        data += chunk
    return data


def test_create_through_a_follower_while_the_leader_is_killed(tmp_path: Path) -> None:
    quorum = local_quorum.up(
        tmp_path / "q", nodes=3, brokers=3, racks=3, node_args=FAST_NODE_ARGS, heartbeat_interval_ms=200, kafka=True
    )
    try:
        with SyncControllerClient(quorum.bootstrap_server, retry=RetryPolicy(deadline_s=20)) as grpc_client:
            leader = grpc_client.describe_quorum().leader_id
            follower = next(n for n in quorum.nodes if n.id != leader)
            assert follower.kafka_address is not None
            create = request_bytes(19, 7, {"topics": [{"name": "after-failover", "num_partitions": 2,
                                                       "replication_factor": 2, "assignments": [], "configs": []}],
                                           "timeout": 30_000, "validate_only": False}, correlation_id=5)  # fmt: skip
            with socket.create_connection(parse_host_port(follower.kafka_address, "Kafka address"), timeout=60) as sock:
                local_quorum.signal_node(quorum, leader, signal.SIGKILL)
                sock.sendall(framed(create))
                correlation_id, response = decode_response(receive_frame(sock), 19, 7)
            assert correlation_id == 5
            (result,) = response.topics
            assert (result.name, result.error_code) == ("after-failover", ErrorCode.none), result.error_message
            (topic,) = grpc_client.describe_topics(["after-failover"]).topics
            assert topic.error_code == 0 and len(topic.partitions) == 2
            assert grpc_client.describe_quorum().leader_id not in (-1, leader)
    finally:
        local_quorum.down(quorum)
    for node in quorum.nodes:
        assert "Traceback" not in Path(node.log).read_text()
