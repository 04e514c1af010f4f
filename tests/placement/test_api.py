"""place_replicas: the controller's single entry point, and the package's exports."""

from __future__ import annotations

import pytest

import placement
from placement import (
    InvalidReplicationFactorError,
    JavaRandom,
    PlacementError,
    StripedReplicaPlacer,
    UsableBroker,
    assign_replicas_to_brokers,
    place_replicas,
)
from tests.placement.helpers import brokers


def test_striped_dispatch_is_the_striped_placer() -> None:
    cluster = brokers("0:a,1:a,2:b,3:b")
    assert place_replicas("striped", cluster, 8, 2, JavaRandom(5)) == StripedReplicaPlacer(JavaRandom(5)).place(
        cluster, 8, 2
    )


def test_legacy_dispatch_uses_live_brokers_and_the_random_source() -> None:
    cluster = brokers("0,1,2:fenced,3")
    live = [b for b in cluster if not b.fenced]
    expected = assign_replicas_to_brokers(live, 5, 2, random=JavaRandom(5))
    assert place_replicas("legacy", cluster, 5, 2, JavaRandom(5)) == [expected[p] for p in range(5)]


def test_legacy_all_fenced() -> None:
    with pytest.raises(PlacementError, match="All brokers are currently fenced"):
        place_replicas("legacy", brokers("0:a:fenced"), 1, 1, JavaRandom(0))


def test_unknown_placer() -> None:
    with pytest.raises(ValueError, match="placer must be one of striped, legacy, balanced"):
        place_replicas("random", brokers("0"), 1, 1, JavaRandom(0))


def test_pool_is_checked_before_placing() -> None:
    cluster = [UsableBroker(0, pool="a"), UsableBroker(1, pool="b")]
    with pytest.raises(InvalidReplicationFactorError, match="broker pool 'a' has only 1 broker"):
        place_replicas("striped", cluster, 1, 2, JavaRandom(0), pool="a")


def test_everything_is_exported() -> None:
    for name in placement.__all__:
        assert hasattr(placement, name), name
    for required in (
        "RandomSource",
        "JavaRandom",
        "UsableBroker",
        "StripedReplicaPlacer",
        "BalancedReplicaPlacer",
        "assign_replicas_to_brokers",
        "add_partitions",
        "PlacementError",
        "InvalidReplicationFactorError",
        "InvalidPartitionsError",
        "parse_replica_assignment",
        "validate_replica_assignment",
        "restrict_to_pool",
        "assign_consumers",
        "balance_report",
        "place_replicas",
    ):
        assert required in placement.__all__, required
