"""Planted bugs in the controller's rules, one per rule of :mod:`raftmeta.sim.oracle`.

Each is the runtime form of a one-line source mutation of the controller (its handlers, its
election builder, its replay or its read path): the named function is swapped for the mutated one
for the length of one simulated run, and put back after it, so the controller's code carries no
test switch. ``raftmeta sim --plane --bug NAME`` selects one, as the other planted bugs
(:data:`raftmeta.sim.runner.PLANE_BUGS`); tests/sim/test_oracle.py requires each to be caught by
the rule named here within the CI seed budget.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from raftmeta.controller import brokers, controller, delta, elections, isr
from raftmeta.controller.delta import ImageBuilder
from raftmeta.controller.errors import ApiError
from raftmeta.controller.image import MetadataImage, PartitionRegistration
from raftmeta.controller.partition_change import PartitionChangeBuilder
from raftmeta.controller.work import Steps, TurnBudget
from raftmeta.v1 import controller_pb2, errors_pb2, records_pb2

# bug -> (the mutation, the oracle rule that must catch it)
RULE_BUGS: dict[str, tuple[str, str]] = {
    "unclean_without_config": (
        "elections take every topic's unclean.leader.election.enable as on: a leader from outside the ISR",
        "leader-election",
    ),
    "fenced_leader": (
        "a valid leader is any ISR member, fenced or not (PartitionChangeBuilder drops the acceptability test)",
        "leader-election",
    ),
    "fenced_isr_admission": (
        "AlterPartition's eligibility test forgets fenced brokers: a fenced follower joins the ISR",
        "isr-addition",
    ),
    "fence_keeps_leaderships": (
        "fencing a broker writes its FenceBrokerRecord without first moving its leaderships and ISR places",
        "fenced-leads-nothing",
    ),
    "stale_isr_partition_epoch": (
        "AlterPartition accepts an older partition epoch (INVALID_UPDATE_VERSION never answered)",
        "alter-partition",
    ),
    "stale_heartbeat_epoch": (
        "a heartbeat's broker epoch is not compared with the registered one",
        "heartbeat-epoch",
    ),
    "request_digest_ignored": (
        "the request digest covers the request's type, not its content: an id answers any request of its method",
        "request-digest",
    ),
    "request_digest_forgotten": (
        "replay keeps a request id's response but not its digest: the id answers any request of its method",
        "image-agrees",
    ),
    "epoch_not_replayed": (
        "replay of a PartitionChangeRecord keeps the partition epoch the image had",
        "image-agrees",
    ),
    "deleted_topic_kept": (
        "replay of a RemoveTopicRecord drops the name but keeps the topic's partitions",
        "removed-topic",
    ),
}


def _always_unclean(image: MetadataImage, topic: Any, default: bool) -> bool:
    return True  # mutation: was the topic's (or the cluster's) unclean.leader.election.enable


def _valid_even_fenced(self: PartitionChangeBuilder, broker: int) -> bool:
    return broker in self.target_isr  # mutation: was `... and self.is_acceptable_leader(broker)`


def _nothing_to_leave(image: MetadataImage, broker_id: int, unclean_default: bool, budget: TurnBudget) -> Steps:
    yield from ()  # a generator, as the original, with no turn of work
    return image, []  # mutation: was the records moving the broker's leaderships and ISR places


def _ineligible_but_fenced(original: Callable[..., list[tuple[int, str]]]) -> Callable[..., list[tuple[int, str]]]:
    def ineligible(image: MetadataImage, members: Any) -> list[tuple[int, str]]:
        return [(b, why) for b, why in original(image, members) if why != "fenced"]  # mutation: no fenced branch

    return ineligible


def _stale_partition_epoch_accepted(original: Callable[..., ApiError | None]) -> Callable[..., ApiError | None]:
    def validate(
        image: MetadataImage,
        broker_id: int,
        topic_name: str,
        pid: int,
        part: PartitionRegistration,
        data: controller_pb2.AlterPartitionPartition,
    ) -> ApiError | None:
        # mutation: the `data.partition_epoch < part.partition_epoch` test is gone
        seen = part._replace(partition_epoch=min(part.partition_epoch, data.partition_epoch))
        return original(image, broker_id, topic_name, pid, seen, data)

    return validate


def _epoch_unchecked(image: MetadataImage, broker_id: int, broker_epoch: int) -> ApiError | None:
    if broker_id in image.brokers:
        return None  # mutation: was `if broker.epoch != broker_epoch: return STALE_BROKER_EPOCH`
    return ApiError(errors_pb2.STALE_BROKER_EPOCH, f"No broker registration found for broker id {broker_id}")


def _digest_of_type(request: Any) -> bytes:
    return hashlib.sha256(type(request).__name__.encode()).digest()  # mutation: was the request's bytes


def _request_without_digest(original: Callable[[ImageBuilder, Any], None]) -> Callable[[ImageBuilder, Any], None]:
    def replay(builder: ImageBuilder, rec: records_pb2.RequestRecord) -> None:
        kept = records_pb2.RequestRecord()
        kept.CopyFrom(rec)
        kept.ClearField("request_sha256")  # mutation: the entry was RequestEntry(..., rec.request_sha256)
        original(builder, kept)

    return replay


def _change_keeping_epoch(original: Callable[[ImageBuilder, Any], None]) -> Callable[[ImageBuilder, Any], None]:
    def replay(builder: ImageBuilder, rec: records_pb2.PartitionChangeRecord) -> None:
        original(builder, rec)
        draft = builder._topics[rec.topic_id]
        part = draft.partitions[rec.partition_id]
        # mutation: the new state was built with `rec.partition_epoch`
        draft.partitions[rec.partition_id] = part._replace(partition_epoch=part.partition_epoch - 1)

    return replay


def _remove_keeping_partitions(original: Callable[[ImageBuilder, Any], None]) -> Callable[[ImageBuilder, Any], None]:
    def replay(builder: ImageBuilder, rec: records_pb2.RemoveTopicRecord) -> None:
        draft = builder._draft(rec.topic_id, "RemoveTopicRecord")
        original(builder, rec)
        builder._topics[rec.topic_id] = draft  # mutation: was `self._topics[rec.topic_id] = DELETED`

    return replay


def _patches(bug: str) -> list[tuple[Any, str, Any]]:
    """(owner, attribute, mutated value) for ``bug``."""
    dispatch = delta._DISPATCH
    if bug == "unclean_without_config":
        return [(elections, "unclean_enabled", _always_unclean), (isr, "unclean_enabled", _always_unclean)]
    if bug == "fenced_leader":
        return [(PartitionChangeBuilder, "_is_valid_leader", _valid_even_fenced)]
    if bug == "fence_keeps_leaderships":
        return [(elections, "leave_steps", _nothing_to_leave)]
    if bug == "fenced_isr_admission":
        return [(isr, "ineligible_replicas", _ineligible_but_fenced(isr.ineligible_replicas))]
    if bug == "stale_isr_partition_epoch":
        return [(isr, "validate_alter_partition", _stale_partition_epoch_accepted(isr.validate_alter_partition))]
    if bug == "stale_heartbeat_epoch":
        return [(brokers, "check_broker_epoch", _epoch_unchecked)]
    if bug == "request_digest_ignored":
        return [(controller, "request_sha256", _digest_of_type)]
    if bug == "request_digest_forgotten":
        return [(dispatch, "request", _request_without_digest(dispatch["request"]))]
    if bug == "epoch_not_replayed":
        return [(dispatch, "partition_change", _change_keeping_epoch(dispatch["partition_change"]))]
    if bug == "deleted_topic_kept":
        return [(dispatch, "remove_topic", _remove_keeping_partitions(dispatch["remove_topic"]))]
    raise ValueError(f"unknown rule bug {bug!r}: choose from {', '.join(RULE_BUGS)}")


def _get(owner: Any, name: str) -> Any:
    return owner[name] if isinstance(owner, dict) else getattr(owner, name)


def _set(owner: Any, name: str, value: Any) -> None:
    if isinstance(owner, dict):
        owner[name] = value
    else:
        setattr(owner, name, value)


@contextmanager
def planted(bugs: frozenset[str]) -> Iterator[None]:
    """The controller with ``bugs`` planted, until the block ends (the originals are put back
    even when it raises)."""
    patches = [patch for bug in sorted(bugs) for patch in _patches(bug)]
    originals = [(owner, name, _get(owner, name)) for owner, name, _ in patches]
    try:
        for owner, name, value in patches:
            _set(owner, name, value)
        yield
    finally:
        for owner, name, value in reversed(originals):
            _set(owner, name, value)
