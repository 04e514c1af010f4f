"""The ControllerService fuzz against real node processes: a 3-voter quorum with a simulated
broker fleet, every ControllerService method, requests sent to any node (so forwarding is
fuzzed too). A fixed number of requests with fixed seeds (the server's state still depends on
timing, so the run is not bit-for-bit repeatable); `raftmeta fuzz --duration S` runs longer."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from raftmeta.fuzz.controller import ControllerFuzzer
from raftmeta.fuzz.requests import METHODS

pytestmark = pytest.mark.integration

ROUNDS = 25
EXAMPLES = 40


def test_every_reply_is_defined_the_nodes_stay_up_and_the_logs_replay(tmp_path: Path) -> None:
    fuzzer = ControllerFuzzer(tmp_path / "quorum")
    try:
        fuzzer.start()
        for round_number in range(ROUNDS):
            fuzzer.run_round(seed=1000 + round_number, examples=EXAMPLES, deadline=math.inf)
        report = fuzzer.finish()
    finally:
        fuzzer.close()
    assert report.failures == [], report.failures
    assert report.examples == ROUNDS * EXAMPLES
    exercised = {label.split(":")[0] for label in report.outcomes if label.endswith((":success", ":error"))}
    assert exercised == set(METHODS)
    assert report.outcomes["replayed:tape:batches"] > 0
    assert all(
        report.outcomes[f"replayed:node-{n}:records"] + report.outcomes["replayed:tape:records"] > 0 for n in (1, 2, 3)
    )
