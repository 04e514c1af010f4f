"""Api key → handler, and a decoded request → the encoded response frame."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final

from kio.index import load_response_schema

from raftmeta.kafka import (
    alter_partition,
    assign_dirs,
    broker_lifecycle,
    cluster,
    configs,
    envelope,
    log_dirs,
    metadata_fetch,
    metadata_snapshot,
    partitions,
    producer_ids,
    topics,
    voters,
)
from raftmeta.kafka.build import build
from raftmeta.kafka.context import ApiContext
from raftmeta.kafka.framing import Request, UnsupportedVersion, encode_response
from raftmeta.kafka.versions import API_VERSIONS_KEY, SUPPORTED

Handler = Callable[[ApiContext, Request], Awaitable[dict[str, Any]]]

HANDLERS: Final[dict[int, Handler]] = {
    1: metadata_fetch.fetch,
    3: topics.metadata,
    18: cluster.api_versions,
    19: topics.create_topics,
    20: topics.delete_topics,
    32: configs.describe_configs,
    33: configs.alter_configs,
    35: log_dirs.describe_log_dirs,
    37: topics.create_partitions,
    43: partitions.elect_leaders,
    44: configs.incremental_alter_configs,
    45: partitions.alter_partition_reassignments,
    46: partitions.list_partition_reassignments,
    55: cluster.describe_quorum,
    56: alter_partition.alter_partition,
    58: envelope.envelope,
    59: metadata_snapshot.fetch_snapshot,
    60: cluster.describe_cluster,
    62: broker_lifecycle.broker_registration,
    63: broker_lifecycle.broker_heartbeat,
    67: producer_ids.allocate_producer_ids,
    73: assign_dirs.assign_replicas_to_dirs,
    75: topics.describe_topic_partitions,
    80: voters.add_raft_voter,
    81: voters.remove_raft_voter,
}
assert set(HANDLERS) == set(SUPPORTED), "every Kafka API of the catalogue (KAFKA_APIS) needs a handler"


async def handle(ctx: ApiContext, request: Request) -> bytes:
    """Run the request's handler and encode its answer at the request's version."""
    values = await HANDLERS[request.api_key](ctx, request)
    response = build(load_response_schema(request.api_key, request.api_version), values)
    return encode_response(request.correlation_id, response)


def unsupported_api_versions(error: UnsupportedVersion) -> bytes:
    """KIP-511: an ApiVersions request at a version we do not know is answered in v0 with
    UNSUPPORTED_VERSION and our versions, so the client can retry at one we do."""
    assert error.api_key == API_VERSIONS_KEY
    response = build(
        load_response_schema(API_VERSIONS_KEY, 0), cluster.api_versions_values(cluster.UNSUPPORTED_VERSION)
    )
    return encode_response(error.correlation_id, response)
