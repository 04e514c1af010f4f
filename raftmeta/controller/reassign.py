"""Partition reassignment (KIP-455): AlterPartitionReassignments, ListPartitionReassignments and the
heartbeat-driven catch-up that completes a move.

Theory of operation
-------------------
raftmeta has no data plane, so "copying a partition" is simulated by the brokers' heartbeats; the
metadata follows Kafka's KRaft controller (``ReplicationControlManager.alterPartitionReassignment``,
``PartitionReassignmentReplicas``, ``PartitionReassignmentRevert``) record for record:

1. **Start.** A target replica list for a partition becomes one ``PartitionChangeRecord``:
   replicas = target ∪ original, adding = target - original, removing = original - target (as
   Kafka). The ISR and leader are unchanged. A target equal to the replicas changes nothing; a
   pure reorder (no adding, no removing) completes at once. **Order** (:func:`merged_replicas`):
   Kafka writes target + removing, which loses the original order, so a cancelled move can come
   back reordered. raftmeta interleaves the two lists instead whenever the replicas they share are
   in the same relative order in both (every move that only swaps brokers out): then
   replicas - removing is the target and replicas - adding the original, both exactly. Otherwise it
   writes Kafka's target + removing.
2. **Catch-up.** Every heartbeat response lists the partitions the broker is adding and has not yet
   caught up (``adding_replicas``). The broker (``raftmeta.local.fleet``) waits its configured delay, then
   reports them in a later heartbeat (``caught_up_replicas``). Each report that still applies -- the
   broker is adding that partition, is not in its ISR, and the partition has a leader to copy from --
   is one record adding the broker to the ISR.
3. **Completion.** The record in which the last adding replica joins the ISR also completes the move
   (``PartitionChangeBuilder``): replicas = target, the removing replicas leave the ISR, adding and
   removing are cleared, and if the leader was removed the first in-sync target replica leads.
4. **Cancel** (Kafka's null target): replicas = replicas - adding (the original replicas, in their
   original order except after a reordering target, see 1.), ISR - adding, a leader among the
   adding replicas replaced. Refused when no original replica is in sync (Kafka would need an unclean
   election; raftmeta refuses instead).
5. **A new target while a move runs** replaces it (KIP-455): adding and removing are computed
   against the *original* replicas, so the replication factor seen by readers (replicas - adding)
   never changes; replicas the old target was adding and the new one does not want are dropped.

Rules (per partition, Kafka's error codes; an item with an error writes nothing):

- unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION;
- the same partition twice in one request: INVALID_REQUEST;
- cancel with replicas given: INVALID_REQUEST; cancel without a move: NO_REASSIGNMENT_IN_PROGRESS;
- empty target, a broker twice, an unregistered broker: INVALID_REPLICA_ASSIGNMENT (Kafka's words);
- a target whose size differs from the topic's replication factor: INVALID_REPLICATION_FACTOR
  (raftmeta keeps a topic's replication factor fixed, DESIGN.md §9 invariant 7);
- a new replica on a fenced broker: INVALID_REPLICA_ASSIGNMENT (nothing could copy to it);
- a broker outside the pool the topic was created in: INVALID_REPLICA_ASSIGNMENT (a pooled topic
  stays in its pool; a topic created without a pool may be moved into one).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from placement.rng import RandomSource
from raftmeta.controller import placement_bridge
from raftmeta.controller.errors import ApiError
from raftmeta.controller.image import NO_LEADER, MetadataImage, PartitionRegistration, TopicImage
from raftmeta.controller.partition_change import PartitionChangeBuilder
from raftmeta.controller.result import DEFAULT_CONFIG, ControllerConfig, ControllerResult, TopicIdSource
from raftmeta.v1 import controller_pb2, errors_pb2, records_pb2

NO_REASSIGNMENT = "No partition reassignment is in progress."


def original_replicas(part: PartitionRegistration) -> tuple[int, ...]:
    """The replicas before the ongoing move (Kafka's ``originalReplicas``: replicas - adding)."""
    adding = set(part.adding_replicas)
    return tuple(b for b in part.replicas if b not in adding)


def target_replicas(part: PartitionRegistration) -> tuple[int, ...]:
    """Where the partition is going (replicas - removing); its replicas when nothing moves."""
    removing = set(part.removing_replicas)
    return tuple(b for b in part.replicas if b not in removing)


def merged_replicas(original: Sequence[int], target: Sequence[int]) -> tuple[int, ...]:
    """The replicas while moving from ``original`` to ``target``: their union, ordered so that
    dropping the removing replicas gives ``target`` and dropping the adding ones gives ``original``.

    Possible exactly when the shared replicas are in the same relative order in both lists; each gap
    before a shared replica takes the target's new replicas first, then the original's leaving ones.
    Otherwise Kafka's order: target + (original - target).
    """
    target_set, original_set = set(target), set(original)
    shared = [b for b in target if b in original_set]
    removing = [b for b in original if b not in target_set]
    if shared != [b for b in original if b in target_set]:
        return (*target, *removing)
    merged: list[int] = []
    i = j = 0
    for anchor in (*shared, None):
        while j < len(target) and target[j] != anchor:
            merged.append(target[j])
            j += 1
        while i < len(original) and original[i] != anchor:
            merged.append(original[i])
            i += 1
        if anchor is not None:
            merged.append(anchor)
            i += 1
            j += 1
    return tuple(merged)


def is_reassigning(part: PartitionRegistration) -> bool:
    return bool(part.adding_replicas or part.removing_replicas)


def replication_factor(topic: TopicImage) -> int:
    """The topic's replication factor, which an ongoing move does not change."""
    part = topic.partitions[0]
    return len(part.replicas) - len(part.adding_replicas)


def _isr_within(isr: Sequence[int], replicas: Iterable[int]) -> tuple[int, ...]:
    """The ISR members that stay replicas, in the ISR's order (no reordering, no needless record)."""
    kept = set(replicas)
    return tuple(b for b in isr if b in kept)


# ---- AlterPartitionReassignments -----------------------------------------------------------------
def alter_partition_reassignments(
    image: MetadataImage,
    request: controller_pb2.AlterPartitionReassignmentsRequest,
    now_ms: int,
    ids: TopicIdSource,
    random: RandomSource,
    config: ControllerConfig = DEFAULT_CONFIG,
) -> ControllerResult[controller_pb2.AlterPartitionReassignmentsResponse]:
    """Start, replace or cancel reassignments, one result per partition in request order."""
    del now_ms, ids, random, config
    response = controller_pb2.AlterPartitionReassignmentsResponse()
    records: list[records_pb2.MetadataRecord] = []
    seen: set[tuple[str, int]] = set()
    duplicates: set[tuple[str, int]] = set()
    for named in request.topics:
        for partition in named.partitions:
            key = (named.name, partition.partition_index)
            (duplicates if key in seen else seen).add(key)
    for topic_request in request.topics:
        topic_result = response.results.add(name=topic_request.name)
        found = image.topic_by_name(topic_request.name)
        for target in topic_request.partitions:
            result = topic_result.partitions.add(partition_index=target.partition_index)
            if (topic_request.name, target.partition_index) in duplicates:
                outcome: records_pb2.MetadataRecord | ApiError | None = ApiError(
                    errors_pb2.INVALID_REQUEST,
                    f"Partition {topic_request.name}:{target.partition_index} appears more than once in the request.",
                )
            else:
                outcome = _alter_one(image, topic_request.name, found, target)
            if isinstance(outcome, ApiError):
                result.error_code = outcome.code  # type: ignore[assignment]
                result.error_message = outcome.message
            elif outcome is not None:
                records.append(outcome)
    return ControllerResult(tuple(records), response)


def _alter_one(
    image: MetadataImage,
    name: str,
    topic: TopicImage | None,
    target: controller_pb2.ReassignablePartition,
) -> records_pb2.MetadataRecord | ApiError | None:
    if topic is None:
        return ApiError(errors_pb2.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {name}.")
    pid = target.partition_index
    if not 0 <= pid < len(topic.partitions):
        return ApiError(errors_pb2.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {name}:{pid}.")
    part = topic.partitions[pid]
    if target.cancel:
        if target.replicas:
            return ApiError(
                errors_pb2.INVALID_REQUEST,
                f"Partition {name}:{pid}: cancel is set and replicas are given; a cancel names no replicas.",
            )
        return _cancel(image, topic, pid, part)
    return _change(image, topic, pid, part, list(target.replicas))


def _cancel(
    image: MetadataImage, topic: TopicImage, pid: int, part: PartitionRegistration
) -> records_pb2.MetadataRecord | ApiError | None:
    """Kafka's ``cancelPartitionReassignment`` + ``PartitionReassignmentRevert``."""
    if not is_reassigning(part):
        return ApiError(errors_pb2.NO_REASSIGNMENT_IN_PROGRESS, NO_REASSIGNMENT)
    replicas = original_replicas(part)
    isr = _isr_within(part.isr, replicas)
    if not isr:
        return ApiError(
            errors_pb2.INVALID_REPLICA_ASSIGNMENT,
            f"Unable to revert partition assignment for {topic.name}:{pid} because it would require an unclean "
            "leader election.",
        )
    # An ONLINE election: a leader among the adding replicas gives way to the first live original
    # replica in sync; a cancel never makes an unclean choice.
    builder = PartitionChangeBuilder.in_image(image, part, topic.topic_id, pid)
    builder.set_target_replicas(replicas).set_target_isr(isr).set_target_adding(()).set_target_removing(())
    return builder.build()


def _change(
    image: MetadataImage, topic: TopicImage, pid: int, part: PartitionRegistration, target: list[int]
) -> records_pb2.MetadataRecord | ApiError | None:
    """Kafka's ``changePartitionReassignment``: validate the target, then one record (or none)."""
    name = topic.name
    try:
        placement_bridge.validate_manual(image, [target], replication_factor=None, first_partition=pid)
    except placement_bridge.PlacementError as error:
        api_error = placement_bridge.to_api_error(error)
        return ApiError(api_error.code, f"Topic {name}: {api_error.message}")
    rf = replication_factor(topic)
    if len(target) != rf:
        return ApiError(
            errors_pb2.INVALID_REPLICATION_FACTOR,
            f"The replication factor is changed from {rf} to {len(target)} for {name}:{pid}; a reassignment "
            f"keeps the topic's replication factor (give {rf} replicas).",
        )
    original = original_replicas(part)
    if topic.pool is not None:
        outside = [b for b in target if image.brokers[b].pool != topic.pool]
        if outside:
            return ApiError(
                errors_pb2.INVALID_REPLICA_ASSIGNMENT,
                f"Broker {outside[0]} is not in broker pool '{topic.pool}', where topic {name} was created; "
                "the replicas of a pooled topic stay in its pool.",
            )
    fenced = [b for b in target if b not in original and not image.is_unfenced(b)]
    if fenced:
        return ApiError(
            errors_pb2.INVALID_REPLICA_ASSIGNMENT,
            f"The target replicas of {name}:{pid} add broker {fenced[0]}, which is fenced: a new replica needs a "
            "live broker to copy the partition to.",
        )
    if tuple(target) == target_replicas(part) and is_reassigning(part):
        return None  # the same move again: already under way
    target_set = set(target)
    original_set = set(original)
    removing = tuple(b for b in original if b not in target_set)
    adding = tuple(b for b in target if b not in original_set)
    replicas = merged_replicas(original, target)
    # Replicas an earlier target was adding and this one drops leave the ISR with the replica list.
    isr = _isr_within(part.isr, replicas)
    if not isr:
        return ApiError(
            errors_pb2.INVALID_REPLICA_ASSIGNMENT,
            f"Changing the reassignment of {name}:{pid} would leave it without an in-sync replica (ISR "
            f"{list(part.isr)}); cancel it or wait for the ISR to recover.",
        )
    # The adding replicas start in their brokers' default directories (Kafka's PartitionAssignment).
    builder = PartitionChangeBuilder.in_image(image, part, topic.topic_id, pid)
    builder.set_target_replicas(replicas).set_target_isr(isr).set_target_adding(adding).set_target_removing(removing)
    return builder.build()


# ---- ListPartitionReassignments ------------------------------------------------------------------
def list_partition_reassignments(
    image: MetadataImage,
    request: controller_pb2.ListPartitionReassignmentsRequest,
    now_ms: int = 0,
    ids: TopicIdSource | None = None,
    random: RandomSource | None = None,
    config: ControllerConfig = DEFAULT_CONFIG,
) -> ControllerResult[controller_pb2.ListPartitionReassignmentsResponse]:
    """Ongoing reassignments: all of them, or those of the named partitions (a named partition that is
    not moving is left out; an unknown one fails the request, as in Kafka)."""
    del now_ms, ids, random, config
    response = controller_pb2.ListPartitionReassignmentsResponse()
    found: list[tuple[TopicImage, int, PartitionRegistration]] = []
    if not request.topics:
        found = image.reassignments()
    else:
        for tp in request.topics:
            topic = image.topic_by_name(tp.topic)
            if topic is None:
                response.error_code = errors_pb2.UNKNOWN_TOPIC_OR_PARTITION
                response.error_message = f"Unable to find a topic named {tp.topic}."
                return ControllerResult((), response)
            pids = list(tp.partitions) or list(range(len(topic.partitions)))
            for pid in pids:
                if not 0 <= pid < len(topic.partitions):
                    response.error_code = errors_pb2.UNKNOWN_TOPIC_OR_PARTITION
                    response.error_message = f"Unable to find partition {tp.topic}:{pid}."
                    return ControllerResult((), response)
                if is_reassigning(topic.partitions[pid]):
                    found.append((topic, pid, topic.partitions[pid]))
    by_topic: dict[str, controller_pb2.OngoingTopicReassignment] = {}
    for topic, pid, part in found:
        ongoing = by_topic.get(topic.name)
        if ongoing is None:
            ongoing = response.topics.add(name=topic.name)
            by_topic[topic.name] = ongoing
        ongoing.partitions.add(
            partition_index=pid,
            replicas=part.replicas,
            adding_replicas=part.adding_replicas,
            removing_replicas=part.removing_replicas,
            isr=part.isr,
            leader=part.leader,
        )
    return ControllerResult((), response)


# ---- heartbeats: catch-up ------------------------------------------------------------------------
def caught_up_records(
    image: MetadataImage, broker_id: int, reports: Iterable[controller_pb2.TopicIdPartition]
) -> list[records_pb2.MetadataRecord]:
    """One record per reported partition that the broker is still adding and has not joined the ISR
    of; the record that brings the last adding replica in sync also completes the move. A report
    that no longer applies (move cancelled or replaced, topic deleted, already in sync) is ignored,
    and so is one for a leaderless partition: there is no leader to have caught up with."""
    records: list[records_pb2.MetadataRecord] = []
    done: set[tuple[bytes, int]] = set()
    for report in reports:
        key = (report.topic_id, report.partition_id)
        if key in done:
            continue
        done.add(key)
        part = image.partition(report.topic_id, report.partition_id)
        if part is None or broker_id not in part.adding_replicas or broker_id in part.isr or part.leader == NO_LEADER:
            continue
        builder = PartitionChangeBuilder.in_image(image, part, report.topic_id, report.partition_id)
        builder.set_target_isr((*part.isr, broker_id))  # joins at the end, as an AlterPartition would
        record = builder.build()
        if record is not None:
            records.append(record)
    return records


def adding_replicas_of(image: MetadataImage, broker_id: int) -> list[controller_pb2.TopicIdPartition]:
    """The partitions ``broker_id`` is adding and has not caught up yet (for its heartbeat answer)."""
    return [
        controller_pb2.TopicIdPartition(topic_id=topic.topic_id, partition_id=pid)
        for topic, pid, part in image.reassignments()
        if broker_id in part.adding_replicas and broker_id not in part.isr
    ]


__all__ = [
    "adding_replicas_of",
    "alter_partition_reassignments",
    "caught_up_records",
    "list_partition_reassignments",
    "merged_replicas",
    "original_replicas",
    "replication_factor",
    "target_replicas",
]
