"""The Java semantics Kafka's placers depend on: ``String.hashCode``, ``String.compareTo`` and
the iteration order of a ``java.util.HashMap``.

Kafka's striped placer initializes and reshuffles its racks while iterating a
``HashMap<Optional<String>, Rack>``, and every rack draws random numbers; the order of those
draws (and so the assignment) follows the map's bucket order, not the sorted rack names.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from typing import TypeVar

K = TypeVar("K", bound=Hashable)

_INITIAL_CAPACITY = 16  # HashMap's DEFAULT_INITIAL_CAPACITY; the table is made on the first put
_LOAD_FACTOR_NUM, _LOAD_FACTOR_DEN = 3, 4  # DEFAULT_LOAD_FACTOR 0.75


def java_string_hash(value: str) -> int:
    """``String.hashCode()``: s[0]*31^(n-1) + ... + s[n-1] over UTF-16 code units, as a Java int."""
    h = 0
    if value.isascii():
        for ch in value.encode("ascii"):
            h = (31 * h + ch) & 0xFFFFFFFF
    else:
        data = value.encode("utf-16-be")
        for i in range(0, len(data), 2):
            h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= (1 << 31) else h


def optional_string_hash(value: str | None) -> int:
    """``Optional<String>.hashCode()``: 0 when empty, else the string's hash."""
    return 0 if value is None else java_string_hash(value)


def java_string_key(value: str) -> bytes:
    """A sort key ordering strings as ``String.compareTo`` does (by UTF-16 code unit).

    Python compares code points, which differs from Java for characters above U+FFFF
    (surrogate pairs sort below U+E000..U+FFFF in Java).
    """
    return value.encode("utf-16-be", "surrogatepass")


def optional_string_key(value: str | None) -> tuple[int, bytes]:
    """Kafka's ``OptionalStringComparator``: the empty rack first, then ``String.compareTo``."""
    return (0, b"") if value is None else (1, java_string_key(value))


def _spread(h: int) -> int:
    """``HashMap.hash``: XOR the high half into the low half (on the unsigned 32-bit value)."""
    h &= 0xFFFFFFFF
    return h ^ (h >> 16)


def hashmap_capacity(size: int) -> int:
    """The table length of a default HashMap after ``size`` distinct puts."""
    capacity = _INITIAL_CAPACITY
    # resize() doubles the table once ++size exceeds the threshold (capacity * 0.75).
    while size > capacity * _LOAD_FACTOR_NUM // _LOAD_FACTOR_DEN:
        capacity *= 2
    return capacity


def hashmap_order(keys: Sequence[K], hashes: Iterable[int]) -> list[K]:
    """The iteration order of a default ``HashMap`` built by putting ``keys`` in this order.

    Iteration walks the buckets in index order; inside a bucket, entries keep insertion order
    (new entries go to the tail, and a resize splits each bucket preserving relative order).
    Not modelled: a bucket turned into a red-black tree (8+ colliding keys in a table of 64+
    buckets), which needs dozens of rack names with colliding hashes.
    """
    mask = hashmap_capacity(len(keys)) - 1
    buckets = [_spread(h) & mask for h in hashes]
    order = sorted(range(len(keys)), key=lambda i: (buckets[i], i))
    return [keys[i] for i in order]
