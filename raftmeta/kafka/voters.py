"""KIP-853's AddRaftVoter and RemoveRaftVoter on the Kafka listener, so Kafka's own
``kafka-metadata-quorum.sh add-controller / remove-controller`` (or a Java Admin's addRaftVoter)
can change a raftmeta quorum's voters. They go to the leader like the gRPC calls and answer with
the same codes (REQUEST_TIMED_OUT: not now, retry; DUPLICATE_VOTER; VOTER_NOT_FOUND)."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from google.protobuf.message import Message

from raftmeta.kafka.context import ApiContext, CallRefused, call
from raftmeta.kafka.framing import Request
from raftmeta.v1 import controller_pb2, errors_pb2


def _directory_id(value: uuid.UUID | None) -> bytes:
    """Kafka's Uuid; the zero uuid (and null) means "not given"."""
    return b"" if value is None or value.int == 0 else value.bytes


def _timeout_s(body: Any, ctx: ApiContext) -> float:
    """The request's TimeoutMs (kio gives a timedelta); the listener's default when not positive."""
    timeout = getattr(body, "timeout", None)
    seconds = timeout.total_seconds() if isinstance(timeout, datetime.timedelta) else 0.0
    return seconds if seconds > 0 else ctx.default_timeout_s


def _answer(error_code: int, message: str | None) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": error_code, "error_message": message or None}


async def _change(ctx: ApiContext, body: Any, method: str, change: Message, timeout_s: float | None) -> dict[str, Any]:
    """One voter change through the node's admin path, for this quorum's cluster id only."""
    cluster_id = getattr(body, "cluster_id", None)
    if cluster_id and cluster_id != ctx.cluster_id:
        return _answer(
            errors_pb2.INCONSISTENT_CLUSTER_ID, f"cluster id {cluster_id!r} is not this quorum's ({ctx.cluster_id!r})"
        )
    try:
        response = await call(ctx, method, change, timeout_s)
    except CallRefused as refusal:
        return _answer(refusal.error_code, refusal.message)
    return _answer(response.error_code, response.error_message)


async def add_raft_voter(ctx: ApiContext, request: Request) -> dict[str, Any]:
    body = request.body
    add = controller_pb2.AddRaftVoterRequest(
        voter_id=int(body.voter_id),
        voter_directory_id=_directory_id(body.voter_directory_id),
        listeners=[
            controller_pb2.RaftVoterListener(name=listener.name, host=listener.host, port=int(listener.port))
            for listener in body.listeners or ()
        ],
    )
    return await _change(ctx, body, "AddRaftVoter", add, _timeout_s(body, ctx))


async def remove_raft_voter(ctx: ApiContext, request: Request) -> dict[str, Any]:
    body = request.body
    remove = controller_pb2.RemoveRaftVoterRequest(
        voter_id=int(body.voter_id), voter_directory_id=_directory_id(body.voter_directory_id)
    )
    return await _change(ctx, body, "RemoveRaftVoter", remove, None)
