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
    history.create_unanswered("client-4", creatable("c"), 30)
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
