"""A real 3-node quorum (`quorum up` assigns the metrics ports): every node serves every
catalogued metric, everything the Grafana dashboard queries exists, a create moves the leader's
committed-proposals counter, and a leader change moves the epoch and leader gauges."""

from __future__ import annotations

import signal
from pathlib import Path

import grpc
import pytest

from raftmeta.client import RetryPolicy, SyncControllerClient
from raftmeta.local import quorum as local_quorum
from raftmeta.metrics import catalog
from raftmeta.metrics.scrape import Scrape, fetch
from raftmeta.v1 import controller_pb2 as pb
from raftmeta.v1 import controller_pb2_grpc, errors_pb2
from tests.integration.test_node import create, leader_of, wait_until
from tests.metrics.test_dashboard import dashboard_metrics

pytestmark = pytest.mark.integration


def scrape(quorum: local_quorum.LocalQuorum, node_id: int) -> Scrape:
    address = quorum.node(node_id).metrics_address
    assert address is not None
    return fetch(address)


def value(s: Scrape, name: str, **labels: str) -> float:
    found = s.get(name, **labels)
    assert found is not None, f"{name}{labels} missing"
    return found


def test_metrics_of_a_running_quorum(quorum: local_quorum.LocalQuorum, client: SyncControllerClient) -> None:
    # quorum up recorded the endpoints and wrote a scrape config naming each of them.
    saved = local_quorum.LocalQuorum.load(Path(quorum.data_dir))
    config = (Path(quorum.data_dir) / local_quorum.PROMETHEUS_FILE).read_text()
    for node in saved.nodes:
        assert node.metrics_address is not None and f'"{node.metrics_address}"' in config
        assert f'node_id: "{node.id}"' in config
    leader = leader_of(client)
    before = scrape(quorum, leader)
    assert value(before, "raftmeta_raft_is_leader") == 1
    assert value(before, "raftmeta_raft_current_state", state="leader") == 1
    assert create(client, "metered").error_code == errors_pb2.NONE

    # A call the node refuses (a rack name over the limit) is counted by status and error code.
    with grpc.insecure_channel(quorum.node(leader).address) as channel:
        stub = controller_pb2_grpc.ControllerServiceStub(channel)
        with pytest.raises(grpc.RpcError) as refused:
            stub.RegisterBroker(pb.RegisterBrokerRequest(broker_id=99, rack="r" * 256), timeout=10)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT

    after = scrape(quorum, leader)
    errors = [dict(labels) for labels in after.series("raftmeta_grpc_errors_total")]
    assert {"service": "raftmeta.v1.ControllerService", "method": "RegisterBroker", "code": "INVALID_ARGUMENT",
            "error_code": "INVALID_REQUEST"} in errors, errors  # fmt: skip
    for name in ("raftmeta_raft_proposals_committed_total", "raftmeta_raft_append_records_total"):
        assert value(after, name) > value(before, name), name
    assert value(after, "raftmeta_controller_global_topic_count") == 1
    assert value(after, "raftmeta_controller_global_partition_count") == 3
    assert value(after, "raftmeta_controller_active_broker_count") == 6
    assert value(after, "raftmeta_controller_offline_partitions_count") == 0
    method = {"service": "raftmeta.v1.ControllerService", "method": "CreateTopics"}
    assert value(after, "raftmeta_grpc_requests_total", **method) >= 1
    assert value(after, "raftmeta_grpc_request_duration_seconds_count", **method) >= 1

    # Every node serves every catalogued metric (the gRPC error counter once an error happened).
    for node in quorum.nodes:
        names = set(scrape(quorum, node.id).samples)
        for spec in catalog.ALL:
            if spec.name == "raftmeta_grpc_errors_total" and node.id != leader:
                continue  # exists once a call failed
            sample = f"{spec.name}_count" if spec.type == "histogram" else spec.name
            if spec.name == "raftmeta_grpc_request_duration_seconds" and sample not in names:
                assert node.id != leader, "the leader answered unary calls"
                continue
            assert sample in names, (node.id, spec.name)
    # Every series the dashboard queries exists on the leader.
    missing = {name for name in dashboard_metrics() if name not in after.samples}
    assert not missing, missing

    # A leader change: the survivors see a higher epoch and another leader.
    survivors = [n.id for n in quorum.nodes if n.id != leader]
    epoch = value(after, "raftmeta_raft_current_epoch")
    changes = {n: value(scrape(quorum, n), "raftmeta_raft_leader_changes_seen_total") for n in survivors}
    local_quorum.signal_node(quorum, leader, signal.SIGTERM)

    def moved() -> bool:
        for node_id in survivors:
            s = scrape(quorum, node_id)
            if value(s, "raftmeta_raft_current_leader") in (-1, leader):
                return False
            if value(s, "raftmeta_raft_current_epoch") <= epoch:
                return False
        return True

    wait_until(moved, timeout_s=30, what="the survivors' gauges showing a new leader in a higher epoch")
    for node_id in survivors:
        s = scrape(quorum, node_id)
        assert value(s, "raftmeta_raft_leader_changes_seen_total") > changes[node_id]
        assert value(s, "raftmeta_raft_has_leader") == 1
    new_leader = int(value(scrape(quorum, survivors[0]), "raftmeta_raft_current_leader"))
    elected = scrape(quorum, new_leader)
    assert value(elected, "raftmeta_raft_is_leader") == 1
    assert value(elected, "raftmeta_raft_election_latency_seconds_count") >= 1
    others = ",".join(quorum.node(n).address for n in survivors)
    with SyncControllerClient(others, retry=RetryPolicy(deadline_s=20)) as c:
        before_create = value(scrape(quorum, new_leader), "raftmeta_raft_proposals_committed_total")
        assert create(c, "after-failover").error_code == errors_pb2.NONE
    assert value(scrape(quorum, new_leader), "raftmeta_raft_proposals_committed_total") > before_create
