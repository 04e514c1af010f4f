"""What binds a request id to one request: the digest a retry must match.

A client reuses a request id only to retry the same request (after a timeout or a failover), and
then deserves the original answer. The same id on a *different* request is a client bug -- a
copied id, a counter that wrapped -- and answering it with the first request's outcome would
report success for work that was never done. So the RequestRecord keeps a digest of the request
it answered, and a request whose digest differs is refused (INVALID_REQUEST), writing nothing.

The digest covers what the request asks for, not how long the caller waits: ``timeout_ms`` may
legitimately grow between attempts, and ``request_id`` is the key itself.
"""

from __future__ import annotations

import hashlib

from google.protobuf.message import Message

# Fields that may differ between attempts of one request.
_NOT_DIGESTED = ("request_id", "timeout_ms")


def request_sha256(request: Message) -> bytes:
    """SHA-256 of ``request`` serialized deterministically (map fields sorted), without the
    fields of ``_NOT_DIGESTED``. Pure: the same request gives the same bytes on every node."""
    body = type(request)()
    body.CopyFrom(request)
    fields = body.DESCRIPTOR.fields_by_name
    for name in _NOT_DIGESTED:
        if name in fields:
            body.ClearField(name)
    return hashlib.sha256(body.SerializeToString(deterministic=True)).digest()
