"""The Spark state check on partition reassignments (KIP-455): a move the controller writes -- start,
one replica catching up, completion with a new leader -- passes every rule on every state, and a
move that loses the partition's last in-sync replica fails, naming the partition and the offset.

The records of the good move come from the pure controller itself (the same handlers the node
runs), replayed onto the image the synthetic quorum log describes."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from placement.rng import JavaRandom
from raftmeta.controller import ControllerResult, MetadataImage
from raftmeta.controller.brokers import broker_heartbeat
from raftmeta.controller.controller import Handler
from raftmeta.controller.reassign import alter_partition_reassignments
from raftmeta.jobs.state import NodeReplay, state_checks
from raftmeta.records import codec
from raftmeta.v1 import controller_pb2, records_pb2
from tests.jobs.quorum_logs import LogBatch, append_everywhere, write_quorum

if TYPE_CHECKING:
    from google.protobuf.message import Message
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark


def committed_image(logs: dict[int, list[LogBatch]]) -> MetadataImage:
    """The controller's image of the synthetic log. Its topic-0 has the all-zero id, which the
    controller refuses (ids come from uuid4); the move concerns topic-1, so topic-0 is left out."""
    image = MetadataImage.empty()
    for batch in logs[1]:
        for data in codec.split_records(batch.data, codec.check_batch(batch.data)):
            record = records_pb2.MetadataRecord.FromString(data)
            kind = record.WhichOneof("record")
            if kind in ("topic", "partition") and getattr(record, kind).topic_id == bytes(16):
                continue
            image = image.replay(record)
    return image


def controller_move(image: MetadataImage) -> list[list[bytes]]:
    """topic-1 partition 0 ([1, 2, 3], leader 1) moves to [4, 5, 3]: three batches, as committed."""
    batches: list[list[bytes]] = []

    def run(handler: Handler, request: Message) -> ControllerResult[Any]:
        nonlocal image
        result = handler(image, request, 0, lambda: b"\x01" * 16, JavaRandom(0))
        image = image.replay_all(result.records)
        batches.append([r.SerializeToString() for r in result.records])
        return result

    run(
        alter_partition_reassignments,
        controller_pb2.AlterPartitionReassignmentsRequest(
            topics=[
                controller_pb2.ReassignableTopic(
                    name="topic-1",
                    partitions=[controller_pb2.ReassignablePartition(partition_index=0, replicas=[4, 5, 3])],
                )
            ]
        ),
    )
    for broker_id in (4, 5):
        run(
            broker_heartbeat,
            controller_pb2.BrokerHeartbeatRequest(
                broker_id=broker_id,
                broker_epoch=image.brokers[broker_id].epoch,
                caught_up_replicas=[controller_pb2.TopicIdPartition(topic_id=(1).to_bytes(16, "big"), partition_id=0)],
            ),
        )
    final = image.partition((1).to_bytes(16, "big"), 0)
    assert final is not None and (final.replicas, final.leader) == ((4, 5, 3), 4)
    return batches


def move_change(index: int, partition: int, **fields: object) -> bytes:
    change = records_pb2.PartitionChangeRecord(topic_id=index.to_bytes(16, "big"), partition_id=partition)
    for name, value in fields.items():
        if name in ("isr", "replicas", "adding_replicas", "removing_replicas"):
            getattr(change, name).SetInParent()
            getattr(change, name).ids.extend(value)
        else:
            setattr(change, name, value)
    return records_pb2.MetadataRecord(partition_change=change).SerializeToString()


def test_a_controller_move_passes_and_a_lost_last_isr_member_fails(spark: SparkSession, tmp_path: Path) -> None:
    logs = write_quorum(tmp_path, topics=4, lagging=False)
    for batch in controller_move(committed_image(logs)):
        append_everywhere(tmp_path, logs, batch)
    checks, state = state_checks(NodeReplay(spark, str(tmp_path / "node-1")))
    assert all(c.passed for c in checks), checks
    assert state.partition("topic-1", 0) == ([4, 5, 3], [4, 5, 3], 4)

    # topic-2 partition 0 ([2, 3, 4]) starts a move to [5, 0, 4], then a broken completion drops the
    # removing replicas while no adding replica is in sync: the ISR ends up empty.
    append_everywhere(
        tmp_path,
        logs,
        [
            move_change(
                2, 0, replicas=[5, 0, 2, 3, 4], adding_replicas=[5, 0], removing_replicas=[2, 3],
                leader_epoch=0, partition_epoch=1,
            )
        ],
    )  # fmt: skip
    bad = append_everywhere(
        tmp_path,
        logs,
        [
            move_change(
                2, 0, replicas=[5, 0, 4], isr=[], adding_replicas=[], removing_replicas=[], leader=-1,
                leader_epoch=1, partition_epoch=2,
            )
        ],
    )  # fmt: skip
    checks, _ = state_checks(NodeReplay(spark, str(tmp_path / "node-1")))
    verdict = {c.name: c for c in checks}
    assert not verdict["partition-states-valid"].passed
    detail = verdict["partition-states-valid"].detail
    assert f"topic-2-0 at offset {bad}: ISR empty: the partition lost its last in-sync replica" in detail
    assert "topic-1-0" not in detail, "the controller's own move stays valid"
    assert detail.count("topic-2-0") == 1, "the started move (ISR intact) is valid"


def test_a_replay_that_first_sees_a_partition_mid_move_keeps_its_replication_factor(
    spark: SparkSession, tmp_path: Path
) -> None:
    # A replay based on a snapshot taken during a move first sees the partition as a PartitionRecord
    # with adding replicas: its replication factor is replicas - adding, not every replica listed
    # (regression: the completed move was reported as a changed replication factor).
    logs = write_quorum(tmp_path, topics=1, lagging=False)
    topic_id = (9).to_bytes(16, "big")
    mid_move = records_pb2.PartitionRecord(
        topic_id=topic_id, partition_id=0, replicas=[4, 5, 1, 2], isr=[1, 2, 4, 5], leader=1,
        adding_replicas=[4, 5], removing_replicas=[1, 2],
    )  # fmt: skip
    append_everywhere(
        tmp_path,
        logs,
        [
            records_pb2.MetadataRecord(
                topic=records_pb2.TopicRecord(name="moving", topic_id=topic_id)
            ).SerializeToString(),
            records_pb2.MetadataRecord(partition=mid_move).SerializeToString(),
        ],
    )
    append_everywhere(
        tmp_path,
        logs,
        [
            move_change(
                9, 0, replicas=[4, 5], isr=[4, 5], leader=4, adding_replicas=[], removing_replicas=[],
                leader_epoch=1, partition_epoch=1,
            )
        ],
    )  # fmt: skip
    checks, _ = state_checks(NodeReplay(spark, str(tmp_path / "node-1")))
    assert all(c.passed for c in checks), checks
