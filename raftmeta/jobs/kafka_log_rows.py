"""The rows of Kafka-format metadata logs (``__cluster_metadata-0`` directories), the same
through either reader: the JVM one (deploy/spark/kafka-log-reader, Kafka's own decoder, inside
Spark) and raftmeta's Python one (:mod:`raftmeta.records.kafka`, here).

Per file, batch by batch, in the columns of :data:`COLUMNS`:

- a batch whose records decode gives one row per record (``record_index``, ``offset``,
  ``record_type`` ... set), its CRC verdict in ``crc_ok`` (a bad CRC is a row that says so);
- a batch whose records do not decode gives one row, ``damage`` ``record``, ``offset`` the first
  record that fails;
- where the rest of the file cannot be read (a length that cannot be trusted) one last row,
  ``damage`` ``unreadable``, or ``truncated`` when the bytes end inside the batch.

``batch_digest`` is the SHA-256 of the whole batch's bytes (leader epoch included, which the CRC
leaves out), so that two nodes' batches at one offset compare by value.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

from raftmeta.records.kafka.batch import LOG_OVERHEAD
from raftmeta.records.kafka.frames import ControlRecord, LogRecord
from raftmeta.records.kafka.message import Struct
from raftmeta.records.kafka.walk import FoundKafkaBatch, walk_kafka_batches
from raftmeta.records.walk import Damage
from raftmeta.storage.meta_properties import read_meta_properties

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

Reader = Literal["jvm", "python"]
READERS: Final = ("jvm", "python")

# (name, Spark SQL type): the JVM reader's LogRows.SCHEMA, in its order.
COLUMNS: Final = (
    ("node", "int"),
    ("log_dir", "string"),
    ("file", "string"),
    ("position", "bigint"),
    ("base_offset", "bigint"),
    ("last_offset", "bigint"),
    ("partition_leader_epoch", "int"),
    ("control", "boolean"),
    ("crc_ok", "boolean"),
    ("batch_digest", "string"),
    ("damage", "string"),
    ("record_index", "int"),
    ("offset", "bigint"),
    ("record_type", "string"),
    ("record_version", "int"),
    ("topic_id", "string"),
    ("topic_name", "string"),
    ("partition_id", "int"),
    ("replicas", "array<int>"),
    ("isr", "array<int>"),
    ("adding_replicas", "array<int>"),
    ("removing_replicas", "array<int>"),
    ("elr", "array<int>"),
    ("leader", "int"),
    ("leader_epoch", "int"),
    ("partition_epoch", "int"),
    ("broker_id", "int"),
    ("rack", "string"),
    ("fenced", "boolean"),
    ("config_resource_type", "int"),
    ("config_resource_name", "string"),
    ("config_name", "string"),
    ("config_value", "string"),
    ("voters", "array<int>"),
)
COLUMN_NAMES: Final = tuple(name for name, _ in COLUMNS)
DAMAGE_RECORD: Final = "record"
DAMAGE_UNREADABLE: Final = "unreadable"
DAMAGE_TRUNCATED: Final = "truncated"
LOG_FILE_SUFFIXES: Final = (".log", ".checkpoint")


def schema() -> StructType:
    from pyspark.sql.types import StructType

    parsed = StructType.fromDDL(", ".join(f"{name} {kind}" for name, kind in COLUMNS))
    assert isinstance(parsed, StructType)
    return parsed


def log_files(log_dir: Path, only: Collection[str] | None = None) -> list[str]:
    """The segment and snapshot file names of ``log_dir`` (only those named in ``only`` when
    given), in name (offset) order, as the JVM reader plans them."""
    return sorted(
        p.name
        for p in log_dir.iterdir()
        if p.name.endswith(LOG_FILE_SUFFIXES) and p.is_file() and (only is None or p.name in only)
    )


def _node(log_dir: Path) -> int | None:
    meta = read_meta_properties(log_dir.absolute().parent)
    return None if meta is None else meta.node_id


def python_rows(log_dirs: Sequence[str], files: Collection[str] | None = None) -> list[dict[str, Any]]:
    """Every row of every file of ``log_dirs`` (of the ``files`` named, when given), by
    raftmeta's Python reader."""
    rows: list[dict[str, Any]] = []
    for log_dir in log_dirs:
        node = _node(Path(log_dir))
        for name in log_files(Path(log_dir), files):
            base = {"node": node, "log_dir": log_dir, "file": name}
            rows.extend(file_rows((Path(log_dir) / name).read_bytes(), base))
    return rows


def file_rows(data: bytes, base: dict[str, Any]) -> list[dict[str, Any]]:
    """One file's rows (``base`` gives node, log_dir and file)."""
    rows: list[dict[str, Any]] = []
    failed_at = -1  # the offset of the record a "record" damage names, for the batch that follows it
    for found in walk_kafka_batches(data):
        if isinstance(found, Damage):
            if found.kind == DAMAGE_RECORD:
                failed_at = found.offset
            elif found.kind == DAMAGE_UNREADABLE:
                rows.append(_unreadable_row(data, found, base))
            continue
        rows.extend(_batch_rows(data, found, base, failed_at))
    return rows


def _row(**values: Any) -> dict[str, Any]:
    row = dict.fromkeys(COLUMN_NAMES)
    row.update(values)
    return row


def _unreadable_row(data: bytes, damage: Damage, base: dict[str, Any]) -> dict[str, Any]:
    position = damage.position
    readable = len(data) - position >= LOG_OVERHEAD
    return _row(
        **base,
        position=position,
        base_offset=int.from_bytes(data[position : position + 8], "big", signed=True) if readable else None,
        damage=DAMAGE_TRUNCATED if damage.truncated else DAMAGE_UNREADABLE,
    )


def _batch_rows(data: bytes, found: FoundKafkaBatch, base: dict[str, Any], failed_at: int) -> list[dict[str, Any]]:
    batch = found.batch
    batch_columns = {
        **base,
        "position": found.position,
        "base_offset": batch.base_offset,
        "last_offset": batch.last_offset,
        "partition_leader_epoch": batch.partition_leader_epoch,
        "control": batch.is_control,
        "crc_ok": found.crc_ok,
        "batch_digest": hashlib.sha256(data[found.position : found.position + found.size]).hexdigest(),
    }
    if found.records is None:
        return [_row(**batch_columns, offset=failed_at, damage=DAMAGE_RECORD)]
    return [
        _row(**batch_columns, record_index=index, offset=offset, **record_columns(record))
        for index, (offset, record) in enumerate(found.records)
    ]


def _ints(value: object) -> list[int] | None:
    return None if value is None else [int(v) for v in value]  # type: ignore[attr-defined]


def record_columns(record: LogRecord) -> dict[str, Any]:
    """The record's type, version and the columns the checks read (the JVM's RecordColumns)."""
    if isinstance(record, ControlRecord):
        columns: dict[str, Any] = {"record_type": record.name, "record_version": record.key_version}
    else:
        columns = {"record_type": record.name, "record_version": record.version}
    data = record.data
    if not isinstance(data, Struct):
        return columns
    name = record.name
    if name in ("PartitionRecord", "PartitionChangeRecord"):
        columns.update(
            topic_id=str(data["TopicId"]),
            partition_id=data["PartitionId"],
            replicas=_ints(data["Replicas"]),
            isr=_ints(data["Isr"]),
            adding_replicas=_ints(data["AddingReplicas"]),
            removing_replicas=_ints(data["RemovingReplicas"]),
            # Not in versions before 1: null, as Kafka's accessor gives its default.
            elr=_ints(data.values.get("EligibleLeaderReplicas")),
            leader=data["Leader"],
        )
        if name == "PartitionRecord":  # a change record carries no epochs: Kafka's replay derives them
            columns.update(leader_epoch=data["LeaderEpoch"], partition_epoch=data["PartitionEpoch"])
    elif name == "TopicRecord":
        columns.update(topic_id=str(data["TopicId"]), topic_name=data["Name"])
    elif name == "RemoveTopicRecord":
        columns.update(topic_id=str(data["TopicId"]))
    elif name == "RegisterBrokerRecord":
        columns.update(broker_id=data["BrokerId"], rack=data["Rack"], fenced=bool(data["Fenced"]))
    elif name == "UnregisterBrokerRecord":
        columns.update(broker_id=data["BrokerId"])
    elif name in ("FenceBrokerRecord", "UnfenceBrokerRecord"):
        columns.update(broker_id=data["Id"], fenced=name == "FenceBrokerRecord")
    elif name == "BrokerRegistrationChangeRecord":
        # Fenced: 1 fences, -1 unfences, 0 leaves it as it is.
        fenced = int(data["Fenced"])  # type: ignore[call-overload]
        columns.update(broker_id=data["BrokerId"], fenced=None if fenced == 0 else fenced > 0)
    elif name == "ConfigRecord":
        columns.update(
            config_resource_type=data["ResourceType"],
            config_resource_name=data["ResourceName"],
            config_name=data["Name"],
            config_value=data["Value"],
        )
    elif name == "LeaderChangeMessage":
        columns.update(leader=data["LeaderId"], voters=[int(v["VoterId"]) for v in data["Voters"]])  # type: ignore[attr-defined]
    elif name == "VotersRecord":
        columns.update(voters=[int(v["VoterId"]) for v in data["Voters"]])  # type: ignore[attr-defined]
    return columns


def read_log_rows(
    spark: SparkSession,
    log_dirs: Sequence[str],
    reader: Reader,
    files: Collection[str] | None = None,
    split_bytes: int = 0,
) -> DataFrame:
    """The rows of ``log_dirs`` (of the ``files`` named, when given) as a DataFrame: decoded in
    Spark's JVM by Kafka's code (``jvm``; its jar must be on ``spark.jars``,
    :func:`raftmeta.jobs.kafka_log_jar.reader_jars`), or by raftmeta's Python reader in this
    process (``python``, the fallback where no JVM build is possible). ``split_bytes`` (``jvm``):
    files larger than this are read in byte ranges of about this size, cut at batch boundaries,
    one task each (0: a task per file); the rows are the same."""
    if reader == "jvm":
        from raftmeta.jobs.kafka_log_jar import SHORT_NAME

        source = spark.read.format(SHORT_NAME).option("paths", ",".join(log_dirs))
        if files is not None:
            source = source.option("files", ",".join(files))
        if split_bytes:
            source = source.option("split_bytes", str(split_bytes))
        return source.load()
    rows = python_rows(log_dirs, files)
    return spark.createDataFrame([tuple(row[name] for name in COLUMN_NAMES) for row in rows], schema())
