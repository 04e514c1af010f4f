"""Topic handlers: CreateTopics, CreatePartitions, DeleteTopics, DescribeTopics, ElectLeaders.

Each is ``(image, request, now_ms, ids, random, config) -> ControllerResult`` and pure: it reads
the image, never changes it, and returns the records a success needs plus the response. Rules and
messages follow Kafka's ``ReplicationControlManager`` and ``ControllerApis`` (quoted where Kafka
has a message); every per-topic failure is an error code in that topic's result and writes
nothing for that topic. Records come in a fixed order per topic: TopicRecord, its ConfigRecords
(by name), its PartitionRecords (by partition id).
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections.abc import Hashable, Sequence, Set
from typing import TypeVar

from google.protobuf.internal.containers import RepeatedCompositeFieldContainer

from placement.rng import RandomSource
from raftmeta.api.ids import id_text
from raftmeta.api.limits import REPLICAS_PER_PARTITION_MAX
from raftmeta.controller import placement_bridge
from raftmeta.controller.configs import validate_topic_configs
from raftmeta.controller.delta import SHARED_STATES_MAX, NewTopic
from raftmeta.controller.directories import any_log_dirs, new_directories
from raftmeta.controller.errors import ApiError, RequestError
from raftmeta.controller.image import NO_LEADER, TOPIC_RESOURCE, MetadataImage, PartitionRegistration, TopicImage
from raftmeta.controller.names import (
    COLLISION_WARNING,
    has_collision_chars,
    invalid_topic_reason,
    unify_collision_chars,
)
from raftmeta.controller.partition_change import Election, PartitionChangeBuilder
from raftmeta.controller.result import (
    DEFAULT_CONFIG,
    ControllerConfig,
    ControllerResult,
    TopicIdSource,
    Work,
)
from raftmeta.controller.work import TurnBudget, Visit, partition_pass, start
from raftmeta.records.decode import LazyRecords
from raftmeta.records.wire import PartitionEncoder
from raftmeta.v1 import controller_pb2, errors_pb2, records_pb2

H = TypeVar("H", bound=Hashable)
DUPLICATE_NAME = ApiError(errors_pb2.INVALID_REQUEST, "Duplicate topic name.")
UNKNOWN_TOPIC = ApiError(errors_pb2.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
ALL_FENCED = "All brokers are currently fenced or in controlled shutdown."
# The metadata log itself (Kafka's Topic.CLUSTER_METADATA_TOPIC_NAME): never a user topic.
CLUSTER_METADATA_TOPIC = "__cluster_metadata"
# Encodes the PartitionRecords of creates; its cache holds encodings of replica lists only, so
# sharing one between controllers changes no output. The records are byte for byte what
# SerializeToString gives (wire.py, tested) and go to the log as they are (LazyRecords).
_ENCODER = PartitionEncoder()
# NamedTuple's generated __new__ costs twice tuple.__new__ (as in delta.py).
_new_tuple = tuple.__new__


def _duplicates(names: Sequence[H]) -> set[H]:
    seen: set[H] = set()
    dups: set[H] = set()
    for name in names:
        (dups if name in seen else seen).add(name)
    return dups


def _live_brokers(image: MetadataImage) -> frozenset[int]:
    """The unfenced brokers: one set per request instead of a lookup per replica."""
    return frozenset(broker_id for broker_id, broker in image.brokers.items() if not broker.fenced)


def new_topic_id(image: MetadataImage, ids: TopicIdSource, taken: set[bytes]) -> bytes:
    """A fresh topic id from the driver's source; a collision (never expected from uuid4) or a
    malformed id is a driver bug and raises."""
    for _ in range(3):
        topic_id = ids()
        if not isinstance(topic_id, bytes) or len(topic_id) != 16 or topic_id == bytes(16):
            raise ValueError(f"topic id source returned {topic_id!r}: expected 16 non-zero bytes")
        if topic_id not in image.topics and topic_id not in taken:
            taken.add(topic_id)
            return topic_id
    raise ValueError("topic id source keeps returning ids already in use")


# ---- CreateTopics --------------------------------------------------------------------------------
def _requested_partitions(topic: controller_pb2.CreatableTopic, config: ControllerConfig) -> int:
    """Kafka's count for the per-request bound (ReplicationControlManager.validateTotalNumberOfPartitions)."""
    if topic.assignments:
        return len(topic.assignments)
    if not topic.HasField("num_partitions") or topic.num_partitions == -1:
        return config.default_num_partitions
    return max(topic.num_partitions, 0)


def _manual_replicas(
    image: MetadataImage, topic: controller_pb2.CreatableTopic, config: ControllerConfig
) -> list[list[int]] | ApiError:
    if topic.HasField("replication_factor") and topic.replication_factor != -1:
        return ApiError(
            errors_pb2.INVALID_REQUEST,
            "A manual partition assignment was specified, but replication factor was not set to -1.",
        )
    if topic.HasField("num_partitions") and topic.num_partitions != -1:
        return ApiError(
            errors_pb2.INVALID_REQUEST,
            "A manual partition assignment was specified, but numPartitions was not set to -1.",
        )
    by_index: dict[int, list[int]] = {}
    for assignment in topic.assignments:
        if assignment.partition_index in by_index:
            return ApiError(
                errors_pb2.INVALID_REPLICA_ASSIGNMENT,
                f"Found multiple manual partition assignments for partition {assignment.partition_index}",
            )
        if len(assignment.broker_ids) > REPLICAS_PER_PARTITION_MAX:
            return ApiError(
                errors_pb2.INVALID_REPLICA_ASSIGNMENT,
                f"Partition {assignment.partition_index} has {len(assignment.broker_ids)} replicas; the limit is "
                f"{REPLICAS_PER_PARTITION_MAX} replicas per partition.",
            )
        by_index[assignment.partition_index] = list(assignment.broker_ids)
    if sorted(by_index) != list(range(len(by_index))):
        return ApiError(
            errors_pb2.INVALID_REPLICA_ASSIGNMENT, "partitions should be a consecutive 0-based integer sequence"
        )
    if len(by_index) > config.max_partitions_per_topic:
        return _too_many_for_topic(len(by_index), config)
    try:
        replicas = placement_bridge.validate_manual(
            image, [by_index[i] for i in range(len(by_index))], replication_factor=None, first_partition=0
        )
    except placement_bridge.PlacementError as error:
        return placement_bridge.to_api_error(error)
    live = _live_brokers(image)
    for pid, partition in enumerate(replicas):
        if live.isdisjoint(partition):
            return ApiError(
                errors_pb2.INVALID_REPLICA_ASSIGNMENT,
                f"All brokers specified in the manual partition assignment for partition {pid} "
                "are fenced or in controlled shutdown.",
            )
    if topic.broker_pool:
        outside = _outside_pool(image, replicas, topic.broker_pool, first_partition=0)
        if outside is not None:
            return outside
    return replicas


def _outside_pool(
    image: MetadataImage, replicas: Sequence[Sequence[int]], pool: str, first_partition: int
) -> ApiError | None:
    """A manual assignment must keep a pooled topic in its pool (DESIGN.md §9 invariant 8, which the
    verify job checks against the TopicRecord's pool); found by `raftmeta fuzz`."""
    for offset, partition in enumerate(replicas):
        for broker in partition:
            if image.brokers[broker].pool != pool:
                return ApiError(
                    errors_pb2.INVALID_REPLICA_ASSIGNMENT,
                    f"Broker {broker} of partition {first_partition + offset} is not in broker pool '{pool}': "
                    "the replicas of a topic in a pool stay in that pool.",
                )
    return None


def _too_many_for_topic(count: int, config: ControllerConfig) -> ApiError:
    return ApiError(
        errors_pb2.INVALID_PARTITIONS,
        f"Number of partitions {count} exceeds the limit of {config.max_partitions_per_topic} partitions per topic.",
    )


def _placed_replicas(
    image: MetadataImage,
    topic: controller_pb2.CreatableTopic,
    random: RandomSource,
    config: ControllerConfig,
    request_load: dict[int, tuple[int, int]],
) -> list[list[int]] | ApiError:
    rf = topic.replication_factor if topic.HasField("replication_factor") else -1
    if rf < -1 or rf == 0:
        return ApiError(
            errors_pb2.INVALID_REPLICATION_FACTOR,
            "Replication factor must be larger than 0, or -1 to use the default value.",
        )
    count = topic.num_partitions if topic.HasField("num_partitions") else -1
    if count < -1 or count == 0:
        return ApiError(errors_pb2.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value.")
    count = config.default_num_partitions if count == -1 else count
    rf = config.default_replication_factor if rf == -1 else rf
    if count > config.max_partitions_per_topic:
        return _too_many_for_topic(count, config)
    if REPLICAS_PER_PARTITION_MAX < rf <= len(image.brokers):
        # raftmeta's own bound (Kafka has none). A factor above the registered brokers is left to
        # placement, which answers it in Kafka's words, as Kafka would.
        return ApiError(
            errors_pb2.INVALID_REPLICATION_FACTOR,
            f"Replication factor {rf} exceeds the limit of {REPLICAS_PER_PARTITION_MAX} replicas per partition.",
        )
    placer = topic.placer or config.default_placer
    if placer not in placement_bridge.PLACERS:
        return placement_bridge.unknown_placer(placer)
    try:
        replicas = placement_bridge.place(
            image, placer, count, rf, random, pool=topic.broker_pool or None, extra_load=request_load
        )
    except placement_bridge.PlacementError as error:
        return placement_bridge.to_api_error(error, replication_factor=rf)
    live = _live_brokers(image)
    for partition in replicas:
        if live.isdisjoint(partition):
            return ApiError(
                errors_pb2.INVALID_REPLICATION_FACTOR, f"Unable to replicate the partition {rf} time(s): {ALL_FENCED}"
            )
    return replicas


def create_topics(
    image: MetadataImage,
    request: controller_pb2.CreateTopicsRequest,
    now_ms: int,
    ids: TopicIdSource,
    random: RandomSource,
    config: ControllerConfig = DEFAULT_CONFIG,
) -> ControllerResult[controller_pb2.CreateTopicsResponse]:
    """Kafka's createTopics: per-topic checks in Kafka's order (duplicate in the request, legal
    name, '.'/'_' collision, existence, configs, assignment / replication factor / partitions,
    placement); ``validate_only`` answers the same and writes nothing (and draws no topic ids)."""
    del now_ms  # topic creation does not depend on time
    response = controller_pb2.CreateTopicsResponse()
    total = sum(_requested_partitions(t, config) for t in request.topics)
    if total > config.max_partitions_per_request:
        error = ApiError(
            errors_pb2.POLICY_VIOLATION,
            f"Excessively large number of partitions per request: {total} requested, "
            f"the limit is {config.max_partitions_per_request}.",
        )
        for topic in request.topics:
            response.topics.add(name=topic.name, error_code=error.code, error_message=error.message)
        return ControllerResult((), response)

    duplicates = _duplicates([t.name for t in request.topics])
    records: list[bytes] = []  # serialized: the partition records are encoded, never parsed
    new_topics: list[NewTopic] = []
    created: dict[str, str] = {}  # normalised name -> name, for collisions inside this request
    request_load: dict[int, tuple[int, int]] = {}  # what earlier topics of this request add, for `balanced`
    # Only the balanced placer reads request_load: skip counting it for everyone else.
    balanced = any((t.placer or config.default_placer) == "balanced" for t in request.topics)
    live = _live_brokers(image)
    # With no broker fenced every replica is live (manual assignments name registered brokers
    # only), so each ISR is its replica list and no per-replica lookup is needed.
    all_live = len(live) == len(image.brokers)
    taken_ids: set[bytes] = set()
    for topic in request.topics:
        result = response.topics.add(name=topic.name)
        outcome = _create_one(image, topic, random, config, duplicates, created, request_load)
        if isinstance(outcome, ApiError):
            result.error_code = outcome.code  # type: ignore[assignment]
            result.error_message = outcome.message
            continue
        replicas, configs = outcome
        created[unify_collision_chars(topic.name)] = topic.name
        partitions, tails = _new_partitions(replicas, None if all_live else live, image)
        if balanced:
            _add_load(request_load, partitions)
        result.num_partitions = len(replicas)
        result.replication_factor = len(replicas[0])
        result.configs.update(configs)
        if has_collision_chars(topic.name):
            result.warnings.append(COLLISION_WARNING)
        if request.validate_only:
            continue
        topic_id = new_topic_id(image, ids, taken_ids)
        result.topic_id = topic_id
        topic_record = records_pb2.TopicRecord(name=topic.name, topic_id=topic_id)
        if topic.broker_pool:
            topic_record.broker_pool = topic.broker_pool
        records.append(records_pb2.MetadataRecord(topic=topic_record).SerializeToString())
        for name, value in configs.items():
            records.append(
                records_pb2.MetadataRecord(
                    config=records_pb2.ConfigRecord(
                        resource_type=TOPIC_RESOURCE,  # type: ignore[arg-type]
                        resource_name=topic.name,
                        name=name,
                        value=value,
                    )
                ).SerializeToString()
            )
        records.extend(_ENCODER.records(topic_id, 0, tails))
        new_topics.append(NewTopic(topic.name, topic_id, topic.broker_pool or None, configs, partitions))
    return ControllerResult(LazyRecords(records) if records else (), response, tuple(new_topics))


def _new_partitions(
    replicas: list[list[int]], live: Set[int] | None, image: MetadataImage | None = None
) -> tuple[tuple[PartitionRegistration, ...], list[bytes]]:
    """New partitions (epochs 0, ISR = the live replicas, the first of them leads), as replaying
    their PartitionRecords makes them, and the tail of each one's PartitionRecord (its fields
    after the partition id: ``PartitionEncoder.tail``); ``live`` None means every replica is
    live. Partitions with the same replica list share one value and one tail: in a create, and
    across creates when every broker is live (``live`` None; see _ALL_LIVE) and no broker named
    log directories. With ``image`` and brokers that named log directories, each replica gets
    its broker's default directory (Kafka's PartitionAssignment: directories.py), which depends
    on the registrations: those states are shared within the create only."""
    with_dirs = image is not None and any_log_dirs(image)
    shared: dict[tuple[int, ...], tuple[PartitionRegistration, bytes]] = {}
    table = _ALL_LIVE if live is None and not with_dirs else shared
    if live is None and len(table) + len(replicas) > SHARED_STATES_MAX:
        table.clear()
    made: list[PartitionRegistration] = []
    tails: list[bytes] = []
    append = made.append
    append_tail = tails.append
    for partition in replicas:
        key = tuple(partition)
        entry = table.get(key)
        if entry is None:
            if live is None:
                isr = key
            else:
                isr = tuple([b for b in key if b in live])
                if isr == key:
                    isr = key
            directories = new_directories(image, key) if with_dirs and image is not None else ()
            part = _new_tuple(PartitionRegistration, (key, isr, isr[0], 0, 0, (), (), directories))
            entry = table[key] = (part, _ENCODER.tail(part))
        append(entry[0])
        append_tail(entry[1])
    return tuple(made), tails


# Replica list -> the state of a new partition on it with every replica live, and the tail of its
# PartitionRecord. Equal states are one object in the image: with many brokers nearly every
# partition has a replica order of its own within a create, but 100 brokers have only ~970,000
# orders of three, so an image of ten million partitions shares them across topics (a pointer a
# partition instead of a ~150-byte tuple; 1M partitions on 100 brokers: 177 -> 98 MiB of the
# leader's image). The tail (~100 bytes with its pair) makes a record three byte strings joined
# instead of its fields encoded again (~0.2 us instead of ~1.2). Bounded as
# delta._PARTITION_STATES is, which does the same for replayed partitions.
_ALL_LIVE: dict[tuple[int, ...], tuple[PartitionRegistration, bytes]] = {}


def _create_one(
    image: MetadataImage,
    topic: controller_pb2.CreatableTopic,
    random: RandomSource,
    config: ControllerConfig,
    duplicates: set[str],
    created: dict[str, str],
    request_load: dict[int, tuple[int, int]],
) -> tuple[list[list[int]], dict[str, str]] | ApiError:
    name = topic.name
    if name in duplicates:
        return DUPLICATE_NAME
    if name == CLUSTER_METADATA_TOPIC:
        return ApiError(
            errors_pb2.INVALID_REQUEST, f"Creation of internal topic {CLUSTER_METADATA_TOPIC} is prohibited."
        )
    reason = invalid_topic_reason(name)
    if reason is not None:
        return ApiError(errors_pb2.INVALID_TOPIC_EXCEPTION, reason)
    if has_collision_chars(name):
        normalized = unify_collision_chars(name)
        colliding = [n for n in image.collisions.get(normalized, ()) if n != name]
        if normalized in created:
            colliding.append(created[normalized])
        if colliding:
            return ApiError(
                errors_pb2.INVALID_TOPIC_EXCEPTION, f"Topic '{name}' collides with existing topic: {colliding[0]}"
            )
    if name in image.topic_ids:
        return ApiError(errors_pb2.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
    configs = validate_topic_configs(topic.configs)
    if isinstance(configs, ApiError):
        return configs
    replicas = (
        _manual_replicas(image, topic, config)
        if topic.assignments
        else _placed_replicas(image, topic, random, config, request_load)
    )
    if isinstance(replicas, ApiError):
        return replicas
    return replicas, configs


def _add_load(load: dict[int, tuple[int, int]], partitions: Sequence[PartitionRegistration]) -> None:
    for part in partitions:
        leader = part.leader
        for broker in part.replicas:
            count, leaders = load.get(broker, (0, 0))
            load[broker] = (count + 1, leaders + (1 if broker == leader else 0))


# ---- CreatePartitions ----------------------------------------------------------------------------
def create_partitions(
    image: MetadataImage,
    request: controller_pb2.CreatePartitionsRequest,
    now_ms: int,
    ids: TopicIdSource,
    random: RandomSource,
    config: ControllerConfig = DEFAULT_CONFIG,
) -> ControllerResult[controller_pb2.CreatePartitionsResponse]:
    """Kafka's createPartitions: grow only; new partitions placed (``legacy`` uses the
    add-partitions rule) or assigned manually, validated against the topic's replication factor."""
    del now_ms, ids
    response = controller_pb2.CreatePartitionsResponse()
    additional_total = 0
    for topic in request.topics:
        existing = image.topic_by_name(topic.name)
        if existing is not None:
            additional_total += max(0, topic.count - len(existing.partitions))
    if additional_total > config.max_partitions_per_request:
        message = (
            f"Excessively large number of partitions per request: {additional_total} requested, "
            f"the limit is {config.max_partitions_per_request}."
        )
        for topic in request.topics:
            response.results.add(name=topic.name, error_code=errors_pb2.POLICY_VIOLATION, error_message=message)
        return ControllerResult((), response)
    duplicates = _duplicates([t.name for t in request.topics])
    records: list[bytes] = []  # serialized: the partition records are encoded, never parsed
    for topic in request.topics:
        outcome = DUPLICATE_NAME if topic.name in duplicates else _grow_one(image, topic, random, config)
        result = response.results.add(name=topic.name)
        if isinstance(outcome, ApiError):
            result.error_code = outcome.code  # type: ignore[assignment]
            result.error_message = outcome.message
        elif not request.validate_only:
            records.extend(outcome)
    return ControllerResult(LazyRecords(records) if records else (), response)


NOT_AN_INCREASE = "would not be an increase"


def is_not_an_increase(message: str) -> bool:
    """Whether an INVALID_PARTITIONS answer of CreatePartitions says the count is not an increase
    (the two answers above, Kafka's wording) -- the only ones that depend on the topic's state;
    a count over the limit, or a placement that fails, is refused whatever the state. History
    checkers (raftmeta.sim.client_history, raftmeta.chaos.linearizable) tell them apart with it."""
    return "already has" in message or NOT_AN_INCREASE in message


def _grow_one(
    image: MetadataImage, request: controller_pb2.CreatePartitionsTopic, random: RandomSource, config: ControllerConfig
) -> list[bytes] | ApiError:
    topic = image.topic_by_name(request.name)
    if topic is None:
        return UNKNOWN_TOPIC
    current = len(topic.partitions)
    if request.count == current:
        return ApiError(errors_pb2.INVALID_PARTITIONS, f"Topic already has {current} partition(s).")
    if request.count < current:
        return ApiError(
            errors_pb2.INVALID_PARTITIONS,
            f"The topic {request.name} currently has {current} partition(s); {request.count} {NOT_AN_INCREASE}.",
        )
    if request.count > config.max_partitions_per_topic:
        return _too_many_for_topic(request.count, config)
    additional = request.count - current
    # An ongoing reassignment lists its adding replicas among the replicas: they are not the factor.
    rf = len(topic.partitions[0].replicas) - len(topic.partitions[0].adding_replicas)
    # A topic created in a pool grows in that pool (as a reassignment keeps it there); one created
    # without a pool grows in the pool the request names, if any.
    if topic.pool is not None and request.broker_pool and request.broker_pool != topic.pool:
        return ApiError(
            errors_pb2.INVALID_REQUEST,
            f"Topic {request.name} was created in broker pool '{topic.pool}': its new partitions stay there, "
            f"not in '{request.broker_pool}'.",
        )
    pool = topic.pool if topic.pool is not None else (request.broker_pool or None)
    if request.assignments:
        if len(request.assignments) != additional:
            return ApiError(
                errors_pb2.INVALID_REPLICA_ASSIGNMENT,
                f"Attempted to add {additional} additional partition(s), but only {len(request.assignments)} "
                "assignment(s) were specified.",
            )
        indexes = [a.partition_index for a in request.assignments]
        if any(indexes) and indexes != list(range(current, request.count)):
            return ApiError(
                errors_pb2.INVALID_REPLICA_ASSIGNMENT,
                f"The assignments must be for partitions {current}..{request.count - 1} in order, got {indexes}.",
            )
        try:
            replicas = placement_bridge.validate_manual(
                image, [list(a.broker_ids) for a in request.assignments], replication_factor=rf, first_partition=current
            )
        except placement_bridge.PlacementError as error:
            return placement_bridge.to_api_error(error)
        live_brokers = _live_brokers(image)
        for offset, partition in enumerate(replicas):
            if live_brokers.isdisjoint(partition):
                return ApiError(
                    errors_pb2.INVALID_REPLICA_ASSIGNMENT,
                    f"All brokers specified in the manual partition assignment for partition {current + offset} "
                    "are fenced or in controlled shutdown.",
                )
        if pool is not None:
            outside = _outside_pool(image, replicas, pool, first_partition=current)
            if outside is not None:
                return outside
    else:
        placer = request.placer or config.default_placer
        if placer not in placement_bridge.PLACERS:
            return placement_bridge.unknown_placer(placer)
        try:
            replicas = placement_bridge.place(
                image,
                placer,
                additional,
                rf,
                random,
                pool=pool,
                existing=[p.replicas for p in topic.partitions],
            )
        except placement_bridge.PlacementError as error:
            # Kafka's createPartitions lets the placer's exception through without a prefix.
            return placement_bridge.to_api_error(error)
    live_set = _live_brokers(image)
    for partition in replicas:
        if live_set.isdisjoint(partition):
            return ApiError(
                errors_pb2.INVALID_REPLICATION_FACTOR, f"Unable to replicate the partition {rf} time(s): {ALL_FENCED}"
            )
    return _ENCODER.records(topic.topic_id, current, _new_partitions(replicas, live_set, image)[1])


# ---- DeleteTopics --------------------------------------------------------------------------------
def delete_topics(
    image: MetadataImage,
    request: controller_pb2.DeleteTopicsRequest,
    now_ms: int,
    ids: TopicIdSource,
    random: RandomSource,
    config: ControllerConfig = DEFAULT_CONFIG,
) -> ControllerResult[controller_pb2.DeleteTopicsResponse]:
    """Topics by name, then by id, each answered in request order; one RemoveTopicRecord per
    topic even when it is named both ways."""
    del now_ms, ids, random, config
    response = controller_pb2.DeleteTopicsResponse()
    removing: list[bytes] = []
    dup_names = _duplicates(list(request.topic_names))
    for name in request.topic_names:
        result = response.responses.add(name=name)
        topic = image.topic_by_name(name)
        error = DUPLICATE_NAME if name in dup_names else (UNKNOWN_TOPIC if topic is None else None)
        if error is not None or topic is None:
            assert error is not None
            result.error_code = error.code  # type: ignore[assignment]
            result.error_message = error.message
            continue
        result.topic_id = topic.topic_id
        removing.append(topic.topic_id)
    dup_ids = _duplicates([i.hex() for i in request.topic_ids])
    for topic_id in request.topic_ids:
        result = response.responses.add(topic_id=topic_id)
        found: TopicImage | None = image.topics.get(topic_id)
        if topic_id.hex() in dup_ids:
            error = ApiError(errors_pb2.INVALID_REQUEST, "Duplicate topic id.")
        elif len(topic_id) != 16 or topic_id == bytes(16):
            error = ApiError(
                errors_pb2.INVALID_REQUEST, f"Invalid topic id {id_text(topic_id)!r}: expected 16 non-zero bytes."
            )
        elif found is None:
            error = ApiError(errors_pb2.UNKNOWN_TOPIC_ID, "This server does not host this topic ID.")
        else:
            result.name = found.name
            removing.append(topic_id)
            continue
        result.error_code = error.code  # type: ignore[assignment]
        result.error_message = error.message
    records = [
        records_pb2.MetadataRecord(remove_topic=records_pb2.RemoveTopicRecord(topic_id=topic_id))
        for topic_id in dict.fromkeys(removing)
    ]
    return ControllerResult(tuple(records), response)


# ---- DescribeTopics ------------------------------------------------------------------------------
def describe_topics(
    image: MetadataImage,
    request: controller_pb2.DescribeTopicsRequest,
    now_ms: int = 0,
    ids: TopicIdSource | None = None,
    random: RandomSource | None = None,
    config: ControllerConfig = DEFAULT_CONFIG,
) -> ControllerResult[controller_pb2.DescribeTopicsResponse]:
    """Topics with their configs and partitions (every topic when none are named), in name order,
    paged as Kafka's DescribeTopicPartitions (KRaftMetadataCache.getTopicMetadataForDescribeTopic
    Response): at most min(response_partition_limit, the configured maximum) partitions, from the
    cursor on; an answer cut short says where the next starts. A named topic that does not exist
    is answered UNKNOWN_TOPIC_OR_PARTITION and takes nothing from the limit.

    ``exclude_partitions`` (raftmeta's own, for listing topics): topics without partitions, each
    counting as one against the limit."""
    del now_ms, ids, random
    limit = request.response_partition_limit
    if limit < 0:
        raise RequestError(f"response_partition_limit={limit}: must be >= 0 (0 = the server's maximum)")
    remaining = min(limit, config.max_request_partition_size_limit) or config.max_request_partition_size_limit
    has_cursor = request.HasField("cursor")
    cursor_name = request.cursor.topic_name if has_cursor else ""
    first_partition = request.cursor.partition_index if has_cursor else 0
    if first_partition < 0:
        raise RequestError(f"cursor.partition_index={first_partition}: must be >= 0")
    exclude_partitions = request.exclude_partitions
    if exclude_partitions and first_partition:
        raise RequestError(
            f"cursor.partition_index={first_partition}: must be 0 with exclude_partitions (no partitions are paged)"
        )
    response = controller_pb2.DescribeTopicsResponse()
    if request.topics:
        if has_cursor and cursor_name not in request.topics:
            # Kafka: "DescribeTopicPartitionsRequest topic list should contain the cursor topic".
            raise RequestError(f"cursor.topic_name {cursor_name!r} must be one of the topics named in the request")
        names = sorted({name for name in request.topics if name >= cursor_name})
    else:
        # Each topic answered takes at least one partition from the limit (only the cursor's own
        # may take none), so the first limit + 2 names are all a page can reach.
        names = _PAGE_NAMES.first(image, cursor_name, remaining + 2)
    for name in names:
        if remaining == 0:
            # Kafka: the cursor points at the start of the next topic, which need not exist then.
            response.next_cursor.topic_name = name
            response.next_cursor.partition_index = 0
            break
        topic = image.topic_by_name(name)
        if topic is None:
            response.topics.add(name=name, error_code=UNKNOWN_TOPIC.code, error_message=UNKNOWN_TOPIC.message)
            continue
        if exclude_partitions:
            _describe_topic(response.topics.add(), topic, 0, 0)
            remaining -= 1
            continue
        start = first_partition if name == cursor_name else 0
        end = min(len(topic.partitions), start + remaining)
        if start == 0 and end == len(topic.partitions):
            _DESCRIPTIONS.add_whole(response.topics, topic)
        else:
            _describe_topic(response.topics.add(), topic, start, end)
        if end < len(topic.partitions):
            response.next_cursor.topic_name = name
            response.next_cursor.partition_index = end
            break
        remaining -= max(0, end - start)
    return ControllerResult((), response)


class _PageNames:
    """The first names from a cursor on, for a page of every topic. A read of every topic pages
    through an image that seldom changes between its pages, so the names of the image that
    served the last page are sorted once it serves a second one, and each page after that is a
    bisection: picking a page's names from all of them cost ~2 ms a page with 10,000 topics
    (5,001 pages for 10M partitions). A page of an image not seen before picks them the way
    that needs no sort (``heapq.nsmallest``), so reads between every create cost no more than
    they did. Either way the names are the same; one entry, so the cache never grows."""

    def __init__(self) -> None:
        self._topic_ids: object = None  # the image's name index that served the last page
        self._sorted: list[str] | None = None

    def first(self, image: MetadataImage, cursor: str, count: int) -> list[str]:
        topic_ids = image.topic_ids
        if topic_ids is not self._topic_ids:
            self._topic_ids, self._sorted = topic_ids, None
            return heapq.nsmallest(count, (name for name in topic_ids if name >= cursor))
        if self._sorted is None:
            self._sorted = sorted(topic_ids)
        start = bisect_left(self._sorted, cursor)
        return self._sorted[start : start + count]


_PAGE_NAMES = _PageNames()


class _Descriptions:
    """Whole topics' descriptions, serialized, by topic value. A topic's description is a
    function of its immutable ``TopicImage`` value alone (name, id, configs, partitions: any
    change makes a new value), and describing one field by field costs ~2 us a partition -- 2 ms
    for a 1000-partition topic -- where reading its serialized description back costs 0.05 ms.
    Clients describe the same topics again and again (metadata refreshes, the broker fleet), so
    a described topic's bytes are kept until ``max_bytes`` of newer ones push them out, oldest
    first. An entry holds its topic value, so no other value can take its id while it is kept."""

    def __init__(self, max_bytes: int) -> None:
        self._max_bytes = max_bytes
        self._bytes = 0
        self._by_id: dict[int, tuple[TopicImage, bytes]] = {}

    def add_whole(
        self, topics: RepeatedCompositeFieldContainer[controller_pb2.TopicDescription], topic: TopicImage
    ) -> None:
        """Append ``topic``'s whole description to ``topics`` (a response's repeated field)."""
        entry = self._by_id.get(id(topic))
        if entry is not None and entry[0] is topic:
            topics.add().MergeFromString(entry[1])
            return
        described = topics.add()
        _describe_topic(described, topic, 0, len(topic.partitions))
        encoded = described.SerializeToString()
        if len(encoded) > self._max_bytes:
            return
        by_id = self._by_id
        while by_id and self._bytes + len(encoded) > self._max_bytes:
            self._bytes -= len(by_id.pop(next(iter(by_id)))[1])
        by_id[id(topic)] = (topic, encoded)
        self._bytes += len(encoded)


# ~1,000 descriptions of 1000-partition topics (~17 KB each).
_DESCRIPTIONS = _Descriptions(max_bytes=16 << 20)


def _describe_topic(described: controller_pb2.TopicDescription, topic: TopicImage, start: int, end: int) -> None:
    described.name = topic.name
    described.topic_id = topic.topic_id
    described.configs.update(topic.configs)
    partitions = topic.partitions
    for pid in range(start, end):
        part = partitions[pid]
        described.partitions.add(
            partition=pid,
            leader=part.leader,
            leader_epoch=part.leader_epoch,
            partition_epoch=part.partition_epoch,
            replicas=part.replicas,
            isr=part.isr,
            adding_replicas=part.adding_replicas,
            removing_replicas=part.removing_replicas,
        )


# ---- ElectLeaders --------------------------------------------------------------------------------
def elect_leaders(
    image: MetadataImage,
    request: controller_pb2.ElectLeadersRequest,
    now_ms: int,
    ids: TopicIdSource,
    random: RandomSource,
    config: ControllerConfig = DEFAULT_CONFIG,
) -> ControllerResult[controller_pb2.ElectLeadersResponse]:
    """Kafka's electLeaders: PREFERRED moves leadership to the first replica when it is live and
    in sync; UNCLEAN elects any live replica for a partition that has no leader."""
    del now_ms, ids, random
    unclean = request.election_type == controller_pb2.ELECTION_TYPE_UNCLEAN
    response = controller_pb2.ElectLeadersResponse()
    records: list[records_pb2.MetadataRecord] = []
    if not request.topic_partitions:
        return start(_elect_everywhere(image, unclean, TurnBudget.of(config)), response)
    wanted = [(tp.topic, list(tp.partitions)) for tp in request.topic_partitions]
    # Each election is built on the same image: a partition named twice would get two records
    # with the same epochs, which replay refuses (found by `raftmeta fuzz`). As in
    # AlterPartitionReassignments, every occurrence of a repeated partition is refused.
    repeated = _duplicates([(name, pid) for name, partitions in wanted for pid in partitions])
    for name, partitions in wanted:
        topic_result = response.results.add(topic=name)
        named = image.topic_by_name(name)
        for pid in partitions:
            if (name, pid) in repeated:
                error = ApiError(
                    errors_pb2.INVALID_REQUEST, f"Partition {name}-{pid} appears more than once in the request."
                )
            else:
                error = _elect_one(image, name, named, pid, unclean, records)
            _add_election_result(topic_result, pid, error)
    return ControllerResult(tuple(records), response)


def _elect_everywhere(
    image: MetadataImage, unclean: bool, budget: TurnBudget
) -> Work[controller_pb2.ElectLeadersResponse]:
    """An election over every partition, in turns (work.py). Kafka lists every topic but only the
    partitions it acted on; those that need no election are passed over with one comparison,
    before any answer is built for them: on a big image nearly all are."""
    response = controller_pb2.ElectLeadersResponse()
    results: dict[bytes, controller_pb2.TopicElectionResult] = {}

    def visitor(image: MetadataImage, topic: TopicImage) -> Visit:
        topic_result = results.get(topic.topic_id)
        if topic_result is None:
            topic_result = results[topic.topic_id] = response.results.add(topic=topic.name)

        def visit(
            partitions: tuple[PartitionRegistration, ...],
            pid: int,
            stop: int,
            records: list[records_pb2.MetadataRecord],
            full: int,
        ) -> int:
            while pid < stop:
                if _election_needed(partitions[pid], unclean):
                    _add_election_result(topic_result, pid, _elect_one(image, topic.name, topic, pid, unclean, records))
                    if len(records) >= full:
                        return pid + 1
                pid += 1
            return stop

        return visit

    _, records = yield from partition_pass(image, visitor, budget, [])
    return ControllerResult(tuple(records), response)


def _add_election_result(topic_result: controller_pb2.TopicElectionResult, pid: int, error: ApiError) -> None:
    result = topic_result.partitions.add(partition=pid)
    result.error_code = error.code  # type: ignore[assignment]
    result.error_message = error.message


def _election_needed(part: PartitionRegistration, unclean: bool) -> bool:
    """A preferred election moves a leader that is not the first replica; an unclean one elects
    where there is no leader."""
    return part.leader == NO_LEADER if unclean else part.leader != part.preferred_leader


def _elect_one(
    image: MetadataImage,
    name: str,
    topic: TopicImage | None,
    pid: int,
    unclean: bool,
    records: list[records_pb2.MetadataRecord],
) -> ApiError:
    if topic is None:
        return ApiError(errors_pb2.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {name}")
    if not 0 <= pid < len(topic.partitions):
        return ApiError(errors_pb2.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {name}-{pid}")
    part = topic.partitions[pid]
    if not _election_needed(part, unclean):
        if unclean:
            return ApiError(errors_pb2.ELECTION_NOT_NEEDED, f"{name}-{pid} already has a leader ({part.leader}).")
        return ApiError(
            errors_pb2.ELECTION_NOT_NEEDED, f"Leader {part.leader} of {name}-{pid} is already the preferred leader."
        )
    election = Election.UNCLEAN if unclean else Election.PREFERRED
    builder = PartitionChangeBuilder.in_image(image, part, topic.topic_id, pid, election=election)
    record = builder.build()
    if record is None:
        if unclean:
            return ApiError(
                errors_pb2.ELIGIBLE_LEADERS_NOT_AVAILABLE, f"No replica of {name}-{pid} is live: none can be elected."
            )
        return ApiError(
            errors_pb2.PREFERRED_LEADER_NOT_AVAILABLE,
            f"The preferred leader {part.preferred_leader} of {name}-{pid} is fenced or not in the ISR.",
        )
    records.append(record)
    return ApiError(errors_pb2.NONE, "")


__all__ = [
    "create_partitions",
    "create_topics",
    "delete_topics",
    "describe_topics",
    "elect_leaders",
]
