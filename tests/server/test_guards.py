"""check_raft_call: each rule refuses with its status, error code and a message naming the ids;
everything the consensus core itself sends passes."""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from google.protobuf.message import Message

from raftmeta.api.limits import RAFT_EPOCH_MAX, RAFT_FETCH_WAIT_MS_MAX
from raftmeta.server.guards import (
    Membership,
    RejectionLogLimiter,
    check_raft_call,
    claimed_id,
    common_names,
)
from raftmeta.server.peers import REQUEST_RPC
from raftmeta.v1 import raft_pb2
from tests.raft.harness import Net

ME = Membership(cluster_id="c", node_id=1, voters=frozenset({1, 2, 3}))
OBSERVER_ME = Membership(cluster_id="c", node_id=9, voters=frozenset({1, 2, 3}))


def vote(candidate: int = 2, epoch: int = 5, **fields: Any) -> raft_pb2.VoteRequest:
    values: dict[str, Any] = {"cluster_id": "c", "last_offset_epoch": 4, "last_offset": 10} | fields
    return raft_pb2.VoteRequest(candidate_id=candidate, candidate_epoch=epoch, **values)


def begin(leader: int = 2, epoch: int = 5, **fields: Any) -> raft_pb2.BeginQuorumEpochRequest:
    return raft_pb2.BeginQuorumEpochRequest(**({"cluster_id": "c"} | fields), leader_id=leader, leader_epoch=epoch)


def end(leader: int = 2, epoch: int = 5, **fields: Any) -> raft_pb2.EndQuorumEpochRequest:
    return raft_pb2.EndQuorumEpochRequest(**({"cluster_id": "c"} | fields), leader_id=leader, leader_epoch=epoch)


def fetch(replica: int = 2, epoch: int = 5, **fields: Any) -> raft_pb2.FetchRequest:
    values: dict[str, Any] = {"cluster_id": "c", "fetch_offset": 10, "last_fetched_epoch": 5, "max_wait_ms": 500}
    return raft_pb2.FetchRequest(replica_id=replica, replica_epoch=epoch, **(values | fields))


def fetch_snapshot(replica: int = 2, epoch: int = 5, **fields: Any) -> raft_pb2.FetchSnapshotRequest:
    values: dict[str, Any] = {"cluster_id": "c", "snapshot_id": raft_pb2.SnapshotId(end_offset=10, epoch=4)}
    return raft_pb2.FetchSnapshotRequest(replica_id=replica, replica_epoch=epoch, **(values | fields))


ALL = {
    "Vote": vote,
    "BeginQuorumEpoch": begin,
    "EndQuorumEpoch": end,
    "Fetch": fetch,
    "FetchSnapshot": fetch_snapshot,
}


def refused(method: str, request: Message, membership: Membership = ME, names: tuple[str, ...] = ()) -> Any:
    rejection = check_raft_call(method, request, membership, names)
    assert rejection is not None, f"{method} was let through"
    return rejection


@pytest.mark.parametrize("method", ALL)
def test_well_formed_calls_from_voters_pass(method: str) -> None:
    assert check_raft_call(method, ALL[method](), ME) is None


@pytest.mark.parametrize("method", ALL)
def test_another_clusters_call_is_refused_naming_both_ids(method: str) -> None:
    rejection = refused(method, ALL[method](cluster_id="other"))
    assert rejection.status == grpc.StatusCode.FAILED_PRECONDITION
    assert rejection.error_code == "INCONSISTENT_CLUSTER_ID"
    assert "'other'" in rejection.reason and "'c'" in rejection.reason


@pytest.mark.parametrize("method", ["Vote", "BeginQuorumEpoch", "EndQuorumEpoch"])
def test_election_calls_only_from_a_configured_voter(method: str) -> None:
    rejection = refused(method, ALL[method](7))
    assert rejection.status == grpc.StatusCode.PERMISSION_DENIED
    assert rejection.error_code == "INCONSISTENT_VOTER_SET"
    assert "node 7" in rejection.reason and "[1, 2, 3]" in rejection.reason


@pytest.mark.parametrize("method", ["Fetch", "FetchSnapshot"])
def test_observers_may_fetch(method: str) -> None:
    assert check_raft_call(method, ALL[method](7), ME) is None


@pytest.mark.parametrize("method", ["Vote", "BeginQuorumEpoch", "EndQuorumEpoch"])
def test_an_observer_refuses_election_calls(method: str) -> None:
    rejection = refused(method, ALL[method](2), OBSERVER_ME)
    assert rejection.status == grpc.StatusCode.FAILED_PRECONDITION
    assert rejection.error_code == "INCONSISTENT_VOTER_SET"
    assert "node 9" in rejection.reason


@pytest.mark.parametrize("method", ALL)
@pytest.mark.parametrize("claimed", [-1, 1])
def test_ids_must_be_another_node(method: str, claimed: int) -> None:
    rejection = refused(method, ALL[method](claimed))
    assert rejection.status == grpc.StatusCode.INVALID_ARGUMENT
    assert rejection.error_code == "INVALID_REQUEST"
    assert f"={claimed} " in rejection.reason


@pytest.mark.parametrize("method", ALL)
def test_under_mutual_tls_the_certificate_must_name_the_claimed_node(method: str) -> None:
    assert check_raft_call(method, ALL[method](2), ME, ("node-2",)) is None
    rejection = refused(method, ALL[method](2), names=("node-3",))
    assert rejection.status == grpc.StatusCode.PERMISSION_DENIED
    assert rejection.error_code == "CLUSTER_AUTHORIZATION_FAILED"
    assert "node 2" in rejection.reason and "node-3" in rejection.reason
    # A client certificate is no peer's either.
    assert refused(method, ALL[method](2), names=("client-admin",)).status == grpc.StatusCode.PERMISSION_DENIED


def test_identity_is_checked_before_anything_the_request_says() -> None:
    # An impostor learns nothing about the cluster: not even its id.
    rejection = refused("Fetch", fetch(2, cluster_id="guess"), names=("node-3",))
    assert rejection.error_code == "CLUSTER_AUTHORIZATION_FAILED"
    assert "'c'" not in rejection.reason


def test_common_names_from_the_auth_context() -> None:
    assert common_names({}) == ()
    assert common_names({"transport_security_type": [b"ssl"]}) == ()
    assert common_names({"x509_common_name": [b"node-2"], "x509_pem_cert": [b"..."]}) == ("node-2",)


@pytest.mark.parametrize(
    ("method", "request_", "field"),
    [
        ("BeginQuorumEpoch", begin(epoch=RAFT_EPOCH_MAX + 1), "leader_epoch=2147483647"),
        ("EndQuorumEpoch", end(epoch=2**31 - 1), "leader_epoch"),
        ("Vote", vote(epoch=2**31 - 1), "candidate_epoch"),
        ("Vote", vote(epoch=2**31 - 1, pre_vote=True), "candidate_epoch"),
        ("Fetch", fetch(epoch=2**31 - 1, last_fetched_epoch=0), "replica_epoch"),
        ("FetchSnapshot", fetch_snapshot(epoch=2**31 - 1), "replica_epoch"),
        ("BeginQuorumEpoch", begin(epoch=-1), "leader_epoch=-1"),
        ("Fetch", fetch(last_fetched_epoch=-2), "last_fetched_epoch=-2"),
    ],
)
def test_epochs_outside_int32_headroom_are_invalid(method: str, request_: Message, field: str) -> None:
    rejection = refused(method, request_)
    assert rejection.status == grpc.StatusCode.INVALID_ARGUMENT
    assert rejection.error_code == "INVALID_REQUEST"
    assert field in rejection.reason and (f"RAFT_EPOCH_MAX={RAFT_EPOCH_MAX}" in rejection.reason)


def test_the_largest_epoch_passes() -> None:
    assert check_raft_call("BeginQuorumEpoch", begin(epoch=RAFT_EPOCH_MAX), ME) is None
    assert check_raft_call("Vote", vote(epoch=RAFT_EPOCH_MAX, last_offset_epoch=RAFT_EPOCH_MAX - 1), ME) is None


@pytest.mark.parametrize(
    ("method", "request_", "field"),
    [
        # Kafka's handleVoteRequest: the candidate's log cannot end in the epoch it proposes.
        ("Vote", vote(epoch=5, last_offset_epoch=5), "last_offset_epoch=5"),
        ("Vote", vote(epoch=5, last_offset_epoch=5, pre_vote=True), "last_offset_epoch=5"),
        ("Vote", vote(epoch=0, last_offset_epoch=0, pre_vote=True), "candidate_epoch=0"),
        ("Vote", vote(last_offset=-1), "last_offset=-1"),
        # Kafka's handleFetchRequest.
        ("Fetch", fetch(epoch=5, last_fetched_epoch=6), "last_fetched_epoch=6"),
        ("Fetch", fetch(fetch_offset=-1), "fetch_offset=-1"),
        ("Fetch", fetch(max_wait_ms=-1), "max_wait_ms=-1"),
        ("Fetch", fetch(max_wait_ms=RAFT_FETCH_WAIT_MS_MAX + 1), "RAFT_FETCH_WAIT_MS_MAX"),
        ("Fetch", fetch(max_bytes=-1), "max_bytes=-1"),
        ("FetchSnapshot", fetch_snapshot(position=-1), "position=-1"),
        ("FetchSnapshot", fetch_snapshot(snapshot_id=raft_pb2.SnapshotId(end_offset=-5, epoch=1)), "end_offset=-5"),
        ("EndQuorumEpoch", end(preferred_successors=[3, 8]), "preferred_successors=[3, 8]"),
        ("EndQuorumEpoch", end(preferred_successors=[3, 3]), "preferred_successors=[3, 3]"),
    ],
)
def test_malformed_fields_are_invalid(method: str, request_: Message, field: str) -> None:
    rejection = refused(method, request_)
    assert rejection.status == grpc.StatusCode.INVALID_ARGUMENT
    assert rejection.error_code == "INVALID_REQUEST"
    assert field in rejection.reason, rejection.reason


def test_every_request_the_core_sends_passes_the_guard() -> None:
    net = Net([1, 2, 3], observers=[4])
    leader = net.elect()
    for _ in range(20):
        net.cores[leader].propose(net.now, [b"x" * 100])
        net.advance(50)
    net.cores[leader].transfer_leadership(net.now, next(v for v in (1, 2, 3) if v != leader))
    net.advance(3_000)
    requests = [e for e in net.delivered if type(e.message) in REQUEST_RPC]
    methods = {REQUEST_RPC[type(e.message)] for e in requests}
    assert methods >= {"Vote", "BeginQuorumEpoch", "EndQuorumEpoch", "Fetch"}
    for envelope in requests:
        method = REQUEST_RPC[type(envelope.message)]
        membership = Membership("t", envelope.destination, frozenset({1, 2, 3}))
        assert claimed_id(method, envelope.message) == envelope.source
        assert check_raft_call(method, envelope.message, membership, (f"node-{envelope.source}",)) is None, envelope


def test_the_log_limiter_logs_the_first_then_one_per_interval_with_a_count() -> None:
    limiter = RejectionLogLimiter(interval_s=10, kinds_max=2)
    kind = ("Vote", 7, "ipv4:10.0.0.1", "INCONSISTENT_VOTER_SET")
    assert limiter.admit(kind, 0.0) == 0
    assert [limiter.admit(kind, t) for t in (1.0, 5.0, 9.9)] == [None, None, None]
    assert limiter.admit(kind, 10.0) == 3
    assert limiter.admit(kind, 11.0) is None
    # Another kind is logged at once; at most kinds_max kinds are remembered.
    assert limiter.admit(("Fetch", 8, "h", "X"), 11.0) == 0
    assert limiter.admit(("Fetch", 9, "h", "X"), 11.0) == 0
    assert limiter.admit(kind, 12.0) == 0, "the oldest kind was forgotten"
