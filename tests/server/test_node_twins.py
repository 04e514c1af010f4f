"""Nodes on in-memory twins of their disk and peers (tests/server/twins.py): the real node task
-- inbox, futures, group commit, the QuorumController -- with no files and no sockets. Every wait
is a bound on the node tasks' progress, never a timing assertion."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from raftmeta.controller.errors import NotControllerError
from raftmeta.server.config import NodeConfig
from raftmeta.server.node import Node
from raftmeta.v1 import controller_pb2, errors_pb2, raft_pb2
from tests.server.twins import MemoryDisk, MemoryNetwork

WAIT_S = 30.0
POLL_S = 0.005
# Addresses are only used by the leader probe: nothing listens on port 1.
NOWHERE = "127.0.0.1:1"


async def until(predicate: Callable[[], bool], what: str) -> None:
    """Let the node tasks run until ``predicate()`` holds."""
    for _ in range(int(WAIT_S / POLL_S)):
        if predicate():
            return
        await asyncio.sleep(POLL_S)
    raise AssertionError(f"not reached within {WAIT_S} s: {what}")


class Cluster:
    def __init__(self, voters: tuple[int, ...], data_dir: Path, *, snapshot_interval_records: int = 10_000) -> None:
        self.voters = voters
        self.snapshot_interval_records = snapshot_interval_records
        self.data_dir = data_dir  # never written: every node has a MemoryDisk
        self.network = MemoryNetwork()
        self.disks = {node_id: MemoryDisk() for node_id in voters}
        self.nodes: dict[int, Node] = {}
        self.runners: dict[int, asyncio.Task[None]] = {}

    async def start(self, node_id: int) -> Node:
        config = NodeConfig(
            node_id=node_id,
            listen=NOWHERE,
            voters=dict.fromkeys(self.voters, NOWHERE),
            data_dir=self.data_dir / f"node-{node_id}",
            cluster_id="twins",
            election_timeout_ms=100,
            election_backoff_max_ms=100,
            snapshot_interval_records=self.snapshot_interval_records,
        )
        node = Node(config, disk=self.disks[node_id], peers=self.network.peers(node_id))
        await node.start()
        self.nodes[node_id] = node
        self.network.connect(node)
        self.runners[node_id] = asyncio.create_task(node.run())
        return node

    async def stop(self, node_id: int) -> BaseException | None:
        """Stop a node; return what its task raised, if anything."""
        node = self.nodes.pop(node_id)
        self.network.nodes.pop(node_id, None)
        node.stop()
        results = await asyncio.wait_for(asyncio.gather(self.runners.pop(node_id), return_exceptions=True), WAIT_S)
        await node.close()
        error = results[0]
        return error if isinstance(error, BaseException) else None

    async def leader(self) -> Node:
        def elected() -> bool:
            return any(node.is_leader and node.core.high_watermark > 0 for node in self.nodes.values())

        await until(elected, "a leader with its first batch committed")
        return next(node for node in self.nodes.values() if node.is_leader)


@pytest_asyncio.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    cluster = Cluster((1, 2, 3), tmp_path)
    try:
        for node_id in cluster.voters:
            await cluster.start(node_id)
        yield cluster
    finally:
        for node_id in list(cluster.nodes):
            await cluster.stop(node_id)


async def register_broker(leader: Node, broker_id: int) -> None:
    registered = await leader.submit_admin(
        "RegisterBroker",
        controller_pb2.RegisterBrokerRequest(broker_id=broker_id, incarnation_id=bytes([broker_id + 1]) * 16),
    )
    beat = controller_pb2.BrokerHeartbeatRequest(broker_id=broker_id, broker_epoch=registered.broker_epoch)
    assert (await leader.submit_admin("BrokerHeartbeat", beat)).error_code == errors_pb2.NONE


def create(name: str) -> controller_pb2.CreateTopicsRequest:
    topic = controller_pb2.CreatableTopic(name=name, num_partitions=3, replication_factor=1)
    return controller_pb2.CreateTopicsRequest(topics=[topic], request_id=f"create-{name}")


@pytest.mark.asyncio
async def test_three_nodes_elect_a_leader_and_commit_a_create_topics_on_every_node(cluster: Cluster) -> None:
    leader = await cluster.leader()
    await register_broker(leader, 0)

    answer = await asyncio.wait_for(leader.submit_admin("CreateTopics", create("orders")), WAIT_S)

    assert [t.error_code for t in answer.topics] == [errors_pb2.NONE]
    end = leader.core.high_watermark
    await until(
        lambda: all(node.controller.image.topic_by_name("orders") is not None for node in cluster.nodes.values()),
        "every node applied the create",
    )
    for node_id, node in cluster.nodes.items():
        topic = node.controller.image.topic_by_name("orders")
        assert topic is not None and len(topic.partitions) == 3, node_id
        # What each node acknowledged as durable is on its disk.
        assert cluster.disks[node_id].end_offset >= end, node_id
    followers = [node for node in cluster.nodes.values() if node is not leader]
    assert {node.core.leader_id for node in followers} == {leader.node_id}


@pytest.mark.asyncio
async def test_a_restarted_node_recovers_its_state_from_its_disk(cluster: Cluster) -> None:
    leader = await cluster.leader()
    await register_broker(leader, 0)
    await asyncio.wait_for(leader.submit_admin("CreateTopics", create("kept")), WAIT_S)
    follower = next(node_id for node_id, node in cluster.nodes.items() if node is not leader)
    end = leader.core.high_watermark
    await until(lambda: cluster.nodes[follower].core.high_watermark >= end, "the follower applied the create")

    assert await cluster.stop(follower) is None
    restarted = await cluster.start(follower)

    await until(lambda: restarted.controller.image.topic_by_name("kept") is not None, "the replay")
    assert restarted.core.log_end_offset >= end


@pytest.mark.asyncio
async def test_a_failed_disk_write_stops_the_leader_without_answering(tmp_path: Path) -> None:
    cluster = Cluster((1,), tmp_path)
    leader = await cluster.start(1)
    try:
        assert await cluster.leader() is leader
        await register_broker(leader, 0)
        disk = cluster.disks[1]
        held = list(disk.entries)
        failure = OSError(28, "No space left on device")
        disk.failure = failure

        answer = leader.submit_admin("CreateTopics", create("lost"))
        stopped = await asyncio.wait_for(asyncio.gather(cluster.runners[1], return_exceptions=True), WAIT_S)

        # The node task stops with the disk's error; the request was never acknowledged.
        assert list(stopped) == [failure]
        assert not answer.done()
        assert disk.entries == held
    finally:
        node = cluster.nodes.pop(1)
        await node.close()
    with pytest.raises(NotControllerError):
        await answer


@pytest.mark.asyncio
async def test_a_follower_whose_disk_fails_stops_and_the_majority_keeps_committing(cluster: Cluster) -> None:
    leader = await cluster.leader()
    await register_broker(leader, 0)
    follower = next(node_id for node_id, node in cluster.nodes.items() if node is not leader)
    failure = OSError(5, "Input/output error")
    cluster.disks[follower].failure = failure

    answer = await asyncio.wait_for(leader.submit_admin("CreateTopics", create("two-of-three")), WAIT_S)

    assert [t.error_code for t in answer.topics] == [errors_pb2.NONE]
    await until(cluster.runners[follower].done, "the follower stopped")
    assert await cluster.stop(follower) is failure
    assert leader.controller.image.topic_by_name("two-of-three") is not None


@pytest.mark.asyncio
async def test_a_follower_cut_off_past_a_snapshot_catches_up_from_it(tmp_path: Path) -> None:
    cluster = Cluster((1, 2, 3), tmp_path, snapshot_interval_records=20)
    try:
        for node_id in cluster.voters:
            await cluster.start(node_id)
        leader = await cluster.leader()
        await register_broker(leader, 0)
        behind = next(node_id for node_id, node in cluster.nodes.items() if node is not leader)
        cluster.network.cut.add(behind)

        names = [f"topic-{i}" for i in range(10)]
        for name in names:
            answer = await asyncio.wait_for(leader.submit_admin("CreateTopics", create(name)), WAIT_S)
            assert [t.error_code for t in answer.topics] == [errors_pb2.NONE]
        disk = cluster.disks[leader.node_id]
        await until(lambda: disk.snapshot is not None, "the leader's snapshot")
        snapshot = disk.snapshot
        assert snapshot is not None and cluster.disks[behind].end_offset < snapshot.end_offset  # its log is gone
        cluster.network.cut.clear()

        caught_up = cluster.nodes[behind]
        await until(
            lambda: all(caught_up.controller.image.topic_by_name(name) is not None for name in names),
            "the follower installed the snapshot and replayed the rest",
        )
        assert cluster.disks[behind].installed >= 1
    finally:
        for node_id in list(cluster.nodes):
            await cluster.stop(node_id)


@pytest.mark.asyncio
async def test_a_follower_sends_the_fetch_that_reports_its_inline_flush_in_the_same_turn(cluster: Cluster) -> None:
    """A follower fsyncs a small append on its loop thread; the core learns of the flush at once,
    and the next Fetch -- which claims the new durable end -- leaves before the node task takes
    another input: no Flushed input, no second turn on the commit path."""
    leader = await cluster.leader()
    events: dict[int, list[tuple[str, object]]] = {}
    for node in cluster.nodes.values():
        if node is leader:
            continue
        log = events.setdefault(node.node_id, [])
        handle, disk, peers = node._handle, cluster.disks[node.node_id], node.peers
        flush, send = disk.append_and_flush_now, peers.send

        def spy_handle(now: int, item: Any, handle: Any = handle, log: Any = log) -> None:
            log.append(("input", type(item).__name__))
            handle(now, item)

        def spy_flush(truncate_to: int | None, batches: Any, flush: Any = flush, log: Any = log) -> int:
            durable: int = flush(truncate_to, batches)
            log.append(("flush", durable))
            return durable

        def spy_send(envelope: Any, send: Any = send, log: Any = log) -> None:
            if isinstance(envelope.message, raft_pb2.FetchRequest):
                log.append(("fetch", envelope.message.fetch_offset))
            send(envelope)

        node._handle = spy_handle  # type: ignore[method-assign]
        disk.append_and_flush_now = spy_flush  # type: ignore[method-assign]
        peers.send = spy_send  # type: ignore[method-assign]

    await register_broker(leader, 0)
    answer = await asyncio.wait_for(leader.submit_admin("CreateTopics", create("prompt")), WAIT_S)
    assert [t.error_code for t in answer.topics] == [errors_pb2.NONE]
    for node_id, log in events.items():
        flushes = [i for i, (kind, _) in enumerate(log) if kind == "flush"]
        assert flushes, f"follower {node_id} flushed nothing inline"
        for i in flushes:
            assert i + 1 < len(log) and log[i + 1] == ("fetch", log[i][1]), (node_id, log[i : i + 3])
        assert ("input", "Flushed") not in log, node_id
