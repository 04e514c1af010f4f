"""Decode segment bytes into Arrow record batches: one row per record, or one row per batch.

Shared by the Spark data source (on executors) and the single-process reference checker, so
both see exactly the same rows. Damage never crashes a reader: a batch whose CRC fails becomes
a row with ``crc_ok = false`` and an ``error`` naming the file, byte position and reason, and the
reader continues after it when its length is trustworthy; a torn or unreadable tail ends the
file with one such row. (A crash inside a Spark task would kill a local-mode job with a long
Py4J traceback instead of a verdict.)

Decoding is the hot path of the verify job (a few microseconds per record, all in Python), so
the record decoder is built column-wise: per-batch values (node, position, epoch, ...) are
stored once per batch and spread with one ``take``; each record kind appends only the fields
it has, and its rows are scattered into the full columns at the end. Callers may ask for a
subset of the columns, a subset of record kinds (recognised from the record's first byte,
without parsing) and a byte range of batch starts, which is how a large segment is split
across several tasks.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa

from raftmeta.api.ids import uuid_to_str
from raftmeta.records import codec
from raftmeta.records.walk import Damage, FoundBatch, walk_batches
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
        # The voter ids of a VotersRecord, or of a LeaderChangeRecord (the set it was elected in).
        ("voters", pa.list_(pa.int32())),
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
        ("last_offset", pa.int64()),
        ("next_offset", pa.int64()),
        ("epoch", pa.int32()),
        ("record_count", pa.int32()),
        ("control", pa.bool_()),
        ("size_bytes", pa.int64()),
        ("append_timestamp_ms", pa.int64()),
        # The CRC32C stored in the header (what the batch claims; crc_ok says whether it holds).
        ("crc", pa.int64()),
        # A 64-bit blake2b of the whole batch, header included, as a signed long: followers store
        # the leader's bytes, so equal batches hash equally on every node, and a long is what the
        # JVM groups and joins cheapest (a 32-character hex string is 4x the bytes to shuffle).
        # Not the CRC: it leaves out the first 21 bytes, offset and epoch among them. Not Python's
        # hash(): it is salted per process.
        ("hash", pa.int64()),
        ("crc_ok", pa.bool_()),
        ("error", pa.string()),
    ]
)


# Record kinds are the names of MetadataRecord's oneof fields; two more mark rows without a record.
_ONEOF = records_pb2.MetadataRecord.DESCRIPTOR.oneofs_by_name["record"]
RECORD_KINDS = tuple(f.name for f in _ONEOF.fields)
CORRUPT_BATCH = "corrupt_batch"
UNDECODABLE = "undecodable"
# A MetadataRecord holds exactly one oneof field, so its first byte is that field's tag
# (field number << 3 | 2, a length-delimited message): the record's kind, read without parsing.
_KIND_BY_TAG = {f.number << 3 | 2: f.name for f in _ONEOF.fields}
# Row codes for the record_type column; the last code is null (a record with no field set).
_TYPE_NAMES: list[str | None] = [*RECORD_KINDS, CORRUPT_BATCH, UNDECODABLE, None]
_TYPE_CODE = {name: code for code, name in enumerate(_TYPE_NAMES)}

# Columns every row has, stored once per batch.
_PER_BATCH = ("position", "epoch", "batch_base_offset", "append_timestamp_ms", "control", "crc_ok", "error")
_PARTITION_LISTS = ("replicas", "isr", "adding_replicas", "removing_replicas")
# The columns each record kind sets (others stay null).
KIND_COLUMNS: dict[str, tuple[str, ...]] = {
    "topic": ("topic_id", "topic_name", "pool"),
    "partition": ("topic_id", "partition_id", *_PARTITION_LISTS, "leader", "leader_epoch", "partition_epoch"),
    "partition_change": (
        "topic_id", "partition_id", *_PARTITION_LISTS, "leader", "leader_epoch", "partition_epoch",
        "unclean_election",
    ),
    "remove_topic": ("topic_id",),
    "register_broker": ("broker_id", "broker_epoch", "rack", "pool", "fenced"),
    "unregister_broker": ("broker_id", "broker_epoch"),
    "fence_broker": ("broker_id", "broker_epoch"),
    "unfence_broker": ("broker_id", "broker_epoch"),
    "broker_log_dirs_change": ("broker_id", "broker_epoch"),
    "config": ("config_resource", "config_name", "config_value"),
    "leader_change": ("leader", "leader_epoch", "voters"),
    "request": ("request_id",),
    "voters": ("voters",),
}  # fmt: skip


def projected_schema(columns: Sequence[str] | None) -> pa.Schema:
    """RECORD_SCHEMA restricted to ``columns`` (in the schema's order); None = every column."""
    if columns is None:
        return RECORD_SCHEMA
    unknown = sorted(set(columns) - set(RECORD_SCHEMA.names))
    if unknown:
        raise ValueError(f"unknown record columns {unknown}; the columns are {RECORD_SCHEMA.names}")
    wanted = set(columns)
    return pa.schema([f for f in RECORD_SCHEMA if f.name in wanted])


class RawBatch(NamedTuple):
    """A batch as found in a file: its header and bytes, or the damage found at ``position``.
    (A tuple: one is made per batch, and a frozen dataclass's construction is twice as slow.)"""

    position: int
    header: codec.BatchHeader | None
    data: bytes
    crc_ok: bool
    error: str | None


def scan_batches(data: bytes, origin: str, start: int = 0, end: int | None = None) -> Iterator[RawBatch]:
    """Every batch of a segment's bytes, CRC-checked, tolerating damage (see module docstring):
    the records' one walk (:func:`raftmeta.records.walk.walk_batches`), its damage named after
    ``origin``.

    Only batches that start in ``[start, end)`` are yielded; the ones before are walked by their
    length headers alone (no CRC), which is how a split of a segment finds its first batch.
    """
    for found in walk_batches(data, start=start, end=end):
        if type(found) is FoundBatch:
            if found.crc_ok:
                yield RawBatch(found.position, found.header, found.data, True, None)
            else:
                where = f"byte {found.position} (base offset {found.header.base_offset})"
                yield RawBatch(found.position, found.header, found.data, False, f"{origin}: CRC32C mismatch at {where}")
        elif isinstance(found, Damage) and found.kind == "unreadable":  # the walk ends here
            yield RawBatch(found.position, None, b"", False, f"{origin}: {found.message()}")
        # Other damage: a CRC mismatch (its batch comes next, with crc_ok false) or a batch off the
        # offsets of the one before (the jobs check offsets themselves, across segments and nodes).


def batch_hash(data: bytes) -> int:
    """The ``hash`` column: blake2b-64 of a batch's bytes as a signed 64-bit integer."""
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big", signed=True)


def hash_text(value: int) -> str:
    """A batch hash as the 16 hex digits people compare in a report."""
    return f"{value & 0xFFFFFFFFFFFFFFFF:016x}"


def batch_rows(
    node_id: int, segment: str, data: bytes, *, start: int = 0, end: int | None = None
) -> Iterator[pa.RecordBatch]:
    """One row per batch (BATCH_SCHEMA) for the batches starting in ``[start, end)``."""
    cols: dict[str, list[object]] = {name: [] for name in BATCH_SCHEMA.names}
    for raw in scan_batches(data, segment, start, end):
        h = raw.header
        cols["node_id"].append(node_id)
        cols["segment"].append(segment)
        cols["position"].append(raw.position)
        cols["base_offset"].append(h.base_offset if h else None)
        cols["last_offset"].append(h.next_offset - 1 if h else None)
        cols["next_offset"].append(h.next_offset if h else None)
        cols["epoch"].append(h.epoch if h else None)
        cols["record_count"].append(h.record_count if h else None)
        cols["control"].append(h.is_control if h else None)
        cols["size_bytes"].append(len(raw.data) if h else None)
        cols["append_timestamp_ms"].append(h.append_timestamp_ms if h else None)
        cols["crc"].append(h.crc if h else None)
        cols["hash"].append(batch_hash(raw.data) if h else None)
        cols["crc_ok"].append(raw.crc_ok)
        cols["error"].append(raw.error)
        if len(cols["node_id"]) >= ROWS_PER_ARROW_BATCH:
            yield pa.RecordBatch.from_pydict(cols, schema=BATCH_SCHEMA)
            cols = {name: [] for name in BATCH_SCHEMA.names}
    if cols["node_id"]:
        yield pa.RecordBatch.from_pydict(cols, schema=BATCH_SCHEMA)


def peek_kind(payload: bytes) -> str | None:
    """The record's kind from its first bytes when the payload is exactly one known field, else
    None (then only parsing tells: an empty record, an unknown field, or a non-canonical encoding)."""
    if len(payload) < 2:
        return None
    kind = _KIND_BY_TAG.get(payload[0])
    if kind is None:
        return None
    length = payload[1]
    if length < 0x80:
        return kind if len(payload) == 2 + length else None
    if len(payload) > 2 and payload[2] < 0x80:
        return kind if len(payload) == 3 + ((length & 0x7F) | payload[2] << 7) else None
    return None


class _KindRows:
    """The rows of one record kind: their row numbers and the values of the columns it sets."""

    __slots__ = ("rows", "values")

    def __init__(self, kind: str) -> None:
        self.rows: list[int] = []
        self.values: dict[str, list[object]] = {name: [] for name in KIND_COLUMNS.get(kind, ())}


class _PartitionRows:
    """PartitionRecords (the bulk of any log), with list columns kept flat (values + offsets):
    Arrow builds them without converting a Python list per record."""

    __slots__ = ("ends", "flat", "rows", "values")

    def __init__(self) -> None:
        self.rows: list[int] = []
        self.values: dict[str, list[object]] = {
            name: [] for name in ("topic_id", "partition_id", "leader", "leader_epoch", "partition_epoch")
        }
        self.flat: dict[str, list[int]] = {name: [] for name in _PARTITION_LISTS}
        self.ends: dict[str, list[int]] = {name: [0] for name in _PARTITION_LISTS}


class RecordDecoder:
    """Decodes one file's batches into RECORD_SCHEMA rows (projected to ``columns``), keeping only
    records of ``kinds`` (None = all; damage rows are always kept) and, with ``below``, only rows
    whose offset is below it (a damage row without a readable offset is dropped then)."""

    def __init__(
        self,
        node_id: int,
        segment: str,
        *,
        columns: Sequence[str] | None = None,
        kinds: Collection[str] | None = None,
        below: int | None = None,
    ) -> None:
        self.node_id = node_id
        self.below = below
        self.segment = segment
        self.schema = projected_schema(columns)
        self.kinds = None if kinds is None else frozenset(kinds)
        self.keep_payload = "record" in self.schema.names
        # The one list column whose values the state job never reads: not even copied when left out.
        self.keep_removing = "removing_replicas" in self.schema.names
        self._topic_ids: dict[bytes, str] = {}
        self._reset()

    def _reset(self) -> None:
        self.offsets: list[int | None] = []
        self.batch_of: list[int] = []  # row -> index into the per-batch lists
        self.types: list[int] = []
        self.payloads: list[bytes | None] = []
        self.per_batch: dict[str, list[object]] = {name: [] for name in _PER_BATCH}
        self.partitions = _PartitionRows()
        self.others: dict[str, _KindRows] = {}

    @property
    def rows(self) -> int:
        return len(self.offsets)

    def _topic_id(self, raw: bytes) -> str:
        # Each topic id repeats in every partition record of the topic: convert it once.
        text = self._topic_ids.get(raw)
        if text is None:
            text = self._topic_ids[raw] = uuid_to_str(raw)
        return text

    def _batch(self, raw: RawBatch, crc_ok: bool, error: str | None) -> int:
        h = raw.header
        pb = self.per_batch
        pb["position"].append(raw.position)
        pb["epoch"].append(h.epoch if h else None)
        pb["batch_base_offset"].append(h.base_offset if h else None)
        pb["append_timestamp_ms"].append(h.append_timestamp_ms if h else None)
        pb["control"].append(h.is_control if h else None)
        pb["crc_ok"].append(crc_ok)
        pb["error"].append(error)
        return len(pb["position"]) - 1

    def _row(self, offset: int | None, batch: int, type_name: str | None, payload: bytes | None) -> int:
        self.offsets.append(offset)
        self.batch_of.append(batch)
        self.types.append(_TYPE_CODE[type_name])
        if self.keep_payload:
            self.payloads.append(payload)
        return len(self.offsets) - 1

    def add(self, raw: RawBatch) -> None:
        """Every (kept) record of one batch, or one damage row."""
        h = raw.header
        below = self.below
        if below is not None and (h is None or h.base_offset >= below):
            return
        if h is None or not raw.crc_ok:
            self._row(h.base_offset if h else None, self._batch(raw, raw.crc_ok, raw.error), CORRUPT_BATCH, None)
            return
        try:
            payloads = codec.split_records(raw.data, h)
        except codec.CorruptBatchError as exc:
            self._row(h.base_offset, self._batch(raw, False, f"{self.segment}: {exc}"), CORRUPT_BATCH, None)
            return
        batch = self._batch(raw, True, None)
        kinds = self.kinds
        parse = records_pb2.MetadataRecord.FromString
        partitions = self.partitions
        p_rows = partitions.rows
        values = partitions.values
        p_topic, p_id, p_leader = values["topic_id"], values["partition_id"], values["leader"]
        p_lepoch, p_pepoch = values["leader_epoch"], values["partition_epoch"]
        flat_r, flat_i, flat_a, flat_d = (partitions.flat[n] for n in _PARTITION_LISTS)
        end_r, end_i, end_a, end_d = (partitions.ends[n] for n in _PARTITION_LISTS)
        offsets, batch_of, types = self.offsets, self.batch_of, self.types
        partition_code = _TYPE_CODE["partition"]
        topic_ids = self._topic_ids
        keep_payload = self.keep_payload
        keep_removing = self.keep_removing
        base = h.base_offset
        if below is not None and base + len(payloads) > below:
            payloads = payloads[: below - base]
        for index, payload in enumerate(payloads):
            if kinds is not None:
                peeked = peek_kind(payload)
                if peeked is not None and peeked not in kinds:
                    continue
            offset = base + index
            try:
                record = parse(payload)
                kind = record.WhichOneof("record")
            except Exception as exc:  # protobuf's DecodeError: a record the CRC vouched for but that does not parse
                error = f"{self.segment}: offset {offset}: {exc}"
                self._row(offset, self._batch(raw, True, error), UNDECODABLE, payload)
                continue
            if kinds is not None and kind not in kinds:
                continue
            if kind == "partition":
                # Inlined: this branch runs for nearly every record of a large log.
                p = record.partition
                p_rows.append(len(offsets))
                offsets.append(offset)
                batch_of.append(batch)
                types.append(partition_code)
                if keep_payload:
                    self.payloads.append(payload)
                raw_id = p.topic_id
                topic_id = topic_ids.get(raw_id)
                p_topic.append(topic_id if topic_id is not None else self._topic_id(raw_id))
                p_id.append(p.partition_id)
                p_leader.append(p.leader)
                p_lepoch.append(p.leader_epoch)
                p_pepoch.append(p.partition_epoch)
                # [:] copies a repeated field into a list in C; iterating it from Python is ~8x slower.
                flat_r.extend(p.replicas[:])
                end_r.append(len(flat_r))
                flat_i.extend(p.isr[:])
                end_i.append(len(flat_i))
                flat_a.extend(p.adding_replicas[:])
                end_a.append(len(flat_a))
                if keep_removing:
                    flat_d.extend(p.removing_replicas[:])
                end_d.append(len(flat_d))
                continue
            row = self._row(offset, batch, kind, payload)
            if kind is None:
                continue
            rows = self.others.get(kind)
            if rows is None:
                rows = self.others[kind] = _KindRows(kind)
            rows.rows.append(row)
            for name, value in self._fields(kind, getattr(record, kind)):
                rows.values[name].append(value)

    def _fields(self, kind: str, r: Any) -> list[tuple[str, object]]:
        """(column, value) for every column of KIND_COLUMNS[kind], from the kind's message ``r``."""
        if kind == "topic":
            return [
                ("topic_id", self._topic_id(r.topic_id)),
                ("topic_name", r.name),
                ("pool", r.broker_pool if r.HasField("broker_pool") else None),
            ]
        if kind == "partition_change":
            out: list[tuple[str, object]] = [
                ("topic_id", self._topic_id(r.topic_id)),
                ("partition_id", r.partition_id),
                ("leader", r.leader if r.HasField("leader") else None),
                ("leader_epoch", r.leader_epoch),
                ("partition_epoch", r.partition_epoch),
                ("unclean_election", r.unclean_election),
            ]
            for name in _PARTITION_LISTS:
                out.append((name, getattr(r, name).ids[:] if r.HasField(name) else None))
            return out
        if kind == "remove_topic":
            return [("topic_id", self._topic_id(r.topic_id))]
        if kind == "register_broker":
            return [
                ("broker_id", r.broker_id),
                ("broker_epoch", r.broker_epoch),
                ("rack", r.rack if r.HasField("rack") else None),
                ("pool", r.pool if r.HasField("pool") else None),
                ("fenced", r.fenced),
            ]
        if kind in ("unregister_broker", "fence_broker", "unfence_broker", "broker_log_dirs_change"):
            return [("broker_id", r.broker_id), ("broker_epoch", r.broker_epoch)]
        if kind == "config":
            return [
                ("config_resource", r.resource_name),
                ("config_name", r.name),
                ("config_value", r.value if r.HasField("value") else None),
            ]
        if kind == "leader_change":
            return [
                ("leader", r.leader_id),
                ("leader_epoch", r.leader_epoch),
                ("voters", [v.voter_id for v in r.voters]),
            ]
        if kind == "voters":
            return [("voters", [v.voter_id for v in r.voters])]
        if kind == "request":
            return [("request_id", r.request_id)]
        return []

    def take(self) -> pa.RecordBatch:
        """The rows so far as one Arrow batch; starts a new one."""
        n = self.rows
        batch_of = pa.array(np.asarray(self.batch_of, dtype=np.int64))
        arrays: list[pa.Array] = []
        for field in self.schema:
            name, kind = field.name, field.type
            if name == "node_id":
                arrays.append(pa.array(np.full(n, self.node_id, dtype=np.int32)))
            elif name == "segment":
                arrays.append(pa.repeat(pa.scalar(self.segment, pa.string()), n))
            elif name == "offset":
                arrays.append(pa.array(self.offsets, pa.int64()))
            elif name == "record_type":
                arrays.append(pa.array(_TYPE_NAMES, pa.string()).take(pa.array(self.types, pa.int32())))
            elif name == "record":
                arrays.append(pa.array(self.payloads, pa.binary()))
            elif name in self.per_batch:
                arrays.append(pa.array(self.per_batch[name], kind).take(batch_of))
            else:
                arrays.append(self._scatter(n, name, kind))
        batch = pa.RecordBatch.from_arrays(arrays, schema=self.schema)
        self._reset()
        return batch

    def _scatter(self, n: int, name: str, kind: pa.DataType) -> pa.Array:
        """Column ``name``: each kind's values at its rows, null elsewhere."""
        parts: list[tuple[list[int], pa.Array]] = []
        p = self.partitions
        if p.rows and (name in p.values or name in p.flat):
            if name in p.flat:
                ends = pa.array(p.ends[name], pa.int32())
                values: pa.Array = pa.ListArray.from_arrays(ends, pa.array(p.flat[name], pa.int32()))
            else:
                values = pa.array(p.values[name], kind)
            parts.append((p.rows, values))
        for rows in self.others.values():
            if name in rows.values:
                parts.append((rows.rows, pa.array(rows.values[name], kind)))
        if not parts:
            return pa.nulls(n, kind)
        if len(parts) == 1 and len(parts[0][0]) == n:
            return parts[0][1]  # one kind on every row: its rows are 0..n-1 in order
        merged = pa.concat_arrays([v for _, v in parts] + [pa.nulls(1, kind)])
        index = np.full(n, len(merged) - 1, dtype=np.int64)
        start = 0
        for positions, v in parts:
            index[np.asarray(positions, dtype=np.int64)] = np.arange(start, start + len(v))
            start += len(v)
        return merged.take(pa.array(index))


def record_rows(
    node_id: int,
    segment: str,
    data: bytes,
    *,
    columns: Sequence[str] | None = None,
    kinds: Collection[str] | None = None,
    start: int = 0,
    end: int | None = None,
    below: int | None = None,
) -> Iterator[pa.RecordBatch]:
    """One row per record (RECORD_SCHEMA, or its ``columns``) of the batches starting in
    ``[start, end)``, only records of ``kinds`` and offsets below ``below`` if given; one row per
    damaged batch, with crc_ok false, and one per record that does not parse (record_type
    ``undecodable``)."""
    decoder = RecordDecoder(node_id, segment, columns=columns, kinds=kinds, below=below)
    for raw in scan_batches(data, segment, start, end):
        decoder.add(raw)
        if decoder.rows >= ROWS_PER_ARROW_BATCH:
            yield decoder.take()
    if decoder.rows:
        yield decoder.take()
