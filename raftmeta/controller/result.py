"""What handlers take and return: ``ControllerResult``, the static ``ControllerConfig`` and the
injected sources of topic ids and randomness."""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Generic, TypeAlias, TypeVar

from google.protobuf.message import Message

from raftmeta.api import limits
from raftmeta.controller.delta import NewTopic
from raftmeta.controller.image import MetadataImage
from raftmeta.v1 import records_pb2

R = TypeVar("R", bound=Message)
Records = list[records_pb2.MetadataRecord]

# Returns a fresh 16-byte topic id per call: the driver wraps uuid4().bytes, tests a counter.
TopicIdSource = Callable[[], bytes]


@dataclass(frozen=True, slots=True)
class ControllerResult(Generic[R]):
    """Kafka's ControllerResult: the records to append as one atomic batch, and the response to
    release once that batch is committed. Empty ``records`` means nothing is written."""

    # A tuple of messages, or LazyRecords when the handler encoded them itself (CreateTopics,
    # CreatePartitions: the leader never parses its new partitions' records).
    records: Sequence[records_pb2.MetadataRecord]
    response: R
    # When not None, ``records`` are exactly these topics' creation records, in order: the
    # controller replays them with these values as the memo (``ImageBuilder.replay_all``) instead
    # of reading its own records back (CreateTopics: decoding and re-checking them was a third of
    # the leader's work per partition). Replay with and without the memo gives the same image;
    # tests/controller/test_new_topics.py checks it.
    new_topics: tuple[NewTopic, ...] | None = None
    # When not None, ``records`` are only the first batch of work that runs over several turns
    # (raftmeta.controller.work): send ``more`` the working image after them for the next batch;
    # its return value is the last batch and the response (``response`` here stands in for it).
    more: Work[R] | None = None


# Work over several turns: yields a turn's records when the turn's budget is spent, is sent the
# working image after them, and returns the last turn's records with the response.
Work: TypeAlias = Generator[Records, MetadataImage, "ControllerResult[R]"]


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    """Static controller settings (Kafka's names in the comments)."""

    cluster_id: str = ""
    # The node the controller runs on (reported as controller_id by DescribeCluster), -1 unknown.
    node_id: int = -1
    default_num_partitions: int = 1  # num.partitions
    default_replication_factor: int = 1  # default.replication.factor
    session_timeout_ms: int = 9000  # broker.session.timeout.ms
    # Cluster default when neither the topic nor a cluster ConfigRecord sets it.
    unclean_leader_election_enable: bool = False
    # Kafka's MAX_PARTITIONS_PER_BATCH for one CreateTopics/CreatePartitions request.
    max_partitions_per_request: int = 10_000
    # A bound per topic (Kafka has none): CreateTopics and CreatePartitions refuse to exceed it.
    max_partitions_per_topic: int = 10_000
    # Placer used when a request names none.
    default_placer: str = "striped"
    # Automatic preferred-leader elections (KRaft's maybeBalancePartitionLeaders).
    auto_leader_rebalance_enable: bool = True  # auto.leader.rebalance.enable
    leader_imbalance_check_interval_ms: int = 300_000  # leader.imbalance.check.interval.seconds x 1000
    # Kafka's maxElectionsPerImbalance: a round elects at most this many; the next runs at once.
    max_elections_per_imbalance: int = 1000
    # Partitions one turn of work over the whole image looks at, at most (raftmeta's own bound;
    # controller/work.py): a broker leaving or returning, an election over every partition. Such a
    # pass is spread over turns of the node's loop, the next once the last one's batch commits,
    # instead of holding the loop for a time in proportion to the image.
    scan_partitions_per_turn_max: int = 100_000
    # Partitions one tick of a timer's pass over the image looks at, at most (the imbalance check,
    # the leaderless check): the pass goes on at the next tick, between requests.
    tick_scan_partitions_max: int = 100_000
    # Partition changes one turn of such a pass writes, at most: they are one log batch, which
    # every node applies in one turn (Kafka's MAX_RECORDS_PER_BATCH is 10,000).
    partition_changes_per_batch_max: int = 5_000
    # Partitions in one DescribeTopics answer at most (max.request.partition.size.limit, KIP-966):
    # a read holds the node's event loop while it is answered, so no answer grows with the image.
    max_request_partition_size_limit: int = 2000

    def __post_init__(self) -> None:
        for name in (
            "default_num_partitions",
            "default_replication_factor",
            "session_timeout_ms",
            "max_partitions_per_request",
            "max_partitions_per_topic",
            "leader_imbalance_check_interval_ms",
            "max_elections_per_imbalance",
            "scan_partitions_per_turn_max",
            "tick_scan_partitions_max",
            "partition_changes_per_batch_max",
            "max_request_partition_size_limit",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"ControllerConfig.{name} must be >= 1, got {getattr(self, name)}")
        # The request limits (raftmeta.api.limits) are what keeps one request's records within one
        # Fetch; the controller, which now answers them per topic, may only be stricter.
        for name, bound in (
            ("max_partitions_per_request", limits.PARTITIONS_PER_REQUEST_MAX),
            ("max_partitions_per_topic", limits.PARTITIONS_PER_TOPIC_MAX),
        ):
            if getattr(self, name) > bound:
                raise ValueError(f"ControllerConfig.{name} must be <= {bound}, got {getattr(self, name)}")


DEFAULT_CONFIG = ControllerConfig()
