"""Broker pools (seed 003): restriction, errors, and placement staying inside the pool."""

from __future__ import annotations

import pytest

from placement import (
    PLACERS,
    InvalidReplicationFactorError,
    JavaRandom,
    PlacementError,
    UsableBroker,
    place_replicas,
    pool_brokers,
    pool_names,
    restrict_to_pool,
)

# Seed 003: 9 brokers cut into three pools of three.
CLUSTER = [UsableBroker(i, f"rack{i % 3}", pool=f"pool{1 + (i - 1) // 3}") for i in range(1, 10)]


def test_pools_of_seed_003() -> None:
    assert pool_names(CLUSTER) == ["pool1", "pool2", "pool3"]
    assert [b.id for b in pool_brokers(CLUSTER, "pool2")] == [4, 5, 6]
    assert pool_brokers(CLUSTER, None) == CLUSTER


@pytest.mark.parametrize("placer", PLACERS)
def test_no_replica_outside_the_pool(placer: str) -> None:
    assignment = place_replicas(placer, CLUSTER, 9, 3, JavaRandom(1), pool="pool3")
    assert all(set(replicas) == {7, 8, 9} for replicas in assignment)


def test_unknown_pool() -> None:
    with pytest.raises(PlacementError) as error:
        restrict_to_pool(CLUSTER, "gold", 1)
    assert str(error.value) == "broker pool 'gold' has no registered brokers (known pools: pool1, pool2, pool3)."


def test_pool_too_small_for_the_factor() -> None:
    with pytest.raises(InvalidReplicationFactorError) as error:
        restrict_to_pool(CLUSTER, "pool1", 4)
    assert str(error.value) == (
        "The target replication factor of 4 cannot be reached because broker pool 'pool1' has only 3 broker(s)."
    )


def test_pool_all_fenced() -> None:
    cluster = [*CLUSTER, UsableBroker(20, pool="cold", fenced=True)]
    with pytest.raises(InvalidReplicationFactorError, match="All brokers of broker pool 'cold' are currently fenced"):
        restrict_to_pool(cluster, "cold", 1)


def test_empty_pool_name() -> None:
    with pytest.raises(PlacementError, match="must not be empty"):
        pool_brokers(CLUSTER, "")
