"""Java String hashing/ordering and HashMap iteration order, against OpenJDK 17."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from placement.javacompat import (
    hashmap_capacity,
    hashmap_order,
    java_string_hash,
    java_string_key,
    optional_string_hash,
    optional_string_key,
)

GOLDEN: dict[str, Any] = json.loads((Path(__file__).parent / "data" / "java_golden.json").read_text())


def test_string_hash_code() -> None:
    # "hello".hashCode() == 99162322; "polygenelubricants".hashCode() == Integer.MIN_VALUE
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(1 << 31)
    assert java_string_hash("") == 0
    assert optional_string_hash(None) == 0


def test_string_hash_uses_utf16_code_units() -> None:
    # U+1F600 is the surrogate pair D83D DE00 in Java: 0xD83D * 31 + 0xDE00.
    assert java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00


def test_compare_to_orders_by_utf16_code_unit() -> None:
    # Java: "\uFFFF".compareTo("\uD83D\uDE00") > 0, while Python's code-point order says <.
    assert "\uffff" < "\U0001f600"
    assert java_string_key("\uffff") > java_string_key("\U0001f600")
    assert sorted(["b", "a", "ab", ""], key=java_string_key) == ["", "a", "ab", "b"]


def test_empty_rack_sorts_first() -> None:
    assert sorted(["b", None, "a"], key=optional_string_key) == [None, "a", "b"]


def test_capacity_doubles_past_three_quarters() -> None:
    assert hashmap_capacity(0) == 16
    assert hashmap_capacity(12) == 16
    assert hashmap_capacity(13) == 32
    assert hashmap_capacity(25) == 64


@pytest.mark.parametrize("case", GOLDEN["hashmap_order"], ids=lambda c: f"{len(c['keys'])}keys")
def test_hashmap_iteration_order_matches_java(case: dict[str, Any]) -> None:
    keys: list[str | None] = case["keys"]
    assert hashmap_order(keys, [optional_string_hash(k) for k in keys]) == case["order"]
