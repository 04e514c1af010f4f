"""The leader's open batch, deterministically: a real Node (storage in a temp dir, consensus core,
controller) in this process, whose two other voters are played by the test through the node's own
inputs -- their Fetch requests go in as RaftService requests would, the answers to its Vote
requests as its peers would deliver them.

Requests that are queued together are handled in one turn of the node task and leave as ONE log
batch; each still gets its own answer (a duplicate name, an invalid request, a request id sent
twice), and a follower's Fetch carries the batch."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from raftmeta.controller import quorum as quorum_module
from raftmeta.raft import Envelope
from raftmeta.records import codec
from raftmeta.server.config import NodeConfig
from raftmeta.server.inbox import RaftInput
from raftmeta.server.node import Node
from raftmeta.v1 import controller_pb2, errors_pb2, raft_pb2, records_pb2

CLUSTER = "batching"
WAIT_S = 30.0  # a bound on waits for the node task, never a timing assertion
POLL_S = 0.005


class FakePeers:
    """Stands in for the gRPC peers: keeps what the node sends to the other voters."""

    def __init__(self) -> None:
        self.sent: list[Envelope] = []

    def send(self, envelope: Envelope) -> None:
        self.sent.append(envelope)

    def learn(self, addresses: dict[int, str]) -> None:
        del addresses

    async def close(self) -> None:
        return None


class Harness:
    """The node, and voter 2 as a follower that fetches when the test says so."""

    def __init__(self, node: Node, peers: FakePeers) -> None:
        self.node = node
        self.peers = peers
        self.end = 0  # voter 2's log end: everything below it is "durable" there
        self.last_epoch = 0
        self.read_barrier = 0  # the leader's read barrier in its last Fetch answer, echoed back
        self.batches: list[codec.Batch] = []

    async def until(self, predicate: Any, what: str) -> None:
        """Let the node task run until ``predicate()`` holds (a bound, not a timing assertion)."""
        for _ in range(int(WAIT_S / POLL_S)):
            if predicate():
                return
            await asyncio.sleep(POLL_S)
        raise AssertionError(f"{what} did not happen within {WAIT_S} s")

    async def elect(self) -> None:
        """Grant node 1's pre-votes and votes as voter 2 until it leads. Every request is answered,
        not only the first: on a loaded machine the 20 ms election timer may start a new round
        before an answer arrives, and an answer to the older round would leave the node waiting."""
        for _ in range(int(WAIT_S / POLL_S)):
            if self.node.is_leader:
                break
            requests = [e for e in self.peers.sent if self._vote(e, True) or self._vote(e, False)]
            self.peers.sent.clear()
            for envelope in requests:
                request = envelope.message
                assert isinstance(request, raft_pb2.VoteRequest)
                epoch = request.candidate_epoch - 1 if request.pre_vote else request.candidate_epoch
                answer = raft_pb2.VoteResponse(
                    leader_id=-1, leader_epoch=epoch, vote_granted=True, pre_vote=request.pre_vote, voter_id=2
                )
                self.node.inbox.put_nowait(RaftInput(Envelope(2, 1, envelope.correlation_id, answer), None))
            await asyncio.sleep(POLL_S)
        else:
            raise AssertionError(f"leadership did not happen within {WAIT_S} s")
        await self.commit()  # the LeaderChangeRecord: the controller answers from now on

    @staticmethod
    def _vote(envelope: Envelope, pre_vote: bool) -> bool:
        message = envelope.message
        return isinstance(message, raft_pb2.VoteRequest) and message.pre_vote == pre_vote and envelope.destination == 2

    def fetch(self, max_wait_ms: int = 0) -> asyncio.Future[Any]:
        request = raft_pb2.FetchRequest(
            cluster_id=CLUSTER,
            replica_id=2,
            replica_epoch=self.node.core.epoch,
            fetch_offset=self.end,
            last_fetched_epoch=self.last_epoch,
            max_wait_ms=max_wait_ms,
            max_bytes=1 << 20,
            read_barrier=self.read_barrier,
        )
        return self.node.submit_raft(2, request)

    def fetch_as(self, replica_id: int, offset: int, last_epoch: int) -> asyncio.Future[Any]:
        """A Fetch from another voter that holds the log up to ``offset`` (its state is not kept)."""
        request = raft_pb2.FetchRequest(
            cluster_id=CLUSTER,
            replica_id=replica_id,
            replica_epoch=self.node.core.epoch,
            fetch_offset=offset,
            last_fetched_epoch=last_epoch,
            max_wait_ms=0,
            max_bytes=1 << 20,
        )
        return self.node.submit_raft(replica_id, request)

    def last_epoch_before(self, offset: int) -> int:
        """The epoch of the last batch voter 2 took below ``offset``."""
        return max((b.epoch for b in self.batches if b.next_offset <= offset), default=0)

    def take(self, response: raft_pb2.FetchResponse) -> list[codec.Batch]:
        """Store what a Fetch answer carried (voter 2's log grows by it)."""
        assert response.error_code == errors_pb2.NONE
        self.read_barrier = response.read_barrier
        got = list(codec.iter_batches(response.records))
        for batch in got:
            assert batch.base_offset == self.end
            self.end, self.last_epoch = batch.next_offset, batch.epoch
        self.batches.extend(got)
        return got

    async def commit(self) -> None:
        """Fetch until voter 2 has the whole log and has told the leader so (its HW passes it)."""

        async def caught_up() -> None:
            while True:
                self.take(await self.fetch())
                if self.node.core.high_watermark >= self.end == self.node.core.log_end_offset:
                    return

        await asyncio.wait_for(caught_up(), WAIT_S)

    async def call(self, method: str, request: Any) -> Any:
        """Submit, then fetch as voter 2 until answered: a write with records is answered once
        its batch commits; one answered from the image alone (a retry's stored answer, a refusal)
        once a Fetch echoes the read barrier of its read-index round."""
        future = self.node.submit_admin(method, request)
        await self.commit()

        async def answered() -> None:
            while not future.done():
                self.take(await self.fetch())

        await asyncio.wait_for(answered(), WAIT_S)
        return future.result()


@pytest_asyncio.fixture
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    config = NodeConfig(
        node_id=1,
        listen="127.0.0.1:0",
        voters={1: "127.0.0.1:1", 2: "127.0.0.1:1", 3: "127.0.0.1:1"},
        data_dir=tmp_path / "node-1",
        cluster_id=CLUSTER,
        election_timeout_ms=20,
        election_backoff_max_ms=20,
    )
    node = Node(config)
    await node.start()
    await node.peers.close()
    peers = FakePeers()
    node.peers = peers
    runner = asyncio.create_task(node.run())
    h = Harness(node, peers)
    try:
        await h.elect()
        registered = await h.call(
            "RegisterBroker", controller_pb2.RegisterBrokerRequest(broker_id=0, incarnation_id=b"\x01" * 16)
        )
        beat = controller_pb2.BrokerHeartbeatRequest(broker_id=0, broker_epoch=registered.broker_epoch)
        assert (await h.call("BrokerHeartbeat", beat)).error_code == errors_pb2.NONE
        yield h
    finally:
        node.stop()
        await asyncio.wait_for(runner, WAIT_S)
        await node.close()


def create(name: str, request_id: str) -> controller_pb2.CreateTopicsRequest:
    topic = controller_pb2.CreatableTopic(name=name, num_partitions=2, replication_factor=1)
    return controller_pb2.CreateTopicsRequest(topics=[topic], request_id=request_id)


def records_of(batch: codec.Batch) -> list[records_pb2.MetadataRecord]:
    return [records_pb2.MetadataRecord.FromString(r) for r in batch.records()]


@pytest.mark.asyncio
async def test_requests_queued_together_leave_as_one_batch_each_with_its_own_answer(harness: Harness) -> None:
    node = harness.node
    # Queued with no await in between: the node task handles all of them in one turn.
    futures = [
        node.submit_admin("CreateTopics", create("a", "r1")),
        node.submit_admin("CreateTopics", create("a", "r2")),  # the same name: sees "a" pending
        node.submit_admin("CreateTopics", create("bad/name", "r3")),  # invalid: fails alone
        node.submit_admin("CreateTopics", create("b", "r4")),
        node.submit_admin("CreateTopics", create("b", "r4")),  # the same request id again
    ]
    (batch,) = harness.take(await asyncio.wait_for(harness.fetch(), WAIT_S))
    records = records_of(batch)
    assert [r.WhichOneof("record") for r in records] == ["topic", "partition", "partition", "request"] * 2
    assert [r.request.request_id for r in records if r.WhichOneof("record") == "request"] == ["r1", "r4"]
    assert not any(f.done() for f in futures), "nothing is answered before the batch commits"
    await harness.commit()
    answers = [(await asyncio.wait_for(f, WAIT_S)).topics[0] for f in futures]
    assert [a.error_code for a in answers] == [
        errors_pb2.NONE,
        errors_pb2.TOPIC_ALREADY_EXISTS,
        errors_pb2.INVALID_TOPIC_EXCEPTION,
        errors_pb2.NONE,
        errors_pb2.NONE,
    ]
    assert answers[4].topic_id == answers[3].topic_id
    # Retried in a later batch, a request id gets its original answer and writes nothing.
    end = node.core.log_end_offset
    again = await harness.call("CreateTopics", create("a", "r1"))
    assert again.topics[0].topic_id == answers[0].topic_id
    assert node.core.log_end_offset == end


@pytest.mark.asyncio
async def test_a_waiting_fetch_takes_the_batch_at_once(harness: Harness) -> None:
    """With a follower's Fetch parked at the leader (it is caught up), a request is proposed in the
    turn that handles it: the parked Fetch is answered with it, nothing waits for more requests."""
    node = harness.node
    harness.take(await asyncio.wait_for(harness.fetch(), WAIT_S))  # learn the latest high watermark
    parked = harness.fetch(max_wait_ms=60_000)
    await harness.until(lambda: node.core.has_parked_fetch, "the caught-up Fetch waiting at the leader")
    created = node.submit_admin("CreateTopics", create("c", "r5"))
    (batch,) = harness.take(await asyncio.wait_for(parked, WAIT_S))
    assert [r.WhichOneof("record") for r in records_of(batch)] == ["topic", "partition", "partition", "request"]
    await harness.commit()
    assert (await asyncio.wait_for(created, WAIT_S)).topics[0].error_code == errors_pb2.NONE


@pytest.mark.asyncio
async def test_requests_wait_for_the_batch_in_flight_then_leave_together(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While a batch is appended and not committed, a follower's Fetch does not close the open
    batch: the requests that arrive meanwhile leave as one batch once the batch in flight commits
    (one Fetch round per commit under load, instead of one per follower's Fetch)."""
    # The open batch's 5 ms bound would close it on a slow machine: out of the way here.
    monkeypatch.setattr(quorum_module, "LINGER_MS", 600_000)
    node = harness.node
    harness.take(await asyncio.wait_for(harness.fetch(), WAIT_S))  # caught up, latest high watermark
    before_a = harness.end
    first = node.submit_admin("CreateTopics", create("in-flight", "r6"))
    (in_flight,) = harness.take(await asyncio.wait_for(harness.fetch(), WAIT_S))
    assert node.core.high_watermark <= in_flight.base_offset, "voter 2 has not acknowledged it yet"
    waiting = [
        node.submit_admin("CreateTopics", create("next-1", "r7")),
        node.submit_admin("CreateTopics", create("next-2", "r8")),
    ]
    # Voter 3 asks for data from where the batch in flight starts: it gets that batch, and the
    # two new requests stay open (the old rule proposed them as a batch of their own here).
    answer = await asyncio.wait_for(harness.fetch_as(3, before_a, harness.last_epoch_before(before_a)), WAIT_S)
    assert [b.base_offset for b in codec.iter_batches(answer.records)] == [in_flight.base_offset]
    assert node.core.log_end_offset == in_flight.next_offset, "the open batch waits for the commit"
    # Voter 2 acknowledges the batch in flight: it commits, and its next answer carries both
    # requests as one batch.
    (together,) = harness.take(await asyncio.wait_for(harness.fetch(max_wait_ms=60_000), WAIT_S))
    names = [r.topic.name for r in records_of(together) if r.WhichOneof("record") == "topic"]
    assert names == ["next-1", "next-2"]
    assert (await asyncio.wait_for(first, WAIT_S)).topics[0].error_code == errors_pb2.NONE
    await harness.commit()
    for future in waiting:
        assert (await asyncio.wait_for(future, WAIT_S)).topics[0].error_code == errors_pb2.NONE
