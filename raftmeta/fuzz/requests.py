"""Fuzzed ControllerService requests: valid ones built from what the cluster holds, mutations of
those, and arbitrary messages of the request type.

Valid requests matter as much as garbage: a handler checks the request shape first, so garbage
alone only ever meets the first few checks. A valid request (an existing topic, a registered
broker with its real epoch, a replica list of the topic's replication factor) reaches placement,
elections, reassignment and replay; a mutation of one changes a field or two and so probes each
later check in turn. The mix per example is drawn, so shrinking moves towards valid requests.

Generated sizes are bounded (:data:`COUNT_MAX` partitions per topic, short lists) so that one
example stays cheap and a long run does not grow the metadata without end; the values past the
controller's limits (10 001, 2**31-1) are still drawn, since refusing them is a check too.
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from hypothesis import strategies as st

from raftmeta.api.catalogue import RPCS
from raftmeta.controller.configs import TOPIC_CONFIGS
from raftmeta.fuzz.protobuf import (
    DEFAULT_BOUNDS,
    INT32_MAX,
    INT32_MIN,
    Bounds,
    Override,
    ProtoStrategies,
    text_values,
)
from raftmeta.v1 import controller_pb2

# Every ControllerService method: name -> (request class, response class), from the catalogue.
METHODS: dict[str, tuple[type[Message], type[Message]]] = {
    name: (row.request_type, row.response_type) for name, row in RPCS.items()
}
# Largest partition count a generated request asks for: a run creates many topics, and the
# controller's own bound (10 000 per topic and per request) would let one example cost seconds.
COUNT_MAX = 12
COUNT_EDGES = (-(2**31), -2, -1, 0, 1, 2, 3, 10_001, 100_000, 2**31 - 1)
PLACERS = ("striped", "legacy", "balanced")
CONFIG_VALUES = (
    "0",
    "-1",
    "-2",
    "1",
    "1048576",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775809",
    "2147483648",
    " 100 ",
    "+5",
    "0x10",
    "1e3",
    "delete",
    "compact",
    "delete,compact",
    "compact,compact",
    ",",
    "true",
    "FALSE",
    "yes",
    "zstd",
    "",
    "9" * 5000,
    "0" * 5000 + "1",
)
NAME_ALPHABET = string.ascii_lowercase + string.digits + "._-"
# Values each topic config accepts (the valid requests use them; mutations break them).
VALID_CONFIGS: dict[str, tuple[str, ...]] = {
    "cleanup.policy": ("delete", "compact", "delete,compact"),
    "compression.type": ("zstd", "producer", "gzip"),
    "delete.retention.ms": ("0", "86400000"),
    "max.message.bytes": ("0", "1048588"),
    "min.insync.replicas": ("1", "2"),
    "retention.bytes": ("-1", "1073741824"),
    "retention.ms": ("-1", "0", "604800000"),
    "segment.bytes": ("1048576", "1073741824"),
    "segment.ms": ("1", "604800000"),
    "unclean.leader.election.enable": ("true", "false", "TRUE"),
}


@dataclass(frozen=True, slots=True)
class TopicView:
    name: str
    topic_id: bytes
    # Replicas of each partition, preferred leader first.
    partitions: tuple[tuple[int, ...], ...]
    # The leader (-1: none) and the ISR of each partition.
    leaders: tuple[int, ...] = ()
    isrs: tuple[tuple[int, ...], ...] = ()
    # (leader epoch, partition epoch) of each partition.
    epochs: tuple[tuple[int, int], ...] = ()

    def electable(self, pid: int) -> bool:
        """A preferred-leader election would move the leader: the preferred replica is in sync
        but does not lead (after a reassignment reordered the replicas, say)."""
        preferred = self.partitions[pid][0]
        return self.leaders[pid] != preferred and preferred in self.isrs[pid]


@dataclass(frozen=True, slots=True)
class BrokerView:
    broker_id: int
    epoch: int
    fenced: bool
    pool: str | None


@dataclass(frozen=True, slots=True)
class ClusterView:
    """What valid requests are built from: the cluster as last described, and request ids sent."""

    topics: tuple[TopicView, ...] = ()
    brokers: tuple[BrokerView, ...] = ()
    pools: tuple[str, ...] = ()
    request_ids: tuple[str, ...] = ()
    # (topic id, partition, broker) of every replica being added by a reassignment.
    adding: tuple[tuple[bytes, int, int], ...] = field(default=())

    @classmethod
    def from_responses(
        cls,
        topics: controller_pb2.DescribeTopicsResponse,
        cluster: controller_pb2.DescribeClusterResponse,
        request_ids: Sequence[str] = (),
    ) -> ClusterView:
        views: list[TopicView] = []
        adding: list[tuple[bytes, int, int]] = []
        for topic in topics.topics:
            if topic.error_code or not topic.partitions:
                continue
            views.append(
                TopicView(
                    topic.name,
                    topic.topic_id,
                    tuple(tuple(p.replicas) for p in topic.partitions),
                    tuple(p.leader for p in topic.partitions),
                    tuple(tuple(p.isr) for p in topic.partitions),
                    tuple((p.leader_epoch, p.partition_epoch) for p in topic.partitions),
                )
            )
            for p in topic.partitions:
                adding.extend((topic.topic_id, p.partition, b) for b in p.adding_replicas)
        brokers = tuple(
            BrokerView(b.broker_id, b.broker_epoch, b.fenced, b.pool if b.HasField("pool") else None)
            for b in cluster.brokers
        )
        pools = tuple(sorted({b.pool for b in brokers if b.pool is not None}))
        return cls(tuple(views), brokers, pools, tuple(request_ids), tuple(adding))


# ---- overrides: semantic strategies for fields whose generic values would be too costly or too blind
def _request_ids(view: ClusterView) -> st.SearchStrategy[str]:
    """Mostly fresh ids; sometimes an edge case or an id sent before (a retry of the same method
    gets the original answer, another method is refused) -- not often, since a retry writes nothing."""
    fresh = st.uuids().map(str)
    edges = st.sampled_from(("", "x" * 64, "x" * 65, "é" * 64, "id with spaces", "\U0001f642"))
    choices = [fresh] * 6 + [edges]
    if view.request_ids:
        choices.append(st.sampled_from(view.request_ids))
    return st.sampled_from(choices).flatmap(lambda chosen: chosen)


def counts() -> st.SearchStrategy[int]:
    """Partition counts and replication factors: small valid ones, and the edges past every limit."""
    return st.one_of(st.integers(1, COUNT_MAX), st.sampled_from(COUNT_EDGES))


def _topic_names(view: ClusterView, bounds: Bounds) -> st.SearchStrategy[str]:
    fresh = st.text(NAME_ALPHABET, min_size=1, max_size=12).map(lambda s: "fz-" + s)
    choices: list[st.SearchStrategy[str]] = [fresh, fresh, text_values(bounds)]
    if view.topics:
        existing = st.sampled_from([t.name for t in view.topics])
        choices += [existing, existing.map(lambda n: n.replace(".", "_") if "." in n else n.replace("_", "."))]
    return st.one_of(choices)


def _broker_ids(view: ClusterView) -> st.SearchStrategy[int]:
    ids = [b.broker_id for b in view.brokers]
    choices: list[st.SearchStrategy[int]] = [st.integers(-2, 120), st.sampled_from((INT32_MAX, INT32_MIN, 10_000))]
    if ids:
        choices = [st.sampled_from(ids), st.sampled_from(ids), *choices]
    return st.one_of(choices)


def _config_keys() -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(sorted(TOPIC_CONFIGS)), text_values())


def _config_values() -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(CONFIG_VALUES), st.integers().map(str), text_values())


def make_override(view: ClusterView, bounds: Bounds = DEFAULT_BOUNDS) -> Override:
    """The field-name overrides of the generic message strategy, for this cluster view."""
    pools = st.one_of(st.sampled_from(view.pools), text_values(bounds)) if view.pools else text_values(bounds)
    by_name: dict[str, st.SearchStrategy[object]] = {
        "request_id": _request_ids(view),
        "num_partitions": counts(),
        "replication_factor": counts(),
        "count": counts(),
        "placer": st.one_of(st.sampled_from(PLACERS), text_values(bounds)),
        "broker_pool": pools,
        "pool": pools,
        "broker_id": _broker_ids(view),
        "broker_ids": _broker_ids(view),
        "replicas": _broker_ids(view),
    }
    topic_names = _topic_names(view, bounds)
    for name in ("topic", "topics", "topic_names"):
        by_name[name] = topic_names

    def override(field: Any) -> st.SearchStrategy[object] | None:  # a FieldDescriptor (upb's class)
        full = field.full_name
        if full.endswith("ConfigsEntry.key"):
            return _config_keys()
        if full.endswith("ConfigsEntry.value"):
            return _config_values()
        if field.name == "name" and field.containing_type.name in (
            "CreatableTopic",
            "CreatePartitionsTopic",
            "ReassignableTopic",
        ):
            return topic_names
        if field.name in ("topics", "topic") and field.type != FieldDescriptor.TYPE_STRING:
            return None  # repeated messages named "topics": the generic walk builds them
        return by_name.get(field.name)

    return override


# ---- valid requests ---------------------------------------------------------------------------
def _valid_create_topics(view: ClusterView) -> st.SearchStrategy[Message]:
    request_ids = _request_ids(view)
    live = [b for b in view.brokers if not b.fenced]
    rf_max = max(1, min(3, len(live)))

    @st.composite
    def build(draw: st.DrawFn) -> Message:
        topics = []
        for _ in range(draw(st.integers(1, 3))):
            topic = controller_pb2.CreatableTopic(name="fz-" + draw(st.text(NAME_ALPHABET, min_size=1, max_size=16)))
            if draw(st.booleans()) and len(live) >= 1:
                width = draw(st.integers(1, rf_max))
                ids = [b.broker_id for b in live]
                for pid in range(draw(st.integers(1, 4))):
                    chosen = draw(st.permutations(ids))[:width]
                    topic.assignments.add(partition_index=pid, broker_ids=chosen)
            else:
                topic.num_partitions = draw(st.integers(1, COUNT_MAX))
                topic.replication_factor = draw(st.integers(1, rf_max))
                topic.placer = draw(st.sampled_from(("", *PLACERS)))
                if draw(st.booleans()) and view.pools:
                    topic.broker_pool = draw(st.sampled_from(view.pools))
                    topic.replication_factor = 1
            for key in draw(st.lists(st.sampled_from(sorted(VALID_CONFIGS)), max_size=2, unique=True)):
                topic.configs[key] = draw(st.sampled_from(VALID_CONFIGS[key]))
            topics.append(topic)
        return controller_pb2.CreateTopicsRequest(
            topics=topics, validate_only=draw(st.integers(0, 3)) == 0, request_id=draw(request_ids)
        )

    return build()


def _some_topics(view: ClusterView, draw: st.DrawFn, most: int = 3) -> list[TopicView]:
    if not view.topics:
        return []
    return draw(st.lists(st.sampled_from(view.topics), min_size=1, max_size=most, unique_by=lambda t: t.name))


def _valid_create_partitions(view: ClusterView) -> st.SearchStrategy[Message]:
    request_ids = _request_ids(view)

    @st.composite
    def build(draw: st.DrawFn) -> Message:
        request = controller_pb2.CreatePartitionsRequest(
            validate_only=draw(st.integers(0, 3)) == 0, request_id=draw(request_ids)
        )
        for topic in _some_topics(view, draw):
            current = len(topic.partitions)
            count = min(COUNT_MAX * 2, current + draw(st.integers(1, 3)))
            grow = request.topics.add(name=topic.name, count=max(count, current + 1))
            grow.placer = draw(st.sampled_from(("", *PLACERS)))
        return request

    return build()


def _valid_delete_topics(view: ClusterView) -> st.SearchStrategy[Message]:
    request_ids = _request_ids(view)

    @st.composite
    def build(draw: st.DrawFn) -> Message:
        request = controller_pb2.DeleteTopicsRequest(request_id=draw(request_ids))
        for topic in _some_topics(view, draw, most=2):
            if draw(st.booleans()):
                request.topic_names.append(topic.name)
            else:
                request.topic_ids.append(topic.topic_id)
        return request

    return build()


def _valid_describe_topics(view: ClusterView) -> st.SearchStrategy[Message]:
    @st.composite
    def build(draw: st.DrawFn) -> Message:
        topics = _some_topics(view, draw, most=4)
        request = controller_pb2.DescribeTopicsRequest(topics=[t.name for t in topics])
        paged: bool = draw(st.booleans())
        request.exclude_partitions = draw(st.booleans())  # listing topics
        if topics and paged:  # one page of a paged read
            request.response_partition_limit = draw(st.integers(1, 5))
            at = draw(st.sampled_from(topics))
            request.cursor.topic_name = at.name
            if not request.exclude_partitions:
                request.cursor.partition_index = draw(st.integers(0, len(at.partitions)))
        return request

    return build()


def _partitions_of(draw: st.DrawFn, topic: TopicView) -> list[int]:
    pids = list(range(len(topic.partitions)))
    return draw(st.lists(st.sampled_from(pids), min_size=1, max_size=3, unique=True))


def _valid_elect_leaders(view: ClusterView) -> st.SearchStrategy[Message]:
    # Where a preferred election acts (the other partitions answer ELECTION_NOT_NEEDED and the like).
    movable = [(t, pid) for t in view.topics for pid in range(len(t.partitions)) if t.electable(pid)]
    request_ids = _request_ids(view)

    @st.composite
    def build(draw: st.DrawFn) -> Message:
        request = controller_pb2.ElectLeadersRequest(
            election_type=draw(
                st.sampled_from(
                    (
                        controller_pb2.ELECTION_TYPE_PREFERRED,
                        controller_pb2.ELECTION_TYPE_PREFERRED,
                        controller_pb2.ELECTION_TYPE_UNCLEAN,
                    )
                )
            ),
            request_id=draw(request_ids),
        )
        if draw(st.booleans()) and movable:
            request.election_type = controller_pb2.ELECTION_TYPE_PREFERRED
            for topic, pid in draw(st.lists(st.sampled_from(movable), min_size=1, max_size=3, unique=True)):
                request.topic_partitions.add(topic=topic.name, partitions=[pid])
            return request
        for topic in _some_topics(view, draw, most=2):
            request.topic_partitions.add(topic=topic.name, partitions=_partitions_of(draw, topic))
        return request

    return build()


def _valid_alter_reassignments(view: ClusterView) -> st.SearchStrategy[Message]:
    request_ids = _request_ids(view)
    ids = [b.broker_id for b in view.brokers]

    @st.composite
    def build(draw: st.DrawFn) -> Message:
        request = controller_pb2.AlterPartitionReassignmentsRequest(request_id=draw(request_ids))
        for topic in _some_topics(view, draw, most=2):
            named = request.topics.add(name=topic.name)
            for pid in _partitions_of(draw, topic):
                current = topic.partitions[pid]
                rf = len(current)
                how = draw(st.sampled_from(("cancel", "reorder", "move", "move")))
                if how == "cancel":
                    named.partitions.add(partition_index=pid, cancel=True)
                elif how == "reorder":
                    # Same replicas, another order: no data to move, and (an in-sync follower put
                    # first) a new preferred leader that a preferred election will then move to.
                    order = draw(st.permutations(current))
                    followers = [b for b in topic.isrs[pid] if b != topic.leaders[pid]]
                    if draw(st.booleans()) and followers:
                        first = draw(st.sampled_from(followers))
                        order = [first, *(b for b in order if b != first)]
                    named.partitions.add(partition_index=pid, replicas=order)
                elif len(ids) >= rf:
                    named.partitions.add(partition_index=pid, replicas=draw(st.permutations(ids))[:rf])
        return request

    return build()


def _valid_register_broker(view: ClusterView) -> st.SearchStrategy[Message]:
    known = [b.broker_id for b in view.brokers]

    @st.composite
    def build(draw: st.DrawFn) -> Message:
        # Mostly brokers of the fuzz's own (100+): re-registering a fleet broker is legal but its
        # heartbeats then re-register it, which is noise rather than coverage.
        broker_id = draw(st.one_of(st.integers(100, 105), st.sampled_from(known) if known else st.just(100)))
        request = controller_pb2.RegisterBrokerRequest(
            broker_id=broker_id, incarnation_id=draw(st.binary(min_size=16, max_size=16).filter(any))
        )
        if draw(st.booleans()):
            request.rack = draw(st.sampled_from(("rack-a", "rack-b", "rack-z")))
        if draw(st.booleans()) and view.pools:
            request.pool = draw(st.sampled_from(view.pools))
        if draw(st.booleans()):
            request.endpoints.add(name="PLAINTEXT", host="127.0.0.1", port=draw(st.integers(1, 65535)))
        return request

    return build()


def _valid_heartbeat(view: ClusterView) -> st.SearchStrategy[Message]:
    @st.composite
    def build(draw: st.DrawFn) -> Message:
        if not view.brokers:
            return controller_pb2.BrokerHeartbeatRequest(broker_id=0)
        broker = draw(st.sampled_from(view.brokers))
        request = controller_pb2.BrokerHeartbeatRequest(
            broker_id=broker.broker_id, broker_epoch=broker.epoch, want_fence=draw(st.integers(0, 4)) == 0
        )
        mine = [(t, p) for t, p, b in view.adding if b == broker.broker_id]
        if mine:
            for topic_id, pid in draw(st.lists(st.sampled_from(mine), max_size=3)):
                request.caught_up_replicas.add(topic_id=topic_id, partition_id=pid)
        return request

    return build()


def _valid_alter_partition(view: ClusterView) -> st.SearchStrategy[Message]:
    """An ISR change from a partition's leader, built on the epochs last described (often stale
    by the time it arrives: the refusals are Kafka's and write nothing)."""
    led = [(t, pid) for t in view.topics for pid, leader in enumerate(t.leaders) if leader >= 0]
    epochs = {b.broker_id: b.epoch for b in view.brokers}

    @st.composite
    def build(draw: st.DrawFn) -> Message:
        if not led:
            return controller_pb2.AlterPartitionRequest(broker_id=0)
        topic, pid = draw(st.sampled_from(led))
        leader = topic.leaders[pid]
        others = [b for b in topic.partitions[pid] if b != leader]
        chosen = draw(st.lists(st.sampled_from(others), unique=True) if others else st.just([]))
        leader_epoch, partition_epoch = topic.epochs[pid]
        request = controller_pb2.AlterPartitionRequest(broker_id=leader, broker_epoch=epochs.get(leader, -1))
        data = request.topics.add(topic_id=topic.topic_id).partitions.add(
            partition_index=pid, leader_epoch=leader_epoch, partition_epoch=partition_epoch
        )
        for broker in [leader, *chosen]:
            data.new_isr_with_epochs.add(
                broker_id=broker, broker_epoch=draw(st.sampled_from((epochs.get(broker, -1), -1)))
            )
        return request

    return build()


def _valid_unregister(view: ClusterView) -> st.SearchStrategy[Message]:
    # Only the fuzz's own brokers (100+): unregistering the fleet's would starve the placer.
    own = sorted(b.broker_id for b in view.brokers if b.broker_id >= 100)
    return st.sampled_from(own or [100]).map(
        lambda broker_id: controller_pb2.UnregisterBrokerRequest(broker_id=broker_id)
    )


def _valid_list_reassignments(view: ClusterView) -> st.SearchStrategy[Message]:
    @st.composite
    def build(draw: st.DrawFn) -> Message:
        request = controller_pb2.ListPartitionReassignmentsRequest()
        for topic in _some_topics(view, draw, most=2) if draw(st.booleans()) else []:
            request.topics.add(topic=topic.name, partitions=_partitions_of(draw, topic))
        return request

    return build()


def valid_requests(method: str, view: ClusterView) -> st.SearchStrategy[Message]:
    """Requests of ``method`` that a healthy cluster in state ``view`` should mostly accept."""
    builders = {
        "CreateTopics": _valid_create_topics,
        "CreatePartitions": _valid_create_partitions,
        "DeleteTopics": _valid_delete_topics,
        "DescribeTopics": _valid_describe_topics,
        "ElectLeaders": _valid_elect_leaders,
        "AlterPartitionReassignments": _valid_alter_reassignments,
        "RegisterBroker": _valid_register_broker,
        "BrokerHeartbeat": _valid_heartbeat,
        "AlterPartition": _valid_alter_partition,
        "UnregisterBroker": _valid_unregister,
        "ListPartitionReassignments": _valid_list_reassignments,
    }
    builder = builders.get(method)
    if builder is None:
        return st.just(METHODS[method][0]())  # DescribeCluster, DescribeQuorum: nothing to vary
    return builder(view)


# How often each method is drawn relative to the others: the writes that grow and reshape the
# cluster more than the ones that read or shrink it, so that a run builds a cluster worth fuzzing.
METHOD_WEIGHTS = {
    "CreateTopics": 3,
    "CreatePartitions": 2,
    "ElectLeaders": 2,
    "AlterPartitionReassignments": 2,
    "BrokerHeartbeat": 2,
}
# Kinds of generated request, and how often each is drawn (out of 8).
KINDS = ("valid", "valid", "mutated", "mutated", "mutated", "mutated", "arbitrary", "arbitrary")


@dataclass(frozen=True, slots=True)
class FuzzRequest:
    method: str
    kind: str  # valid | mutated | arbitrary
    request: Message


def requests(
    view: ClusterView, *, methods: Sequence[str] | None = None, bounds: Bounds = DEFAULT_BOUNDS
) -> st.SearchStrategy[FuzzRequest]:
    """One fuzzed request of any ControllerService method (or of ``methods``). Build it once per
    view: the strategies it holds are what makes drawing cheap."""
    protos = ProtoStrategies(make_override(view, bounds), bounds)
    names = sorted(methods or METHODS)
    arbitrary = {name: protos.message(METHODS[name][0].DESCRIPTOR) for name in names}
    valid = {name: valid_requests(name, view) for name in names}
    weighted = [name for name in names for _ in range(METHOD_WEIGHTS.get(name, 1))]

    @st.composite
    def build(draw: st.DrawFn) -> FuzzRequest:
        method = draw(st.sampled_from(weighted))
        kind = draw(st.sampled_from(KINDS))
        if kind == "arbitrary":
            return FuzzRequest(method, kind, draw(arbitrary[method]))
        request = draw(valid[method])
        if kind == "valid":
            return FuzzRequest(method, kind, request)
        return FuzzRequest(method, kind, draw(protos.mutated(request)))

    return build()


__all__ = [
    "COUNT_MAX",
    "METHODS",
    "BrokerView",
    "ClusterView",
    "FuzzRequest",
    "TopicView",
    "counts",
    "make_override",
    "requests",
    "valid_requests",
]
