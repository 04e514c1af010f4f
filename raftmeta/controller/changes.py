"""The broker and partition changes a batch makes, as log lines an operator reads at info level.

Fencing, unfencing, controlled shutdown, ISR changes and elections are what an operator asks
about after an incident ("why did broker 3 lose its leaderships?"), so the controller names each
with its broker, topic, partition and epochs. A batch that changes many partitions at once (a
broker with a thousand leaderships fenced) gets one line per partition up to
``PARTITION_LINES_MAX``, then one summary line. Pure: the QuorumController hands the lines to its
driver, which logs them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from raftmeta.api.ids import id_text
from raftmeta.controller.image import NO_LEADER, MetadataImage
from raftmeta.v1 import records_pb2

# Methods whose batches change brokers or existing partitions (CreateTopics and CreatePartitions
# only add partitions; their own log lines say so).
LOGGED_METHODS = frozenset(
    {
        "RegisterBroker",
        "BrokerHeartbeat",
        "UnregisterBroker",
        "AlterPartition",
        "ElectLeaders",
        "AlterPartitionReassignments",
    }
)
# The controller's own timer batches, named by what they do.
BROKER_SESSION_EXPIRED = "broker session expired"
AUTO_LEADER_REBALANCE = "auto leader rebalance"
LEADERLESS_ELECTED = "leaderless partitions elected"
BOOTSTRAP_RECORDS = "bootstrap records"
TIMER_CAUSES = frozenset({BROKER_SESSION_EXPIRED, AUTO_LEADER_REBALANCE, LEADERLESS_ELECTED})
PARTITION_LINES_MAX = 20

Line = tuple[str, dict[str, Any]]


def describe_changes(image: MetadataImage, cause: str, records: Sequence[records_pb2.MetadataRecord]) -> list[Line]:
    """Log lines for the broker and partition changes in ``records`` (built on ``image``)."""
    lines: list[Line] = []
    partition_lines = 0
    for record in records:
        kind = record.WhichOneof("record")
        if kind == "partition_change":
            partition_lines += 1
            if partition_lines <= PARTITION_LINES_MAX:
                lines.append(_partition_line(image, cause, record.partition_change))
        elif kind == "register_broker":
            rec = record.register_broker
            lines.append(("broker registered", {"broker_id": rec.broker_id, "broker_epoch": rec.broker_epoch}))
        elif kind == "fence_broker":
            rec_f = record.fence_broker
            lines.append(
                ("broker fenced", {"broker_id": rec_f.broker_id, "broker_epoch": rec_f.broker_epoch, "cause": cause})
            )
        elif kind == "unfence_broker":
            rec_u = record.unfence_broker
            lines.append(("broker unfenced", {"broker_id": rec_u.broker_id, "broker_epoch": rec_u.broker_epoch}))
        elif kind == "broker_log_dirs_change":
            rec_d = record.broker_log_dirs_change
            lines.append(
                (
                    "broker log directories changed",
                    {
                        "broker_id": rec_d.broker_id,
                        "broker_epoch": rec_d.broker_epoch,
                        "log_dirs": [id_text(d) for d in rec_d.log_dirs],
                        "cause": cause,
                    },
                )
            )
        elif kind == "unregister_broker":
            rec_r = record.unregister_broker
            lines.append(("broker unregistered", {"broker_id": rec_r.broker_id, "broker_epoch": rec_r.broker_epoch}))
    if partition_lines > PARTITION_LINES_MAX:
        lines.append(
            (
                "more partitions changed",
                {"cause": cause, "partitions": partition_lines, "not_listed": partition_lines - PARTITION_LINES_MAX},
            )
        )
    return lines


def _partition_line(image: MetadataImage, cause: str, change: records_pb2.PartitionChangeRecord) -> Line:
    topic = image.topics.get(change.topic_id)
    part = image.partition(change.topic_id, change.partition_id)
    fields: dict[str, Any] = {
        "cause": cause,
        "topic": topic.name if topic is not None else id_text(change.topic_id),
        "partition": change.partition_id,
        "leader_epoch": change.leader_epoch,
        "partition_epoch": change.partition_epoch,
    }
    if change.HasField("leader"):
        fields["leader"] = change.leader
        if part is not None:
            fields["previous_leader"] = part.leader
    if change.HasField("isr"):
        fields["isr"] = list(change.isr.ids)
        if part is not None:
            fields["previous_isr"] = list(part.isr)
    if change.HasField("replicas"):
        fields["replicas"] = list(change.replicas.ids)
    if change.unclean_election:
        fields["unclean_election"] = True
    # A record may name the same leader again (a replica left: a new leader epoch, same leader).
    elected = change.HasField("leader") and (part is None or change.leader != part.leader)
    if elected and change.leader == NO_LEADER:
        return "partition offline: no eligible leader", fields
    if elected:
        return "partition leader elected", fields
    return "partition ISR changed", fields
