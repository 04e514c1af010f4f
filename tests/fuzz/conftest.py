"""Decoder cases damage thousands of logs on purpose: no fsync, no recovery warnings."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from raftmeta.fuzz.decoder import quiet_storage_logs, without_fsync


@pytest.fixture
def quiet_disk() -> Iterator[None]:
    with quiet_storage_logs(), without_fsync():
        yield
