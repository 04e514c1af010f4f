"""Concurrent clients creating topics, adding partitions and deleting topics, each operation
recorded in the history with an honest outcome.

Outcomes: a per-topic answer ``NONE`` is ``ok``; any definite per-topic error (TOPIC_ALREADY_EXISTS,
INVALID_*, UNKNOWN_TOPIC_OR_PARTITION, ...) or a request-level INVALID_ARGUMENT is ``fail``;
everything else (the client's deadline ran out, OutcomeUnknownError, UNAVAILABLE after retries,
any other status) is ``unknown``: the request may or may not have been applied, never counted
as either. Request ids are chosen here, so an unknown op still names the request it sent.

The mix (per op): 12% reads (below), 33% CreateTopics (names from a small pool so some collide; 1-6 partitions,
replication factor 1-3, a random placer, 10% manual assignments, 10% invalid on purpose), 15%
AlterPartitionReassignments of one partition of a topic this run created (a third of them cancel
one of the moves started last, a sixth give one of those a new target; the others move a random
partition to a random set of registered brokers of the topic's replication factor, 10% of them
invalid on purpose), 17%
CreatePartitions of a topic this run created, 23% DeleteTopics of an ephemeral ("e") one, which
may catch a move in flight. Kept ("k") topics are never deleted, so their creates stay checkable
however much of the log snapshots have compacted away.

One partition per reassignment request, so an op has one outcome: the per-partition answer.

Reads: 12% of the ops (taken from the creates' share) describe one kept topic, linearizable (the
default): the answer is ``ok`` with the topic's id, or ``ok`` with no id when it does not exist.
The checker holds them to invariant 9 (a read sees every create acknowledged before it was
invoked, and never a topic no create could have made).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

import grpc

from raftmeta.api.ids import uuid_to_str
from raftmeta.chaos.events import wall_ms
from raftmeta.chaos.history import CANCEL_REASSIGNMENT, REASSIGN, HistoryWriter, Op, Outcome
from raftmeta.client import ClientError, ControllerClient, OutcomeUnknownError, RetryPolicy
from raftmeta.v1 import controller_pb2, errors_pb2

R = TypeVar("R")
PLACERS = ("", "striped", "legacy", "balanced")
# Name pools, small enough for collisions (TOPIC_ALREADY_EXISTS) to happen. "k" topics are kept:
# never deleted, so their acknowledged creates stay checkable after snapshots compact the log;
# "e" topics are ephemeral: the only ones deleted.
KEPT_PREFIX = "k"
EPHEMERAL_PREFIX = "e"
TOPIC_NAMES = 150
# Cancels pick among the moves started last, so most still find their move in flight (a move
# completes a catch-up delay plus a heartbeat or two after it starts).
RECENT_MOVES = 4
Request = (
    controller_pb2.CreateTopicsRequest
    | controller_pb2.CreatePartitionsRequest
    | controller_pb2.DeleteTopicsRequest
    | controller_pb2.AlterPartitionReassignmentsRequest
    | controller_pb2.DescribeTopicsRequest
)


@dataclass(frozen=True)
class WorkloadConfig:
    clients: int = 8
    brokers: int = 6
    # The brokers' ids are first_broker_id .. first_broker_id + brokers - 1: 0 for the simulated
    # fleet, 100 for real Kafka brokers (raftmeta.local.quorum.KAFKA_BROKER_FIRST_ID).
    first_broker_id: int = 0
    think_ms_max: int = 400  # each client waits uniform(0, this) between its ops
    op_deadline_s: float = 4.0  # the client's overall deadline per op (retries included)
    attempt_timeout_s: float = 1.5


@dataclass
class SharedView:
    """What the clients believe exists (names of topics they created, with partition counts).
    Only guides the choice of targets: the checks never trust it."""

    partitions: dict[str, int] = field(default_factory=dict)
    replication: dict[str, int] = field(default_factory=dict)  # name -> replication factor
    moves: list[tuple[str, int]] = field(default_factory=list)  # (topic, partition) of ok moves, oldest first
    next_op_id: int = 0

    def new_op_id(self) -> int:
        self.next_op_id += 1
        return self.next_op_id


class Workload:
    def __init__(self, bootstrap: list[str], config: WorkloadConfig, seed: int, history: HistoryWriter) -> None:
        self.bootstrap = bootstrap
        self.config = config
        self.seed = seed
        self.history = history
        self.view = SharedView()

    async def run(self, stop: asyncio.Event) -> None:
        await asyncio.gather(*(self._client(worker, stop) for worker in range(self.config.clients)))

    async def _client(self, worker: int, stop: asyncio.Event) -> None:
        rng = random.Random(self.seed * 1009 + worker)
        # Each client starts at a different node so load (and exposure to faults) is spread.
        targets = self.bootstrap[worker % len(self.bootstrap) :] + self.bootstrap[: worker % len(self.bootstrap)]
        retry = RetryPolicy(deadline_s=self.config.op_deadline_s, attempt_timeout_s=self.config.attempt_timeout_s)
        async with ControllerClient(targets, retry=retry, rng=random.Random(rng.random())) as client:
            while not stop.is_set():
                roll = rng.random()
                ephemeral = sorted(n for n in self.view.partitions if n.startswith(EPHEMERAL_PREFIX))
                if roll < 0.12:
                    await self._read(client, worker, rng)
                elif roll < 0.45 or not self.view.partitions:
                    await self._create(client, worker, rng)
                elif roll < 0.60:
                    await self._reassign(client, worker, rng)
                elif roll < 0.77 or not ephemeral:
                    await self._add_partitions(client, worker, rng, rng.choice(sorted(self.view.partitions)))
                else:
                    await self._delete(client, worker, rng.choice(ephemeral))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), rng.uniform(0, self.config.think_ms_max) / 1000)

    # -- operations ------------------------------------------------------------------------------
    @property
    def _broker_ids(self) -> range:
        first = self.config.first_broker_id
        return range(first, first + self.config.brokers)

    def _topic(self, rng: random.Random) -> controller_pb2.CreatableTopic:
        brokers = self.config.brokers
        first = self.config.first_broker_id
        name = f"{rng.choice((KEPT_PREFIX, EPHEMERAL_PREFIX))}{rng.randrange(TOPIC_NAMES)}"
        partitions = rng.randint(1, 6)
        rf = rng.randint(1, min(3, brokers))
        roll = rng.random()
        if roll < 0.10:  # invalid on purpose: each must be answered with a definite error
            return rng.choice(
                [
                    controller_pb2.CreatableTopic(name=f"bad/{name}", num_partitions=1, replication_factor=1),
                    controller_pb2.CreatableTopic(name=name, num_partitions=0, replication_factor=1),
                    controller_pb2.CreatableTopic(name=name, num_partitions=1, replication_factor=brokers + 1),
                    controller_pb2.CreatableTopic(
                        name=name, num_partitions=1, replication_factor=1, configs={"cleanup.policy": "bogus"}
                    ),
                    controller_pb2.CreatableTopic(
                        name=name,
                        assignments=[controller_pb2.ReplicaAssignment(partition_index=0, broker_ids=[first, first])],
                    ),
                ]
            )
        if roll < 0.20:  # manual assignment: distinct brokers per partition, same count everywhere
            assignments = [
                controller_pb2.ReplicaAssignment(partition_index=p, broker_ids=rng.sample(self._broker_ids, rf))
                for p in range(partitions)
            ]
            return controller_pb2.CreatableTopic(name=name, assignments=assignments)
        return controller_pb2.CreatableTopic(
            name=name, num_partitions=partitions, replication_factor=rf, placer=rng.choice(PLACERS)
        )

    async def _create(self, client: ControllerClient, worker: int, rng: random.Random) -> None:
        topic = self._topic(rng)
        request = controller_pb2.CreateTopicsRequest(topics=[topic], request_id=str(uuid.uuid4()))

        def judge(response: controller_pb2.CreateTopicsResponse) -> tuple[Outcome, str, str]:
            result = response.topics[0]
            if result.error_code == errors_pb2.NONE:
                self.view.partitions[topic.name] = result.num_partitions or max(1, len(topic.assignments))
                self.view.replication[topic.name] = result.replication_factor or len(topic.assignments[0].broker_ids)
                return "ok", uuid_to_str(result.topic_id), ""
            return "fail", "", _error(result.error_code, result.error_message)

        count = topic.num_partitions or len(topic.assignments)
        await self._call(
            worker, "create_topic", topic.name, request, lambda: client.create_topics(request), judge, count=count
        )

    async def _read(self, client: ControllerClient, worker: int, rng: random.Random) -> None:
        """Describe one kept topic (never deleted, so what a read may see only grows)."""
        name = f"{KEPT_PREFIX}{rng.randrange(TOPIC_NAMES)}"
        request = controller_pb2.DescribeTopicsRequest(topics=[name])

        def judge(response: controller_pb2.DescribeTopicsResponse) -> tuple[Outcome, str, str]:
            result = response.topics[0]
            if result.error_code == errors_pb2.NONE:
                return "ok", uuid_to_str(result.topic_id), ""
            if result.error_code == errors_pb2.UNKNOWN_TOPIC_OR_PARTITION:
                return "ok", "", ""  # answered: the topic does not exist (as of the read's point)
            return "fail", "", _error(result.error_code, result.error_message)

        await self._call(worker, "read_topic", name, request, lambda: client.describe_topics([name]), judge)

    async def _add_partitions(self, client: ControllerClient, worker: int, rng: random.Random, name: str) -> None:
        count = self.view.partitions[name] + rng.randint(1, 3)
        request = controller_pb2.CreatePartitionsRequest(
            topics=[controller_pb2.CreatePartitionsTopic(name=name, count=count)], request_id=str(uuid.uuid4())
        )

        def judge(response: controller_pb2.CreatePartitionsResponse) -> tuple[Outcome, str, str]:
            result = response.results[0]
            if result.error_code == errors_pb2.NONE:
                self.view.partitions[name] = max(count, self.view.partitions.get(name, 0))
                return "ok", "", ""
            return "fail", "", _error(result.error_code, result.error_message)

        await self._call(
            worker, "create_partitions", name, request, lambda: client.create_partitions(request), judge, count=count
        )

    async def _delete(self, client: ControllerClient, worker: int, name: str) -> None:
        request = controller_pb2.DeleteTopicsRequest(topic_names=[name], request_id=str(uuid.uuid4()))

        def judge(response: controller_pb2.DeleteTopicsResponse) -> tuple[Outcome, str, str]:
            result = response.responses[0]
            self.view.partitions.pop(name, None)
            if result.error_code == errors_pb2.NONE:
                return "ok", uuid_to_str(result.topic_id), ""
            return "fail", "", _error(result.error_code, result.error_message)

        await self._call(worker, "delete_topic", name, request, lambda: client.delete_topics(request), judge)

    async def _reassign(self, client: ControllerClient, worker: int, rng: random.Random) -> None:
        """Move one partition, or cancel or re-target one of the moves started last."""
        recent = self.view.moves[-RECENT_MOVES:]
        roll = rng.random()
        if recent and roll < 1 / 3:
            name, pid = rng.choice(recent)
            target = controller_pb2.ReassignablePartition(partition_index=pid, cancel=True)
        elif recent and roll < 1 / 2:  # a new target for a move that may still run (KIP-455 replaces it)
            name, pid = rng.choice(recent)
            replicas = rng.sample(self._broker_ids, self.view.replication.get(name, 1))
            target = controller_pb2.ReassignablePartition(partition_index=pid, replicas=replicas)
        else:
            name = rng.choice(sorted(self.view.partitions))
            target = self._target(rng, name)
        request = controller_pb2.AlterPartitionReassignmentsRequest(
            topics=[controller_pb2.ReassignableTopic(name=name, partitions=[target])], request_id=str(uuid.uuid4())
        )
        pid = target.partition_index

        def judge(response: controller_pb2.AlterPartitionReassignmentsResponse) -> tuple[Outcome, str, str]:
            result = response.results[0].partitions[0]
            if result.error_code != errors_pb2.NONE:
                return "fail", "", _error(result.error_code, result.error_message)
            if not target.cancel:
                self.view.moves.append((name, pid))
                del self.view.moves[: -RECENT_MOVES * 4]  # only the last few are ever chosen
            return "ok", "", ""

        await self._call(
            worker,
            CANCEL_REASSIGNMENT if target.cancel else REASSIGN,
            name,
            request,
            lambda: client.alter_partition_reassignments(request),
            judge,
            partition=pid,
            replicas=tuple(target.replicas),
        )

    def _target(self, rng: random.Random, name: str) -> controller_pb2.ReassignablePartition:
        """A random target of the topic's replication factor, or (10%) one that must be refused."""
        brokers = self.config.brokers
        ids = self._broker_ids
        count = self.view.partitions[name]
        rf = self.view.replication.get(name, 1)
        pid = rng.randrange(count)
        if rng.random() < 0.10:  # invalid on purpose: each must be answered with a definite error
            wrong_rf = rf + 1 if rf < brokers else rf - 1
            return rng.choice(
                [
                    controller_pb2.ReassignablePartition(partition_index=pid, replicas=[ids[0]] * max(2, rf)),
                    controller_pb2.ReassignablePartition(
                        partition_index=pid, replicas=[*rng.sample(ids, rf - 1), ids[-1] + 7]
                    ),
                    controller_pb2.ReassignablePartition(partition_index=pid, replicas=rng.sample(ids, wrong_rf)),
                    controller_pb2.ReassignablePartition(partition_index=count + 5, replicas=list(ids[:rf])),
                    controller_pb2.ReassignablePartition(partition_index=pid, replicas=[ids[0]], cancel=True),
                ]
            )
        return controller_pb2.ReassignablePartition(partition_index=pid, replicas=rng.sample(ids, rf))

    async def _call(
        self,
        worker: int,
        kind: str,
        topic: str,
        request: Request,
        send: Callable[[], Awaitable[R]],
        judge: Callable[[R], tuple[Outcome, str, str]],
        *,
        partition: int = -1,
        replicas: tuple[int, ...] = (),
        count: int = 0,
    ) -> None:
        op_id = self.view.new_op_id()
        invoke_ms = wall_ms()
        outcome: Outcome
        try:
            response = await send()
            outcome, topic_id, error = judge(response)
        except OutcomeUnknownError as exc:
            outcome, topic_id, error = "unknown", "", str(exc)
        except ClientError as exc:
            # INVALID_ARGUMENT is the controller refusing the request as a whole: nothing applied.
            definite = exc.code == grpc.StatusCode.INVALID_ARGUMENT
            outcome, topic_id, error = ("fail" if definite else "unknown"), "", str(exc)
        self.history.record(
            Op(
                op_id,
                getattr(request, "request_id", ""),  # reads carry none
                kind,
                topic,
                topic_id,
                invoke_ms,
                wall_ms(),
                outcome,
                error,
                worker,
                partition,
                replicas,
                count,
            )
        )


def _error(code: errors_pb2.ErrorCode.ValueType, message: str) -> str:
    return f"{errors_pb2.ErrorCode.Name(code)}: {message}"
