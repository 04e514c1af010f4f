"""How every fuzzer runs one round: ``examples`` inputs generated from ``seed``.

Generation only: a failure is reported with the input that caused it (the fuzzers record it
themselves), not shrunk, because shrinking replays requests against a live quorum whose state
has moved on. No example database and no deadline: runs are reproducible from the seed alone and
a slow reply is judged by the fuzzer's own timeouts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from hypothesis import HealthCheck, Phase, settings
from hypothesis import seed as hypothesis_seed

F = TypeVar("F", bound=Callable[..., Any])


def fuzz_round(seed: int, examples: int) -> Callable[[F], F]:
    """Decorate a ``@given`` test so that it runs one seeded round of ``examples`` inputs."""

    def decorate(test: F) -> F:
        configured = settings(
            max_examples=examples,
            deadline=None,
            database=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )(test)
        seeded: F = hypothesis_seed(seed)(configured)
        return seeded

    return decorate
