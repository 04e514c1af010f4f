"""The JVM reader's byte-range splits (``split_bytes``, deploy/spark/kafka-log-reader's
SplitPlanner): a segment cut into many ranges at batch boundaries gives the rows of the whole file
read as one split, in the same order, with batches straddling the nominal cuts, and on doctored
copies whose damage decides where the walk stops: a flipped byte under the CRC, records Kafka's
framing refuses and a length past any batch in the middle of the file, and a torn tail."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from raftmeta.jobs.kafka_log_rows import read_log_rows
from raftmeta.records.kafka.batch import iter_batches
from tests.jobs.kafka_log_compare import rows_both_ways
from tests.jobs.test_kraft_verify import SEGMENT, quorum, segment_of  # noqa: F401 (fixture)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SPLIT_BYTES = 1000  # the 12,272-byte sample segment in 13 ranges
RECORDS_COUNT_AT = 57  # a v2 batch header's recordsCount


def _batch_at(data: bytes, index: int) -> int:
    return list(iter_batches(data))[index][0]


def _flip(data: bytearray) -> int:
    at = _batch_at(bytes(data), 40)
    data[at + 40] ^= 0x01  # its max timestamp: the CRC fails, the walk goes on
    return at


def _framing_refused(data: bytearray) -> int:
    at = _batch_at(bytes(data), 60)
    count = int.from_bytes(data[at + RECORDS_COUNT_AT : at + RECORDS_COUNT_AT + 4], "big")
    data[at + RECORDS_COUNT_AT : at + RECORDS_COUNT_AT + 4] = (count + 1).to_bytes(4, "big")
    return at


def _length_past_any_batch(data: bytearray) -> int:
    at = _batch_at(bytes(data), 50)
    data[at + 8 : at + 12] = (0x7FFFFFF0).to_bytes(4, "big")
    return at


def _torn(data: bytearray) -> int:
    at = _batch_at(bytes(data), -1)
    del data[at + 30 :]
    return at


DOCTORING: dict[str, tuple[Callable[[bytearray], int], str | None]] = {
    "intact": (lambda _: -1, None),
    "flipped byte": (_flip, None),
    "framing refused mid-file": (_framing_refused, "unreadable"),
    "length past any batch mid-file": (_length_past_any_batch, "unreadable"),
    "torn tail": (_torn, "truncated"),
}


def _jvm_rows(spark: SparkSession, log_dir: str, split_bytes: int) -> tuple[list[dict[str, Any]], int]:
    frame = read_log_rows(spark, [log_dir], "jvm", split_bytes=split_bytes)
    return [row.asDict() for row in frame.collect()], frame.rdd.getNumPartitions()


@pytest.mark.parametrize("doctoring", DOCTORING)
def test_a_segment_read_in_byte_ranges_gives_the_rows_of_one_split(
    spark: SparkSession,
    quorum: Path,  # noqa: F811
    doctoring: str,
) -> None:
    segment = segment_of(quorum, 3001)
    for other in quorum.glob("controller-*/data/__cluster_metadata-0/*.checkpoint"):
        other.unlink()  # the segment alone: a snapshot is one small split either way
    intact = segment.read_bytes()
    data = bytearray(intact)
    doctor, stop = DOCTORING[doctoring]
    damaged_at = doctor(data)
    segment.write_bytes(bytes(data))
    log_dir = str(segment.parent)

    whole = rows_both_ways(spark, [log_dir])  # one split per file: the rows raftmeta's reader gives too
    rows, splits = _jvm_rows(spark, log_dir, SPLIT_BYTES)
    assert rows == sorted(whole, key=lambda r: (r["position"], -1 if r["record_index"] is None else r["record_index"]))
    assert rows == _jvm_rows(spark, log_dir, 0)[0]

    # The ranges are cut where the walk of the whole file finds a batch (or stops): every nominal
    # cut that is not a boundary leaves its batch to the range before it.
    boundaries = [position for position, _ in iter_batches(intact)]
    if stop is not None:
        boundaries = [b for b in boundaries if b < damaged_at] + [damaged_at]
    count = -(-len(intact) // SPLIT_BYTES)
    cuts = [i * -(-len(intact) // count) for i in range(1, count)]
    assert any(cut not in boundaries for cut in cuts), "a batch straddles a cut"
    starts = {next((b for b in boundaries if b >= cut), None) for cut in cuts} - {None}
    assert splits == 1 + len(starts) > 1
    if stop is not None:  # the range that holds the damage reads on to the file's end
        assert (rows[-1]["position"], rows[-1]["damage"]) == (damaged_at, stop)
    crc_failed = [r["position"] for r in rows if r["crc_ok"] is False]
    assert crc_failed == ([damaged_at] * len(crc_failed) if doctoring == "flipped byte" else [])
    assert crc_failed or doctoring != "flipped byte"
