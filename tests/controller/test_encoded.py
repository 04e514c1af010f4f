"""Snapshots write a topic created since the last one with the PartitionRecords its creation
committed (raftmeta/controller/encoded.py): on the leader (its own encoding), on a follower
(the committed bytes, when canonical) and on a node loaded from a snapshot. Whatever the path,
the snapshot's bytes must be exactly ``image_to_records`` serialized."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from raftmeta.controller import Controller, image_to_records
from raftmeta.controller.encoded import EncodedTopics, encoded_partitions
from raftmeta.controller.snapshot import SnapshotEncoder
from raftmeta.records.decode import LazyRecords, serialized
from raftmeta.v1 import controller_pb2, records_pb2
from tests.controller.helpers import Context
from tests.controller.test_new_topics import clusters, creatable


def expected(controller: Controller) -> list[bytes]:
    return [r.SerializeToString() for r in image_to_records(controller.committed_image)]


def snapshot_bytes(controller: Controller, encoder: SnapshotEncoder | None = None) -> list[bytes]:
    return (encoder or SnapshotEncoder()).records(controller.committed_image, controller.encoded)


class Quorum:
    """A leader controller and a follower replaying its committed batches from their bytes."""

    def __init__(self, ctx: Context) -> None:
        self.leader = Controller(ctx.image, ids=ctx.ids, random=ctx.random, committed_offset=0)
        self.follower = Controller(ctx.image, committed_offset=0)
        self.offset = 0

    def send(self, method: str, request: object) -> None:
        handled = self.leader.handle(method, request, 0)  # type: ignore[arg-type]
        if handled.records:
            data = serialized(handled.records)
            self.offset += len(data)
            self.leader.commit(1, self.offset)
            self.follower.apply_committed(LazyRecords(data), self.offset)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_snapshots_of_created_topics_are_image_to_records(data: st.DataObject) -> None:
    """Random creates, partition growth, fencing (ISR changes: new topic values) and deletes; a
    snapshot now and then, with a long-lived encoder as a node has. Leader, follower and a
    controller loaded from the snapshot all write image_to_records' bytes."""
    ctx = data.draw(clusters())
    quorum = Quorum(ctx)
    encoders = {"leader": SnapshotEncoder(), "follower": SnapshotEncoder()}
    brokers = sorted(ctx.image.brokers)
    for index in range(data.draw(st.integers(1, 6))):
        action = data.draw(st.sampled_from(["create", "create", "grow", "fence", "delete", "snapshot"]))
        image = quorum.leader.committed_image
        names = sorted(t.name for t in image.topics.values())
        if action == "create":
            topics = data.draw(st.lists(creatable(len(brokers)), min_size=1, max_size=3))
            quorum.send("CreateTopics", controller_pb2.CreateTopicsRequest(topics=topics, request_id=f"r{index}"))
        elif action == "grow" and names:
            name = data.draw(st.sampled_from(names))
            grow = controller_pb2.CreatePartitionsTopic(name=name, count=data.draw(st.integers(1, 12)))
            quorum.send("CreatePartitions", controller_pb2.CreatePartitionsRequest(topics=[grow]))
        elif action == "fence":
            broker = data.draw(st.sampled_from(brokers))
            registration = image.brokers[broker]
            heartbeat = controller_pb2.BrokerHeartbeatRequest(
                broker_id=broker, broker_epoch=registration.epoch, want_fence=not registration.fenced
            )
            quorum.send("BrokerHeartbeat", heartbeat)
        elif action == "delete" and names:
            name = data.draw(st.sampled_from(names))
            quorum.send("DeleteTopics", controller_pb2.DeleteTopicsRequest(topic_names=[name]))
        elif action == "snapshot":
            for role, controller in (("leader", quorum.leader), ("follower", quorum.follower)):
                assert snapshot_bytes(controller, encoders[role]) == expected(controller)
                controller.encoded.prune(quorum.offset + 1)
                assert len(controller.encoded) == 0
        for controller in (quorum.leader, quorum.follower):
            assert snapshot_bytes(controller) == expected(controller)
    for role, controller in (("leader", quorum.leader), ("follower", quorum.follower)):
        assert snapshot_bytes(controller, encoders[role]) == expected(controller)
    loaded = Controller.from_snapshot(LazyRecords(expected(quorum.follower)), quorum.offset)
    assert loaded.committed_image == quorum.follower.committed_image
    assert snapshot_bytes(loaded) == expected(loaded)


def created_quorum() -> Quorum:
    ctx = Context()
    ctx.add_brokers([0, 1, 2, 3], racks=["a", "b", "a", "b"])
    quorum = Quorum(ctx)
    request = controller_pb2.CreateTopicsRequest(
        topics=[controller_pb2.CreatableTopic(name="orders", num_partitions=200, replication_factor=3)]
    )
    quorum.send("CreateTopics", request)
    return quorum


def test_every_path_keeps_the_encoding_of_a_new_topic() -> None:
    quorum = created_quorum()
    for controller in (quorum.leader, quorum.follower):
        topic = controller.committed_image.topic_by_name("orders")
        assert topic is not None
        known = controller.encoded.get(topic)
        assert known is not None and known.framed.record_count == 200
        assert snapshot_bytes(controller) == expected(controller)
    loaded = Controller.from_snapshot(LazyRecords(expected(quorum.leader)), quorum.offset)
    topic = loaded.committed_image.topic_by_name("orders")
    assert topic is not None and loaded.encoded.get(topic) is not None


def test_a_changed_topic_is_encoded_again() -> None:
    quorum = created_quorum()
    before = quorum.leader.committed_image.topic_by_name("orders")
    epoch = quorum.leader.committed_image.brokers[1].epoch
    quorum.send(
        "BrokerHeartbeat", controller_pb2.BrokerHeartbeatRequest(broker_id=1, broker_epoch=epoch, want_fence=True)
    )
    for controller in (quorum.leader, quorum.follower):
        topic = controller.committed_image.topic_by_name("orders")
        assert topic is not None and topic is not before
        assert controller.encoded.get(topic) is None
        assert snapshot_bytes(controller) == expected(controller)


def follower_replaying(raw: list[bytes]) -> Controller:
    """A controller on brokers 0-3 that applied ``raw`` as one committed batch."""
    ctx = Context()
    ctx.add_brokers([0, 1, 2, 3], racks=["a", "b", "a", "b"])
    follower = Controller(ctx.image, committed_offset=0)
    follower.apply_committed(LazyRecords(raw), len(raw))
    return follower


def test_non_canonical_partition_records_are_not_kept() -> None:
    """Bytes protobuf reads as the same record but would not write -- a partition id of zero
    written out, an overlong varint -- are replayed the general way and never reach a snapshot."""
    raw: list[bytes] = []
    cases = {"zero": [b"\x10\x00"], "long": [b"", b"\x10\x81\x00"]}  # partition ids 0; 0 and 1
    for index, (name, pid_fields) in enumerate(cases.items()):
        topic_id = (7 + index).to_bytes(16, "big")
        raw.append(
            records_pb2.MetadataRecord(topic=records_pb2.TopicRecord(name=name, topic_id=topic_id)).SerializeToString()
        )
        for pid, pid_field in enumerate(pid_fields):
            body = b"\x0a\x10" + topic_id + pid_field + b"\x1a\x01\x00\x22\x01\x00"
            raw.append(b"\x12" + bytes([len(body)]) + body)
            assert records_pb2.MetadataRecord.FromString(raw[-1]).partition.partition_id == pid
    follower = follower_replaying(raw)
    for name, pid_fields in cases.items():
        topic = follower.committed_image.topic_by_name(name)
        assert topic is not None and len(topic.partitions) == len(pid_fields)
        assert follower.encoded.get(topic) is None
    assert snapshot_bytes(follower) == expected(follower)


def test_a_topic_changed_in_its_creating_batch_is_not_kept() -> None:
    quorum = created_quorum()
    topic = quorum.leader.committed_image.topic_by_name("orders")
    assert topic is not None
    first = serialized(image_to_records(quorum.leader.committed_image))
    part = topic.partitions[0]
    change = records_pb2.MetadataRecord(
        partition_change=records_pb2.PartitionChangeRecord(
            topic_id=topic.topic_id,
            partition_id=0,
            isr=records_pb2.BrokerIdList(ids=part.replicas[:2]),
            leader=part.leader,
            leader_epoch=part.leader_epoch,
            partition_epoch=part.partition_epoch + 1,
        )
    )
    creation = [
        r for r in first if records_pb2.MetadataRecord.FromString(r).WhichOneof("record") in ("topic", "partition")
    ]
    follower = follower_replaying([*creation, change.SerializeToString()])
    changed = follower.committed_image.topic_by_name("orders")
    assert changed is not None and changed.partitions[0].isr == part.replicas[:2]
    assert follower.encoded.get(changed) is None
    assert snapshot_bytes(follower) == expected(follower)


def test_prune_keeps_only_topics_committed_at_or_after_the_snapshot_end() -> None:
    quorum = created_quorum()
    topic = quorum.leader.committed_image.topic_by_name("orders")
    assert topic is not None
    table = EncodedTopics()
    table.add(10, encoded_partitions(topic, [b"x"]))
    table.prune(10)
    assert table.get(topic) is not None
    table.prune(11)
    assert table.get(topic) is None and len(table) == 0
