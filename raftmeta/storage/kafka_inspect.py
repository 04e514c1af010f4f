"""Read-only access to Kafka-format metadata log files (a real KRaft node's
``__cluster_metadata-0``: segments and ``.checkpoint`` snapshots) for ``raftmeta log dump`` and
``raftmeta verify``: which format a file is in, and the walk of a file's batches with its damage
named by file (the walk itself is the records' one, raftmeta/records/kafka/walk.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from raftmeta.records.kafka.walk import FoundKafkaBatch, walk_kafka_batches
from raftmeta.records.log_format import SNIFF_BYTES, LogFormat, UnknownLogFormatError, sniff
from raftmeta.records.walk import Damage
from raftmeta.storage.inspect import Corruption


@dataclass(frozen=True, slots=True)
class KafkaBatchEntry:
    """One batch of a Kafka-format file, found by the walk."""

    path: Path
    found: FoundKafkaBatch

    @property
    def next_offset(self) -> int:
        return self.found.batch.next_offset


@dataclass(frozen=True, slots=True)
class KafkaDamage:
    """Damage found in a Kafka-format file, with the walk's kind (``crc``, ``offset``,
    ``record``, ``unreadable``)."""

    path: Path
    damage: Damage

    def corruption(self, *, last_segment: bool = False) -> Corruption:
        d = self.damage
        return Corruption(self.path, d.position, d.offset, d.reason, torn_tail=last_segment and d.truncated)


def file_format(path: Path) -> LogFormat | None:
    """The format of ``path`` by its first batch (None: empty); UnknownLogFormatError names the file."""
    with path.open("rb") as handle:
        head = handle.read(SNIFF_BYTES)
    return sniff(head, what=str(path))


def files_format(paths: list[Path]) -> LogFormat | None:
    """The one format of ``paths`` (None if all are empty); UnknownLogFormatError for a file in
    neither format, or for files of both."""
    found = {path: file_format(path) for path in paths}
    formats = {fmt for fmt in found.values() if fmt is not None}
    if len(formats) > 1:
        named = ", ".join(f"{p.name}: {f.value}" for p, f in found.items() if f is not None)
        raise UnknownLogFormatError(f"the files mix raftmeta's and Kafka's log formats ({named})")
    return formats.pop() if formats else None


def walk_kafka_file(path: Path, *, first_offset: int = -1) -> list[KafkaBatchEntry | KafkaDamage]:
    """Every batch of a Kafka-format file and every piece of damage found, in file order."""
    return [
        KafkaDamage(path, found) if isinstance(found, Damage) else KafkaBatchEntry(path, found)
        for found in walk_kafka_batches(path.read_bytes(), first_offset=first_offset)
    ]
