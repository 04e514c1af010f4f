"""Torn writes: a partial batch at the tail of a killed node's active segment.

A crash in the middle of an append leaves the first bytes of a batch on disk and not the rest.
We reproduce that exactly: frame a real batch (the codec's own ``encode_batch``) at the log's
end offset and epoch, and append a strict prefix of it to the last ``__cluster_metadata-0/*.log``
file while the node is down. Recovery must truncate it (docs/storage.md, "Recovery") and the
node must rejoin; the Spark consistency check reports any torn tail it still finds.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from pathlib import Path

from raftmeta.records import codec
from raftmeta.v1 import records_pb2

LOG_DIR_NAME = "__cluster_metadata-0"


@dataclass(frozen=True, slots=True)
class TornWrite:
    segment: str
    base_offset: int
    bytes_written: int
    batch_bytes: int

    def describe(self) -> str:
        return (
            f"{self.bytes_written} of {self.batch_bytes} bytes of a batch at offset {self.base_offset} "
            f"appended to {self.segment}"
        )


def append_torn_batch(node_dir: Path, rng: random.Random) -> TornWrite | None:
    """Append a strict prefix of a new batch to the node's active segment; None if it has none.

    Call only while the node is stopped: the file belongs to its writer thread otherwise.
    """
    segments = sorted((node_dir / LOG_DIR_NAME).glob("*.log"))
    if not segments:
        return None
    active = segments[-1]
    data = active.read_bytes()
    headers, valid_bytes, _ = codec.scan_valid_prefix(data)
    if headers:
        next_offset, epoch = headers[-1].next_offset, headers[-1].epoch
    else:
        next_offset, epoch = int(active.name.removesuffix(".log")), 0
    record = records_pb2.MetadataRecord(no_op=records_pb2.NoOpRecord()).SerializeToString()
    batch = codec.encode_batch(next_offset, epoch, [record] * rng.randint(1, 4), int(time.time() * 1000))
    cut = rng.randint(1, len(batch) - 1)
    with active.open("r+b") as f:
        # Write right after the valid prefix: anything past it is already a torn tail.
        f.seek(valid_bytes)
        f.write(batch[:cut])
        f.truncate(valid_bytes + cut)
    return TornWrite(active.name, next_offset, cut, len(batch))
