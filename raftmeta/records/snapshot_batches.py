"""A snapshot's batches (docs/log-format.md): header, voter set, the image's records, footer.

Pure, so that the node's storage (raftmeta/storage/snapshot.py, which writes them to a file) and
the simulator (raftmeta/sim/plane.py, which keeps them in memory) encode snapshots alike."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from raftmeta.records import codec
from raftmeta.records.codec import FramedRecords
from raftmeta.v1 import records_pb2

SNAPSHOT_VERSION = 1
DEFAULT_BATCH_RECORDS = 1000
DEFAULT_BATCH_BYTES = 1024 * 1024
# A run of framed records bigger than this is cut between records (see snapshot_batches).
RUN_BYTES_MAX = 16 * 1024 * 1024


def _control(message: records_pb2.MetadataRecord) -> list[bytes]:
    return [message.SerializeToString()]


def snapshot_batches(
    epoch: int,
    records: Iterable[bytes | FramedRecords],
    *,
    last_contained_log_timestamp_ms: int,
    append_timestamp_ms: int,
    batch_records: int = DEFAULT_BATCH_RECORDS,
    batch_bytes: int = DEFAULT_BATCH_BYTES,
    voters: records_pb2.VotersRecord | None = None,
) -> Iterator[bytes]:
    """The batches of a snapshot whose last batch had ``epoch``, in order: header, the voter set
    (a control batch, as Kafka's snapshots carry their VotersRecord after the header) when given,
    data batches, footer.

    ``records`` are serialized records, or runs of them already framed (``FramedRecords``: a
    topic's partitions, as the controller keeps them). A batch ends with the record or run that
    brings it to ``batch_records`` records or ``batch_bytes`` bytes; a run goes into a batch
    whole -- one that would take the open batch past ``batch_bytes`` starts the next one; the
    record count is no reason to part a topic from its TopicRecord -- so no Python step is spent
    per record of a run. A topic has at most 10,000 partitions
    (``PARTITIONS_PER_TOPIC_MAX``), so a run is far below ``RUN_BYTES_MAX``, beyond which it would
    be cut between records."""
    header = records_pb2.MetadataRecord(
        snapshot_header=records_pb2.SnapshotHeaderRecord(
            version=SNAPSHOT_VERSION, last_contained_log_timestamp_ms=last_contained_log_timestamp_ms
        )
    )
    yield codec.encode_batch(0, epoch, _control(header), append_timestamp_ms, control=True)
    offset = 1
    if voters is not None:
        voters_record = records_pb2.MetadataRecord(voters=voters)
        yield codec.encode_batch(offset, epoch, _control(voters_record), append_timestamp_ms, control=True)
        offset += 1
    pieces: list[bytes] = []  # the open batch's body, in framed pieces
    count = size = 0

    def close() -> bytes:
        nonlocal offset, pieces, count, size
        batch = codec.encode_framed_batch(offset, epoch, b"".join(pieces), count, append_timestamp_ms)
        offset += count
        pieces, count, size = [], 0, 0
        return batch

    for item in records:
        runs = (
            item.pieces(RUN_BYTES_MAX)
            if isinstance(item, FramedRecords)
            else (FramedRecords(codec.frame_record(item), 1),)
        )
        for body, records_in_run in runs:
            if not records_in_run:
                continue  # an empty run (a topic without partitions) frames nothing
            if records_in_run > 1 and pieces and size + len(body) > batch_bytes:
                yield close()
            pieces.append(body)
            count += records_in_run
            size += len(body)
            if count >= batch_records or size >= batch_bytes:
                yield close()
    if pieces:
        yield close()
    footer = records_pb2.MetadataRecord(snapshot_footer=records_pb2.SnapshotFooterRecord(version=SNAPSHOT_VERSION))
    yield codec.encode_batch(offset, epoch, _control(footer), append_timestamp_ms, control=True)
