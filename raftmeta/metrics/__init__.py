"""Prometheus metrics of a node (docs/metrics.md): the catalogue of names, the node's collectors,
the gRPC interceptor, the exposition server and a scraper for ``quorum top``.

A driver-side package: the pure cores (raftmeta/raft, raftmeta/controller, placement) never
import it; the node task feeds it (raftmeta/server/node.py).
"""

from raftmeta.metrics.catalog import ALL, BY_NAME, MetricSpec
from raftmeta.metrics.node import NodeMetrics, NodeStats, RaftView

__all__ = ["ALL", "BY_NAME", "MetricSpec", "NodeMetrics", "NodeStats", "RaftView"]
