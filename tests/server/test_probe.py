"""The leader probe (raftmeta/server/probe.py): which answers to a connect prove the leader's
process gone. The connects are scripted; the probe's own code decides."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from types import SimpleNamespace
from typing import Any

import pytest

from raftmeta.controller.quorum import QuorumController
from raftmeta.raft import Role
from raftmeta.server import probe as probe_module
from raftmeta.server.inbox import Input, LeaderGone
from raftmeta.server.probe import LeaderProbe

LEADER, EPOCH = 1, 7


class Accepted:
    """What a connect that a listening socket accepted hands back (the writer the probe closes)."""

    def close(self) -> None:
        return None

    async def wait_closed(self) -> None:
        return None


def scripted(outcomes: list[BaseException | None]) -> Callable[..., Coroutine[Any, Any, tuple[None, Accepted]]]:
    """An ``open_connection`` that raises, or accepts (None), as ``outcomes`` say, in order."""
    remaining = list(outcomes)

    async def open_connection(host: str, port: int) -> tuple[None, Accepted]:
        assert (host, port) == ("127.0.0.1", 9001)
        outcome = remaining.pop(0)
        if outcome is not None:
            raise outcome
        return None, Accepted()

    return open_connection


async def probe_with(
    monkeypatch: pytest.MonkeyPatch,
    outcomes: list[BaseException | None],
    addresses: dict[int, str] | None = None,
    learned: dict[int, str] | None = None,
) -> list[Input]:
    """Run one probe of the leader against scripted connects; what it put in the node's inbox.
    ``learned``: addresses the node's address book learns after the probe was made (a voter
    added later)."""
    monkeypatch.setattr(asyncio, "open_connection", scripted(outcomes))
    monkeypatch.setattr(probe_module, "LEADER_PROBE_INTERVAL_S", 0)
    core = SimpleNamespace(role=Role.FOLLOWER, leader_id=LEADER, epoch=EPOCH)
    qc = SimpleNamespace(core=core)
    # The real rule, on a core that follows LEADER in EPOCH.
    qc.leader_to_probe = lambda peer: QuorumController.leader_to_probe(qc, peer)  # type: ignore[arg-type]
    inbox: list[Input] = []
    tasks: list[asyncio.Task[None]] = []
    book = {LEADER: "127.0.0.1:9001", 2: "127.0.0.1:9002"} if addresses is None else addresses
    probe = LeaderProbe(
        qc,  # type: ignore[arg-type]
        book,
        inbox.append,
        lambda coro: tasks.append(asyncio.ensure_future(coro)),
        lambda: SimpleNamespace(info=lambda *args, **kwargs: None),
    )
    book.update(learned or {})
    probe.peer_unavailable(LEADER)
    await asyncio.wait_for(asyncio.gather(*tasks), 10)
    return inbox


@pytest.mark.asyncio
async def test_a_refused_connect_proves_the_leader_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    assert await probe_with(monkeypatch, [ConnectionRefusedError()]) == [LeaderGone(LEADER, EPOCH)]


@pytest.mark.asyncio
@pytest.mark.parametrize("first", [ConnectionResetError(), ConnectionAbortedError(), None])
async def test_a_reset_or_accepted_connect_is_probed_again(
    monkeypatch: pytest.MonkeyPatch, first: BaseException | None
) -> None:
    """A dying process may still accept, or reset a connection its closing listener had taken:
    the next connect tells (here refused)."""
    inbox = await probe_with(monkeypatch, [first, None, ConnectionRefusedError()])
    assert inbox == [LeaderGone(LEADER, EPOCH)]


@pytest.mark.asyncio
@pytest.mark.parametrize("outcome", [TimeoutError(), OSError(113, "No route to host")])
async def test_silence_or_an_unreachable_host_proves_nothing(
    monkeypatch: pytest.MonkeyPatch, outcome: BaseException
) -> None:
    """A paused or cut-off leader looks like this: only the fetch timeout may judge it."""
    assert await probe_with(monkeypatch, [outcome]) == []


@pytest.mark.asyncio
async def test_a_leader_that_keeps_accepting_is_not_declared_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    assert await probe_with(monkeypatch, [None] * probe_module.LEADER_PROBES) == []


@pytest.mark.asyncio
async def test_a_leader_added_after_start_is_probed_at_its_learned_address(monkeypatch: pytest.MonkeyPatch) -> None:
    """A voter added since the node started (KIP-853) can lead: the probe looks the leader up
    when it probes, in the mapping it was given -- the node gives it its address book, which
    learns such voters (it gave the bootstrap voters before: a KeyError in a helper task, found by
    test_voter_changes when the new voter led and a call to it failed)."""
    inbox = await probe_with(
        monkeypatch, [ConnectionRefusedError()], addresses={2: "127.0.0.1:9002"}, learned={LEADER: "127.0.0.1:9001"}
    )
    assert inbox == [LeaderGone(LEADER, EPOCH)]


@pytest.mark.asyncio
async def test_a_leader_with_no_known_address_is_not_probed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nowhere to connect: nothing is proven, the fetch timeout decides (no connect is made)."""
    assert await probe_with(monkeypatch, [], addresses={2: "127.0.0.1:9002"}) == []
