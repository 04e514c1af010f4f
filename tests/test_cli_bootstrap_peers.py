"""Issue 46, item 8: a wrong --bootstrap-server fails at once and says what is there -- nothing
(connection refused), an HTTP server, a Kafka listener -- instead of waiting out --timeout and
then suggesting TLS; ``http://`` in the address is a usage error. Every command here is given a
--timeout of an hour: that it returns at all shows it did not wait it out."""

from __future__ import annotations

import asyncio
import http.server
import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner

from raftmeta.cli.main import cli
from raftmeta.kafka.listener import KafkaListener
from raftmeta.v1 import controller_pb2
from tests.fakes import ServerThread
from tests.kafka.fakes import full_admin
from tests.kafka.helpers import context

pytestmark = pytest.mark.timeout(60)

AN_HOUR = ["--timeout", "3600"]


def topics_list(bootstrap: str, *extra: str) -> tuple[int, dict[str, Any]]:
    result = CliRunner().invoke(
        cli, ["topics", "list", "--bootstrap-server", bootstrap, *AN_HOUR, "-o", "json", *extra]
    )
    document: dict[str, Any] = json.loads(result.stdout)
    return result.exit_code, document


@pytest.fixture
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port  # closed: nothing listens on it


@pytest.fixture
def http_server() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture
def kafka_listener() -> Iterator[str]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    listener = KafkaListener(context(full_admin()), "127.0.0.1:0")
    asyncio.run_coroutine_threadsafe(listener.start(), loop).result()
    host, port = listener.sockets[0].getsockname()[:2]
    try:
        yield f"{host}:{port}"
    finally:
        asyncio.run_coroutine_threadsafe(listener.close(), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


@pytest.mark.parametrize("scheme", ["http://", "https://", "grpc://"])
def test_a_url_scheme_in_the_bootstrap_server_is_a_usage_error(scheme: str) -> None:
    code, document = topics_list(f"{scheme}127.0.0.1:9092")
    assert code == 2
    assert document["error"]["param"] == "--bootstrap-server"
    assert "give HOST:PORT" in document["error"]["message"] and scheme in document["error"]["message"]


def test_a_refused_connection_fails_at_once_and_says_so(free_port: int) -> None:
    code, document = topics_list(f"127.0.0.1:{free_port}")
    assert code == 1
    message = document["error"]["message"]
    assert f"127.0.0.1:{free_port}" in message and "connection refused" in message
    assert "TLS" not in message


def test_an_http_server_fails_at_once_and_says_so(http_server: str) -> None:
    code, document = topics_list(http_server)
    assert code == 1
    message = document["error"]["message"]
    assert http_server in message and "HTTP/1" in message and "not gRPC" in message
    assert "--tls" not in message


def test_a_kafka_listener_fails_at_once_and_says_so(kafka_listener: str) -> None:
    code, document = topics_list(kafka_listener)
    assert code == 1
    message = document["error"]["message"]
    assert kafka_listener in message and "Kafka listener" in message and "not gRPC" in message


def test_one_good_address_among_bad_ones_is_used(free_port: int, http_server: str) -> None:
    server = ServerThread()
    server.controller.responses["DescribeTopics"] = controller_pb2.DescribeTopicsResponse()
    try:
        code, document = topics_list(f"127.0.0.1:{free_port},{http_server},{server.address}")
        assert code == 0, document
        assert "DescribeTopics" in [method for method, _ in server.controller.requests]
    finally:
        server.stop()
