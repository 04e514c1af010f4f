"""``raftmeta bench kafka-format``: the speed of Kafka's metadata log format as raftmeta reads and
writes it (raftmeta/records/kafka), against raftmeta's own format on the same records.

The log is what a create writes: per topic a TopicRecord and ``--partitions`` PartitionRecords
(version 2, RF 3, a log directory per replica, as a 4.4 controller writes them), one batch per
topic. Per record, in CPU time (``time.process_time``: this single-threaded work's own, which
the other processes of a shared machine do not inflate as they do wall time), medians over
``--repeats`` rounds:

- ``kafka.encode_us``: records framed (``ApiMessageAndVersion``) and batched (record batch v2);
- ``kafka.decode_us``: batches read (CRC checked) and every record decoded into its fields;
- ``raftmeta.encode_us`` / ``raftmeta.decode_us``: the same partitions as raftmeta's protobuf
  records in raftmeta's batches (``PartitionEncoder``, ``encode_batch``; ``decode_records``),
  measured in the same process because this machine is shared and noisy;
- ``mapped``: Kafka's format through raftmeta's mapping (raftmeta/records/kafka/mapping.py) and
  its fixed-layout path (``fast.py``), the path the native switch will take:
  ``encode_us``, the same log written from the partitions' states as Kafka batches (the TopicRecord
  by the field tables, every PartitionRecord by the fast path); ``decode_us``, those batches
  read back into raftmeta's ``MetadataRecord`` messages (``from_kafka_batches``' record loop);
  ``read_us``, the batches read into the partitions' fields only (no message object: what a
  replay reading states from bytes needs); ``export_us``, raftmeta's batches turned into Kafka's
  (``to_kafka_log``: what ``raftmeta log export`` does per record).

``ratio`` is Kafka's format over raftmeta's: the generic path (``encode``, ``decode``) and the
mapped one (``mapped_encode``, ``mapped_decode``): what switching the write path costs.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import click

from raftmeta.bench.results import machine, median, write_result
from raftmeta.cli.common import emit_json, output_option
from raftmeta.records import codec
from raftmeta.records.decode import decode_records
from raftmeta.records.kafka import fast
from raftmeta.records.kafka.batch import encode_batch, iter_batches
from raftmeta.records.kafka.frames import LogRecord, batch_records, metadata_record, new_batch
from raftmeta.records.kafka.mapping import (
    from_kafka_value,
    from_kafka_value_bytes,
    kafka_batch_bytes,
    read_kafka_batches,
    to_kafka_log,
    to_kafka_value,
)
from raftmeta.records.kafka.schema import Uuid
from raftmeta.records.wire import PartitionEncoder
from raftmeta.v1 import records_pb2

TIMESTAMP_MS = 1_800_000_000_000
REPLICATION_FACTOR = 3


def _topic_id(topic: int) -> bytes:
    return topic.to_bytes(16, "big")


def _replicas(partition: int, brokers: int) -> tuple[int, ...]:
    return tuple((partition + i) % brokers for i in range(REPLICATION_FACTOR))


def kafka_log(topics: int, partitions: int, brokers: int) -> tuple[bytes, int]:
    """The log's bytes in Kafka's format, and its record count."""
    directories = [Uuid(bytes([b + 1]) * 16) for b in range(brokers)]
    out = []
    offset = 0
    for topic in range(topics):
        topic_id = Uuid(_topic_id(topic))
        records: list[LogRecord] = [metadata_record("TopicRecord", Name=f"topic-{topic}", TopicId=topic_id)]
        for partition in range(partitions):
            replicas = _replicas(partition, brokers)
            records.append(
                metadata_record(
                    "PartitionRecord",
                    2,
                    PartitionId=partition,
                    TopicId=topic_id,
                    Replicas=replicas,
                    Isr=replicas,
                    Leader=replicas[0],
                    LeaderEpoch=0,
                    PartitionEpoch=0,
                    Directories=tuple(directories[b] for b in replicas),
                )
            )
        out.append(encode_batch(new_batch(offset, 1, records, TIMESTAMP_MS)))
        offset += len(records)
    return b"".join(out), offset


def raftmeta_log(topics: int, partitions: int, brokers: int) -> bytes:
    """The same log in raftmeta's format, encoded as the controller encodes a create."""
    encoder = PartitionEncoder()
    out = []
    offset = 0
    for topic in range(topics):
        topic_id = _topic_id(topic)
        records = [records_pb2.MetadataRecord(topic=records_pb2.TopicRecord(name=f"topic-{topic}", topic_id=topic_id))]
        raw = [records[0].SerializeToString()]
        states = []
        for partition in range(partitions):
            replicas = _replicas(partition, brokers)
            states.append((replicas, replicas, replicas[0], 0, 0, (), (), ()))
        raw += encoder.new_records(topic_id, 0, states)
        out.append(codec.encode_batch(offset, 1, raw, TIMESTAMP_MS))
        offset += len(raw)
    return b"".join(out)


def mapped_log(topics: int, partitions: int, brokers: int) -> bytes:
    """The log of :func:`raftmeta_log` written in Kafka's format from the partitions' states, as
    the controller will write it once the format is Kafka's: the fast path per partition."""
    out = []
    offset = 0
    for topic in range(topics):
        topic_id = _topic_id(topic)
        record = records_pb2.MetadataRecord(topic=records_pb2.TopicRecord(name=f"topic-{topic}", topic_id=topic_id))
        values = [to_kafka_value(record)[2]]
        for partition in range(partitions):
            replicas = _replicas(partition, brokers)
            state = fast.KafkaPartition(topic_id, partition, replicas, replicas, (), (), replicas[0], 0, 0)
            values.append(fast.partition_value(state))
        out.append(kafka_batch_bytes(offset, 1, TIMESTAMP_MS, [(None, v) for v in values], control=False))
        offset += len(values)
    return b"".join(out)


def _decode_mapped(data: bytes) -> int:
    """Kafka batches -> raftmeta's MetadataRecord messages, as ``decode_records`` gives them."""
    parse = records_pb2.MetadataRecord.FromString
    count = 0
    for batch in read_kafka_batches(data):
        for index, (key, value) in enumerate(batch.records):
            parse(from_kafka_value_bytes(batch.control, key, value, batch.base_offset + index))
            count += 1
    return count


def _read_mapped(data: bytes) -> int:
    count = 0
    for batch in read_kafka_batches(data):
        for _, value in batch.records:
            if value is None or fast.read_partition(value) is None:
                from_kafka_value(batch.control, None, value, batch.base_offset)
            count += 1
    return count


def _decode_kafka(data: bytes) -> int:
    return sum(1 for _, batch in iter_batches(data) for _ in batch_records(batch))


def _decode_raftmeta(data: bytes) -> int:
    return sum(len(decode_records(batch.data)) for batch in codec.iter_batches(data))


def _timed_us(action: Any, records: int) -> float:
    started = time.process_time()
    action()
    return (time.process_time() - started) / records * 1e6


@click.command("kafka-format")
@click.option("--topics", type=click.IntRange(min=1), default=20, show_default=True)
@click.option("--partitions", type=click.IntRange(min=1), default=100, show_default=True, help="Per topic.")
@click.option("--brokers", type=click.IntRange(min=REPLICATION_FACTOR), default=6, show_default=True)
@click.option("--repeats", type=click.IntRange(min=1), default=5, show_default=True, help="Rounds (median).")
@click.option(
    "--out", "out_path", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Also write here."
)
@output_option
def command(topics: int, partitions: int, brokers: int, repeats: int, out_path: Path | None, output: str) -> None:
    """Kafka's metadata log format: encode and decode time per record, against raftmeta's format."""
    figures: dict[str, list[float]] = {
        key: [] for key in ("k_enc", "k_dec", "r_enc", "r_dec", "m_enc", "m_dec", "m_read", "m_export")
    }
    records = 0
    kafka_bytes = raftmeta_bytes = mapped_bytes = 0
    for _ in range(repeats):
        started = time.process_time()
        kafka_data, records = kafka_log(topics, partitions, brokers)
        figures["k_enc"].append((time.process_time() - started) / records * 1e6)
        started = time.process_time()
        raftmeta_data = raftmeta_log(topics, partitions, brokers)
        figures["r_enc"].append((time.process_time() - started) / records * 1e6)
        decoded = _decode_kafka(kafka_data)
        assert decoded == records, (decoded, records)
        figures["k_dec"].append(_timed_us(lambda data=kafka_data: _decode_kafka(data), records))
        figures["r_dec"].append(_timed_us(lambda data=raftmeta_data: _decode_raftmeta(data), records))
        started = time.process_time()
        mapped_data = mapped_log(topics, partitions, brokers)
        figures["m_enc"].append((time.process_time() - started) / records * 1e6)
        assert _decode_mapped(mapped_data) == records
        figures["m_dec"].append(_timed_us(lambda data=mapped_data: _decode_mapped(data), records))
        figures["m_read"].append(_timed_us(lambda data=mapped_data: _read_mapped(data), records))
        figures["m_export"].append(_timed_us(lambda data=raftmeta_data: to_kafka_log(data), records))
        kafka_bytes, raftmeta_bytes, mapped_bytes = len(kafka_data), len(raftmeta_data), len(mapped_data)
    kafka = {"encode_us": round(median(figures["k_enc"]), 2), "decode_us": round(median(figures["k_dec"]), 2)}
    raftmeta = {"encode_us": round(median(figures["r_enc"]), 2), "decode_us": round(median(figures["r_dec"]), 2)}
    mapped = {
        "encode_us": round(median(figures["m_enc"]), 2),
        "decode_us": round(median(figures["m_dec"]), 2),
        "read_us": round(median(figures["m_read"]), 2),
        "export_us": round(median(figures["m_export"]), 2),
    }
    document: dict[str, Any] = {
        "records": records,
        "kafka": {**kafka, "bytes_per_record": round(kafka_bytes / records, 1)},
        "mapped": {**mapped, "bytes_per_record": round(mapped_bytes / records, 1)},
        "raftmeta": {**raftmeta, "bytes_per_record": round(raftmeta_bytes / records, 1)},
        "ratio": {
            "encode": round(kafka["encode_us"] / raftmeta["encode_us"], 1),
            "decode": round(kafka["decode_us"] / raftmeta["decode_us"], 1),
            "mapped_encode": round(mapped["encode_us"] / raftmeta["encode_us"], 2),
            "mapped_decode": round(mapped["decode_us"] / raftmeta["decode_us"], 2),
        },
        "params": {"topics": topics, "partitions": partitions, "brokers": brokers, "repeats": repeats},
        "machine": machine(),
    }
    write_result(document, out_path)
    if output == "json":
        emit_json(document)
    else:
        k, m, r = document["kafka"], document["mapped"], document["raftmeta"]
        click.echo(f"{records:,} records, median of {repeats} rounds (us per record)")
        click.echo(f"kafka's format:    encode {k['encode_us']}  decode {k['decode_us']}  ({k['bytes_per_record']} B)")
        click.echo(
            f"mapped (fast):     encode {m['encode_us']}  decode {m['decode_us']}  read {m['read_us']}  "
            f"export {m['export_us']}  ({m['bytes_per_record']} B)"
        )
        click.echo(f"raftmeta's format: encode {r['encode_us']}  decode {r['decode_us']}  ({r['bytes_per_record']} B)")
