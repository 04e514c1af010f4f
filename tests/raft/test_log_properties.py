"""Property test: the log view's epoch index agrees with a naive recomputation after any
sequence of appends, truncations and snapshot trims (h2-style: every input, every state)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from raftmeta.raft.log import Entry, LogView, OffsetAndEpoch, Validation
from raftmeta.records.codec import encode_batch

Op = tuple[str, int, int]
ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(0, 2), st.integers(1, 3)),  # epoch bump, record count
        st.tuples(st.just("truncate"), st.integers(0, 40), st.just(0)),
        st.tuples(st.just("trim"), st.integers(0, 40), st.just(0)),
    ),
    max_size=40,
)


def naive_end_offset_for_epoch(view: LogView, epoch: int) -> OffsetAndEpoch | None:
    entries = view.entries()
    epochs = [view.start_epoch] + [e.epoch for e in entries]
    candidates = [e for e in epochs if e <= epoch]
    if not candidates:
        return None
    best = max(candidates)
    ends = [e.next_offset for e in entries if e.epoch == best]
    later = [e.base_offset for e in entries if e.epoch > best]
    if ends:
        return OffsetAndEpoch(max(ends), best)
    return OffsetAndEpoch(min(later) if later else view.end_offset, best)


@settings(max_examples=300, deadline=None)
@given(ops)
def test_epoch_index_matches_a_naive_model(operations: list[Op]) -> None:
    view = LogView()
    for kind, a, b in operations:
        if kind == "append":
            base = view.end_offset
            epoch = max(1, view.last_epoch + a)
            view.append(Entry(base, epoch, base + b, encode_batch(base, epoch, [b"r"] * b, 0)))
        elif kind == "truncate":
            offset = view.start_offset + a % (view.end_offset - view.start_offset + 1)
            new_end = view.truncate_to(offset)
            assert view.start_offset <= new_end <= offset
            assert new_end == view.end_offset
        else:
            boundaries = [view.start_offset] + [e.next_offset for e in view.entries()]
            offset = boundaries[a % len(boundaries)]
            before = view.entry_before(offset) if offset > view.start_offset else None
            view.trim_prefix(offset, before.epoch if before else view.start_epoch)
        for epoch in range(view.last_epoch + 3):
            assert view.end_offset_for_epoch(epoch) == naive_end_offset_for_epoch(view, epoch)
        # A fetcher whose log equals ours is always VALID; one that claims more diverges.
        assert view.validate_offset_and_epoch(view.end_offset, view.last_epoch).kind is Validation.VALID
        if view.end_offset > view.start_offset:
            assert view.validate_offset_and_epoch(view.end_offset + 1, view.last_epoch).kind is Validation.DIVERGING
