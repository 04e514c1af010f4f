"""A scripted ControllerService on loopback, for testing clients and CLI commands without a quorum.

It answers with the responses a test sets and records every request, so a test checks what a
command sends and how it shows the answer. It has no controller logic of its own.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any, cast

import grpc
import grpc.aio

from raftmeta.v1 import controller_pb2, controller_pb2_grpc


async def serve_controller(
    servicer: controller_pb2_grpc.ControllerServiceServicer, servers: list[grpc.aio.Server]
) -> str:
    """Serve ``servicer`` as the ControllerService on a loopback port of a new grpc.aio server
    (appended to ``servers``, for the caller to stop); returns its address."""
    server = grpc.aio.server()
    controller_pb2_grpc.add_ControllerServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    servers.append(server)
    return f"127.0.0.1:{port}"


class ScriptedController(controller_pb2_grpc.ControllerServiceServicer):
    def __init__(self) -> None:
        self.requests: list[tuple[str, Any]] = []
        self.responses: dict[str, Any] = {}

    async def _answer(self, method: str, request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        self.requests.append((method, request))
        if method not in self.responses:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, f"no scripted answer for {method}")
        return self.responses[method]

    async def CreateTopics(self, request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        return await self._answer("CreateTopics", request, context)

    async def CreatePartitions(self, request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        return await self._answer("CreatePartitions", request, context)

    async def DeleteTopics(self, request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        return await self._answer("DeleteTopics", request, context)

    async def DescribeTopics(self, request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        return await self._answer("DescribeTopics", request, context)

    async def DescribeCluster(self, request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        return await self._answer("DescribeCluster", request, context)

    async def DescribeQuorum(self, request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        return await self._answer("DescribeQuorum", request, context)

    async def AddRaftVoter(self, request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        return await self._answer("AddRaftVoter", request, context)

    async def RemoveRaftVoter(self, request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        return await self._answer("RemoveRaftVoter", request, context)


class ServerThread:
    """Runs a grpc.aio server with a ControllerService (a ScriptedController unless given) on its
    own loop thread, for tests whose callers are synchronous."""

    def __init__(self, servicer: controller_pb2_grpc.ControllerServiceServicer | None = None) -> None:
        # cast: the generated base answers UNIMPLEMENTED for the methods left out; only its stub makes them abstract
        self.controller = cast("Callable[[], ScriptedController]", ScriptedController)()
        self.servicer = servicer or self.controller
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

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._server.stop(grace=None), self._loop).result()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()


def sample_describe() -> controller_pb2.DescribeTopicsResponse:
    return controller_pb2.DescribeTopicsResponse(
        topics=[
            controller_pb2.TopicDescription(
                name="orders",
                topic_id=bytes(range(16)),
                configs={"cleanup.policy": "compact"},
                partitions=[
                    controller_pb2.PartitionDescription(
                        partition=0, leader=1, leader_epoch=2, replicas=[1, 2, 3], isr=[1, 2, 3]
                    ),
                    controller_pb2.PartitionDescription(
                        partition=1, leader=-1, leader_epoch=4, replicas=[2, 3, 1], isr=[2]
                    ),
                ],
            )
        ]
    )
