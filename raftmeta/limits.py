"""Every limit a client or peer can run into, in one place, each with its unit.

Hitting a limit is a defined error that names the limit (TigerBeetle style): gRPC
RESOURCE_EXHAUSTED or INVALID_ARGUMENT, never unbounded memory or a silent truncation.
"""

from __future__ import annotations

from typing import Final

# gRPC message size, both directions, client and server (a FetchResponse carries at most
# FETCH_BYTES_MAX of records plus small fields).
GRPC_MESSAGE_BYTES_MAX: Final = 16 * 1024 * 1024
# Request ids make mutating requests idempotent; bounded so the request-id table stays small.
REQUEST_ID_CHARS_MAX: Final = 64


def grpc_channel_options() -> list[tuple[str, int]]:
    """Options for every channel and server: message size limits and keepalive."""
    return [
        ("grpc.max_send_message_length", GRPC_MESSAGE_BYTES_MAX),
        ("grpc.max_receive_message_length", GRPC_MESSAGE_BYTES_MAX),
        # Detect a dead peer (SIGSTOP'd node, cut link) without waiting for TCP timeouts.
        ("grpc.keepalive_time_ms", 10_000),
        ("grpc.keepalive_timeout_ms", 5_000),
        ("grpc.keepalive_permit_without_calls", 1),
    ]
