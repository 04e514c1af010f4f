"""``raftmeta topics describe`` with kafka-topics.sh's partition filters, against a scripted
ControllerService: which partitions each filter shows, in Kafka's layout (partition lines only),
the live brokers read from DescribeCluster, and the filters' mutual exclusion."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from click.testing import CliRunner

from raftmeta.cli.main import cli
from raftmeta.v1 import controller_pb2
from tests.fakes import ServerThread


@pytest.fixture
def server() -> Iterator[ServerThread]:
    thread = ServerThread()
    thread.controller.responses["DescribeTopics"] = cluster_topics()
    thread.controller.responses["DescribeCluster"] = controller_pb2.DescribeClusterResponse(
        brokers=[
            controller_pb2.BrokerDescription(broker_id=1),
            controller_pb2.BrokerDescription(broker_id=2),
            controller_pb2.BrokerDescription(broker_id=3, fenced=True),
        ]
    )
    yield thread
    thread.stop()


def cluster_topics() -> controller_pb2.DescribeTopicsResponse:
    """Partitions covering each filter: broker 3 is fenced."""
    p = controller_pb2.PartitionDescription
    return controller_pb2.DescribeTopicsResponse(
        topics=[
            controller_pb2.TopicDescription(
                name="orders",
                topic_id=bytes(range(16)),
                partitions=[
                    p(partition=0, leader=1, replicas=[1, 2, 3], isr=[1, 2, 3]),  # healthy
                    p(partition=1, leader=2, replicas=[2, 3, 1], isr=[2, 1]),  # under-replicated
                    p(partition=2, leader=3, replicas=[3, 1, 2], isr=[3, 1, 2]),  # leader fenced: unavailable
                    p(partition=3, leader=-1, replicas=[3], isr=[3]),  # offline
                ],
            ),
            controller_pb2.TopicDescription(
                name="strict",
                topic_id=b"\x01" * 16,
                configs={"min.insync.replicas": "2"},
                partitions=[
                    p(partition=0, leader=1, replicas=[1, 2, 3], isr=[1, 2, 3]),
                    p(partition=1, leader=1, replicas=[1, 2, 3], isr=[1, 2]),  # at min ISR (and under-replicated)
                    p(partition=2, leader=1, replicas=[1, 2, 3], isr=[1]),  # under min ISR
                    # A reassignment adding 4: the factor is 3, all in sync.
                    p(partition=3, leader=1, replicas=[4, 1, 2, 3], isr=[1, 2, 3], adding_replicas=[4]),
                ],
            ),
        ]
    )


def describe(server: ServerThread, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["topics", "describe", "--bootstrap-server", server.address, *args])
    return result.exit_code, result.stdout, result.stderr


def shown(out: str) -> list[str]:
    """``topic-partition`` of every partition line printed."""
    names = []
    for line in out.splitlines():
        fields = dict(part.split(": ", 1) for part in line.strip("\t").split("\t"))
        names.append(f"{fields['Topic']}-{fields['Partition']}")
    return names


@pytest.mark.parametrize(
    ("flag", "partitions"),
    [
        ("--under-replicated-partitions", ["orders-1", "strict-1", "strict-2"]),
        ("--unavailable-partitions", ["orders-2", "orders-3"]),
        # No leader counts as under min ISR (Kafka's isUnderMinIsr).
        ("--under-min-isr-partitions", ["orders-3", "strict-2"]),
        ("--at-min-isr-partitions", ["orders-3", "strict-1"]),
    ],
)
def test_each_filter_prints_only_its_partitions_without_topic_lines(
    server: ServerThread, flag: str, partitions: list[str]
) -> None:
    code, out, _ = describe(server, flag)
    assert code == 0
    assert shown(out) == partitions
    assert all(line.startswith("\tTopic: ") for line in out.splitlines()), "Kafka prints no topic line when filtering"


def test_a_filtered_line_is_kafkas_partition_line(server: ServerThread) -> None:
    code, out, _ = describe(server, "--unavailable-partitions", "--topic", "orders")
    assert code == 0
    assert out.splitlines() == [
        "\tTopic: orders\tPartition: 2\tLeader: 3\tReplicas: 3,1,2\tIsr: 3,1,2\tElr: N/A\tLastKnownElr: N/A",
        "\tTopic: orders\tPartition: 3\tLeader: none\tReplicas: 3\tIsr: 3\tElr: N/A\tLastKnownElr: N/A",
    ]


def test_only_the_unavailable_filter_reads_the_live_brokers(server: ServerThread) -> None:
    describe(server, "--under-replicated-partitions")
    assert [m for m, _ in server.controller.requests] == ["DescribeTopics"]
    server.controller.requests.clear()
    describe(server, "--unavailable-partitions", "--consistency", "stale")
    assert [m for m, _ in server.controller.requests] == ["DescribeTopics", "DescribeCluster"]
    assert server.controller.requests[1][1].consistency == controller_pb2.STALE, "both reads as asked"


def test_json_keeps_the_contract_shape_with_only_the_matching_partitions(server: ServerThread) -> None:
    code, out, _ = describe(server, "--under-min-isr-partitions", "-o", "json")
    assert code == 0
    topics = json.loads(out)["topics"]
    assert [(t["name"], [p["partition"] for p in t["partitions"]]) for t in topics] == [
        ("orders", [3]),
        ("strict", [2]),
    ]
    assert topics[1]["configs"] == {"min.insync.replicas": "2"}


def test_nothing_matching_prints_nothing_and_succeeds(server: ServerThread) -> None:
    server.controller.responses["DescribeTopics"] = controller_pb2.DescribeTopicsResponse(
        topics=[cluster_topics().topics[1]]
    )
    code, out, _ = describe(server, "--unavailable-partitions")
    assert (code, out) == (0, "")


def test_without_a_filter_describe_is_unchanged(server: ServerThread) -> None:
    code, out, _ = describe(server)
    assert code == 0
    assert out.splitlines()[0].startswith("Topic: orders\tTopicId: ")
    assert len(out.splitlines()) == 10


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--under-replicated-partitions", "--unavailable-partitions"],
            "--under-replicated-partitions can't be used with --unavailable-partitions",
        ),
        (
            ["--at-min-isr-partitions", "--under-min-isr-partitions"],
            "--under-min-isr-partitions can't be used with --at-min-isr-partitions",
        ),
    ],
)
def test_filters_are_mutually_exclusive(server: ServerThread, flags: list[str], message: str) -> None:
    code, out, err = describe(server, *flags, "-o", "json")
    assert code == 2
    assert message in err
    assert json.loads(out)["error"]["params"] == message.split(" can't be used with ")
    assert server.controller.requests == []
