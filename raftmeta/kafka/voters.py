"""KIP-853's AddRaftVoter and RemoveRaftVoter on the Kafka listener, so Kafka's own
``kafka-metadata-quorum.sh add-controller / remove-controller`` (or a Java Admin's addRaftVoter)
can change a raftmeta quorum's voters. They go to the leader like the gRPC calls and answer with
the same codes (REQUEST_TIMED_OUT: not now, retry; DUPLICATE_VOTER; VOTER_NOT_FOUND)."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from raftmeta.kafka.context import ApiContext, CallRefused, call
from raftmeta.kafka.framing import Request
from raftmeta.v1 import controller_pb2, errors_pb2


def _directory_id(value: uuid.UUID | None) -> bytes:
    """Kafka's Uuid; the zero uuid (and null) means "not given"."""
    return b"" if value is None or value.int == 0 else value.bytes


def _answer(response: Any) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": response.error_code, "error_message": response.error_message or None}


def _timeout_s(body: Any, ctx: ApiContext) -> float:
    """The request's TimeoutMs (kio gives a timedelta); the listener's default when not positive."""
    timeout = getattr(body, "timeout", None)
    seconds = timeout.total_seconds() if isinstance(timeout, datetime.timedelta) else 0.0
    return seconds if seconds > 0 else ctx.default_timeout_s


def _refused(refusal: CallRefused) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": refusal.error_code, "error_message": refusal.message}


def _wrong_cluster(ctx: ApiContext, body: Any) -> dict[str, Any] | None:
    cluster_id = getattr(body, "cluster_id", None)
    if cluster_id and cluster_id != ctx.cluster_id:
        return {
            "throttle_time": 0,
            "error_code": errors_pb2.INCONSISTENT_CLUSTER_ID,
            "error_message": f"cluster id {cluster_id!r} is not this quorum's ({ctx.cluster_id!r})",
        }
    return None


async def add_raft_voter(ctx: ApiContext, request: Request) -> dict[str, Any]:
    body = request.body
    wrong = _wrong_cluster(ctx, body)
    if wrong is not None:
        return wrong
    add = controller_pb2.AddRaftVoterRequest(
        voter_id=int(body.voter_id),
        voter_directory_id=_directory_id(body.voter_directory_id),
        listeners=[
            controller_pb2.RaftVoterListener(name=listener.name, host=listener.host, port=int(listener.port))
            for listener in body.listeners or ()
        ],
    )
    try:
        return _answer(await call(ctx, "AddRaftVoter", add, _timeout_s(body, ctx)))
    except CallRefused as refusal:
        return _refused(refusal)


async def remove_raft_voter(ctx: ApiContext, request: Request) -> dict[str, Any]:
    body = request.body
    wrong = _wrong_cluster(ctx, body)
    if wrong is not None:
        return wrong
    remove = controller_pb2.RemoveRaftVoterRequest(
        voter_id=int(body.voter_id), voter_directory_id=_directory_id(body.voter_directory_id)
    )
    try:
        return _answer(await call(ctx, "RemoveRaftVoter", remove))
    except CallRefused as refusal:
        return _refused(refusal)
