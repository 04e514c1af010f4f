"""Run one node: storage, the node task, and a grpc.aio server with RaftService,
ControllerService, the standard health service and server reflection."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import grpc
import grpc.aio
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer
from grpc_reflection.v1alpha import reflection

from raftmeta.limits import grpc_channel_options
from raftmeta.logs import get_logger
from raftmeta.server.config import NodeConfig
from raftmeta.server.node import Node
from raftmeta.server.services import ControllerServicer, RaftServicer
from raftmeta.v1 import controller_pb2, controller_pb2_grpc, raft_pb2, raft_pb2_grpc

T = TypeVar("T")
# ``asyncio`` forces the standard event loop (for A/B measurements); anything else uses uvloop
# when it is importable.
EVENT_LOOP_ENV = "RAFTMETA_EVENT_LOOP"


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop if installed and not disabled: 10-30% less CPU per gRPC message on this kind
    of machine (docs/performance.md); None means asyncio's default loop."""
    if os.environ.get(EVENT_LOOP_ENV, "") == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def event_loop_name() -> str:
    return "asyncio" if loop_factory() is None else "uvloop"


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` on the preferred event loop (see :func:`loop_factory`)."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(main)


SERVICE_NAMES = (
    raft_pb2.DESCRIPTOR.services_by_name["RaftService"].full_name,
    controller_pb2.DESCRIPTOR.services_by_name["ControllerService"].full_name,
    health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
    reflection.SERVICE_NAME,
)


async def serve(config: NodeConfig, *, ready: asyncio.Event | None = None) -> None:
    """Run the node until SIGTERM/SIGINT (or cancellation); then resign and stop cleanly."""
    log = get_logger("app", node_id=config.node_id)
    node = Node(config)
    await node.start()
    server = grpc.aio.server(options=grpc_channel_options())
    raft_pb2_grpc.add_RaftServiceServicer_to_server(RaftServicer(node), server)
    controller_servicer = ControllerServicer(node)
    controller_pb2_grpc.add_ControllerServiceServicer_to_server(controller_servicer, server)
    health = HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    reflection.enable_server_reflection(SERVICE_NAMES, server)
    port = server.add_insecure_port(config.listen)
    if port == 0:
        raise OSError(f"cannot listen on {config.listen}")
    await server.start()
    for name in ("", *SERVICE_NAMES[:2]):
        await health.set(name, health_pb2.HealthCheckResponse.SERVING)
    log.info("listening", address=config.listen, voters=config.voters, event_loop=event_loop_name())
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    runner = asyncio.create_task(node.run())
    if ready is not None:
        ready.set()
    stopper = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait({runner, stopper}, return_when=asyncio.FIRST_COMPLETED)
    if runner in done:
        runner.result()  # the node task died: raise its error
    log.info("stopping")
    await health.enter_graceful_shutdown()
    node.stop()
    await asyncio.gather(runner, return_exceptions=True)
    await server.stop(grace=1.0)
    await controller_servicer.close()
    await node.close()
    stopper.cancel()
