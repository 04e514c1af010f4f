"""The real KRaft cluster the `kraft` tests share: ONE 3-controller, 3-broker, 3-rack cluster per
test run (the `kraft` phase runs in one process), stopped at the end.

Read-only checks, golden comparisons and benchmarks use ``kraft_cluster``; a test that kills,
pauses or reconfigures nodes starts its own (``KraftCluster.start`` in its own tmp dir), so that
the shared cluster is the same for every test. When it cannot start, the fixture errors with the
failing node's name and the tails of its logs (``KraftNodeError``), or with what is missing
(``KafkaNotResolved``: ``make kafka``); it never skips.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from raftmeta.kraft.cluster import KraftCluster


@pytest.fixture(scope="session")
def kraft_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KraftCluster]:
    cluster = KraftCluster.start(tmp_path_factory.mktemp("kraft"), controllers=3, brokers=3, racks=3)
    try:
        yield cluster
    finally:
        cluster.stop()
