"""The controller's rules as an oracle: every committed change checked against the rule that
allows it, from the image before it (issue 44, deliverable 4).

The plane's invariant 7 checks the *shape* of every partition state; this module checks the rules
that produced it. It keeps its own replay of the committed log (a few dicts: brokers, topics,
partitions, configs, request digests), written from Kafka's rules and not by calling the
controller's handlers, its builder or its replay, so a mutation of any of those cannot hide itself
here. Where the same rule must be written twice (an epoch bump, a digest) it is written from
Kafka's definition (``PartitionChangeBuilder`` and ``PartitionRegistration.merge``; the digest the
log format stores), and the two copies meet only in the log, where they must agree.

Rules (the invariant a break is reported under is ``rule-<name>``):

- ``leader-election``: a new leader is a registered, unfenced replica; a clean election takes it
  from the ISR before the change; an unclean one is marked ``unclean_election``, only where the
  topic (or else the cluster default) enables ``unclean.leader.election.enable``, and resets the
  ISR to the new leader alone. A new partition's leader is an unfenced member of its ISR.
- ``isr-addition``: a broker joins an ISR only registered and unfenced, as a replica.
- ``fenced-leads-nothing``: once a FenceBrokerRecord or UnregisterBrokerRecord is replayed, that
  broker leads no partition (the controller moves its leaderships first).
- ``epochs``: a partition change has partition epoch + 1; leader epoch + 1 when the leader changes
  or a replica leaves the replica set, unchanged otherwise. Broker epochs rise with every
  registration, and a fence, unfence or unregistration names the registered epoch.
- ``removed-topic``: after a RemoveTopicRecord no record names the topic again, and the node's
  image holds nothing of it: no id, no name, no partitions in its counts, no reassignment.
- ``image-agrees``: after every committed batch, the node that first applied it shows the topics
  and brokers the batch touched as this replay does (and its request table the same digests).
- ``request-digest``: a request id answers only its own request: a RequestRecord carries the
  digest of the request handled, an id is recorded once, and a request answered from the table
  (a retry) has the digest recorded for its id.
- ``heartbeat-epoch``: a heartbeat is accepted (answered NONE) only with the broker's registered
  epoch in the image it was handled on.
- ``alter-partition``: an AlterPartition is accepted for a partition only from its leader, with the
  sender's registered broker epoch and the partition's current leader and partition epochs; the
  ISR members it adds are registered, unfenced, given with their registered epochs (or -1, unknown),
  and the record's additions are ones the leader asked for (the leader alone knows who caught up).
- ``read-index``: a linearizable read is answered from an image at or past its index (the
  consensus core's: the high watermark when the read reached the leader, and at least the
  leader's first batch) and past every offset any node had applied by then.
- ``broker-fenced-leader`` (the simulated brokers' side): the metadata the partition leaders read
  never shows a fenced broker leading a partition.

A break is an :class:`~raftmeta.sim.checker.InvariantViolation` naming the rule, the offset, the
record and the image facts that broke it; the simulator adds the command that replays the seed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

from google.protobuf.message import Message

from raftmeta.controller.controller import Controller
from raftmeta.controller.image import MetadataImage
from raftmeta.raft import Entry
from raftmeta.sim.checker import InvariantViolation
from raftmeta.sim.oracle_answers import AnswerRules, digest_of
from raftmeta.sim.oracle_records import CommittedLogRules
from raftmeta.v1 import records_pb2

__all__ = ["RULES", "RuleOracle", "digest_of"]

RULES = (
    "leader-election",
    "isr-addition",
    "fenced-leads-nothing",
    "epochs",
    "removed-topic",
    "image-agrees",
    "request-digest",
    "heartbeat-epoch",
    "alter-partition",
    "read-index",
    "broker-fenced-leader",
)


class RuleOracle:
    """Both halves of the rules over one count of checks: the committed log's
    (:mod:`raftmeta.sim.oracle_records`) and the answers' (:mod:`raftmeta.sim.oracle_answers`)."""

    def __init__(self, *, unclean_default: bool = False) -> None:
        self.checks: Counter[str] = Counter()
        self.records = CommittedLogRules(self.checks, unclean_default=unclean_default)
        self.answers = AnswerRules(self.checks, self.records.last_change_at_or_before)

    @property
    def next_offset(self) -> int:
        return self.records.next_offset

    @property
    def pending(self) -> InvariantViolation | None:
        return self.answers.pending

    def raise_pending(self) -> None:
        self.answers.raise_pending()

    # -- the committed log (oracle_records) ------------------------------------------------------
    def consume(self, entries: Sequence[Entry]) -> bool:
        return self.records.consume(entries)

    def check(self, offset: int, record: records_pb2.MetadataRecord) -> None:
        self.records.check(offset, record)

    def load(self, image: MetadataImage, offset: int) -> None:
        self.records.load(image, offset)

    def compare(self, node_id: int, image: MetadataImage, offset: int) -> None:
        self.records.compare(node_id, image, offset)

    # -- the answers (oracle_answers) -------------------------------------------------------------
    def watch(self, controller: Controller) -> None:
        self.answers.watch(controller)

    def arrived(self, node_id: int, key: int, committed_last: int) -> None:
        self.answers.arrived(node_id, key, committed_last)

    def answered(self, node_id: int, controller: Controller, key: int, request: Message, response: Message) -> None:
        self.answers.answered(node_id, controller, key, request, response)

    def told(self, image: MetadataImage, source: Callable[[], str]) -> None:
        self.answers.told(image, source)
