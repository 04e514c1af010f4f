"""The plane's client history as the linearizability checker sees it (raftmeta.sim.client_history)."""

from __future__ import annotations

from raftmeta.lincheck import LISTED
from raftmeta.sim.client_history import ClientHistory
from raftmeta.v1 import controller_pb2, errors_pb2


def topic(name: str, partitions: int) -> controller_pb2.TopicDescription:
    return controller_pb2.TopicDescription(
        name=name, partitions=[controller_pb2.PartitionDescription(partition=i) for i in range(partitions)]
    )


def creatable(name: str, partitions: int = 2) -> controller_pb2.CreatableTopic:
    return controller_pb2.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1)


def test_creates_keep_their_outcome_and_unmodelled_refusals_are_left_out() -> None:
    history = ClientHistory()
    history.create_answered("client-1", creatable("a", 3), 10, 20, errors_pb2.NONE)
    history.create_answered("client-2", creatable("a"), 15, 25, errors_pb2.TOPIC_ALREADY_EXISTS)
    history.create_answered("client-3", creatable("b"), 15, 25, errors_pb2.INVALID_REPLICATION_FACTOR)
    history.unanswered("client-4", controller_pb2.CreateTopicsRequest(topics=[creatable("c")]), 30)
    assert [(o.client, o.topic, o.result, o.arg, o.complete) for o in history.ops] == [
        (1, "a", "ok", 3, 20),
        (2, "a", "topic_already_exists", 2, 25),
        (4, "c", "unknown", 2, None),
    ]
    assert history.check().verdict == "ok"


def test_a_read_observes_every_created_name_in_its_page() -> None:
    history = ClientHistory()
    for name, at in (("t1", 0), ("t2", 5), ("t3", 5), ("t4", 50)):
        history.create_invoked(name, at)
    # Names from t2 up to t4 (exclusive); the page stopped inside t3's partitions.
    request = controller_pb2.DescribeTopicsRequest(cursor=controller_pb2.DescribeTopicsCursor(topic_name="t2"))
    response = controller_pb2.DescribeTopicsResponse(
        topics=[topic("t3", 1)],
        next_cursor=controller_pb2.DescribeTopicsCursor(topic_name="t3", partition_index=1),
    )
    history.read_answered("client-0", request, response, 10, 20)
    # t2 is in range and absent; t3 is cut (listed); t1 is before the page, t4's create came later.
    assert [(o.topic, o.observed) for o in history.ops] == [("t2", 0), ("t3", LISTED)]


def test_a_listing_sees_presence_and_a_phantom_is_refused() -> None:
    history = ClientHistory()
    request = controller_pb2.DescribeTopicsRequest(exclude_partitions=True)
    history.read_answered("client-0", request, controller_pb2.DescribeTopicsResponse(topics=[topic("x", 0)]), 1, 2)
    assert [(o.topic, o.observed) for o in history.ops] == [("x", LISTED)]
    result = history.check()
    assert result.verdict == "illegal"  # x was never created: a phantom
    assert result.failures[0].topic == "x"


def test_an_unknown_topic_answer_is_absent_and_other_errors_observe_nothing() -> None:
    history = ClientHistory()
    history.create_invoked("a", 0)
    history.create_invoked("b", 0)
    request = controller_pb2.DescribeTopicsRequest(topics=["a", "b"])
    response = controller_pb2.DescribeTopicsResponse(
        topics=[
            controller_pb2.TopicDescription(name="a", error_code=errors_pb2.UNKNOWN_TOPIC_OR_PARTITION),
            controller_pb2.TopicDescription(name="b", error_code=errors_pb2.INVALID_REQUEST),
        ]
    )
    history.read_answered("client-0", request, response, 1, 2)
    assert [(o.topic, o.observed) for o in history.ops] == [("a", 0)]


def test_contended_writes_keep_their_state_dependent_outcomes() -> None:
    history = ClientHistory()
    history.create_answered("client-0", creatable("c0", 1), 0, 5, errors_pb2.NONE)
    grow = controller_pb2.CreatePartitionsTopic(name="c0", count=3)
    history.partitions_answered(
        "client-1", grow, 10, 15, controller_pb2.CreatePartitionsTopicResult(name="c0", error_code=errors_pb2.NONE)
    )
    not_more = controller_pb2.CreatePartitionsTopicResult(
        name="c0", error_code=errors_pb2.INVALID_PARTITIONS, error_message="Topic already has 3 partition(s)."
    )
    history.partitions_answered("client-2", grow, 20, 25, not_more)
    over_limit = controller_pb2.CreatePartitionsTopicResult(
        name="c0", error_code=errors_pb2.INVALID_PARTITIONS, error_message="Number of partitions 9 exceeds the limit"
    )
    history.partitions_answered("client-2", grow, 26, 27, over_limit)  # refused whatever the state: left out
    history.delete_answered("client-0", "c0", 30, 35, errors_pb2.NONE)
    history.delete_answered("client-1", "c0", 40, 45, errors_pb2.UNKNOWN_TOPIC_OR_PARTITION)
    history.unanswered("client-3", controller_pb2.DeleteTopicsRequest(topic_names=["c0"]), 50)
    history.unanswered("client-4", controller_pb2.CreatePartitionsRequest(topics=[grow]), 50)
    # A read of the named topic observes it alone (not "t9", whose create was invoked).
    history.create_invoked("t9", 0)
    named = controller_pb2.DescribeTopicsRequest(topics=["c0"])
    absent = controller_pb2.TopicDescription(name="c0", error_code=errors_pb2.UNKNOWN_TOPIC_OR_PARTITION)
    history.read_answered("client-0", named, controller_pb2.DescribeTopicsResponse(topics=[absent]), 46, 47)
    assert [(o.kind, o.result, o.arg, o.observed) for o in history.ops] == [
        ("create", "ok", 1, None),
        ("create_partitions", "ok", 3, None),
        ("create_partitions", "invalid_partitions", 3, None),
        ("delete", "ok", 0, None),
        ("delete", "unknown_topic_or_partition", 0, None),
        ("delete", "unknown", 0, None),
        ("create_partitions", "unknown", 3, None),
        ("describe", "ok", 0, 0),
    ]
    assert history.check().verdict == "ok"
