"""The voter set and its history in the log (KIP-853), pure.

A :class:`VoterSet` is who votes and whose persisted offsets make the high watermark. The set in
force is the one of the latest ``VotersRecord`` in the log, *committed or not* (KIP-853, as in
the Raft thesis' single-server changes): a leader counts the new set from the moment it appends
the change, so the change commits on a majority of the new set. A truncation that removes the
record restores the set before it. :class:`VoterHistory` keeps the sets by offset (Kafka's
``VoterSetHistory``): the base (a snapshot's set, or the bootstrap voters) and one entry per
record above the log start.

One change at a time keeps any two consecutive sets' majorities overlapping (they differ by one
voter), which is what makes a change safe without joint consensus; the leader enforces it
(:mod:`raftmeta.raft.core`: no new change while the last one is uncommitted).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from raftmeta.api.ids import uuid_from_str, uuid_to_str
from raftmeta.records.codec import ATTR_CONTROL, decode_header, iter_batches, split_records
from raftmeta.records.decode import parse_record
from raftmeta.v1 import records_pb2

# kraft.version: 1 supports reconfiguration (KIP-853); raftmeta's voters all support 0..1.
KRAFT_VERSION = 1
VOTERS_RECORD_VERSION = 0


DIRECTORY_ID_BYTES = 16


def format_directory_id(raw: bytes) -> str:
    """Kafka's Uuid.toString (raftmeta.api.ids, the one form of a uuid's text); "" for no
    directory id, and a named length for bytes that are no uuid (error messages quote requests)."""
    if not raw:
        return ""
    if len(raw) != DIRECTORY_ID_BYTES:
        return f"<{len(raw)} bytes, not a uuid>"
    return uuid_to_str(raw)


def parse_directory_id(text: str) -> bytes:
    """The 16 bytes of a directory id as :func:`format_directory_id` prints it; ValueError if not one."""
    try:
        raw = uuid_from_str(text)
    except ValueError:
        raw = b""
    # Only the form Kafka prints (uuid_from_str takes 32 hex digits too).
    if len(raw) != DIRECTORY_ID_BYTES or format_directory_id(raw) != text:
        raise ValueError(f"directory id {text!r} is not 22 characters of url-safe base64 naming 16 bytes")
    return raw


@dataclass(frozen=True, slots=True)
class Endpoint:
    name: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class VoterNode:
    """A voter: its id and (when known) its directory id, the identity of its log directory --
    Kafka's ReplicaKey -- and where it listens."""

    voter_id: int
    directory_id: bytes = b""
    endpoints: tuple[Endpoint, ...] = ()

    def matches(self, voter_id: int, directory_id: bytes) -> bool:
        """Whether this is the replica ``(voter_id, directory_id)``; an empty directory id on
        either side matches any (a statically configured voter, or a caller who does not know it)."""
        return self.voter_id == voter_id and (
            not self.directory_id or not directory_id or self.directory_id == directory_id
        )


@dataclass(frozen=True, slots=True)
class VoterSet:
    nodes: tuple[VoterNode, ...]

    def __post_init__(self) -> None:
        ids = [n.voter_id for n in self.nodes]
        assert ids == sorted(set(ids)), f"voter ids must be unique and sorted: {ids}"

    @classmethod
    def of_ids(cls, ids: tuple[int, ...] | list[int]) -> VoterSet:
        return cls(tuple(VoterNode(i) for i in sorted(ids)))

    @property
    def ids(self) -> tuple[int, ...]:
        return tuple(n.voter_id for n in self.nodes)

    def node(self, voter_id: int) -> VoterNode | None:
        return next((n for n in self.nodes if n.voter_id == voter_id), None)

    def with_voter(self, node: VoterNode) -> VoterSet:
        assert self.node(node.voter_id) is None, f"voter {node.voter_id} is already in {self.ids}"
        return VoterSet(tuple(sorted((*self.nodes, node), key=lambda n: n.voter_id)))

    def without_voter(self, voter_id: int, directory_id: bytes) -> VoterSet | None:
        """The set without that voter; None if it is not in the set (or its directory id
        differs) or it is the last voter (a quorum needs one)."""
        kept = tuple(n for n in self.nodes if not n.matches(voter_id, directory_id))
        if len(kept) == len(self.nodes) or not kept:
            return None
        return VoterSet(kept)

    def to_record(self) -> records_pb2.VotersRecord:
        return records_pb2.VotersRecord(
            version=VOTERS_RECORD_VERSION,
            voters=[
                records_pb2.VoterEntry(
                    voter_id=n.voter_id,
                    directory_id=n.directory_id,
                    endpoints=[records_pb2.VoterEndpoint(name=e.name, host=e.host, port=e.port) for e in n.endpoints],
                    min_supported_version=0,
                    max_supported_version=KRAFT_VERSION,
                )
                for n in self.nodes
            ],
        )

    @classmethod
    def from_record(cls, record: records_pb2.VotersRecord) -> VoterSet:
        nodes = [
            VoterNode(
                v.voter_id,
                bytes(v.directory_id),
                tuple(Endpoint(e.name, e.host, e.port) for e in v.endpoints),
            )
            for v in record.voters
        ]
        return cls(tuple(sorted(nodes, key=lambda n: n.voter_id)))


ATTRIBUTES_AT = 21  # the batch header's attributes field (records.codec's layout)


def voters_in_batch(data: bytes) -> VoterSet | None:
    """The last voter set one batch (its exact bytes) carries, if it is a control batch with a
    VotersRecord. Data batches are skipped by their attribute bits without being decoded."""
    if not (int.from_bytes(data[ATTRIBUTES_AT : ATTRIBUTES_AT + 2], "big") & ATTR_CONTROL):
        return None
    found: VoterSet | None = None
    for raw in split_records(data, decode_header(data)):
        record = parse_record(raw)
        if record.WhichOneof("record") == "voters":
            found = VoterSet.from_record(record.voters)
    return found


def voters_in_data(data: bytes) -> VoterSet | None:
    """The last voter set in a run of batches (a snapshot's bytes)."""
    found: VoterSet | None = None
    for batch in iter_batches(data, verify_crc=False):
        voters = voters_in_batch(batch.data)
        if voters is not None:
            found = voters
    return found


class VoterHistory:
    """The voter sets by the offset of the batch that set them; ``base`` is in force below the
    first entry (the snapshot's or the bootstrap set)."""

    __slots__ = ("_offsets", "_sets", "base")

    def __init__(self, base: VoterSet) -> None:
        self.base = base
        self._offsets: list[int] = []
        self._sets: list[VoterSet] = []

    def latest(self) -> VoterSet:
        return self._sets[-1] if self._sets else self.base

    def latest_offset(self) -> int:
        """Base offset of the batch of the latest change in the log (-1: none above the base)."""
        return self._offsets[-1] if self._offsets else -1

    def change_before(self, offset: int) -> int:
        """Offset of the latest change below ``offset`` still in the log (-1: none above the base)."""
        i = bisect.bisect_left(self._offsets, offset)
        return self._offsets[i - 1] if i > 0 else -1

    def at(self, offset: int) -> VoterSet:
        """The set in force for a log that ends at ``offset`` (changes at offsets below it)."""
        i = bisect.bisect_left(self._offsets, offset)
        return self._sets[i - 1] if i > 0 else self.base

    def since(self, offset: int) -> list[VoterSet]:
        """The set in force for a log that ends at ``offset`` and every set a later change of the
        log made: each voter set a leader holding the batch at ``offset`` can have counted toward
        its commit."""
        i = bisect.bisect_left(self._offsets, offset)
        return [self.at(offset), *self._sets[i:]]

    def add(self, offset: int, voters: VoterSet) -> None:
        assert not self._offsets or offset > self._offsets[-1], f"voter change at {offset} out of order"
        self._offsets.append(offset)
        self._sets.append(voters)

    def truncate_to(self, offset: int) -> bool:
        """Forget changes at or above ``offset`` (a truncated tail); True if the latest set changed."""
        i = bisect.bisect_left(self._offsets, offset)
        changed = i < len(self._offsets)
        del self._offsets[i:]
        del self._sets[i:]
        return changed

    def trim_prefix(self, offset: int) -> None:
        """Fold the changes below ``offset`` (now under a snapshot) into the base."""
        self.base = self.at(offset)
        i = bisect.bisect_left(self._offsets, offset)
        del self._offsets[:i]
        del self._sets[:i]

    def reset(self, base: VoterSet) -> None:
        self.base = base
        self._offsets.clear()
        self._sets.clear()
