"""Run fuzz targets in rounds until a time budget is spent (``raftmeta fuzz``).

A round is one hypothesis run of a target's property with its own seed (the run's seed plus the
round number), so a long run keeps drawing new examples and any round can be replayed alone.
Targets take turns round by round. The controller target's final checks (stopping the quorum,
replaying every log) run after the budget and are not counted in it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from hypothesis import given

from raftmeta.fuzz.decoder import DecoderCase, check_case, decoder_cases, quiet_storage_logs, without_fsync
from raftmeta.fuzz.report import TargetReport
from raftmeta.fuzz.rounds import fuzz_round

DECODER_ROUND_EXAMPLES = 100
CONTROLLER_ROUND_EXAMPLES = 50


class Target(Protocol):
    name: str
    report: TargetReport

    def run_round(self, seed: int, examples: int, deadline: float) -> None: ...

    def finish(self) -> TargetReport: ...


class DecoderFuzzer:
    """The batch decoder, segment recovery and sealed-segment reads (:mod:`raftmeta.fuzz.decoder`)."""

    name = "decoder"

    def __init__(self) -> None:
        self.report = TargetReport(self.name)

    def exercise(self, case: DecoderCase) -> None:
        result = check_case(case)
        self.report.examples += 1
        self.report.count(result.outcome)
        for failure in result.failures:
            self.report.fail(case.family, failure, {"case": case.describe()})

    def run_round(self, seed: int, examples: int, deadline: float) -> None:
        @fuzz_round(seed, examples)
        @given(decoder_cases())
        def one(case: DecoderCase) -> None:
            if time.monotonic() < deadline:
                self.exercise(case)

        with quiet_storage_logs(), without_fsync():
            one()

    def finish(self) -> TargetReport:
        return self.report


@dataclass
class FuzzResult:
    targets: list[TargetReport]
    duration_s: float
    seed: int
    rounds: int
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(t.passed for t in self.targets)

    def to_json(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "seed": self.seed,
            "rounds": self.rounds,
            "targets": [t.to_json() for t in self.targets],
            "duration_s": round(self.duration_s, 3),
            "notes": self.notes,
        }


ROUND_EXAMPLES = {"decoder": DECODER_ROUND_EXAMPLES, "controller": CONTROLLER_ROUND_EXAMPLES}


def run_rounds(
    targets: list[Target],
    *,
    duration_s: float,
    seed: int,
    progress: Callable[[str], None] | None = None,
    round_examples: dict[str, int] | None = None,
) -> FuzzResult:
    """Rounds of every target in turn until ``duration_s`` has passed (each target runs at least
    one round), then each target's final checks."""
    sizes = {**ROUND_EXAMPLES, **(round_examples or {})}
    started = time.monotonic()
    deadline = started + duration_s
    rounds = 0
    while rounds == 0 or time.monotonic() < deadline:
        # The first round runs whole, so even a zero budget fuzzes each target a little.
        round_deadline = deadline if rounds else float("inf")
        for target in targets:
            target.run_round(seed + rounds, sizes.get(target.name, DECODER_ROUND_EXAMPLES), round_deadline)
            if progress is not None:
                left = max(0.0, deadline - time.monotonic())
                progress(
                    f"round {rounds + 1} {target.name}: {target.report.examples} examples, "
                    f"{target.report.failures_total} failures, {left:.0f} s left"
                )
        rounds += 1
    reports = [target.finish() for target in targets]
    return FuzzResult(reports, time.monotonic() - started, seed, rounds)


__all__ = ["DecoderFuzzer", "FuzzResult", "Target", "run_rounds"]
