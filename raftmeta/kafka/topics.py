"""Topic APIs: Metadata, CreateTopics, DeleteTopics, CreatePartitions, DescribeTopicPartitions.

Each handler turns a kio request into raftmeta's controller protobufs, sends them down the node's
admin path (the gRPC ControllerService's own: limits, forwarding, commit before answer) and turns
the answer back into the response's values; :mod:`raftmeta.kafka.build` makes them the version's
types. Partition leaders, replicas and ISRs are those of raftmeta's *simulated* brokers (the
placement the controller recorded), and so are the brokers Metadata lists: the alive ones, each
advertised at a raftmeta node's Kafka listener (:mod:`raftmeta.kafka.brokers`).
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Mapping
from typing import Any

from raftmeta.api.topic_pages import describe_every_page
from raftmeta.controller.configs import TOPIC_CONFIGS
from raftmeta.kafka.brokers import advertised_cluster
from raftmeta.kafka.configs import DEFAULT_CONFIG, DYNAMIC_TOPIC_CONFIG
from raftmeta.kafka.context import ApiContext, CallRefused, call, timeout_s
from raftmeta.kafka.framing import Request
from raftmeta.kafka.partition_encoding import encode_brokers, encode_partitions
from raftmeta.kafka.uuids import NULL_UUID, kafka_uuid
from raftmeta.v1 import controller_pb2, errors_pb2

# Topic configs that choose raftmeta's placement instead of configuring the topic (Kafka clients
# have no field for them): taken out of the configs and put in the request's own fields.
PLACER_CONFIG = "raftmeta.placer"
POOL_CONFIG = "raftmeta.broker.pool"
# ConfigSource.DYNAMIC_TOPIC_CONFIG: a config set on the topic.
TOPIC_CONFIG_SOURCE = DYNAMIC_TOPIC_CONFIG
UNKNOWN_TOPIC = errors_pb2.UNKNOWN_TOPIC_OR_PARTITION
INVALID_REQUEST = errors_pb2.INVALID_REQUEST
STALE = controller_pb2.STALE
LINEARIZABLE = controller_pb2.LINEARIZABLE


def broker_read(ctx: ApiContext) -> controller_pb2.ReadConsistency.ValueType:
    """How Metadata and DescribeTopicPartitions read topics. A Kafka broker answers both from its
    metadata cache, the image as committed and replayed (KafkaApis never asks the controller). The
    leader's node does the same: its committed image already holds every write the leader
    acknowledged, so no read-index round is needed for a client to read its own writes. A
    follower's image learns a commit one Fetch later, so a topic just created could be missing
    from it; a follower reads through the leader (linearizable) and stays read-your-writes for
    clients that spread their requests over the nodes (docs/kafka-protocol.md)."""
    return STALE if ctx.leads() else LINEARIZABLE


def _duplicates(names: list[str]) -> set[str]:
    return {name for name, count in Counter(names).items() if count > 1}


def _duplicate_message(name: str) -> str:
    # Kafka's ControllerApis wording for a topic named twice in one request.
    return f"Duplicate topic name {name!r} in the request."


def topic_values(topic: controller_pb2.TopicDescription, request: Request) -> dict[str, Any]:
    """A described topic as the request's version answers it; its partitions are written as bytes
    (:mod:`raftmeta.kafka.partition_encoding`), the one part that grows with the topic."""
    return {
        "error_code": int(topic.error_code),
        "name": topic.name,
        "topic_id": kafka_uuid(topic.topic_id),
        "is_internal": False,
        "partitions": encode_partitions(request.api_key, request.api_version, topic) if topic.error_code == 0 else [],
        "topic_authorized_operations": -(2**31),
    }


async def _describe(
    ctx: ApiContext, names: list[str], consistency: controller_pb2.ReadConsistency.ValueType
) -> list[controller_pb2.TopicDescription]:
    """Every topic named (every topic when none are), whole: Metadata has no paging of its own."""

    async def send(request: controller_pb2.DescribeTopicsRequest) -> controller_pb2.DescribeTopicsResponse:
        page: controller_pb2.DescribeTopicsResponse = await call(ctx, "DescribeTopics", request)
        return page

    request = controller_pb2.DescribeTopicsRequest(topics=names, consistency=consistency)
    response = await describe_every_page(send, request)
    return list(response.topics)


async def _describe_or_refusal(
    ctx: ApiContext, names: list[str]
) -> list[controller_pb2.TopicDescription] | CallRefused:
    try:
        return await _describe(ctx, names, broker_read(ctx))
    except CallRefused as exc:
        return exc


async def _nothing() -> list[controller_pb2.TopicDescription]:
    return []


async def metadata(ctx: ApiContext, request: Request) -> dict[str, Any]:
    """Metadata: the alive brokers and the one reported as controller (:mod:`raftmeta.kafka.brokers`),
    and the topics asked for (None = all; v0's empty list also means all), read concurrently.
    Topics are never created by a Metadata request (allow_auto_topic_creation is ignored)."""
    body = request.body
    asked = body.topics
    every = asked is None or (request.api_version == 0 and not asked)
    names = [] if every else [t.name for t in asked or () if t.name is not None]
    by_id = [] if every else [t.topic_id for t in asked or () if t.name is None and t.topic_id is not None]
    wants_topics = every or bool(names or by_id)
    cluster, described = await asyncio.gather(
        advertised_cluster(ctx),
        _describe_or_refusal(ctx, [] if by_id else names) if wants_topics else _nothing(),
    )
    values: dict[str, Any] = {
        "throttle_time": 0,
        "brokers": encode_brokers(request.api_key, request.api_version, cluster.brokers, cluster.values),
        "cluster_id": ctx.cluster_id,
        "controller_id": cluster.controller_id,
        "cluster_authorized_operations": -(2**31),
    }
    if not wants_topics:
        values["topics"] = []
        return values
    if isinstance(described, CallRefused):
        exc = described
        values["topics"] = [
            {"error_code": exc.error_code, "name": name, "topic_id": NULL_UUID, "partitions": []} for name in names
        ]
        return values
    topics = [topic_values(t, request) for t in described]
    if by_id:
        known = {t["topic_id"]: t for t in topics}
        wanted_names = set(names)
        topics = [t for t in topics if t["name"] in wanted_names]
        for topic_id in by_id:
            topics.append(known.get(topic_id) or {"error_code": errors_pb2.UNKNOWN_TOPIC_ID, "name": None,
                                                  "topic_id": topic_id, "partitions": []})  # fmt: skip
        missing = wanted_names - {t["name"] for t in topics}
        topics += [{"error_code": UNKNOWN_TOPIC, "name": n, "topic_id": NULL_UUID, "partitions": []} for n in missing]
    values["topics"] = topics
    return values


def _creatable(topic: Any) -> controller_pb2.CreatableTopic:
    configs = {c.name: c.value for c in topic.configs or () if c.value is not None}
    placer = configs.pop(PLACER_CONFIG, "")
    pool = configs.pop(POOL_CONFIG, "")
    creatable = controller_pb2.CreatableTopic(name=topic.name, configs=configs, placer=placer, broker_pool=pool)
    # With a manual assignment Kafka wants both counts at -1. kafka-python, which infers an old
    # broker version from our ApiVersions (it looks at Produce and Fetch, which raftmeta does not
    # serve), insists on explicit counts; counts that agree with the assignment are taken as -1.
    sizes = {len(a.broker_ids or ()) for a in topic.assignments or ()}
    shaped = bool(topic.assignments)
    if topic.num_partitions != -1 and not (shaped and topic.num_partitions == len(topic.assignments)):
        creatable.num_partitions = topic.num_partitions
    if topic.replication_factor != -1 and not (shaped and sizes == {topic.replication_factor}):
        creatable.replication_factor = topic.replication_factor
    for assignment in topic.assignments or ():
        creatable.assignments.add(
            partition_index=assignment.partition_index, broker_ids=list(assignment.broker_ids or ())
        )
    return creatable


def _created_values(result: controller_pb2.CreatableTopicResult) -> dict[str, Any]:
    ok = result.error_code == 0
    return {
        "name": result.name,
        "topic_id": kafka_uuid(result.topic_id),
        "error_code": int(result.error_code),
        "error_message": result.error_message or None,
        "topic_config_error_code": 0,
        "num_partitions": result.num_partitions if ok else -1,
        "replication_factor": result.replication_factor if ok else -1,
        "configs": _created_configs(result.configs) if ok else [],
    }


def _created_configs(configs: Mapping[str, str]) -> list[dict[str, Any]]:
    """Every topic config, as Kafka's brokers answer CreateTopics (v5+): those the topic was
    created with, and the others at their defaults (Kafka's AdminClient reads them as isDefault)."""
    every = {name: (key.default, DEFAULT_CONFIG) for name, key in TOPIC_CONFIGS.items()}
    every.update({name: (value, TOPIC_CONFIG_SOURCE) for name, value in configs.items()})
    return [
        {"name": name, "value": value, "read_only": False, "config_source": source, "is_sensitive": False}
        for name, (value, source) in sorted(every.items())
    ]


def _error_values(name: str, code: int, message: str) -> dict[str, Any]:
    return {"name": name, "topic_id": NULL_UUID, "error_code": code, "error_message": message, "configs": []}


async def create_topics(ctx: ApiContext, request: Request) -> dict[str, Any]:
    """CreateTopics: one controller request for every topic named once; a name given twice is
    answered INVALID_REQUEST without reaching the controller (as Kafka does)."""
    body = request.body
    duplicates = _duplicates([t.name for t in body.topics])
    grpc_request = controller_pb2.CreateTopicsRequest(
        topics=[_creatable(t) for t in body.topics if t.name not in duplicates],
        validate_only=body.validate_only,
        timeout_ms=int(timeout_s(body.timeout) * 1000),
    )
    answers: dict[str, dict[str, Any]] = {}
    if grpc_request.topics:
        try:
            response: controller_pb2.CreateTopicsResponse = await call(
                ctx, "CreateTopics", grpc_request, timeout_s(body.timeout)
            )
            answers = {r.name: _created_values(r) for r in response.topics}
        except CallRefused as exc:
            answers = {t.name: _error_values(t.name, exc.error_code, exc.message) for t in grpc_request.topics}
    topics: list[dict[str, Any]] = []
    for topic in body.topics:
        if topic.name in duplicates:
            if topic.name not in {t["name"] for t in topics}:
                topics.append(_error_values(topic.name, INVALID_REQUEST, _duplicate_message(topic.name)))
            continue
        topics.append(answers[topic.name])
    return {"throttle_time": 0, "topics": topics}


async def delete_topics(ctx: ApiContext, request: Request) -> dict[str, Any]:
    """DeleteTopics by name (v1-v5) or by name or id (v6)."""
    body = request.body
    if request.api_version >= 6:
        names = [t.name for t in body.topics if t.name is not None]
        ids = [t.topic_id.bytes for t in body.topics if t.name is None and t.topic_id is not None]
    else:
        names, ids = list(body.topic_names), []
    grpc_request = controller_pb2.DeleteTopicsRequest(
        topic_names=names, topic_ids=ids, timeout_ms=int(timeout_s(body.timeout) * 1000)
    )
    try:
        response: controller_pb2.DeleteTopicsResponse = await call(
            ctx, "DeleteTopics", grpc_request, timeout_s(body.timeout)
        )
    except CallRefused as exc:
        failed = [{"name": n, "topic_id": NULL_UUID, "error_code": exc.error_code, "error_message": exc.message}
                  for n in names]  # fmt: skip
        failed += [{"name": None, "topic_id": uuid.UUID(bytes=i), "error_code": exc.error_code,
                    "error_message": exc.message} for i in ids]  # fmt: skip
        return {"throttle_time": 0, "responses": failed}
    responses = [
        {
            "name": r.name or None,
            "topic_id": kafka_uuid(r.topic_id),
            "error_code": int(r.error_code),
            "error_message": r.error_message or None,
        }
        for r in response.responses
    ]
    if request.api_version < 6:
        for r in responses:  # names are required before v6
            r["name"] = r["name"] or ""
    return {"throttle_time": 0, "responses": responses}


async def create_partitions(ctx: ApiContext, request: Request) -> dict[str, Any]:
    """CreatePartitions. Kafka's manual assignments list only the new partitions, in order;
    raftmeta's name their indexes, so the current count is read first (a concurrent change makes
    the controller refuse the indexes, and nothing is written)."""
    body = request.body
    duplicates = _duplicates([t.name for t in body.topics])
    wanted = [t for t in body.topics if t.name not in duplicates]
    manual = [t.name for t in wanted if t.assignments]
    results: dict[str, dict[str, Any]] = {}
    try:
        # The controller's current counts (a linearizable read): the indexes it will check.
        counts = {t.name: len(t.partitions) for t in await _describe(ctx, manual, LINEARIZABLE)} if manual else {}
        grpc_request = controller_pb2.CreatePartitionsRequest(
            validate_only=body.validate_only, timeout_ms=int(timeout_s(body.timeout) * 1000)
        )
        for topic in wanted:
            item = grpc_request.topics.add(name=topic.name, count=topic.count)
            for offset, assignment in enumerate(topic.assignments or ()):
                item.assignments.add(partition_index=counts.get(topic.name, 0) + offset,
                                     broker_ids=list(assignment.broker_ids))  # fmt: skip
        if wanted:
            response: controller_pb2.CreatePartitionsResponse = await call(
                ctx, "CreatePartitions", grpc_request, timeout_s(body.timeout)
            )
            results = {
                r.name: {"name": r.name, "error_code": int(r.error_code), "error_message": r.error_message or None}
                for r in response.results
            }
    except CallRefused as exc:
        results = {t.name: {"name": t.name, "error_code": exc.error_code, "error_message": exc.message} for t in wanted}
    answered: list[dict[str, Any]] = []
    for topic in body.topics:
        if topic.name in duplicates:
            if topic.name not in {r["name"] for r in answered}:
                answered.append(
                    {"name": topic.name, "error_code": INVALID_REQUEST, "error_message": _duplicate_message(topic.name)}
                )
            continue
        answered.append(results[topic.name])
    return {"throttle_time": 0, "results": answered}


async def describe_topic_partitions(ctx: ApiContext, request: Request) -> dict[str, Any]:
    """DescribeTopicPartitions (KIP-966): Metadata's topic part, paged by a partition limit. The
    controller pages it itself (the same cursor and limit, capped by its own maximum)."""
    body = request.body
    names = [t.name for t in body.topics]
    described = controller_pb2.DescribeTopicsRequest(
        topics=names, response_partition_limit=max(1, body.response_partition_limit), consistency=broker_read(ctx)
    )
    if body.cursor is not None:
        described.cursor.topic_name = body.cursor.topic_name
        described.cursor.partition_index = body.cursor.partition_index
    try:
        response: controller_pb2.DescribeTopicsResponse = await call(ctx, "DescribeTopics", described)
    except CallRefused as exc:
        failed = [{"error_code": exc.error_code, "name": n, "topic_id": NULL_UUID, "partitions": []} for n in names]
        return {"throttle_time": 0, "topics": failed, "next_cursor": None}
    next_cursor = (
        {"topic_name": response.next_cursor.topic_name, "partition_index": response.next_cursor.partition_index}
        if response.HasField("next_cursor")
        else None
    )
    return {
        "throttle_time": 0,
        "topics": [topic_values(t, request) for t in response.topics],
        "next_cursor": next_cursor,
    }
