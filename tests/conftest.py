"""Suite-wide setup: quiet, structured logs (warnings and errors still show in failure reports),
and the scheduling that lets ``make test`` run the Kafka tests beside the chaos runs."""

from __future__ import annotations

from typing import Any

import pytest
import structlog  # noqa: F401 -- imported before raftmeta, so the configuration below applies at once

from raftmeta.logs import configure_logging

configure_logging("warning", "console")

# The tests against real Kafka (marker ``kraft``) all live here and share JVM clusters that
# session-scoped fixtures start once per worker process: they must all run on one worker.
KAFKA_TESTS = "tests/kraft/"


# The directories of the longest tests, longest first (``make test``'s slowest-test lists): Spark
# jobs (over half of the first phase's worker time), the seeded simulations, real quorums.
LONGEST_FIRST = (KAFKA_TESTS, "tests/jobs/", "tests/sim/", "tests/integration/")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest tests first (a stable sort, so a module's tests stay together): the workers
    start on them and end on short ones, rather than one worker finishing a Spark job alone. Under
    ``loadscope`` the Kafka tests' one scope, the longest, starts at once on one worker while the
    other takes the chaos runs."""

    def rank(item: pytest.Item) -> int:
        return next((i for i, prefix in enumerate(LONGEST_FIRST) if item.nodeid.startswith(prefix)), len(LONGEST_FIRST))

    items.sort(key=rank)


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist, called only where it runs
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadscope`` with every Kafka test in one scope: ``make test`` runs them on one
    worker beside the chaos runs (which mostly wait on their faults) on the other.
    (pytest-xdist's ``loadgroup`` would say this with a mark, but it stopped grouping under
    pytest 9.2: pytest-dev/pytest-xdist#1386.)"""
    if config.getoption("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class KafkaTestsTogether(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return KAFKA_TESTS if nodeid.startswith(KAFKA_TESTS) else str(super()._split_scope(nodeid))

    return KafkaTestsTogether(config, log)
