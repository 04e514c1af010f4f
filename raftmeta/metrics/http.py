"""The exposition endpoint: prometheus_client's own HTTP server (text format, gzip, ``/metrics``
and every other path) on a daemon thread, serving one node's registry."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server

from raftmeta.api.addresses import parse_host_port


@dataclass
class MetricsServer:
    server: WSGIServer
    thread: threading.Thread

    @property
    def port(self) -> int:
        return int(self.server.server_port)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


def serve_metrics(address: str, registry: CollectorRegistry) -> MetricsServer:
    """Serve ``registry`` on ``address`` until :meth:`MetricsServer.close`; OSError if the address
    cannot be bound."""
    host, port = parse_host_port(address, "--metrics-listen", any_port=True)
    server, thread = start_http_server(port, addr=host, registry=registry)
    return MetricsServer(server, thread)
