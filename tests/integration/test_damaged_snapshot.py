"""A real follower whose every snapshot is damaged and whose log no longer reaches back to offset
0 (docs/storage.md, "Repair from the quorum", "A damaged snapshot"; issue 45).

No file of the node holds the state below its log: no older intact snapshot to fall back on, and
the segments below its snapshots are deleted. Today the start is refused loudly, naming the
snapshot, with every file kept as it was (the designed repair, fetching the leader's snapshot
with the log kept, is described in docs/storage.md and not built yet). This test builds the case
on real processes and pins the part of the rule that holds already: refused, never deleted.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from raftmeta import local_quorum
from raftmeta.client import RetryPolicy, SyncControllerClient
from raftmeta.storage.datadir import log_dir
from raftmeta.v1 import errors_pb2
from tests.integration.test_damaged_log import stop
from tests.integration.test_node import create, leader_of, wait_until
from tests.integration.test_snapshots import (
    FIRST_SEGMENT,
    SNAPSHOT_NODE_ARGS,
    segment_files,
    snapshot_files,
    start,
)
from tests.integration.test_snapshots import stop as stop_quorum

pytestmark = pytest.mark.integration


@pytest.fixture
def snapshotting(tmp_path: Path) -> Iterator[local_quorum.LocalQuorum]:
    """A quorum that snapshots every 25 records and deletes 1 KiB segments below its snapshots."""
    started = start(tmp_path / "q", SNAPSHOT_NODE_ARGS)
    try:
        yield started
    finally:
        stop_quorum(tmp_path / "q")


def files_of(data_dir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(data_dir)): p.read_bytes() for p in sorted(data_dir.rglob("*")) if p.is_file()}


def test_every_snapshot_damaged_with_no_log_below_is_refused_loudly_and_nothing_is_deleted(
    snapshotting: local_quorum.LocalQuorum,
) -> None:
    quorum = snapshotting
    with SyncControllerClient(quorum.bootstrap_server, retry=RetryPolicy(deadline_s=20)) as client:
        follower = next(n for n in quorum.nodes if n.id != leader_of(client))
        count = 0

        def snapshotted_past_offset_0() -> bool:
            nonlocal count
            count += 1
            assert create(client, f"t{count}").error_code == errors_pb2.NONE
            return snapshot_files(follower) != [] and FIRST_SEGMENT not in segment_files(follower)

        wait_until(snapshotted_past_offset_0, timeout_s=120, what=f"node {follower.id} deleting its first segment")
    stop(quorum, follower.id)
    data_dir = Path(follower.data_dir)
    snapshots = sorted(log_dir(data_dir).glob("*.checkpoint"))
    assert snapshots
    for path in snapshots:  # one flipped bit in each, in the middle: inside its records
        damaged = bytearray(path.read_bytes())
        damaged[len(damaged) // 2] ^= 0x10
        path.write_bytes(damaged)
    before = files_of(data_dir)

    refused = subprocess.run(follower.argv, capture_output=True, text=True, timeout=120, check=False)
    assert refused.returncode == 1, refused.stderr[-3000:]
    assert str(snapshots[-1]) in refused.stderr, refused.stderr[-3000:]
    assert "refusing to start" in refused.stderr
    assert files_of(data_dir) == before, "the refusal changed no file: the damaged snapshots are kept"
