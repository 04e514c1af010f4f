"""AlterPartition (KIP-497): a partition leader changes its partition's ISR through the controller.

Kafka's ``ReplicationControlManager.alterPartition`` and ``validateAlterPartitionData``, request
version 3 (topic ids, KIP-903's broker epochs per ISR member), with Kafka's error codes:

- the sender's broker epoch is not its registered one: STALE_BROKER_EPOCH for the whole request;
- an unknown topic id: UNKNOWN_TOPIC_ID for each of its partitions; an unknown partition:
  UNKNOWN_TOPIC_OR_PARTITION;
- a leader epoch or partition epoch *newer* than the controller's: NOT_CONTROLLER (this controller
  is behind: the sender should find the current one); an older leader epoch: FENCED_LEADER_EPOCH;
  a sender that is not the partition's leader: INVALID_REQUEST; an older partition epoch:
  INVALID_UPDATE_VERSION (the leader must refresh its metadata and recompute);
- a new ISR with a broker outside the replica set, a broker twice, or without the leader:
  INVALID_REQUEST; so is a leader recovery state of RECOVERING (KIP-704: raftmeta's partitions
  are always RECOVERED, and Kafka refuses a move from RECOVERED to RECOVERING);
- a new ISR with a broker that is not registered, is fenced, or whose broker epoch (when given)
  is not its registered one: INELIGIBLE_REPLICA.

A valid change goes through :class:`PartitionChangeBuilder` like every other partition change, so
the same record rules hold (epochs, a reassignment completed once its adding replicas are in
sync). When that completion moves leadership off the sender, the record is written and the
sender gets NEW_LEADER_ELECTED (Kafka: it must refresh its metadata before trying again).
A partition named twice in one request is refused (INVALID_REQUEST) at every occurrence: both
changes would be built on the same partition state, and replay refuses the second.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from placement.rng import RandomSource
from raftmeta.api.ids import id_text
from raftmeta.controller.brokers import check_broker_epoch
from raftmeta.controller.elections import unclean_enabled
from raftmeta.controller.errors import ApiError
from raftmeta.controller.image import MetadataImage, PartitionRegistration, TopicImage
from raftmeta.controller.partition_change import Election, PartitionChangeBuilder
from raftmeta.controller.result import DEFAULT_CONFIG, ControllerConfig, ControllerResult, TopicIdSource
from raftmeta.v1 import controller_pb2, errors_pb2, records_pb2

UNKNOWN_BROKER_EPOCH = -1
# Kafka's LeaderRecoveryState values.
RECOVERED = 0
RECOVERING = 1


def alter_partition(
    image: MetadataImage,
    request: controller_pb2.AlterPartitionRequest,
    now_ms: int,
    ids: TopicIdSource,
    random: RandomSource,
    config: ControllerConfig = DEFAULT_CONFIG,
) -> ControllerResult[controller_pb2.AlterPartitionResponse]:
    del now_ms, ids, random
    response = controller_pb2.AlterPartitionResponse()
    stale = check_broker_epoch(image, request.broker_id, request.broker_epoch)
    if stale is not None:
        response.error_code = stale.code  # type: ignore[assignment]
        response.error_message = stale.message
        return ControllerResult((), response)
    named = Counter((bytes(t.topic_id), p.partition_index) for t in request.topics for p in t.partitions)
    records: list[records_pb2.MetadataRecord] = []
    accepted: list[tuple[controller_pb2.AlterPartitionPartitionResult, TopicImage, int]] = []
    for topic_data in request.topics:
        topic_id = bytes(topic_data.topic_id)
        topic_result = response.topics.add(topic_id=topic_id)
        topic: TopicImage | None = image.topics.get(topic_id)
        for data in topic_data.partitions:
            result = topic_result.partitions.add(partition_index=data.partition_index)
            if topic is None:
                error: ApiError | None = ApiError(errors_pb2.UNKNOWN_TOPIC_ID, f"Unknown topic id {id_text(topic_id)}.")
            elif named[(topic_id, data.partition_index)] > 1:
                error = ApiError(
                    errors_pb2.INVALID_REQUEST,
                    f"Partition {topic.name}-{data.partition_index} appears more than once in the request.",
                )
            else:
                error = _alter_one(image, config, request.broker_id, topic, data, records)
                if error is None:
                    accepted.append((result, topic, data.partition_index))
            if error is not None:
                result.error_code = error.code  # type: ignore[assignment]
                result.error_message = error.message
    # The partitions as the records leave them, by replay (the one rule for applying a change).
    after_image = image.replay_all(records) if records else image
    for result, topic, pid in accepted:
        after = after_image.partition(topic.topic_id, pid)
        assert after is not None
        if after.leader != request.broker_id:
            # Only a completed reassignment can move leadership here (the ISR keeps the sender).
            result.error_code = errors_pb2.NEW_LEADER_ELECTED
            result.error_message = (
                f"The change completed the reassignment of {topic.name}-{pid} and moved its leadership to "
                f"{after.leader}; refresh the partition's metadata before sending another change."
            )
            continue
        result.leader_id = after.leader
        result.leader_epoch = after.leader_epoch
        result.partition_epoch = after.partition_epoch
        result.isr.extend(after.isr)
    return ControllerResult(tuple(records), response)


def _alter_one(
    image: MetadataImage,
    config: ControllerConfig,
    broker_id: int,
    topic: TopicImage,
    data: controller_pb2.AlterPartitionPartition,
    records: list[records_pb2.MetadataRecord],
) -> ApiError | None:
    """Validate one partition's change and append its record, if it changes anything."""
    pid = data.partition_index
    part = image.partition(topic.topic_id, pid)
    if part is None:
        return ApiError(errors_pb2.UNKNOWN_TOPIC_OR_PARTITION, f"Unknown partition {topic.name}-{pid}.")
    error = validate_alter_partition(image, broker_id, topic.name, pid, part, data)
    if error is not None:
        return error
    election = (
        Election.UNCLEAN if unclean_enabled(image, topic, config.unclean_leader_election_enable) else Election.ONLINE
    )
    builder = PartitionChangeBuilder.in_image(image, part, topic.topic_id, pid, election=election)
    builder.set_target_isr([b.broker_id for b in data.new_isr_with_epochs])
    record = builder.build()
    if record is not None:
        records.append(record)
    return None


def validate_alter_partition(
    image: MetadataImage,
    broker_id: int,
    topic_name: str,
    pid: int,
    part: PartitionRegistration,
    data: controller_pb2.AlterPartitionPartition,
) -> ApiError | None:
    """Kafka's ``validateAlterPartitionData``, in Kafka's order (the first failed rule answers)."""
    where = f"{topic_name}-{pid}"
    if data.leader_epoch > part.leader_epoch or data.partition_epoch > part.partition_epoch:
        return ApiError(
            errors_pb2.NOT_CONTROLLER,
            f"The request for {where} has leader epoch {data.leader_epoch} and partition epoch "
            f"{data.partition_epoch}, newer than this controller's {part.leader_epoch} and {part.partition_epoch}.",
        )
    if data.leader_epoch < part.leader_epoch:
        return ApiError(
            errors_pb2.FENCED_LEADER_EPOCH,
            f"The current leader epoch of {where} is {part.leader_epoch}, not {data.leader_epoch}.",
        )
    if broker_id != part.leader:
        return ApiError(
            errors_pb2.INVALID_REQUEST, f"Broker {broker_id} is not the leader of {where}; the leader is {part.leader}."
        )
    if data.partition_epoch < part.partition_epoch:
        return ApiError(
            errors_pb2.INVALID_UPDATE_VERSION,
            f"The current partition epoch of {where} is {part.partition_epoch}, not {data.partition_epoch}.",
        )
    new_isr = [b.broker_id for b in data.new_isr_with_epochs]
    outside = sorted(set(new_isr) - set(part.replicas))
    if outside or len(set(new_isr)) != len(new_isr):
        return ApiError(
            errors_pb2.INVALID_REQUEST,
            f"new_isr {new_isr} of {where} must name distinct replicas of {list(part.replicas)}"
            + (f"; {outside} are not replicas." if outside else "."),
        )
    if part.leader not in new_isr:
        return ApiError(
            errors_pb2.INVALID_REQUEST, f"new_isr {new_isr} of {where} does not include its leader {part.leader}."
        )
    if data.leader_recovery_state == RECOVERING:
        # Kafka first refuses a recovering leader with more than itself in the ISR, then any move
        # from RECOVERED to RECOVERING; both are INVALID_REQUEST, and every raftmeta partition is
        # RECOVERED (it has no leader recovery state), so either way the answer is this one.
        return ApiError(
            errors_pb2.INVALID_REQUEST,
            f"The leader recovery state of {where} cannot change from RECOVERED to RECOVERING.",
        )
    if data.leader_recovery_state != RECOVERED:
        return ApiError(
            errors_pb2.INVALID_REQUEST,
            f"leader_recovery_state of {where} must be 0 (RECOVERED) or 1 (RECOVERING), "
            f"got {data.leader_recovery_state}.",
        )
    ineligible = ineligible_replicas(image, data.new_isr_with_epochs)
    if ineligible:
        listed = ", ".join(f"{b} ({why})" for b, why in ineligible)
        return ApiError(
            errors_pb2.INELIGIBLE_REPLICA, f"new_isr {new_isr} of {where} has ineligible replicas: {listed}."
        )
    return None


def ineligible_replicas(
    image: MetadataImage, members: Iterable[controller_pb2.BrokerIdAndEpoch]
) -> list[tuple[int, str]]:
    """Kafka's ``ineligibleReplicasForIsr``: members that may not be in an ISR, with the reason."""
    found: list[tuple[int, str]] = []
    for member in members:
        broker = image.brokers.get(member.broker_id)
        if broker is None:
            found.append((member.broker_id, "not registered"))
        elif broker.fenced:
            found.append((member.broker_id, "fenced"))
        elif member.broker_epoch not in (UNKNOWN_BROKER_EPOCH, broker.epoch):
            found.append((member.broker_id, f"broker epoch {member.broker_epoch}, registered {broker.epoch}"))
    return found
