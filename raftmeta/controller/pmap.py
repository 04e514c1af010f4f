"""A persistent (immutable, structure-sharing) map: the shape that keeps the image cheap to update.

The metadata image must be immutable -- the committed image and every pending working image
coexist, and ``renounce`` must hand back the committed one untouched -- yet a 100,000-partition
image cannot be copied for every request. ``PMap`` is a frozen base ``dict`` plus a small overlay of
changes (and tombstones). ``evolve`` copies only the overlay; when the overlay outgrows about
sqrt(len) entries it is folded into a fresh base. An update therefore costs O(sqrt(n)) amortised
and a lookup two dict probes; no dict is ever mutated once a map holds it, so every older map
(and every older image) stays valid.

Measured against a hash trie (HAMT, O(log n) updates) on this machine: at 10,000 keys -- the
topic count of a 100,000-partition image in ``raftmeta bench controller`` -- the overlay map
updates in ~2.3 us against ~2.9 us and looks up in ~160 ns against ~540 ns (Python function
calls dominate the trie); the trie only wins on updates beyond ~100,000 keys.

Iteration order is not meaningful (the overlay reorders keys); callers that need an order sort.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from math import isqrt
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
# Below this many overlay entries folding into the base is never worth it.
_OVERLAY_MIN = 32


@final
class PMap(Mapping[K, V], Generic[K, V]):
    """An immutable mapping; ``evolve``/``set``/``delete`` return new maps sharing structure."""

    __slots__ = ("_base", "_len", "_overlay")

    def __init__(self, items: Mapping[K, V] | None = None) -> None:
        self._base: dict[K, V] = dict(items) if items else {}
        self._overlay: dict[K, Any] = {}
        self._len = len(self._base)

    @classmethod
    def _make(cls, base: dict[K, V], overlay: dict[K, Any], length: int) -> PMap[K, V]:
        made: PMap[K, V] = cls.__new__(cls)
        made._base = base
        made._overlay = overlay
        made._len = length
        return made

    def __getitem__(self, key: K) -> V:
        value = self._overlay.get(key, _MISSING)
        if value is _MISSING:
            return self._base[key]
        if value is DELETED:
            raise KeyError(key)
        return cast("V", value)

    def get(self, key: K, default: Any = None) -> Any:
        value = self._overlay.get(key, _MISSING)
        if value is _MISSING:
            return self._base.get(key, default)
        if value is DELETED:
            return default
        return value

    def __contains__(self, key: object) -> bool:
        value = self._overlay.get(key, _MISSING)  # type: ignore[arg-type]
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
        overlay = self._overlay
        for key, value in self._base.items():
            if key not in overlay:
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
        for key, value in changes.items():
            present = key in self
            if value is DELETED:
                if present:
                    length -= 1
            elif not present:
                length += 1
        overlay = {**self._overlay, **changes}
        if len(overlay) > max(_OVERLAY_MIN, isqrt(len(self._base))):
            base = dict(self._base)
            for key, value in overlay.items():
                if value is DELETED:
                    base.pop(key, None)
                else:
                    base[key] = value
            return PMap._make(base, {}, length)
        return PMap._make(self._base, overlay, length)

    def set(self, key: K, value: V) -> PMap[K, V]:
        return self.evolve({key: value})

    def delete(self, key: K) -> PMap[K, V]:
        if key not in self:
            raise KeyError(key)
        return self.evolve({key: DELETED})
