"""The bare-Raft floor's leader (raftmeta/bench/raft_floor.py) batches by the node's rule: the
open batch goes to a follower that asks for data when nothing is in flight, and waits for the
commit of the batch in flight otherwise. Driven in this process, with its real disk."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from raftmeta.bench.raft_floor import Leader, open_disk
from raftmeta.records import codec
from raftmeta.v1 import raft_pb2

WAIT_S = 30.0  # a bound on waits, never a timing assertion


def fetch(replica_id: int, offset: int, max_wait_ms: int = 0) -> raft_pb2.FetchRequest:
    return raft_pb2.FetchRequest(replica_id=replica_id, fetch_offset=offset, max_wait_ms=max_wait_ms)


def offsets(response: raft_pb2.FetchResponse) -> list[tuple[int, int]]:
    return [(b.base_offset, b.next_offset) for b in codec.iter_batches(response.records)]


@pytest.mark.asyncio
async def test_the_floor_holds_the_open_batch_while_a_batch_is_in_flight(tmp_path: Path) -> None:
    disk = open_disk(tmp_path / "leader", 1, [1, 2, 3])
    leader = Leader(disk, 3)
    try:
        # Voter 2 waits at the leader: the first request goes to it at once.
        parked = asyncio.ensure_future(leader.fetch(fetch(2, 0, max_wait_ms=60_000)))
        await asyncio.sleep(0)
        first = leader.submit(b"a")
        assert offsets(await asyncio.wait_for(parked, WAIT_S)) == [(0, 1)]
        # In flight (voter 2 has not acknowledged it): new requests stay open, and voter 3's Fetch
        # gets the batch in flight alone.
        waiting = [leader.submit(b"b"), leader.submit(b"c")]
        assert offsets(await asyncio.wait_for(leader.fetch(fetch(3, 0)), WAIT_S)) == [(0, 1)]
        await asyncio.sleep(0)
        assert leader.end == 1 and len(leader.open_records) == 2
        # Voter 2 acknowledges it: it commits (with the leader's own fsync), and both requests
        # leave as one batch in the answer to that Fetch.
        answer = await asyncio.wait_for(leader.fetch(fetch(2, 1, max_wait_ms=60_000)), WAIT_S)
        assert offsets(answer) == [(1, 3)]
        await asyncio.wait_for(first, WAIT_S)
        assert not any(f.done() for f in waiting)
        assert offsets(await asyncio.wait_for(leader.fetch(fetch(2, 3)), WAIT_S)) == []  # acknowledges it
        await asyncio.wait_for(asyncio.gather(*waiting), WAIT_S)
    finally:
        await disk.close()
