"""``raftmeta leader-election`` and ``topics describe``'s health filters against a real quorum and
broker fleet: a preferred election moves a leader for real, and after a broker fails the filters
show the partitions Kafka's would."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from raftmeta.cli.brokers import _fleet_call
from raftmeta.cli.main import cli
from raftmeta.client import SyncControllerClient
from raftmeta.local import quorum as local_quorum
from raftmeta.v1 import controller_pb2, errors_pb2

from .test_node import wait_until

pytestmark = pytest.mark.integration


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def create(client: SyncControllerClient, name: str, assignment: list[list[int]], **configs: str) -> None:
    topic = controller_pb2.CreatableTopic(name=name, configs=configs)
    for index, brokers in enumerate(assignment):
        topic.assignments.add(partition_index=index, broker_ids=brokers)
    result = client.create_topics(controller_pb2.CreateTopicsRequest(topics=[topic])).topics[0]
    assert result.error_code == errors_pb2.NONE, result.error_message


def partition(client: SyncControllerClient, name: str, index: int) -> controller_pb2.PartitionDescription:
    return client.describe_topics([name]).topics[0].partitions[index]


def filtered(bootstrap: str, flag: str) -> list[str]:
    code, out, _ = run("topics", "describe", "--bootstrap-server", bootstrap, flag, "-o", "json")
    assert code == 0
    return sorted(f"{t['name']}-{p['partition']}" for t in json.loads(out)["topics"] for p in t["partitions"])


def test_preferred_election_and_health_filters(quorum: local_quorum.LocalQuorum, client: SyncControllerClient) -> None:
    bootstrap = quorum.bootstrap_server
    create(client, "orders", [[0, 1, 2], [1, 2, 3]])
    create(client, "strict", [[3, 4, 5]], **{"min.insync.replicas": "3"})
    create(client, "solo", [[5]])
    # A reorder completes at once and keeps the leader: broker 0 leads, broker 1 is now preferred.
    move = controller_pb2.AlterPartitionReassignmentsRequest(
        topics=[
            controller_pb2.ReassignableTopic(
                name="orders", partitions=[controller_pb2.ReassignablePartition(partition_index=0, replicas=[1, 0, 2])]
            )
        ]
    )
    assert client.alter_partition_reassignments(move).results[0].partitions[0].error_code == errors_pb2.NONE
    wait_until(lambda: list(partition(client, "orders", 0).replicas) == [1, 0, 2], what="the reorder")
    assert partition(client, "orders", 0).leader == 0

    election = ("leader-election", "--bootstrap-server", bootstrap, "--election-type", "preferred")
    code, out, _ = run(*election, "--topic", "orders", "--partition", "0")
    assert (code, out) == (0, "Successfully completed leader election (PREFERRED) for partitions orders-0\n")
    assert partition(client, "orders", 0).leader == 1
    code, out, _ = run(*election, "--topic", "orders", "--partition", "0")
    assert (code, out) == (0, "Valid replica already elected for partitions orders-0\n")
    code, out, _ = run(*election, "--all-topic-partitions")
    assert (code, out) == (0, ""), "every leader is preferred: Kafka prints nothing"
    code, out, err = run(*election, "--topic", "nope", "--partition", "0")
    assert code == 1
    assert out.startswith(
        "Error completing leader election (PREFERRED) for partition: nope-0: "
        "org.apache.kafka.common.errors.UnknownTopicOrPartitionException: "
    )
    assert "1 replica(s) could not be elected" in err

    # min.insync.replicas: 1 by default (solo-0 has 1 in sync), 3 for strict.
    assert filtered(bootstrap, "--at-min-isr-partitions") == ["solo-0", "strict-0"]
    for flag in ("--under-replicated-partitions", "--unavailable-partitions", "--under-min-isr-partitions"):
        assert filtered(bootstrap, flag) == [], flag

    _fleet_call(bootstrap, 10.0, "FailBrokers", (5,))
    wait_until(lambda: partition(client, "solo", 0).leader == -1, what="broker 5 fenced")
    wait_until(lambda: 5 not in partition(client, "strict", 0).isr, what="broker 5 out of strict-0's ISR")
    assert filtered(bootstrap, "--under-replicated-partitions") == ["strict-0"]
    assert filtered(bootstrap, "--unavailable-partitions") == ["solo-0"]
    assert filtered(bootstrap, "--under-min-isr-partitions") == ["solo-0", "strict-0"]
    # An unclean election needs a live replica; solo-0's only one is down.
    code, out, err = run("leader-election", "--bootstrap-server", bootstrap, "--election-type", "unclean",
                         "--topic", "solo", "--partition", "0")  # fmt: skip
    assert code == 1
    assert "Error completing leader election (UNCLEAN) for partition: solo-0: " in out
    assert "EligibleLeadersNotAvailableException" in out
