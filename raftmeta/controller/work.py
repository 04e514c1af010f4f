"""Controller work that runs over several turns of the node's loop: a broker that leaves or
returns when it is in hundreds of thousands of partitions.

Why
---
Fencing, controlled shutdown and unregistering a broker change every partition it leads or is in
sync for; unfencing elects every leaderless partition it can lead. Each scans the whole image and
writes one PartitionChangeRecord per partition touched. Done in one step, a broker in 300,000
partitions held the leader's loop for seconds: its followers' Fetches timed out, they elected a
new leader, which handled the client's retry and stalled the same way (docs/performance.md).

How
---
Such a handler is a generator (:data:`Work`). It looks at no more than
``ControllerConfig.scan_partitions_per_turn_max`` partitions and writes no more than
``partition_changes_per_batch_max`` changes per turn; when a turn's budget is spent it yields
that turn's records -- a log batch of their own -- and is sent the working image after them when
the next turn begins. Its return value is the last turn's records and the response, as any
handler's :class:`~raftmeta.controller.result.ControllerResult`. :func:`start` runs the first
turn: a broker in fewer partitions than a turn's budget gets one batch, exactly as before.

The QuorumController runs one turn at a time, once the previous turn's batch has committed, and
holds other writes until the work ends (Kafka's controller runs one event at a time, too), so the
records are those of a single pass over the image: a turn resumes where the last one stopped,
and nothing else changed the image in between. Reads and Raft traffic go on between turns.

Kafka splits such a result into batches of ``MAX_RECORDS_PER_BATCH`` the same way (a
non-atomic ControllerResult): the partition changes come first and the broker's own record last,
so every committed prefix is a state the cluster can be in -- the broker is fenced (or gone) only
once it leads nothing. A leader that loses its leadership midway leaves such a prefix; the new
leader fences the broker again when its session runs out, and a client retries UnregisterBroker.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import TypeVar

from google.protobuf.message import Message

from raftmeta.controller.image import MetadataImage, PartitionRegistration, TopicImage
from raftmeta.controller.result import ControllerConfig, ControllerResult, Records, Work

R = TypeVar("R", bound=Message)
# A part of a handler's work (``yield from``): returns the working image its last turn began
# with and that turn's records, which the caller extends and returns.
Steps = Generator[Records, MetadataImage, tuple[MetadataImage, Records]]
# Looks at a topic's partitions ``start`` to ``stop`` (its partitions, start, stop, the turn's
# records, full) in order, appending any record each makes to the turn's records; stops once they
# are ``full`` long. Returns the partition after the last it looked at. (A range, not a call per
# partition: on a big image nearly every partition is passed over, at one comparison each.)
Visit = Callable[[tuple[PartitionRegistration, ...], int, int, Records, int], int]


@dataclass(frozen=True, slots=True)
class TurnBudget:
    """How much of a whole-image pass one turn may do."""

    partitions_scanned: int
    partition_changes: int

    @classmethod
    def of(cls, config: ControllerConfig) -> TurnBudget:
        return cls(config.scan_partitions_per_turn_max, config.partition_changes_per_batch_max)


UNBOUNDED = TurnBudget(1 << 62, 1 << 62)


def start(work: Work[R], response: R) -> ControllerResult[R]:
    """Run ``work``'s first turn. The work's own result when it fits in one turn; else that
    turn's records with ``more`` set to the rest of the work (``response`` stands in for the
    answer, which comes with the last turn)."""
    try:
        records = next(work)
    except StopIteration as done:
        result: ControllerResult[R] = done.value
        return result
    return ControllerResult(tuple(records), response, more=work)


def complete(steps: Steps) -> Records:
    """Every record of ``steps`` run with an unbounded budget (which never yields)."""
    try:
        next(steps)
    except StopIteration as done:
        records: Records = done.value[1]
        return records
    raise AssertionError("work with an unbounded budget yielded")


def partition_pass(
    image: MetadataImage,
    visitor: Callable[[MetadataImage, TopicImage], Visit],
    budget: TurnBudget,
    records: Records,
) -> Steps:
    """One pass over every partition, by topic name then partition id: ``visitor(image, topic)``
    gives the visit of that topic's partitions, which may append records to the turn's
    (``records`` to begin with). A turn ends when it looked at ``budget.partitions_scanned``
    partitions or holds ``budget.partition_changes`` records: it yields them and goes on from
    the next partition, on the image it is sent (the one after those records), with a fresh visit
    of the topic. Returns the image the last turn began with and the last turn's records.

    Nothing else may change the image between turns (the controller holds writes): a partition is
    only changed by the turn that looks at it, so the records are those of one pass in one turn."""
    scan_max, changes_max = budget.partitions_scanned, budget.partition_changes
    scanned = 0
    for topic_id in [topic.topic_id for topic in image.topics_sorted()]:
        topic = image.topics[topic_id]
        visit = visitor(image, topic)
        count = len(topic.partitions)
        pid = 0
        while pid < count:
            if scanned >= scan_max or len(records) >= changes_max:
                image = yield records
                records, scanned = [], 0
                topic = image.topics[topic_id]
                visit = visitor(image, topic)
            end = visit(topic.partitions, pid, min(count, pid + scan_max - scanned), records, changes_max)
            scanned += end - pid
            pid = end
    return image, records
