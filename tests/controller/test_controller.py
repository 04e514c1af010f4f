"""The controller object: pending batches, commit, renounce, idempotent retries, snapshots. (Which
answer waits for which offset is the QuorumController's: tests/controller/test_quorum_controller.py.)"""

from __future__ import annotations

import pytest

from placement.rng import JavaRandom
from raftmeta.controller import Controller, ControllerConfig, MetadataImage, RequestError, image_to_records
from raftmeta.controller.controller import Handled
from raftmeta.controller.requests import request_sha256
from raftmeta.v1 import controller_pb2, errors_pb2
from tests.controller.helpers import CounterIds, incarnation


class Driver:
    """A minimal node driver: appends every batch at the next offsets, commits on demand, and
    keeps what waits for which offset as the QuorumController does (an answer with no records
    waits for the newest pending batch)."""

    def __init__(self, controller: Controller | None = None) -> None:
        self.controller = controller or Controller()
        self.ids = CounterIds()
        self.random = JavaRandom(3)
        self.offset = self.controller.committed_offset
        self.now_ms = 0
        self.batches: list[int] = []  # last offsets of the pending batches
        self.waiting: list[tuple[int, Handled]] = []

    def send(self, method: str, request: object) -> object:
        handled = self.controller.handle(method, request, self.now_ms, self.ids, self.random)  # type: ignore[arg-type]
        if handled.records:
            self.offset += len(handled.records)
            self.batches.append(self.offset)
            self.waiting.append((self.offset, handled))
        elif not handled.done:  # waits for the newest pending batch
            self.waiting.append((self.batches[-1], handled))
        return handled

    def commit(self, upto: int | None = None) -> list[Handled]:
        """Commit the pending batches up to ``upto`` (all of them by default): the handled
        requests whose answers are true now, in order."""
        upto = self.offset if upto is None else upto
        count = sum(1 for last in self.batches if last <= upto)
        if count:
            self.controller.commit(count, self.batches[count - 1])
            del self.batches[:count]
        released = [handled for last, handled in self.waiting if last <= upto]
        self.waiting = [(last, handled) for last, handled in self.waiting if last > upto]
        return released

    def brokers(self, *ids: int) -> None:
        for broker_id in ids:
            self.send(
                "RegisterBroker",
                controller_pb2.RegisterBrokerRequest(broker_id=broker_id, incarnation_id=incarnation(broker_id)),
            )
            self.commit()
            epoch = self.controller.image.brokers[broker_id].epoch
            self.send("BrokerHeartbeat", controller_pb2.BrokerHeartbeatRequest(broker_id=broker_id, broker_epoch=epoch))
            self.commit()


def create(name: str, partitions: int = 1, rf: int = 1, request_id: str = "") -> controller_pb2.CreateTopicsRequest:
    return controller_pb2.CreateTopicsRequest(
        topics=[controller_pb2.CreatableTopic(name=name, num_partitions=partitions, replication_factor=rf)],
        request_id=request_id,
    )


def test_responses_are_released_on_commit_and_reads_see_only_committed_state() -> None:
    driver = Driver()
    driver.brokers(1, 2)
    first = driver.send("CreateTopics", create("a", 2, 2))
    assert not first.done and first.records  # type: ignore[attr-defined]
    second = driver.send("CreateTopics", create("b"))
    assert driver.controller.pending_count == 2
    assert driver.controller.image.topic_by_name("b") is not None
    assert driver.controller.committed_image.topic_by_name("a") is None
    described = driver.send("DescribeTopics", controller_pb2.DescribeTopicsRequest())
    assert described.done and list(described.response.topics) == []  # type: ignore[attr-defined]
    # Commit only the first batch.
    first_last = driver.offset - len(second.records)  # type: ignore[attr-defined]
    released = driver.commit(first_last)
    assert released == [first]
    assert released[0].response.topics[0].error_code == errors_pb2.NONE  # type: ignore[union-attr]
    assert driver.controller.committed_image.topic_by_name("a") is not None
    assert driver.controller.committed_image.topic_by_name("b") is None
    released = driver.commit()
    assert released == [second]
    assert driver.controller.committed_image == driver.controller.image


def test_a_rejected_request_waits_for_earlier_pending_writes() -> None:
    driver = Driver()
    driver.brokers(1)
    write = driver.send("CreateTopics", create("a"))
    rejected = driver.send("CreateTopics", create("a"))
    assert rejected.records == () and not rejected.done  # type: ignore[attr-defined]
    released = driver.commit()
    assert released == [write, rejected]
    assert released[1].response.topics[0].error_code == errors_pb2.TOPIC_ALREADY_EXISTS  # type: ignore[union-attr]
    idle = driver.send("CreateTopics", create("a"))
    assert idle.done  # type: ignore[attr-defined]


def test_renounce_restores_the_committed_image_and_drops_pending_batches() -> None:
    driver = Driver()
    driver.brokers(1, 2)
    committed = driver.controller.committed_image
    driver.send("CreateTopics", create("a", 3, 2))
    driver.send("CreateTopics", create("a"))
    driver.send(
        "CreatePartitions",
        controller_pb2.CreatePartitionsRequest(topics=[controller_pb2.CreatePartitionsTopic(name="a", count=4)]),
    )
    assert driver.controller.image.topic_by_name("a") is not None
    assert driver.controller.pending_count == 2
    driver.controller.renounce()
    assert driver.controller.image is committed
    assert driver.controller.pending_count == 0
    with pytest.raises(ValueError, match="0 pending"):
        driver.controller.commit(1, 10_000)


def test_idempotent_retry_pending_committed_and_across_a_snapshot() -> None:
    driver = Driver()
    driver.brokers(1, 2, 3)
    first = driver.send("CreateTopics", create("orders", 3, 3, request_id="req-1"))
    assert first.records[-1].WhichOneof("record") == "request"  # type: ignore[attr-defined]
    # Retry while the original is pending: same answer, nothing written, released with it.
    retry_pending = driver.send("CreateTopics", create("orders", 3, 3, request_id="req-1"))
    assert retry_pending.records == ()  # type: ignore[attr-defined]
    released = driver.commit()
    assert released[0].response == released[1].response
    assert released[0].response.topics[0].error_code == errors_pb2.NONE  # type: ignore[union-attr]
    original = released[0].response
    # Retry after commit: still the original answer, not TOPIC_ALREADY_EXISTS.
    retry_committed = driver.send("CreateTopics", create("orders", 3, 3, request_id="req-1"))
    assert retry_committed.done and retry_committed.response == original  # type: ignore[attr-defined]
    # Without the id the same request is a new one.
    fresh = driver.send("CreateTopics", create("orders", 3, 3))
    assert fresh.done and fresh.response.topics[0].error_code == errors_pb2.TOPIC_ALREADY_EXISTS  # type: ignore[attr-defined]
    # Across a snapshot and a failover: the new leader gives the same answer.
    offset, records = driver.controller.snapshot()
    successor = Controller.from_snapshot(records, offset)
    assert successor.committed_image == driver.controller.committed_image
    again = Driver(successor).send("CreateTopics", create("orders", 3, 3, request_id="req-1"))
    assert again.done and again.response == original  # type: ignore[attr-defined]
    with pytest.raises(RequestError, match="already used for CreateTopics"):
        successor.handle(
            "DeleteTopics",
            controller_pb2.DeleteTopicsRequest(topic_names=["orders"], request_id="req-1"),
            0,
            CounterIds(),
            JavaRandom(1),
        )


def test_a_request_id_is_bound_to_its_request_pending_committed_and_across_a_snapshot() -> None:
    driver = Driver()
    driver.brokers(1, 2, 3)
    first = driver.send("CreateTopics", create("orders", 3, 3, request_id="req-1"))
    other = create("payments", 3, 3, request_id="req-1")  # a copied id on different work
    with pytest.raises(RequestError, match="'req-1' was already used for a different CreateTopics request"):
        driver.send("CreateTopics", other)  # while the original is pending
    assert driver.controller.pending_count == 1  # the refusal wrote nothing
    driver.commit()
    with pytest.raises(RequestError, match="already used for a different CreateTopics"):
        driver.send("CreateTopics", other)
    # What the caller waits (timeout_ms) is not what it asks for: a retry may wait longer.
    patient = create("orders", 3, 3, request_id="req-1")
    patient.timeout_ms = 60_000
    retry = driver.send("CreateTopics", patient)
    assert retry.done and retry.response.topics[0].error_code == errors_pb2.NONE  # type: ignore[attr-defined]
    assert first.records[-1].request.request_sha256 == request_sha256(create("orders", 3, 3))  # type: ignore[attr-defined]
    # The binding survives a snapshot and a failover.
    offset, records = driver.controller.snapshot()
    successor = Controller.from_snapshot(records, offset)
    with pytest.raises(RequestError, match="already used for a different CreateTopics"):
        Driver(successor).send("CreateTopics", other)


def test_request_digest_ignores_map_order_and_the_retry_fields() -> None:
    a = controller_pb2.CreateTopicsRequest(request_id="x", timeout_ms=5)
    topic = a.topics.add(name="t", num_partitions=1, replication_factor=1)
    topic.configs["cleanup.policy"] = "compact"
    topic.configs["retention.ms"] = "1000"
    b = controller_pb2.CreateTopicsRequest(request_id="y", timeout_ms=7)
    other = b.topics.add(name="t", num_partitions=1, replication_factor=1)
    other.configs["retention.ms"] = "1000"
    other.configs["cleanup.policy"] = "compact"
    assert request_sha256(a) == request_sha256(b)
    other.configs["retention.ms"] = "2000"
    assert request_sha256(a) != request_sha256(b)
    assert a.request_id == "x" and a.timeout_ms == 5  # the request itself is left alone


def test_a_request_id_recorded_without_a_digest_answers_any_retry() -> None:
    """Logs written before RequestRecord carried the digest: their ids keep the old rule."""
    driver = Driver()
    driver.brokers(1)
    driver.send("CreateTopics", create("orders", request_id="old-1"))
    driver.commit()
    offset, records = driver.controller.snapshot()
    for record in records:
        if record.WhichOneof("record") == "request":
            record.request.ClearField("request_sha256")
    successor = Driver(Controller.from_snapshot(records, offset))
    retry = successor.send("CreateTopics", create("renamed", request_id="old-1"))
    assert retry.done and retry.response.topics[0].name == "orders"  # type: ignore[attr-defined]


def test_request_table_is_bounded_and_evicts_the_oldest_deterministically() -> None:
    controller = Controller(MetadataImage.empty(request_table_capacity=3))
    driver = Driver(controller)
    driver.brokers(1)
    for i in range(5):
        driver.send("CreateTopics", create(f"t{i}", request_id=f"r{i}"))
    driver.commit()
    table = controller.committed_image.requests
    assert [rid for rid, _ in table.in_order()] == ["r2", "r3", "r4"]
    # r0 was evicted: a retry is evaluated afresh (and the topic now exists).
    retry = driver.send("CreateTopics", create("t0", request_id="r0"))
    assert retry.response.topics[0].error_code == errors_pb2.TOPIC_ALREADY_EXISTS  # type: ignore[attr-defined]
    rebuilt = Controller.from_snapshot(image_to_records(controller.committed_image), 0, request_table_capacity=3)
    assert rebuilt.committed_image.requests == table


def test_request_level_errors() -> None:
    controller = Controller()
    ids, random = CounterIds(), JavaRandom(1)
    with pytest.raises(RequestError, match="unknown method"):
        controller.handle("Nope", controller_pb2.DescribeTopicsRequest(), 0, ids, random)
    with pytest.raises(RequestError, match="takes a CreateTopicsRequest"):
        controller.handle("CreateTopics", controller_pb2.DescribeTopicsRequest(), 0, ids, random)
    with pytest.raises(RequestError, match="request_id: at most 64"):
        controller.handle("CreateTopics", create("x", request_id="r" * 65), 0, ids, random)


def test_offsets_must_rise_and_foreign_batches_apply_only_without_pending() -> None:
    driver = Driver()
    driver.brokers(1)
    handled = driver.controller.handle("CreateTopics", create("a"), 0, driver.ids, driver.random)
    with pytest.raises(ValueError, match="does not follow"):
        driver.controller.commit(1, driver.controller.committed_offset)
    with pytest.raises(ValueError, match="1 pending"):
        driver.controller.commit(2, 10_000)
    with pytest.raises(ValueError, match="pending"):
        driver.controller.apply_committed(handled.records, 10_000)
    driver.controller.renounce()
    other = Driver()
    other.brokers(1)
    created = other.send("CreateTopics", create("from-elsewhere"))
    other.commit()
    driver.controller.apply_committed(created.records, 10_000)  # type: ignore[attr-defined]
    assert driver.controller.committed_image.topic_by_name("from-elsewhere") is not None
    assert driver.controller.committed_offset == 10_000


def test_handlers_see_pending_state() -> None:
    driver = Driver(Controller(config=ControllerConfig()))
    driver.brokers(1, 2)
    driver.send("CreateTopics", create("a", 1, 2))
    grow = driver.send(
        "CreatePartitions",
        controller_pb2.CreatePartitionsRequest(topics=[controller_pb2.CreatePartitionsTopic(name="a", count=3)]),
    )
    assert len(grow.records) == 2  # type: ignore[attr-defined]
    driver.commit()
    assert len(driver.controller.committed_image.topic_by_name("a").partitions) == 3  # type: ignore[union-attr]


def test_snapshot_round_trip_of_a_rich_image() -> None:
    driver = Driver(Controller(config=ControllerConfig(cluster_id="c")))
    driver.send(
        "RegisterBroker",
        controller_pb2.RegisterBrokerRequest(
            broker_id=7,
            incarnation_id=incarnation(7),
            rack="r",
            pool="p",
            endpoints=[controller_pb2.BrokerEndpointInfo(name="PLAINTEXT", host="h", port=9092)],
        ),
    )
    driver.commit()
    driver.brokers(1, 2, 3)
    driver.send(
        "CreateTopics",
        controller_pb2.CreateTopicsRequest(
            topics=[
                controller_pb2.CreatableTopic(
                    name="x.y", num_partitions=4, replication_factor=3, configs={"cleanup.policy": "compact"}
                )
            ],
            request_id="abc",
        ),
    )
    driver.send("BrokerHeartbeat", controller_pb2.BrokerHeartbeatRequest(broker_id=2, broker_epoch=3, want_fence=True))
    driver.commit()
    image = driver.controller.committed_image
    assert image.brokers[2].fenced and image.brokers[7].endpoints[0].port == 9092
    offset, records = driver.controller.snapshot()
    assert offset == driver.offset
    rebuilt = Controller.from_snapshot(records, offset).committed_image
    assert rebuilt == image
    assert image_to_records(rebuilt) == records
    assert rebuilt.collisions["x_y"] == ("x.y",)


def test_sources_can_be_given_once_to_the_constructor() -> None:
    controller = Controller(ids=CounterIds(), random=JavaRandom(5))
    driver = Driver(controller)
    driver.brokers(1)
    handled = controller.handle("CreateTopics", create("a"), 0)
    assert handled.records[0].topic.topic_id == (1).to_bytes(16, "big")
    bare = Controller(controller.committed_image)
    with pytest.raises(ValueError, match="needs topic ids"):
        bare.handle("CreateTopics", create("b"), 0, random=JavaRandom(1))
    with pytest.raises(ValueError, match="needs a random source"):
        bare.handle("CreateTopics", create("b"), 0, ids=CounterIds())
    assert bare.handle("DescribeCluster", controller_pb2.DescribeClusterRequest(), 0).done


def test_control_batches_may_commit_between_own_batches() -> None:
    from raftmeta.v1 import records_pb2

    driver = Driver()
    driver.brokers(1)
    driver.send("CreateTopics", create("a"))
    no_op = [records_pb2.MetadataRecord(no_op=records_pb2.NoOpRecord())]
    driver.controller.apply_committed(no_op, driver.offset + 1)  # accepted while a batch is pending
    assert driver.controller.pending_count == 1
    driver.commit()
    before = driver.controller.committed_image
    driver.controller.apply_committed(no_op, driver.offset + 5)
    assert driver.controller.committed_offset == driver.offset + 5
    assert driver.controller.committed_image is before


# ---- several requests in one log batch (the node's open batch) ---------------------------------------
def handle_all(driver: Driver, *requests: controller_pb2.CreateTopicsRequest) -> list[Handled]:
    return [driver.controller.handle("CreateTopics", r, 0, driver.ids, driver.random) for r in requests]


def test_requests_appended_together_commit_together_each_with_its_own_answer() -> None:
    driver = Driver()
    driver.brokers(1)
    before = driver.controller.committed_image
    handled = handle_all(driver, create("a", request_id="ra"), create("a", request_id="rb"), create("b"))
    # The second sees the first's pending topic: a per-topic error and no records of its own.
    assert handled[1].records == () and not handled[1].done
    writers = [h for h in handled if h.records]
    records = [r for h in writers for r in h.records]
    last = driver.offset + len(records)
    assert driver.controller.pending_count == 2
    driver.controller.commit(len(writers), last)
    assert driver.controller.pending_count == 0
    codes = [h.response.topics[0].error_code for h in handled]  # type: ignore[union-attr]
    assert codes == [errors_pb2.NONE, errors_pb2.TOPIC_ALREADY_EXISTS, errors_pb2.NONE]
    # Replaying the combined batch at once gives the image the requests built one by one.
    assert before.replay_all(records) == driver.controller.committed_image
    # The request id of the write is answered from the table afterwards, with its own answer.
    again = driver.controller.handle("CreateTopics", create("a", request_id="ra"), 0, driver.ids, driver.random)
    assert again.done and again.response.topics[0].error_code == errors_pb2.NONE  # type: ignore[union-attr]


def test_commit_checks_counts_and_offsets() -> None:
    driver = Driver()
    driver.brokers(1)
    handle_all(driver, create("a"), create("b"), create("c"))
    offset = driver.controller.committed_offset
    with pytest.raises(ValueError, match="commit of 0 batches"):
        driver.controller.commit(0, offset + 10)
    with pytest.raises(ValueError, match="commit of 4 batches: 3 pending"):
        driver.controller.commit(4, offset + 10)
    with pytest.raises(ValueError, match="does not follow"):
        driver.controller.commit(1, offset)
    driver.controller.commit(2, offset + 4)
    assert driver.controller.committed_image.topic_by_name("b") is not None
    assert driver.controller.committed_image.topic_by_name("c") is None
    with pytest.raises(ValueError, match="does not follow"):
        driver.controller.commit(1, offset + 4)
    driver.controller.commit(1, offset + 6)
    assert driver.controller.committed_image == driver.controller.image
    assert driver.controller.committed_offset == offset + 6


def test_renounce_drops_every_batch_of_a_combined_batch() -> None:
    driver = Driver()
    driver.brokers(1)
    committed = driver.controller.committed_image
    handle_all(driver, create("a", request_id="x"), create("b", request_id="y"))
    driver.controller.renounce()
    assert driver.controller.image == committed and driver.controller.image.requests.get("x") is None
