"""Who may make a RaftService call, decided before the call reaches the node (pure, no IO).

:func:`check_raft_call` looks at one inbound Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch or
FetchSnapshot request, this node's membership (cluster id, node id, the configured voter set) and
the caller's certificate common names, and returns a :class:`Rejection` or None. The servicer aborts
a rejected call with the rejection's status and ``raftmeta-error-code``; the request never reaches
the consensus core, so nothing is appended and no epoch moves. In order:

1. Identity (mutual TLS only): the caller's certificate CN must be ``node-{claimed id}``; the
   claimed id is ``candidate_id`` (Vote), ``leader_id`` (Begin/EndQuorumEpoch) or ``replica_id``
   (Fetch, FetchSnapshot). PERMISSION_DENIED, CLUSTER_AUTHORIZATION_FAILED. Without client
   certificates (plaintext, or TLS without a CA) there is no identity to check.
2. Cluster: ``cluster_id`` must be ours (meta.properties). FAILED_PRECONDITION,
   INCONSISTENT_CLUSTER_ID.
3. The claimed id must be a node id (>= 0) and not ours. INVALID_ARGUMENT, INVALID_REQUEST.
4. Membership: Vote, BeginQuorumEpoch and EndQuorumEpoch only from a configured voter
   (PERMISSION_DENIED) and only to a voter (FAILED_PRECONDITION: this node is an observer); both
   INCONSISTENT_VOTER_SET. Observers (non-voters) may only Fetch and FetchSnapshot.
5. Field sanity, Kafka's INVALID_REQUEST checks (KafkaRaftClient) plus int32 headroom: epochs in
   0..RAFT_EPOCH_MAX, offsets >= 0, a last epoch no newer than the sender's epoch, a Fetch wait in
   0..RAFT_FETCH_WAIT_MS_MAX, preferred successors that are voters. INVALID_ARGUMENT,
   INVALID_REQUEST.

Epochs from the future that pass these checks are the protocol's business: the core handles them
as KIP-595 says (docs/consensus.md).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

import grpc
from google.protobuf.message import Message

from raftmeta.api.limits import RAFT_EPOCH_MAX, RAFT_FETCH_WAIT_MS_MAX
from raftmeta.api.rpc_errors import CLUSTER_AUTHORIZATION_FAILED
from raftmeta.tls import node_common_name
from raftmeta.v1 import raft_pb2

# The auth-context property gRPC fills with the peer certificate's subject CN (mutual TLS).
COMMON_NAME_PROPERTY = "x509_common_name"
VOTER_ONLY_METHODS = frozenset({"Vote", "BeginQuorumEpoch", "EndQuorumEpoch"})
# The field of each request that names its sender.
CLAIMED_ID_FIELD: dict[str, str] = {
    "Vote": "candidate_id",
    "BeginQuorumEpoch": "leader_id",
    "EndQuorumEpoch": "leader_id",
    "Fetch": "replica_id",
    "FetchSnapshot": "replica_id",
}


@dataclass(frozen=True, slots=True)
class Membership:
    """What this node knows about its quorum: the cluster id, its own id and the voter set."""

    cluster_id: str
    node_id: int
    voters: frozenset[int]


@dataclass(frozen=True, slots=True)
class Rejection:
    """A refused call: the gRPC status, the Kafka error name for ``raftmeta-error-code`` and why."""

    status: grpc.StatusCode
    error_code: str
    reason: str


def common_names(auth_context: Mapping[str, Iterable[bytes]]) -> tuple[str, ...]:
    """The caller's certificate CNs from a gRPC auth context; empty without a client certificate."""
    return tuple(
        value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
        for value in auth_context.get(COMMON_NAME_PROPERTY, ())
    )


def claimed_id(method: str, request: Message) -> int:
    """The node id ``request`` says it comes from."""
    value: int = getattr(request, CLAIMED_ID_FIELD[method])
    return value


def _invalid(reason: str) -> Rejection:
    return Rejection(grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REQUEST", reason)


def _epochs(method: str, **epochs: int) -> Rejection | None:
    for name, epoch in epochs.items():
        if not 0 <= epoch <= RAFT_EPOCH_MAX:
            return _invalid(f"{method}.{name}={epoch} is outside 0..RAFT_EPOCH_MAX={RAFT_EPOCH_MAX}")
    return None


def _offsets(method: str, **offsets: int) -> Rejection | None:
    for name, offset in offsets.items():
        if offset < 0:
            return _invalid(f"{method}.{name}={offset} is negative")
    return None


def _fields(method: str, request: Message, voters: Collection[int]) -> Rejection | None:
    """Step 5 of the module docstring."""
    if isinstance(request, raft_pb2.VoteRequest):
        rejection = _epochs(
            method, candidate_epoch=request.candidate_epoch, last_offset_epoch=request.last_offset_epoch
        )
        rejection = rejection or _offsets(method, last_offset=request.last_offset)
        if rejection is None and request.last_offset_epoch >= request.candidate_epoch:
            # KafkaRaftClient.handleVoteRequest: a candidate's log ends in an epoch older than the
            # one it proposes (a pre-vote proposes its own epoch + 1; a candidate has bumped).
            rejection = _invalid(
                f"{method}.last_offset_epoch={request.last_offset_epoch} is not older than "
                f"candidate_epoch={request.candidate_epoch}"
            )
        return rejection
    if isinstance(request, raft_pb2.BeginQuorumEpochRequest):
        return _epochs(method, leader_epoch=request.leader_epoch)
    if isinstance(request, raft_pb2.EndQuorumEpochRequest):
        rejection = _epochs(method, leader_epoch=request.leader_epoch)
        successors = list(request.preferred_successors)
        if rejection is None and (len(set(successors)) != len(successors) or not set(successors) <= set(voters)):
            rejection = _invalid(
                f"{method}.preferred_successors={successors[:16]} must be distinct voters of {sorted(voters)}"
            )
        return rejection
    if isinstance(request, raft_pb2.FetchRequest):
        rejection = _epochs(method, replica_epoch=request.replica_epoch, last_fetched_epoch=request.last_fetched_epoch)
        rejection = rejection or _offsets(
            method,
            fetch_offset=request.fetch_offset,
            max_bytes=request.max_bytes,
            log_start_offset=request.log_start_offset,
            read_barrier=request.read_barrier,
        )
        if rejection is None and request.last_fetched_epoch > request.replica_epoch:
            rejection = _invalid(
                f"{method}.last_fetched_epoch={request.last_fetched_epoch} is newer than "
                f"replica_epoch={request.replica_epoch}"
            )
        if rejection is None and not 0 <= request.max_wait_ms <= RAFT_FETCH_WAIT_MS_MAX:
            rejection = _invalid(
                f"{method}.max_wait_ms={request.max_wait_ms} is outside "
                f"0..RAFT_FETCH_WAIT_MS_MAX={RAFT_FETCH_WAIT_MS_MAX}"
            )
        return rejection
    if isinstance(request, raft_pb2.FetchSnapshotRequest):
        rejection = _epochs(method, replica_epoch=request.replica_epoch, snapshot_epoch=request.snapshot_id.epoch)
        return rejection or _offsets(
            method,
            snapshot_end_offset=request.snapshot_id.end_offset,
            position=request.position,
            max_bytes=request.max_bytes,
        )
    return _invalid(f"{method} takes no {type(request).__name__}")


def check_raft_call(
    method: str, request: Message, membership: Membership, peer_common_names: Collection[str] = ()
) -> Rejection | None:
    """Whether this node refuses ``request`` (see the module docstring for the rules and order)."""
    claimed = claimed_id(method, request)
    if peer_common_names and node_common_name(claimed) not in peer_common_names:
        return Rejection(
            grpc.StatusCode.PERMISSION_DENIED,
            CLUSTER_AUTHORIZATION_FAILED,
            f"{method} claims to come from node {claimed}, but the caller's certificate is "
            f"{', '.join(sorted(peer_common_names))} (expected CN {node_common_name(claimed)})",
        )
    cluster_id: str = getattr(request, "cluster_id")  # noqa: B009 (every RaftService request has one)
    if cluster_id != membership.cluster_id:
        return Rejection(
            grpc.StatusCode.FAILED_PRECONDITION,
            "INCONSISTENT_CLUSTER_ID",
            f"{method} from node {claimed} is for cluster {cluster_id!r}, this node is in cluster "
            f"{membership.cluster_id!r}",
        )
    field = CLAIMED_ID_FIELD[method]
    if claimed < 0:
        return _invalid(f"{method}.{field}={claimed} is not a node id (>= 0)")
    if claimed == membership.node_id:
        return _invalid(f"{method}.{field}={claimed} is this node's own id")
    voters = sorted(membership.voters)
    if method in VOTER_ONLY_METHODS:
        if claimed not in membership.voters:
            return Rejection(
                grpc.StatusCode.PERMISSION_DENIED,
                "INCONSISTENT_VOTER_SET",
                f"{method} from node {claimed}, which is not in the voter set {voters}: "
                "observers may only Fetch and FetchSnapshot",
            )
        if membership.node_id not in membership.voters:
            return Rejection(
                grpc.StatusCode.FAILED_PRECONDITION,
                "INCONSISTENT_VOTER_SET",
                f"{method} from node {claimed} to node {membership.node_id}, an observer: it is not in "
                f"the voter set {voters}",
            )
    return _fields(method, request, membership.voters)


@dataclass(slots=True)
class _Seen:
    next_log_s: float
    suppressed: int = 0


class RejectionLogLimiter:
    """Which rejections get a log line: the first of each kind (method, claimed id, caller host,
    error code), then at most one per ``interval_s`` carrying the count of those left out.

    Why limit: a misconfigured node (another cluster's, an observer listed nowhere) retries every
    few hundred milliseconds forever, and a hostile caller can send far more; one line per call
    would turn either into a disk-filling stream while the first line already says everything.
    Time is passed in (pure); at most ``kinds_max`` kinds are remembered, oldest forgotten first."""

    def __init__(self, interval_s: float = 10.0, kinds_max: int = 1024) -> None:
        self.interval_s = interval_s
        self.kinds_max = kinds_max
        self._seen: OrderedDict[tuple[object, ...], _Seen] = OrderedDict()

    def admit(self, kind: tuple[object, ...], now_s: float) -> int | None:
        """None: do not log. Otherwise log, with this many earlier rejections of the kind left out."""
        seen = self._seen.get(kind)
        if seen is None:
            self._seen[kind] = _Seen(now_s + self.interval_s)
            while len(self._seen) > self.kinds_max:
                self._seen.popitem(last=False)
            return 0
        if now_s < seen.next_log_s:
            seen.suppressed += 1
            return None
        suppressed = seen.suppressed
        seen.suppressed = 0
        seen.next_log_s = now_s + self.interval_s
        self._seen.move_to_end(kind)
        return suppressed
