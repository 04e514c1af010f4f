"""Random sources for tests: Kafka's ``MockRandom`` and a scripted source."""

from __future__ import annotations

from collections.abc import Iterable

from placement import JavaRandomBase, UsableBroker


class KafkaMockRandom(JavaRandomBase):
    """``org.apache.kafka.server.util.MockRandom``: a 64-bit LCG behind Random's ``next(bits)``.

    Kafka's placer tests use ``new MockRandom()`` (state 17); their expected outputs hold here
    because ``nextInt(bound)`` is java.util.Random's, built on this ``next``.
    """

    def __init__(self, state: int = 17) -> None:
        self.state = state

    def next_bits(self, bits: int) -> int:
        self.state = (self.state * 2862933555777941757 + 3037000493) & ((1 << 64) - 1)
        value = (self.state >> (64 - bits)) & 0xFFFFFFFF
        return value - (1 << 32) if value >= (1 << 31) else value


class ScriptedRandom:
    """Returns the given values from ``next_int`` in order, checking each is within the bound."""

    def __init__(self, values: Iterable[int]) -> None:
        self.values = list(values)
        self.calls: list[int] = []

    def next_int(self, bound: int) -> int:
        self.calls.append(bound)
        value = self.values.pop(0)
        assert 0 <= value < bound, f"scripted value {value} outside [0, {bound})"
        return value


class CountingRandom:
    """Wraps a source and records the bound of every ``next_int`` call."""

    def __init__(self, inner: JavaRandomBase) -> None:
        self.inner = inner
        self.calls: list[int] = []

    def next_int(self, bound: int) -> int:
        self.calls.append(bound)
        return self.inner.next_int(bound)


def brokers(spec: str) -> list[UsableBroker]:
    """``"0:a,1:a,2:b:fenced,3,4:fenced"`` -> UsableBrokers: ``id[:rack][:fenced]``."""
    out: list[UsableBroker] = []
    for item in spec.split(","):
        parts = item.split(":")
        fenced = parts[-1] == "fenced" and len(parts) > 1
        if fenced:
            parts = parts[:-1]
        rack = parts[1] if len(parts) > 1 and parts[1] else None
        out.append(UsableBroker(int(parts[0]), rack, fenced=fenced))
    return out


def leader_counts(assignment: list[list[int]], broker_ids: Iterable[int]) -> list[int]:
    counts = dict.fromkeys(broker_ids, 0)
    for replicas in assignment:
        counts[replicas[0]] += 1
    return list(counts.values())


def replica_counts(assignment: list[list[int]], broker_ids: Iterable[int]) -> list[int]:
    counts = dict.fromkeys(broker_ids, 0)
    for replicas in assignment:
        for broker in replicas:
            counts[broker] += 1
    return list(counts.values())
