"""Storage faults: a committed batch of a stopped node's log damaged in place (issue 45).

While a node is down, one batch wholly below its checkpointed high watermark and at or above its
newest snapshot's end -- a batch this node vouched for as committed and still needs (below the
snapshot, a segment keeps batches only until it is deleted whole) -- gets a flipped bit or a
zeroed 512-byte sector in its records (the bytes its CRC32C covers), with intact batches on both
sides in the same file, so that the node can tell the damaged batch's slot on start
(raftmeta/storage/damage.py). Or a run of 2-3 such batches is zeroed whole (``zeroed-range``: a
lost write of several batches, no header left inside), which the node keeps as one damaged range
-- spanning two epochs if one changes inside -- and repairs from its front, batch by batch. The
node must repair it from the quorum when it starts again, with no operator (docs/storage.md,
"Repair from the quorum"); the run's checks then require every injected damage to be repaired
(or covered by a snapshot the node installed), nothing acknowledged lost and every node's log
identical.

Batches are chosen at offsets no earlier storage fault of the run damaged: a batch damaged on a
majority of the voters at once may be unrepairable by design (the node stops, as it must).
"""

from __future__ import annotations

import itertools
import json
import random
from dataclasses import dataclass
from pathlib import Path

from raftmeta.records.codec import HEADER_SIZE
from raftmeta.records.walk import Damage, FoundBatch, walk_batches
from raftmeta.storage.errors import StorageError
from raftmeta.storage.high_watermark import read_high_watermark
from raftmeta.storage.snapshot import SNAPSHOT_SUFFIX, parse_snapshot_name

LOG_DIR_NAME = "__cluster_metadata-0"
KINDS: tuple[str, ...] = ("bit-flip", "zeroed-sector", "zeroed-range")
RANGE_BATCHES = (2, 3)  # how many consecutive batches a zeroed range covers
SECTOR_BYTES = 512
# The node's log events (raftmeta/server/node.py) that end a damaged batch's life.
REPAIRED_EVENT = "repaired a damaged batch from the quorum"
INSTALLED_EVENT = "installed snapshot from the leader"


@dataclass(frozen=True, slots=True)
class DiskDamage:
    node_id: int
    kind: str
    segment: str
    position: int  # of the damaged byte (bit-flip), sector (zeroed-sector) or range (zeroed-range) in the file
    base_offset: int  # of the damaged batch (the range's first)
    next_offset: int
    # The base offset of every batch damaged: one, or each of a zeroed range (each is repaired).
    batches: tuple[int, ...] = ()

    @property
    def bases(self) -> tuple[int, ...]:
        return self.batches or (self.base_offset,)

    def describe(self) -> str:
        if self.kind == "zeroed-range":
            return (
                f"{len(self.bases)} committed batches zeroed from byte {self.position} of node {self.node_id}'s "
                f"{self.segment}, offsets {self.base_offset}..{self.next_offset - 1}"
            )
        what = "a flipped bit" if self.kind == "bit-flip" else f"a zeroed {SECTOR_BYTES}-byte sector"
        return (
            f"{what} at byte {self.position} of node {self.node_id}'s {self.segment}, in the committed batch of "
            f"offsets {self.base_offset}..{self.next_offset - 1}"
        )

    def to_json(self) -> dict[str, object]:
        return {
            "node_id": self.node_id,
            "kind": self.kind,
            "segment": self.segment,
            "position": self.position,
            "base_offset": self.base_offset,
            "next_offset": self.next_offset,
            "batches": list(self.bases),
        }


def _candidates(segment: Path, high_watermark: int, snapshot_end: int, avoid: set[int]) -> list[FoundBatch]:
    """Intact batches of ``segment`` in [``snapshot_end``, ``high_watermark``) with an intact
    batch on each side."""
    found: list[FoundBatch] = []
    for item in walk_batches(segment.read_bytes()):
        if isinstance(item, Damage):
            break  # past damage nothing is sure; an earlier fault's damage ends the choice here
        found.append(item)
    return [
        batch
        for before, batch, after in zip(found, found[1:], found[2:], strict=False)
        if before.crc_ok
        and batch.crc_ok
        and after.crc_ok
        and batch.header.next_offset <= high_watermark
        and batch.header.base_offset >= snapshot_end
        and batch.header.base_offset not in avoid
    ]


def _runs(candidates: list[FoundBatch], length: int) -> list[list[FoundBatch]]:
    """Runs of ``length`` consecutive candidates (each one's neighbours intact, so the run's are)."""
    return [
        run
        for run in (candidates[i : i + length] for i in range(len(candidates) - length + 1))
        if all(a.header.next_offset == b.header.base_offset for a, b in itertools.pairwise(run))
    ]


def _zero_range(node_id: int, segment: Path, run: list[FoundBatch]) -> DiskDamage:
    start = run[0].position
    end = run[-1].position + run[-1].header.size_bytes
    with segment.open("r+b") as f:
        f.seek(start)
        f.write(bytes(end - start))
    bases = tuple(b.header.base_offset for b in run)
    return DiskDamage(node_id, "zeroed-range", segment.name, start, bases[0], run[-1].header.next_offset, bases)


def _sector_in(batch: FoundBatch) -> int | None:
    """The first 512-byte-aligned sector (file position) wholly inside ``batch``'s records."""
    start = batch.position + HEADER_SIZE
    sector = -(-start // SECTOR_BYTES) * SECTOR_BYTES
    return sector if sector + SECTOR_BYTES <= batch.position + batch.header.size_bytes else None


def damage_committed_batch(
    node_id: int, node_dir: Path, kind: str, rng: random.Random, avoid: set[int]
) -> DiskDamage | None:
    """Damage one committed batch of the stopped node's log (see the module docstring); None if it
    holds no batch that fits (a young log, or no batch big enough for a whole sector).

    Call only while the node is stopped: the files belong to its writer thread otherwise."""
    try:
        high_watermark = read_high_watermark(node_dir)
    except (StorageError, OSError):
        return None
    log_dir = node_dir / LOG_DIR_NAME
    snapshots = [parse_snapshot_name(p.name) for p in log_dir.glob(f"*{SNAPSHOT_SUFFIX}")]
    snapshot_end = max((s.offset for s in snapshots if s is not None), default=0)
    if kind == "zeroed-range":
        length = rng.choice(RANGE_BATCHES)
        runs = [
            (segment, run)
            for segment in sorted(log_dir.glob("*.log"))
            for run in _runs(_candidates(segment, high_watermark, snapshot_end, avoid), length)
        ]
        if not runs:
            return None
        segment, run = rng.choice(runs)
        return _zero_range(node_id, segment, run)
    choices: list[tuple[Path, FoundBatch]] = []
    for segment in sorted(log_dir.glob("*.log")):
        for batch in _candidates(segment, high_watermark, snapshot_end, avoid):
            if kind == "bit-flip" or _sector_in(batch) is not None:
                choices.append((segment, batch))
    if not choices:
        return None
    segment, batch = rng.choice(choices)
    data = bytearray(segment.read_bytes())
    if kind == "bit-flip":
        position = rng.randrange(batch.position + HEADER_SIZE, batch.position + batch.header.size_bytes)
        data[position] ^= 1 << rng.randrange(8)
    else:
        sector = _sector_in(batch)
        assert sector is not None
        position = sector
        data[position : position + SECTOR_BYTES] = bytes(SECTOR_BYTES)
    with segment.open("r+b") as f:
        f.seek(position)
        f.write(data[position : position + (1 if kind == "bit-flip" else SECTOR_BYTES)])
    return DiskDamage(node_id, kind, segment.name, position, batch.header.base_offset, batch.header.next_offset)


def repairs_in_log(log_text: str) -> tuple[set[int], list[int]]:
    """What a node's JSON log says ended damaged batches: the offsets it repaired from the quorum,
    and the end offsets of the snapshots it installed from its leader (which replace its log)."""
    repaired: set[int] = set()
    installed: list[int] = []
    for line in log_text.splitlines():
        if REPAIRED_EVENT not in line and INSTALLED_EVENT not in line:
            continue
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("event") == REPAIRED_EVENT:
            repaired.add(int(event["offset"]))
        elif event.get("event") == INSTALLED_EVENT:
            installed.append(int(event["end_offset"]))
    return repaired, installed


@dataclass(frozen=True, slots=True)
class RepairVerdict:
    """What the nodes' logs say became of the injected damages."""

    repaired: int  # repaired in place from the quorum
    replaced: int  # covered by a snapshot the node installed from its leader
    missing: list[str]  # neither: the damages, described


def judge_repairs(damages: list[DiskDamage], logs: dict[int, str]) -> RepairVerdict:
    """Each injected damage: repaired (its node's log has the repair event for its offset, for
    each batch of a zeroed range), replaced (a snapshot installed from the leader ends past it), or
    missing."""
    repaired = replaced = 0
    missing = []
    for damage in damages:
        done, installed = repairs_in_log(logs.get(damage.node_id, ""))
        if all(base in done for base in damage.bases):
            repaired += 1
        elif any(end >= damage.next_offset for end in installed):
            replaced += 1
        else:
            missing.append(damage.describe())
    return RepairVerdict(repaired, replaced, missing)
