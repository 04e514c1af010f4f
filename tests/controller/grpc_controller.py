"""A real pure ``Controller`` behind a ControllerService gRPC server, committing every batch at once:
the smallest node that serves the METHODS table the way the node does (one servicer method per
entry), for end-to-end tests of the CLI, the client and the broker fleet without a quorum."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from typing import Any, cast

import grpc
import grpc.aio

from placement.rng import JavaRandom
from raftmeta.controller import METHODS, Controller, ControllerConfig
from raftmeta.v1 import controller_pb2_grpc
from tests.fakes import ServerThread


class CommittingServicer(controller_pb2_grpc.ControllerServiceServicer):
    """Each call: ``handle``, append at the next offsets, commit, answer (one thread: the loop's)."""

    def __init__(self, controller: Controller) -> None:
        self.controller = controller
        self.offset = controller.committed_offset
        self.now_ms = 0
        self.calls: list[str] = []
        ids = itertools.count(1)
        self.ids = lambda: next(ids).to_bytes(16, "big")
        self.random = JavaRandom(7)

    def serve(self, method: str, request: Any) -> Any:
        self.calls.append(method)
        handled = self.controller.handle(method, request, self.now_ms, self.ids, self.random)
        if handled.done:
            return handled.response
        if handled.records:  # every batch commits at once: the answer is true now
            self.offset += len(handled.records)
            self.controller.commit(1, self.offset)
        return handled.response


def _rpc(method: str) -> Any:
    async def call(self: CommittingServicer, request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        return self.serve(method, request)

    return call


for _name in METHODS:
    setattr(CommittingServicer, _name, _rpc(_name))


class ControllerServer(ServerThread):
    """A CommittingServicer on a grpc.aio server in its own loop thread (for sync callers)."""

    servicer: CommittingServicer

    def __init__(self, config: ControllerConfig | None = None) -> None:
        # cast: the generated base answers UNIMPLEMENTED for the methods left out; only its stub makes them abstract
        servicer = cast("Callable[[Controller], CommittingServicer]", CommittingServicer)
        super().__init__(servicer(Controller(config=config or ControllerConfig(cluster_id="test"))))

    def run(self, method: str, request: Any) -> Any:
        """Serve one call directly on the server's loop (tests setting up state)."""

        async def call() -> Any:
            return self.servicer.serve(method, request)

        return asyncio.run_coroutine_threadsafe(call(), self._loop).result()
