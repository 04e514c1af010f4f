"""The pinned Apache Kafka release is resolved and runs: every check held against real Kafka needs it.

Without it these fail loudly (``make kafka`` resolves it); they never skip.
"""

from __future__ import annotations

import base64
import re
import subprocess

import pytest

from raftmeta.kraft.classpath import KafkaNotResolved, java_executable, kafka_classpath, kafka_version

pytestmark = pytest.mark.kraft


def test_the_pinned_release_is_resolved() -> None:
    assert re.fullmatch(r"4\.\d+\.\d+", kafka_version()), kafka_version()


def test_kafkas_storage_tool_runs_from_the_resolved_jars() -> None:
    # kafka-storage random-uuid: Kafka's own code, started the way the launcher starts it.
    done = subprocess.run(
        [java_executable(), "-cp", kafka_classpath(), "kafka.tools.StorageTool", "random-uuid"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    cluster_id = done.stdout.strip().splitlines()[-1]
    # A Kafka Uuid: 16 bytes, URL-safe base64 without padding.
    assert len(base64.urlsafe_b64decode(cluster_id + "==")) == 16, done.stdout


def test_a_missing_release_is_one_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    monkeypatch.setenv("RAFTMETA_KAFKA_LIB", str(tmp_path))
    with pytest.raises(KafkaNotResolved, match=r"make kafka"):
        kafka_classpath()
