"""The shared real KRaft cluster (3 controllers, 3 brokers in 3 racks) as Kafka's own tools and
clients see it. Read-only: nothing here changes a node (test_cluster_failover.py does, on its own
cluster)."""

from __future__ import annotations

import json
import re

import pytest
from confluent_kafka.admin import AdminClient

from raftmeta.kraft.cluster import CLUSTER_FILE, KraftCluster
from raftmeta.kraft.tools import METADATA_QUORUM_COMMAND, TOPIC_COMMAND, run_tool
from raftmeta.local.fleet import rack_name
from raftmeta.local.quorum import alive

pytestmark = pytest.mark.kraft


def test_the_cluster_runs_the_nodes_raftmeta_numbers(kraft_cluster: KraftCluster) -> None:
    controllers = [(n.node_id, n.rack) for n in kraft_cluster.controllers]
    brokers = [(n.node_id, n.rack) for n in kraft_cluster.brokers]
    assert controllers == [(3001, None), (3002, None), (3003, None)]
    # Broker i in rack i mod racks, named as raftmeta's simulated fleet names them.
    assert brokers == [(0, rack_name(0)), (1, rack_name(1)), (2, rack_name(2))]
    assert brokers[0][1] == "rack-a"
    assert all(alive(n.pid) for n in kraft_cluster.nodes)
    # Another process finds the very same cluster through kraft.json.
    recorded = json.loads((kraft_cluster.data_dir / CLUSTER_FILE).read_text())
    assert recorded["cluster_id"] == kraft_cluster.cluster_id
    assert recorded["bootstrap_servers"] == kraft_cluster.bootstrap_servers
    assert KraftCluster.load(kraft_cluster.data_dir).nodes == kraft_cluster.nodes
    # Each node logs to a file in its folder, and has its metadata log where log_dirs() says.
    for node in kraft_cluster.nodes:
        assert f"[KafkaRaftServer nodeId={node.node_id}] Kafka Server started" in node.log.read_text()
        assert kraft_cluster.log_dirs()[node.node_id].is_dir()


def test_kafka_topics_creates_a_topic_whose_replicas_span_three_racks(kraft_cluster: KraftCluster) -> None:
    bootstrap = ["--bootstrap-server", kraft_cluster.bootstrap_servers]
    created = run_tool(
        TOPIC_COMMAND, *bootstrap, "--create", "--topic", "launcher-rf3", "--partitions", "3",
        "--replication-factor", "3",
    )  # fmt: skip
    assert "Created topic launcher-rf3." in created.stdout
    described = run_tool(TOPIC_COMMAND, *bootstrap, "--describe", "--topic", "launcher-rf3").stdout
    replicas = [[int(b) for b in found.split(",")] for found in re.findall(r"\tReplicas: ([\d,]+)", described)]
    assert len(replicas) == 3, described
    rack_of = {n.node_id: str(n.rack) for n in kraft_cluster.brokers}
    for partition in replicas:
        assert sorted(rack_of[b] for b in partition) == ["rack-a", "rack-b", "rack-c"], described

    # A Python client people point at Kafka lists it.
    admin = AdminClient({"bootstrap.servers": kraft_cluster.bootstrap_servers})
    listed = admin.list_topics(topic="launcher-rf3", timeout=60)
    assert len(listed.topics["launcher-rf3"].partitions) == 3
    assert {b.id for b in listed.brokers.values()} == {0, 1, 2}


def test_the_quorum_has_the_three_controllers_as_voters(kraft_cluster: KraftCluster) -> None:
    status = run_tool(
        METADATA_QUORUM_COMMAND, "--bootstrap-controller", kraft_cluster.controller_bootstrap_servers,
        "describe", "--status",
    ).stdout  # fmt: skip
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    assert fields["ClusterId"].strip() == kraft_cluster.cluster_id
    voters = [int(v) for v in re.findall(r'"id":\s*(\d+)', fields["CurrentVoters"])]
    observers = [int(o) for o in re.findall(r'"id":\s*(\d+)', fields["CurrentObservers"])]
    assert sorted(voters) == [3001, 3002, 3003], status
    assert sorted(observers) == [0, 1, 2], status
    assert int(fields["LeaderId"]) == kraft_cluster.active_controller()
