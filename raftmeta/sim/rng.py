"""The simulator's one source of randomness: everything is drawn from the run's seed."""

from __future__ import annotations

import random


class SeededRandom(random.Random):
    """``random.Random`` plus the core's ``RandomSource.next_int``."""

    def next_int(self, bound: int) -> int:
        assert bound >= 1
        return int(self.random() * bound)

    def chance(self, probability: float) -> bool:
        return probability > 0 and self.random() < probability
