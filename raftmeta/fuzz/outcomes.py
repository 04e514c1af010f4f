"""What a fuzzed ControllerService call may answer, and the verdict on one answer.

A reply is acceptable when it is one of:

- **a success** whose every error code (top-level or per item) is a value of the ``ErrorCode``
  enum other than ``UNKNOWN_SERVER_ERROR``, with a non-empty message whenever it is not ``NONE``,
  and with one result per item asked about, in request order (a retry of a request id that
  already has an answer gets that answer instead, whatever it asks);
- **a defined gRPC status** with a non-empty message: ``INVALID_ARGUMENT`` (malformed request,
  limits on lengths), ``RESOURCE_EXHAUSTED`` (limits on sizes and counts, overload),
  ``FAILED_PRECONDITION``, ``NOT_FOUND``, ``ALREADY_EXISTS``, ``OUT_OF_RANGE``, or
  ``UNAVAILABLE`` carrying ``raftmeta-error-code: NOT_CONTROLLER`` (leadership moved).

Anything else is a failure: ``UNKNOWN`` and ``INTERNAL`` (an exception escaped a handler),
``UNAVAILABLE`` without NOT_CONTROLLER (the node went away), ``DEADLINE_EXCEEDED`` (the node did
not answer within the fuzz's generous deadline: one request must not be able to stall the
controller), and every other status.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf.message import Message

from raftmeta.api.rpc_errors import ERROR_CODE_KEY
from raftmeta.v1 import controller_pb2, errors_pb2

ALLOWED_STATUSES = frozenset(
    {
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.ALREADY_EXISTS,
        grpc.StatusCode.OUT_OF_RANGE,
    }
)
KNOWN_ERROR_CODES = frozenset(errors_pb2.ErrorCode.values()) - {errors_pb2.UNKNOWN_SERVER_ERROR}
NOT_CONTROLLER = "NOT_CONTROLLER"


@dataclass(frozen=True, slots=True)
class Reply:
    """One call's answer: a response, or a status with its details and error-code metadata."""

    status: grpc.StatusCode
    details: str = ""
    error_code: str = ""  # raftmeta-error-code trailing metadata, if any
    response: Message | None = None

    @classmethod
    def from_error(cls, error: grpc.RpcError) -> Reply:
        code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
        details = error.details() if hasattr(error, "details") else str(error)
        metadata: Any = error.trailing_metadata() if hasattr(error, "trailing_metadata") else None
        found = ""
        for key, value in metadata or ():
            if key == ERROR_CODE_KEY:
                found = value.decode() if isinstance(value, bytes) else str(value)
        return cls(code, details or "", found)


@dataclass(slots=True)
class Verdict:
    """The judgement of one reply: outcome labels to count, problems (empty = acceptable), and
    whether anything in it succeeded (a request id that never succeeded must not be in the log)."""

    labels: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    succeeded: bool = False
    indeterminate: bool = False  # the request may or may not have been applied


def _error_codes(message: Message, path: str = "") -> Iterator[tuple[str, int, str]]:
    """Every (path, error_code, error_message) in a response, at any depth."""
    descriptor = message.DESCRIPTOR
    if "error_code" in descriptor.fields_by_name:
        yield path or "response", getattr(message, "error_code"), getattr(message, "error_message", "")  # noqa: B009
    for f in descriptor.fields:
        if f.message_type is None or f.message_type.GetOptions().map_entry:
            continue
        if f.is_repeated:
            for i, item in enumerate(getattr(message, f.name)):
                yield from _error_codes(item, f"{path}.{f.name}[{i}]" if path else f"{f.name}[{i}]")
        elif message.HasField(f.name):
            yield from _error_codes(getattr(message, f.name), f"{path}.{f.name}" if path else f.name)


def _code_name(code: int) -> str:
    try:
        return errors_pb2.ErrorCode.Name(code)  # type: ignore[arg-type]
    except ValueError:
        return str(code)


def _shape_problems(method: str, request: Message, response: Message) -> list[str]:
    """One result per item asked about, in request order."""
    if isinstance(request, controller_pb2.CreateTopicsRequest):
        assert isinstance(response, controller_pb2.CreateTopicsResponse)
        asked = [t.name for t in request.topics]
        got = [t.name for t in response.topics]
        problems = [] if asked == got else [f"results for topics {got}, asked for {asked}"]
        for t, result in zip(request.topics, response.topics, strict=False):
            if result.error_code == errors_pb2.NONE and not request.validate_only and len(result.topic_id) != 16:
                problems.append(f"topic {t.name!r} created without a 16-byte topic id")
        return problems
    if isinstance(request, controller_pb2.CreatePartitionsRequest):
        assert isinstance(response, controller_pb2.CreatePartitionsResponse)
        asked = [t.name for t in request.topics]
        got = [r.name for r in response.results]
        return [] if asked == got else [f"results for topics {got}, asked for {asked}"]
    if isinstance(request, controller_pb2.DeleteTopicsRequest):
        assert isinstance(response, controller_pb2.DeleteTopicsResponse)
        expected = len(request.topic_names) + len(request.topic_ids)
        count = len(response.responses)
        return [] if count == expected else [f"{count} results for {expected} topics named or identified"]
    if isinstance(request, controller_pb2.ElectLeadersRequest) and request.topic_partitions:
        assert isinstance(response, controller_pb2.ElectLeadersResponse)
        asked_pairs = [(tp.topic, len(tp.partitions)) for tp in request.topic_partitions]
        got_pairs = [(r.topic, len(r.partitions)) for r in response.results]
        return [] if asked_pairs == got_pairs else [f"results {got_pairs} for the partitions asked {asked_pairs}"]
    if isinstance(request, controller_pb2.AlterPartitionReassignmentsRequest):
        assert isinstance(response, controller_pb2.AlterPartitionReassignmentsResponse)
        asked_pairs = [(t.name, len(t.partitions)) for t in request.topics]
        got_pairs = [(r.name, len(r.partitions)) for r in response.results]
        return [] if asked_pairs == got_pairs else [f"results {got_pairs} for the partitions asked {asked_pairs}"]
    if isinstance(request, controller_pb2.DescribeTopicsRequest) and request.topics:
        assert isinstance(response, controller_pb2.DescribeTopicsResponse)
        # Each topic named once, in name order, from the cursor's on; a page cut short ends at its
        # next cursor's topic.
        asked = sorted({name for name in request.topics if name >= request.cursor.topic_name})
        if response.HasField("next_cursor"):
            cut = response.next_cursor.topic_name
            asked = [name for name in asked if name < cut or (name == cut and response.next_cursor.partition_index)]
        got = [t.name for t in response.topics]
        partitions = sum(len(t.partitions) for t in response.topics)
        if request.exclude_partitions:
            # Names only: no partitions, and each topic found counts as one against the limit.
            listed = sum(1 for t in response.topics if t.error_code == errors_pb2.NONE)
            if partitions or (request.response_partition_limit and listed > request.response_partition_limit):
                return [f"{listed} topics and {partitions} partitions listed, limit {request.response_partition_limit}"]
        elif request.response_partition_limit and partitions > request.response_partition_limit:
            return [f"{partitions} partitions described, limit {request.response_partition_limit}"]
        return [] if asked == got else [f"descriptions of {got}, asked for {asked}"]
    if isinstance(request, controller_pb2.DescribeQuorumRequest):
        assert isinstance(response, controller_pb2.DescribeQuorumResponse)
        return [] if response.leader_id >= 0 else ["DescribeQuorum answered by a quorum without a leader"]
    del method
    return []


def judge(method: str, request: Message, reply: Reply, *, request_id_reused: bool = False) -> Verdict:
    """The verdict on ``reply`` to ``request``. ``request_id_reused``: the request carries an id
    sent before, so the answer may be the earlier request's (idempotent retry)."""
    verdict = Verdict()
    if reply.status != grpc.StatusCode.OK:
        name = reply.status.name
        label = f"status:{name}" + (f"/{reply.error_code}" if reply.error_code else "")
        verdict.labels.append(label)
        if reply.status == grpc.StatusCode.UNAVAILABLE and reply.error_code == NOT_CONTROLLER:
            verdict.indeterminate = True
        elif reply.status not in ALLOWED_STATUSES:
            verdict.indeterminate = True
            verdict.problems.append(f"gRPC status {name} is not a defined answer: {reply.details!r}")
        if not reply.details.strip():
            verdict.problems.append(f"gRPC status {name} without a message")
        return verdict
    response = reply.response
    if response is None:
        verdict.problems.append("OK without a response message")
        return verdict
    verdict.labels.append("status:OK")
    codes = list(_error_codes(response))
    for path, code, message in codes:
        name = _code_name(code)
        verdict.labels.append(f"code:{name}")
        if code not in KNOWN_ERROR_CODES:
            verdict.problems.append(f"{path}.error_code {name} is not a defined error code")
        elif code != errors_pb2.NONE and not message.strip():
            verdict.problems.append(f"{path}.error_code {name} without an error_message")
        if code == errors_pb2.NONE:
            verdict.succeeded = True
    if not codes:
        verdict.succeeded = True
    if not request_id_reused:
        verdict.problems.extend(_shape_problems(method, request, response))
    return verdict


__all__ = ["ALLOWED_STATUSES", "KNOWN_ERROR_CODES", "Reply", "Verdict", "judge"]
