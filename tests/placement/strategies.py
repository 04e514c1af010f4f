"""Hypothesis strategies: random clusters (racks, fenced brokers, ids) and placement requests."""

from __future__ import annotations

from hypothesis import strategies as st

from placement import UsableBroker


@st.composite
def clusters(draw: st.DrawFn, max_racks: int = 5, max_per_rack: int = 6, fenced: bool = True) -> list[UsableBroker]:
    """A cluster with at least one unfenced broker; racks may be absent (all None) or unequal."""
    racked = draw(st.booleans())
    num_racks = draw(st.integers(1, max_racks)) if racked else 1
    sizes = [draw(st.integers(1, max_per_rack)) for _ in range(num_racks)]
    ids = draw(st.lists(st.integers(0, 500), min_size=sum(sizes), max_size=sum(sizes), unique=True))
    out: list[UsableBroker] = []
    position = 0
    for rack_index, size in enumerate(sizes):
        for _ in range(size):
            rack = f"rack-{rack_index}" if racked else None
            is_fenced = fenced and draw(st.integers(0, 4)) == 0
            out.append(UsableBroker(ids[position], rack, fenced=is_fenced))
            position += 1
    if all(b.fenced for b in out):
        out[0] = UsableBroker(out[0].id, out[0].rack)
    return draw(st.permutations(out))


@st.composite
def equal_rack_clusters(draw: st.DrawFn) -> list[UsableBroker]:
    """Every rack has the same number of brokers, none fenced: the balanced placer's ±1 case."""
    num_racks = draw(st.integers(1, 5))
    per_rack = draw(st.integers(1, 6))
    ids = draw(st.lists(st.integers(0, 500), min_size=num_racks * per_rack, max_size=num_racks * per_rack, unique=True))
    return [UsableBroker(broker_id, f"rack-{i % num_racks}") for i, broker_id in enumerate(ids)]


def racks_with_unfenced(cluster: list[UsableBroker]) -> int:
    return len({b.rack for b in cluster if not b.fenced})


def every_rack_has_unfenced(cluster: list[UsableBroker]) -> bool:
    return {b.rack for b in cluster} == {b.rack for b in cluster if not b.fenced}
