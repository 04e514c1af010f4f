"""JavaRandom against java.util.Random (values produced by OpenJDK 17, tests/placement/data)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from placement import JavaRandom, JavaRandomBase, RandomSource, java_shuffle
from placement.rng import to_java_int

GOLDEN: dict[str, Any] = json.loads((Path(__file__).parent / "data" / "java_golden.json").read_text())


@pytest.mark.parametrize("case", GOLDEN["random_next_int"], ids=lambda c: f"seed{c['seed']}-bound{c['bound']}")
def test_next_int_matches_java(case: dict[str, Any]) -> None:
    random = JavaRandom(case["seed"])
    assert [random.next_int(case["bound"]) for _ in case["values"]] == case["values"]


@pytest.mark.parametrize("case", GOLDEN["random_next_int"][:10], ids=lambda c: f"bound{c['bound']}")
def test_base_class_next_int_is_the_same_algorithm(case: dict[str, Any]) -> None:
    """The inlined JavaRandom.next_int and the generic one over next_bits agree."""

    class Plain(JavaRandomBase):
        def __init__(self, seed: int) -> None:
            self.inner = JavaRandom(seed)

        def next_bits(self, bits: int) -> int:
            return self.inner.next_bits(bits)

    random = Plain(case["seed"])
    assert [random.next_int(case["bound"]) for _ in case["values"]] == case["values"]


def test_well_known_java_values() -> None:
    # new Random(0).nextInt() and new Random(42).nextLong(), as every JVM prints them.
    assert JavaRandom(0).next_int32() == -1155484576
    assert JavaRandom(42).next_int32() == -1170105035
    assert JavaRandom(0).next_long() == -4962768465676381896


def test_set_seed_restarts_the_sequence() -> None:
    random = JavaRandom(7)
    first = [random.next_int(1000) for _ in range(5)]
    random.set_seed(7)
    assert [random.next_int(1000) for _ in range(5)] == first


def test_rejection_loop_redraws_from_the_last_bucket() -> None:
    """nextInt(bound) rejects u when u - u % bound + (bound - 1) overflows a Java int."""

    class Scripted(JavaRandomBase):
        def __init__(self, draws: list[int]) -> None:
            self.draws = draws

        def next_bits(self, bits: int) -> int:
            assert bits == 31
            return self.draws.pop(0)

    bound = (1 << 30) + 1  # two full buckets fit in 2^31; draws >= 2 * bound are rejected
    source = Scripted([(1 << 31) - 1, 2 * bound, 5])
    assert source.next_int(bound) == 5
    assert source.draws == []


def test_power_of_two_bound_takes_the_high_bits() -> None:
    class Fixed(JavaRandomBase):
        def next_bits(self, bits: int) -> int:
            return (1 << 31) - 1

    assert Fixed().next_int(16) == 15


@pytest.mark.parametrize("bound", [0, -1])
def test_bound_must_be_positive(bound: int) -> None:
    with pytest.raises(ValueError, match="bound must be positive"):
        JavaRandom(1).next_int(bound)


@pytest.mark.parametrize("case", GOLDEN["shuffle"], ids=lambda c: f"seed{c['seed']}-n{c['size']}")
def test_shuffle_matches_collections_shuffle(case: dict[str, Any]) -> None:
    items = list(range(case["size"]))
    java_shuffle(items, JavaRandom(case["seed"]))
    assert items == case["result"]


def test_java_random_is_a_random_source() -> None:
    assert isinstance(JavaRandom(1), RandomSource)


def test_to_java_int_wraps() -> None:
    assert to_java_int(1 << 31) == -(1 << 31)
    assert to_java_int((1 << 32) + 5) == 5
    assert to_java_int(-1) == -1
