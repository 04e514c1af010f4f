"""The epoch index against a brute-force model: one epoch per offset, answers by scanning."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from raftmeta.storage.epoch_index import EpochIndex


def brute_end_offset_for(epochs: list[int], start: int, floor: tuple[int, int] | None, epoch: int) -> tuple[int, int]:
    """``epochs[i]`` is the epoch of offset ``start + i``."""
    end = start + len(epochs)
    known = [e for e in epochs if e <= epoch]
    if known:
        best = max(known)
        later = [start + i for i, e in enumerate(epochs) if e > best]
        return best, min(later) if later else end
    if floor is not None and floor[1] <= epoch:
        return floor[1], floor[0]
    return -1, -1


def test_kafka_examples() -> None:
    index = EpochIndex()
    index.assign(1, 0)
    index.assign(1, 5)  # same epoch: no new entry
    index.assign(3, 10)
    index.assign(4, 20)
    assert index.end_offset_for(0, 30) == (-1, -1)
    assert index.end_offset_for(1, 30) == (1, 10)
    assert index.end_offset_for(2, 30) == (1, 10)
    assert index.end_offset_for(3, 30) == (3, 20)
    assert index.end_offset_for(9, 30) == (4, 30)
    index.truncate_from_start(15)
    assert [(e.epoch, e.start_offset) for e in index.entries] == [(3, 15), (4, 20)]
    index.truncate_from_end(20)
    assert index.last_epoch == 3


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_matches_a_brute_force_model(data: st.DataObject) -> None:
    index = EpochIndex()
    epochs: list[int] = []  # the model: the epoch of every offset from `start`
    start = 0
    floor: tuple[int, int] | None = None
    for _ in range(data.draw(st.integers(1, 25))):
        op = data.draw(st.sampled_from(["append", "append", "append", "truncate_end", "truncate_start"]))
        end = start + len(epochs)
        last = epochs[-1] if epochs else (floor[1] if floor else 0)
        if op == "append":
            epoch = last + data.draw(st.integers(0, 2))
            count = data.draw(st.integers(1, 4))
            index.assign(epoch, end)
            epochs += [epoch] * count
        elif op == "truncate_end":
            to = data.draw(st.integers(start, end))
            index.truncate_from_end(to)
            del epochs[to - start :]
        else:
            to = data.draw(st.integers(start, end))
            if to > 0 and to > start:
                floor = (to, epochs[to - start - 1])
                index.floor = floor
            index.truncate_from_start(to)
            del epochs[: to - start]
            start = to
        end = start + len(epochs)
        for probe in range((max(epochs) if epochs else 0) + 3):
            assert index.end_offset_for(probe, end) == brute_end_offset_for(epochs, start, floor, probe), probe
        for offset in range(start, end):
            assert index.epoch_for_offset(offset) == epochs[offset - start]
        expected_last = epochs[-1] if epochs else (floor[1] if floor else 0)
        assert index.last_epoch == expected_last
