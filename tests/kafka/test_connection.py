"""The benchmarks' Kafka client connection (raftmeta/kafka/connection.py) and its calls
(raftmeta/bench/kafka_ops.py), against the listener over a real socket: requests pipelined from
several tasks on one connection, each answered by correlation id; an error answer raised with
Kafka's code; a broken connection failing what is in flight."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from raftmeta.bench.kafka_ops import KafkaError, create_topic, describe_quorum
from raftmeta.kafka.connection import KafkaConnection
from raftmeta.kafka.listener import KafkaListener
from raftmeta.v1 import controller_pb2, errors_pb2
from tests.kafka.fakes import full_admin
from tests.kafka.helpers import FakeAdmin, context

pytestmark = pytest.mark.timeout(30)


@pytest_asyncio.fixture
async def served() -> AsyncIterator[tuple[str, FakeAdmin]]:
    admin = full_admin()
    listener = KafkaListener(context(admin), "127.0.0.1:0")
    await listener.start()
    host, port = listener.sockets[0].getsockname()[:2]
    try:
        yield f"{host}:{port}", admin
    finally:
        await listener.close()


@pytest.mark.asyncio
async def test_creates_from_several_tasks_share_one_connection(served: tuple[str, FakeAdmin]) -> None:
    address, admin = served
    release = asyncio.Event()
    all_arrived = asyncio.Event()
    create = admin.answers["CreateTopics"]

    async def held(request: Any) -> Any:
        if len(admin.calls) == 4:
            all_arrived.set()
        await release.wait()  # every create is in flight at once before any is answered
        return create(request)

    admin.answers["CreateTopics"] = held
    connection = await KafkaConnection.open(address, "tests", 5)
    try:
        tasks = [asyncio.create_task(create_topic(connection, f"t{i}", 3, 2, 10)) for i in range(4)]
        await all_arrived.wait()
        release.set()
        await asyncio.gather(*tasks)
        assert sorted(admin.sent(i).topics[0].name for i in range(4)) == ["t0", "t1", "t2", "t3"]
        assert {admin.sent(i).topics[0].num_partitions for i in range(4)} == {3}
        state = await describe_quorum(connection, 5)
        assert (state.leader_id, state.leader_epoch, state.high_watermark) == (2, 4, 100)
        assert state.log_end_offsets == {1: 100, 2: 100, 3: 90}
        assert state.caught_up(1) and not state.caught_up(3) and not state.caught_up(9)
    finally:
        await connection.close()


@pytest.mark.asyncio
async def test_a_refused_create_raises_kafkas_error_code(served: tuple[str, FakeAdmin]) -> None:
    address, admin = served
    admin.answers["CreateTopics"] = lambda r: controller_pb2.CreateTopicsResponse(
        topics=[
            controller_pb2.CreatableTopicResult(
                name=r.topics[0].name, error_code=errors_pb2.TOPIC_ALREADY_EXISTS, error_message="exists"
            )
        ]
    )
    connection = await KafkaConnection.open(address, "tests", 5)
    try:
        with pytest.raises(KafkaError, match="exists") as refused:
            await create_topic(connection, "orders", 1, 1, 10)
        assert refused.value.code == 36  # Kafka's TOPIC_ALREADY_EXISTS
        assert not connection.broken  # an error answer leaves the connection usable
        await describe_quorum(connection, 5)
    finally:
        await connection.close()


@pytest.mark.asyncio
async def test_an_unanswered_call_times_out_and_breaks_the_connection(served: tuple[str, FakeAdmin]) -> None:
    address, admin = served
    never = asyncio.Event()

    async def hang(request: Any) -> Any:
        await never.wait()

    admin.answers["CreateTopics"] = hang
    connection = await KafkaConnection.open(address, "tests", 5)
    try:
        with pytest.raises(TimeoutError):
            await create_topic(connection, "orders", 1, 1, 0.2)
        assert connection.broken
        # A late answer would be read as another request's: nothing more is sent on it.
        with pytest.raises(ConnectionError, match="broken"):
            await describe_quorum(connection, 5)
    finally:
        never.set()
        await connection.close()


@pytest.mark.asyncio
async def test_a_closed_server_fails_the_calls_in_flight() -> None:
    async def close_at_once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readexactly(4)  # a request started arriving: go away without answering
        writer.close()

    server = await asyncio.start_server(close_at_once, "127.0.0.1", 0)
    host, port = server.sockets[0].getsockname()[:2]
    connection = await KafkaConnection.open(f"{host}:{port}", "tests", 5)
    try:
        with pytest.raises(ConnectionError):
            await describe_quorum(connection, 5)
        assert connection.broken
    finally:
        await connection.close()
        server.close()
        await server.wait_closed()
