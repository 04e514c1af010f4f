"""The node freezes its heap as the committed image grows (raftmeta.server.heap)."""

from __future__ import annotations

import gc
import platform

import pytest

from raftmeta.server import heap


class Log:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, object]]] = []

    def info(self, event: str, **fields: object) -> None:
        self.events.append((event, fields))


def test_the_heap_is_frozen_each_time_the_log_grew_by_the_step(monkeypatch: pytest.MonkeyPatch) -> None:
    frozen: list[str] = []
    monkeypatch.setattr(heap, "freeze_heap", lambda log, why: frozen.append(why))
    growth = heap.HeapFreezer(every=100)
    log = Log()
    for offset in (10, 99):
        growth.committed(offset, log)
    assert frozen == []
    growth.committed(100, log)
    assert frozen == ["image grew"]
    growth.committed(150, log)
    assert frozen == ["image grew"], "counted from the last freeze"
    growth.committed(200, log)
    assert len(frozen) == 2


def test_a_named_freeze_restarts_the_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """A snapshot's freeze (or the start-up replay's) is not followed by another for the same
    records."""
    frozen: list[str] = []
    monkeypatch.setattr(heap, "freeze_heap", lambda log, why: frozen.append(why))
    freezer = heap.HeapFreezer(every=100)
    log = Log()
    freezer.freeze(250, log, "snapshot taken")
    freezer.committed(300, log)
    assert frozen == ["snapshot taken"]
    freezer.committed(350, log)
    assert frozen == ["snapshot taken", "image grew"]


def test_freezing_logs_its_reason_and_duration() -> None:
    log = Log()
    try:
        heap.freeze_heap(log, "test")
        [(event, fields)] = log.events
        assert event == "heap frozen" and fields["reason"] == "test"
        assert isinstance(fields["ms"], float) and fields["ms"] >= 0
    finally:
        gc.unfreeze()


def test_named_freezes_after_big_transients_release_free_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    trims: list[int] = []

    def trim(pad: int) -> int:
        trims.append(pad)
        return 1

    monkeypatch.setattr(heap, "freeze_heap", lambda log, why: None)
    monkeypatch.setattr(heap, "_TRIM", trim)
    freezer = heap.HeapFreezer(every=100)
    log = Log()
    freezer.committed(100, log)
    freezer.freeze(150, log, "snapshot taken", release=True)
    assert trims == [0], "only the freeze that asked released memory"
    [(event, fields)] = log.events
    assert event == "free memory released" and fields["reason"] == "snapshot taken"


def test_malloc_trim_is_found_on_glibc() -> None:
    found = heap._malloc_trim()
    assert (found is not None) == (platform.libc_ver()[0] == "glibc")
    if found is not None:
        found(0)  # returns whether memory was released: either is fine


def test_the_collector_is_paused_while_an_image_is_built_and_restored_after() -> None:
    """collector_paused: off inside (also when the build raises), as it was before after."""
    assert gc.isenabled()
    with heap.collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), heap.collector_paused():
        raise RuntimeError("a snapshot that does not replay")
    assert gc.isenabled()
    gc.disable()
    try:
        with heap.collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # off before: stays off
    finally:
        gc.enable()
