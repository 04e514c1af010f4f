"""Encode Kafka requests and decode responses the way a client does (with kio), and a fake admin
path that records what the handlers send to the controller."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import Message
from kio.index import load_response_schema
from kio.serial import entity_reader

from raftmeta.fuzz.kafka import request_frame
from raftmeta.kafka.context import ApiContext, KafkaNode
from raftmeta.kafka.framing import SIZE_BYTES
from raftmeta.v1 import errors_pb2, raft_pb2

CLUSTER_ID = "test-cluster-id-000000"
NODES = (KafkaNode(1, "127.0.0.1", 9101), KafkaNode(2, "127.0.0.1", 9102), KafkaNode(3, "127.0.0.1", 9103))


def request_bytes(api_key: int, version: int, values: Mapping[str, Any], correlation_id: int = 7) -> bytes:
    """A request frame without its size prefix: header (the version's) + body built from ``values``."""
    return request_frame(api_key, version, dict(values), correlation_id)


def framed(payload: bytes) -> bytes:
    return len(payload).to_bytes(SIZE_BYTES, "big") + payload


def decode_response(frame: bytes, api_key: int, version: int) -> tuple[int, Any]:
    """A size-prefixed response frame → (correlation id, kio response entity); checks the size."""
    size = int.from_bytes(frame[:SIZE_BYTES], "big")
    assert size == len(frame) - SIZE_BYTES
    response_type = load_response_schema(api_key, version)
    header, header_size = entity_reader(response_type.__header_schema__)(frame, SIZE_BYTES)
    body, body_size = entity_reader(response_type)(frame, SIZE_BYTES + header_size)
    assert SIZE_BYTES + header_size + body_size == len(frame)
    return int(header.correlation_id), body


Answer = Callable[[Any], Any]


@dataclass
class FakeAdmin:
    """The admin path: answers each method with ``answers[method](request)`` (awaited if it is
    awaitable) and records the calls. An answer that is an exception is raised (as the real path
    raises AdminCallError)."""

    answers: dict[str, Answer] = field(default_factory=dict)
    calls: list[tuple[str, Message]] = field(default_factory=list)
    request_ids: list[str] = field(default_factory=list)

    async def call(self, method: str, request: Message, *, timeout_s: float, forwarded: bool = False) -> Any:
        assert timeout_s > 0 and not forwarded
        recorded = type(request)()
        recorded.CopyFrom(request)
        if "request_id" in request.DESCRIPTOR.fields_by_name:
            # Kept apart, so tests compare the requests themselves; each attempt's id is listed.
            self.request_ids.append(recorded.request_id)  # type: ignore[attr-defined]
            recorded.ClearField("request_id")
        self.calls.append((method, recorded))
        answer = self.answers[method](request)
        if inspect.isawaitable(answer):
            answer = await answer
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def sent(self, index: int) -> Any:
        """The controller request of call ``index`` (typed Any: tests read its fields)."""
        return self.calls[index][1]

    def methods(self) -> list[str]:
        return [method for method, _ in self.calls]


class FakeRaft:
    """The node's raft inbox: records each request and answers it with ``answer``, raised when
    it is an exception, or with what ``snapshot`` answers for a FetchSnapshot (by default node 2
    leads epoch 3, with nothing to fetch and no snapshot)."""

    def __init__(
        self,
        answer: Message | BaseException | None = None,
        snapshot: Callable[[raft_pb2.FetchSnapshotRequest], raft_pb2.FetchSnapshotResponse] | None = None,
    ) -> None:
        self.answer = answer if answer is not None else raft_pb2.FetchResponse(leader_id=2, leader_epoch=3)
        self.snapshot = snapshot or (
            lambda r: raft_pb2.FetchSnapshotResponse(
                error_code=errors_pb2.SNAPSHOT_NOT_FOUND, leader_id=2, leader_epoch=3
            )
        )
        self.sent: list[tuple[int, Any]] = []

    def voter_ids(self) -> frozenset[int]:
        return frozenset({1, 2, 3})  # the nodes of NODES

    def leader_and_log_start(self) -> tuple[int, int, int]:
        return 2, 3, 10

    async def submit_raft(self, source: int, message: Any) -> Any:
        self.sent.append((source, message))
        if isinstance(message, raft_pb2.FetchSnapshotRequest):
            return self.snapshot(message)
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer


def context(admin: FakeAdmin, node_id: int = 2, raft: FakeRaft | None = None) -> ApiContext:
    # A short default wait: calls without a Kafka timeout retry a missing leader only this long.
    return ApiContext(
        admin=admin,
        node_id=node_id,
        cluster_id=CLUSTER_ID,
        nodes=NODES,
        default_timeout_s=0.2,
        raft=FakeRaft() if raft is None else raft,
    )
