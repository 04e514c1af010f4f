"""Data through the real Kafka brokers of a chaos run (``raftmeta chaos --kafka-brokers N``): an
idempotent producer (acks=all) and a consumer group on one topic, while the nemesis breaks the
nodes and the brokers; then the verdict on what was acknowledged.

Every message's value is unique (``<sequence>``). Each produce is recorded with its outcome:
``ok`` when the broker acknowledged it (partition and offset), ``fail`` when the client reported
an error for it (it may still be in the log: an idempotent producer's timed-out batch can have
been written), ``unknown`` when nothing was reported by the end. The consumer group reads all
through the run and after the heal, until it has every acknowledged message or the drain's bound
passes. Then a reader with no group reads every partition from its start to its high watermark.

The checks: ``kafka:acknowledged-consumed`` (the group received every acknowledged message),
``kafka:acknowledged-in-log`` (each acknowledged message is in the log at the partition and
offset it was acknowledged at: nothing acknowledged was truncated away), ``kafka:no-duplicates``
(no value is in the log twice: the idempotent producer's retries were deduplicated by the
brokers). A group may hand a message out twice after a rebalance (at-least-once delivery): that
is counted in the figures, not judged.

confluent-kafka's clients are synchronous (librdkafka's callbacks run inside ``poll``): each
runs in a thread of its own. Every event goes to ``kafka-history.jsonl`` in the report directory.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final

from raftmeta.chaos.events import wall_ms
from raftmeta.jobs.checks import Check
from raftmeta.logs import get_logger

DATA_TOPIC: Final = "chaos-data"
DATA_PARTITIONS: Final = 6
# One message per interval: a steady stream that every fault window catches, small enough not
# to load a two-core machine that also runs the brokers' JVMs and the nodes.
PRODUCE_INTERVAL_S: Final = 0.01
CONSUME_BATCH: Final = 500
POLL_S: Final = 0.5
log = get_logger("chaos.kafka-data")


@dataclass
class Produced:
    """What the producer's delivery reports said, by message value."""

    acknowledged: dict[str, tuple[int, int]] = field(default_factory=dict)  # value -> (partition, offset)
    failed: dict[str, str] = field(default_factory=dict)  # value -> error
    sent: int = 0
    queue_full: int = 0  # produce calls refused by librdkafka's full local queue (retried, not sent)
    fatal_errors: list[str] = field(default_factory=list)


class KafkaHistory:
    """``kafka-history.jsonl``: one line per produce outcome and per message a consumer received."""

    def __init__(self, path: Path) -> None:
        self._file: IO[str] = path.open("w", encoding="utf-8")
        self._lock = threading.Lock()

    def record(self, **event: Any) -> None:
        with self._lock:
            if self._file.closed:
                return  # a late delivery report after the verdict: the checks have what they judged
            self._file.write(json.dumps({"t_ms": wall_ms(), **event}) + "\n")

    def close(self) -> None:
        with self._lock:
            if not self._file.closed:
                self._file.close()


class KafkaDataWorkload:
    """Start with :meth:`start`; :meth:`stop_producing` at the end of the fault phase;
    :meth:`finish` after the heal, for the checks and figures."""

    def __init__(self, bootstrap: str, history_path: Path, *, client_timeout_s: float, client_log: Path) -> None:
        self.bootstrap = bootstrap
        self.client_logger = client_logger(client_log)
        self.client_timeout_s = client_timeout_s
        self.history = KafkaHistory(history_path)
        self.produced = Produced()
        self.group_seen: Counter[str] = Counter()
        self.group_id = f"chaos-{uuid.uuid4()}"
        self._lock = threading.Lock()
        self._stop_producing = threading.Event()
        self._stop_consuming = threading.Event()
        self._producer_thread = threading.Thread(target=self._produce, name="chaos-producer", daemon=True)
        self._consumer_thread = threading.Thread(target=self._consume, name="chaos-consumer", daemon=True)
        self._producer: Any = None
        self._consumer_error: BaseException | None = None

    # -- producing -------------------------------------------------------------------------------
    def _new_producer(self) -> Any:
        from confluent_kafka import Producer

        return Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                # Within the fault phase and the heal: a batch the brokers cannot take by then is
                # reported failed (its outcome is then unknown to the checks, never counted as lost).
                "delivery.timeout.ms": int(self.client_timeout_s * 1000),
                "error_cb": self._client_error,
                "logger": self.client_logger,
            }
        )

    def _client_error(self, error: Any) -> None:
        if error.fatal():
            # An idempotent producer that cannot guarantee its sequence stops for good: noted, and
            # a new producer (a new producer id) takes over.
            with self._lock:
                self.produced.fatal_errors.append(str(error))
            log.warning("idempotent producer failed for good; a new one takes over", error=str(error))
            self.history.record(kind="producer_fatal", error=str(error))

    def _delivered(self, error: Any, message: Any) -> None:
        value = message.value().decode()
        if error is not None:
            with self._lock:
                self.produced.failed[value] = str(error)
            self.history.record(kind="produce", value=value, outcome="fail", error=str(error))
            return
        with self._lock:
            self.produced.acknowledged[value] = (message.partition(), message.offset())
            self.produced.failed.pop(value, None)
        self.history.record(
            kind="produce", value=value, outcome="ok", partition=message.partition(), offset=message.offset()
        )

    def _produce(self) -> None:
        self._producer = self._new_producer()
        fatal_seen = 0
        sequence = 0
        while not self._stop_producing.is_set():
            if len(self.produced.fatal_errors) > fatal_seen:
                fatal_seen = len(self.produced.fatal_errors)
                self._producer.flush(1.0)
                self._producer = self._new_producer()
            try:
                self._producer.produce(DATA_TOPIC, value=str(sequence).encode(), on_delivery=self._delivered)
                sequence += 1
                with self._lock:
                    self.produced.sent = sequence
            except BufferError:
                # The local queue is full while the brokers are away: the same value is produced
                # again after the poll below drains delivery reports; counted, so the report shows it.
                with self._lock:
                    self.produced.queue_full += 1
            self._producer.poll(PRODUCE_INTERVAL_S)

    # -- consuming -------------------------------------------------------------------------------
    def _consume(self) -> None:
        from confluent_kafka import Consumer

        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group_id,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": True,
                "logger": self.client_logger,
            }
        )
        try:
            consumer.subscribe([DATA_TOPIC])
            while not self._stop_consuming.is_set():
                for message in consumer.consume(num_messages=CONSUME_BATCH, timeout=POLL_S):
                    payload = message.value()
                    if message.error() is not None or payload is None:
                        continue  # a partition EOF or a transient error the client recovers from
                    value = payload.decode()
                    with self._lock:
                        self.group_seen[value] += 1
                    self.history.record(
                        kind="consume", value=value, partition=message.partition(), offset=message.offset()
                    )
        except Exception as exc:  # reported by finish() as a failed check
            self._consumer_error = exc
        finally:
            consumer.close()

    def start(self) -> None:
        self._producer_thread.start()
        self._consumer_thread.start()

    def stop_producing(self) -> None:
        """Stop sending (the end of the fault phase); messages in flight still report."""
        self._stop_producing.set()
        self._producer_thread.join()

    def abandon(self) -> None:
        """Stop both clients' threads without waiting (the run ends early or is over)."""
        self._stop_producing.set()
        self._stop_consuming.set()

    # -- the verdict -----------------------------------------------------------------------------
    def finish(self) -> tuple[list[Check], dict[str, Any]]:
        """After the heal: deliver what is in flight, let the group drain, read the log; the
        checks and figures. Blocking (run it in a thread)."""
        began = time.monotonic()
        unreported = self._producer.flush(self.client_timeout_s) if self._producer is not None else 0
        flushed_s = time.monotonic() - began
        with self._lock:
            acknowledged = dict(self.produced.acknowledged)
        deadline = time.monotonic() + self.client_timeout_s
        while time.monotonic() < deadline and self._consumer_thread.is_alive():
            with self._lock:
                if all(value in self.group_seen for value in acknowledged):
                    break
            time.sleep(POLL_S)
        self._stop_consuming.set()
        self._consumer_thread.join(self.client_timeout_s)
        from confluent_kafka import KafkaException

        try:
            log_values, log_positions = read_topic(
                self.bootstrap, DATA_TOPIC, self.client_timeout_s, self.client_logger
            )
        except KafkaException as exc:
            raise RuntimeError(f"reading {DATA_TOPIC} back: {exc}") from exc
        finally:
            self.history.close()
        return self._judge(acknowledged, unreported, log_values, log_positions, flushed_s)

    def _judge(
        self,
        acknowledged: dict[str, tuple[int, int]],
        unreported: int,
        log_values: Counter[str],
        log_positions: dict[tuple[int, int], str],
        flushed_s: float,
    ) -> tuple[list[Check], dict[str, Any]]:
        not_consumed = sorted((v for v in acknowledged if v not in self.group_seen), key=int)
        misplaced = sorted((v for v, position in acknowledged.items() if log_positions.get(position) != v), key=int)
        duplicated = sorted((v for v, n in log_values.items() if n > 1), key=int)
        consumer_failure = "" if self._consumer_error is None else f"; the consumer failed: {self._consumer_error!r}"
        checks = [
            Check(
                "kafka:acknowledged-consumed",
                not not_consumed and self._consumer_error is None,
                f"{len(not_consumed)} of {len(acknowledged)} acknowledged messages never reached consumer group "
                f"{self.group_id} (first: {not_consumed[:10]}){consumer_failure}"
                if not_consumed or consumer_failure
                else f"the consumer group received all {len(acknowledged)} acknowledged messages",
            ),
            Check(
                "kafka:acknowledged-in-log",
                not misplaced,
                f"{len(misplaced)} acknowledged messages are not in the log at the partition and offset they were "
                f"acknowledged at (first: {[(v, acknowledged[v]) for v in misplaced[:10]]})"
                if misplaced
                else f"all {len(acknowledged)} acknowledged messages are in the log where they were acknowledged",
            ),
            Check(
                "kafka:no-duplicates",
                not duplicated,
                f"{len(duplicated)} messages are in the log more than once (first: {duplicated[:10]})"
                if duplicated
                else f"{sum(log_values.values())} messages in the log, none twice (idempotent producer)",
            ),
        ]
        with self._lock:
            figures = {
                "topic": DATA_TOPIC,
                "sent": self.produced.sent,
                "producer_queue_full": self.produced.queue_full,
                "acknowledged": len(acknowledged),
                "failed": len(self.produced.failed),
                "unreported_at_end": unreported,
                "flush_s": round(flushed_s, 1),
                "producer_fatal_errors": self.produced.fatal_errors[:10],
                "consumer_group": self.group_id,
                "group_received": sum(self.group_seen.values()),
                "group_received_twice": sum(1 for n in self.group_seen.values() if n > 1),
                "in_log": sum(log_values.values()),
            }
        return checks, figures


def client_logger(path: Path) -> logging.Logger:
    """Where librdkafka's own log lines go (connection refused while a broker is down, retries):
    a file beside the nodes' logs, not the run's stderr, which carries the timeline."""
    path.parent.mkdir(parents=True, exist_ok=True)
    logger = logging.getLogger(f"raftmeta.chaos.kafka-clients.{path}")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    if not logger.handlers:
        handler = logging.FileHandler(path, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        logger.addHandler(handler)
    return logger


def read_topic(
    bootstrap: str, topic: str, timeout_s: float, logger: logging.Logger
) -> tuple[Counter[str], dict[tuple[int, int], str]]:
    """Every message of every partition of ``topic``, from its start to its high watermark, by a
    reader in no group: how often each value is there, and the value at each (partition, offset)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"chaos-reader-{uuid.uuid4()}",
            "enable.auto.commit": False,
            "logger": logger,
        }
    )
    values: Counter[str] = Counter()
    positions: dict[tuple[int, int], str] = {}
    try:
        metadata = consumer.list_topics(topic, timeout=timeout_s)
        partitions = sorted(metadata.topics[topic].partitions)
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s)[1] for p in partitions}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions if ends[p] > 0])
        next_offsets = dict.fromkeys(partitions, 0)
        deadline = time.monotonic() + timeout_s
        while any(next_offsets[p] < ends[p] for p in partitions):
            if time.monotonic() > deadline:
                short = {p: (next_offsets[p], ends[p]) for p in partitions if next_offsets[p] < ends[p]}
                raise TimeoutError(f"{topic}: not read to its high watermark within {timeout_s:.0f} s: {short}")
            for message in consumer.consume(num_messages=CONSUME_BATCH, timeout=POLL_S):
                payload, partition, offset = message.value(), message.partition(), message.offset()
                if message.error() is not None or payload is None or partition is None or offset is None:
                    continue
                value = payload.decode()
                values[value] += 1
                positions[(partition, offset)] = value
                next_offsets[partition] = offset + 1
    finally:
        consumer.close()
    return values, positions
