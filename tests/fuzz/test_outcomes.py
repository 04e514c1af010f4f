"""The judge: which answers to a fuzzed request are defined, and which are failures."""

from __future__ import annotations

import grpc

from raftmeta.fuzz.outcomes import Reply, judge
from raftmeta.v1 import controller_pb2, errors_pb2

CREATE = controller_pb2.CreateTopicsRequest(
    topics=[controller_pb2.CreatableTopic(name="a"), controller_pb2.CreatableTopic(name="b")]
)


def _ok(response: object) -> Reply:
    return Reply(grpc.StatusCode.OK, response=response)  # type: ignore[arg-type]


def test_per_item_errors_with_messages_are_defined_answers() -> None:
    response = controller_pb2.CreateTopicsResponse(
        topics=[
            controller_pb2.CreatableTopicResult(name="a", topic_id=bytes(range(1, 17))),
            controller_pb2.CreatableTopicResult(
                name="b", error_code=errors_pb2.INVALID_TOPIC_EXCEPTION, error_message="Topic name is invalid"
            ),
        ]
    )
    verdict = judge("CreateTopics", CREATE, _ok(response))
    assert verdict.problems == []
    assert verdict.succeeded
    assert verdict.labels == ["status:OK", "code:NONE", "code:INVALID_TOPIC_EXCEPTION"]


def test_undefined_error_codes_and_missing_messages_fail() -> None:
    response = controller_pb2.CreateTopicsResponse(
        topics=[
            controller_pb2.CreatableTopicResult(name="a", error_code=9999, error_message="?"),  # type: ignore[arg-type]
            controller_pb2.CreatableTopicResult(name="b", error_code=errors_pb2.INVALID_CONFIG),
        ]
    )
    problems = judge("CreateTopics", CREATE, _ok(response)).problems
    assert problems == [
        "topics[0].error_code 9999 is not a defined error code",
        "topics[1].error_code INVALID_CONFIG without an error_message",
    ]
    unknown = controller_pb2.RegisterBrokerResponse(error_code=errors_pb2.UNKNOWN_SERVER_ERROR, error_message="boom")
    assert judge("RegisterBroker", controller_pb2.RegisterBrokerRequest(), _ok(unknown)).problems == [
        "response.error_code UNKNOWN_SERVER_ERROR is not a defined error code"
    ]


def test_one_result_per_item_in_request_order() -> None:
    short = controller_pb2.CreateTopicsResponse(
        topics=[controller_pb2.CreatableTopicResult(name="a", topic_id=b"x" * 16)]
    )
    assert judge("CreateTopics", CREATE, _ok(short)).problems == ["results for topics ['a'], asked for ['a', 'b']"]
    # A request id sent before may be answered with the earlier request's answer.
    assert judge("CreateTopics", CREATE, _ok(short), request_id_reused=True).problems == []
    elect = controller_pb2.ElectLeadersRequest(
        topic_partitions=[controller_pb2.TopicPartitions(topic="t", partitions=[0, 0])]
    )
    merged = controller_pb2.ElectLeadersResponse(
        results=[
            controller_pb2.TopicElectionResult(
                topic="t", partitions=[controller_pb2.PartitionElectionResult(partition=0)]
            )
        ]
    )
    assert judge("ElectLeaders", elect, _ok(merged)).problems == [
        "results [('t', 1)] for the partitions asked [('t', 2)]"
    ]


def test_request_level_statuses() -> None:
    request = controller_pb2.DescribeClusterRequest()
    fine = judge("DescribeCluster", request, Reply(grpc.StatusCode.INVALID_ARGUMENT, "topics[0].name: too long"))
    assert fine.problems == [] and fine.labels == ["status:INVALID_ARGUMENT"]
    moved = judge("DescribeCluster", request, Reply(grpc.StatusCode.UNAVAILABLE, "no leader", "NOT_CONTROLLER"))
    assert moved.problems == [] and moved.indeterminate
    for status in (grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL, grpc.StatusCode.DEADLINE_EXCEEDED):
        verdict = judge("DescribeCluster", request, Reply(status, "Exception calling application"))
        assert verdict.problems == [
            f"gRPC status {status.name} is not a defined answer: 'Exception calling application'"
        ]
    gone = judge("DescribeCluster", request, Reply(grpc.StatusCode.UNAVAILABLE, "Socket closed"))
    assert gone.problems and gone.indeterminate
    silent = judge("DescribeCluster", request, Reply(grpc.StatusCode.RESOURCE_EXHAUSTED, ""))
    assert silent.problems == ["gRPC status RESOURCE_EXHAUSTED without a message"]
