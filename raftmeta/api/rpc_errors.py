"""How request-level errors travel between server and client.

A node that cannot serve a ControllerService call (no leader known within the deadline)
aborts it with gRPC status UNAVAILABLE and trailing metadata naming the Kafka error code and
the leader it knows of, so a client can retry elsewhere and a human reading the status sees why.

The same metadata tells apart the two meanings of RESOURCE_EXHAUSTED: THROTTLING_QUOTA_EXCEEDED is
a busy node (retry later), POLICY_VIOLATION a request over a limit of ``raftmeta.api.limits`` (retrying
the same request cannot help). A request the controller refuses as a whole (INVALID_ARGUMENT)
carries INVALID_REQUEST. A refused RaftService call carries the reason the same way
(INCONSISTENT_CLUSTER_ID, INCONSISTENT_VOTER_SET, INVALID_REQUEST, CLUSTER_AUTHORIZATION_FAILED).

Whether a failed call may have changed metadata is decided in one place, :func:`may_have_applied`:
the gRPC client (an OUTCOME_UNKNOWN instead of a failure) and the Kafka listener (REQUEST_TIMED_OUT,
as Kafka's forwarding answers, instead of a code that says nothing was written) both ask it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import grpc

ERROR_CODE_KEY = "raftmeta-error-code"
LEADER_ID_KEY = "raftmeta-leader-id"
# Kafka's error 31: the caller's certificate is not the node it claims to be. Only ever a gRPC
# status with this metadata, never a per-item answer, so it is not in errors.proto.
CLUSTER_AUTHORIZATION_FAILED = "CLUSTER_AUTHORIZATION_FAILED"
# RESOURCE_EXHAUSTED: the node is busy (retryable) or the request is over a limit (not retryable).
THROTTLING_QUOTA_EXCEEDED = "THROTTLING_QUOTA_EXCEEDED"
POLICY_VIOLATION = "POLICY_VIOLATION"
# INVALID_ARGUMENT: the request itself is wrong (a value too long, an id reused for other work).
INVALID_REQUEST = "INVALID_REQUEST"


@dataclass(frozen=True, slots=True)
class ErrorDetails:
    """What the trailing metadata of a failed call says (empty strings / -1 when absent)."""

    error_code: str = ""
    leader_id: int = -1


def error_metadata(error_code: str, leader_id: int = -1) -> tuple[tuple[str, str], ...]:
    """Trailing metadata for a failed call."""
    return ((ERROR_CODE_KEY, error_code), (LEADER_ID_KEY, str(leader_id)))


def parse_error_metadata(metadata: Iterable[tuple[str, str | bytes]] | None) -> ErrorDetails:
    """Read :func:`error_metadata` back; tolerant of missing or foreign keys."""
    code = ""
    leader = -1
    for key, value in metadata or ():
        text = value.decode() if isinstance(value, bytes) else value
        if key == ERROR_CODE_KEY:
            code = text
        elif key == LEADER_ID_KEY:
            try:
                leader = int(text)
            except ValueError:
                leader = -1
    return ErrorDetails(code, leader)


# What gRPC says when a call never left this process: the address did not resolve or the TCP
# connection failed (wait_for_ready is off, so a call does not wait for a connection).
_NOT_SENT = (
    "failed to connect",
    "connection refused",
    "dns resolution failed",
    "name resolution",
    "errors resolving",
    "lookup failed",
)
# Statuses a server gives no definite answer with when it dies mid-call: CANCELLED (the process
# exited with the call open), UNKNOWN (a handler raised), INTERNAL (a broken stream or response).
# The controller's own definite failures carry an error code in the trailing metadata.
_DYING_SERVER = frozenset({grpc.StatusCode.CANCELLED, grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN})


def may_have_applied(code: grpc.StatusCode, details: str, error_code: str = "") -> bool:
    """Whether a failed call may have reached the quorum, so that a write may have been applied.

    A deadline, a dropped stream (UNAVAILABLE other than a connection never made) and a server
    that died with the call open (CANCELLED, INTERNAL, UNKNOWN without an error code) may have; a
    refused connection, an unresolved name and every answer the controller gave with a definite
    status (INVALID_ARGUMENT, RESOURCE_EXHAUSTED, or an error code in the metadata) cannot."""
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return True
    if code == grpc.StatusCode.UNAVAILABLE:
        text = details.lower()
        return not any(marker in text for marker in _NOT_SENT)
    return code in _DYING_SERVER and not error_code
