"""Run one node: storage, the node task, and a grpc.aio server with RaftService,
ControllerService, the standard health service and server reflection.

With ``client_listen`` a second server on that address serves clients (ControllerService,
health, reflection) with its own TLS settings; the raft listener keeps ControllerService too,
because followers forward admin calls to the leader's raft listener as peer traffic.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable, Coroutine
from importlib import import_module
from typing import Any, TypeVar

import grpc
import grpc.aio
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer
from grpc_reflection.v1alpha import reflection

from raftmeta.api.limits import grpc_server_options
from raftmeta.logs import get_logger, quiet_undelivered_replies
from raftmeta.metrics.grpc import instrument
from raftmeta.server.config import NodeConfig
from raftmeta.server.node import Node
from raftmeta.server.services import ControllerServicer, RaftServicer, add_controller_service
from raftmeta.tls import TlsConfig, add_port, material, node_common_name
from raftmeta.v1 import controller_pb2, raft_pb2, raft_pb2_grpc

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


KAFKA_SERVER_MODULE = "raftmeta.kafka.server"
RAFT_SERVICE = raft_pb2.DESCRIPTOR.services_by_name["RaftService"].full_name
CONTROLLER_SERVICE = controller_pb2.DESCRIPTOR.services_by_name["ControllerService"].full_name
SERVICE_NAMES = (
    RAFT_SERVICE,
    CONTROLLER_SERVICE,
    health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
    reflection.SERVICE_NAME,
)


def tls_mode(tls: TlsConfig | None) -> str:
    """For logs: ``plaintext``, ``tls`` (server certificate only) or ``mutual-tls``."""
    if tls is None:
        return "plaintext"
    return "mutual-tls" if tls.mutual else "tls"


async def _listener(
    address: str, tls: TlsConfig | None, services: tuple[str, ...], controller: ControllerServicer, node: Node
) -> tuple[grpc.aio.Server, HealthServicer]:
    """A started server on ``address`` with ``services`` (RaftService only if listed)."""
    server = grpc.aio.server(options=grpc_server_options())
    grpc_metrics = node.metrics.grpc  # calls, errors and latency per method (docs/metrics.md)
    if RAFT_SERVICE in services:
        raft = instrument(RaftServicer(node), raft_pb2.DESCRIPTOR.services_by_name["RaftService"], grpc_metrics)
        raft_pb2_grpc.add_RaftServiceServicer_to_server(raft, server)
    controller_service = controller_pb2.DESCRIPTOR.services_by_name["ControllerService"]
    add_controller_service(instrument(controller, controller_service, grpc_metrics), server)
    health = HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    reflection.enable_server_reflection((*services, *SERVICE_NAMES[2:]), server)
    try:
        port = add_port(server, address, material(tls))
    except RuntimeError as exc:  # newer grpc raises instead of returning 0
        raise OSError(f"cannot listen on {address}: {exc}") from exc
    if port == 0:
        raise OSError(f"cannot listen on {address}")
    await server.start()
    for name in ("", *services):
        await health.set(name, health_pb2.HealthCheckResponse.SERVING)
    return server, health


async def serve(config: NodeConfig, *, ready: asyncio.Event | None = None) -> None:
    """Run the node until SIGTERM/SIGINT (or cancellation); then resign and stop cleanly."""
    log = get_logger("app", node_id=config.node_id)
    # Read the TLS files before anything else: a bad file stops the node before it touches its log.
    raft_tls = material(config.tls)
    material(config.client_tls)
    expected = node_common_name(config.node_id)
    if raft_tls is not None and raft_tls.common_name != expected:
        log.warning(
            "the certificate's common name is not this node's: peers that check identities will refuse it",
            common_name=raft_tls.common_name,
            expected=expected,
        )
    quiet_undelivered_replies()
    node = Node(config)
    metrics_server = None
    if config.metrics_listen is not None:  # bound first: a taken port stops the node before its log is opened
        from raftmeta.metrics.http import serve_metrics

        metrics_server = serve_metrics(config.metrics_listen, node.metrics.registry)
        log.info("serving metrics", address=config.metrics_listen, port=metrics_server.port)
    await node.start()
    controller_servicer = ControllerServicer(node)
    listeners = [await _listener(config.listen, config.tls, SERVICE_NAMES[:2], controller_servicer, node)]
    log.info(
        "listening",
        address=config.listen,
        voters=config.voters,
        event_loop=event_loop_name(),
        transport=tls_mode(config.tls),
    )
    # The node takes part in the quorum from here on: the listeners for clients below (the Kafka
    # one imports kio's schemas, ~0.4 s on a loaded machine) must not delay a restarted voter's
    # first Fetch. A listener that cannot start still ends serve() with its error.
    runner = asyncio.create_task(node.run())
    try:
        if config.client_listen is not None:
            listeners.append(
                await _listener(
                    config.client_listen, config.client_tls, (CONTROLLER_SERVICE,), controller_servicer, node
                )
            )
            log.info("listening for clients", address=config.client_listen, transport=tls_mode(config.client_tls))
        # The Kafka listener's modules (kio's generated schemas) take 0.4-0.7 s to import on a
        # loaded machine: imported in a thread, so the node's loop runs meanwhile (a restarted
        # voter sends its first Fetch, or waits out its election timeout, instead of waiting).
        kafka_server: Any = await asyncio.to_thread(import_module, KAFKA_SERVER_MODULE)
        kafka = await kafka_server.start_kafka_listener(
            config, controller_servicer, leads=lambda: node.is_leader, raft=node
        )
    except BaseException:
        node.stop()  # the node already runs: stop it before the error ends serve()
        await asyncio.gather(runner, return_exceptions=True)
        raise
    if kafka is not None:
        log.info("listening for Kafka clients", address=config.kafka_listener)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if ready is not None:
        ready.set()
    stopper = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait({runner, stopper}, return_when=asyncio.FIRST_COMPLETED)
    if runner in done:
        runner.result()  # the node task died: raise its error
    log.info("stopping")
    for _, health in listeners:
        await health.enter_graceful_shutdown()
    node.stop()
    await asyncio.gather(runner, return_exceptions=True)
    await asyncio.gather(*(server.stop(grace=1.0) for server, _ in listeners))
    if kafka is not None:
        await kafka.close()
    await controller_servicer.close()
    await node.close()
    if metrics_server is not None:
        metrics_server.close()
    stopper.cancel()
