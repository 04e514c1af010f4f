"""DescribeLogDirs (35): each simulated broker advertised at the node asked answers its one log
directory with its replicas, as a KRaft broker answers about its own (ReplicaManager.describeLogDirs)."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest
from kio.schema.errors import ErrorCode

from raftmeta.kafka.dispatch import handle
from raftmeta.kafka.framing import decode_request
from raftmeta.kafka.log_dirs import log_dir
from raftmeta.kafka.versions import SUPPORTED
from raftmeta.server.services import AdminCallError
from raftmeta.v1 import controller_pb2
from tests.kafka.fakes import full_admin, orders
from tests.kafka.helpers import FakeAdmin, context, decode_response, request_bytes

LOW, HIGH = SUPPORTED[35]


def ask(admin: FakeAdmin, topics: list[dict[str, Any]] | None, version: int = HIGH, node_id: int = 2) -> Any:
    request = decode_request(request_bytes(35, version, {"topics": topics}, correlation_id=5))
    correlation_id, response = decode_response(asyncio.run(handle(context(admin, node_id), request)), 35, version)
    assert correlation_id == 5
    return response


def replicas(result: Any) -> dict[str, list[int]]:
    return {t.name: [p.partition_index for p in t.partitions] for t in result.topics}


def test_every_replica_of_the_broker_at_the_node_when_no_topic_is_named() -> None:
    # fakes.fleet: brokers 0..5, 4 fenced; node 2 (the 2nd of 3) advertises broker 1 (4 is not
    # listed). orders' replicas: p0 [0, 1], p1 [1, 2], p2 [2, 3].
    admin = full_admin()
    response = ask(admin, None)
    assert response.error_code == ErrorCode.none
    [result] = response.results
    assert (result.error_code, result.log_dir) == (ErrorCode.none, log_dir(1))
    assert replicas(result) == {"orders": [0, 1]}
    # They hold no data; the directory has no file system behind it.
    assert all((p.partition_size, p.offset_lag, p.is_future_key) == (0, 0, False) for p in result.topics[0].partitions)
    assert (result.total_bytes, result.usable_bytes, result.is_cordoned) == (-1, -1, False)
    # Read from the node's own image, as a broker answers from the logs it has.
    assert admin.methods() == ["DescribeCluster", "DescribeTopics"]
    assert admin.sent(1).consistency == controller_pb2.STALE and list(admin.sent(1).topics) == []


def test_only_the_partitions_asked_and_no_topic_left_without_one() -> None:
    admin = full_admin()
    [result] = ask(admin, [{"topic": "orders", "partitions": [1, 2]}]).results
    assert replicas(result) == {"orders": [1]}
    assert list(admin.sent(1).topics) == ["orders"]
    # Partition 2 is not on broker 1: the topic is not listed, as Kafka drops a topic with none.
    [result] = ask(full_admin(), [{"topic": "orders", "partitions": [2]}]).results
    assert replicas(result) == {}
    [result] = ask(full_admin(), [{"topic": "missing", "partitions": [0]}]).results
    assert (result.error_code, replicas(result)) == (ErrorCode.none, {})


def test_an_empty_topic_list_lists_the_directory_and_reads_no_topic() -> None:
    admin = full_admin()
    [result] = ask(admin, []).results
    assert (result.log_dir, replicas(result)) == (log_dir(1), {})
    assert admin.methods() == ["DescribeCluster"]


def test_a_node_advertising_several_brokers_lists_each_ones_directory() -> None:
    # Node 1 (the 1st of 3) advertises brokers 0 and 3.
    response = ask(full_admin(), None, node_id=1)
    assert [(r.log_dir, replicas(r)) for r in response.results] == [
        (log_dir(0), {"orders": [0]}),
        (log_dir(3), {"orders": [2]}),
    ]


def test_without_an_alive_broker_the_node_answers_as_the_broker_it_is_listed_as() -> None:
    # No fleet: Metadata lists the nodes as brokers (id = node id), so node 2 is broker 2.
    admin = full_admin()
    admin.answers["DescribeCluster"] = lambda r: controller_pb2.DescribeClusterResponse(cluster_id="c")
    [result] = ask(admin, None).results
    assert (result.log_dir, replicas(result)) == (log_dir(2), {"orders": [1, 2]})


def test_a_topic_paged_by_the_controller_is_joined() -> None:
    admin = full_admin()
    whole = orders(5)

    def page(request: controller_pb2.DescribeTopicsRequest) -> controller_pb2.DescribeTopicsResponse:
        start = request.cursor.partition_index
        topic = controller_pb2.TopicDescription(name=whole.name, topic_id=whole.topic_id)
        topic.partitions.extend(whole.partitions[start : start + 2])
        answer = controller_pb2.DescribeTopicsResponse(topics=[topic])
        if start + 2 < len(whole.partitions):
            answer.next_cursor.topic_name, answer.next_cursor.partition_index = whole.name, start + 2
        return answer

    admin.answers["DescribeTopics"] = page
    [result] = ask(admin, None).results
    # orders(5): p0 [0, 1], p1 [1, 2], p2 [2, 3], ...: broker 1 holds p0 and p1, from two pages.
    assert replicas(result) == {"orders": [0, 1]}
    assert admin.methods() == ["DescribeCluster"] + ["DescribeTopics"] * 3


@pytest.mark.parametrize("version", range(LOW, HIGH + 1))
def test_a_refused_read_is_an_error_never_an_empty_directory(version: int) -> None:
    admin = full_admin()
    admin.answers["DescribeTopics"] = lambda r: AdminCallError(grpc.StatusCode.RESOURCE_EXHAUSTED, "over", ())
    response = ask(admin, None, version)
    if version >= 3:
        assert response.error_code == ErrorCode.policy_violation and response.results == ()
    else:
        [result] = response.results
        assert (result.error_code, result.log_dir, result.topics) == (ErrorCode.policy_violation, log_dir(1), ())
