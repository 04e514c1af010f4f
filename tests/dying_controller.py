"""A ControllerService process that dies with a write open, as a node does on a full disk.

Run as ``python -m tests.dying_controller``: it prints its address, records nothing, and when a
CreateTopics arrives it exits the way ``raftmeta node`` does when its node task fails (the error
raised out of ``asyncio.run`` with the call still open), so the client sees what a real client
sees from a dying node (CANCELLED), not what a test double chooses to send.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, cast

import grpc.aio

from raftmeta.v1 import controller_pb2_grpc
from tests.fakes import serve_controller


class DyingController(controller_pb2_grpc.ControllerServiceServicer):
    def __init__(self) -> None:
        self.write_open = asyncio.Event()

    async def CreateTopics(self, request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        self.write_open.set()
        await asyncio.Event().wait()  # the write is in flight when the process dies


async def main() -> None:
    # cast: the generated base answers UNIMPLEMENTED for the methods left out (as tests.fakes does)
    controller = cast("Callable[[], DyingController]", DyingController)()
    servers: list[grpc.aio.Server] = []
    print(await serve_controller(controller, servers), flush=True)
    await controller.write_open.wait()
    raise OSError(28, "No space left on device")


if __name__ == "__main__":
    asyncio.run(main())
