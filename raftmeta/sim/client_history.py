"""The plane's client operations as a history the linearizability checker reads
(:mod:`raftmeta.lincheck`): invocation and completion in simulated milliseconds, outcomes, and
what each read observed of every topic name in its range.

A create answered with an error other than TOPIC_ALREADY_EXISTS (a replication factor the live
brokers cannot meet, say) took no effect and is left out: the model has no such outcome, and a
topic that a read shows anyway has then no create to explain it -- a phantom the checker reports.
A read (DescribeTopics) becomes one describe per name in its page: the topics it returned, with
their partition counts (or *listed*, when the answer left the partitions out or stopped inside
them), and absent for every other name a create had been invoked for before the read completed.
A read of named topics observes only those. Deletes and partition additions keep their outcomes
(INVALID_PARTITIONS only when the count is not an increase: the other causes do not depend on the
state). A write never answered by the end of the run is open-ended (it may have taken effect or
not).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from google.protobuf.message import Message

from raftmeta.controller.topics import is_not_an_increase
from raftmeta.lincheck import LISTED, CheckResult, Operation, TopicFailure, check_history
from raftmeta.v1 import controller_pb2, errors_pb2

CREATE_RESULTS: dict[int, str] = {errors_pb2.NONE: "ok", errors_pb2.TOPIC_ALREADY_EXISTS: "topic_already_exists"}
DELETE_RESULTS: dict[int, str] = {
    errors_pb2.NONE: "ok",
    errors_pb2.UNKNOWN_TOPIC_OR_PARTITION: "unknown_topic_or_partition",
}
GROW_RESULTS: dict[int, str] = {
    errors_pb2.NONE: "ok",
    errors_pb2.UNKNOWN_TOPIC_OR_PARTITION: "unknown_topic_or_partition",
    errors_pb2.INVALID_PARTITIONS: "invalid_partitions",
}


def client_number(owner: str) -> int:
    """``client-3`` -> 3."""
    return int(owner.partition("-")[2])


@dataclass(slots=True)
class ClientHistory:
    ops: list[Operation] = field(default_factory=list)
    created: dict[str, int] = field(default_factory=dict)  # name -> when a create of it was first invoked

    def _add(self, **fields: object) -> None:
        self.ops.append(Operation(op_id=len(self.ops), **fields))  # type: ignore[arg-type]

    def create_invoked(self, name: str, now_ms: int) -> None:
        self.created.setdefault(name, now_ms)

    def create_answered(
        self, owner: str, request: controller_pb2.CreatableTopic, invoked_ms: int, now_ms: int, error_code: int
    ) -> None:
        result = CREATE_RESULTS.get(error_code)
        if result is None:
            return  # refused for a reason the model does not know: no effect (see the module doc)
        self._add(
            client=client_number(owner),
            topic=request.name,
            kind="create",
            invoke=invoked_ms,
            complete=now_ms,
            result=result,
            arg=request.num_partitions,
        )

    def delete_answered(self, owner: str, name: str, invoked_ms: int, now_ms: int, error_code: int) -> None:
        result = DELETE_RESULTS.get(error_code)
        if result is not None:
            client = client_number(owner)
            self._add(client=client, topic=name, kind="delete", invoke=invoked_ms, complete=now_ms, result=result)

    def partitions_answered(
        self,
        owner: str,
        request: controller_pb2.CreatePartitionsTopic,
        invoked_ms: int,
        now_ms: int,
        answer: controller_pb2.CreatePartitionsTopicResult,
    ) -> None:
        result = GROW_RESULTS.get(answer.error_code)
        if result == "invalid_partitions" and not is_not_an_increase(answer.error_message):
            result = None  # over the limit, or a placement that failed: refused whatever the state
        if result is not None:
            self._add(
                client=client_number(owner),
                topic=request.name,
                kind="create_partitions",
                invoke=invoked_ms,
                complete=now_ms,
                result=result,
                arg=request.count,
            )

    def unanswered(self, owner: str, request: Message, invoked_ms: int) -> None:
        """A write still waiting for its answer at the end: it may take effect or not."""
        client = client_number(owner)
        common = {"client": client, "invoke": invoked_ms, "complete": None, "result": "unknown"}
        if isinstance(request, controller_pb2.CreateTopicsRequest):
            [topic] = request.topics
            self._add(topic=topic.name, kind="create", arg=topic.num_partitions, **common)
        elif isinstance(request, controller_pb2.DeleteTopicsRequest):
            [name] = request.topic_names
            self._add(topic=name, kind="delete", **common)
        elif isinstance(request, controller_pb2.CreatePartitionsRequest):
            [grow] = request.topics
            self._add(topic=grow.name, kind="create_partitions", arg=grow.count, **common)

    def read_answered(
        self,
        owner: str,
        request: controller_pb2.DescribeTopicsRequest,
        response: controller_pb2.DescribeTopicsResponse,
        invoked_ms: int,
        now_ms: int,
    ) -> None:
        low = request.cursor.topic_name
        high = response.next_cursor.topic_name if response.HasField("next_cursor") else None
        # The topics the page started or stopped inside are shown with only some of their partitions.
        cut = {high} if high is not None and response.next_cursor.partition_index > 0 else set()
        if request.cursor.partition_index > 0:
            cut.add(low)
        observed: dict[str, int] = {}
        unseen: set[str] = set()  # answered with an error that says nothing of existence
        for topic in response.topics:
            if topic.error_code == errors_pb2.UNKNOWN_TOPIC_OR_PARTITION:
                observed[topic.name] = 0
            elif topic.error_code != errors_pb2.NONE:
                unseen.add(topic.name)
            else:
                partial = request.exclude_partitions or topic.name in cut
                observed[topic.name] = LISTED if partial else len(topic.partitions)
        # A read of named topics observes those; a listing, every name a create was invoked for.
        names = dict.fromkeys(request.topics, 0) if request.topics else self.created
        for name, invoked in names.items():
            if invoked <= now_ms and low <= name and (high is None or name < high) and name not in unseen:
                observed.setdefault(name, 0)
        client = client_number(owner)
        for name in sorted(observed):
            self._add(
                client=client,
                topic=name,
                kind="describe",
                invoke=invoked_ms,
                complete=now_ms,
                result="ok",
                observed=observed[name],
            )

    def check(self) -> CheckResult:
        return check_history(self.ops)


@dataclass(frozen=True, slots=True)
class HistoryFailure:
    """A history the checker refused, with what its timeline needs."""

    ops: list[Operation]
    failure: TopicFailure
    summary: str
