"""Topic ids and incarnation ids: 16-byte uuids, shown as Kafka shows them.

Kafka prints a Uuid as URL-safe base64 without padding (22 characters, e.g.
``6yY7kq3dT4C0pn0KwG7Xeg``); users copy topic ids between kafka-topics.sh and raftmeta, so
raftmeta prints and parses the same form, everywhere it shows one: commands (`topics`, `log
dump`, `records decode`), JSON documents, error messages and log lines. Pure.
"""

from __future__ import annotations

import base64
import binascii

UUID_BYTES = 16


def uuid_to_str(raw: bytes) -> str:
    """16 raw bytes → Kafka's 22-character base64url form ("" for empty)."""
    if not raw:
        return ""
    if len(raw) != UUID_BYTES:
        raise ValueError(f"a uuid has {UUID_BYTES} bytes, got {len(raw)}")
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def id_text(raw: bytes) -> str:
    """An id as a message or log line quotes it: Kafka's form for 16 bytes; bytes that are no id
    (a malformed request's) as hex, so the message still shows what was sent."""
    return uuid_to_str(raw) if len(raw) == UUID_BYTES else raw.hex()


def uuid_from_str(text: str) -> bytes:
    """Kafka's base64url form (or 32 hex digits) → 16 raw bytes."""
    cleaned = text.strip()
    try:
        if len(cleaned) == 2 * UUID_BYTES:
            return bytes.fromhex(cleaned)
        raw = base64.b64decode(cleaned + "=" * (-len(cleaned) % 4), altchars=b"-_", validate=True)
    except (ValueError, binascii.Error) as exc:
        raise ValueError(f"{text!r} is not a topic id (22 base64url characters or 32 hex digits)") from exc
    if len(raw) != UUID_BYTES:
        raise ValueError(f"{text!r} decodes to {len(raw)} bytes, a topic id has {UUID_BYTES}")
    return raw
