"""Hostile clients against a real node's Kafka listener: many connections that each send a
largest-size frame's size and most of its bytes, then stop. The node buffers at most its budget of
request bytes (--kafka-queued-max-request-bytes), however many such connections there are: its
resident memory grows by about the budget, not by connections x frame size."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from raftmeta.api.addresses import parse_host_port
from raftmeta.api.limits import KAFKA_FRAME_BYTES_MAX, KAFKA_QUEUED_REQUEST_BYTES_DEFAULT
from raftmeta.kafka.listener import SOCKET_RECEIVE_BUFFER_BYTES, STREAM_BUFFER_BYTES
from raftmeta.local import quorum as local_quorum
from tests.kafka.helpers import framed, request_bytes
from tests.kafka.samples import REQUESTS

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

CONNECTIONS = 300
MIB = 1024 * 1024
# What a connection waiting for the budget may hold outside it: its stream buffer (asyncio reads
# until it holds twice the limit) and one socket read on top (at most the kernel's buffer, which
# Linux sizes at twice the value set).
PER_CONNECTION_BYTES = 2 * STREAM_BUFFER_BYTES + 2 * SOCKET_RECEIVE_BUFFER_BYTES
# The interpreter's own growth while serving hundreds of connections (tasks, transports, logs).
SLACK_BYTES = 48 * MIB


@pytest.fixture
def kafka_node(tmp_path: Path) -> Iterator[local_quorum.LocalQuorum]:
    quorum = local_quorum.up(tmp_path / "q", nodes=1, kafka=True, metrics=False)
    try:
        yield quorum
    finally:
        local_quorum.down(quorum)


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


def main_thread_sleeping(pid: int) -> bool:
    """True when the node's event loop thread sleeps: it has nothing ready to read or run."""
    stat = Path(f"/proc/{pid}/task/{pid}/stat").read_text()
    return stat.rsplit(") ", 1)[1][0] == "S"


def api_versions_round_trip(address: tuple[str, int]) -> None:
    with socket.create_connection(address) as sock:
        sock.sendall(framed(request_bytes(18, 3, REQUESTS[18], correlation_id=5)))
        size = int.from_bytes(_recv_exactly(sock, 4), "big")
        _recv_exactly(sock, size)


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, "the node closed the connection"
        data += chunk
    return data


def push_until_held(pid: int, sockets: list[socket.socket], payload: bytes) -> int:
    """Send ``payload`` on every socket, as far as each will take it, until every socket has sent
    all of it or is blocked while the node sleeps (so it is not going to read more): the node
    then holds all it will hold. Returns the bytes the node's sockets accepted."""
    sent = [0] * len(sockets)
    settled_rounds = 0
    while settled_rounds < 2:
        progress = False
        for i, sock in enumerate(sockets):
            if sent[i] == len(payload):
                continue
            with contextlib.suppress(BlockingIOError):
                count = sock.send(payload[sent[i] : sent[i] + 256 * 1024])
                sent[i] += count
                progress = progress or count > 0
        if progress:
            settled_rounds = 0
            continue
        if not main_thread_sleeping(pid):
            settled_rounds = 0
            time.sleep(0.01)  # the node has work to do: let it run rather than spin beside it
            continue
        settled_rounds += 1
    return sum(sent)


def test_many_slow_connections_hold_at_most_the_budget(kafka_node: local_quorum.LocalQuorum) -> None:
    (node,) = kafka_node.nodes
    assert node.pid is not None and node.kafka_address is not None
    address = parse_host_port(node.kafka_address, "Kafka address")
    api_versions_round_trip(address)  # the listener has served once: its code and buffers are warm
    before = rss_bytes(node.pid)
    # A frame of the largest size, all of it but its last byte: the node can neither answer nor
    # refuse it, only hold it.
    payload = KAFKA_FRAME_BYTES_MAX.to_bytes(4, "big") + bytes(KAFKA_FRAME_BYTES_MAX - 1)
    sockets = [socket.create_connection(address) for _ in range(CONNECTIONS)]
    try:
        for sock in sockets:
            sock.setblocking(False)
        accepted = push_until_held(node.pid, sockets, payload)
        grown = rss_bytes(node.pid) - before
        bound = KAFKA_QUEUED_REQUEST_BYTES_DEFAULT + KAFKA_FRAME_BYTES_MAX + CONNECTIONS * PER_CONNECTION_BYTES
        assert grown <= bound + SLACK_BYTES, (
            f"{CONNECTIONS} connections sending {accepted // MIB} MiB grew the node by {grown // MIB} MiB, "
            f"above the budget's bound of {bound // MIB} MiB (+{SLACK_BYTES // MIB} MiB slack)"
        )
    finally:
        for sock in sockets:
            sock.close()
    api_versions_round_trip(address)  # the bytes went back: the listener serves a new client
