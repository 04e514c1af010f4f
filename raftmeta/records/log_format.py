"""Which format a log file is in, from its first batch's magic byte (byte 16 in both): raftmeta's
own (magic 1: docs/log-format.md) or Kafka's record batch v2 (magic 2: a ``__cluster_metadata``
log of a real KRaft quorum). Anything else is refused naming what was found, never misread.
"""

from __future__ import annotations

import enum

from raftmeta.records import codec
from raftmeta.records.kafka import batch as kafka_batch

MAGIC_POSITION = 16
SNIFF_BYTES = MAGIC_POSITION + 1


class LogFormat(enum.Enum):
    RAFTMETA = "raftmeta"
    KAFKA = "kafka"


class UnknownLogFormatError(ValueError):
    """Bytes in neither format."""


def sniff(head: bytes, *, what: str = "the file") -> LogFormat | None:
    """The format of a file starting with ``head`` (at least :data:`SNIFF_BYTES` bytes of it, or
    all of a shorter file); None for an empty file (it holds no batch of either)."""
    if not head:
        return None
    if len(head) < SNIFF_BYTES:
        raise UnknownLogFormatError(
            f"{what} holds {len(head)} bytes, too few for a batch header of either format "
            f"(the magic byte is byte {MAGIC_POSITION})"
        )
    magic = head[MAGIC_POSITION]
    if magic == codec.MAGIC:
        return LogFormat.RAFTMETA
    if magic == kafka_batch.MAGIC:
        return LogFormat.KAFKA
    raise UnknownLogFormatError(
        f"{what}: its first batch's magic byte (byte {MAGIC_POSITION}) is {magic}: neither raftmeta's log "
        f"format (magic {codec.MAGIC}) nor Kafka's record batch v2 (magic {kafka_batch.MAGIC}, the only "
        "one a KRaft metadata log holds)"
    )
