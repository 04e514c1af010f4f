"""One SparkSession for the whole test run (JVM start-up costs ~5-10 s on this machine)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    from raftmeta.jobs.session import build_session

    local_dir: Path = tmp_path_factory.mktemp("spark-local")
    session = build_session("local[2]", app_name="raftmeta-tests", local_dir=str(local_dir), driver_memory="1g")
    yield session
    session.stop()
