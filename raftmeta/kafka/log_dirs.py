"""DescribeLogDirs: each simulated broker's one log directory and the replicas it holds.

A KRaft broker answers DescribeLogDirs about itself (KafkaApis.handleDescribeLogDirsRequest,
ReplicaManager.describeLogDirs): one result per configured log directory, and in each the topics
of the logs it holds there, each with the partitions the request asked for (null topics: every
partition); a topic left with no partition asked for is not listed. Kafka's Admin
(``describeReplicaLogDirs``, which ``kafka-reassign-partitions --generate/--execute`` use) sends
it to the broker named by the replica and reads every log directory of the answer as that
broker's.

raftmeta's brokers are simulated: each has one log directory (:func:`log_dir`) holding a replica
of every partition whose replica set names it, as placement recorded it. They hold no data, so
every size and lag is 0, and the directory has no file system: total and usable bytes are Kafka's
-1 (unknown), and it is never cordoned. A request reaches the node whose Kafka listener advertises
the broker (:mod:`raftmeta.kafka.brokers`); the node answers for the brokers it advertises. With
at most one broker per node that is exactly the broker asked; where several share a node's
address, the request cannot say which one it was meant for, and the answer lists each of their
directories (docs/kafka-protocol.md). The replicas are read from the node's own committed image
(a STALE read), as a broker answers from the logs it has.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, Final

from raftmeta.api.topic_pages import describe_every_page
from raftmeta.kafka.brokers import advertised_cluster
from raftmeta.kafka.context import ApiContext, CallRefused, call
from raftmeta.kafka.framing import Request
from raftmeta.v1 import controller_pb2

# Kafka's default for a log directory's TotalBytes and UsableBytes: not known.
UNKNOWN_BYTES: Final = -1
# The first version whose answer carries an error code of its own.
TOP_LEVEL_ERROR_VERSION: Final = 3


def log_dir(broker_id: int) -> str:
    """The absolute path a simulated broker reports as its only log directory."""
    return f"/raftmeta/simulated-brokers/{broker_id}"


def brokers_here(ctx: ApiContext, listed: Collection[tuple[int, str, int]]) -> list[int]:
    """The ids of the brokers ``listed`` (id, host, port) that this node's Kafka listener advertises."""
    me = next(n for n in ctx.nodes if n.node_id == ctx.node_id)
    return sorted(broker_id for broker_id, host, port in listed if (host, port) == (me.host, me.port))


def _asked(request_topics: Any) -> dict[str, set[int]] | None:
    """The partitions asked for by topic; None for every partition (a null topic list)."""
    if request_topics is None:
        return None
    asked: dict[str, set[int]] = {}
    for topic in request_topics:
        asked.setdefault(topic.topic, set()).update(int(p) for p in topic.partitions)
    return asked


def broker_result(
    broker_id: int, topics: Collection[controller_pb2.TopicDescription], asked: Mapping[str, set[int]] | None
) -> dict[str, Any]:
    """One broker's log directory: its replicas of ``topics`` among those asked, as Kafka lists them."""
    listed = []
    for topic in topics:
        wanted = None if asked is None else asked.get(topic.name, set())
        partitions = [
            {"partition_index": p.partition, "partition_size": 0, "offset_lag": 0, "is_future_key": False}
            for p in topic.partitions
            if broker_id in p.replicas and (wanted is None or p.partition in wanted)
        ]
        if partitions:
            listed.append({"name": topic.name, "partitions": partitions})
    return {
        "error_code": 0,
        "log_dir": log_dir(broker_id),
        "topics": listed,
        "total_bytes": UNKNOWN_BYTES,
        "usable_bytes": UNKNOWN_BYTES,
        "is_cordoned": False,
    }


async def _topics(ctx: ApiContext, names: Collection[str] | None) -> list[controller_pb2.TopicDescription]:
    """The topics named (every topic for None) from this node's committed image, whole."""

    async def send(request: controller_pb2.DescribeTopicsRequest) -> controller_pb2.DescribeTopicsResponse:
        page: controller_pb2.DescribeTopicsResponse = await call(ctx, "DescribeTopics", request)
        return page

    request = controller_pb2.DescribeTopicsRequest(topics=sorted(names or ()), consistency=controller_pb2.STALE)
    response = await describe_every_page(send, request)
    # A topic named but unknown comes back with its error and no partitions: no broker holds it.
    return [t for t in response.topics if t.error_code == 0]


async def describe_log_dirs(ctx: ApiContext, request: Request) -> dict[str, Any]:
    asked = _asked(request.body.topics)
    cluster = await advertised_cluster(ctx)
    here = brokers_here(ctx, [(b.broker_id, b.host, b.port) for b in cluster.brokers])
    values: dict[str, Any] = {"throttle_time": 0, "error_code": 0, "results": []}
    if asked is not None and not asked:
        values["results"] = [broker_result(b, [], asked) for b in here]
        return values
    try:
        topics = await _topics(ctx, None if asked is None else asked.keys())
    except CallRefused as exc:
        # From v3 the answer has an error of its own and no directories (as a broker's refusal);
        # before it, each directory carries the error, which Kafka's Admin reports as a failure
        # rather than as a directory without replicas.
        values["error_code"] = exc.error_code
        if request.api_version < TOP_LEVEL_ERROR_VERSION:
            values["results"] = [{**broker_result(b, [], {}), "error_code": exc.error_code} for b in here]
        return values
    values["results"] = [broker_result(b, topics, asked) for b in here]
    return values
