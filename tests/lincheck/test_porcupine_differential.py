"""Our checker against Porcupine itself: the same verdict on every generated history.

Linearizable histories come from seeded model executions with overlapping windows; planted ones
break one of them (tests/lincheck/histories.py). Both checkers see the same operations; the
default run checks a few hundred histories, the ``slow`` one thousands.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest

from raftmeta.lincheck import Operation, check_history
from tests.lincheck import porcupine
from tests.lincheck.histories import PLANTED, linearizable_history, planted_history


@pytest.fixture(scope="session")
def porcupine_check(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return porcupine.build(tmp_path_factory.mktemp("porcupine"))


def histories(count: int, first_seed: int) -> list[tuple[str, Sequence[Operation]]]:
    """``count`` linearizable histories and ``count`` planted ones, spread over the planted kinds."""
    made: list[tuple[str, Sequence[Operation]]] = []
    for seed in range(first_seed, first_seed + count):
        made.append((f"linearizable/{seed}", linearizable_history(seed)))
        kind = PLANTED[seed % len(PLANTED)]
        made.append((f"{kind}/{seed}", planted_history(seed, kind)))
    return made


def differential(binary: Path, count: int, first_seed: int) -> Counter[str]:
    made = histories(count, first_seed)
    theirs = porcupine.verdicts(binary, made)
    assert len(theirs) == len(made), "porcupine-check answered a different number of histories"
    tally: Counter[str] = Counter()
    disagreements = []
    for name, ops in made:
        ours = check_history(ops).verdict
        if ours != theirs[name]:
            disagreements.append(f"{name}: ours {ours}, Porcupine {theirs[name]}")
        tally[f"{name.split('/')[0]}:{ours}"] += 1
    assert disagreements == []
    # Linearizable by construction; every planted kind is caught in most histories (a planted
    # anomaly can be explained away by an operation whose outcome was lost, so not in all).
    assert tally["linearizable:ok"] == count, tally
    for kind in PLANTED:
        assert tally[f"{kind}:illegal"] >= tally[f"{kind}:ok"], (kind, tally)
    assert not any(key.endswith(":unknown") for key in tally), tally
    return tally


def test_same_verdicts_as_porcupine(porcupine_check: Path) -> None:
    differential(porcupine_check, 300, first_seed=0)


@pytest.mark.slow
def test_same_verdicts_as_porcupine_on_thousands(porcupine_check: Path) -> None:
    differential(porcupine_check, 5_000, first_seed=1_000_000)
