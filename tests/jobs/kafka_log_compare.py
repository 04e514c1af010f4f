"""Row-for-row comparison of the JVM and Python readers of Kafka-format metadata logs
(raftmeta/jobs/kafka_log_rows.py), shared by the sample's test and the live KRaft cluster's."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from raftmeta.jobs.kafka_log_jar import reader_jar
from raftmeta.jobs.kafka_log_rows import COLUMN_NAMES, python_rows, read_log_rows

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _order(row: dict[str, Any]) -> tuple[str, str, int, int]:
    index = row["record_index"]
    return (row["log_dir"], row["file"], row["position"], -1 if index is None else index)


def rows_both_ways(spark: SparkSession, log_dirs: Sequence[str]) -> list[dict[str, Any]]:
    """The rows of ``log_dirs``, asserted identical through both readers; fails naming the jar
    when the JVM reader is not built (never skips)."""
    reader_jar()
    jvm = sorted((row.asDict() for row in read_log_rows(spark, log_dirs, "jvm").collect()), key=_order)
    python = sorted(python_rows(log_dirs), key=_order)
    assert [tuple(row) for row in jvm] == [COLUMN_NAMES] * len(jvm)  # the JVM's columns, in order
    differing = [
        {name: (mine[name], theirs[name]) for name in COLUMN_NAMES if mine[name] != theirs[name]} | {"at": _order(mine)}
        for mine, theirs in zip(jvm, python, strict=False)
        if mine != theirs
    ]
    assert (len(jvm), differing[:3]) == (len(python), []), "JVM (Kafka's decoder) vs Python: (jvm, python)"
    # A query that reads some columns gets them from the reader alone (it prunes the rest, and
    # skips the batch's SHA-256 when batch_digest is not among them): the same values.
    for columns in PRUNED:
        pruned = read_log_rows(spark, log_dirs, "jvm").select(*columns).collect()
        assert sorted(map(tuple, pruned), key=repr) == sorted(
            (tuple(row[name] for name in columns) for row in python), key=repr
        ), columns
    return python


# Column subsets a pruned read is held to, out of the schema's order; with and without the digest.
PRUNED = (
    ("offset", "record_type", "damage", "file", "position", "record_index", "crc_ok"),
    ("replicas", "batch_digest", "config_value", "log_dir", "node", "position", "record_index", "voters"),
)
