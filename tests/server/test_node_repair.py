"""The node carries out the core's repairs (Ready.repair) through its disk, on in-memory twins
(tests/server/twins.py): a damaged batch reported on start is overwritten with a peer's intact
copy, and a batch no voter holds intact stops the node with UnrepairableEntryError, its disk
unchanged (docs/storage.md, "Repair from the quorum"). The same on real processes and files:
tests/integration/test_damaged_log.py."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from raftmeta.raft import Entry, UnrecoverableStateError, UnrepairableEntryError
from raftmeta.server.node import Node
from tests.server.test_node_twins import WAIT_S, Cluster, create, register_broker, until
from tests.server.twins import MemoryDisk


def damage(disk: MemoryDisk, index: int) -> Entry:
    """Flip a bit in the ``index``-th batch of ``disk`` (in its records: the CRC no longer matches)."""
    entry = disk.entries[index]
    data = bytearray(entry.data)
    data[-3] ^= 0x10
    disk.entries[index] = Entry(entry.base_offset, entry.epoch, entry.next_offset, bytes(data))
    disk.damaged.add(entry.base_offset)
    return entry


async def committed_cluster(tmp_path: Path) -> tuple[Cluster, Node]:
    cluster = Cluster((1, 2, 3), tmp_path)
    for node_id in cluster.voters:
        await cluster.start(node_id)
    leader = await cluster.leader()
    await register_broker(leader, 0)
    for name in ("a", "b", "c"):
        await asyncio.wait_for(leader.submit_admin("CreateTopics", create(name)), WAIT_S)
    end = leader.core.high_watermark
    await until(lambda: all(n.core.high_watermark >= end for n in cluster.nodes.values()), "every node committed")
    return cluster, leader


@pytest.mark.asyncio
async def test_a_follower_repairs_a_damaged_batch_from_the_leader_in_place(tmp_path: Path) -> None:
    cluster, leader = await committed_cluster(tmp_path)
    try:
        follower = next(node_id for node_id, node in cluster.nodes.items() if node is not leader)
        assert await cluster.stop(follower) is None
        disk = cluster.disks[follower]
        intact = damage(disk, len(disk.entries) // 2)

        restarted = await cluster.start(follower)
        assert restarted.core.damaged == {intact.base_offset}
        await until(lambda: not disk.damaged, "the damaged batch repaired")
        assert disk.entries[len(disk.entries) // 2] == intact, "the leader's copy, in the same slot"
        assert restarted.core.repairs == 1 and not restarted.core.damaged
        await until(lambda: restarted.controller.image.topic_by_name("c") is not None, "applied past the repair")
        exposition = generate_latest(restarted.metrics.registry).decode()
        assert "raftmeta_raft_repairs_total 1.0" in exposition.splitlines()
        assert "raftmeta_raft_damaged_batches 0.0" in exposition.splitlines()
    finally:
        for node_id in list(cluster.nodes):
            await cluster.stop(node_id)


@pytest.mark.asyncio
async def test_a_batch_no_voter_holds_intact_stops_the_node_loudly_and_cuts_nothing(tmp_path: Path) -> None:
    cluster, leader = await committed_cluster(tmp_path)
    try:
        index = len(cluster.disks[leader.node_id].entries) // 2
        for node_id in cluster.voters:
            assert await cluster.stop(node_id) is None
            damage(cluster.disks[node_id], index)
        kept = {node_id: list(disk.entries) for node_id, disk in cluster.disks.items()}
        for node_id in cluster.voters:
            await cluster.start(node_id)

        await until(lambda: any(r.done() for r in cluster.runners.values()), "a node stopped")
        stopped = next(node_id for node_id, runner in cluster.runners.items() if runner.done())
        error = cluster.runners[stopped].exception()
        assert isinstance(error, UnrepairableEntryError), error
        assert f"holds a damaged batch at offset {kept[stopped][index].base_offset}" in str(error)
        assert cluster.disks[stopped].entries[: len(kept[stopped])] == kept[stopped], "nothing cut or overwritten"
        assert cluster.disks[stopped].damaged == {kept[stopped][index].base_offset}
    finally:
        for node_id in list(cluster.nodes):
            await cluster.stop(node_id)


@pytest.mark.asyncio
async def test_every_voter_without_the_state_below_its_log_stops_loudly(tmp_path: Path) -> None:
    """Every voter's newest snapshot damaged with no fallback (each log starts at its snapshot's
    end): the damaged-entries gauge counts the missing state, and the nodes, each learning that
    no voter can be elected to send it, stop with UnrecoverableStateError, their logs unchanged."""
    cluster = Cluster((1, 2, 3), tmp_path, snapshot_interval_records=4)
    try:
        for node_id in cluster.voters:
            await cluster.start(node_id)
        leader = await cluster.leader()
        await register_broker(leader, 0)
        for name in ("a", "b", "c", "d", "e"):
            await asyncio.wait_for(leader.submit_admin("CreateTopics", create(name)), WAIT_S)
        end = leader.core.high_watermark
        await until(lambda: all(n.core.high_watermark >= end for n in cluster.nodes.values()), "every node committed")
        await until(lambda: all(d.snapshot is not None for d in cluster.disks.values()), "every node snapshotted")
        kept: dict[int, list[Entry]] = {}
        for node_id in cluster.voters:
            assert await cluster.stop(node_id) is None
            disk = cluster.disks[node_id]
            snapshot = disk.snapshot
            assert snapshot is not None
            disk.missing_snapshot = (snapshot.end_offset, snapshot.epoch)
            disk.snapshot, disk.snapshot_records = None, []
            disk.entries = [e for e in disk.entries if e.base_offset >= snapshot.end_offset]
            kept[node_id] = list(disk.entries)
        for node_id in cluster.voters:
            node = await cluster.start(node_id)
            exposition = generate_latest(node.metrics.registry).decode()
            assert "raftmeta_raft_damaged_batches 1.0" in exposition.splitlines(), "the missing state counts"

        await until(lambda: all(r.done() for r in cluster.runners.values()), "every node stopped")
        for node_id, runner in cluster.runners.items():
            error = runner.exception()
            assert isinstance(error, UnrecoverableStateError), error
            # The first to stop heard every other voter; the next ones a majority, the rest silent.
            assert node_id in error.missing and len(error.missing) >= 2 and error.holding == []
            assert set(error.missing) | set(error.silent) == {1, 2, 3}
            assert cluster.disks[node_id].entries == kept[node_id], "nothing cut or overwritten"
    finally:
        for node_id in list(cluster.nodes):
            await cluster.stop(node_id)
