"""Shared helpers for the storage tests."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from raftmeta.storage.log import SegmentLog
from raftmeta.v1 import records_pb2


def topic_record(name: str) -> bytes:
    return records_pb2.MetadataRecord(
        topic=records_pb2.TopicRecord(name=name, topic_id=bytes(range(16)))
    ).SerializeToString()


def records_for(base: int, count: int) -> list[bytes]:
    return [topic_record(f"t{base + i}") for i in range(count)]


@pytest.fixture
def make_records() -> Callable[[int, int], list[bytes]]:
    return records_for


@pytest.fixture
def no_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make fsync a no-op, for tests that reopen a log thousands of times to check what recovery
    *reads*: durability is not under test there (no crash happens), and on a shared machine an
    fsync can take milliseconds."""
    monkeypatch.setattr(os, "fsync", lambda fd: None)


@pytest.fixture
def open_log(tmp_path: Path) -> Callable[..., SegmentLog]:
    """Open a small-segment log in tmp_path/log (kwargs override the defaults)."""

    def opener(**kwargs: object) -> SegmentLog:
        options: dict[str, object] = {"segment_bytes": 4096, "index_interval_bytes": 256}
        options.update(kwargs)
        return SegmentLog.open(tmp_path / "log", **options)  # type: ignore[arg-type]

    return opener


def simulate_crash(log: SegmentLog) -> None:
    """Simulate a process crash: close the files without flushing or writing indexes."""
    for seg in log._segments:
        seg.close()
    log._closed = True


@pytest.fixture
def crash() -> Callable[[SegmentLog], None]:
    return simulate_crash
