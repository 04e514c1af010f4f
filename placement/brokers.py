"""The brokers a placer may use, and the checks every placer makes on them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from placement.errors import PlacementError


@dataclass(frozen=True, slots=True)
class UsableBroker:
    """A registered broker as the placers see it (Kafka's ``UsableBroker`` plus a pool).

    ``rack`` None means the broker reported no rack; ``fenced`` brokers may hold followers but
    never a new leader; ``pool`` names the resource pool the broker belongs to (seed 003).
    """

    id: int
    rack: str | None = None
    fenced: bool = False
    pool: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.id, bool) or not isinstance(self.id, int):
            raise TypeError(f"broker id must be an int, got {self.id!r}")
        if self.id < 0:
            raise PlacementError(f"broker id must be non-negative, got {self.id}")
        if self.rack is not None and not isinstance(self.rack, str):
            raise TypeError(f"broker {self.id}: rack must be a string or None, got {self.rack!r}")
        if self.pool is not None and not isinstance(self.pool, str):
            raise TypeError(f"broker {self.id}: pool must be a string or None, got {self.pool!r}")


def check_distinct_ids(brokers: Sequence[UsableBroker]) -> None:
    """Reject a broker list that names one id twice: Kafka's inputs are sets of brokers."""
    seen: set[int] = set()
    for broker in brokers:
        if broker.id in seen:
            raise PlacementError(f"brokers: broker id {broker.id} appears more than once")
        seen.add(broker.id)
