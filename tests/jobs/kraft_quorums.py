"""A KRaft quorum's data dirs in Kafka's layout (``controller-N/data/__cluster_metadata-0``), every
controller holding the same one segment of the given batches, for the JVM-side Spark checks' tests."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from raftmeta.records.kafka.batch import encode_batch
from raftmeta.records.kafka.frames import LogRecord, new_batch

BATCH_TIME_MS = 1_800_000_000_000


def write_kraft_quorum(root: Path, batches: Sequence[Sequence[LogRecord]], nodes: Sequence[int] = (1, 2, 3)) -> Path:
    """``root`` holding one data dir per node, each with ``meta.properties`` and the batches (epoch
    1, consecutive offsets from 0) in segment 0."""
    data = b""
    offset = 0
    for records in batches:
        data += encode_batch(new_batch(offset, 1, records, BATCH_TIME_MS))
        offset += len(records)
    for node in nodes:
        log_dir = root / f"controller-{node}" / "data" / "__cluster_metadata-0"
        log_dir.mkdir(parents=True)
        (log_dir.parent / "meta.properties").write_text(f"node.id={node}\nversion=1\ncluster.id=c\n")
        (log_dir / "00000000000000000000.log").write_bytes(data)
    return root
