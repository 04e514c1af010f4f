"""Every limit a client or peer can run into, in one place, each with its unit.

Hitting a limit is a defined error that names the limit (TigerBeetle style): gRPC
RESOURCE_EXHAUSTED or INVALID_ARGUMENT, never unbounded memory or a silent truncation.
``raftmeta.api.request_limits`` checks a ControllerService request against these before the node does
anything with it (before forwarding, so the first node a client reaches refuses it);
``raftmeta.server.guards`` checks RaftService calls. The exception is what Kafka answers per
topic (the partitions and replicas of a topic being created or grown): the controller answers
those per topic with Kafka's codes (raftmeta.controller.topics), so one topic over a limit does not
fail the others. docs/security.md has the table.

Which status (the rule ``request_limits`` follows): a limit on how *long one value* is (a name, a
config key or value, a rack) is INVALID_ARGUMENT -- the value itself is unacceptable; a limit on
*how much* a request asks for (bytes, topics, partitions, replicas, configs, endpoints) is
RESOURCE_EXHAUSTED -- a smaller request would pass.

The values are chosen so that nothing a real user does hits them by accident, and so that the
largest request they admit still appends one batch that fits in one Fetch response
(``GRPC_MESSAGE_BYTES_MAX``); tests/test_limits.py measures that batch.
"""

from __future__ import annotations

from typing import Final

# -- transport ------------------------------------------------------------------------------------
# gRPC message size in bytes, both directions, client and server (a FetchResponse carries at most
# one batch beyond its max_bytes, plus small fields).
GRPC_MESSAGE_BYTES_MAX: Final = 16 * 1024 * 1024
# The largest message a node's server reads. Nothing a node serves takes a large request (Fetch,
# Vote and the like are small; a ControllerService request above CONTROLLER_REQUEST_BYTES_MAX is
# refused by name), and gRPC holds a message whole before anything can look at it, so this bounds
# what one call in progress can make a node hold. 4x the largest admitted request: a request a
# little over that limit still gets the message naming it.
GRPC_SERVER_RECEIVE_BYTES_MAX: Final = 4 * 1024 * 1024
# Concurrent calls (HTTP/2 streams) one connection may have open on a node; more wait in the
# client's queue. The benchmark drives 64 clients over one channel, and a follower forwards all of
# its clients' calls to the leader over one connection: 256 leaves room for both.
CONCURRENT_STREAMS_PER_CONNECTION_MAX: Final = 256

# -- ControllerService requests --------------------------------------------------------------------
# Serialized size of one ControllerService request in bytes. Kafka's producer max.request.size
# defaults to the same 1 MiB; admin requests are far smaller. Bounds what one request can make the
# controller copy into records (see the module docstring).
CONTROLLER_REQUEST_BYTES_MAX: Final = 1024 * 1024
# Request ids make mutating requests idempotent; bounded in characters so the request-id table
# stays small (the controller refuses longer ones too).
REQUEST_ID_CHARS_MAX: Final = 64
# Topics named in one request (CreateTopics, CreatePartitions, DeleteTopics names + ids,
# DescribeTopics, ElectLeaders, Alter/ListPartitionReassignments). Kafka has no count limit, only
# the request size; this one is far above any admin tool's batch.
TOPICS_PER_REQUEST_MAX: Final = 10_000
# Partitions of one topic (CreateTopics num_partitions or its manual assignments, CreatePartitions
# count). Kafka's QuorumController caps a request at MAX_PARTITIONS_PER_BATCH = 10,000; a topic
# cannot have more than one request can create. The controller answers it per topic
# (INVALID_PARTITIONS) through ControllerConfig.max_partitions_per_topic, which may be set lower,
# never higher; `topics create/alter --partitions` advertise it.
PARTITIONS_PER_TOPIC_MAX: Final = 10_000
# Partitions one request names or creates, summed over its topics. Kafka's MAX_PARTITIONS_PER_BATCH:
# it bounds the records one request appends. CreateTopics and CreatePartitions: the controller's
# max_partitions_per_request (no higher), answered POLICY_VIOLATION on every topic as Kafka does;
# ElectLeaders, Alter/ListPartitionReassignments partitions, AlterPartition, BrokerHeartbeat
# caught_up_replicas: request_limits.
PARTITIONS_PER_REQUEST_MAX: Final = 10_000
# Replicas of one partition: a replication factor, a manual assignment's broker list, a
# reassignment target (the controller answers these per topic or partition with Kafka's codes), an
# ISR change (request_limits). Kafka has no cap; factors above 5 are unheard of.
REPLICAS_PER_PARTITION_MAX: Final = 16
# Characters of a topic name field in a request. Kafka's naming rule (at most 249 characters,
# raftmeta.controller.names.MAX_NAME_LENGTH) is the controller's to answer per topic, with
# INVALID_TOPIC_EXCEPTION, as Kafka does; this bound only keeps absurd fields (megabytes of name)
# out of a request as a whole.
TOPIC_NAME_FIELD_CHARS_MAX: Final = 4096
# Config entries of one topic. Kafka knows about 40 topic configs (the controller accepts 10 and
# answers INVALID_CONFIG for the others).
CONFIGS_PER_TOPIC_MAX: Final = 128
# Characters of a config name and of a config value. The longest Kafka topic config name has 39
# characters. A value stays below Python's 4,300-digit limit for int() of a string, which the
# controller's number parsing would otherwise raise on.
CONFIG_KEY_CHARS_MAX: Final = 255
CONFIG_VALUE_CHARS_MAX: Final = 4096
# Characters of a placer name ("striped", "legacy", "balanced") and of a broker pool name.
PLACER_CHARS_MAX: Final = 64
POOL_CHARS_MAX: Final = 255
# RegisterBroker: characters of the rack (Kafka's broker.rack has no cap), of each endpoint's
# listener name and host (DNS names have at most 253, RFC 1035), of the cluster id the broker
# believes in; and endpoints (listeners) per broker.
RACK_CHARS_MAX: Final = 255
LISTENER_NAME_CHARS_MAX: Final = 255
HOST_CHARS_MAX: Final = 253
CLUSTER_ID_CHARS_MAX: Final = 255
ENDPOINTS_PER_BROKER_MAX: Final = 16
# Log directories a broker registers (KIP-858) and names in one AssignReplicasToDirs: a JBOD
# broker has one per disk (Kafka sets no cap).
LOG_DIRS_PER_BROKER_MAX: Final = 256

# -- RaftService requests (raftmeta.server.guards) ---------------------------------------------------
# The largest epoch a peer may name. Epochs are int32 and a node at epoch E starts its next
# election at E + 1, so E = 2**31 - 1 would overflow the field (and wedge every node that adopted
# it, as none could ever be elected again).
RAFT_EPOCH_MAX: Final = 2**31 - 2
# The longest a Fetch may ask the leader to hold it (long poll), in milliseconds; nodes ask for
# fetch_max_wait_ms (500 by default).
RAFT_FETCH_WAIT_MS_MAX: Final = 60_000

# -- the Kafka listener (raftmeta.kafka.listener; flags of ``raftmeta node``) ----------------------
# The largest request frame the listener reads (Kafka's socket.request.max.bytes is 100 MiB; admin
# requests are tiny, and the controller path refuses anything above CONTROLLER_REQUEST_BYTES_MAX).
KAFKA_FRAME_BYTES_MAX: Final = 1024 * 1024
# Kafka's queued.max.request.bytes (Kafka's default, -1, is unbounded): request bytes buffered in a
# node across all its Kafka connections, --kafka-queued-max-request-bytes. 32 frames of the largest
# size the listener reads; admin requests are far smaller. Must be at least that frame size.
KAFKA_QUEUED_REQUEST_BYTES_DEFAULT: Final = 32 * KAFKA_FRAME_BYTES_MAX
# How long a frame may take to arrive once its size is read, --kafka-frame-timeout-ms. Kafka has no
# such deadline: its connections.max.idle.ms counts any byte as activity.
KAFKA_FRAME_TIMEOUT_MS_DEFAULT: Final = 30_000


# Keepalive: every channel pings an idle connection this often, to detect a dead peer (SIGSTOP'd
# node, cut link) without waiting for TCP timeouts ...
KEEPALIVE_TIME_MS: Final = 10_000
KEEPALIVE_TIMEOUT_MS: Final = 5_000
# ... and every server accepts pings on a connection without calls this often. gRPC's default is 5
# minutes: a peer pinging every 10 s was answered GOAWAY too_many_pings after two strikes (node
# logs showed it between nodes). It must stay below KEEPALIVE_TIME_MS.
SERVER_MIN_PING_INTERVAL_MS: Final = KEEPALIVE_TIME_MS // 2


def grpc_channel_options() -> list[tuple[str, int]]:
    """Options for every channel (and the basis of the server's): message size limits and keepalive."""
    return [
        ("grpc.max_send_message_length", GRPC_MESSAGE_BYTES_MAX),
        ("grpc.max_receive_message_length", GRPC_MESSAGE_BYTES_MAX),
        ("grpc.keepalive_time_ms", KEEPALIVE_TIME_MS),
        ("grpc.keepalive_timeout_ms", KEEPALIVE_TIMEOUT_MS),
        ("grpc.keepalive_permit_without_calls", 1),
        # Keep pinging an idle connection (the default stops after two pings without data).
        ("grpc.http2.max_pings_without_data", 0),
    ]


def grpc_server_options() -> list[tuple[str, int]]:
    """Options for a node's gRPC server: the channel options with the smaller receive limit of
    GRPC_SERVER_RECEIVE_BYTES_MAX, the per-connection stream limit, and the ping policy that lets
    clients keep their keepalive (see SERVER_MIN_PING_INTERVAL_MS)."""
    options = dict(grpc_channel_options())
    options["grpc.max_receive_message_length"] = GRPC_SERVER_RECEIVE_BYTES_MAX
    return [
        *options.items(),
        ("grpc.max_concurrent_streams", CONCURRENT_STREAMS_PER_CONNECTION_MAX),
        ("grpc.http2.min_ping_interval_without_data_ms", SERVER_MIN_PING_INTERVAL_MS),
    ]
