"""Broker pools (seed 003): disjoint groups of brokers that keep topics physically apart.

A broker carries an optional pool name; a placement restricted to a pool sees only that pool's
brokers, so no replica lands outside it (DESIGN §9.8). The pool must be able to hold the
replication factor with an unfenced leader, otherwise placement fails before any placer runs.
"""

from __future__ import annotations

from collections.abc import Sequence

from placement.brokers import UsableBroker
from placement.errors import InvalidReplicationFactorError, PlacementError


def pool_brokers(brokers: Sequence[UsableBroker], pool: str | None) -> list[UsableBroker]:
    """The brokers of ``pool`` in the order given (all brokers when ``pool`` is None)."""
    if pool is None:
        return list(brokers)
    if not pool:
        raise PlacementError("broker pool: the pool name must not be empty")
    return [b for b in brokers if b.pool == pool]


def pool_names(brokers: Sequence[UsableBroker]) -> list[str]:
    """The pools the brokers belong to, sorted."""
    return sorted({b.pool for b in brokers if b.pool is not None})


def restrict_to_pool(brokers: Sequence[UsableBroker], pool: str | None, replication_factor: int) -> list[UsableBroker]:
    """The brokers of ``pool``, checked to hold ``replication_factor`` replicas with a live leader.

    Raises ``PlacementError`` for an unknown pool and ``InvalidReplicationFactorError`` when the
    pool has fewer brokers than the replication factor or only fenced brokers.
    """
    members = pool_brokers(brokers, pool)
    if pool is None:
        return members
    if not members:
        known = ", ".join(pool_names(brokers)) or "none"
        raise PlacementError(f"broker pool '{pool}' has no registered brokers (known pools: {known}).")
    if replication_factor > len(members):
        raise InvalidReplicationFactorError(
            f"The target replication factor of {replication_factor} cannot be reached because broker pool "
            f"'{pool}' has only {len(members)} broker(s)."
        )
    if all(b.fenced for b in members):
        raise InvalidReplicationFactorError(f"All brokers of broker pool '{pool}' are currently fenced.")
    return members
