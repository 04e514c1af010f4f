"""The controller's rules as an oracle (raftmeta.sim.oracle): each rule on hand-made committed
records, and each planted mutation of the controller's rules (raftmeta.sim.rule_bugs) caught by
its rule in ``raftmeta sim --plane`` within the CI seed budget."""

from __future__ import annotations

import pytest

from raftmeta.controller.image import MetadataImage
from raftmeta.controller.requests import request_sha256
from raftmeta.raft import Entry
from raftmeta.records.codec import encode_batch
from raftmeta.sim import FAULT_KINDS, run_seeds
from raftmeta.sim.checker import InvariantViolation
from raftmeta.sim.cluster import Simulation
from raftmeta.sim.oracle import RULES, RuleOracle, digest_of
from raftmeta.sim.rule_bugs import RULE_BUGS
from raftmeta.v1 import controller_pb2, records_pb2

PLANE_SEEDS = 100  # the CI seed budget of tests/sim/test_plane.py
STEPS = 3000
TOPIC = bytes(15) + b"\x07"
Record = records_pb2.MetadataRecord


def register(broker: int, epoch: int) -> Record:
    incarnation = bytes([0xB0, broker]) + bytes(14)
    return Record(
        register_broker=records_pb2.RegisterBrokerRecord(
            broker_id=broker, broker_epoch=epoch, incarnation_id=incarnation, fenced=True
        )
    )


def unfence(broker: int, epoch: int) -> Record:
    return Record(unfence_broker=records_pb2.UnfenceBrokerRecord(broker_id=broker, broker_epoch=epoch))


def fence(broker: int, epoch: int) -> Record:
    return Record(fence_broker=records_pb2.FenceBrokerRecord(broker_id=broker, broker_epoch=epoch))


def change(
    *, leader: int | None = None, isr: list[int] | None = None, replicas: list[int] | None = None, **epochs: int
) -> Record:
    """A PartitionChangeRecord of t-0: the fields given, and ``leader_epoch``/``partition_epoch``."""
    rec = records_pb2.PartitionChangeRecord(topic_id=TOPIC, partition_id=0)
    rec.leader_epoch = epochs["leader_epoch"]
    rec.partition_epoch = epochs["partition_epoch"]
    rec.unclean_election = bool(epochs.get("unclean_election", False))
    if leader is not None:
        rec.leader = leader
    if isr is not None:
        rec.isr.ids.extend(isr)
    if replicas is not None:
        rec.replicas.ids.extend(replicas)
    return Record(partition_change=rec)


def cluster(*, unclean: bool = False) -> list[Record]:
    """Brokers 1, 2, 3 unfenced; topic t (id TOPIC) with one partition on [1, 2, 3], led by 1."""
    records = [register(1, 1), register(2, 2), register(3, 3), unfence(1, 1), unfence(2, 2), unfence(3, 3)]
    records.append(Record(topic=records_pb2.TopicRecord(name="t", topic_id=TOPIC)))
    if unclean:
        config = records_pb2.ConfigRecord(
            resource_type=records_pb2.CONFIG_RESOURCE_TYPE_TOPIC,
            resource_name="t",
            name="unclean.leader.election.enable",
            value="true",
        )
        records.append(Record(config=config))
    partition = records_pb2.PartitionRecord(
        topic_id=TOPIC, partition_id=0, replicas=[1, 2, 3], isr=[1, 2, 3], leader=1, leader_epoch=0, partition_epoch=0
    )
    records.append(Record(partition=partition))
    return records


def feed(oracle: RuleOracle, records: list[Record]) -> MetadataImage:
    """Commit ``records`` one batch each; compare the image replay makes after each. Returns it."""
    image = MetadataImage.empty()
    for record in records:
        offset = oracle.next_offset
        batch = encode_batch(offset, 1, [record.SerializeToString()], 0)
        assert oracle.consume([Entry(offset, 1, offset + 1, batch)])
        image = image.replay(record)
        oracle.compare(0, image, offset)
    return image


def broken(records: list[Record], *, unclean: bool = False) -> InvariantViolation:
    with pytest.raises(InvariantViolation) as caught:
        feed(RuleOracle(), [*cluster(unclean=unclean), *records])
    return caught.value


def test_a_history_that_follows_the_rules_passes() -> None:
    """ISR shrink, a leader moved off a broker that is then fenced, a preferred election back, the
    topic removed: every record follows its rule, and the image agrees at every step."""
    oracle = RuleOracle()
    feed(
        oracle,
        [
            *cluster(),
            change(isr=[1, 2], leader_epoch=0, partition_epoch=1),
            change(leader=2, isr=[2], leader_epoch=1, partition_epoch=2),
            fence(1, 1),
            unfence(1, 1),
            change(isr=[2, 1], leader_epoch=1, partition_epoch=3),
            change(leader=1, leader_epoch=2, partition_epoch=4),
            Record(remove_topic=records_pb2.RemoveTopicRecord(topic_id=TOPIC)),
        ],
    )
    assert {rule for rule, times in oracle.checks.items() if times} >= {
        "leader-election",
        "isr-addition",
        "epochs",
        "fenced-leads-nothing",
        "removed-topic",
        "image-agrees",
    }


def test_an_unclean_election_needs_the_topic_to_enable_it() -> None:
    """Leader 1 alone in the ISR is fenced; electing 2 is unclean: allowed where the topic enables
    it (and marked so, with the ISR reset to the new leader), refused otherwise."""
    steps = [
        change(isr=[1], leader_epoch=0, partition_epoch=1),
        change(leader=-1, leader_epoch=1, partition_epoch=2),
        fence(1, 1),
        change(leader=2, isr=[2], unclean_election=1, leader_epoch=2, partition_epoch=3),
    ]
    feed(RuleOracle(), [*cluster(unclean=True), *steps])
    violation = broken(steps)
    assert violation.invariant == "rule-leader-election"
    assert "unclean.leader.election.enable is off for topic 't'" in violation.detail
    assert "offset 11" in violation.detail and "unclean_election: true" in violation.detail
    # Unmarked, the same election is a leader from outside the ISR.
    unmarked = broken([*steps[:-1], change(leader=2, isr=[2], leader_epoch=2, partition_epoch=3)])
    assert unmarked.invariant == "rule-leader-election" and "was not in the ISR" in unmarked.detail


def test_a_fenced_broker_is_neither_elected_nor_admitted() -> None:
    shrink = change(isr=[1, 2], leader_epoch=0, partition_epoch=1)
    elected = broken([shrink, fence(3, 3), change(leader=3, isr=[1, 2, 3], leader_epoch=1, partition_epoch=2)])
    assert elected.invariant == "rule-leader-election" and "broker 3 epoch 3 fenced" in elected.detail
    admitted = broken([shrink, fence(3, 3), change(isr=[1, 2, 3], leader_epoch=0, partition_epoch=2)])
    assert admitted.invariant == "rule-isr-addition" and "joining the ISR: broker 3 epoch 3 fenced" in admitted.detail


def test_every_change_bumps_the_epochs_it_must() -> None:
    no_partition_epoch = broken([change(isr=[1, 2], leader_epoch=0, partition_epoch=0)])
    assert no_partition_epoch.invariant == "rule-epochs"
    assert "expected leader epoch 0, partition epoch 1" in no_partition_epoch.detail
    no_leader_epoch = broken([change(leader=2, leader_epoch=0, partition_epoch=1)])
    assert no_leader_epoch.invariant == "rule-epochs" and "expected leader epoch 1" in no_leader_epoch.detail
    # Kafka bumps the leader epoch when a replica leaves the replica set, even under the same leader.
    shrunk = broken([change(replicas=[1, 2], isr=[1, 2], leader_epoch=0, partition_epoch=1)])
    assert shrunk.invariant == "rule-epochs" and "expected leader epoch 1" in shrunk.detail


def test_a_fenced_broker_leads_nothing() -> None:
    violation = broken([fence(1, 1)])
    assert violation.invariant == "rule-fenced-leads-nothing"
    assert "broker 1 still leads t-0" in violation.detail


def test_a_removed_topic_leaves_nothing_behind() -> None:
    remove = Record(remove_topic=records_pb2.RemoveTopicRecord(topic_id=TOPIC))
    named_again = broken([remove, change(isr=[1, 2], leader_epoch=0, partition_epoch=1)])
    assert named_again.invariant == "rule-removed-topic" and "'t'" in named_again.detail
    oracle = RuleOracle()
    image = feed(oracle, cluster())
    offset = oracle.next_offset
    assert oracle.consume([Entry(offset, 1, offset + 1, encode_batch(offset, 1, [remove.SerializeToString()], 0))])
    with pytest.raises(InvariantViolation) as kept:
        oracle.compare(0, image, offset)  # the image as it was before the removal
    assert kept.value.invariant == "rule-removed-topic"


def test_a_request_id_is_answered_once() -> None:
    request = controller_pb2.DeleteTopicsRequest(topic_names=["t"], request_id="r-1")
    answered = records_pb2.RequestRecord(request_id="r-1", method="DeleteTopics", request_sha256=digest_of(request))
    violation = broken([Record(request=answered), Record(request=answered)])
    assert violation.invariant == "rule-request-digest" and "'r-1' is already answered" in violation.detail


@pytest.mark.parametrize(
    "message",
    [
        controller_pb2.CreateTopicsRequest(
            topics=[controller_pb2.CreatableTopic(name="a", num_partitions=3, configs={"x": "1", "a": "2"})],
            request_id="id",
            timeout_ms=5,
        ),
        controller_pb2.DeleteTopicsRequest(topic_names=["a", "b"], request_id="other"),
    ],
)
def test_the_oracles_digest_is_the_log_formats(message: controller_pb2.CreateTopicsRequest) -> None:
    """Written separately from raftmeta.controller.requests, the digest agrees with what the log
    stores (the definition is the log format's: a retry may change only its id and its wait)."""
    assert digest_of(message) == request_sha256(message)
    changed = type(message)()
    changed.CopyFrom(message)
    changed.request_id = "changed"
    assert digest_of(changed) == digest_of(message)


@pytest.mark.sim
@pytest.mark.parametrize("bug", sorted(RULE_BUGS))
def test_each_rule_catches_its_planted_mutation(bug: str) -> None:
    """Each one-line mutation of the controller's rules is caught by the rule it breaks, on the
    all-faults mix, within the CI seed budget (up to the first violation)."""
    summary = run_seeds(
        range(PLANE_SEEDS),
        steps=STEPS,
        voters=3,
        kinds=frozenset(FAULT_KINDS),
        bug=bug,
        plane=True,
        stop_on_violation=True,
    )
    assert summary.violations, f"{bug} survived {PLANE_SEEDS} seeds"
    violation = summary.violations[0]
    assert violation["invariant"] == f"rule-{RULE_BUGS[bug][1]}", violation
    assert f"--bug {bug}" in violation["command"] and "--plane" in violation["command"]


def test_the_brokers_are_never_told_of_a_fenced_leader() -> None:
    """The simulated brokers' side: metadata that shows a fenced broker leading is refused."""
    image = MetadataImage.empty().replay_all(cluster())
    oracle = RuleOracle()
    oracle.told(image, lambda: "node 0's committed image")
    fenced = image.replay(fence(1, 1))  # replay's own checks allow it: the rule is the controller's
    with pytest.raises(InvariantViolation) as told:
        oracle.told(fenced, lambda: "node 0's committed image")
    assert told.value.invariant == "rule-broker-fenced-leader"
    assert "node 0's committed image tells the brokers that fenced broker 1 leads t-0" in told.value.detail


def test_every_rule_has_a_planted_mutation() -> None:
    """Each rule is proven by a planted bug it alone catches first, except three: the epochs rule's
    is the plane's stale_partition_epoch (tests/sim/test_plane.py), the read-index rule's the
    plane's stale_reads (below), and the brokers' view of a fenced leader sees what
    fenced-leads-nothing has refused at its commit already (unit test above)."""
    proven = {rule for _, rule in RULE_BUGS.values()}
    assert set(RULES) - proven == {"epochs", "read-index", "broker-fenced-leader"}


@pytest.mark.sim
def test_a_read_answered_below_its_index_is_caught_by_the_read_index_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    """The plane's stale_reads switch (a leader answers from its image without the read-index
    round) answers reads from an image below the index the core would have given them: with the
    network-side read-index proof off, the oracle catches it in a seed whose clients saw nothing. (A switch
    that answers a confirmed read before the image reaches its index cannot be planted here: the
    leader applies each commit in the Ready that confirms a read, so the image is always there.)"""
    monkeypatch.setattr(Simulation, "_check_read_index_proof", lambda *args: None)
    first: dict[int, str] = {}
    for seed in range(PLANE_SEEDS):
        summary = run_seeds([seed], steps=STEPS, voters=3, kinds=frozenset({"suspend"}), bug="stale_reads", plane=True)
        first.update((v["seed"], v["invariant"]) for v in summary.violations)
        if "rule-read-index" in first.values():
            break
    # In the other seeds a client sees the stale answer first (rule 9): the oracle's rule must
    # see one that no client has noticed (seed 3 today).
    assert "rule-read-index" in first.values(), first
