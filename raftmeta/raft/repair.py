"""Repair of damaged batches from the quorum (docs/storage.md, "Repair from the quorum").

The driver tells the core which batches of its log failed their check on start (a flipped bit, a
zeroed sector, a lost or misdirected write: the bytes in a slot are not the batch the slot's
header and the batches around it say it holds). The slot itself -- base offset, epoch, end -- is
known from the intact index; only its bytes are not. Protocol-Aware Recovery (Alagappan et al.,
FAST '18, CTRL) then repairs it from a peer's copy. This module holds the pure rules the core
applies: whether a copy fills a slot, and what the peers said about one slot.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from raftmeta.raft.log import Entry
from raftmeta.records.codec import CorruptBatchError, check_batch

# What a voter answered about one damaged slot of the leader's log.
ANSWER_DAMAGED = "holds it damaged"
ANSWER_ABSENT = "does not hold it"
ANSWER_IN_SNAPSHOT = "holds it in a snapshot"


def damage_of(entry: Entry) -> str | None:
    """Why the bytes of ``entry`` are not the batch of its slot, or None if they are: one whole
    batch, its CRC32C matching, its header naming the slot's base offset, epoch and end (a
    misdirected write puts another slot's intact batch here: its CRC passes, its header does
    not)."""
    data = entry.data
    try:
        header = check_batch(data)
    except CorruptBatchError as error:
        return error.reason
    if header.size_bytes != len(data):
        return f"{len(data)} bytes where the batch header says {header.size_bytes}"
    slot = (entry.base_offset, entry.epoch, entry.next_offset)
    found = (header.base_offset, header.epoch, header.next_offset)
    if found != slot:
        return f"the batch there is (offset {found[0]}, epoch {found[1]}, end {found[2]}), the slot is {slot}"
    return None


def copy_fills(slot: Entry, copy: Entry, max_epoch: int | None = None) -> str | None:
    """Why ``copy`` (a peer's batch) may not replace the damaged ``slot``, or None if it may: it
    must be intact and name exactly the slot (same base offset, epoch and end). Same offset and
    epoch means the same batch on every replica (Log Matching), committed or not, so any peer's
    intact copy is the one this node wrote.

    A damaged range of several batches of one epoch (the storage knows no header inside it:
    raftmeta/storage/damage.py) is one slot here, repaired from its front: a copy of the slot's
    base offset and epoch that ends inside it, and is no bigger than the range's bytes, is the
    first batch this node wrote there (the epoch's one leader framed it once).

    ``max_epoch``: the slot lies across an epoch change (its offsets are of epochs from
    ``slot.epoch`` to ``max_epoch``, where the epoch rises no byte says). A copy of any epoch in
    that span that fits its offsets and bytes may go in; only the leader's log says whether it is
    the batch this node wrote, so only a follower takes one, from its leader's Fetch answer, and
    the batches after the slot are held to that leader's log as any fetched tail is."""
    epochs_ok = copy.epoch == slot.epoch if max_epoch is None else slot.epoch <= copy.epoch <= max_epoch
    whole = copy.next_offset == slot.next_offset and (max_epoch is None or len(copy.data) == len(slot.data))
    range_front = copy.next_offset < slot.next_offset and len(copy.data) < len(slot.data)
    if copy.base_offset != slot.base_offset or not epochs_ok or not (whole or range_front):
        epochs = f"epoch {slot.epoch}" if max_epoch is None else f"epochs {slot.epoch}..{max_epoch}"
        return (
            f"the copy is (offset {copy.base_offset}, epoch {copy.epoch}, end {copy.next_offset}, "
            f"{len(copy.data)} bytes), the slot (offset {slot.base_offset}, {epochs}, end {slot.next_offset}, "
            f"{len(slot.data)} bytes)"
        )
    return damage_of(copy)


@dataclass(slots=True)
class RepairRound:
    """A leader asking the other voters and the observers it knows, one at a time, for an intact
    copy of one damaged slot. A follower repairs from the leader's Fetch answers instead."""

    base_offset: int
    epoch: int
    # peer -> what it answered (ANSWER_DAMAGED / ANSWER_ABSENT); no entry: not asked yet, or
    # its answer was lost (asked again).
    answers: dict[int, str] = field(default_factory=dict)
    # Correlation id of the request in flight (-1: none; -2: waiting before asking again) and
    # when to give up on it.
    in_flight: int = -1
    deadline_ms: int = 0
    # Round-robin position among the voters still to answer.
    turn: int = 0

    def next_peer(self, peers: list[int]) -> int | None:
        """The next peer to ask (None when every one has answered)."""
        waiting = [v for v in peers if v not in self.answers]
        if not waiting:
            return None
        self.turn += 1
        return waiting[self.turn % len(waiting)]


def copy_fills_back(slot: Entry, copy: Entry) -> str | None:
    """Why ``copy`` may not go at the back of the damaged range ``slot``, or None if it may: an
    intact batch of the range's epoch that ends where the range ends and starts inside it, smaller
    than the range's bytes. Only a range of one epoch (a slot across an epoch change says no
    epoch for its back). The batch this node wrote there, as for the front (Log Matching); the
    rest of the range, its front, stays damaged. For a follower whose leader's snapshot ends inside
    the range (:class:`Bridge`)."""
    if (
        copy.epoch != slot.epoch
        or copy.next_offset != slot.next_offset
        or not slot.base_offset < copy.base_offset
        or len(copy.data) >= len(slot.data)
    ):
        return (
            f"the copy is (offset {copy.base_offset}, epoch {copy.epoch}, end {copy.next_offset}, "
            f"{len(copy.data)} bytes), not the back of the range (offset {slot.base_offset}, epoch {slot.epoch}, "
            f"end {slot.next_offset}, {len(slot.data)} bytes)"
        )
    return damage_of(copy)


@dataclass(slots=True)
class Bridge:
    """A follower whose leader answered with a snapshot ending inside one of its damaged ranges of
    one epoch (the leader's log starts there): the leader's batches from the snapshot's end to the
    range's end, fetched before the snapshot, go at the back of the range (:func:`copy_fills_back`,
    last first), so that the snapshot then ends at a batch boundary of this log and installs keeping
    the intact batches after the range (Kafka's follower keeps its log above a fetched snapshot
    unless the snapshot lies past it: KafkaMetadataLog.truncateToLatestSnapshot)."""

    snapshot_end: int
    snapshot_epoch: int
    range_base: int
    range_end: int
    batches: list[Entry] = field(default_factory=list)

    @property
    def next_offset(self) -> int:
        return self.batches[-1].next_offset if self.batches else self.snapshot_end


def damaged_on_a_majority(node_id: int, voter_sets: list[frozenset[int]], answers: dict[int, str]) -> bool:
    """Whether this node and the peers that hold a damaged slot damaged are a majority of one of
    ``voter_sets``: the sets that can have committed it (``VoterHistory.since`` the slot: the set in
    force when it was written, and each later change of the log, committed or not). A commit may
    then rest on those copies alone, none intact.

    Judging by the latest set alone is not enough: a later change may have removed the holders
    (plane seeds 148266 and 148820: a batch committed by voters {1, 2, 3} on two of them, then an
    uncommitted removal in the log of the one that held it damaged, which, leading the set of two,
    asked only the other member of that set and dropped the committed batch)."""
    return any(
        sum(1 for v in voters if v == node_id or answers.get(v) == ANSWER_DAMAGED) > len(voters) // 2
        for voters in voter_sets
    )
