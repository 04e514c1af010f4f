"""Envelope (58): a client's request a Kafka broker forwards to its controller (Kafka's
ForwardingManager): admin requests sent to a broker (CreateTopics, DeleteTopics, configs...),
and the CreateTopics of auto-creation (``__consumer_offsets`` when a group first needs its
coordinator, a topic a producer names when ``auto.create.topics.enable``).

The envelope holds the client's request frame (header and body, no size prefix), its principal
and its address. The forwarded request is decoded and answered by this listener's own handler for
its api key -- one answer whichever door it came in by -- and its response frame (header and body,
correlated to the client's request) goes back in ``response_data``. As KRaft's EnvelopeUtils:
an api that is not forwardable, or a forwarded request that does not decode, is INVALID_REQUEST on
the envelope with no response data. The principal and the client's address are not checked:
raftmeta's listener authenticates no one (docs/security.md).
"""

from __future__ import annotations

from typing import Any, Final

from kio.schema.errors import ErrorCode

from raftmeta.kafka.context import ApiContext
from raftmeta.kafka.framing import FrameError, Request, UnsupportedVersion, decode_request

# The apis a broker forwards that this listener serves (Kafka's ApiKeys marked forwardable).
FORWARDABLE: Final = frozenset({19, 20, 33, 37, 43, 44, 45})
SIZE_PREFIX_BYTES: Final = 4


def _refused() -> dict[str, Any]:
    return {"response_data": None, "error_code": ErrorCode.invalid_request}


async def envelope(ctx: ApiContext, request: Request) -> dict[str, Any]:
    from raftmeta.kafka.dispatch import handle  # dispatch lists this handler: import when called

    try:
        forwarded = decode_request(bytes(request.body.request_data))
    except (FrameError, UnsupportedVersion):
        return _refused()
    if forwarded.api_key not in FORWARDABLE:
        return _refused()
    frame = await handle(ctx, forwarded)
    return {"response_data": frame[SIZE_PREFIX_BYTES:], "error_code": ErrorCode.none}
