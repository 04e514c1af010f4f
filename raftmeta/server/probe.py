"""Is our leader's process gone? A follower whose call to its leader failed probes the leader's
port: a refused TCP connect means nothing listens on its address any more (SIGKILL, crash), which
is certain, unlike silence (a paused or slow leader), which only the fetch timeout can judge. A
proven death becomes a :class:`~raftmeta.server.inbox.LeaderGone` input, which the node hands to
``QuorumController.leader_gone``: it starts the election at once instead of waiting out the fetch
timeout. The simulated plane (raftmeta/sim/plane.py) takes the same path, proving the death by its
own means."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from raftmeta.api.addresses import parse_host_port
from raftmeta.controller.quorum import QuorumController
from raftmeta.server.inbox import Input, LeaderGone

# A refused connect proves the leader gone; no answer (timeout) proves nothing; an accepted or a
# reset one is retried a few times (a dying process may still accept, or reset what it accepted).
LEADER_PROBE_TIMEOUT_S = 0.2
LEADER_PROBES = 10
LEADER_PROBE_INTERVAL_S = 0.02


class LeaderProbe:
    def __init__(
        self,
        qc: QuorumController,
        addresses: Mapping[int, str],
        put: Callable[[Input], None],
        start: Callable[[Coroutine[Any, Any, None]], None],
        log: Callable[[], Any],
    ) -> None:
        self._qc = qc
        self._addresses = addresses  # the node's address book: it learns voters added later
        self._put = put  # the node's inbox
        self._start = start  # runs a helper task that the node cancels when it stops
        self._log = log  # the node's logger as it is bound now (epoch, cluster)
        self._probing: set[int] = set()

    def peer_unavailable(self, peer: int) -> None:
        """A call to ``peer`` failed (the connection broke or was refused, or it timed out):
        probe it if it is our leader (QuorumController.leader_to_probe, the simulator's rule too)."""
        epoch = self._qc.leader_to_probe(peer)
        if epoch is None or peer in self._probing:
            return
        address = self._addresses.get(peer)
        if address is None:
            return  # nowhere to probe (no address known yet): the fetch timeout decides
        self._probing.add(peer)
        self._start(self._probe(peer, epoch, address))

    async def _probe(self, peer: int, epoch: int, address: str) -> None:
        host, port = parse_host_port(address, f"peer {peer}'s address")
        seen: list[str] = []  # each connect's outcome, for the log line
        try:
            for _ in range(LEADER_PROBES):
                try:
                    _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), LEADER_PROBE_TIMEOUT_S)
                except ConnectionRefusedError:
                    seen.append("refused")
                    self._put(LeaderGone(peer, epoch))
                    return
                except (ConnectionResetError, ConnectionAbortedError) as exc:
                    # Reset while connecting: the kernel had completed the handshake for a listening
                    # socket that is closing now -- a process being torn down. Its next connect is
                    # refused: look again shortly, as for an accepted one. Giving up here would
                    # leave this follower defending the dead leader against the successor's
                    # pre-vote until its fetch timeout.
                    seen.append(type(exc).__name__)
                    await asyncio.sleep(LEADER_PROBE_INTERVAL_S)
                    continue
                except (OSError, TimeoutError) as exc:
                    seen.append(type(exc).__name__)
                    return  # unreachable or slow, not provably gone: the fetch timeout decides
                # Accepted -- possibly by the kernel for a process that is still being torn down
                # (its connections reset before its listening socket closes): look again shortly.
                seen.append("accepted")
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()
                await asyncio.sleep(LEADER_PROBE_INTERVAL_S)
        finally:
            self._probing.discard(peer)
            outcome = seen[-1] if seen else "cancelled"
            self._log().info("probed the leader after a failed call", leader_id=peer, outcome=outcome, connects=seen)
