"""Where a damaged batch of a segment sits: its *slot* (base offset, epoch, end offset, byte
position and size), found from the intact batches around it, so that the node can report it to
the raft core for repair from the quorum instead of refusing to start (docs/storage.md, "Repair
from the quorum").

Pure: it reads a segment's bytes, never a file. A slot is known only when the bytes prove that
the damage is one batch and say which:

* **The batch after it is intact** (found by resynchronising past the damage) and continues the
  log: it starts above the offset the damaged batch should start at, with an epoch no older than
  the batch before. The damaged bytes are one batch if their header's length reaches exactly
  that next batch, or if their header names the expected base offset and a record count that
  reaches it (a damaged length field). The epoch is the header's when the header names the
  expected base offset and an epoch between its neighbours'; otherwise (a misdirected write:
  another slot's batch here) the neighbours', spanning both when they differ (below).
* **Nothing intact follows** (the last batch of the file): a torn write looks the same, so the
  slot is trusted only when the header says the batch fills the file exactly and either the next
  segment file starts where it ends, or the whole batch lies below the checkpointed high
  watermark (it was durable and acknowledged, so a crash did not cut it short).

* **A damaged range** (several batches: a zeroed range across batch boundaries, a misdirected
  write of another size, which shifts no intact byte but leaves no header framing the rest):
  the bad bytes reach from the last intact batch to the next intact batch that continues the log.
  Its offsets, byte position and size are known, its inner batch boundaries are not. When both
  neighbours are of the same epoch, every offset in between is of that epoch too (epochs never
  decrease along the log). It is repaired batch by batch from the front (:func:`repaired_front`):
  a peer's batch of that epoch starting at the slot's offset is the batch this node wrote there
  (Log Matching: the epoch's one leader framed it once), and the rest of the slot stays damaged.
* **A slot across an epoch change**: the neighbours are of different epochs and no intact header
  inside says where the epoch rises (a range, or one batch whose header lost its epoch). The slot
  spans those epochs (``max_epoch``): every offset of it is of an epoch from the one before to the
  one after. It is repaired from its front in the same way, with the leader's batches of any epoch
  in that span; which batches are this node's own only the leader's log can tell (the raft core
  takes them from its leader's Fetch answers, docs/storage.md).

Anything else -- an unreadable header with nothing to prove its extent, the torn tail of the log,
an epoch going back -- has no known slot, and recovery keeps its rules: truncate a torn tail,
refuse the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

from raftmeta.records import codec
from raftmeta.records.codec import LOG_OVERHEAD, CorruptBatchError
from raftmeta.records.walk import MAGIC_BYTE, MAGIC_POSITION, PEEK, PEEK_SIZE, peek_intact


@dataclass(frozen=True, slots=True)
class DamagedBatch:
    """A batch whose slot is known but whose bytes are not the batch: ``position`` and ``size``
    within its segment file, offsets [``base_offset``, ``next_offset``) in ``epoch``."""

    base_offset: int
    epoch: int
    next_offset: int
    position: int
    size: int
    reason: str
    # None: every offset of the slot is of ``epoch``. Else the batches before and after the slot
    # are of different epochs and no intact header inside says where the epoch changes: every
    # offset of the slot is of an epoch from ``epoch`` to ``max_epoch`` (epochs never decrease
    # along the log), the offsets where it rises unknown until the slot is repaired.
    max_epoch: int | None = None

    @property
    def epoch_bound(self) -> int:
        """The highest epoch an offset of the slot may be of."""
        return self.epoch if self.max_epoch is None else self.max_epoch


def next_intact(buf: bytes, start: int, min_offset: int, min_epoch: int) -> tuple[int, int, int] | None:
    """``(position, base offset, epoch)`` of the first intact batch of ``buf`` at or after byte
    ``start`` whose base offset is at least ``min_offset`` and epoch at least ``min_epoch``."""
    position = buf.find(MAGIC_BYTE, start + MAGIC_POSITION)
    while position >= 0:
        candidate = position - MAGIC_POSITION
        fields = peek_intact(buf, candidate, min_offset)
        if fields is not None and fields[2] >= min_epoch:
            return candidate, fields[0], fields[2]
        position = buf.find(MAGIC_BYTE, position + 1)
    return None


def _reason(buf: bytes, position: int, end: int, expected: int) -> str:
    """Why the bytes [position, end) are not the batch at offset ``expected``."""
    try:
        header = codec.check_batch(buf[position:end])
    except CorruptBatchError as exc:
        return exc.reason
    if header.base_offset != expected:
        return f"the intact batch of offset {header.base_offset} (epoch {header.epoch}) where offset {expected} belongs"
    return f"{end - position} bytes where the batch header says {header.size_bytes}"


def damaged_slot(
    buf: bytes,
    position: int,
    expected: int,
    last_epoch: int,
    *,
    high_watermark: int,
    next_segment_base: int | None,
) -> DamagedBatch | None:
    """The slot of the bad batch at byte ``position`` of a segment's bytes ``buf`` (where the
    batch at offset ``expected`` belongs, after a batch of ``last_epoch``), or None when the
    bytes do not prove it (see the module docstring)."""
    header = PEEK.unpack_from(buf, position) if position + PEEK_SIZE <= len(buf) else None
    after = next_intact(buf, position + 1, expected + 1, last_epoch)
    if after is not None:
        end, next_offset, next_epoch = after
        if header is None:
            return None
        base, length, epoch, _magic, _crc, _attrs, count = header
        one_batch = LOG_OVERHEAD + length == end - position or (base == expected and count == next_offset - expected)
        # Neighbours of different epochs: the epoch rises somewhere in the slot, at an offset no
        # byte says; the slot spans those epochs (``max_epoch``) until the repair tells.
        span = next_epoch if next_epoch != last_epoch else None
        if not one_batch or end - position > codec.BATCH_BYTES_MAX:
            reason = (
                f"{end - position} damaged bytes over offsets {expected}..{next_offset - 1} that no batch header "
                f"frames ({_reason(buf, position, end, expected)})"
            )
            return DamagedBatch(expected, last_epoch, next_offset, position, end - position, reason, span)
        reason = _reason(buf, position, end, expected)
        if base == expected and last_epoch <= epoch <= next_epoch:
            return DamagedBatch(expected, epoch, next_offset, position, end - position, reason)
        return DamagedBatch(expected, last_epoch, next_offset, position, end - position, reason, span)
    if header is None:
        return None
    base, length, epoch, _magic, _crc, _attrs, count = header
    end = position + LOG_OVERHEAD + length
    next_offset = expected + count
    if base != expected or end != len(buf) or count < 1 or epoch < last_epoch:
        return None
    if next_offset != next_segment_base if next_segment_base is not None else next_offset > high_watermark:
        return None  # maybe a torn write at the tail: recovery's rule for that stands
    return DamagedBatch(expected, epoch, next_offset, position, end - position, _reason(buf, position, end, expected))


def repairable_batches(
    buf: bytes, first_offset: int, *, high_watermark: int, next_segment_base: int | None
) -> list[DamagedBatch]:
    """The damaged batches of one segment's bytes whose slot is known, as recovery with
    ``report_damage`` finds them (raftmeta/storage/segment.py, ``Segment.scan``): walking from
    ``first_offset``, up to the first damage whose slot is not known. Reads only: for ``raftmeta
    log dump``, to say which damage a node repairs from the quorum when it starts."""
    found: list[DamagedBatch] = []
    position, expected, last_epoch = 0, first_offset, 0
    while position < len(buf):
        fields = peek_intact(buf, position, 0)
        if fields is not None and fields[0] == expected and fields[2] >= last_epoch:
            expected, last_epoch = fields[0] + fields[6], fields[2]
            position += LOG_OVERHEAD + fields[1]
            continue
        if fields is not None and fields[0] == expected:
            return found  # an epoch going back: recovery's own rule, no slot
        slot = damaged_slot(
            buf, position, expected, last_epoch, high_watermark=high_watermark, next_segment_base=next_segment_base
        )
        if slot is None:
            return found
        found.append(slot)
        expected, last_epoch = slot.next_offset, slot.epoch
        position += slot.size
    return found


def repaired_front(
    slot: DamagedBatch, base_offset: int, epoch: int, next_offset: int, size: int
) -> DamagedBatch | None:
    """What stays damaged of ``slot`` once its front is overwritten with an intact batch of
    ``size`` bytes covering offsets [``base_offset``, ``next_offset``) in ``epoch``: None when
    the batch fills the whole slot. ValueError (naming what differs) when the batch is not the
    slot's front: another offset, an epoch outside the slot's, past its end, or its size not
    fitting the slot. The rest of a slot that spans epochs starts no earlier than ``epoch``."""
    if base_offset != slot.base_offset or not slot.epoch <= epoch <= slot.epoch_bound:
        epochs = f"epoch {slot.epoch}" if slot.max_epoch is None else f"epochs {slot.epoch}..{slot.max_epoch}"
        raise ValueError(
            f"the batch is (offset {base_offset}, epoch {epoch}), the damaged slot starts at offset "
            f"{slot.base_offset} in {epochs}"
        )
    if next_offset == slot.next_offset and size == slot.size:
        return None
    if next_offset >= slot.next_offset or size >= slot.size:
        raise ValueError(
            f"the batch ends at offset {next_offset} with {size} bytes, the damaged slot at offset "
            f"{slot.next_offset} with {slot.size} bytes"
        )
    span = slot.max_epoch if slot.max_epoch is not None and slot.max_epoch > epoch else None
    return DamagedBatch(next_offset, epoch, slot.next_offset, slot.position + size, slot.size - size, slot.reason, span)


def repaired_back(slot: DamagedBatch, base_offset: int, epoch: int, next_offset: int, size: int) -> DamagedBatch:
    """What stays damaged of the range ``slot`` once its back is overwritten with an intact batch of
    ``size`` bytes covering offsets [``base_offset``, ``next_offset``) in ``epoch``: the range's
    front, up to ``base_offset``; the batch goes in its last ``size`` bytes, ending where the batch
    after the range starts. ValueError (naming what differs) when the batch is not the range's
    back: a range across an epoch change (no epoch is known for its back), another epoch, another
    end, a base outside it, or a size not smaller than the range's. For a follower whose leader's
    snapshot ends inside the range: the leader's batches from there on, last first (docs/storage.md)."""
    if slot.max_epoch is not None or epoch != slot.epoch or next_offset != slot.next_offset:
        raise ValueError(
            f"the batch is (epoch {epoch}, end {next_offset}), the back of the damaged range is (epoch "
            f"{slot.epoch}{'' if slot.max_epoch is None else f'..{slot.max_epoch}'}, end {slot.next_offset})"
        )
    if not slot.base_offset < base_offset or size >= slot.size:
        raise ValueError(
            f"the batch starts at offset {base_offset} with {size} bytes, the damaged range at offset "
            f"{slot.base_offset} with {slot.size} bytes"
        )
    return DamagedBatch(slot.base_offset, slot.epoch, base_offset, slot.position, slot.size - size, slot.reason)
