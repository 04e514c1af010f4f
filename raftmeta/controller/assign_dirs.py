"""AssignReplicasToDirs (KIP-858): a broker says which of its log directories holds each replica.

Kafka's ``ReplicationControlManager.handleAssignReplicasToDirs``, its order and its codes:

- the sender's broker epoch is not its registered one (or it is not registered):
  STALE_BROKER_EPOCH for the whole request, nothing written;
- per partition: an unknown topic id is UNKNOWN_TOPIC_ID (every partition named under it), an
  unknown partition UNKNOWN_TOPIC_OR_PARTITION, a partition the broker holds no replica of
  NOT_LEADER_OR_FOLLOWER;
- otherwise a PartitionChangeRecord puts the directory at the broker's place in the partition's
  directories (none when it is already there: a broker's assignments are idempotent);
- a directory that is not one of the broker's online ones (an unknown directory, Kafka's LOST)
  also takes the broker out of the partition's ISR and leadership, as a failed directory does
  (Kafka's ``generateLeaderAndIsrUpdates("offline-dir-assignment")``), in a second record.

Kafka builds every record from the partition as it was before the request and derives the epochs
on replay; raftmeta's records carry their epochs, so the leadership changes are built on the
partitions as the directory records leave them, and a partition named more than once gets one
record with its last directory (the state Kafka's records leave).
"""

from __future__ import annotations

from placement.rng import RandomSource
from raftmeta.api.ids import UUID_BYTES, id_text
from raftmeta.controller.brokers import check_broker_epoch
from raftmeta.controller.directories import is_online_dir
from raftmeta.controller.elections import unclean_enabled
from raftmeta.controller.errors import ApiError
from raftmeta.controller.image import MetadataImage, TopicImage
from raftmeta.controller.partition_change import Election, PartitionChangeBuilder
from raftmeta.controller.result import DEFAULT_CONFIG, ControllerConfig, ControllerResult, TopicIdSource
from raftmeta.v1 import controller_pb2, errors_pb2, records_pb2


def assign_replicas_to_dirs(
    image: MetadataImage,
    request: controller_pb2.AssignReplicasToDirsRequest,
    now_ms: int,
    ids: TopicIdSource,
    random: RandomSource,
    config: ControllerConfig = DEFAULT_CONFIG,
) -> ControllerResult[controller_pb2.AssignReplicasToDirsResponse]:
    del now_ms, ids, random
    response = controller_pb2.AssignReplicasToDirsResponse()
    refusal = check_broker_epoch(image, request.broker_id, request.broker_epoch) or _malformed(request)
    if refusal is not None:
        response.error_code = refusal.code  # type: ignore[assignment]
        response.error_message = refusal.message
        return ControllerResult((), response)
    broker_id = request.broker_id
    broker = image.brokers[broker_id]
    # (topic id, partition) -> its directory, in the order first named (the last one named wins).
    targets: dict[tuple[bytes, int], bytes] = {}
    offline: dict[tuple[bytes, int], None] = {}
    for directory in request.directories:
        dir_id = bytes(directory.id)
        dir_offline = not is_online_dir(broker, dir_id)
        dir_result = response.directories.add(id=dir_id)
        for topic_data in directory.topics:
            topic_id = bytes(topic_data.topic_id)
            topic_result = dir_result.topics.add(topic_id=topic_id)
            topic: TopicImage | None = image.topics.get(topic_id)
            for pid in topic_data.partitions:
                result = topic_result.partitions.add(partition_index=pid)
                error = _partition_error(image, broker_id, topic_id, topic, pid)
                if error is not None:
                    result.error_code = error.code  # type: ignore[assignment]
                    result.error_message = error.message
                    continue
                key = (topic_id, pid)
                targets.pop(key, None)
                targets[key] = dir_id
                if dir_offline:
                    offline[key] = None
    records: list[records_pb2.MetadataRecord] = []
    for (topic_id, pid), dir_id in targets.items():
        part = image.topics[topic_id].partitions[pid]
        builder = PartitionChangeBuilder.in_image(image, part, topic_id, pid)
        record = builder.set_directory(broker_id, dir_id).build()
        if record is not None:
            records.append(record)
    if offline:
        records.extend(_leave(image.replay_all(records) if records else image, broker_id, offline, config))
    return ControllerResult(tuple(records), response)


def _malformed(request: controller_pb2.AssignReplicasToDirsRequest) -> ApiError | None:
    """A directory or topic id that is not 16 bytes (Kafka's wire format cannot carry one)."""
    for i, directory in enumerate(request.directories):
        if len(directory.id) != UUID_BYTES:
            return ApiError(
                errors_pb2.INVALID_REQUEST, f"directories[{i}].id: a directory id is 16 bytes, got {len(directory.id)}"
            )
        for j, topic in enumerate(directory.topics):
            if len(topic.topic_id) != UUID_BYTES:
                return ApiError(
                    errors_pb2.INVALID_REQUEST,
                    f"directories[{i}].topics[{j}].topic_id: a topic id is 16 bytes, got {len(topic.topic_id)}",
                )
    return None


def _partition_error(
    image: MetadataImage, broker_id: int, topic_id: bytes, topic: TopicImage | None, pid: int
) -> ApiError | None:
    if topic is None:
        return ApiError(errors_pb2.UNKNOWN_TOPIC_ID, f"Unknown topic id {id_text(topic_id)}.")
    part = image.partition(topic_id, pid)
    if part is None:
        return ApiError(errors_pb2.UNKNOWN_TOPIC_OR_PARTITION, f"Unknown partition {topic.name}-{pid}.")
    if broker_id not in part.replicas:
        return ApiError(
            errors_pb2.NOT_LEADER_OR_FOLLOWER,
            f"Broker {broker_id} is not a replica of {topic.name}-{pid} (replicas {list(part.replicas)}).",
        )
    return None


def _leave(
    image: MetadataImage, broker_id: int, partitions: dict[tuple[bytes, int], None], config: ControllerConfig
) -> list[records_pb2.MetadataRecord]:
    """Kafka's ``generateLeaderAndIsrUpdates`` with ``brokerToRemove`` on ``partitions``: the
    broker leaves each one's ISR (unless it is the last member) and leadership."""

    def acceptable(candidate: int) -> bool:
        return candidate != broker_id and image.is_unfenced(candidate)

    records = []
    for topic_id, pid in partitions:
        topic: TopicImage = image.topics[topic_id]
        part = topic.partitions[pid]
        if part.leader != broker_id and broker_id not in part.isr:
            continue
        election = (
            Election.UNCLEAN
            if unclean_enabled(image, topic, config.unclean_leader_election_enable)
            else Election.ONLINE
        )
        builder = PartitionChangeBuilder(part, topic_id, pid, acceptable, election=election, image=image)
        builder.set_target_isr([b for b in part.isr if b != broker_id])
        record = builder.build()
        if record is not None:
            records.append(record)
    return records
