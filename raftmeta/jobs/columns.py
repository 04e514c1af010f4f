"""Decode segment bytes into Arrow record batches: one row per record, or one row per batch.

Shared by the Spark data source (on executors) and the single-process reference checker, so
both see exactly the same rows. Damage never crashes a reader: a batch whose CRC fails becomes
a row with ``crc_ok = false`` and an ``error`` naming the file, byte position and reason, and the
reader continues after it when its length is trustworthy; a torn or unreadable tail ends the
file with one such row. (A crash inside a Spark task would kill a local-mode job with a long
Py4J traceback instead of a verdict.)
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass

import google_crc32c
import pyarrow as pa

from raftmeta.ids import uuid_to_str
from raftmeta.storage import codec
from raftmeta.v1 import records_pb2

ROWS_PER_ARROW_BATCH = 65_536

RECORD_SCHEMA = pa.schema(
    [
        ("node_id", pa.int32()),
        ("segment", pa.string()),
        ("position", pa.int64()),
        ("offset", pa.int64()),
        ("epoch", pa.int32()),
        ("batch_base_offset", pa.int64()),
        ("append_timestamp_ms", pa.int64()),
        ("control", pa.bool_()),
        ("record_type", pa.string()),
        ("topic_id", pa.string()),
        ("topic_name", pa.string()),
        ("partition_id", pa.int32()),
        ("replicas", pa.list_(pa.int32())),
        ("isr", pa.list_(pa.int32())),
        ("adding_replicas", pa.list_(pa.int32())),
        ("removing_replicas", pa.list_(pa.int32())),
        ("leader", pa.int32()),
        ("leader_epoch", pa.int32()),
        ("partition_epoch", pa.int32()),
        ("unclean_election", pa.bool_()),
        ("broker_id", pa.int32()),
        ("broker_epoch", pa.int64()),
        ("rack", pa.string()),
        ("pool", pa.string()),
        ("fenced", pa.bool_()),
        ("config_resource", pa.string()),
        ("config_name", pa.string()),
        ("config_value", pa.string()),
        ("request_id", pa.string()),
        ("crc_ok", pa.bool_()),
        ("error", pa.string()),
        ("record", pa.binary()),
    ]
)

BATCH_SCHEMA = pa.schema(
    [
        ("node_id", pa.int32()),
        ("segment", pa.string()),
        ("position", pa.int64()),
        ("base_offset", pa.int64()),
        ("next_offset", pa.int64()),
        ("epoch", pa.int32()),
        ("record_count", pa.int32()),
        ("control", pa.bool_()),
        ("size_bytes", pa.int64()),
        ("append_timestamp_ms", pa.int64()),
        # blake2b-128 of the whole batch: followers store the leader's bytes, so equal batches
        # have equal digests on every node (Python's hash() is salted per process: never use it).
        ("digest", pa.string()),
        ("crc_ok", pa.bool_()),
        ("error", pa.string()),
    ]
)


@dataclass(frozen=True, slots=True)
class RawBatch:
    """A batch as found in a file: its header and bytes, or the damage found at ``position``."""

    position: int
    header: codec.BatchHeader | None
    data: bytes
    crc_ok: bool
    error: str | None


def scan_batches(data: bytes, origin: str) -> Iterator[RawBatch]:
    """Every batch of a segment's bytes, CRC-checked, tolerating damage (see module docstring)."""
    pos = 0
    size = len(data)
    while pos < size:
        try:
            header = codec.decode_header(data, pos)
        except codec.CorruptBatchError as exc:
            # Length or framing unreadable: nothing after this point can be located.
            yield RawBatch(pos, None, b"", False, f"{origin}: {exc}")
            return
        end = pos + header.size_bytes
        chunk = data[pos:end]
        crc_ok = google_crc32c.value(chunk[codec.CRC_START :]) == header.crc
        error = None if crc_ok else f"{origin}: CRC32C mismatch at byte {pos} (base offset {header.base_offset})"
        yield RawBatch(pos, header, chunk, crc_ok, error)
        pos = end


def batch_rows(node_id: int, segment: str, data: bytes) -> Iterator[pa.RecordBatch]:
    """One row per batch (BATCH_SCHEMA)."""
    cols: dict[str, list[object]] = {name: [] for name in BATCH_SCHEMA.names}
    for raw in scan_batches(data, segment):
        h = raw.header
        cols["node_id"].append(node_id)
        cols["segment"].append(segment)
        cols["position"].append(raw.position)
        cols["base_offset"].append(h.base_offset if h else None)
        cols["next_offset"].append(h.next_offset if h else None)
        cols["epoch"].append(h.epoch if h else None)
        cols["record_count"].append(h.record_count if h else None)
        cols["control"].append(h.is_control if h else None)
        cols["size_bytes"].append(len(raw.data) if h else None)
        cols["append_timestamp_ms"].append(h.append_timestamp_ms if h else None)
        cols["digest"].append(hashlib.blake2b(raw.data, digest_size=16).hexdigest() if h else None)
        cols["crc_ok"].append(raw.crc_ok)
        cols["error"].append(raw.error)
        if len(cols["node_id"]) >= ROWS_PER_ARROW_BATCH:
            yield pa.RecordBatch.from_pydict(cols, schema=BATCH_SCHEMA)
            cols = {name: [] for name in BATCH_SCHEMA.names}
    if cols["node_id"]:
        yield pa.RecordBatch.from_pydict(cols, schema=BATCH_SCHEMA)


class _RecordColumns:
    """Column builders for RECORD_SCHEMA; one ``add`` per record."""

    def __init__(self) -> None:
        self.cols: dict[str, list[object]] = {name: [] for name in RECORD_SCHEMA.names}
        self.rows = 0

    def add(self, base: dict[str, object], fields: dict[str, object]) -> None:
        for name, column in self.cols.items():
            column.append(fields.get(name, base.get(name)))
        self.rows += 1

    def take(self) -> pa.RecordBatch:
        batch = pa.RecordBatch.from_pydict(self.cols, schema=RECORD_SCHEMA)
        self.cols = {name: [] for name in RECORD_SCHEMA.names}
        self.rows = 0
        return batch


def record_fields(record: records_pb2.MetadataRecord) -> dict[str, object]:
    """The typed columns of one decoded record (absent = null)."""
    kind = record.WhichOneof("record")
    out: dict[str, object] = {"record_type": kind}
    if kind == "topic":
        t = record.topic
        # For a topic row, ``pool`` is the pool it was created in (its replicas must stay there).
        out.update(
            topic_id=uuid_to_str(t.topic_id),
            topic_name=t.name,
            pool=t.broker_pool if t.HasField("broker_pool") else None,
        )
    elif kind == "partition":
        p = record.partition
        out.update(
            topic_id=uuid_to_str(p.topic_id),
            partition_id=p.partition_id,
            replicas=list(p.replicas),
            isr=list(p.isr),
            adding_replicas=list(p.adding_replicas),
            removing_replicas=list(p.removing_replicas),
            leader=p.leader,
            leader_epoch=p.leader_epoch,
            partition_epoch=p.partition_epoch,
        )
    elif kind == "partition_change":
        c = record.partition_change
        out.update(
            topic_id=uuid_to_str(c.topic_id),
            partition_id=c.partition_id,
            replicas=list(c.replicas.ids) if c.HasField("replicas") else None,
            isr=list(c.isr.ids) if c.HasField("isr") else None,
            adding_replicas=list(c.adding_replicas.ids) if c.HasField("adding_replicas") else None,
            removing_replicas=list(c.removing_replicas.ids) if c.HasField("removing_replicas") else None,
            leader=c.leader if c.HasField("leader") else None,
            leader_epoch=c.leader_epoch,
            partition_epoch=c.partition_epoch,
            unclean_election=c.unclean_election,
        )
    elif kind == "remove_topic":
        out.update(topic_id=uuid_to_str(record.remove_topic.topic_id))
    elif kind == "register_broker":
        b = record.register_broker
        out.update(
            broker_id=b.broker_id,
            broker_epoch=b.broker_epoch,
            rack=b.rack if b.HasField("rack") else None,
            pool=b.pool if b.HasField("pool") else None,
            fenced=b.fenced,
        )
    elif kind in ("unregister_broker", "fence_broker", "unfence_broker"):
        b = getattr(record, kind)
        out.update(broker_id=b.broker_id, broker_epoch=b.broker_epoch)
    elif kind == "config":
        config = record.config
        out.update(
            config_resource=config.resource_name,
            config_name=config.name,
            config_value=config.value if config.HasField("value") else None,
        )
    elif kind == "leader_change":
        out.update(leader=record.leader_change.leader_id, leader_epoch=record.leader_change.leader_epoch)
    elif kind == "request":
        out.update(request_id=record.request.request_id)
    return out


def record_rows(node_id: int, segment: str, data: bytes) -> Iterator[pa.RecordBatch]:
    """One row per record (RECORD_SCHEMA); one row per damaged batch, with crc_ok false."""
    builder = _RecordColumns()
    for raw in scan_batches(data, segment):
        h = raw.header
        base: dict[str, object] = {
            "node_id": node_id,
            "segment": segment,
            "position": raw.position,
            "crc_ok": raw.crc_ok,
            "error": raw.error,
        }
        if h is not None:
            base.update(
                epoch=h.epoch,
                batch_base_offset=h.base_offset,
                append_timestamp_ms=h.append_timestamp_ms,
                control=h.is_control,
            )
        if h is None or not raw.crc_ok:
            builder.add(base, {"record_type": "corrupt_batch", "offset": h.base_offset if h else None})
        else:
            try:
                payloads = codec.split_records(raw.data, h)
            except codec.CorruptBatchError as exc:
                builder.add(
                    base,
                    {
                        "record_type": "corrupt_batch",
                        "offset": h.base_offset,
                        "crc_ok": False,
                        "error": f"{segment}: {exc}",
                    },
                )
                payloads = []
            for index, payload in enumerate(payloads):
                record = records_pb2.MetadataRecord()
                try:
                    record.ParseFromString(payload)
                    fields = record_fields(record)
                except Exception as exc:  # protobuf's DecodeError: a record the CRC vouched for but that does not parse
                    fields = {
                        "record_type": "undecodable",
                        "error": f"{segment}: offset {h.base_offset + index}: {exc}",
                    }
                fields["offset"] = h.base_offset + index
                fields["record"] = payload
                builder.add(base, fields)
        if builder.rows >= ROWS_PER_ARROW_BATCH:
            yield builder.take()
    if builder.rows:
        yield builder.take()
