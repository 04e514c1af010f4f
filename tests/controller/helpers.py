"""Test context in the style of Kafka's ReplicationControlTestContext: build an image by calling
handlers, asserting on their responses and replaying their records."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from placement.rng import JavaRandom
from raftmeta.controller import Controller, ControllerConfig, ControllerResult, MetadataImage
from raftmeta.controller import brokers as broker_handlers
from raftmeta.controller import topics as topic_handlers
from raftmeta.controller.elections import fence_records
from raftmeta.v1 import controller_pb2, errors_pb2, records_pb2


class CounterIds:
    """Deterministic topic ids: 00..01, 00..02, ..."""

    def __init__(self, start: int = 1) -> None:
        self.next = start

    def __call__(self) -> bytes:
        value = self.next
        self.next += 1
        return value.to_bytes(16, "big")


def is_working(controller: Controller) -> bool:
    """``controller.working``, read through a call: mypy would keep the narrowing of an earlier
    assert on the property across the calls that change it."""
    return controller.working


def incarnation(broker_id: int, generation: int = 1) -> bytes:
    return bytes([0xAA, generation]) + broker_id.to_bytes(14, "big")


class Context:
    def __init__(self, config: ControllerConfig | None = None, seed: int = 42) -> None:
        self.config = config or ControllerConfig()
        self.image = MetadataImage.empty()
        self.ids = CounterIds()
        self.random = JavaRandom(seed)
        self.now_ms = 0
        self.log: list[records_pb2.MetadataRecord] = []

    # ---- plumbing ---------------------------------------------------------------------------------
    def call(self, handler: Any, request: Any) -> ControllerResult[Any]:
        result: ControllerResult[Any] = handler(self.image, request, self.now_ms, self.ids, self.random, self.config)
        return result

    def replay(self, records: Iterable[records_pb2.MetadataRecord]) -> None:
        records = list(records)
        self.image = self.image.replay_all(records)
        self.log.extend(records)

    def run(self, handler: Any, request: Any) -> ControllerResult[Any]:
        result = self.call(handler, request)
        self.replay(result.records)
        return result

    # ---- brokers ----------------------------------------------------------------------------------
    def register(self, broker_id: int, rack: str | None = None, pool: str | None = None, generation: int = 1) -> int:
        result = self.run(
            broker_handlers.register_broker,
            controller_pb2.RegisterBrokerRequest(
                broker_id=broker_id, incarnation_id=incarnation(broker_id, generation), rack=rack, pool=pool
            ),
        )
        assert result.response.error_code == errors_pb2.NONE, result.response.error_message
        return int(result.response.broker_epoch)

    def heartbeat(self, broker_id: int, want_fence: bool = False) -> ControllerResult[Any]:
        epoch = self.image.brokers[broker_id].epoch
        result = self.run(
            broker_handlers.broker_heartbeat,
            controller_pb2.BrokerHeartbeatRequest(broker_id=broker_id, broker_epoch=epoch, want_fence=want_fence),
        )
        assert result.response.error_code == errors_pb2.NONE, result.response.error_message
        return result

    def add_brokers(
        self, ids: Sequence[int], racks: Sequence[str | None] | None = None, pool: str | None = None
    ) -> None:
        for index, broker_id in enumerate(ids):
            self.register(broker_id, rack=racks[index] if racks else None, pool=pool)
            self.heartbeat(broker_id)

    def fence(self, broker_id: int) -> list[records_pb2.MetadataRecord]:
        records = fence_records(self.image, broker_id, self.config.unclean_leader_election_enable)
        self.replay(records)
        return records

    # ---- topics -----------------------------------------------------------------------------------
    def create(self, *topics: controller_pb2.CreatableTopic, validate_only: bool = False) -> ControllerResult[Any]:
        return self.run(
            topic_handlers.create_topics,
            controller_pb2.CreateTopicsRequest(topics=list(topics), validate_only=validate_only),
        )

    def create_ok(
        self, name: str, partitions: int = 1, rf: int = 1, configs: dict[str, str] | None = None, **kwargs: Any
    ) -> bytes:
        result = self.create(
            controller_pb2.CreatableTopic(
                name=name, num_partitions=partitions, replication_factor=rf, configs=configs or {}, **kwargs
            )
        )
        (topic,) = result.response.topics
        assert topic.error_code == errors_pb2.NONE, topic.error_message
        return bytes(topic.topic_id)

    def partition(self, name: str, pid: int) -> Any:
        topic = self.image.topic_by_name(name)
        assert topic is not None
        return topic.partitions[pid]


def topic(
    name: str, partitions: int | None = None, rf: int | None = None, **kwargs: Any
) -> controller_pb2.CreatableTopic:
    return controller_pb2.CreatableTopic(name=name, num_partitions=partitions, replication_factor=rf, **kwargs)


def error_of(result: ControllerResult[Any], index: int = 0) -> tuple[str, str]:
    item = result.response.topics[index]
    return errors_pb2.ErrorCode.Name(item.error_code), item.error_message
