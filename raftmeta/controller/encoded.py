"""New topics' PartitionRecords as their creation wrote them, kept for the next snapshot.

A snapshot writes every partition of the image, and encoding one costs about a microsecond of
Python: ten million partitions took each node 12-15 s of CPU, three nodes at once on two cores.
But a topic unchanged since its creation has exactly the PartitionRecords its creation committed
(canonical protobuf: the leader encodes them with ``PartitionEncoder``, replay takes a record
from its bytes only when they are canonical). The controller keeps those bytes, framed as a batch
body holds them, from the commit of the creation to the next snapshot, which writes them as they
are, a topic's records as one piece (:class:`~raftmeta.controller.snapshot.SnapshotEncoder`); a
topic changed since is a new ``TopicImage`` value and is encoded again. The price is the bytes'
memory (~43 bytes a partition) for topics created since the last snapshot, which the snapshot's
encoder then keeps anyway.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from raftmeta.controller.image import TopicImage
from raftmeta.records.codec import FramedRecords


class EncodedPartitions(NamedTuple):
    """``topic``'s PartitionRecords, serialized and framed as a batch body holds them."""

    topic: TopicImage
    framed: FramedRecords


def encoded_partitions(topic: TopicImage, records: Sequence[bytes]) -> EncodedPartitions:
    return EncodedPartitions(topic, FramedRecords.of(records))


class EncodedTopics:
    """Encodings of topics created since the last snapshot, by topic id, with the offset of the
    batch that committed each.

    The node task adds and prunes; the snapshot thread only calls :meth:`get` (one dict lookup,
    safe beside the node task's changes under the interpreter lock; :meth:`prune` swaps in a new
    dict rather than deleting from the one being read)."""

    def __init__(self) -> None:
        self._by_id: dict[bytes, tuple[int, EncodedPartitions]] = {}

    def __len__(self) -> int:
        return len(self._by_id)

    def add(self, offset: int, encoded: EncodedPartitions) -> None:
        self._by_id[encoded.topic.topic_id] = (offset, encoded)

    def get(self, topic: TopicImage) -> EncodedPartitions | None:
        """The encoding of ``topic`` if it is still the value its creation made."""
        entry = self._by_id.get(topic.topic_id)
        if entry is None or entry[1].topic is not topic:
            return None
        return entry[1]

    def prune(self, end_offset: int) -> None:
        """A snapshot ending at ``end_offset`` was written: every topic committed below it was in
        its image (its encoder keeps what it used) or was deleted before it."""
        self._by_id = {tid: entry for tid, entry in self._by_id.items() if entry[0] >= end_offset}
