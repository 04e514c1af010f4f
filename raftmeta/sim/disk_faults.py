"""Storage faults of the simulated disk: the bytes a node reads back are not the ones it wrote
(docs/storage.md, "Repair from the quorum"). Injected while the node is down, after a crash:

* ``bit_flip``: one bit of a committed or flushed batch flips (the CRC field or what it covers);
* ``zeroed_sector``: a 512-byte sector of a batch reads back as zeros;
* ``lost_write``: fsync was reported but the batch never reached the medium: its bytes read back
  as zeros;
* ``misdirected_write``: a batch's right bytes were written over another batch's slot -- that
  slot holds an intact batch with the wrong header, and the intended slot was never written;
* ``lost_segment``: a run of batches in the middle of the log is gone (a truncated segment file
  with later segments intact, a zeroed range across batch boundaries); when the batches around
  the run are of its epoch, the run is one damaged range, as the real storage reports it (no
  header frames the batches inside: raftmeta/storage/damage.py), repaired from its front;
* ``quorum_state``: the quorum-state file fails its checksum (the node sets it aside and recovers
  its election state from the log);
* ``hw_checkpoint``: the high-watermark checkpoint fails its checksum (the node starts from its
  snapshot's end and relearns the high watermark from the leader).

The slot of a damaged batch (base offset, epoch, end) stays known, as the segment's offset and
epoch indexes give it; only its bytes are wrong. The last durable batch is never damaged (the real
recovery truncates a bad last batch as a torn write, see docs/storage.md) and at most a minority
of the voters' disks hold any one batch damaged at once: the quorum can repair every fault this
module injects, and the simulation requires that it does.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

from raftmeta.raft import Entry
from raftmeta.raft.repair import damage_of
from raftmeta.sim.disk import SimDisk
from raftmeta.sim.rng import SeededRandom

LOG_FAULTS = ("bit_flip", "zeroed_sector", "lost_write", "misdirected_write", "lost_segment")
STATE_FAULTS = ("quorum_state", "hw_checkpoint")
STORAGE_FAULTS = (*LOG_FAULTS, *STATE_FAULTS)
SECTOR = 512
# The CRC field starts here: a flip from here on fails the CRC (the header before it is the
# slot's, which the indexes know).
CRC_FIELD = 17


def damaged_slots(entries: Iterable[Entry]) -> list[int]:
    """Base offsets of the batches whose bytes fail their check (what recovery finds)."""
    return [e.base_offset for e in entries if damage_of(e) is not None]


def inject(disk: SimDisk, rng: SeededRandom, kind: str, others: Iterable[SimDisk], minority: int) -> bool:
    """Damage ``disk`` (at rest: right after a crash) with a fault of ``kind``; False if it has no
    place for it (nothing to damage, or every candidate batch is damaged on a minority already)."""
    if kind == "quorum_state":
        # In any epoch, also above the log's last one (a vote granted just before the crash): the
        # node recovers behind the vote fence (docs/consensus.md, "Lost election state").
        if disk.quorum_state is None:
            return False
        disk.quorum_state = None
        disk.quorum_state_lost = True
        return True
    if kind == "hw_checkpoint":
        disk.hw_checkpoint = 0
        return True
    others = list(others)

    def allowed(entry: Entry) -> bool:
        held_damaged = sum(
            1
            for other in others
            for e in _at(other.durable, entry.base_offset)
            # Its epoch, or a slot across an epoch change whose span holds it (zero_across_epochs).
            if e.epoch <= entry.epoch <= other.spans.get(e.base_offset, e.epoch) and damage_of(e) is not None
        )
        return held_damaged < minority and damage_of(entry) is None

    durable = disk.durable
    candidates = [i for i in range(len(durable) - 1) if allowed(durable[i])]  # never the last batch
    if not candidates:
        return False
    # Half the time one of the newest batches: flushed, maybe not committed yet.
    i = candidates[-1 - rng.next_int(min(3, len(candidates)))] if rng.random() < 0.5 else rng.choice(candidates)
    entry = durable[i]
    if kind == "bit_flip":
        position = CRC_FIELD + rng.next_int(len(entry.data) - CRC_FIELD)
        flipped = bytearray(entry.data)
        flipped[position] ^= 1 << rng.next_int(8)
        _put(disk, i, bytes(flipped))
    elif kind == "zeroed_sector":
        start = CRC_FIELD + rng.next_int(len(entry.data) - CRC_FIELD)
        end = min(len(entry.data), start + SECTOR)
        data = entry.data[:start] + bytes(end - start) + entry.data[end:]
        if data == entry.data:
            return False  # the sector held zeros: nothing changed
        _put(disk, i, data)
    elif kind == "lost_write":
        _put(disk, i, bytes(len(entry.data)))
    elif kind == "misdirected_write":
        targets = [j for j in candidates if j != i]
        if not targets:
            return False
        j = rng.choice(targets)
        # Entry i's bytes landed on slot j (cut or padded to j's length); slot i was never written.
        wrong = durable[j].data
        _put(disk, j, (entry.data + wrong[len(entry.data) :])[: len(wrong)])
        _put(disk, i, bytes(len(entry.data)))
    elif kind == "lost_segment":
        run = [k for k in range(i, i + 1 + rng.next_int(3)) if k in candidates]
        run = run[: next((n for n in range(1, len(run)) if run[n] != run[n - 1] + 1), len(run))]  # contiguous
        epochs = {durable[k].epoch for k in (run[0] - 1, *run, run[-1] + 1) if 0 <= k < len(durable)}
        # The batch before the run lies above the snapshot too: a range never holds the
        # snapshot's end, where the node's log starts (its byte position there is unknown).
        above = disk.snapshot is None or durable[run[0] - 1].base_offset >= disk.snapshot.end_offset
        if len(run) > 1 and run[0] > 0 and len(epochs) == 1 and above:
            _merge(disk, run[0], run[-1])
        else:
            for k in run:
                _put(disk, k, bytes(len(durable[k].data)))
    else:
        raise ValueError(f"unknown storage fault {kind}")
    return True


def zero_across_epochs(disk: SimDisk, others: Iterable[SimDisk]) -> bool:
    """Zero the newest two durable batches around an epoch change (the last of one epoch and the
    first of the next) into one damaged slot. The intact batches around it are of different
    epochs and no header inside says where the epoch rises, so the real storage reports one slot
    spanning those epochs (raftmeta/storage/damage.py): its entry carries the epoch before it, and
    ``disk.spans`` the epoch after it. False if there is no such place: an epoch change with an
    intact batch on each side of the pair, above the snapshot, and neither batch damaged on
    another disk (the quorum must hold an intact copy)."""
    others = list(others)
    durable = disk.durable
    floor = disk.snapshot.end_offset if disk.snapshot is not None else 0
    for k in range(len(durable) - 2, 1, -1):  # k: the first batch of an epoch; never the last batch
        around = durable[k - 2 : k + 2]
        if durable[k - 1].epoch == durable[k].epoch or around[0].base_offset < floor:
            continue
        if any(damage_of(e) is not None for e in around):
            continue
        if any(
            damage_of(e) is not None
            for other in others
            for b in durable[k - 1 : k + 1]
            for e in _at(other.durable, b.base_offset)
        ):
            continue
        base = durable[k - 1].base_offset
        _merge(disk, k - 1, k, epoch=around[0].epoch)
        disk.spans[base] = around[-1].epoch
        return True
    return False


def zero_around(disk: SimDisk, offset: int, others: Iterable[SimDisk]) -> bool:
    """Zero the durable batch ending at ``offset`` and the one starting there into one damaged range
    (a ``lost_segment``), so that a snapshot ending at ``offset`` -- the leader's, where its log
    starts -- ends inside it: the follower fetches the leader's batches from there to the range's
    end and puts them at its back before it installs the snapshot (docs/storage.md). False if there
    is no such place: both batches of one epoch with the batches around them, above this disk's
    snapshot, not the last batch, and neither damaged on another disk."""
    durable = disk.durable
    k = next((i for i, e in enumerate(durable) if e.base_offset == offset), None)
    floor = disk.snapshot.end_offset if disk.snapshot is not None else 0
    if k is None or k < 2 or k + 2 > len(durable) - 1 or durable[k - 2].base_offset < floor:
        return False
    around = durable[k - 2 : k + 2]
    if len({e.epoch for e in around}) != 1 or any(damage_of(e) is not None for e in around):
        return False
    if any(
        damage_of(e) is not None
        for other in others
        for b in durable[k - 1 : k + 1]
        for e in _at(other.durable, b.base_offset)
    ):
        return False
    _merge(disk, k - 1, k)
    return True


def lose_snapshot(disk: SimDisk) -> bool:
    """The newest snapshot fails its check with no fallback (at rest, after a crash): the log
    starts at its end -- the segments below it are gone too, as when taking it deleted them, and
    so is any older snapshot. The node sets it aside and starts without the state below its log
    (docs/storage.md, "A damaged snapshot with no fallback"), its slot the end offset and epoch
    the file name still says. False if the disk has no snapshot. Not among the drawn faults:
    damaged on a majority of the voters at once, no leader can be elected to send one, and the
    nodes must stop (tests/sim/test_storage_faults.py injects it so)."""
    snapshot = disk.snapshot
    if snapshot is None:
        return False
    assert not disk.pending, "at rest: nothing unflushed"
    end = snapshot.end_offset
    disk.durable = [e for e in disk.durable if e.base_offset >= end]
    disk.entries = list(disk.durable)
    disk.spans = {b: e for b, e in disk.spans.items() if b >= end}
    disk.missing_snapshot = (end, snapshot.epoch)
    disk.snapshot = None
    return True


def lose_write(disk: SimDisk, base_offset: int) -> bool:
    """A ``lost_write`` of the durable batch at ``base_offset`` (raftmeta.sim.flush_race picks
    it); False if there is none there, or it is the last durable batch."""
    i = bisect.bisect_left(disk.durable, base_offset, key=lambda e: e.base_offset)
    if i >= len(disk.durable) - 1 or disk.durable[i].base_offset != base_offset:
        return False
    _put(disk, i, bytes(len(disk.durable[i].data)))
    return True


def _at(entries: list[Entry], base_offset: int) -> list[Entry]:
    """The batch holding ``base_offset`` (starting there, or a damaged range around it)."""
    i = bisect.bisect_right(entries, base_offset, key=lambda e: e.base_offset) - 1
    return [entries[i]] if i >= 0 and base_offset < entries[i].next_offset else []


def _merge(disk: SimDisk, first: int, last: int, *, epoch: int | None = None) -> None:
    """Zero durable batches ``first``..``last`` (one epoch, unless ``epoch`` says which the slot
    carries: the lowest its offsets may be of) into one damaged range: one slot."""
    run = disk.durable[first : last + 1]
    slot_epoch = run[0].epoch if epoch is None else epoch
    zeroed = Entry(run[0].base_offset, slot_epoch, run[-1].next_offset, bytes(sum(len(e.data) for e in run)))
    disk.durable[first : last + 1] = [zeroed]
    bases = [e.base_offset for e in disk.entries]
    if run[0].base_offset in bases and run[-1].base_offset in bases:
        j = bases.index(run[0].base_offset)
        disk.entries[j : bases.index(run[-1].base_offset) + 1] = [zeroed]


def _put(disk: SimDisk, index: int, data: bytes) -> None:
    """Replace the bytes of durable batch ``index`` (its slot stays as the index has it)."""
    old = disk.durable[index]
    damaged = Entry(old.base_offset, old.epoch, old.next_offset, data)
    disk.durable[index] = damaged
    # At rest after a crash the page cache is what the disk holds.
    j = next((k for k, e in enumerate(disk.entries) if e.base_offset == old.base_offset), None)
    if j is not None:
        disk.entries[j] = damaged
