"""A real pure ``Controller`` behind a ControllerService gRPC server, committing every batch at once:
the smallest node that serves the METHODS table the way the node does (one servicer method per
entry), for end-to-end tests of the CLI, the client and the broker fleet without a quorum."""

from __future__ import annotations

import asyncio
import itertools
import threading
from typing import Any

import grpc
import grpc.aio

from placement.rng import JavaRandom
from raftmeta.controller import METHODS, Controller, ControllerConfig
from raftmeta.v1 import controller_pb2_grpc


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
        if handled.records:
            self.offset += len(handled.records)
            self.controller.appended(handled.key, self.offset)
        (answer,) = [c.response for c in self.controller.on_commit(self.offset) if c.key == handled.key]
        return answer


def _rpc(method: str) -> Any:
    async def call(self: CommittingServicer, request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        return self.serve(method, request)

    return call


for _name in METHODS:
    setattr(CommittingServicer, _name, _rpc(_name))


class ControllerServer:
    """A CommittingServicer on a grpc.aio server in its own loop thread (for sync callers)."""

    def __init__(self, config: ControllerConfig | None = None) -> None:
        self.servicer = CommittingServicer(Controller(config=config or ControllerConfig(cluster_id="test")))
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self.address = asyncio.run_coroutine_threadsafe(self._start(), self._loop).result()

    async def _start(self) -> str:
        self._server = grpc.aio.server()
        controller_pb2_grpc.add_ControllerServiceServicer_to_server(self.servicer, self._server)
        port = self._server.add_insecure_port("127.0.0.1:0")
        await self._server.start()
        return f"127.0.0.1:{port}"

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The server's event loop (start clients and fleets on it)."""
        return self._loop

    def run(self, method: str, request: Any) -> Any:
        """Serve one call directly on the server's loop (tests setting up state)."""

        async def call() -> Any:
            return self.servicer.serve(method, request)

        return asyncio.run_coroutine_threadsafe(call(), self._loop).result()

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._server.stop(grace=None), self._loop).result()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()
