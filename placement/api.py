"""One entry point for the controller: pick a placer by name, restrict to a pool, place."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from placement.balanced import BalancedReplicaPlacer, BrokerLoad
from placement.brokers import UsableBroker
from placement.errors import PlacementError
from placement.legacy import assign_replicas_to_brokers
from placement.pools import restrict_to_pool
from placement.rng import RandomSource
from placement.striped import StripedReplicaPlacer

PLACERS: Final = ("striped", "legacy", "balanced")
DEFAULT_PLACER: Final = "striped"


def place_replicas(
    placer_name: str,
    brokers: Sequence[UsableBroker],
    num_partitions: int,
    replication_factor: int,
    random: RandomSource,
    load: BrokerLoad | None = None,
    pool: str | None = None,
) -> list[list[int]]:
    """Replicas (leader first) of partitions 0..num_partitions-1 by the named placer.

    ``placer_name``: ``striped`` (KRaft's default), ``legacy`` (AdminUtils) or ``balanced``.
    ``pool`` restricts placement to that broker pool (checked first: unknown pool, too few
    brokers for the factor, all fenced). ``load`` is used by ``balanced`` only. The legacy
    placer, like ZooKeeper-mode Kafka, sees only live (unfenced) brokers. Raises
    ``PlacementError`` subclasses with Kafka's messages; ``ValueError`` for an unknown placer.
    """
    if placer_name not in PLACERS:
        raise ValueError(f"placer must be one of {', '.join(PLACERS)}, got {placer_name!r}")
    candidates = restrict_to_pool(brokers, pool, replication_factor)
    if placer_name == "striped":
        return StripedReplicaPlacer(random).place(candidates, num_partitions, replication_factor)
    if placer_name == "balanced":
        return BalancedReplicaPlacer(random).place(candidates, num_partitions, replication_factor, load)
    live = [b for b in candidates if not b.fenced]
    if not live and candidates:
        raise PlacementError("All brokers are currently fenced.") from None
    assignment = assign_replicas_to_brokers(live, num_partitions, replication_factor, random=random)
    return [assignment[p] for p in range(num_partitions)]
