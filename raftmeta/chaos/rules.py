"""The controller's rules on a chaos run's committed log: every record of the tape judged by the
oracle of :mod:`raftmeta.sim.oracle` (a new leader from the ISR or an enabled unclean election, ISR
additions unfenced, epochs bumped as Kafka bumps them, fenced brokers leading nothing, removed
topics never named again, request ids recorded once).

It rides on the tape walk of :mod:`raftmeta.chaos.replay` (records the controller's replay
refuses are reported there, as ``committed-log-replays``); where that walk resumes from a snapshot,
the oracle starts over from the snapshot's image. After the first break the rest is not judged:
the oracle's model no longer follows the log.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from raftmeta.chaos.replay import Step, replay_tape
from raftmeta.controller.image import MetadataImage
from raftmeta.jobs.checks import Check
from raftmeta.sim.checker import InvariantViolation
from raftmeta.sim.oracle import RuleOracle
from raftmeta.storage.snapshot import SnapshotId

CHECK = "controller-rules"


@dataclass
class RuleAudit:
    """A :class:`~raftmeta.chaos.replay.Observer` that puts every replayed record to the oracle."""

    oracle: RuleOracle = field(default_factory=RuleOracle)
    broken: InvariantViolation | None = None
    records: int = 0
    resumed: int = 0

    def on_step(self, step: Step) -> None:
        if self.broken is not None:
            return
        try:
            self.oracle.check(step.offset, step.record)
        except InvariantViolation as violation:
            self.broken = violation
        self.records += 1

    def on_resume(self, offset: int, image: MetadataImage) -> None:
        if self.broken is None:
            self.oracle.load(image, offset)
            self.resumed += 1


def check_rules(batches: Mapping[int, bytes], snapshots: Mapping[SnapshotId, bytes]) -> Check:
    """Walk the tape (base offset -> batch) and judge each record by the controller's rules."""
    audit = RuleAudit()
    replay_tape(batches, snapshots, audit)
    if audit.broken is not None:
        return Check(CHECK, False, f"{audit.broken.invariant}: {audit.broken.detail}")
    judged = sum(audit.oracle.checks.values())
    resumed = f", started over from {audit.resumed} snapshot(s)" if audit.resumed else ""
    return Check(
        CHECK, True, f"{audit.records} committed records judged by the controller's rules ({judged} checks{resumed})"
    )
