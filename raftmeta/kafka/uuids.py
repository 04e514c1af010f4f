"""Kafka Uuids between kio and raftmeta's 16-byte ids.

kio reads Kafka's zero uuid as None; Kafka means by it "none" (an unknown topic id, the MIGRATING
log directory, a voter without a directory id), and raftmeta's records hold it as 16 zero bytes.
"""

from __future__ import annotations

import uuid
from typing import Final

from raftmeta.api.ids import UUID_BYTES

NULL_UUID: Final = uuid.UUID(int=0)


def kafka_uuid(raw: bytes) -> uuid.UUID:
    """raftmeta's id as kio writes it; anything but 16 bytes (an absent id) is the zero uuid."""
    return uuid.UUID(bytes=raw) if len(raw) == UUID_BYTES else NULL_UUID


def uuid_bytes(value: uuid.UUID | None) -> bytes:
    """kio's uuid (None for the zero uuid) as raftmeta's 16 bytes."""
    return (value or NULL_UUID).bytes
