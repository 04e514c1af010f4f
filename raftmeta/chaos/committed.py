"""What the committed log says, from the tape and from a stopped node's files (no Spark).

Two sources, merged:

- the tape (:mod:`raftmeta.chaos.tape`): committed batches with their offsets, copied during the
  run, so writes later compacted into a snapshot still have an offset and a batch;
- the node with the longest committed prefix, replayed as the Spark job does it: its newest
  snapshot, then its committed log from the snapshot's end. This gives the final state, and it
  covers whatever the tape missed (snapshot records have no offset of their own).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from raftmeta.chaos.tape import CommittedTape
from raftmeta.jobs import columns, layout
from raftmeta.jobs.datasource import FilePartition, read_partition


@dataclass
class CommittedLog:
    node_id: int
    high_watermark: int
    base_offset: int  # end of the replayed node's snapshot (0: its whole log is in its files)
    # Log records (tape and retained log), deduplicated by offset: topic id -> {offset: name}.
    topics: dict[str, dict[int, str]] = field(default_factory=dict)
    removed: set[str] = field(default_factory=set)
    request_batch: dict[str, int] = field(default_factory=dict)  # request id -> batch base offset
    batch_topics: dict[int, set[str]] = field(default_factory=dict)  # batch base offset -> names created
    snapshot_topics: dict[str, str] = field(default_factory=dict)  # topic id -> name, in the snapshot
    # What the replayed node's files alone still hold (what the Spark job will see).
    retained_topics: set[str] = field(default_factory=set)
    retained_removed: set[str] = field(default_factory=set)
    live: dict[str, str] = field(default_factory=dict)  # name -> id after replaying the node
    requests: set[str] = field(default_factory=set)  # request ids in the node's snapshot and log
    tape_gaps: list[tuple[int, int]] = field(default_factory=list)
    tape_end: int = 0

    @property
    def complete(self) -> bool:
        """Every committed offset below the node's snapshot is on the tape (or there is no snapshot):
        any committed write has a record here, even if its topic was deleted since."""
        return self.base_offset == 0 or (not self.tape_gaps and self.tape_end >= self.base_offset)

    def offset_of(self, topic_id: str) -> int | None:
        offsets = self.topics.get(topic_id)
        return min(offsets) if offsets else None

    def names_of(self, topic_id: str) -> set[str]:
        names = set(self.topics.get(topic_id, {}).values())
        if topic_id in self.snapshot_topics:
            names.add(self.snapshot_topics[topic_id])
        return names


def read_committed(data_dir: str, tape: CommittedTape | None = None) -> CommittedLog:
    nodes = layout.discover(data_dir)
    longest = max(nodes, key=lambda n: (n.high_watermark, -n.node_id))
    snapshot = longest.newest_snapshot
    base = snapshot.end_offset if snapshot is not None else 0
    log = CommittedLog(longest.node_id, longest.high_watermark, base)
    if snapshot is not None:
        part = FilePartition(snapshot.uri, longest.node_id, snapshot.uri.rsplit("/", 1)[-1], "records", -1)
        for row in _rows(read_partition(part)):
            _replay_live(log, row)
            if row["record_type"] == "topic":
                log.snapshot_topics[str(row["topic_id"])] = str(row["topic_name"])
                log.retained_topics.add(str(row["topic_id"]))
    for segment in longest.segments:
        part = FilePartition(segment.uri, longest.node_id, segment.uri.rsplit("/", 1)[-1], "records", -1)
        for row in _rows(read_partition(part)):
            offset = row["offset"]
            if isinstance(offset, int) and base <= offset < longest.high_watermark:
                _replay_live(log, row)
                _index(log, row)
                if row["record_type"] == "topic":
                    log.retained_topics.add(str(row["topic_id"]))
                elif row["record_type"] == "remove_topic":
                    log.retained_removed.add(str(row["topic_id"]))
    if tape is not None:
        for base_offset in sorted(tape.batches):
            for row in _rows(columns.record_rows(0, "tape", tape.batches[base_offset])):
                _index(log, row)
        log.tape_gaps = tape.gaps()
        log.tape_end = tape.end_offset()
    return log


def _rows(batches: Iterable[object]) -> list[dict[str, object]]:
    return [r for batch in batches for r in batch.to_pylist() if r["crc_ok"]]  # type: ignore[attr-defined]


def _index(log: CommittedLog, row: dict[str, object]) -> None:
    """Record a log record (one with a real offset and batch) in the lookup tables."""
    kind = row["record_type"]
    offset, batch = row["offset"], row["batch_base_offset"]
    if not isinstance(offset, int) or not isinstance(batch, int):
        return
    if kind == "topic":
        topic_id, name = str(row["topic_id"]), str(row["topic_name"])
        log.topics.setdefault(topic_id, {})[offset] = name
        log.batch_topics.setdefault(batch, set()).add(name)
    elif kind == "remove_topic":
        log.removed.add(str(row["topic_id"]))
    elif kind == "request":
        log.request_batch[str(row["request_id"])] = batch


def _replay_live(log: CommittedLog, row: dict[str, object]) -> None:
    """Follow the replayed node's records in order to its final topics (name -> id) and requests."""
    if row["record_type"] == "request":
        log.requests.add(str(row["request_id"]))
    elif row["record_type"] == "topic":
        log.live[str(row["topic_name"])] = str(row["topic_id"])
    elif row["record_type"] == "remove_topic":
        removed = str(row["topic_id"])
        for name in [n for n, i in log.live.items() if i == removed]:
            del log.live[name]
