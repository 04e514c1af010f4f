"""One row per ControllerService RPC: every fact about a method that more than one place needs.

The controller's dispatch (raftmeta/controller/controller.py) pairs each row it serves with its
handler; the gRPC servicers (raftmeta/server/services.py) serve and forward every row; the client
(raftmeta/client/__init__.py) gives request ids, retries and judges outcomes by it; the Kafka listener
(raftmeta/kafka) maps its api keys onto rows. Adding an RPC is a row here, its handler and its
tests (docs/architecture.md, "Adding an RPC").

Pure: protobuf types and data only.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

from google.protobuf.message import Message

from raftmeta.api import request_limits as limits
from raftmeta.api.request_limits import LimitViolation
from raftmeta.v1 import controller_pb2, errors_pb2

Req = TypeVar("Req", bound=Message)
Resp = TypeVar("Resp", bound=Message)


class Served(enum.Enum):
    """Who answers the RPC on the leader."""

    CONTROLLER = "controller"  # a handler of the Controller, over its image (raftmeta/controller)
    QUORUM = "quorum"  # the consensus core itself: a voter change (KIP-853)
    NODE = "node"  # the node's own view, never queued (DescribeQuorum)


class Retry(enum.Enum):
    """Whether an attempt that may have reached a leader can be sent again (to the next leader)."""

    READ = "read"  # changes nothing: always
    REQUEST_ID = "request id"  # the controller answers a retry with the same id with the first result
    EPOCHS = "epochs"  # idempotent by the broker's epoch and incarnation (registration, heartbeats)
    ALREADY_DONE = "already done"  # refused when retried after success, with ``already_done``: outcome unknown
    UNSAFE = "unsafe"  # no id and no fence: a retry may apply twice or be refused for the first's change


@dataclass(frozen=True, slots=True)
class Rpc(Generic[Req, Resp]):
    name: str  # the ControllerService method
    request_type: type[Req]
    response_type: type[Resp]
    served: Served
    mutating: bool  # changes metadata or the quorum: answered once committed
    retry: Retry
    # Where the Kafka error codes of the answer are (dotted field paths; repeated fields are per
    # item): a request Kafka answers per item is answered per item here too.
    error_fields: tuple[str, ...]
    # Kafka APIs whose requests the listener (raftmeta/kafka) turns into this RPC.
    kafka_api_keys: tuple[int, ...] = ()
    # The error code a retry of an applied change is refused with (Retry.ALREADY_DONE only).
    already_done: int | None = None
    # The bounds of raftmeta.api.limits a request must keep, checked before forwarding.
    limits: Callable[[Any], Iterator[LimitViolation | None]] | None = None

    @property
    def request_id(self) -> bool:
        """The request carries a ``request_id``: the client gives it one, kept across retries."""
        return self.retry is Retry.REQUEST_ID

    @property
    def reports_unknown_outcome(self) -> bool:
        """A failure after an attempt may have reached the quorum is an unknown outcome, not a
        refusal: a write with a request id (a retry resolves it) or a voter change. A broker's
        registration, heartbeats and ISR changes are sent again on the broker's own schedule."""
        return self.retry in (Retry.REQUEST_ID, Retry.ALREADY_DONE)

    @property
    def reads_stale(self) -> bool:
        """The request may ask to be answered from the local image (``consistency: STALE``)."""
        return "consistency" in self.request_type.DESCRIPTOR.fields_by_name

    def safe_to_send_again(self, request: Message) -> bool:
        """Whether an attempt of ``request`` that may have reached a leader can be sent to the
        next one: a read, a write that carries its request id, a broker's registration or
        heartbeat. Never a write without an id, nor a voter change (its retry would be refused)."""
        if self.retry is Retry.REQUEST_ID:
            return bool(getattr(request, "request_id", ""))
        return self.retry in (Retry.READ, Retry.EPOCHS)


C = controller_pb2
CONTROLLER, QUORUM, NODE = Served.CONTROLLER, Served.QUORUM, Served.NODE

CREATE_TOPICS: Final = Rpc(
    "CreateTopics", C.CreateTopicsRequest, C.CreateTopicsResponse, CONTROLLER, True, Retry.REQUEST_ID,
    ("topics.error_code",), (19,), limits=limits.create_topics_limits,
)  # fmt: skip
CREATE_PARTITIONS: Final = Rpc(
    "CreatePartitions", C.CreatePartitionsRequest, C.CreatePartitionsResponse, CONTROLLER, True, Retry.REQUEST_ID,
    ("results.error_code",), (37,), limits=limits.create_partitions_limits,
)  # fmt: skip
DELETE_TOPICS: Final = Rpc(
    "DeleteTopics", C.DeleteTopicsRequest, C.DeleteTopicsResponse, CONTROLLER, True, Retry.REQUEST_ID,
    ("responses.error_code",), (20,), limits=limits.delete_topics_limits,
)  # fmt: skip
ELECT_LEADERS: Final = Rpc(
    "ElectLeaders", C.ElectLeadersRequest, C.ElectLeadersResponse, CONTROLLER, True, Retry.REQUEST_ID,
    ("results.partitions.error_code",), (43,), limits=limits.elect_leaders_limits,
)  # fmt: skip
ALTER_PARTITION_REASSIGNMENTS: Final = Rpc(
    "AlterPartitionReassignments", C.AlterPartitionReassignmentsRequest, C.AlterPartitionReassignmentsResponse,
    CONTROLLER, True, Retry.REQUEST_ID, ("results.partitions.error_code",), (45,),
    limits=limits.alter_reassignments_limits,
)  # fmt: skip
LIST_PARTITION_REASSIGNMENTS: Final = Rpc(
    "ListPartitionReassignments", C.ListPartitionReassignmentsRequest, C.ListPartitionReassignmentsResponse,
    CONTROLLER, False, Retry.READ, ("error_code",), (46,), limits=limits.list_reassignments_limits,
)  # fmt: skip
DESCRIBE_TOPICS: Final = Rpc(
    "DescribeTopics", C.DescribeTopicsRequest, C.DescribeTopicsResponse, CONTROLLER, False, Retry.READ,
    ("topics.error_code",), (3, 35, 75), limits=limits.describe_topics_limits,
)  # fmt: skip
DESCRIBE_CLUSTER: Final = Rpc(
    "DescribeCluster", C.DescribeClusterRequest, C.DescribeClusterResponse, CONTROLLER, False, Retry.READ,
    (), (3, 60),
)  # fmt: skip
DESCRIBE_CONFIGS: Final = Rpc(
    "DescribeConfigs", C.DescribeConfigsRequest, C.DescribeConfigsResponse, CONTROLLER, False, Retry.READ,
    ("results.error_code",), (32,), limits=limits.describe_configs_limits,
)  # fmt: skip
INCREMENTAL_ALTER_CONFIGS: Final = Rpc(
    "IncrementalAlterConfigs", C.IncrementalAlterConfigsRequest, C.IncrementalAlterConfigsResponse, CONTROLLER,
    True, Retry.REQUEST_ID, ("results.error_code",), (33, 44), limits=limits.alter_configs_limits,
)  # fmt: skip
REGISTER_BROKER: Final = Rpc(
    "RegisterBroker", C.RegisterBrokerRequest, C.RegisterBrokerResponse, CONTROLLER, True, Retry.EPOCHS,
    ("error_code",), (62,), limits=limits.register_broker_limits,
)  # fmt: skip
BROKER_HEARTBEAT: Final = Rpc(
    "BrokerHeartbeat", C.BrokerHeartbeatRequest, C.BrokerHeartbeatResponse, CONTROLLER, True, Retry.EPOCHS,
    ("error_code",), (63,), limits=limits.broker_heartbeat_limits,
)  # fmt: skip
UNREGISTER_BROKER: Final = Rpc(
    "UnregisterBroker", C.UnregisterBrokerRequest, C.UnregisterBrokerResponse, CONTROLLER, True, Retry.REQUEST_ID,
    ("error_code",), limits=limits.unregister_broker_limits,
)  # fmt: skip
ALLOCATE_PRODUCER_IDS: Final = Rpc(
    "AllocateProducerIds", C.AllocateProducerIdsRequest, C.AllocateProducerIdsResponse, CONTROLLER, True,
    Retry.UNSAFE, ("error_code",), (67,),
)  # fmt: skip
ALTER_PARTITION: Final = Rpc(
    "AlterPartition", C.AlterPartitionRequest, C.AlterPartitionResponse, CONTROLLER, True, Retry.UNSAFE,
    ("error_code", "topics.partitions.error_code"), (56,), limits=limits.alter_partition_limits,
)  # fmt: skip
ASSIGN_REPLICAS_TO_DIRS: Final = Rpc(
    "AssignReplicasToDirs", C.AssignReplicasToDirsRequest, C.AssignReplicasToDirsResponse, CONTROLLER, True,
    Retry.UNSAFE, ("error_code", "directories.topics.partitions.error_code"), (73,),
    limits=limits.assign_replicas_to_dirs_limits,
)  # fmt: skip
DESCRIBE_QUORUM: Final = Rpc(
    "DescribeQuorum", C.DescribeQuorumRequest, C.DescribeQuorumResponse, NODE, False, Retry.READ, (), (55,),
)  # fmt: skip
ADD_RAFT_VOTER: Final = Rpc(
    "AddRaftVoter", C.AddRaftVoterRequest, C.AddRaftVoterResponse, QUORUM, True, Retry.ALREADY_DONE,
    ("error_code",), (80,), already_done=errors_pb2.DUPLICATE_VOTER,
)  # fmt: skip
REMOVE_RAFT_VOTER: Final = Rpc(
    "RemoveRaftVoter", C.RemoveRaftVoterRequest, C.RemoveRaftVoterResponse, QUORUM, True, Retry.ALREADY_DONE,
    ("error_code",), (81,), already_done=errors_pb2.VOTER_NOT_FOUND,
)  # fmt: skip
UPDATE_RAFT_VOTER: Final = Rpc(
    "UpdateRaftVoter", C.UpdateRaftVoterRequest, C.UpdateRaftVoterResponse, QUORUM, True, Retry.UNSAFE,
    ("error_code",),
)  # fmt: skip

RPCS: Final[dict[str, Rpc[Any, Any]]] = {
    rpc.name: rpc
    for rpc in (
        CREATE_TOPICS,
        CREATE_PARTITIONS,
        DELETE_TOPICS,
        ELECT_LEADERS,
        ALTER_PARTITION_REASSIGNMENTS,
        LIST_PARTITION_REASSIGNMENTS,
        DESCRIBE_TOPICS,
        DESCRIBE_CLUSTER,
        DESCRIBE_CONFIGS,
        INCREMENTAL_ALTER_CONFIGS,
        REGISTER_BROKER,
        BROKER_HEARTBEAT,
        UNREGISTER_BROKER,
        ALLOCATE_PRODUCER_IDS,
        ALTER_PARTITION,
        ASSIGN_REPLICAS_TO_DIRS,
        DESCRIBE_QUORUM,
        ADD_RAFT_VOTER,
        REMOVE_RAFT_VOTER,
        UPDATE_RAFT_VOTER,
    )
}


@dataclass(frozen=True, slots=True)
class KafkaApi:
    """A Kafka API the listener serves, and its versions: what its handler was tested at, within
    Kafka 4's schemas. The RPCs that answer it are the rows naming its key (:func:`kafka_rpcs`)."""

    key: int
    name: str
    min_version: int
    max_version: int


KAFKA_APIS: Final[dict[int, KafkaApi]] = {
    api.key: api
    for api in (
        KafkaApi(1, "Fetch", 4, 18),  # of __cluster_metadata, from brokers as observers: as a KRaft controller
        KafkaApi(3, "Metadata", 0, 12),
        KafkaApi(18, "ApiVersions", 0, 4),
        KafkaApi(19, "CreateTopics", 2, 7),
        KafkaApi(20, "DeleteTopics", 1, 6),
        KafkaApi(32, "DescribeConfigs", 1, 4),
        # Legacy: replaces a resource's configs (sent as IncrementalAlterConfigs).
        KafkaApi(33, "AlterConfigs", 0, 2),
        KafkaApi(35, "DescribeLogDirs", 1, 5),
        KafkaApi(37, "CreatePartitions", 0, 3),
        KafkaApi(43, "ElectLeaders", 0, 2),
        KafkaApi(44, "IncrementalAlterConfigs", 0, 1),
        KafkaApi(45, "AlterPartitionReassignments", 0, 0),
        KafkaApi(46, "ListPartitionReassignments", 0, 0),
        KafkaApi(55, "DescribeQuorum", 0, 2),
        KafkaApi(56, "AlterPartition", 2, 3),  # from partition leaders: brokers
        KafkaApi(58, "Envelope", 0, 0),  # client requests brokers forward (admin, auto-creation)
        KafkaApi(59, "FetchSnapshot", 0, 1),  # of __cluster_metadata, from brokers as observers
        KafkaApi(60, "DescribeCluster", 0, 2),
        KafkaApi(62, "BrokerRegistration", 0, 4),  # brokers
        KafkaApi(63, "BrokerHeartbeat", 0, 2),  # brokers
        KafkaApi(67, "AllocateProducerIds", 0, 0),  # brokers, for idempotent producers
        KafkaApi(73, "AssignReplicasToDirs", 0, 0),  # brokers: which log directory holds each replica
        KafkaApi(75, "DescribeTopicPartitions", 0, 0),
        KafkaApi(80, "AddRaftVoter", 0, 0),
        KafkaApi(81, "RemoveRaftVoter", 0, 0),
    )
}


def rpc_row(name: str) -> Rpc[Any, Any]:
    """The row of ``name``; an unknown name is refused naming the known ones."""
    row = RPCS.get(name)
    if row is None:
        raise KeyError(f"unknown ControllerService method {name!r}: expected one of {', '.join(RPCS)}")
    return row


def kafka_rpcs(api_key: int) -> tuple[Rpc[Any, Any], ...]:
    """The RPCs the listener answers Kafka API ``api_key`` with (none: ApiVersions, answered alone)."""
    return tuple(row for row in RPCS.values() if api_key in row.kafka_api_keys)


def check_controller_request(method: str, request: Message) -> LimitViolation | None:
    """The first bound of :mod:`raftmeta.api.limits` that ``request`` breaks, or None: its size, then
    the row's own limits in field order (see :mod:`raftmeta.api.request_limits`)."""
    violation = limits.check_size(request)
    if violation is not None:
        return violation
    row = RPCS.get(method)
    if row is None or row.limits is None:
        return None
    return limits.first_violation(row.limits(request))
