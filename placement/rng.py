"""Random sources: the ``RandomSource`` protocol and a bit-exact ``java.util.Random``.

Placers draw randomness only through ``next_int(bound)`` of the source they are given, in the
order Kafka's code calls ``Random.nextInt``, so the same seed yields Kafka's assignment.

``JavaRandom`` is java.util.Random: a 48-bit linear congruential generator (Knuth, TAOCP 3.2.1)
whose seed is scrambled with the multiplier on construction; ``next(bits)`` returns the top
``bits`` of the new state as a Java ``int``; ``nextInt(bound)`` takes a fast path for powers of
two and otherwise rejects draws from the incomplete last bucket so every result is equally likely.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Protocol, TypeVar, runtime_checkable

_MULTIPLIER = 0x5DEECE66D
_ADDEND = 0xB
_MASK_48 = (1 << 48) - 1
_INT_MIN = -(1 << 31)
_INT_RANGE = 1 << 32
_INT_LIMIT = 1 << 31

T = TypeVar("T")


@runtime_checkable
class RandomSource(Protocol):
    """Where a placer's randomness comes from: java.util.Random.nextInt(int)'s contract."""

    def next_int(self, bound: int) -> int:
        """A uniformly distributed int in ``[0, bound)``; ``bound`` must be positive."""
        ...


def to_java_int(value: int) -> int:
    """Wrap an integer to a Java 32-bit signed ``int`` (two's complement)."""
    value &= _INT_RANGE - 1
    return value - _INT_RANGE if value >= _INT_LIMIT else value


class JavaRandomBase(ABC):
    """java.util.Random's derived methods over an abstract ``next(bits)``.

    Subclasses supply ``next_bits``; Kafka's tests do the same (``MockRandom extends Random``
    overrides ``next``), which is how their expected outputs are reproduced here.
    """

    @abstractmethod
    def next_bits(self, bits: int) -> int:
        """Java's ``protected int next(int bits)``: ``bits`` random bits as a Java int."""

    def next_int(self, bound: int) -> int:
        """Java's ``nextInt(int bound)``, bit for bit (including its rejection loop)."""
        if bound <= 0:
            raise ValueError(f"bound must be positive, got {bound}")
        r = self.next_bits(31)
        m = bound - 1
        if bound & m == 0:  # a power of two: take the high bits, they are the most random
            return (bound * r) >> 31
        u = r
        r = u % bound
        # Java's `u - r + m < 0` is an int overflow: u fell in the last, incomplete bucket.
        while u - r + m >= _INT_LIMIT:
            u = self.next_bits(31)
            r = u % bound
        return r

    def next_int32(self) -> int:
        """Java's ``nextInt()``: any Java int."""
        return self.next_bits(32)

    def next_long(self) -> int:
        """Java's ``nextLong()``: a Java long built from two ``next(32)``."""
        value = (self.next_bits(32) << 32) + self.next_bits(32)
        value &= (1 << 64) - 1
        return value - (1 << 64) if value >= (1 << 63) else value

    def next_boolean(self) -> bool:
        """Java's ``nextBoolean()``."""
        return self.next_bits(1) != 0


class JavaRandom(JavaRandomBase):
    """``new java.util.Random(seed)``: the same sequence as the JVM's for the same seed."""

    __slots__ = ("_state",)

    def __init__(self, seed: int) -> None:
        self._state = 0
        self.set_seed(seed)

    def set_seed(self, seed: int) -> None:
        """Java's ``setSeed(long)``: only the low 48 bits of the seed matter, scrambled."""
        self._state = (seed ^ _MULTIPLIER) & _MASK_48

    def next_bits(self, bits: int) -> int:
        self._state = (self._state * _MULTIPLIER + _ADDEND) & _MASK_48
        return to_java_int(self._state >> (48 - bits))

    def next_int(self, bound: int) -> int:
        # Inlined copy of JavaRandomBase.next_int: the placers call this millions of times.
        if bound <= 0:
            raise ValueError(f"bound must be positive, got {bound}")
        state = (self._state * _MULTIPLIER + _ADDEND) & _MASK_48
        r = state >> 17  # next(31) is always non-negative
        m = bound - 1
        if bound & m == 0:
            self._state = state
            return (bound * r) >> 31
        u = r
        r = u % bound
        while u - r + m >= _INT_LIMIT:
            state = (state * _MULTIPLIER + _ADDEND) & _MASK_48
            u = state >> 17
            r = u % bound
        self._state = state
        return r

    def shuffle(self, items: list[T]) -> None:
        """``Collections.shuffle(items, this)``: ``java_shuffle`` with ``nextInt`` inlined (hot path)."""
        state = self._state
        for i in range(len(items), 1, -1):
            state = (state * _MULTIPLIER + _ADDEND) & _MASK_48
            u = state >> 17
            m = i - 1
            if i & m == 0:
                j = (i * u) >> 31
            else:
                j = u % i
                while u - j + m >= _INT_LIMIT:
                    state = (state * _MULTIPLIER + _ADDEND) & _MASK_48
                    u = state >> 17
                    j = u % i
            items[m], items[j] = items[j], items[m]
        self._state = state


def java_shuffle(items: list[T], random: RandomSource) -> None:
    """``Collections.shuffle(list, random)`` for a RandomAccess list, in place, bit for bit.

    Swaps position i-1 with ``random.next_int(i)`` for i from the size down to 2.
    """
    if type(random) is JavaRandom:
        random.shuffle(items)
        return
    for i in range(len(items), 1, -1):
        j = random.next_int(i)
        items[i - 1], items[j] = items[j], items[i - 1]
