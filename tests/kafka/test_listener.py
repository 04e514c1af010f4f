"""The listener over real sockets: answers in request order, the in-flight limit, and hostile
frames (oversized, truncated, garbage, unknown api key or version) closing the connection while the
listener keeps serving and nothing reaches the controller."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import pytest_asyncio
from kio.schema.errors import ErrorCode

from raftmeta.kafka.listener import KafkaListener
from raftmeta.v1 import controller_pb2
from tests.kafka.fakes import full_admin
from tests.kafka.helpers import FakeAdmin, context, decode_response, framed, request_bytes
from tests.kafka.samples import REQUESTS

pytestmark = pytest.mark.timeout(30)


class Client:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    async def send(self, payload: bytes) -> None:
        self.writer.write(payload)
        await self.writer.drain()

    async def answer(self, api_key: int, version: int) -> tuple[int, Any]:
        size = await self.reader.readexactly(4)
        frame = size + await self.reader.readexactly(int.from_bytes(size, "big"))
        return decode_response(frame, api_key, version)

    async def closed_by_server(self) -> bool:
        """True once the server has closed the connection (reads to the end of the stream)."""
        return await self.reader.read() == b""

    async def close(self) -> None:
        self.writer.close()
        await self.writer.wait_closed()


@pytest_asyncio.fixture
async def served() -> AsyncIterator[tuple[KafkaListener, FakeAdmin]]:
    admin = full_admin()
    listener = KafkaListener(context(admin), "127.0.0.1:0", frame_bytes_max=4096, in_flight_max=2)
    await listener.start()
    try:
        yield listener, admin
    finally:
        await listener.close()


async def connect(listener: KafkaListener) -> Client:
    host, port = listener.sockets[0].getsockname()[:2]
    return Client(*await asyncio.open_connection(host, port))


async def assert_still_serving(listener: KafkaListener) -> None:
    client = await connect(listener)
    await client.send(framed(request_bytes(18, 3, REQUESTS[18], correlation_id=1234)))
    correlation_id, response = await client.answer(18, 3)
    assert (correlation_id, response.error_code) == (1234, ErrorCode.none)
    await client.close()


@pytest.mark.asyncio
async def test_api_versions_then_metadata_on_one_connection(served: tuple[KafkaListener, FakeAdmin]) -> None:
    listener, admin = served
    client = await connect(listener)
    await client.send(framed(request_bytes(18, 3, REQUESTS[18], correlation_id=1)))
    assert (await client.answer(18, 3))[0] == 1
    await client.send(framed(request_bytes(3, 12, {**REQUESTS[3], "topics": None}, correlation_id=2)))
    correlation_id, metadata = await client.answer(3, 12)
    assert correlation_id == 2 and [t.name for t in metadata.topics] == ["orders"]
    assert admin.methods() == ["DescribeCluster", "DescribeTopics"]
    await client.close()


@pytest.mark.asyncio
async def test_answers_come_in_request_order_even_when_the_first_is_slower(
    served: tuple[KafkaListener, FakeAdmin],
) -> None:
    listener, admin = served
    release = asyncio.Event()
    create = admin.answers["CreateTopics"]

    async def slow_create(request: Any) -> Any:
        await release.wait()
        return create(request)

    admin.answers["CreateTopics"] = slow_create
    describe = admin.answers["DescribeTopics"]
    described = asyncio.Event()

    def describe_and_note(request: Any) -> Any:
        described.set()
        return describe(request)

    admin.answers["DescribeTopics"] = describe_and_note
    client = await connect(listener)
    await client.send(framed(request_bytes(19, 7, REQUESTS[19], correlation_id=1)))
    await client.send(framed(request_bytes(3, 12, {**REQUESTS[3], "topics": None}, correlation_id=2)))
    await described.wait()  # the second request started while the first waits: it is not held back
    assert admin.methods() == ["CreateTopics", "DescribeCluster", "DescribeTopics"]
    release.set()
    assert (await client.answer(19, 7))[0] == 1
    assert (await client.answer(3, 12))[0] == 2
    await client.close()


@pytest.mark.asyncio
async def test_a_connection_has_at_most_in_flight_max_requests_started(
    served: tuple[KafkaListener, FakeAdmin],
) -> None:
    listener, admin = served  # in_flight_max=2
    release = asyncio.Event()
    create = admin.answers["CreateTopics"]

    two_started = asyncio.Event()

    async def blocked(request: Any) -> Any:
        if len(admin.calls) == 2:
            two_started.set()
        await release.wait()
        return create(request)

    admin.answers["CreateTopics"] = blocked
    client = await connect(listener)
    await client.send(b"".join(framed(request_bytes(19, 7, REQUESTS[19], correlation_id=i)) for i in range(3)))
    await two_started.wait()
    for _ in range(100):  # let the loop run: the third request must stay unread
        await asyncio.sleep(0)
    assert len(admin.calls) == 2
    release.set()
    assert [(await client.answer(19, 7))[0] for _ in range(3)] == [0, 1, 2]
    assert len(admin.calls) == 3
    await client.close()


@pytest.mark.asyncio
async def test_unknown_api_versions_version_is_answered_and_the_connection_stays(
    served: tuple[KafkaListener, FakeAdmin],
) -> None:
    listener, _ = served
    client = await connect(listener)
    frame = request_bytes(18, 3, REQUESTS[18], correlation_id=3)
    await client.send(framed(frame[:2] + (77).to_bytes(2, "big") + frame[4:]))
    correlation_id, response = await client.answer(18, 0)
    assert (correlation_id, response.error_code) == (3, ErrorCode.unsupported_version)
    await client.send(framed(request_bytes(18, 3, REQUESTS[18], correlation_id=4)))
    assert (await client.answer(18, 3))[0] == 4
    await client.close()


def _with_key_and_version(frame: bytes, api_key: int, version: int) -> bytes:
    return api_key.to_bytes(2, "big") + version.to_bytes(2, "big") + frame[4:]


HOSTILE: dict[str, bytes] = {
    "oversized": (10_000).to_bytes(4, "big") + b"\0" * 64,
    "negative size": (-5).to_bytes(4, "big", signed=True),
    "smaller than a header": framed(b"\0\x03\0"),
    "unknown api key (Produce)": framed(_with_key_and_version(request_bytes(19, 7, REQUESTS[19]), 0, 9)),
    "unknown version": framed(_with_key_and_version(request_bytes(19, 7, REQUESTS[19]), 19, 42)),
    "api key out of range": framed(_with_key_and_version(request_bytes(19, 7, REQUESTS[19]), 32000, 0)),
    "garbage body": framed(request_bytes(19, 7, REQUESTS[19])[:14] + b"\xff" * 40),
    "garbage tagged fields": framed(request_bytes(19, 7, REQUESTS[19])[:-1] + b"\x05\xff\xff\xff\xff\x0f"),
    "truncated body": framed(request_bytes(19, 7, REQUESTS[19])[:20]),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
@pytest.mark.asyncio
async def test_hostile_frame_closes_the_connection_and_reaches_nothing(
    served: tuple[KafkaListener, FakeAdmin], name: str
) -> None:
    listener, admin = served
    client = await connect(listener)
    await client.send(HOSTILE[name])
    assert await client.closed_by_server()
    await client.close()
    assert admin.calls == []
    await assert_still_serving(listener)


@pytest.mark.asyncio
async def test_answers_already_due_are_sent_before_a_hostile_frame_closes(
    served: tuple[KafkaListener, FakeAdmin],
) -> None:
    listener, _ = served
    client = await connect(listener)
    await client.send(framed(request_bytes(18, 3, REQUESTS[18], correlation_id=8)) + HOSTILE["garbage body"])
    assert (await client.answer(18, 3))[0] == 8
    assert await client.closed_by_server()
    await client.close()


@pytest.mark.asyncio
async def test_a_frame_cut_off_by_the_client_leaves_the_listener_serving(
    served: tuple[KafkaListener, FakeAdmin],
) -> None:
    listener, admin = served
    client = await connect(listener)
    await client.send((500).to_bytes(4, "big") + b"\0" * 10)
    await client.close()
    await assert_still_serving(listener)
    assert admin.calls == []


@pytest.mark.asyncio
async def test_a_failing_handler_closes_only_that_connection(served: tuple[KafkaListener, FakeAdmin]) -> None:
    listener, admin = served

    def broken(request: Any) -> Any:
        raise RuntimeError("bug")

    admin.answers["DescribeTopics"] = broken
    client = await connect(listener)
    await client.send(framed(request_bytes(3, 12, REQUESTS[3])))
    assert await client.closed_by_server()
    await client.close()
    await assert_still_serving(listener)


@pytest.mark.asyncio
async def test_close_ends_open_connections(served: tuple[KafkaListener, FakeAdmin]) -> None:
    listener, _ = served
    client = await connect(listener)
    await client.send(framed(request_bytes(18, 3, REQUESTS[18])))
    await client.answer(18, 3)
    await listener.close()
    assert await client.closed_by_server()
    await client.close()


def test_grpc_requests_sent_are_real_protobufs() -> None:
    # The fakes answer with the controller's own types; a typo in a field name fails here first.
    admin = full_admin()
    assert isinstance(admin.answers["DescribeTopics"](controller_pb2.DescribeTopicsRequest()),
                      controller_pb2.DescribeTopicsResponse)  # fmt: skip


@pytest.mark.asyncio
async def test_an_idle_connection_is_closed() -> None:
    listener = KafkaListener(context(full_admin()), "127.0.0.1:0", idle_timeout_s=0.2)
    await listener.start()
    try:
        client = await connect(listener)
        await client.send(framed(request_bytes(18, 3, REQUESTS[18])))
        await client.answer(18, 3)
        assert await client.closed_by_server()  # nothing more sent: the listener hangs up
        await client.close()
    finally:
        await listener.close()


@pytest.mark.asyncio
async def test_connections_past_the_limit_are_closed_at_once() -> None:
    listener = KafkaListener(context(full_admin()), "127.0.0.1:0", connections_max=1)
    await listener.start()
    try:
        first = await connect(listener)
        await first.send(framed(request_bytes(18, 3, REQUESTS[18], correlation_id=1)))
        assert (await first.answer(18, 3))[0] == 1  # served: it holds the only place
        second = await connect(listener)
        assert await second.closed_by_server()
        await second.close()
        await first.send(framed(request_bytes(18, 3, REQUESTS[18], correlation_id=2)))
        assert (await first.answer(18, 3))[0] == 2
        await first.close()
    finally:
        await listener.close()


async def until(condition: Callable[[], bool]) -> None:
    """Let the listener run until ``condition`` holds (the test's timeout bounds the wait)."""
    for _ in itertools.count():
        if condition():
            return
        await asyncio.sleep(0.01)


@pytest.mark.asyncio
async def test_a_frame_not_received_within_the_frame_timeout_closes_the_connection() -> None:
    # A client that sends a size and then trickles (here: stops) cannot keep its budget share:
    # the listener's own frame timeout closes the connection and the bytes go back.
    listener = KafkaListener(context(full_admin()), "127.0.0.1:0", frame_bytes_max=4096, frame_timeout_s=0.2)
    await listener.start()
    try:
        client = await connect(listener)
        await client.send((1000).to_bytes(4, "big") + b"\0" * 10)
        assert await client.closed_by_server()
        await client.close()
        await until(lambda: listener.budget.available_bytes == listener.budget.total_bytes)
        await assert_still_serving(listener)
    finally:
        await listener.close()


@pytest.mark.asyncio
async def test_connections_wait_without_reading_while_the_request_bytes_budget_is_spent() -> None:
    admin = full_admin()
    listener = KafkaListener(context(admin), "127.0.0.1:0", frame_bytes_max=4096, queued_request_bytes_max=4096)
    await listener.start()
    try:
        holder = await connect(listener)
        await holder.send((4096).to_bytes(4, "big") + b"\0" * 100)  # takes the whole budget
        await until(lambda: listener.budget.available_bytes <= 0)
        waiter = await connect(listener)
        await waiter.send(framed(request_bytes(3, 12, {**REQUESTS[3], "topics": None}, correlation_id=9)))
        await until(lambda: listener.budget.waiting == 1)
        assert admin.calls == []  # its request was not read
        await holder.close()  # the holder's bytes go back: the waiter's request is read and answered
        assert (await waiter.answer(3, 12))[0] == 9
        await waiter.close()
        await until(lambda: listener.budget.available_bytes == listener.budget.total_bytes)
    finally:
        await listener.close()


def test_the_budget_must_hold_the_largest_frame() -> None:
    with pytest.raises(ValueError, match="at least the largest frame"):
        KafkaListener(context(full_admin()), "127.0.0.1:0", frame_bytes_max=4096, queued_request_bytes_max=4095)
