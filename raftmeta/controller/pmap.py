"""A persistent (immutable, structure-sharing) map: the shape that keeps the image cheap to update.

The metadata image must be immutable -- the committed image and every pending working image
coexist, and ``renounce`` must hand back the committed one untouched -- yet a 100,000-partition
image cannot be copied for every request. ``PMap`` is a frozen base ``dict`` under two small
layers of changes (and tombstones): ``evolve`` copies only the top layer (about cbrt(len)
entries); when the top layer is full it is merged into the middle one (about len^(2/3)), and
when that is full it is folded into a fresh base. An update therefore costs O(cbrt(n))
amortised and a lookup at most three dict probes; no dict is ever mutated once a map holds it,
so every older map (and every older image) stays valid.

Measured on this machine at 25,000 keys (a controller under create load changes four such maps
per request, and copying a layer touches every value it holds): a single layer of sqrt(len)
changes cost ~4.6 us per update, the two layers ~2 us, for ~30 ns more per lookup. Against a
hash trie (HAMT, O(log n) updates) at 10,000 keys the single layer already updated in ~2.3 us
against ~2.9 us and looked up in ~160 ns against ~540 ns (Python function calls dominate the
trie).

Iteration order is not meaningful (the layers reorder keys); callers that need an order sort.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from math import cbrt
from typing import Any, Generic, TypeVar, cast, final

K = TypeVar("K")
V = TypeVar("V")


class _Tombstone:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<deleted>"


# Passed as a value to ``evolve`` to delete a key (and stored in overlays as a tombstone).
DELETED: Any = _Tombstone()
_MISSING: Any = object()
# Below this many entries in the top layer merging it down is never worth it.
_OVERLAY_MIN = 32
# The middle layer holds up to this many times cbrt(len)^2 entries (tuned on this machine).
_MID_FACTOR = 4


def _cbrt(n: int) -> int:
    return round(cbrt(n))


@final
class PMap(Mapping[K, V], Generic[K, V]):
    """An immutable mapping; ``evolve``/``set``/``delete`` return new maps sharing structure."""

    __slots__ = ("_base", "_len", "_mid", "_overlay")

    def __init__(self, items: Mapping[K, V] | None = None) -> None:
        self._base: dict[K, V] = dict(items) if items else {}
        self._mid: dict[K, Any] = {}
        self._overlay: dict[K, Any] = {}
        self._len = len(self._base)

    @classmethod
    def _make(cls, base: dict[K, V], mid: dict[K, Any], overlay: dict[K, Any], length: int) -> PMap[K, V]:
        made: PMap[K, V] = cls.__new__(cls)
        made._base = base
        made._mid = mid
        made._overlay = overlay
        made._len = length
        return made

    def _find(self, key: Any) -> Any:
        """The value, DELETED, or _MISSING; the top layer shadows the middle one, which shadows the base."""
        value = self._overlay.get(key, _MISSING)
        if value is _MISSING:
            value = self._mid.get(key, _MISSING)
            if value is _MISSING:
                return self._base.get(key, _MISSING)
        return value

    def __getitem__(self, key: K) -> V:
        value = self._overlay.get(key, _MISSING)
        if value is _MISSING:
            value = self._mid.get(key, _MISSING)
            if value is _MISSING:
                return self._base[key]
        if value is DELETED:
            raise KeyError(key)
        return cast("V", value)

    def get(self, key: K, default: Any = None) -> Any:
        value = self._overlay.get(key, _MISSING)
        if value is _MISSING:
            value = self._mid.get(key, _MISSING)
            if value is _MISSING:
                return self._base.get(key, default)
        if value is DELETED:
            return default
        return value

    def __contains__(self, key: object) -> bool:
        value = self._overlay.get(key, _MISSING)  # type: ignore[arg-type]
        if value is _MISSING:
            value = self._mid.get(key, _MISSING)  # type: ignore[arg-type]
            if value is _MISSING:
                return key in self._base
        return value is not DELETED

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[K]:
        for key, _ in self.iter_items():
            yield key

    def iter_items(self) -> Iterator[tuple[K, V]]:
        """(key, value) pairs in one pass (``items()`` is the Mapping view, which looks every key
        up again)."""
        overlay, mid = self._overlay, self._mid
        for key, value in self._base.items():
            if key not in overlay and key not in mid:
                yield key, value
        for key, value in mid.items():
            if key not in overlay and value is not DELETED:
                yield key, value
        for key, value in overlay.items():
            if value is not DELETED:
                yield key, value

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Mapping):
            return NotImplemented
        if len(self) != len(other):
            return False
        missing = object()
        return all(other.get(key, missing) == value for key, value in self.iter_items())

    def __hash__(self) -> int:  # Mappings are unhashable; keep it explicit for the frozen image.
        raise TypeError("PMap is not hashable")

    def __repr__(self) -> str:
        return f"PMap({dict(self.iter_items())!r})"

    def evolve(self, changes: Mapping[K, Any]) -> PMap[K, V]:
        """A new map with ``changes`` applied; a value of ``DELETED`` removes the key."""
        if not changes:
            return self
        length = self._len
        overlay, mid, base = self._overlay, self._mid, self._base
        for key, value in changes.items():
            # _find inlined: a batch of creates changes dozens of keys per map.
            old = overlay.get(key, _MISSING)
            if old is _MISSING:
                old = mid.get(key, _MISSING)
                if old is _MISSING:
                    old = base.get(key, _MISSING)
            present = old is not _MISSING and old is not DELETED
            if value is DELETED:
                if present:
                    length -= 1
            elif not present:
                length += 1
        overlay = {**self._overlay, **changes}
        root = _cbrt(len(self._base))
        if len(overlay) <= max(_OVERLAY_MIN, root):
            return PMap._make(self._base, self._mid, overlay, length)
        # The top layer is full: merge it into the middle one (tombstones stay: they hide base keys).
        mid = {**self._mid, **overlay}
        if len(mid) <= max(2 * _OVERLAY_MIN, _MID_FACTOR * root * root):
            return PMap._make(self._base, mid, {}, length)
        base = dict(self._base)
        for key, value in mid.items():
            if value is DELETED:
                base.pop(key, None)
            else:
                base[key] = value
        return PMap._make(base, {}, {}, length)

    def set(self, key: K, value: V) -> PMap[K, V]:
        return self.evolve({key: value})

    def delete(self, key: K) -> PMap[K, V]:
        if key not in self:
            raise KeyError(key)
        return self.evolve({key: DELETED})
